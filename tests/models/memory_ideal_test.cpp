// The ideal memory: fixed latency, no bandwidth limit.
#include <catch2/catch.hpp>

#include "tests/support/test_initiator.h"

using namespace kelle;

TEST_CASE("ideal: every access takes the fixed latency whatever its size or company", "[ideal]") {
  test::bench b(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    m: {model: ideal, base_addr: 0, capacity_MiB: 64, latency_ns: 10, queue_depth: 64,
        energy_pJ_per_byte: 2}
workload: {type: test_script}
)");
  auto& ti = b.init();
  ti.read(0, 64);
  ti.read(0, 16 * 1024 * 1024);
  ti.write(1024, std::vector<unsigned char>(4096, 3));
  b.p->run();
  for (std::size_t i = 0; i < ti.size(); ++i) CHECK(ti[i].latency().to_seconds() == Approx(10e-9));
  const auto r = b.p->results();
  CHECK(r["energy_J"]["by_component"]["m.access"].get<double>() == Approx((64 + 16777216 + 4096) * 2e-12));
}
