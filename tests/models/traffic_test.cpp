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

TEST_CASE("traffic: op mix issues the read fraction of the requests as reads, evenly spread", "[traffic]") {
  auto child = [](const std::vector<std::string>& o) {
    return nlohmann::json::parse(test::in_child_process([&] { return run(o).dump(); }));
  };
  const auto r = child({"workload.op=mix", "workload.read_fraction=0.6666666666666666"});
  // 256 requests of 256 B: floor(256 x 2/3) = 170 reads, the rest writes.
  CHECK(r["stats"]["m"]["reads"]["value"].get<double>() == 170);
  CHECK(r["stats"]["m"]["writes"]["value"].get<double>() == 86);
  CHECK(r["traffic"]["bytes"] == 65536);
  const auto w = child({"workload.op=mix", "workload.read_fraction=0"});
  CHECK(w["stats"]["m"]["reads"]["value"].get<double>() == 0);
  CHECK_THROWS_WITH(run({"workload.op=mix", "workload.read_fraction=1.5"}),
                    Catch::Matchers::Contains("workload.read_fraction"));
  CHECK_THROWS_WITH(run({"workload.read_fraction=0.5"}),  // only with op: mix
                    Catch::Matchers::Contains("workload.read_fraction"));
}

TEST_CASE("traffic: a stride that is not a multiple of the burst is an error", "[traffic]") {
  CHECK_THROWS_WITH(run({"workload.pattern=strided", "workload.stride_bytes=100"}),
                    Catch::Matchers::Contains("workload.stride_bytes"));
}
