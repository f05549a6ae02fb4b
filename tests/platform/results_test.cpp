// The results.json contract on the built-in systems.
#include <catch2/catch.hpp>

#include "vp/platform.h"

#include <filesystem>

using namespace kelle;

namespace {

nlohmann::json run_default(const std::vector<std::string>& overrides) {
  auto cfg = config::load((std::filesystem::path(scenarios_dir()) / "microbench" / "dram_stream.yaml").string(), overrides);
  platform p(cfg);
  p.run();
  return p.results();
}

}  // namespace

TEST_CASE("results: the DRAM-stream microbenchmark fills the contract", "[results]") {
  const auto r = run_default({"workload.total_bytes=262144"});
  REQUIRE(r.contains("config"));
  CHECK(r["config"]["system"]["name"] == "kelle_edram");
  CHECK(r["config"]["workload"]["total_bytes"] == 262144);  // the override, in effect
  CHECK(r["config"]["tech"]["edram"]["access_energy_pJ_per_byte"] == 84.8);
  CHECK(r["sim_time_s"].get<double>() > 0);
  for (const char* m : {"dram", "weight_sram", "kv_edram", "act_edram", "interconnect", "traffic"}) {
    INFO(m);
    REQUIRE(r["stats"].contains(m));
    for (const auto& [name, s] : r["stats"][m].items()) {
      INFO(name);
      CHECK(s.contains("value"));
      CHECK(s["unit"].is_string());
      CHECK(!s["description"].get<std::string>().empty());
    }
  }
  double sum = 0;
  for (const auto& [k, v] : r["energy_J"]["by_component"].items()) sum += v.get<double>();
  CHECK(sum == Approx(r["energy_J"]["total"].get<double>()));
  CHECK(r["energy_J"]["total"].get<double>() > 0);
  CHECK(r["energy_J"]["by_component"].contains("kv_edram.refresh"));
  CHECK(r["traffic"]["bytes"] == 262144);
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() > 0);
}

TEST_CASE("results: the SRAM baseline names its on-chip memory sram", "[results]") {
  const auto r = run_default({"system=original_sram", "workload.target=sram", "workload.total_bytes=65536"});
  CHECK(r["stats"].contains("sram"));
  CHECK(!r["stats"].contains("kv_edram"));
  CHECK(r["energy_J"]["edram_refresh"] == 0.0);
}

TEST_CASE("results: eDRAM refresh shows in the breakdown once data outlives the interval", "[results]") {
  // Write 1 MiB into the KV eDRAM, slowly enough (one request in flight, 64 B) that the run
  // lasts far beyond 45 us: the written data is refreshed.
  const auto r = run_default({"workload.target=kv_edram", "workload.op=write",
                              "workload.total_bytes=1048576", "workload.burst_bytes=64",
                              "workload.outstanding=1"});
  const double t = r["sim_time_s"].get<double>();
  REQUIRE(t > 150e-6);
  const double refresh = r["energy_J"]["by_component"]["kv_edram.refresh"].get<double>();
  CHECK(refresh > 0);
  CHECK(r["energy_J"]["edram_refresh"].get<double>() == Approx(refresh));
  // At most every written byte refreshed every 45 us for the whole run.
  CHECK(refresh < 1048576 * 8 * (t / 45e-6) * 1.14e-3 / (4.0 * 1048576 * 8));
}
