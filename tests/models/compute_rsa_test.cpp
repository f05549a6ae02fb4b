// The reconfigurable systolic array: the weight-stationary cycle model, memory stalls, stacked
// recompute rows, the command interface's error statuses.
#include <catch2/catch.hpp>

#include "models/compute/rsa/rsa.h"
#include "tests/support/test_initiator.h"

#include <cstring>

using namespace kelle;

namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// One GEMM on an RSA whose operands sit in an ideal memory behind a free interconnect, so the
// array pipeline alone sets the time. Runs in a child process; returns results["op"].
nlohmann::json gemm(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::vector<std::string> extra_overrides = {}) {
  return nlohmann::json::parse(test::in_child_process([&] {
    std::vector<std::string> o = {"workload.m=" + std::to_string(m), "workload.k=" + std::to_string(k),
                                  "workload.n=" + std::to_string(n)};
    o.insert(o.end(), extra_overrides.begin(), extra_overrides.end());
    auto cfg = config::from_string(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: ideal, base_addr: 0, capacity_MiB: 4096, queue_depth: 64}
  compute:
    rsa: {model: rsa, base_addr: 0x200000000, rows: 32, cols: 32}
workload: {type: op, op: gemm, operands: mem}
)", "rsa.yaml", o);
    platform p(cfg);
    p.run();
    return p.results()["op"].dump();
  }));
}

// SCALE-Sim's analytical model of a weight-stationary array: (2R + C + M - 2) x folds.
double scalesim_ws(double R, double C, std::uint64_t m, std::uint64_t k, std::uint64_t n) {
  return (2 * R + C + m - 2) * ceil_div(k, R) * ceil_div(n, C);
}

}  // namespace

TEST_CASE("rsa: one weight row per cycle and no overlap equals the SCALE-Sim analytical model", "[rsa]") {
  struct shape {
    unsigned R, C;
    std::uint64_t m, k, n;
  };
  const std::vector<shape> shapes = {
      {32, 32, 1, 4096, 4096},   // decode GEMM (Llama2-7B q projection, one token)
      {32, 32, 16, 4096, 11008}, // decode, batch 16, FFN
      {32, 32, 128, 4096, 4096}, // prefill
      {32, 32, 7, 100, 50},      // partial folds in both dimensions
      {24, 24, 1, 4096, 4096},   // the SRAM baselines' array
      {24, 24, 512, 4096, 128},  // prefill, partial column fold
  };
  for (const auto& s : shapes) {
    INFO("R=" << s.R << " M=" << s.m << " K=" << s.k << " N=" << s.n);
    const auto r = gemm(s.m, s.k, s.n,
                        {"system.compute.rsa.rows=" + std::to_string(s.R),
                         "system.compute.rsa.cols=" + std::to_string(s.C),
                         "system.compute.rsa.weight_load_rows_per_cycle=1",
                         "system.compute.rsa.double_buffered_weights=false"});
    REQUIRE(r["status"] == "ok");
    CHECK(r["array_cycles"].get<double>() == Approx(scalesim_ws(s.R, s.C, s.m, s.k, s.n)).margin(1e-3));
    CHECK(r["stall_cycles"].get<double>() == Approx(0).margin(1e-6));
    CHECK(r["macs"].get<double>() == double(s.m * s.k * s.n));
  }
}

TEST_CASE("rsa: double-buffered weights overlap the next fold's load with the current fold", "[rsa]") {
  // fill = R / rows_per_cycle = 8 cycles; per fold max(M, fill); pipeline tail R + C - 2.
  for (std::uint64_t m : {1, 8, 16, 100}) {
    const std::uint64_t k = 4096, n = 4096, folds = 128 * 128;
    const auto r = gemm(m, k, n);
    INFO("M=" << m);
    const double expected = 8 + (folds - 1) * std::max<double>(m, 8) + m + 62;
    CHECK(r["array_cycles"].get<double>() == Approx(expected).margin(1e-3));
  }
  // A decode GEMM then takes 8 cycles per 1 KiB fold: 128 B of weights per cycle.
  const auto d = gemm(1, 4096, 4096);
  CHECK(16777216.0 / d["array_cycles"].get<double>() == Approx(128).epsilon(0.001));
}

TEST_CASE("rsa: stacked recompute rows add their stream cycles only", "[rsa]") {
  const std::vector<std::string> scalesim = {"system.compute.rsa.weight_load_rows_per_cycle=1",
                                             "system.compute.rsa.double_buffered_weights=false"};
  auto with_extra = scalesim;
  with_extra.push_back("workload.extra=5");
  const auto base = gemm(1, 4096, 128, scalesim), stacked = gemm(1, 4096, 128, with_extra);
  const double folds = 128 * 4;
  CHECK(stacked["array_cycles"].get<double>() - base["array_cycles"].get<double>() == Approx(5 * folds));
  CHECK(stacked["macs"].get<double>() == 6.0 * 4096 * 128);
  // With double buffering, 6 rows per fold still hide under the 8-cycle weight load: only the
  // last fold's stream grows.
  const auto b2 = gemm(1, 4096, 128), s2 = gemm(1, 4096, 128, {"workload.extra=5"});
  CHECK(s2["array_cycles"].get<double>() - b2["array_cycles"].get<double>() == Approx(5));
}

TEST_CASE("rsa: weights from DRAM take longer than from SRAM by the memory time", "[rsa]") {
  // 1 MiB of int8 weights (K = N = 1024), one token: the SRAM (128 GB/s) keeps pace with the
  // array's 128 B/cycle; the LPDDR4 streams at ~57 GB/s (docs/models/memory-lpddr4.md), so the
  // GEMM waits for DRAM.
  auto run = [](const char* mem) {
    return nlohmann::json::parse(test::in_child_process([&] {
      auto cfg = config::from_string("system: kelle_edram\nworkload: {type: op, op: gemm, m: 1, k: 1024, n: 1024}\n",
                                     "op.yaml", {std::string("workload.b_memory=") + mem});
      platform p(cfg);
      p.run();
      return p.results()["op"].dump();
    }));
  };
  const auto s = run("weight_sram"), d = run("dram");
  const double W = 1048576;
  const double t_sram = s["time_s"].get<double>(), t_dram = d["time_s"].get<double>();
  CHECK(t_sram == Approx(W / 128e9).epsilon(0.05));
  CHECK(t_dram == Approx(W / 57.1e9).epsilon(0.05));
  CHECK(t_dram - t_sram == Approx(W / 57.1e9 - W / 128e9).epsilon(0.1));
  CHECK(d["stall_cycles"].get<double>() > 0.5 * d["array_cycles"].get<double>());
}

TEST_CASE("rsa: an operand b held in the operand buffer (flag_b_held) moves no byte and waits for none", "[rsa]") {
  // The DRAM case above (1 MiB of B in the LPDDR4) with B held: a fused kernel's second use of
  // what its previous command read. No byte of B is read, no fold stalls, and the array's own
  // pipeline sets the time (the SRAM case's, which keeps pace with it, or less).
  auto run = [](std::uint32_t flags) {
    return nlohmann::json::parse(test::in_child_process([&] {
      auto cfg = config::from_string("system: kelle_edram\nworkload: {type: op, op: gemm, m: 1, k: 1024, n: 1024}\n",
                                     "op.yaml", {"workload.b_memory=dram", "workload.flags=" + std::to_string(flags)});
      platform p(cfg);
      p.run();
      return p.results().dump();
    }));
  };
  const auto fetched = run(0), held = run(flag_b_held);
  CHECK(fetched["stats"]["dram"]["bytes_read"]["value"].get<double>() >= 1048576);
  CHECK(held["stats"]["dram"]["bytes_read"]["value"].get<double>() == 0);
  CHECK(held["stats"]["rsa"]["weight_bytes"]["value"].get<double>() == 0);
  CHECK(held["op"]["stall_cycles"].get<double>() == 0);
  CHECK(held["op"]["macs"] == fetched["op"]["macs"]);
  CHECK(held["op"]["time_s"].get<double>() <= 1048576 / 128e9 * 1.05);
  CHECK(held["op"]["time_s"].get<double>() < 0.5 * fetched["op"]["time_s"].get<double>());
}

TEST_CASE("rsa: malformed commands complete with an error status and the array goes on", "[rsa]") {
  test::bench b(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: ideal, base_addr: 0, capacity_MiB: 64}
  compute:
    rsa: {model: rsa, base_addr: 0x200000000}
workload: {type: test_script}
)");
  auto& ti = b.init();
  auto submit = [&](command c, int at_ns) {
    std::vector<unsigned char> bytes(sizeof c);
    std::memcpy(bytes.data(), &c, sizeof c);
    return ti.write(0x200000000, bytes, sc_core::sc_time(at_ns, sc_core::SC_NS));
  };
  command ok;
  ok.op = opcode::gemm;
  ok.m = 1;
  ok.k = 64;
  ok.n = 64;
  ok.addr_a = 0;
  ok.addr_b = 4096;
  ok.addr_c = 8192;
  command zero = ok, wrong_op = ok, odd = ok, unmapped = ok, last = ok;
  zero.id = 1, zero.m = 0;
  wrong_op.id = 2, wrong_op.op = opcode::softmax;
  odd.id = 3, odd.addr_a = 1;
  unmapped.id = 4, unmapped.addr_b = 0x300000000;
  last.id = 5;
  submit(zero, 0);
  submit(wrong_op, 10);
  submit(odd, 20);
  submit(unmapped, 30);
  submit(last, 40);
  const auto bad_len = ti.write(0x200000000, std::vector<unsigned char>(16, 0), sc_core::sc_time(50, sc_core::SC_NS));
  b.p->run();
  CHECK(ti[bad_len].status == tlm::TLM_BURST_ERROR_RESPONSE);
  compute_block& rsa_block = *b.p->block("rsa");
  std::vector<completion> done;
  completion c;
  while (rsa_block.pop_completion(c)) done.push_back(c);
  REQUIRE(done.size() == 5);
  CHECK(done[0].status == cmd_status::bad_shape);
  CHECK(done[1].status == cmd_status::bad_opcode);
  CHECK(done[2].status == cmd_status::misaligned);
  CHECK(done[3].status == cmd_status::bad_address);
  CHECK(done[4].status == cmd_status::ok);
  CHECK(done[4].id == 5);
  CHECK(b.p->results()["stats"]["rsa"]["command_errors"]["value"] == 4.0);
}

TEST_CASE("rsa: energy is MACs x energy per MAC plus idle PE-cycles", "[rsa]") {
  const auto r = gemm(1, 64, 64);  // 4 folds of 32 x 32, 1 row each
  const double macs = 64 * 64;
  const double pe_cycles = r["array_cycles"].get<double>() * 1024;
  CHECK(r["compute_energy_J"].get<double>() == Approx(macs * 1.08e-12 + (pe_cycles - macs) * 0.108e-12));
}

TEST_CASE("rsa: a batch of independent products costs its folds one after another", "[rsa]") {
  const std::vector<std::string> scalesim = {"system.compute.rsa.weight_load_rows_per_cycle=1",
                                             "system.compute.rsa.double_buffered_weights=false"};
  auto batched = scalesim;
  batched.push_back("workload.batch=16");
  batched.push_back("workload.flags=2");  // 16-bit B, as in A . V
  const auto one = gemm(4, 128, 512, scalesim), many = gemm(4, 128, 512, batched);
  CHECK(many["array_cycles"].get<double>() == Approx(16 * one["array_cycles"].get<double>()));
  CHECK(many["macs"].get<double>() == 16.0 * 4 * 128 * 512);
  CHECK(many["folds"] == 16 * 4 * 16);
}
