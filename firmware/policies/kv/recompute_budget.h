// AERP's recomputation budget, decided from the modelled hardware (docs/policies/aerp.md, "The
// recomputation budget"). Plain C++: the firmware fills the inputs from the platform's models.
//
// Per layer and decode step, a token stored as x costs a row stacked under the batch's new rows
// in MM_k and MM_v (its K and V recomputed: 2 x hidden x kv_dim MACs), a re-read of its x vector
// by every weight tile's command, and the staging of its recomputed K and V; it saves the K, V
// bytes it replaces, less its own x bytes, in the memory that holds the layer's cache. The rule:
// a layer recomputes only rows that cost no time (the array's and its port's slack while the
// weight stream is the bottleneck, and staging that fits the activation arena) and tokens whose
// saving pays for their energy; `all`, `none` and a fixed number are what-if modes.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace kelle {

// The hardware facts the decision uses (every one from a model's parameters).
struct recompute_hw {
  // The systolic array.
  unsigned array_rows = 32, array_cols = 32;
  double fill_cycles = 8;         // cycles to load a fold's weights into the PEs
  bool double_buffered = true;    // the next fold's weights load while the current one streams
  double clock_Hz = 1e9;
  double mac_J = 0, idle_pe_J = 0;
  // The weight stream: the tiles arrive from the weight memory (DRAM) into the tile buffers,
  // which the array reads.
  double weight_stream_Bps = 0;   // the weight memory's peak: the fastest the weights arrive
  double tile_read_Bps = 0;       // the tile buffers' memory, peak
  std::uint64_t tile_cols = 0;    // columns of W_K / W_V per tile (one GEMM command each)
  // The activation arena, where the staging buffers of new and recomputed K and V go.
  double arena_bytes = 0;
  double arena_Bps = 0;           // its memory's peak (the array reads the new rows from it)
  double arena_access_J_per_byte = 0;
  // The model and the batch.
  std::uint64_t hidden = 0, kv_dim = 0, q_dim = 0;  // x, K (or V) and q widths, elements
  unsigned batch = 1;
  double x_bytes = 0;             // one token's x vector (hidden x 2 B)
  double kv_bytes = 0;            // one token's K and V over every KV head (2 x kv_dim x 2 B)
};

// Where one layer's cache (and so its x vectors) is stored.
struct recompute_store {
  bool weight_memory = false;     // the weights' memory (DRAM): its traffic competes with the weight stream
  double bandwidth_Bps = 0;       // peak
  double read_J_per_byte = 0;
};

struct recompute_layer_budget {
  // The decision.
  std::uint64_t max_x_tokens = 0;  // per sequence (UINT64_MAX: no limit)
  double min_saved_bytes = 0;      // K, V bytes an x token must replace beyond its x bytes
  // The cost model's figures (per decode step of this layer), for the report.
  double fold_period_cycles = 0;   // cycles a fold's weights take to arrive
  double fold_busy_cycles = 0;     // cycles the array needs per fold for the new rows
  double free_rows_array = 0;      // stacked rows (whole batch) the array absorbs without stalling
  double free_rows_port = 0;       // rows whose x re-reads fit the array port's slack
  double free_rows_staging = 0;    // rows whose staging fits the activation arena
  double free_rows = 0;            // the smallest of the three (0 when the store competes with the weights)
  double energy_per_row_J = 0;     // one stacked row: MACs above idle, x re-reads, staging
  double saving_per_byte_J = 0;    // one K, V byte not read from the store
  double cycles_per_row_beyond = 0;  // array cycles a row adds once the slack is used up
};

constexpr std::uint64_t no_x_limit = std::numeric_limits<std::uint64_t>::max();

// The automatic budget of one layer whose cache is in `store`.
recompute_layer_budget decide_recompute(const recompute_hw& hw, const recompute_store& store);

}  // namespace kelle
