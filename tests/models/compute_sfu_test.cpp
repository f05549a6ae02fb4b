// The special-function unit: cycle counts per opcode against the documented formulas, memory
// time, the single read of softmax, the sequential minimum search, energy per opcode, and
// malformed or unmapped commands (docs/models/compute-sfu.md).
#include <catch2/catch.hpp>

#include "models/compute/compute_block.h"
#include "tests/support/test_initiator.h"

#include <cstring>

using namespace kelle;

namespace {

// Operands in a zero-latency, unlimited-bandwidth memory behind a zero-latency interconnect:
// memory takes no time, so a command's cycles are the SFU's alone.
const char* const yaml = R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: ideal, base_addr: 0x0, capacity_MiB: 64, queue_depth: 1024}
  compute:
    sfu: {model: sfu, base_addr: 0x100000000}
workload: {type: test_script}
)";
constexpr std::uint64_t sfu_port = 0x100000000;
constexpr std::uint64_t in_a = 0x0, in_b = 0x1000000, out_c = 0x2000000;
constexpr std::uint64_t unmapped = 0x80000000;

// The documented timing (defaults: P = 32 lanes, L = 8 cycles, a 32 KiB buffer of E = 16384
// elements), written out independently of the model.
constexpr std::uint64_t P = 32, L = 8, E = 16384;
std::uint64_t cdiv(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
// exp, gelu, silu (1 input), add, mul, rope (2 inputs): tiles of E / inputs elements.
std::uint64_t flat_cycles(std::uint64_t n, std::uint64_t inputs) {
  const std::uint64_t T = E / inputs;
  std::uint64_t c = 0;
  for (std::uint64_t done = 0; done < n; done += T) c += cdiv(std::min(T, n - done), P) + L;
  return c;
}
// softmax (0 weight rows), rmsnorm (1), layernorm (2): tiles of R rows, (R + 1) ceil(k/P) + L.
std::uint64_t two_pass_cycles(std::uint64_t m, std::uint64_t k, std::uint64_t weight_rows) {
  const std::uint64_t R = (E - weight_rows * k) / k;
  std::uint64_t c = 0;
  for (std::uint64_t done = 0; done < m; done += R) c += (std::min(R, m - done) + 1) * cdiv(k, P) + L;
  return c;
}
// min_search (m <= 8192 rows: one tile): m ceil(k / lanes) + L.
std::uint64_t min_search_cycles(std::uint64_t m, std::uint64_t k, std::uint64_t lanes) {
  return m * cdiv(k, lanes) + L;
}

command cmd(opcode op, std::uint32_t m, std::uint32_t k, std::uint64_t a = in_a, std::uint64_t b = in_b,
            std::uint64_t c = out_c) {
  static std::uint32_t next_id = 1;
  command d;
  d.id = next_id++;
  d.op = op;
  d.m = m;
  d.k = k;
  d.addr_a = a;
  d.addr_b = b;
  d.addr_c = c;
  return d;
}

std::vector<unsigned char> bytes(const command& c) {
  std::vector<unsigned char> v(sizeof c);
  std::memcpy(v.data(), &c, sizeof c);
  return v;
}

struct outcome {
  std::vector<completion> done;  // in completion order
  nlohmann::json results;
  double stat(const std::string& name) const {
    return results["stats"]["sfu"][name]["value"].get<double>();
  }
};

// Submits the commands at t = 0 (they queue and run in order) and runs to the end.
outcome run(const std::vector<command>& cmds, const std::vector<std::string>& overrides = {},
            const char* scenario = yaml) {
  test::bench b(scenario, overrides);
  for (const command& c : cmds) b.init().write(sfu_port, bytes(c));
  b.p->run();
  for (std::size_t i = 0; i < b.init().size(); ++i) REQUIRE(b.init()[i].status == tlm::TLM_OK_RESPONSE);
  outcome o;
  completion c;
  while (b.p->block("sfu")->pop_completion(c)) o.done.push_back(c);
  REQUIRE(o.done.size() == cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) REQUIRE(o.done[i].id == cmds[i].id);
  o.results = b.p->results();
  return o;
}

}  // namespace

TEST_CASE("sfu: element-wise LUT operations take ceil(n/P) + L cycles per tile", "[sfu]") {
  const auto o = run({cmd(opcode::exp, 1, 1000), cmd(opcode::gelu, 3, 100), cmd(opcode::silu, 16, 4096),
                      cmd(opcode::exp, 1, 16384), cmd(opcode::exp, 1, 16385)});
  for (const auto& c : o.done) CHECK(c.status == cmd_status::ok);
  CHECK(o.done[0].cycles == 40);  // ceil(1000 / 32) + 8
  CHECK(o.done[0].cycles == flat_cycles(1000, 1));
  CHECK(o.done[1].cycles == flat_cycles(300, 1));
  CHECK(o.done[2].cycles == 2080);  // 4 tiles of 16384 elements: 4 x (512 + 8)
  CHECK(o.done[2].cycles == flat_cycles(16 * 4096, 1));
  CHECK(o.done[3].cycles == 520);  // one full tile
  CHECK(o.done[4].cycles == 520 + 1 + 8);  // one element more: a second tile
  CHECK(o.stat("tiles") == 1 + 1 + 4 + 1 + 2);
}

TEST_CASE("sfu: add, mul and rope read two operands and use half-size tiles", "[sfu]") {
  const auto o = run({cmd(opcode::add, 1, 4096), cmd(opcode::mul, 4, 4096), cmd(opcode::rope, 16, 128)});
  for (const auto& c : o.done) CHECK(c.status == cmd_status::ok);
  CHECK(o.done[0].cycles == 136);  // 128 beats + 8
  CHECK(o.done[1].cycles == flat_cycles(4 * 4096, 2));
  CHECK(o.done[1].cycles == 2 * (256 + 8));
  CHECK(o.done[2].cycles == flat_cycles(16 * 128, 2));
  const double n = 4096 + 4 * 4096 + 16 * 128;
  CHECK(o.stat("bytes_read") == 2 * 2 * n);  // both inputs, 2 bytes each
  CHECK(o.stat("bytes_written") == 2 * n);
}

TEST_CASE("sfu: softmax costs (R + 1) ceil(k/P) + L per tile of R rows", "[sfu]") {
  const auto o = run({cmd(opcode::softmax, 4, 1000), cmd(opcode::softmax, 32, 2048),
                      cmd(opcode::softmax, 1, 8704), cmd(opcode::softmax, 1, 100)});
  for (const auto& c : o.done) CHECK(c.status == cmd_status::ok);
  CHECK(o.done[0].cycles == 168);   // 16 rows fit: (4 + 1) x 32 + 8
  CHECK(o.done[1].cycles == 2336);  // 8 rows of 2048 per tile: 4 x ((8 + 1) x 64 + 8)
  CHECK(o.done[2].cycles == 552);   // one row of 8704 scores: 2 x 272 + 8
  CHECK(o.done[3].cycles == two_pass_cycles(1, 100, 0));
  for (std::size_t i = 0; i < 3; ++i) {
    const std::uint64_t m[] = {4, 32, 1}, k[] = {1000, 2048, 8704};
    CHECK(o.done[i].cycles == two_pass_cycles(m[i], k[i], 0));
  }
  // Cost grows with the sequence length.
  CHECK(o.done[2].cycles > o.done[3].cycles);
}

TEST_CASE("sfu: softmax reads its scores exactly once and writes each result once", "[sfu]") {
  const std::uint32_t m = 32, k = 2048;  // four tiles
  const auto o = run({cmd(opcode::softmax, m, k)});
  CHECK(o.done[0].status == cmd_status::ok);
  CHECK(o.stat("bytes_read") == m * k * 2.0);
  CHECK(o.stat("bytes_written") == m * k * 2.0);
  CHECK(o.results["stats"]["mem"]["bytes_read"]["value"].get<double>() == m * k * 2.0);
  CHECK(o.results["stats"]["mem"]["bytes_written"]["value"].get<double>() == m * k * 2.0);
  CHECK(o.stat("elements_softmax") == m * k);
  CHECK(o.stat("beats") == 2.0 * m * (k / P));  // front and back pass
}

TEST_CASE("sfu: rmsnorm and layernorm read their weights once and tile around them", "[sfu]") {
  const auto o = run({cmd(opcode::rmsnorm, 16, 4096), cmd(opcode::layernorm, 4, 4096),
                      cmd(opcode::layernorm, 2, 100)});
  for (const auto& c : o.done) CHECK(c.status == cmd_status::ok);
  CHECK(o.done[0].cycles == 2864);  // 3 rows per tile: 5 x (4 x 128 + 8) + (2 x 128 + 8)
  CHECK(o.done[0].cycles == two_pass_cycles(16, 4096, 1));
  CHECK(o.done[1].cycles == 784);   // 2 rows per tile: 2 x (3 x 128 + 8)
  CHECK(o.done[1].cycles == two_pass_cycles(4, 4096, 2));
  CHECK(o.done[2].cycles == two_pass_cycles(2, 100, 2));
  const double x = 16 * 4096 + 4 * 4096 + 2 * 100;
  const double weights = 4096 + 2 * 4096 + 2 * 100;
  CHECK(o.stat("bytes_read") == 2 * (x + weights));
  CHECK(o.stat("bytes_written") == 2 * x);
}

TEST_CASE("sfu: the sequential min search compares one score per cycle and writes an index per row", "[sfu]") {
  const auto o = run({cmd(opcode::min_search, 32, 1000), cmd(opcode::min_search, 1, 10)});
  CHECK(o.done[0].status == cmd_status::ok);
  CHECK(o.done[0].cycles == 32008);  // 32 rows x 1000 scores + 8
  CHECK(o.done[0].cycles == min_search_cycles(32, 1000, 1));
  CHECK(o.done[1].cycles == min_search_cycles(1, 10, 1));
  CHECK(o.stat("bytes_read") == (32 * 1000 + 10) * 2.0);
  CHECK(o.stat("bytes_written") == (32 + 1) * 4.0);
}

TEST_CASE("sfu: a min search at the SFU width costs ceil(k/P) cycles per row", "[sfu]") {
  const auto o = run({cmd(opcode::min_search, 32, 1000)}, {"system.compute.sfu.min_search_elements_per_cycle=32"});
  CHECK(o.done[0].cycles == 1032);  // 32 x ceil(1000 / 32) + 8
  CHECK(o.done[0].cycles == min_search_cycles(32, 1000, 32));
}

TEST_CASE("sfu: throughput and pipeline latency are instance parameters", "[sfu]") {
  const auto o = run({cmd(opcode::exp, 1, 1000), cmd(opcode::softmax, 4, 1000)},
                     {"system.compute.sfu.elements_per_cycle=16", "system.compute.sfu.pipeline_latency_cycles=3"});
  CHECK(o.done[0].cycles == 63 + 3);           // ceil(1000 / 16) + 3
  CHECK(o.done[1].cycles == 5 * 63 + 3);       // (4 + 1) x 63 + 3
  CHECK(o.results["config"]["system"]["compute"]["sfu"]["buffer_KiB"].get<double>() == 32);
}

TEST_CASE("sfu: memory latency adds to the compute, which overlaps the operand stream", "[sfu]") {
  // Every access takes 100 ns: the 8 chunks of 4 KiB (8 in flight) arrive 100 cycles in, the
  // 512 beats run, the last result leaves L = 8 cycles later and its write takes 100 ns. Earlier
  // chunks are written as soon as their results are out.
  const auto o = run({cmd(opcode::exp, 1, 16384)}, {"system.memories.mem.latency_ns=100"});
  CHECK(o.done[0].cycles == 100 + 512 + 8 + 100);
  CHECK(o.stat("operand_wait_cycles") == Approx(100));
}

TEST_CASE("sfu: the write of a tile starts when its read has completed", "[sfu]") {
  // 1 KiB chunks, 8 in flight, 100 ns each: the 32 input chunks arrive in four rounds (at 100,
  // 200, 300, 400 ns) while the beats keep pace (16 beats a chunk); every result is out by
  // 400 + 128 + 8... but the 32 output chunks can only start at 400 ns, when the read transfer
  // is complete, and need four rounds of 100 ns: 800 cycles. The compute is hidden.
  const auto o = run({cmd(opcode::exp, 1, 16384)},
                     {"system.memories.mem.latency_ns=100", "system.compute.sfu.chunk_bytes=1024"});
  CHECK(o.done[0].cycles == 800);
  CHECK(o.stat("operand_wait_cycles") == Approx(100));
}

TEST_CASE("sfu: a narrow memory port makes an element-wise operation memory-bound", "[sfu]") {
  // The memory port moves 8 GB/s per direction: 8 chunks of 4 KiB in, then 8 out, 512 ns each
  // (the interconnect lets a transfer on an idle link overlap the memory's own, so one chunk may
  // come for free); the 512 beats of compute hide under the read. Compute-bound it would be 520.
  const auto o = run({cmd(opcode::silu, 1, 16384)}, {"system.interconnect.ports.mem.bandwidth_GBps=8"});
  CHECK(o.done[0].status == cmd_status::ok);
  CHECK(o.done[0].cycles >= 14 * 512 - 1);
  CHECK(o.done[0].cycles <= 16 * 512 + 64 + 8 + 1);
  CHECK(o.stat("operand_wait_cycles") > 3000);
  CHECK(o.results["stats"]["sfu"]["utilization"]["value"].get<double>() < 0.1);
}

TEST_CASE("sfu: energy is elements x the per-opcode energy of tech.sfu", "[sfu]") {
  const auto o = run({cmd(opcode::softmax, 4, 1000), cmd(opcode::exp, 2, 500), cmd(opcode::gelu, 1, 64),
                      cmd(opcode::silu, 1, 64), cmd(opcode::rmsnorm, 2, 256), cmd(opcode::layernorm, 2, 256),
                      cmd(opcode::rope, 2, 64), cmd(opcode::add, 1, 128), cmd(opcode::mul, 1, 128),
                      cmd(opcode::min_search, 8, 100)});
  for (const auto& c : o.done) CHECK(c.status == cmd_status::ok);
  // tech.sfu.energy_pJ_per_element: two-pass operations 53.0, the others 26.5.
  const std::vector<std::pair<std::string, double>> expect = {
      {"softmax", 4000 * 53.0}, {"exp", 1000 * 26.5},     {"gelu", 64 * 26.5},
      {"silu", 64 * 26.5},      {"rmsnorm", 512 * 53.0},  {"layernorm", 512 * 53.0},
      {"rope", 128 * 26.5},     {"add", 128 * 26.5},      {"mul", 128 * 26.5},
      {"min_search", 800 * 26.5}};
  double total = 0;
  for (const auto& [op, pJ] : expect) {
    CHECK(o.stat("commands_" + op) == 1);
    CHECK(o.stat("energy_" + op) == Approx(pJ * 1e-12));
    total += pJ * 1e-12;
  }
  CHECK(o.stat("elements_softmax") == 4000);
  CHECK(o.stat("elements_min_search") == 800);
  CHECK(o.results["energy_J"]["by_component"]["sfu.compute"].get<double>() == Approx(total));
  CHECK(o.stat("commands") == 10);
  CHECK(o.stat("area") == Approx(0.665));
}

TEST_CASE("sfu: malformed commands complete with an error status and the block keeps working", "[sfu]") {
  command odd_rope = cmd(opcode::rope, 1, 63);
  command bad_min_out = cmd(opcode::min_search, 1, 8, in_a, in_b, out_c + 2);
  const auto o = run({cmd(opcode::softmax, 0, 16), cmd(opcode::exp, 1, 0), cmd(opcode::gemm, 4, 4),
                      cmd(opcode::evict_select, 4, 4), cmd(opcode::softmax, 4, 16, in_a + 1),
                      cmd(opcode::add, 4, 16, in_a, in_b + 1), cmd(opcode::exp, 4, 16, in_a, in_b + 1),
                      cmd(opcode::exp, 4, 16, in_a, in_b, out_c + 3), bad_min_out, odd_rope,
                      cmd(opcode::softmax, 1, 16385), cmd(opcode::exp, 1u << 25, 1),
                      cmd(opcode::layernorm, 1, 6000), cmd(opcode::softmax, 4, 1000)});
  const cmd_status expect[] = {cmd_status::bad_shape,  cmd_status::bad_shape,  cmd_status::bad_opcode,
                               cmd_status::bad_opcode, cmd_status::misaligned, cmd_status::misaligned,
                               cmd_status::ok,  // exp does not use addr_b
                               cmd_status::misaligned, cmd_status::misaligned, cmd_status::bad_shape,
                               cmd_status::bad_shape,  // a softmax row larger than the buffer
                               cmd_status::bad_shape,  // 2^25 rows
                               cmd_status::bad_shape,  // LayerNorm row + gamma + beta > buffer
                               cmd_status::ok};
  for (std::size_t i = 0; i < o.done.size(); ++i) {
    INFO("command " << i);
    CHECK(o.done[i].status == expect[i]);
  }
  CHECK(o.done.back().cycles == 168);  // unaffected by what went before
  CHECK(o.stat("command_errors") == 12);
  CHECK(o.stat("commands_softmax") == 1);  // rejected commands do not count per opcode
}

TEST_CASE("sfu: an unmapped operand completes with bad_address", "[sfu]") {
  const auto o = run({cmd(opcode::exp, 4, 64, unmapped), cmd(opcode::add, 4, 64, in_a, unmapped),
                      cmd(opcode::softmax, 4, 64, in_a, in_b, unmapped),
                      cmd(opcode::rmsnorm, 4, 64, in_a, unmapped), cmd(opcode::exp, 1, 1000)});
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("command " << i);
    CHECK(o.done[i].status == cmd_status::bad_address);
  }
  CHECK(o.done[4].status == cmd_status::ok);
  CHECK(o.done[4].cycles == 40);
  CHECK(o.stat("command_errors") == 4);
}

TEST_CASE("sfu: operand sizes for placing operands", "[sfu]") {
  test::bench b(yaml);
  compute_block& s = *b.p->block("sfu");
  using arr = std::array<std::uint64_t, 4>;
  CHECK(s.operand_bytes(cmd(opcode::softmax, 4, 100)) == arr{800, 0, 800, 0});
  CHECK(s.operand_bytes(cmd(opcode::add, 4, 100)) == arr{800, 800, 800, 0});
  CHECK(s.operand_bytes(cmd(opcode::layernorm, 4, 100)) == arr{800, 400, 800, 0});
  CHECK(s.operand_bytes(cmd(opcode::min_search, 4, 100)) == arr{800, 0, 16, 0});
  CHECK(s.operand_bytes(cmd(opcode::gemm, 4, 100)) == arr{0, 0, 0, 0});
}

TEST_CASE("sfu: why it refuses a command, in its docs page's words, through the block base", "[sfu]") {
  test::bench b(yaml);
  const compute_block& s = *b.p->block("sfu");
  CHECK(s.design_limit(cmd(opcode::softmax, 4, 1000)).empty());
  CHECK(s.design_limit(cmd(opcode::rope, 1, 63)) == "rope rotates pairs: an even row length");
  CHECK(s.design_limit(cmd(opcode::exp, 1u << 25, 1)) == "at most 16777216 rows");
  CHECK(s.design_limit(cmd(opcode::softmax, 1, (1u << 24) + 1)) == "rows of at most 16777216 elements");
  CHECK(s.design_limit(cmd(opcode::exp, 1u << 16, 1u << 15)) ==
        "2147483648 elements, at most 1073741824 in one command");
  // Within its design, a row larger than the buffer: its configuration's doing.
  CHECK(s.design_limit(cmd(opcode::softmax, 1, 16385)).empty());
  CHECK(s.refusal(cmd(opcode::softmax, 1, 16385)) == "a row larger than its buffer");
  CHECK(s.refusal(cmd(opcode::rope, 1, 63)) == "rope rotates pairs: an even row length");
}
