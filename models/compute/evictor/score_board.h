// The functional core of the systolic evictor (plain C++, no SystemC, so the KV-cache policies
// reuse it): per attention head, one `score_bits`-bit importance register per KV slot, the
// quantised accumulation of pre-softmax q.k scores into them, and the choice of each head's
// victim (its minimum-score unprotected slot). See docs/models/compute-evictor.md.
//
// Quantisation (exactly): a row of q.k values x_0 .. x_{L-1} (one per valid slot, as the
// softmax would see them) with maximum X contributes to slot i
//
//   c_i = max(0, Q - floor((X - x_i) / scale)),   Q = 2^score_bits - 1
//
// i.e. the row's strongest token gets Q and each `scale` below the maximum costs one level; a
// token more than Q x scale below the maximum adds 0. It is a clipped linear stand-in for the
// softmax numerator exp(x_i - X): monotone (it never reorders the tokens of a row, up to
// quantisation), cheap (a subtraction, a shift when scale is a power of two, a saturating
// subtraction) and relative to the row's maximum like the softmax. Values that are not finite
// (NaN, +-inf) contribute 0 and do not count towards X. A register adds c_i and saturates at Q.
//
// Protection: a slot whose token position p satisfies p < sink_tokens (attention sinks) or
// p + recent_window >= newest (the recent_window tokens just before the newcomer at position
// `newest`, and anything not older than it) is never a victim.
//
// Ties: among equal minimum scores the lowest slot index wins (the min-propagation chain
// compares with a strict '<', so the entry that entered the chain first is kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kelle {

// The defaults are the paper's settings and the one source of them: the KV policies
// (kv_engine_params, firmware/policies/kv/kv_policy.h) default their sinks, window and score
// model to these. In an LLM run the firmware programs the protection from the KV policy and the
// policy's score model takes the width and scale of the system's evictor (docs/policies.md).
struct score_board_config {
  unsigned score_bits = 4;             // width of an importance register (1..16); paper: 4 bits
  double scale = 0.25;                 // q.k units per quantisation level (> 0)
  std::uint64_t sink_tokens = 10;      // the first tokens, always kept; paper: 10
  std::uint64_t recent_window = 64;    // the most recent tokens, always kept
};

class score_board {
 public:
  static constexpr std::uint32_t no_victim = 0xffffffffu;  // every valid slot is protected

  explicit score_board(const score_board_config& cfg = {});

  const score_board_config& config() const { return m_cfg; }
  void set_protection(std::uint64_t sink_tokens, std::uint64_t recent_window);
  // Q = 2^score_bits - 1, the largest register value and contribution.
  unsigned max_score() const { return m_max; }

  // The contribution of q.k value `x` to its slot in a row whose maximum is `row_max`.
  unsigned quantise(double x, double row_max) const;
  // Adds row[i]'s quantised contribution to slot i of `head` (i < len, the valid slots).
  void accumulate(unsigned head, const double* row, std::size_t len);
  void accumulate(unsigned head, const std::vector<double>& row) {
    accumulate(head, row.data(), row.size());
  }

  // The unprotected slot among [0, valid_tokens) with the lowest score (lowest index on ties),
  // or no_victim. `newest` is the position of the token arriving now (see the top of the file).
  std::uint32_t victim(unsigned head, std::uint32_t valid_tokens, std::uint64_t newest) const;
  bool is_protected(unsigned head, std::uint32_t slot, std::uint64_t newest) const;

  // The newcomer at token position `position` takes `slot`: its register restarts at 0.
  void replace(unsigned head, std::uint32_t slot, std::uint64_t position);
  // Preloads a slot (e.g. the scores a policy kept after prefill); score is clamped to Q.
  void set(unsigned head, std::uint32_t slot, unsigned score, std::uint64_t position);

  // A slot nobody has written reads as score 0 holding token position == slot index.
  unsigned score(unsigned head, std::uint32_t slot) const;
  std::uint64_t position(unsigned head, std::uint32_t slot) const;
  // Heads and slots with registers allocated so far (they grow on demand).
  unsigned heads() const { return static_cast<unsigned>(m_heads.size()); }
  std::uint32_t slots(unsigned head) const;
  void clear() { m_heads.clear(); }

 private:
  struct head_state {
    std::vector<std::uint16_t> score;
    std::vector<std::uint64_t> position;
  };
  head_state& grow(unsigned head, std::uint32_t slots);

  score_board_config m_cfg;
  unsigned m_max;
  std::vector<head_state> m_heads;
};

}  // namespace kelle
