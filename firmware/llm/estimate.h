// The first-order model of an LLM run (`kelle-vp estimate`, docs/explore.md): the same scenario,
// hardware and models as `kelle-vp run`, without simulating. Each memory and compute block is
// the model a run builds (chosen by name from its registry, constructed from the scenario's
// section, never simulated): the estimate asks it its figures (memory_target::first_order,
// sustainable_bandwidth_Bps, area_mm2; compute_block::first_order, area_mm2). The firmware's
// placement and buffer rules (layer_ops::tile_cols, score_heads, activation_arena::place, the
// on-chip KV layers of memory_plan) decide which memory each operand is in.
//
// What it computes, per phase (the prefill, then decode): each command a layer issues (the
// projections tile by tile, the attention per group of KV heads, the SFU's operations) moves
// its operand bytes on the memories they are in and keeps its block busy for first_order()
// cycles. A command's time is the largest of its demands (bytes over the memory's sustainable
// bandwidth, cycles over the clock: it overlaps its own weight streaming and compute, as the
// blocks do), and a pass's time is the sum over its commands (no overlap across commands); the
// roofline bound (the largest demand over the whole phase) and the no-overlap time are given
// beside it. Decode steps differ only in the tokens attended: the steps where the cache grows
// are integrated by Simpson's rule over three steps (exact for a cost linear in the step when
// their number g is odd; a term quadratic in the step is off by g(g-1)/6 times its coefficient,
// about 1/(2g) of its sum), the
// steps at the KV budget are one step times their count. Energy: bytes x energy per byte, the
// blocks' command energies, static power x time, eDRAM refresh of the live KV (and of the
// residual stream when it is on chip) at the refresh policy's intervals.
//
// What it leaves out (each named with its size in docs/explore.md): AERP's recomputed rows and
// x stores, overlap across commands (the Kelle scheduler's prefetch of the next weights), bank
// conflicts and DRAM row misses beyond a sequential stream, refresh stealing eDRAM bank time,
// the refresh of activation buffers other than the residual stream, the evictor's energy.
#pragma once

#include "platform/config/config.h"

#include <nlohmann/json.hpp>

#include <memory>

namespace kelle {

class first_order_estimate {
 public:
  first_order_estimate();
  ~first_order_estimate();
  // Evaluates the scenario `cfg` (loaded with its overrides). Input errors throw config_error
  // naming the key. The models built for it are kept for the next scenarios with the same
  // sections (a search evaluates thousands of designs that share them); `cfg` is kept alive with
  // them.
  nlohmann::json evaluate(const std::shared_ptr<config>& cfg);

 private:
  struct cache;
  std::unique_ptr<cache> m_cache;
};

}  // namespace kelle
