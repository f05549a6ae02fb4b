// The command interface across blocks: commands to different blocks run at the same time.
#include <catch2/catch.hpp>

#include "tests/support/test_initiator.h"

#include <cstring>
#include <sstream>

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

namespace {

// Two commands submitted back to back to one block (`overlap_commands` set or not), run in a
// child process; returns their completions' (started, finished) in ns, in completion order.
std::vector<double> two_commands(const char* block, bool overlap, const command& a, const command& b) {
  const std::string out = test::in_child_process([&] {
    test::bench bn(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0.5, bandwidth_GBps: 512}
  memories:
    dram: {model: lpddr4, base_addr: 0, capacity_MiB: 1024, data_rate_MTps: 4000, store_data: false}
    sram: {model: sram, base_addr: 0x100000000, capacity_MiB: 4, bandwidth_GBps: 128, banks: 16}
  compute:
    rsa: {model: rsa, base_addr: 0x200000000, rows: 32, cols: 32}
    dma: {model: dma, base_addr: 0x200002000, chunk_bytes: 16384, outstanding: 8}
workload: {type: test_script}
)",
                   {std::string("system.compute.") + block + ".overlap_commands=" + (overlap ? "true" : "false")});
    auto& ti = bn.init();
    const std::uint64_t port = std::string(block) == "rsa" ? 0x200000000 : 0x200002000;
    for (const command* c : {&a, &b}) {
      std::vector<unsigned char> bytes(sizeof *c);
      std::memcpy(bytes.data(), c, sizeof *c);
      ti.write(port, bytes);
    }
    bn.p->run();
    std::string r;
    completion c;
    while (bn.p->block(block)->pop_completion(c)) {
      if (c.status != cmd_status::ok) return std::string("error: status ") + to_string(c.status);
      r += std::to_string(c.id) + " " + std::to_string(c.started.to_seconds() * 1e9) + " " +
           std::to_string(c.finished.to_seconds() * 1e9) + " ";
    }
    return r;
  });
  if (out.rfind("error: ", 0) == 0) throw std::runtime_error(out);
  std::istringstream in(out);
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  REQUIRE(v.size() == 6);
  return v;  // id, started, finished of the first completion, then of the second
}

command copy_cmd(std::uint32_t id, std::uint64_t src, std::uint64_t dst, std::uint32_t bytes) {
  command c;
  c.id = id;
  c.op = opcode::copy;
  c.m = 1;
  c.k = bytes;
  c.addr_a = src;
  c.addr_c = dst;
  return c;
}

}  // namespace

TEST_CASE("commands: with overlap_commands the DMA reads the next copy while it writes the current one",
          "[commands]") {
  // Two 256 KiB copies DRAM -> SRAM to different places: the second one's reads start once the
  // first one's have completed (its writes still in flight), completions stay in order.
  const command a = copy_cmd(1, 0, 0x100000000, 262144), b = copy_cmd(2, 1 << 20, 0x100000000 + 262144, 262144);
  const auto serial = two_commands("dma", false, a, b), overlapped = two_commands("dma", true, a, b);
  CHECK(serial[0] == 1);
  CHECK(overlapped[0] == 1);  // in order
  CHECK(overlapped[3] == 2);
  CHECK(serial[4] >= serial[2]);          // without overlap the second starts when the first has finished
  CHECK(overlapped[4] < overlapped[2]);   // with it, before
  CHECK(overlapped[5] >= overlapped[2]);  // and completes after it
  INFO("second copy finishes at " << serial[5] << " ns serial, " << overlapped[5] << " ns overlapped");
  CHECK(overlapped[5] < serial[5] - 40);  // measured: 82 ns saved, the first copy's last writes
}

TEST_CASE("commands: a copy that reads what the copy before it writes waits for it, overlap or not", "[commands]") {
  // The second copy's source is the first one's destination: a read-after-write hazard.
  const command a = copy_cmd(1, 0, 0x100000000, 262144), b = copy_cmd(2, 0x100000000 + 4096, 1 << 20, 65536);
  const auto overlapped = two_commands("dma", true, a, b);
  CHECK(overlapped[4] >= overlapped[2]);
}

TEST_CASE("commands: overlapped RSA commands fetch ahead but never share the array", "[commands]") {
  // Two GEMMs with their inputs and weights in DRAM: the second one's operand fetch overlaps the
  // first one's compute and result write, but its folds start only when the array is free, so the
  // two together take at least their two array pipelines.
  command g;
  g.op = opcode::gemm;
  g.m = 64, g.k = 1024, g.n = 256;
  g.addr_a = 0, g.addr_b = 1 << 20, g.addr_c = 0x100000000;
  command h = g;
  g.id = 1, h.id = 2;
  h.addr_a = 2 << 20, h.addr_b = 3 << 20, h.addr_c = 0x100000000 + (1 << 20);
  const auto serial = two_commands("rsa", false, g, h), overlapped = two_commands("rsa", true, g, h);
  // Array pipeline of one GEMM, double-buffered weights: fill + (folds - 1) x max(M, fill) + M + tail.
  const double folds = (1024 / 32) * (256 / 32), fill = 32 / 4;
  const double pipeline_ns = fill + (folds - 1) * 64 + 64 + 62;
  CHECK(overlapped[4] < overlapped[2]);
  CHECK(overlapped[5] - overlapped[1] >= 2 * pipeline_ns);
  INFO("two GEMMs: " << serial[5] << " ns serial, " << overlapped[5] << " ns overlapped");
  CHECK(overlapped[5] < serial[5]);
  CHECK(overlapped[5] > serial[5] - (serial[4] - serial[1]));  // not more than a whole command saved
}
