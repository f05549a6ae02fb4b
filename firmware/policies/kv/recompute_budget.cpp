#include "firmware/policies/kv/recompute_budget.h"

#include <algorithm>
#include <cmath>

namespace kelle {

namespace {
double ceil_div(double a, double b) { return std::ceil(a / b); }
double rows_at_least_zero(double r) { return r > 0 ? std::floor(r + 1e-9) : 0.0; }
}  // namespace

recompute_layer_budget decide_recompute(const recompute_hw& hw, const recompute_store& st) {
  recompute_layer_budget b;
  const double M = hw.batch, f = hw.clock_Hz, R = hw.array_rows, C = hw.array_cols;
  const double K = static_cast<double>(hw.hidden), N = static_cast<double>(hw.kv_dim);
  const double act = 2.0;  // bytes per 16-bit activation

  // The array: a fold's R x C int8 weights arrive in `period` cycles at the weight memory's peak
  // (a lower bound of the real period, so the free rows are not overestimated); the array needs
  // max(fill, rows, tile read) cycles for it when double-buffered, fill + rows + skew and drain
  // otherwise. A stacked row adds one cycle per fold.
  const double fold_bytes = R * C;
  b.fold_period_cycles = hw.weight_stream_Bps > 0 ? fold_bytes / hw.weight_stream_Bps * f : 0.0;
  const double tile_read = hw.tile_read_Bps > 0 ? fold_bytes / hw.tile_read_Bps * f : 0.0;
  if (hw.double_buffered) {
    b.fold_busy_cycles = std::max({hw.fill_cycles, M, tile_read});
    b.free_rows_array = b.fold_busy_cycles <= b.fold_period_cycles ? rows_at_least_zero(b.fold_period_cycles - M) : 0.0;
  } else {
    b.fold_busy_cycles = hw.fill_cycles + M + R + C - 2.0;
    b.free_rows_array = rows_at_least_zero(b.fold_period_cycles - b.fold_busy_cycles);
  }

  // The array's port: per weight tile (one GEMM command) it reads the tile from the tile buffer,
  // the new rows and every stacked row's x vector, all within the time the tile takes to arrive.
  const double tile_cols = hw.tile_cols ? static_cast<double>(hw.tile_cols) : N;
  const double tiles = 2.0 * ceil_div(N, tile_cols);  // W_K's and W_V's
  const double x_reread = hw.x_bytes * tiles;          // per stacked row and step
  const double saved_best = hw.kv_bytes - hw.x_bytes;  // every KV head keeps the token
  if (st.weight_memory) {
    // x re-read from the weight memory competes with the weight stream: free only if the
    // attention's saved reads pay for it.
    b.free_rows_port = x_reread <= saved_best ? b.free_rows_array : 0.0;
  } else if (st.bandwidth_Bps > 0 && hw.weight_stream_Bps > 0) {
    const double tile_bytes = K * tile_cols;
    const double arrive = tile_bytes / hw.weight_stream_Bps;
    const double busy = (hw.tile_read_Bps > 0 ? tile_bytes / hw.tile_read_Bps : 0.0) +
                        (hw.arena_Bps > 0 ? M * K * act / hw.arena_Bps : 0.0);
    b.free_rows_port = rows_at_least_zero((arrive - busy) * st.bandwidth_Bps / (K * act));
  }

  // Staging: the new and recomputed K and V of the batch beside the layer's live activations
  // (x, its normalised copy and q); what does not fit spills to DRAM, onto the weight stream.
  const double live = 2.0 * M * K * act + M * static_cast<double>(hw.q_dim) * act;
  b.free_rows_staging = rows_at_least_zero((hw.arena_bytes - live) / (2.0 * N * act) - M);
  b.free_rows = std::min({b.free_rows_array, b.free_rows_port, b.free_rows_staging});

  // Energy per stacked row and step: its MACs above the idle PE-cycles they replace, its x
  // re-reads, and the staging's write and read of its K and V. The saving: the attention reads
  // the K, V bytes a token's x replaces no more from the store.
  const double macs = 2.0 * K * N;
  b.energy_per_row_J = macs * std::max(0.0, hw.mac_J - hw.idle_pe_J) + x_reread * st.read_J_per_byte +
                       2.0 * (2.0 * N * act) * hw.arena_access_J_per_byte;
  b.saving_per_byte_J = st.read_J_per_byte;
  b.cycles_per_row_beyond = 2.0 * ceil_div(K, R) * ceil_div(N, C);

  // The decision. A token pays when the K, V bytes it replaces, read no more, save its row's
  // energy: replaced x r >= e, so saved = replaced - x >= e / r - x.
  if (b.saving_per_byte_J <= 0) {
    b.min_saved_bytes = std::numeric_limits<double>::infinity();
    b.max_x_tokens = 0;
    return b;
  }
  b.min_saved_bytes = std::max(1e-9, b.energy_per_row_J / b.saving_per_byte_J - hw.x_bytes);
  if (saved_best < b.min_saved_bytes) {
    b.max_x_tokens = 0;  // no token saves enough to pay for its recomputation
    return b;
  }
  // Beyond the slack a row costs cycles_per_row_beyond; it saves time only when the store is
  // the weight memory (its bytes are on the bottleneck).
  const double saved_s = st.weight_memory && hw.weight_stream_Bps > 0 ? (saved_best - x_reread) / hw.weight_stream_Bps : 0.0;
  if (b.cycles_per_row_beyond / f <= saved_s) {
    b.max_x_tokens = no_x_limit;
    return b;
  }
  b.max_x_tokens = static_cast<std::uint64_t>(std::floor(b.free_rows / M + 1e-9));
  return b;
}

}  // namespace kelle
