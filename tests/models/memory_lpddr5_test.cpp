// The LPDDR5 DRAM model (the lpddr4 model with the JEDEC_LPDDR5-6400_x16 memspec): the
// address mapping over 16 banks, unloaded latencies by hand with WCK clocking, tCCD_L within a
// bank group, refresh, streaming bandwidth against the formula, energy accounting, and the
// model switch of a built-in system by one override. Formulas: docs/models/memory-lpddr4.md.
#include <catch2/catch.hpp>

#include <fstream>

#include "models/memory/lpddr4/lpddr4.h"
#include "vp/platform.h"
#include "tests/support/dram_bench.h"
#include "tests/support/test_initiator.h"

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_NS;
using sc_core::SC_US;

namespace {

// 1 GiB of LPDDR5-6400 (memspec defaults): 8 x16 channels, 16 banks in 4 groups, 2 KiB rows,
// BL32 (64 B, 5 ns), CK 800 MHz (tCK 1.25 ns): RL 17 nCK = 21.25 ns, WL 9 nCK = 11.25 ns,
// tRCD 18, tRP 18, tRAS 42, tRRD 5, tFAW 20, tCCD_L 5, tRFC 280, tREFI 3906 ns.
const std::string yaml = test::dram_scenario("model: lpddr5, capacity_MiB: 1024", "type: test_script");

constexpr double tB = 5, tRCD = 18, tRP = 18, tRAS = 42, RL = 21.25, WL = 11.25, tRRD = 5, tRFC = 280;
constexpr std::uint64_t stripe = 8 * 64;           // one 64 B chunk in each channel
constexpr std::uint64_t next_bank = 8 * 2048;      // same channel and row index, next bank
constexpr std::uint64_t next_row = 8 * 16 * 2048;  // same channel and bank, next row

using test::ns;
const auto stat_of = test::dram_stat;
lpddr4& dram(test::bench& b) { return test::dram_of(*b.p); }

}  // namespace

TEST_CASE("lpddr5: organisation, peak bandwidth and the address mapping over 16 banks", "[lpddr5]") {
  test::bench b(yaml);
  const lpddr4& m = dram(b);
  CHECK(m.peak_bandwidth_Bps() == Approx(6400e6 * 2 * 8));  // 102.4 GB/s
  CHECK(m.burst_bytes() == 64);
  CHECK(m.banks_per_channel() == 16);
  CHECK(m.bank_groups() == 4);
  CHECK(ns(m.timings().tCK) == Approx(1.25));  // WCK:CK 4:1
  CHECK(ns(m.timings().tCL) == Approx(RL));
  const auto l = m.decode(next_row + 15 * next_bank + 3 * 64);
  CHECK(l.channel == 3);
  CHECK(l.bank == 15);
  CHECK(l.row == 1);
  const auto r = b.p->results();
  CHECK(r["config"]["system"]["memories"]["dram"]["memspec"] == "JEDEC_LPDDR5-6400_x16");
  CHECK(r["config"]["system"]["memories"]["dram"]["tWR_ns"] == 34);  // the memspec's, recorded
}

TEST_CASE("lpddr5: idle accesses take tRCD + RL or WL + bursts, a conflict tRP more", "[lpddr5]") {
  test::bench b(yaml);
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  ti.read(0, 64);                              // closed row: ACT, RD, one BL32 burst
  ti.read(stripe, 64, sc_time(100, SC_NS));    // same row: a hit
  ti.read(next_row, 64, sc_time(150, SC_NS));  // other row of the same bank
  ti.write(64, std::vector<unsigned char>(128, 1), sc_time(300, SC_NS));  // channels 1 and 2
  b.p->run();
  using rs = lpddr4::row_state;
  CHECK(ns(ti[0].latency()) == Approx(tRCD + RL + tB));  // 44.25 ns
  CHECK(ns(ti[1].latency()) == Approx(RL + tB));
  CHECK(ns(ti[2].latency()) == Approx(tRP + tRCD + RL + tB));
  CHECK(ns(ti[3].latency()) == Approx(tRCD + WL + tB));
  CHECK(ti[2].latency() == m.unloaded_latency(tlm::TLM_READ_COMMAND, 1, rs::conflict));
  CHECK(stat_of(b.p->results(), "row_conflicts") == 1);
}

TEST_CASE("lpddr5: a second request to a bank waits tRAS + tRP, to another bank tRRD", "[lpddr5]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(0, 64);
  ti.read(next_row, 64);         // same bank, other row
  ti.read(64, 64);               // channel 1, bank 0
  ti.read(64 + next_bank, 64);   // channel 1, bank 1 (another bank group)
  b.p->run();
  CHECK(ns(ti[1].latency()) == Approx(tRAS + tRP + tRCD + RL + tB));
  CHECK(ns(ti[3].latency()) == Approx(tRRD + tRCD + RL + tB));
}

TEST_CASE("lpddr5: BL16 bursts of one bank group are tCCD_L apart", "[lpddr5]") {
  test::bench b(yaml, {"system.memories.dram.burst_length=16"});  // 32 B in 2.5 ns
  auto& ti = b.init();
  ti.read(0, 64);  // two BL16 bursts in one bank: the second starts tCCD_L = 5 ns after the first
  b.p->run();
  CHECK(ns(ti[0].latency()) == Approx(tRCD + RL + 5 + 2.5));
}

TEST_CASE("lpddr5: refresh blocks a channel for tRFC and closes its rows", "[lpddr5]") {
  test::bench b(yaml);
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  const double ph = ns(m.refresh_phase(0));
  REQUIRE(ph == Approx(3906.0 / 2));         // simultaneous: every channel at tREFI / 2
  REQUIRE(ns(m.refresh_phase(5)) == Approx(ph));
  ti.read(0, 64);
  ti.read(64, 64, sc_time(ph + 50, SC_NS));              // inside the window: waits
  ti.read(stripe, 64, sc_time(ph + tRFC + 100, SC_NS));  // after the window: closed again
  b.p->run();
  CHECK(ns(ti[1].begin_resp) == Approx(ph + tRFC + tRCD + RL + tB));
  CHECK(ns(ti[2].latency()) == Approx(tRCD + RL + tB));
  const auto r = b.p->results();
  CHECK(stat_of(r, "refresh_stalls") == 1);
  CHECK(stat_of(r, "refreshes") == 8);  // one window in each channel by then
}

namespace {

nlohmann::json stream(const std::vector<std::string>& overrides) {
  return test::run_dram(
      test::dram_scenario("model: lpddr5, capacity_MiB: 16384",
                          "type: traffic, target: dram, burst_bytes: 4096, total_bytes: 16777216, outstanding: 16"),
      overrides);
}

}  // namespace

TEST_CASE("lpddr5: a stream of reads reaches peak x refresh efficiency", "[lpddr5]") {
  const auto r = stream({});
  const double expected = r["expected_read_GBps"].get<double>();
  CHECK(expected == Approx(102.4 * (1 - (280 + 18 + 21.25) / 3906.0)));
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() == Approx(expected).epsilon(0.05));
}

TEST_CASE("lpddr5: a stream of writes reaches peak x its refresh efficiency", "[lpddr5]") {
  const auto r = stream({"workload.op=write"});
  const double expected = r["expected_write_GBps"].get<double>();
  CHECK(expected == Approx(102.4 * (1 - (280 + 18 + 11.25) / 3906.0)));
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() == Approx(expected).epsilon(0.05));
}

TEST_CASE("lpddr5: energy parts are counts x the tech.lpddr5 figures", "[lpddr5]") {
  test::bench b(yaml);
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  ti.read(0, 65536);
  ti.write(1 << 20, std::vector<unsigned char>(65536, 1));
  ti.read(4 << 20, 64, sc_time(20, SC_US));
  b.p->run();
  const auto r = b.p->results();
  const auto& tech = r["config"]["tech"]["lpddr5"];
  const auto& e = r["energy_J"]["by_component"];
  CHECK(e["dram.access"].get<double>() ==
        Approx(512 * (stat_of(r, "read_bursts") * tech["read_energy_pJ_per_bit"].get<double>() +
                      stat_of(r, "write_bursts") * tech["write_energy_pJ_per_bit"].get<double>()) *
               1e-12));
  CHECK(stat_of(r, "read_bursts") == (65536 + 64) / 64);
  CHECK(e["dram.activate"].get<double>() ==
        Approx(stat_of(r, "activations") * tech["activate_energy_nJ"].get<double>() * 1e-9));
  CHECK(e["dram.background"].get<double>() ==
        Approx(tech["background_power_mW"].get<double>() * 1e-3 * r["sim_time_s"].get<double>()));
  CHECK(e["dram.refresh"].get<double>() == Approx(stat_of(r, "refreshes") * m.refresh_energy_J()));
  CHECK(m.refresh_energy_J() == Approx(tech["refresh_energy_nJ"].get<double>() * 1e-9 / 8));
}

TEST_CASE("lpddr5: a built-in system switches its DRAM to lpddr5 with one override", "[lpddr5]") {
  auto cfg = config::from_string(R"(
system: kelle_edram
workload: {type: traffic, target: dram, burst_bytes: 4096, total_bytes: 1048576, outstanding: 16}
)", "switch.yaml", {"system.memories.dram.model=lpddr5"});
  platform p(cfg);
  p.run();
  const auto r = p.results();
  // The system's data rate (4000 MT/s) and channels apply to the LPDDR5 device: 64 GB/s peak.
  CHECK(stat_of(r, "peak_bandwidth") == Approx(64));
  CHECK(r["config"]["system"]["memories"]["dram"]["bank_groups"] == 4);
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() > 40);
}

TEST_CASE("lpddr5: a memspec that is missing or has an unknown key is a configuration error", "[lpddr5]") {
  CHECK_THROWS_WITH(test::bench(yaml, {"system.memories.dram.memspec=no_such_device"}),
                    Catch::Matchers::Contains("system.memories.dram.memspec"));
  // The shipped memspec with a key the model does not have, in its timing section.
  const std::string bad = "/tmp/kelle_memspec_test_bad.yaml";
  {
    std::ifstream in(scenarios_dir() + "/memspec/JEDEC_LPDDR5-6400_x16.yaml");
    REQUIRE(in);
    std::ofstream out(bad);
    out << in.rdbuf() << "  tColour_ns: 3\n";
  }
  CHECK_THROWS_WITH(test::bench(yaml, {"system.memories.dram.memspec=" + bad}),
                    Catch::Matchers::Contains(bad + ":") && Catch::Matchers::Contains("timing.tColour_ns") &&
                        Catch::Matchers::Contains("unknown key"));
}

TEST_CASE("lpddr5: a memspec without the MR4 derating thresholds still loads (85 and 105 C)", "[lpddr5]") {
  // A user's memspec written before thermal.dram_derating: the shipped one without the keys
  // refresh_2x_above_C and refresh_4x_above_C.
  const std::string old = "/tmp/kelle_memspec_test_no_derating.yaml";
  {
    std::ifstream in(scenarios_dir() + "/memspec/JEDEC_LPDDR5-6400_x16.yaml");
    REQUIRE(in);
    std::ofstream out(old);
    std::string line;
    while (std::getline(in, line))
      if (line.find("refresh_2x_above_C") == std::string::npos && line.find("refresh_4x_above_C") == std::string::npos)
        out << line << "\n";
  }
  test::bench b(yaml, {"system.memories.dram.memspec=" + old});
  const auto r = b.p->results();
  CHECK(r["config"]["system"]["memories"]["dram"]["refresh_2x_above_C"] == 85);
  CHECK(r["config"]["system"]["memories"]["dram"]["refresh_4x_above_C"] == 105);
}
