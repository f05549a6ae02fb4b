// AERP's recomputation budget (firmware/policies/kv/recompute_budget.h): the cost model's
// arithmetic by hand on small cases, the policy's limits, and the platform's decision.
#include <catch2/catch.hpp>

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/kv/recompute_budget.h"
#include "firmware/workload/attention/attention_source.h"
#include "firmware/workload/model_zoo.h"
#include "tests/support/test_initiator.h"

using namespace kelle;

namespace {

// Llama2-7B's K and V projections on a 32 x 32 array at 1 GHz fed by a 64 GB/s DRAM and a
// 128 GB/s weight SRAM (Kelle's figures), cache in a 256 GB/s eDRAM.
recompute_hw llama2_7b(unsigned batch) {
  recompute_hw hw;
  hw.array_rows = 32;
  hw.array_cols = 32;
  hw.fill_cycles = 8;
  hw.double_buffered = true;
  hw.clock_Hz = 1e9;
  hw.mac_J = 1.08e-12;
  hw.idle_pe_J = 0.108e-12;
  hw.weight_stream_Bps = 64e9;
  hw.tile_read_Bps = 128e9;
  hw.tile_cols = 256;
  hw.arena_bytes = 262144;
  hw.arena_Bps = 256e9;
  hw.arena_access_J_per_byte = 84.8e-12;
  hw.hidden = 4096;
  hw.kv_dim = 4096;
  hw.q_dim = 4096;
  hw.batch = batch;
  hw.x_bytes = 8192;
  hw.kv_bytes = 16384;
  return hw;
}

recompute_store edram_store() { return {false, 256e9, 84.8e-12}; }

// A tiny multi-head model: 4 KV heads of 32, x of 64 values.
model_shape tiny(unsigned layers) {
  model_shape m;
  m.name = "tiny";
  m.layers = layers;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 32;
  return m;
}

}  // namespace

TEST_CASE("recompute budget: the array's, the port's and the staging's free rows by hand", "[recompute]") {
  // Batch 1: a fold's 1 KiB arrives in 1024 / 64 = 16 cycles; the array needs max(fill 8, 1 row,
  // 1024 / 128 = 8) = 8, so 16 - 1 = 15 stacked rows are free.
  auto b = decide_recompute(llama2_7b(1), edram_store());
  CHECK(b.fold_period_cycles == Approx(16));
  CHECK(b.fold_busy_cycles == Approx(8));
  CHECK(b.free_rows_array == 15);
  // Port, per 4096 x 256 tile: arrives in 1 MiB / 64 GB/s = 16.384 us; the array's port reads it
  // in 8.192 us plus the new row's 8 KiB in 0.032 us: 8.16 us left x 256 GB/s / 8 KiB = 255 rows.
  CHECK(b.free_rows_port == 255);
  // Staging: (256 KiB - 2 x 8 KiB (x, xn) - 8 KiB (q)) / (2 x 8 KiB of K and V a row) = 14.5,
  // less the batch's own row: 13.
  CHECK(b.free_rows_staging == 13);
  CHECK(b.free_rows == 13);
  // Batch 16: the 16 new rows fill the fold's 16 cycles: nothing is free.
  const auto b16 = decide_recompute(llama2_7b(16), edram_store());
  CHECK(b16.free_rows_array == 0);
  CHECK(b16.max_x_tokens == 0);
  // Without double buffering a fold is 8 + 1 + 62 = 71 cycles, past the 16-cycle period.
  auto hw = llama2_7b(1);
  hw.double_buffered = false;
  CHECK(decide_recompute(hw, edram_store()).free_rows_array == 0);
}

TEST_CASE("recompute budget: a token is recomputed only when the bytes it saves pay for its row", "[recompute]") {
  // One row: 2 x 4096 x 4096 MACs x (1.08 - 0.108) pJ = 32.6 uJ; its x re-read by the 2 x 16 tile
  // commands, 32 x 8 KiB x 84.8 pJ = 22.2 uJ; staging of its K and V, 2 x 16 KiB x 84.8 pJ = 2.8 uJ.
  const auto b = decide_recompute(llama2_7b(1), edram_store());
  const double row = 2.0 * 4096 * 4096 * 0.972e-12 + 32 * 8192 * 84.8e-12 + 2 * 16384 * 84.8e-12;
  CHECK(b.energy_per_row_J == Approx(row));
  CHECK(b.saving_per_byte_J == Approx(84.8e-12));
  // It pays when replaced x 84.8 pJ >= row: saved = replaced - 8 KiB >= row / 84.8 pJ - 8 KiB,
  // about 646 KB, far beyond the 8 KiB a Llama2-7B token's x saves: no x token on this hardware.
  CHECK(b.min_saved_bytes == Approx(row / 84.8e-12 - 8192));
  CHECK(b.max_x_tokens == 0);
  // A what-if shape where the x format saves far more than it re-reads: x of 64 values (128 B),
  // K and V of 4096 values each (16 KiB), the cache in a memory costing 8.48 nJ a byte. A row:
  // 2 x 64 x 4096 MACs x 0.972 pJ = 0.51 uJ, its x re-read by 32 tile commands 32 x 128 B x
  // 8.48 nJ = 34.7 uJ, staging 2.8 uJ: it pays above (38.0 uJ / 8.48 nJ) - 128 B = 4354 B saved.
  auto hw = llama2_7b(1);
  hw.hidden = 64;
  hw.x_bytes = 128;
  recompute_store costly = edram_store();
  costly.read_J_per_byte = 8.48e-9;
  const auto wide = decide_recompute(hw, costly);
  const double wrow = 2.0 * 64 * 4096 * 0.972e-12 + 32 * 128 * 8.48e-9 + 2 * 16384 * 84.8e-12;
  CHECK(wide.energy_per_row_J == Approx(wrow));
  CHECK(wide.min_saved_bytes == Approx(wrow / 8.48e-9 - 128));
  // Free rows: array 16 - 1 = 15; staging (262144 - 2 x 128 - 8192) / 16384 - 1 = 14.48 -> 14.
  CHECK(wide.free_rows_array == 15);
  CHECK(wide.free_rows_staging == 14);
  CHECK(wide.max_x_tokens == 14);
  // Beyond the slack a row costs 2 x 2 x 128 folds = 512 cycles and saves no time: capped.
  CHECK(wide.cycles_per_row_beyond == 512);
  // Batch 4: array 12, staging (262144 - 4 x 8448) / 16384 - 4 = 9.94 -> 9 rows: 2 per sequence.
  hw.batch = 4;
  CHECK(decide_recompute(hw, costly).max_x_tokens == 2);
}

TEST_CASE("recompute budget: x vectors in the weights' memory compete with the weight stream", "[recompute]") {
  // In DRAM every x re-read (32 x 8 KiB a row) delays the weight stream more than the 8 KiB the
  // attention no longer reads: no free rows, whatever the energy says.
  recompute_store dram{true, 64e9, 67.76e-12};
  auto hw = llama2_7b(1);
  const auto b = decide_recompute(hw, dram);
  CHECK(b.free_rows_port == 0);
  CHECK(b.free_rows == 0);
  CHECK(b.max_x_tokens == 0);
}

TEST_CASE("recompute budget: the policy holds at most the layer's limit of x tokens", "[recompute]") {
  config cfg = config::from_string(
      "kv: {kv_budget: 32, sink_tokens: 2, recent_window: 8, recompute: all}\n"
      "attention: {type: synthetic, head_sharing: 0.9}\n",
      "recompute.yaml");
  const model_shape m = tiny(2);
  auto src = make_attention_source(attention_source_args{cfg.root().child("attention"), m.layers, m.heads});
  auto run = [&](const kv_policy::recompute_limits* lim) {
    auto p = kv_policies().create("aerp", kv_policy_args{cfg.root().child("kv"), m, 1, src.get()});
    if (lim) p->set_recompute_limits(*lim);
    p->prefill(48);
    for (int i = 0; i < 16; ++i) p->decode();
    return std::make_pair(p->report(0, 0).x_tokens, p->report(0, 1).x_tokens);
  };
  const auto all = run(nullptr);
  REQUIRE(all.first > 3);
  REQUIRE(all.second > 3);
  kv_policy::recompute_limits lim{{3, 0}, {}};
  const auto capped = run(&lim);
  CHECK(capped.first == 3);
  CHECK(capped.second == 0);
  // A saving larger than any token's (4 heads x 128 B - 128 B of x = 384 B) stores nothing; one
  // of exactly 384 B only the tokens every head keeps (the popularity rule alone also takes the
  // tokens 3 of the 4 heads keep: 256 B saved).
  kv_policy::recompute_limits costly{{}, {385.0, 384.0}};
  const auto paid = run(&costly);
  CHECK(paid.first == 0);
  CHECK(paid.second > 0);
  CHECK(paid.second < all.second);
}

TEST_CASE("recompute budget: policy.recompute takes auto, all, none or a number", "[recompute]") {
  auto mode = [](const std::string& v) {
    config cfg = config::from_string("kv: {recompute: " + v + "}\nattention: {type: synthetic}\n", "r.yaml");
    const model_shape m = tiny(1);
    auto src = make_attention_source(attention_source_args{cfg.root().child("attention"), m.layers, m.heads});
    return kv_policies().create("aerp", kv_policy_args{cfg.root().child("kv"), m, 1, src.get()})->recompute_budget();
  };
  using k = kv_policy::recompute_request::mode;
  CHECK(mode("auto").kind == k::automatic);
  CHECK(mode("all").kind == k::all);
  CHECK(mode("none").kind == k::none);
  CHECK(mode("0").kind == k::none);
  CHECK(mode("12").kind == k::fixed);
  CHECK(mode("12").tokens == 12);
  for (const char* bad : {"some", "-3", "1.5", "12x"}) {
    INFO(bad);
    CHECK_THROWS_WITH(mode(bad), Catch::Contains("kv.recompute") && Catch::Contains("expected auto, all, none"));
  }
}
