// The AT interconnect: address decode and translation, errors, latency, port bandwidth,
// arbitration between initiators, debug transport.
#include <catch2/catch.hpp>

#include "models/interconnect/router.h"
#include "tests/support/test_initiator.h"

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_NS;

namespace {

const char* const yaml = R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0.5, bandwidth_GBps: .inf}
  memories:
    a: {model: ideal, base_addr: 0x10000, capacity_MiB: 1, latency_ns: 10}
    b: {model: ideal, base_addr: 0x200000, capacity_MiB: 1, latency_ns: 20}
workload: {type: test_script}
)";

double ns(const sc_time& t) { return t.to_seconds() * 1e9; }
double stat_of(test::bench& b, const char* mod, const char* name) {
  return b.p->results()["stats"][mod][name]["value"].get<double>();
}

}  // namespace

TEST_CASE("interconnect: addresses decode to their target, relative to its base", "[interconnect]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0x200000 + 16, {42, 43});
  ti.write(0x10000 + 16, {7});
  test::request dbg;  // read b's local address 16 through the map with the debug transport
  dbg.debug = true;
  dbg.addr = 0x200000 + 16;
  dbg.len = 2;
  dbg.issue_at = sc_time(100, SC_NS);
  const auto d = ti.add(dbg);
  b.p->run();
  CHECK(ti[d].data == std::vector<unsigned char>{42, 43});
  CHECK(ti[0].addr == 0x200000 + 16);
  CHECK(stat_of(b, "a", "writes") == 1);
  CHECK(stat_of(b, "b", "writes") == 1);
  CHECK(stat_of(b, "interconnect", "transactions_to_b") == 1);
  CHECK(stat_of(b, "interconnect", "transactions_from_tester") == 2);  // the debug read is not one
}

TEST_CASE("interconnect: a crossing pays both ports' latency in each direction", "[interconnect]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(0x10000, 64);
  ti.read(0x200000, 64, sc_time(100, SC_NS));
  b.p->run();
  CHECK(ns(ti[0].latency()) == Approx(10 + 2 * (0.5 + 0.5)));
  CHECK(ns(ti[1].latency()) == Approx(20 + 2 * (0.5 + 0.5)));
}

TEST_CASE("interconnect: unmapped addresses get TLM_ADDRESS_ERROR_RESPONSE", "[interconnect]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(0x0, 4);
  ti.read(0x10000 + 1048576, 4);  // just past a
  ti.read(0x10000, 4);
  b.p->run();
  CHECK(ti[0].status == tlm::TLM_ADDRESS_ERROR_RESPONSE);
  CHECK(ti[1].status == tlm::TLM_ADDRESS_ERROR_RESPONSE);
  CHECK(ti[2].status == tlm::TLM_OK_RESPONSE);
  CHECK(stat_of(b, "interconnect", "decode_errors") == 2);
}

TEST_CASE("interconnect: a port's bandwidth limits the data it carries", "[interconnect]") {
  test::bench b(yaml, {"system.interconnect.ports.tester.bandwidth_GBps=10"});
  auto& ti = b.init();
  for (int i = 0; i < 10; ++i) ti.read(0x10000, 1000);  // 10 x 1000 B through a 10 GB/s port
  b.p->run();
  // Responses leave the port 100 ns apart; the first overlaps its memory access.
  for (int i = 1; i < 10; ++i) CHECK(ns(ti[i].begin_resp - ti[i - 1].begin_resp) == Approx(100));
}

TEST_CASE("interconnect: two initiators share a target round-robin", "[interconnect]") {
  test::bench b(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    m: {model: sram, base_addr: 0, capacity_MiB: 1, bandwidth_GBps: 64, banks: 1, queue_depth: 1}
workload: {type: test_script}
)");
  auto second_cfg = config::from_string("workload: {type: test_script}\n");
  test::test_initiator other("other", workload_args{second_cfg.root().child("workload"), *b.p});
  auto& ti = b.init();
  for (int i = 0; i < 4; ++i) {
    ti.read(0, 64);
    other.read(0, 64);
  }
  b.p->run();
  // One bank, one request at a time: 1 ns + 2.6 ns each, the two initiators alternate.
  std::vector<double> mine, theirs;
  for (int i = 0; i < 4; ++i) {
    mine.push_back(ns(ti[i].begin_resp));
    theirs.push_back(ns(other[i].begin_resp));
  }
  for (int i = 0; i < 4; ++i) {
    CHECK(mine[i] == Approx(3.6 * (2 * i + 1)));
    CHECK(theirs[i] == Approx(3.6 * (2 * i + 2)));
  }
}

TEST_CASE("interconnect: overlapping address ranges are a configuration error", "[interconnect]") {
  CHECK_THROWS_WITH(test::bench(yaml, {"system.memories.b.base_addr=0x10400"}),
                    Catch::Matchers::Contains("system.memories.b.base_addr") &&
                        Catch::Matchers::Contains("overlaps 'a'"));
}
