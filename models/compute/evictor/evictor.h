// `evictor`: the systolic evictor of Kelle (paper section 5.3): a column of importance-score
// registers S and a min-propagation chain M beside the RSA. While a gemm_transposed with
// flag_scores_to_evictor streams q . K^T rows out of the array, the evictor adds each score
// (quantised, before softmax) to its token's importance register and carries the running
// minimum down the chain, one row per cycle, in step with the array: it adds no time to the RSA
// command, and when the last row has left the array each head's victim is known.
//
// Command `evict_select` (docs/models/compute-evictor.md):
//   m      = heads (victims to choose; at most `max_heads`)
//   k      = valid tokens: the occupied KV slots 0 .. k-1 of each head
//   n      = position of the newest token, the one arriving now; it takes each victim's slot
//            (so k <= n: the cached tokens are older than it)
//   addr_c = where the m victim slot indices are written (32-bit each, 4-byte aligned;
//            0xffffffff for a head whose every valid slot is protected)
//   extra, flags, addr_a, addr_b, addr_d: unused (0).
// It takes `select_cycles` (the minima are already in the chain) plus the write of the result,
// hands each victim to the eviction sink (the eDRAM controller's eviction controller) and resets
// the victim's score register for the newcomer. Operands move as timing-only transactions, so
// the written indices carry no data; the victims are in last_command_report() and go to the sink.
#pragma once

#include "models/compute/compute_block.h"
#include "models/compute/evictor/score_board.h"
#include "models/compute/rsa/rsa.h"

#include <vector>

namespace kelle {

// Receives each head's victim when an evict_select completes its selection (implemented by the
// eDRAM controller's eviction controller, which overwrites the slot with the newcomer's K/V).
class eviction_sink {
 public:
  virtual ~eviction_sink() = default;
  virtual void evict(unsigned head, std::uint32_t slot) = 0;
};

class evictor : public compute_block, public score_listener {
 public:
  evictor(const sc_core::sc_module_name& name, const compute_args& args);

  // Registers with the RSA named by the `rsa` parameter (a config error if there is none).
  void connect(platform_view& platform) override;
  // Score rows of an RSA command: accounted (rows, active cycles, energy); no time is added.
  void on_scores(const command& c, const sc_core::sc_time& first_row,
                 const sc_core::sc_time& last_row) override;

  // nullptr (the default): victims are only counted.
  void set_eviction_sink(eviction_sink* s) { m_sink = s; }
  // The importance registers. A functional run (a KV policy that has the q.k values) feeds
  // them with accumulate(); a timing-only run leaves them as they are (all zeros at first).
  score_board& board() { return m_board; }
  const score_board& board() const { return m_board; }

  std::array<std::uint64_t, 4> operand_bytes(const command& c) const override;
  // victims (per head), protected_heads, select_cycles, energy_J of the last evict_select.
  nlohmann::json last_command_report() const override;

  std::uint64_t max_heads() const { return m_max_heads; }
  std::uint64_t max_slots() const { return m_max_slots; }  // KV slots per head (a command's k at most)
  std::uint64_t victim_select_heads() const override { return m_max_heads; }
  std::uint64_t victim_select_slots() const override { return m_max_slots; }
  score_board* victim_scores() override { return &m_board; }
  // "at most <max_slots> slots a head (k) and <max_heads> heads (m)": what it says of any command
  // it refuses.
  std::string design_limit(const command& c) const override;
  std::string refusal(const command& c) const override;
  double work_cycles_at_peak() const override { return m_active_cycles.value(); }
  std::uint64_t select_cycles() const { return m_select_cycles; }
  double power_W() const { return m_power_W; }
  double area_mm2() const override { return m_area_mm2; }

 protected:
  cmd_status validate(const command& c) const override;
  cmd_status execute(const command& c) override;

 private:
  double m_area_mm2 = 0;
  std::string m_rsa_name;
  rsa* m_rsa = nullptr;
  eviction_sink* m_sink = nullptr;
  score_board m_board;
  std::uint64_t m_max_heads;
  std::uint64_t m_max_slots;
  std::uint64_t m_select_cycles;
  double m_power_W;
  sc_core::sc_time m_scores_ready;  // the last announced score row leaves the array

  stat& m_score_rows;
  stat& m_scores;
  stat& m_score_cycles;
  stat& m_active_cycles;
  stat& m_selections;
  stat& m_victims;
  stat& m_protected_heads;
  // The last command's figures (last_command_report() builds its JSON only when asked).
  struct last_figures {
    bool valid = false;
    std::vector<std::uint32_t> victims;  // per head; reused from command to command
    unsigned protected_heads = 0;
    std::uint64_t select_cycles = 0;
    double energy_J = 0;
  } m_last;
};

}  // namespace kelle
