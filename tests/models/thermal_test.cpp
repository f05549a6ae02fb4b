// The die's temperature (models/thermal) and what follows it: the retention law's anchor at
// 105 C, the RC model's steady state and its energy balance, temperature-aware refresh, and the
// thermal section's input errors. docs/models/thermal.md.
#include "models/memory/edram/retention.h"
#include "models/thermal/thermal.h"
#include "platform/trace/timeline.h"
#include "platform/stats/stats.h"
#include "tests/support/dram_bench.h"
#include "tests/support/llm_run.h"
#include "vp/platform.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>

using namespace kelle;

namespace {

std::string scenarios() {
  const char* s = std::getenv("KELLE_VP_SCENARIOS");
  return s ? s : "scenarios";
}

// results.json without what differs from run to run or from checkout to checkout (wall times,
// file names, the effective configuration's echo of new keys' defaults).
nlohmann::json strip(const nlohmann::json& x) {
  if (x.is_object()) {
    nlohmann::json o = nlohmann::json::object();
    for (auto it = x.begin(); it != x.end(); ++it) {
      const std::string& k = it.key();
      if (k.find("wall") != std::string::npos || k == "from" || k == "file" || k == "config" || k == "files") continue;
      o[k] = strip(it.value());
    }
    return o;
  }
  if (x.is_array()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& v : x) a.push_back(strip(v));
    return a;
  }
  return x;
}

nlohmann::json run_file(const std::string& file, const std::vector<std::string>& overrides) {
  return test::results_in_child([=] { return config::load(file, overrides); });
}

const std::vector<std::string> default_short = {"workload.context_len=16", "workload.decode_len=2"};
const std::vector<std::string> functional_faults = {
    "policy.kv=aep", "policy.refresh=2drp", "policy.kv_budget=12", "policy.sink_tokens=2", "policy.recent_window=4",
    "policy.lst_lsb_us=200000", "policy.hst_lsb_us=200000", "functional.faults.mode=retention",
    "functional.faults.exposure=interval"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A module that dissipates a constant power (its one energy part: P x t).
struct heater : sc_core::sc_module {
  stat_group stats;
  double watts;
  heater(sc_core::sc_module_name n, double p) : sc_core::sc_module(n), watts(p) {
    stats.energy(energy_kind::compute, "heat", "P x t", [this] { return watts * now_s(); });
  }
};

}  // namespace

TEST_CASE("retention law: the anchor is the calibrated distribution bit for bit and cooler cells retain longer",
          "[thermal]") {
  retention_model::temperature_law law;
  law.reference_C = 105;
  law.activation_eV = 0.6;
  const retention_model plain(0.333, 0.645);
  const retention_model hot(0.333, 0.645, law, retention_model::vrt());
  for (double t : {45e-6, 0.36e-3, 1.44e-3, 5.4e-3, 7.2e-3, 1.0})
    CHECK(hot.failure_probability_at(t, 105) == plain.failure_probability(t));  // exactly
  CHECK(hot.retention_factor(105) == 1.0);
  // Arrhenius by hand: 0.6 eV from 378.15 K to 318.15 K.
  const double f45 = std::exp(0.6 / 8.617333262e-5 * (1 / 318.15 - 1 / 378.15));
  CHECK(hot.retention_factor(45) == Approx(f45).epsilon(1e-12));
  CHECK(f45 == Approx(32.2).epsilon(0.01));
  // A cell at 45 C fails after f45 x t as often as at 105 C after t.
  CHECK(hot.failure_probability_at(f45 * 1.44e-3, 45) == Approx(plain.failure_probability(1.44e-3)).epsilon(1e-9));
  CHECK(hot.failure_probability_at(1.44e-3, 45) < plain.failure_probability(1.44e-3) / 100);
  CHECK(hot.failure_probability_at(1.44e-3, 115) > plain.failure_probability(1.44e-3));
  // VRT: a share of the cells spends part of its time at a tenth of its retention.
  retention_model::vrt v;
  v.fraction = 0.01;
  v.low_ratio = 0.1;
  v.low_share = 0.5;
  const retention_model vrt(0.333, 0.645, law, v);
  const double p = plain.failure_probability(1.44e-3), p10 = plain.failure_probability(14.4e-3);
  CHECK(vrt.failure_probability_at(1.44e-3, 105) == Approx(0.995 * p + 0.005 * p10).epsilon(1e-12));
}

TEST_CASE("thermal rc: a constant power settles at ambient + R x P, and the heat in is the energy reported",
          "[thermal]") {
  // In a child process, as every case that simulates (one SystemC kernel per process).
  const std::string out = test::in_child_process([] {
    heater h("heater", 2.0);
    auto cfg = config::from_string(
        "thermal: {model: rc, ambient_C: 25, resistance_K_per_W: 10, time_constant_s: 0.5, step_us: 1000}\n"
        "tech: {temperature_C: 105}\n",
        "thermal.yaml");
    thermal_model m(cfg.root().child("thermal"), cfg.root().child("tech"));
    double at_tau = 0;
    for (int ms = 1; ms <= 5000; ++ms) {
      sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_MS));
      const double T = m.true_C();
      if (ms == 500) at_tau = T;
    }
    nlohmann::json j = {{"at_tau", at_tau}, {"final", m.true_C()}, {"results", m.results()}};
    return j.dump();
  });
  REQUIRE(out.rfind("error: ", 0) != 0);
  const nlohmann::json j = nlohmann::json::parse(out);
  const double at_tau = j["at_tau"].get<double>(), final_C = j["final"].get<double>();
  // A power held over each update: the exact first-order response.
  CHECK(at_tau == Approx(25 + 20 * (1 - std::exp(-1.0))).epsilon(1e-9));
  CHECK(final_C == Approx(45 - 20 * std::exp(-10.0)).epsilon(1e-9));  // 10 time constants
  CHECK(final_C == Approx(45).epsilon(1e-4));                        // ambient + R x P
  const nlohmann::json& r = j["results"];
  CHECK(r["heat_J"].get<double>() == Approx(2.0 * 5.0).epsilon(1e-12));
  CHECK(r["max_C"].get<double>() <= 45.0);
  CHECK_FALSE(r["extrapolated"].get<bool>());
}

TEST_CASE("thermal rc on a run: the die heats from ambient and the heat in equals the run's energy", "[thermal]") {
  const nlohmann::json r = test::llm_run({"workload.model=llama2-7b", "workload.context_len=16",
                                          "workload.decode_len=2", "thermal.model=rc", "thermal.ambient_C=45",
                                          "thermal.resistance_K_per_W=10", "thermal.time_constant_s=1"});
  const double heat = r["thermal"]["heat_J"].get<double>(), total = r["energy_J"]["total"].get<double>();
  CHECK(heat == Approx(total).epsilon(1e-12));
  CHECK(r["thermal"]["max_C"].get<double>() > 45.0);
  // Not beyond the steady state of the run's highest average power.
  CHECK(r["thermal"]["max_C"].get<double>() < 45 + 10 * total / r["sim_time_s"].get<double>() * 10);
}

TEST_CASE("anchor 105 C: the default scenario and a functional run with retention faults give today's figures",
          "[thermal][anchor]") {
  const std::string data = scenarios() + "/../tests/data/anchor_105C/";
  nlohmann::json golden;
  std::ifstream(data + "default.json") >> golden;
  const nlohmann::json now = strip(run_file(scenarios() + "/default.yaml", default_short));
  CHECK(now == golden);
  // The same at an explicit 105 C die, with temperature-aware 2DRP at no guard band.
  const nlohmann::json at105 = strip(run_file(
      scenarios() + "/default.yaml",
      with(default_short, {"thermal.model=constant", "thermal.ambient_C=105", "policy.temperature_aware=true",
                           "policy.guard_band_C=0"})));
  for (const char* k : {"stats", "energy_J", "llm", "sim_time_s"}) CHECK(at105[k] == golden[k]);
  CHECK(at105["refresh"]["avg_failure_rate"] == golden["refresh"]["avg_failure_rate"]);

  nlohmann::json fgolden;
  std::ifstream(data + "functional.json") >> fgolden;
  const nlohmann::json f = strip(run_file(scenarios() + "/functional/tiny.yaml", functional_faults));
  CHECK(f == fgolden);
  CHECK(fgolden["quality"]["flipped_bits"]["hst_lsb"].get<double>() > 0);  // the faults are exercised
}

TEST_CASE("temperature-aware refresh: a cooler die is refreshed less, and its flips follow the true temperature",
          "[thermal]") {
  const std::string tiny = scenarios() + "/functional/tiny.yaml";
  const nlohmann::json hot = run_file(tiny, functional_faults);
  const nlohmann::json cool = run_file(tiny, with(functional_faults, {"thermal.ambient_C=45"}));
  const nlohmann::json aware = run_file(
      tiny, with(functional_faults, {"thermal.ambient_C=45", "policy.temperature_aware=true", "policy.guard_band_C=0"}));
  auto flips = [](const nlohmann::json& r) {
    double s = 0;
    for (const auto& [k, v] : r["quality"]["flipped_bits"].items()) s += v.get<double>();
    return s;
  };
  // Fixed 105 C intervals on a 45 C die: far fewer flips, the same refresh energy.
  CHECK(flips(cool) < flips(hot) / 10);
  CHECK(cool["refresh"]["energy_J"] == hot["refresh"]["energy_J"]);
  // Temperature-aware at 45 C: intervals x 32, refresh energy not up, failure rate back near
  // 105 C's. The aware run accounts refresh as bytes x dt / interval (continuous, edram.h), the
  // fixed run on the ticks' grid, which in a run of a few ms counts a partial interval as no
  // refresh: the aware run may come out a little above (1.76e-7 against 1.74e-7 J, 1 %).
  CHECK(aware["refresh"]["temperature_aware"]["interval_scale"].get<double>() == Approx(32.2).epsilon(0.01));
  CHECK(aware["refresh"]["energy_J"].get<double>() <= 1.02 * hot["refresh"]["energy_J"].get<double>());
  CHECK(aware["refresh"]["avg_failure_rate"].get<double>() ==
        Approx(hot["refresh"]["avg_failure_rate"].get<double>()).epsilon(0.05));
  // A sensor reading 10 C low: the intervals stretch too far, more flips than with a true reading.
  const nlohmann::json low = run_file(
      tiny, with(functional_faults, {"thermal.ambient_C=45", "policy.temperature_aware=true", "policy.guard_band_C=0",
                                     "thermal.sensor.offset_C=-10"}));
  CHECK(flips(low) > flips(aware));
}

TEST_CASE("thermal: bad input is one line naming where and what was expected", "[thermal][errors]") {
  auto error_of = [](const std::vector<std::string>& o) {
    try {
      test::llm_run(o);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string cold = error_of({"workload.model=llama2-7b", "thermal.ambient_C=-41"});
  CHECK_THAT(cold, Catch::Contains("thermal.ambient_C") && Catch::Contains("below -40 C"));
  const std::string hot = error_of({"workload.model=llama2-7b", "thermal.ambient_C=110"});
  CHECK_THAT(hot, Catch::Contains("thermal.ambient_C") && Catch::Contains("validated range 25 to 105 C") &&
                      Catch::Contains("thermal.extrapolate"));
  const std::string order = error_of({"workload.model=llama2-7b", "thermal.model=trace", "thermal.trace=\"0:45, 0.5:60, 0.4:70\""});
  CHECK_THAT(order, Catch::Contains("thermal.trace") && Catch::Contains("point 3") && Catch::Contains("time order"));
  const std::string r = error_of({"workload.model=llama2-7b", "thermal.model=rc", "thermal.resistance_K_per_W=-3", "thermal.time_constant_s=1"});
  CHECK_THAT(r, Catch::Contains("thermal.resistance_K_per_W") && Catch::Contains("not negative"));
  for (const std::string& e : {cold, hot, order, r}) CHECK(e.find('\n') == std::string::npos);
  // Beyond the validated range with extrapolate: the run goes on and says so.
  const nlohmann::json x = test::llm_run({"workload.model=llama2-7b", "workload.context_len=8", "workload.decode_len=1", "thermal.ambient_C=110",
                                          "thermal.extrapolate=true"});
  CHECK(x["thermal"]["extrapolated"].get<bool>());
}

TEST_CASE("thermal: a trace file may start with comments and a header and a bad line is named by file and line",
          "[thermal][errors]") {
  char tmpl[] = "/tmp/kelle-trace-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl, good = dir + "/good.csv", bad = dir + "/bad.csv", typo = dir + "/typo.csv";
  std::ofstream(good) << "# die temperature, measured\n\ntime_s,temperature_C\n0,60  # start\n1,60\n";
  std::ofstream(bad) << "time_s,temperature_C\n0,60\n1,sixty\n";
  std::ofstream(typo) << "0,6O\n1,60\n";  // a typo in the first line is not taken for a header
  const std::vector<std::string> base = {"workload.model=llama2-7b", "workload.context_len=8", "workload.decode_len=1",
                                         "thermal.model=trace"};
  const nlohmann::json r = test::llm_run(with(base, {"thermal.trace_file=" + good}));
  CHECK(r["thermal"]["max_C"].get<double>() == 60);
  CHECK(r["thermal"]["min_C"].get<double>() == 60);
  for (const auto& [file, line] : {std::pair{bad, 3}, std::pair{typo, 1}}) {
    std::string e = "no error";
    try {
      test::llm_run(with(base, {"thermal.trace_file=" + file}));
    } catch (const std::runtime_error& x) {
      e = x.what();
    }
    CHECK_THAT(e, Catch::Contains(file + ":" + std::to_string(line)) && Catch::Contains("two numbers"));
    CHECK(e.find('\n') == std::string::npos);
  }
  std::system(("rm -rf " + dir).c_str());
}

namespace {

// A sequential read stream of 16 MiB on 16 GiB of LPDDR4-4000 (or LPDDR5) with the scenario's
// overrides (tests/support/dram_bench.h).
// Each in a child process (one SystemC kernel per process).
nlohmann::json dram_stream(const std::string& model, const std::vector<std::string>& overrides) {
  const std::string yaml = test::dram_scenario(
      "model: " + model + ", capacity_MiB: 16384" + (model == "lpddr4" ? ", data_rate_MTps: 4000" : ""),
      "type: traffic, target: dram, burst_bytes: 4096, total_bytes: 16777216, outstanding: 16");
  const std::string out = test::in_child_process([&] { return test::run_dram(yaml, overrides).dump(); });
  if (out.rfind("error: ", 0) == 0) throw std::runtime_error(out);
  return nlohmann::json::parse(out);
}

}  // namespace

TEST_CASE("dram derating: without thermal.dram_derating, and at or below 85 C with it, the DRAM is today's",
          "[thermal][dram]") {
  const nlohmann::json plain = dram_stream("lpddr4", {});
  const nlohmann::json hot_off = dram_stream("lpddr4", {"thermal.ambient_C=105"});
  const nlohmann::json at85 = dram_stream("lpddr4", {"thermal.ambient_C=85", "thermal.dram_derating=true"});
  CHECK(hot_off["stats"]["dram"] == plain["stats"]["dram"]);
  CHECK(hot_off["energy_J"] == plain["energy_J"]);
  for (const char* s : {"refreshes", "refresh_stalls", "read_bursts", "activations", "precharges"})
    CHECK(test::dram_stat(at85, s) == test::dram_stat(plain, s));
  CHECK(at85["energy_J"]["by_component"]["dram.refresh"] == plain["energy_J"]["by_component"]["dram.refresh"]);
  CHECK(at85["sim_time_s"] == plain["sim_time_s"]);
  CHECK(test::dram_stat(at85, "refresh_rate") == 1);
  CHECK(test::dram_stat(at85, "refresh_rate_changes") == 0);
}

TEST_CASE("dram derating: above 85 C the DRAM refreshes twice as often, above 105 C four times (JESD209-4 MR4)",
          "[thermal][dram]") {
  for (const std::string model : {"lpddr4", "lpddr5"}) {
    INFO(model);
    const nlohmann::json plain = dram_stream(model, {});
    // 95 C: 0.5x tREFI from the first access on.
    const nlohmann::json r2 = dram_stream(model, {"thermal.ambient_C=95", "thermal.dram_derating=true"});
    // The DRAM die 10 C above a 100 C accelerator die: 110 C, 0.25x tREFI.
    const nlohmann::json r4 = dram_stream(
        model, {"thermal.ambient_C=100", "thermal.dram_derating=true", "thermal.dram_offset_C=10"});
    CHECK(test::dram_stat(r2, "refresh_rate") == 2);
    CHECK(test::dram_stat(r4, "refresh_rate") == 4);
    CHECK(r4["thermal"]["dram"]["offset_C"] == 10);
    // Refreshes over the run: every channel's windows at the derated interval (the grid moves at
    // the first access, time 0, so the count is the plain formula with tREFI / rate).
    const double tREFI = model == "lpddr4" ? 3904e-9 : 3906e-9;
    for (const auto& [r, rate] : {std::pair<const nlohmann::json&, int>{r2, 2}, {r4, 4}}) {
      const double T = r["sim_time_s"].get<double>();
      const double per_channel = T / (tREFI / rate);
      CHECK(test::dram_stat(r, "refreshes") == Approx(8 * per_channel).margin(8 * 1.0));
      // Energy: refreshes x the energy of one REFab, as at 1x (tRFC and the REFab's energy do not change).
      CHECK(r["energy_J"]["by_component"]["dram.refresh"].get<double>() ==
            Approx(test::dram_stat(r, "refreshes") * plain["energy_J"]["by_component"]["dram.refresh"].get<double>() /
                   test::dram_stat(plain, "refreshes")));
      // The stream's bandwidth: peak x (1 - (tRFC + tRCD + RL) / (tREFI / rate)), the same closed form.
      CHECK(r["traffic"]["bandwidth_GBps"].get<double>() == Approx(r["expected_read_GBps"].get<double>()).epsilon(0.05));
    }
    CHECK(r2["expected_read_GBps"].get<double>() < plain["expected_read_GBps"].get<double>());
    CHECK(r4["traffic"]["bandwidth_GBps"].get<double>() < r2["traffic"]["bandwidth_GBps"].get<double>());
  }
}

TEST_CASE("dram derating: a die heating through 85 C switches the refresh rate once, at an MR4 read",
          "[thermal][dram]") {
  // 80 C until 100 us, 90 C from 110 us; the thermal model and the MR4 reads every 10 us.
  const std::vector<std::string> o = {"thermal.model=trace", "thermal.trace=\"0:80, 0.0001:80, 0.00011:90\"",
                                      "thermal.step_us=10", "thermal.dram_derating=true",
                                      "system.memories.dram.mr4_poll_us=10"};
  const nlohmann::json r = dram_stream("lpddr4", o);
  const nlohmann::json cold = dram_stream("lpddr4", {"thermal.ambient_C=80", "thermal.dram_derating=true"});
  const nlohmann::json hot = dram_stream("lpddr4", {"thermal.ambient_C=90", "thermal.dram_derating=true"});
  CHECK(test::dram_stat(r, "refresh_rate_changes") == 1);
  CHECK(test::dram_stat(r, "refresh_rate") == 2);
  // The switch crosses 85 C between 100 and 110 us (linear: at 105 us), seen at the next read (<= 10 us
  // later, and the next access): the refreshes are 1x windows up to then and 2x windows after.
  const double T = r["sim_time_s"].get<double>(), tREFI = 3904e-9;
  CHECK(T > 200e-6);
  const double lo = 8 * (105e-6 / tREFI + (T - 125e-6) / (tREFI / 2)) - 16;
  const double hi = 8 * (105e-6 / tREFI + (T - 105e-6) / (tREFI / 2)) + 16;
  CHECK(test::dram_stat(r, "refreshes") >= lo);
  CHECK(test::dram_stat(r, "refreshes") <= hi);
  CHECK(test::dram_stat(r, "refreshes") > test::dram_stat(cold, "refreshes"));
  CHECK(test::dram_stat(r, "refreshes") < test::dram_stat(hot, "refreshes"));
}

TEST_CASE("dram derating: staggered channels keep their phases across a rate change", "[thermal][dram]") {
  // 80 C until 100 us, 90 C from 110 us (as above), the channels staggered tREFI / 8 apart. At
  // 2x each channel's windows run on from its last 1x window in steps of tREFI / 2, so channel c
  // stays at its phase modulo tREFI / 2; the rule before (the next window at max(t, last + tREFI
  // / 2)) put every channel whose window fell before the change at the change, together.
  const std::string out = test::in_child_process([] {
    const std::string yaml = test::dram_scenario(
        "model: lpddr4, capacity_MiB: 16384, data_rate_MTps: 4000, refresh_alignment: staggered",
        "type: traffic, target: dram, burst_bytes: 4096, total_bytes: 16777216, outstanding: 16");
    auto cfg = config::from_string(yaml, "dram.yaml",
                                   {"thermal.model=trace", "thermal.trace=\"0:80, 0.0001:80, 0.00011:90\"",
                                    "thermal.step_us=10", "thermal.dram_derating=true",
                                    "system.memories.dram.mr4_poll_us=10"});
    platform p(cfg);
    p.run();
    const lpddr4& m = test::dram_of(p);
    nlohmann::json j = {{"rate", m.refresh_rate()}, {"next", nlohmann::json::array()}};
    for (unsigned c = 0; c < m.channels(); ++c) j["next"].push_back(m.next_refresh(c).value());
    return j.dump();
  });
  REQUIRE(out.rfind("error: ", 0) != 0);
  const nlohmann::json j = nlohmann::json::parse(out);
  REQUIRE(j["rate"] == 2);
  const std::uint64_t tREFI = 3904000, half = tREFI / 2;  // ps
  REQUIRE(j["next"].size() == 8);
  std::map<std::uint64_t, int> at;
  for (std::uint64_t c = 0; c < 8; ++c) {
    INFO("channel " << c);
    // The 1x phase: tREFI (2c + 1) / (2 x 8).
    const std::uint64_t next = j["next"][c].get<std::uint64_t>(), phase = tREFI * (2 * c + 1) / 16;
    CHECK(next % half == phase % half);
    ++at[next % half];
  }
  for (const auto& [p, n] : at) CHECK(n <= 2);  // 8 channels on 4 phases of tREFI / 2
}

TEST_CASE("dram derating: a memspec whose quarter tREFI leaves no room for a burst is refused in one line",
          "[thermal][dram][errors]") {
  try {
    dram_stream("lpddr4", {"thermal.ambient_C=95", "thermal.dram_derating=true", "system.memories.dram.tREFI_ns=1500"});
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("tREFI_ns") && Catch::Contains("thermal.dram_derating"));
    CHECK(m.find('\n') == std::string::npos);
  }
}

TEST_CASE("temperature-aware refresh: an interval scaled below the time resolution is an input error, not a crash",
          "[thermal][errors]") {
  // A 1 ns uniform refresh of cells whose retention falls fast with temperature (3 eV), run with
  // temperature-aware refresh: the run's input error.
  auto input_error_of = [](const std::vector<std::string>& thermal) {
    return test::in_child_process([&] {
      auto cfg = config::from_string(
          "system: kelle_edram\nworkload: {type: llm}\n", "llm.yaml",
          with({"workload.model=llama2-7b", "workload.context_len=8", "workload.decode_len=1", "policy.kv=full",
                "policy.refresh=uniform", "policy.refresh_interval_us=0.001", "workload.progress=false",
                "tech.edram.retention.activation_energy_eV=3", "policy.temperature_aware=true"},
               thermal));
      platform p(cfg);
      p.run();
      return "input error: " + p.input_error();
    });
  };
  // A die at 150 C (extrapolated): retention 4.7 decades below 105 C's, so a 1 ns interval becomes
  // 0.02 ps, which the simulator cannot represent. Before the fix: "kv_edram:
  // set_refresh_interval: the interval must be positive" from inside the kernel.
  const std::string out = input_error_of({"thermal.ambient_C=150", "thermal.extrapolate=true", "policy.guard_band_C=5"});
  CHECK_THAT(out, Catch::StartsWith("input error: temperature-aware refresh cannot keep up at a sensed 150 C + a 5 C "
                                    "guard band") &&
                      Catch::Contains("0.001 us refresh interval") && Catch::Contains("time resolution"));
  CHECK(out.find('\n') == std::string::npos);
  // A die that runs away under its own refresh power (the RC model, no extrapolate): the error
  // says first that it left the validated range, then why the run could not go on.
  const std::string runaway =
      input_error_of({"thermal.model=rc", "thermal.ambient_C=100", "thermal.resistance_K_per_W=400",
                      "thermal.time_constant_s=0.001", "thermal.step_us=100"});
  CHECK_THAT(runaway, Catch::StartsWith("input error: thermal: the die reached") &&
                          Catch::Contains("validated range") && Catch::Contains("cannot keep up"));
  CHECK(runaway.find('\n') == std::string::npos);
}

TEST_CASE("thermal: a run with the timeline on gives the results of one without (no double-counted refresh)",
          "[thermal]") {
  // With the timeline the constant model updates at every temperature read, and an update reads
  // the eDRAM's refresh energy from inside the eDRAM's own accounting (re-entrant advance()).
  const std::vector<std::string> o =
      with(default_short, {"thermal.model=constant", "thermal.ambient_C=105", "policy.temperature_aware=false"});
  const std::string file = scenarios() + "/default.yaml";
  const nlohmann::json plain = strip(run_file(file, o));
  const std::string path = "thermal_test_timeline_" + std::to_string(::getpid()) + ".json";
  const nlohmann::json traced = strip(test::results_in_child([&] {
    timeline_options t;
    t.path = path;
    timeline::get().start(t);
    return config::load(file, o);
  }));
  std::remove(path.c_str());
  // The same figures; the timeline's extra accounting points split the same sums into more
  // terms, so a float may differ in its last digits (1e-16), never by a double-counted stretch
  // (before the fix: avg_failure_rate 0.0017876083 against 0.0017875708, 2e-5).
  std::function<void(const nlohmann::json&, const nlohmann::json&, const std::string&)> same =
      [&](const nlohmann::json& a, const nlohmann::json& b, const std::string& at) {
        INFO(at);
        if (a.is_number_float() || b.is_number_float()) {
          REQUIRE(b.is_number());
          CHECK(a.get<double>() == Approx(b.get<double>()).epsilon(1e-12).margin(1e-300));
        } else if (a.is_object()) {
          CHECK(a.size() == b.size());
          for (auto it = a.begin(); it != a.end(); ++it) {
            REQUIRE(b.contains(it.key()));
            same(it.value(), b[it.key()], at + "." + it.key());
          }
        } else if (a.is_array()) {
          REQUIRE(a.size() == b.size());
          for (std::size_t i = 0; i < a.size(); ++i) same(a[i], b[i], at + "." + std::to_string(i));
        } else {
          CHECK(a == b);
        }
      };
  same(traced, plain, "results");
  CHECK(traced["refresh"]["avg_failure_rate"].get<double>() ==
        Approx(plain["refresh"]["avg_failure_rate"].get<double>()).epsilon(1e-14));
}
