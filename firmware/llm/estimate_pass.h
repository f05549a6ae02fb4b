// Internal to firmware/llm/: the first-order estimate's (estimate.h) resolved design and what a
// pass costs on it: the memories and blocks with their figures, the design's workload and
// placement, the ledger of a set of commands (bytes per memory, cycles and energy per block,
// time), and pass(), which prices one pass over the model command by command as layer_ops issues
// them (estimate_pass.cpp).
#pragma once

#include "firmware/workload/model_shape.h"
#include "models/compute/compute_block.h"
#include "models/memory/memory_target.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kelle::estimate_model {

constexpr std::uint64_t ab = model_shape::act_bytes;
constexpr std::size_t max_res = 16;  // memories and blocks a design may have, each
constexpr int none = -1;

inline std::uint64_t align(std::uint64_t v) { return (v + 4095) / 4096 * 4096; }  // memory_plan's alignment
inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

struct mem_info {
  std::string name;
  const memory_target* model = nullptr;
  double bw_Bps = 0;  // sustainable (docs/firmware.md, "Roofline")
  memory_target::first_order_figures fig;
  std::uint64_t capacity = 0;
};

struct block_info {
  std::string name;
  const compute_block* model = nullptr;
};

// What a set of commands uses: bytes read and written per memory, busy cycles and energy per
// block, and its time (the sum of its commands' times).
struct ledger {
  std::array<double, max_res> rd{}, wr{}, cyc{}, J{};
  double time_s = 0;
  double kv_live_bit_s = 0, act_live_bit_s = 0;  // live on-chip bits x time (refresh)
  double dram_kv = 0;  // bytes of the KV cache read from and written to the DRAM (traffic class kv)
  void add(const ledger& o, double w) {
    for (std::size_t i = 0; i < max_res; ++i) {
      rd[i] += w * o.rd[i];
      wr[i] += w * o.wr[i];
      cyc[i] += w * o.cyc[i];
      J[i] += w * o.J[i];
    }
    time_s += w * o.time_s;
    kv_live_bit_s += w * o.kv_live_bit_s;
    act_live_bit_s += w * o.act_live_bit_s;
    dram_kv += w * o.dram_kv;
  }
};

// A design resolved from its scenario: the hardware, the workload and the firmware's placement.
struct design {
  std::vector<mem_info> mems;
  std::vector<block_info> blocks;
  std::vector<double> clock_Hz;
  int dram = none, wmem = none, kvmem = none, amem = none;
  int rsa = none, sfu = none, evictor = none;
  unsigned rsa_cols = 1;
  model_shape m;
  unsigned batch = 1;
  std::uint64_t context = 0, decode = 0, budget = 0, kv_slots = 0;
  bool skip_prefill = false;
  std::uint64_t tile_buffer = 0, arena = 0;
  unsigned kv_on_chip = 0;
  std::uint64_t chip_tokens = 0;  // placement fill: the partly placed layer's on-chip slots
  std::vector<unsigned> chip_order;  // the order layers take the KV memory in (memory_plan::sizes)
  double kv_refresh_rate = 0;     // refreshes per second of a live KV bit (the policy's intervals)
  double act_refresh_rate = 0;    // of a live activation bit (the array's own interval)
};

// A pass of T new rows per sequence attending to N tokens, with `held` tokens of KV per sequence
// live in each layer's cache (refresh).
ledger pass(const design& d, std::uint64_t T, std::uint64_t N, std::uint64_t held, bool prefill, bool select);

}  // namespace kelle::estimate_model
