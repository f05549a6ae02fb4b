// `sfu`: the special-function unit. Softmax with an online running maximum (Softermax style, one
// read of the scores), exp / GeLU / SiLU through lookup tables, RMSNorm and LayerNorm, RoPE,
// element-wise add and mul, and the sequential minimum search of the configuration without the
// systolic evictor. Elements are 16-bit. Operands stream through a local buffer in tiles; the
// datapath processes `elements_per_cycle` elements a cycle behind a fixed pipeline latency.
// Timing and energy only: operands move as timing-only transactions, no values are computed.
// See docs/models/compute-sfu.md.
#pragma once

#include "models/compute/compute_block.h"

#include <array>
#include <cstdint>
#include <vector>

namespace kelle {

class sfu : public compute_block {
 public:
  sfu(const sc_core::sc_module_name& name, const compute_args& args);

  // a: m x k input; b: the second m x k input (add, mul, RoPE sin/cos table) or the norm
  // weights (k gamma, then k beta for LayerNorm); c: m x k results, or m 32-bit indices
  // (min_search). All zero for an opcode the SFU does not implement.
  std::array<std::uint64_t, 4> operand_bytes(const command& c) const override;
  // elements, tiles, beats, operand_wait_cycles, utilization, energy_J of the last command.
  nlohmann::json last_command_report() const override;
  double work_cycles_at_peak() const override;  // elements over lanes (min_search: its own lanes)
  // Beats of the command's passes over its elements (a row's last beat may be partial), and its
  // elements x energy per element.
  first_order_cost first_order(const command& c) const override;
  double area_mm2() const override { return m_area_mm2; }
  // rope's even rows, max_rows, max_row_length, max_elements; a refusal within them is its
  // buffer's ("a row larger than its buffer").
  std::string design_limit(const command& c) const override;
  std::string refusal(const command& c) const override;

  static constexpr std::uint32_t first_op = static_cast<std::uint32_t>(opcode::softmax);
  static constexpr std::size_t op_count = 10;  // softmax .. min_search
  static constexpr std::uint64_t max_rows = 1ull << 24;
  static constexpr std::uint64_t max_row_length = 1ull << 24;
  static constexpr std::uint64_t max_elements = 1ull << 30;  // per operand of one command

  // How an opcode uses the datapath (see the docs page for the timing formulas).
  struct op_info {
    const char* name;
    unsigned inputs;       // m x k operands streamed in: 1, or 2 (add/mul: addr_b, rope: table)
    bool rows;             // processed row by row (a row's last beat may be partial)
    bool two_pass;         // a second pass over the local buffer applies a row statistic
    bool holds_row;        // a whole row must sit in the local buffer
    unsigned weight_rows;  // k-element vectors read once from addr_b (RMSNorm gamma; LN gamma, beta)
  };
  // nullptr when the SFU does not implement `op`.
  static const op_info* info(opcode op);

 protected:
  cmd_status validate(const command& c) const override;
  cmd_status execute(const command& c) override;

 private:
  // A run of consecutive front-pass beats that follow each other without a gap.
  struct beat_run {
    std::uint64_t first_beat;
    sc_core::sc_time start;  // the first beat begins here
  };
  struct tile_shape {
    std::uint64_t rows;      // rows in a full tile (row operations)
    std::uint64_t elements;  // elements in a full tile (flat operations)
  };

  tile_shape tile_for(const op_info& oi, std::uint64_t k) const;
  cmd_status run_command(const command& c, const op_info& oi);
  cmd_status run_tile(const command& c, const op_info& oi, std::uint64_t first_elem,
                      std::uint64_t elems);

  std::uint64_t m_lanes;            // elements per cycle of the datapath
  std::uint64_t m_min_lanes;        // elements per cycle of the minimum search
  std::uint64_t m_latency_cycles;   // pipeline latency
  std::uint64_t m_buffer_elements;  // local buffer capacity in 16-bit elements
  std::array<double, op_count> m_energy_J_per_element{};
  double m_area_mm2 = 0;

  std::array<stat*, op_count> m_op_commands{};
  std::array<stat*, op_count> m_op_elements{};
  stat& m_beats;
  stat& m_operand_wait;
  stat& m_tiles;
  // The last command's figures (last_command_report() builds its JSON only when asked).
  struct last_figures {
    bool valid = false;
    double elements = 0, tiles = 0, beats = 0, operand_wait_cycles = 0, utilization = 0, energy_J = 0;
  } m_last;
};

}  // namespace kelle
