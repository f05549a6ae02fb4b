// The traffic generator workload and the results it adds.
#include <catch2/catch.hpp>

#include "vp/platform.h"
#include "tests/support/test_initiator.h"

using namespace kelle;

namespace {

nlohmann::json run(const std::vector<std::string>& overrides) {
  auto cfg = config::from_string(R"(
include: tech/65nm.yaml
system:
  memories:
    m: {model: sram, base_addr: 0x1000, capacity_MiB: 1, bandwidth_GBps: 128, banks: 16}
workload: {type: traffic, target: m, total_bytes: 65536, burst_bytes: 256, outstanding: 4}
)", "traffic.yaml", overrides);
  platform p(cfg);
  p.run();
  return p.results();
}

}  // namespace

TEST_CASE("traffic: results carry bandwidth and latency statistics and the configuration", "[traffic]") {
  const auto r = run({});
  CHECK(r["traffic"]["requests"] == 256);
  CHECK(r["traffic"]["errors"] == 0);
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() > 0);
  CHECK(r["traffic"]["latency_max_ns"].get<double>() >= r["traffic"]["latency_p99_ns"].get<double>());
  CHECK(r["traffic"]["latency_p99_ns"].get<double>() >= 0.999 * r["traffic"]["latency_avg_ns"].get<double>());
  CHECK(r["config"]["workload"]["pattern"] == "sequential");  // a default, recorded
  CHECK(r["config"]["system"]["memories"]["m"]["queue_depth"] == 16);
  CHECK(r["stats"]["m"]["bytes_read"]["value"].get<double>() == 65536);
  CHECK(r["stats"]["m"]["bytes_read"]["unit"] == "B");
}

TEST_CASE("traffic: a random pattern is reproducible by seed and differs between seeds", "[traffic]") {
  auto child = [](const std::string& seed) {
    return nlohmann::json::parse(test::in_child_process(
        [&] { return run({"workload.pattern=random", "seed=" + seed}).dump(); }));
  };
  const auto a = child("7"), b = child("7"), c = child("8");
  CHECK(a["traffic"] == b["traffic"]);
  CHECK(a["stats"]["m"]["bank_wait_time"] == b["stats"]["m"]["bank_wait_time"]);
  CHECK(a["stats"]["m"]["bank_wait_time"] != c["stats"]["m"]["bank_wait_time"]);
}

TEST_CASE("traffic: writes of a partial last burst count exact bytes", "[traffic]") {
  const auto r = run({"workload.op=write", "workload.total_bytes=1000"});
  CHECK(r["traffic"]["bytes"] == 1000);
  CHECK(r["stats"]["m"]["bytes_written"]["value"].get<double>() == 1000);
}

TEST_CASE("traffic: a region that does not fit the target is an error", "[traffic]") {
  CHECK_THROWS_WITH(run({"workload.offset_bytes=1048000", "workload.region_bytes=4096"}),
                    Catch::Matchers::Contains("workload.region_bytes"));
}
