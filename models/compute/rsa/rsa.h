// `rsa`: the reconfigurable systolic array, R x C weight-stationary PEs (8-bit weights, 16-bit
// activations). Commands: gemm (C = A . B, B int8 weights K x N), gemm_transposed (C = A . B^T in
// place, B 16-bit, e.g. q . K^T), both with optional stacked recompute rows (command.extra rows
// of inputs at addr_d appended to A's M rows, as AERP recomputes K and V of tokens stored as x).
//
// Timing (docs/models/compute-rsa.md): B is cut into F = ceil(K/R) x ceil(N/C) folds; each fold's
// weights are loaded into the PEs (fill: ceil(R / weight_load_rows_per_cycle) cycles), the
// M' = M + extra input rows stream through (M' cycles), and results leave after the input skew
// and pipeline drain (R - 1 + C - 1 cycles). Without double-buffered PE weight registers the
// folds run one after another: F x (fill + M' + R + C - 2) cycles, which with one row per cycle
// is the SCALE-Sim analytical model (2R + C + M' - 2) x F exactly. With double buffering the
// next fold's weights load while the current fold streams. Weights arrive over the interconnect
// in chunks; a fold cannot load before its weights have arrived, and the operand buffer holds
// at most `weight_buffer_bytes` ahead of the PEs.
#pragma once

#include "models/compute/compute_block.h"

#include <vector>

namespace kelle {

// Watches the score rows that a gemm_transposed with flag_scores_to_evictor produces: the
// systolic evictor, which sits beside the array and consumes the rows as they leave it.
class score_listener {
 public:
  virtual ~score_listener() = default;
  // Rows of `c` (c.m + c.extra rows of c.n scores) left the array from `first_row` to
  // `last_row` (one row per cycle of the stream, after the skew and drain).
  virtual void on_scores(const command& c, const sc_core::sc_time& first_row,
                         const sc_core::sc_time& last_row) = 0;
};

class rsa : public compute_block {
 public:
  // The largest m, k, n, extra and batch of a command (larger: bad_shape).
  static constexpr std::uint32_t max_dim = 1u << 24;

  void set_score_listener(score_listener* l) { m_listener = l; }

  rsa(const sc_core::sc_module_name& name, const compute_args& args);

  const array_params* systolic_array() const override { return &m_array; }
  unsigned rows() const { return m_rows; }
  unsigned cols() const { return m_cols; }
  // Cycles of a GEMM's array pipeline when weights are always there (no memory stalls).
  double ideal_cycles(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::uint64_t batch = 1) const;

  std::array<std::uint64_t, 4> operand_bytes(const command& c) const override;
  nlohmann::json last_command_report() const override;
  // MACs over the PEs.
  double work_cycles_at_peak() const override { return m_macs.value() / (double(m_rows) * double(m_cols)); }
  // ideal_cycles() of the command (stacked rows included); MACs and idle PE-cycles as execute()
  // charges them.
  first_order_cost first_order(const command& c) const override;
  double area_mm2() const override { return m_area_mm2; }
  // "m, k, n and batch at most <max_dim> each": what it says of any command it refuses.
  std::string design_limit(const command& c) const override;
  std::string refusal(const command& c) const override;

 protected:
  cmd_status validate(const command& c) const override;
  cmd_status execute(const command& c) override;

 private:
  struct fold_schedule;

  unsigned m_rows, m_cols;
  unsigned m_rows_per_cycle;       // weight rows loaded into the PEs per cycle
  bool m_double_buffered;          // PE weight registers are double-buffered
  std::uint64_t m_buffer_bytes;    // operand buffer between the interconnect and the PEs
  double m_mac_J, m_idle_J;
  double m_area_mm2;               // PEs x area per PE
  stat& m_macs;
  stat& m_pe_cycles;               // R x C x busy cycles of GEMM commands
  stat& m_stall_cycles;            // cycles folds waited for their weights
  stat& m_recompute_macs;
  stat& m_weight_bytes;
  array_params m_array;            // the above, for systolic_array()
  // The last command's figures (last_command_report() builds its JSON only when asked).
  struct last_figures {
    bool valid = false;
    double macs = 0, array_cycles = 0, ideal_array_cycles = 0, stall_cycles = 0, utilization = 0, energy_J = 0;
    std::uint64_t folds = 0;
  } m_last;
  score_listener* m_listener = nullptr;
  // overlap_commands: when the array finishes the command being completed, and when the places
  // of the operand buffer its last chunks hold free up (s).
  double m_array_free = 0.0;
  std::vector<double> m_prev_consumed;
};

}  // namespace kelle
