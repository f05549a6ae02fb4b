// The command interface across blocks: commands to different blocks run at the same time.
#include <catch2/catch.hpp>

#include "tests/support/test_initiator.h"

#include <cstring>

using namespace kelle;

TEST_CASE("commands: an RSA GEMM and an SFU softmax submitted together run in parallel", "[commands]") {
  test::bench b(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: ideal, base_addr: 0, capacity_MiB: 256, queue_depth: 64}
  compute:
    rsa: {model: rsa, base_addr: 0x100000000}
    sfu: {model: sfu, base_addr: 0x100001000}
workload: {type: test_script}
)");
  auto& ti = b.init();
  auto submit = [&](std::uint64_t port, const command& c) {
    std::vector<unsigned char> bytes(sizeof c);
    std::memcpy(bytes.data(), &c, sizeof c);
    ti.write(port, bytes);
  };
  command g;
  g.id = 1;
  g.op = opcode::gemm;
  g.m = 16, g.k = 1024, g.n = 1024;
  g.addr_a = 0, g.addr_b = 1 << 20, g.addr_c = 4 << 20;
  command s;
  s.id = 2;
  s.op = opcode::softmax;
  s.m = 64, s.k = 2048;
  s.addr_a = 8 << 20, s.addr_c = 12 << 20;
  submit(0x100000000, g);
  submit(0x100001000, s);
  b.p->run();
  completion cg, cs;
  REQUIRE(b.p->block("rsa")->pop_completion(cg));
  REQUIRE(b.p->block("sfu")->pop_completion(cs));
  CHECK(cg.status == cmd_status::ok);
  CHECK(cs.status == cmd_status::ok);
  // Both started before either finished.
  CHECK(cg.started < cs.finished);
  CHECK(cs.started < cg.finished);
  CHECK(cg.cycles > 1000);
  CHECK(cs.cycles > 1000);
}
