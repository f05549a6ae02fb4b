#include "models/compute/evictor/score_board.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kelle {

score_board::score_board(const score_board_config& cfg) : m_cfg(cfg) {
  if (cfg.score_bits < 1 || cfg.score_bits > 16)
    throw std::invalid_argument("score_board: score_bits must be 1..16");
  if (!(cfg.scale > 0) || !std::isfinite(cfg.scale))
    throw std::invalid_argument("score_board: scale must be a positive finite number");
  m_max = (1u << cfg.score_bits) - 1;
}

void score_board::set_protection(std::uint64_t sink_tokens, std::uint64_t recent_window) {
  m_cfg.sink_tokens = sink_tokens;
  m_cfg.recent_window = recent_window;
}

unsigned score_board::quantise(double x, double row_max) const {
  if (!std::isfinite(x) || !std::isfinite(row_max)) return 0;
  const double d = (row_max - x) / m_cfg.scale;  // levels below the row's maximum
  if (!(d < static_cast<double>(m_max))) return 0;  // also catches NaN
  if (d <= 0) return m_max;
  return m_max - static_cast<unsigned>(std::floor(d));
}

score_board::head_state& score_board::grow(unsigned head, std::uint32_t slots) {
  if (head >= m_heads.size()) m_heads.resize(static_cast<std::size_t>(head) + 1);
  head_state& h = m_heads[head];
  const std::size_t old = h.score.size();
  if (slots > old) {
    h.score.resize(slots, 0);
    h.position.resize(slots);
    for (std::size_t i = old; i < slots; ++i) h.position[i] = i;
  }
  return h;
}

void score_board::accumulate(unsigned head, const double* row, std::size_t len) {
  if (len == 0) return;
  if (len > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("score_board: a row longer than 2^32 - 1 slots");
  double mx = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < len; ++i)
    if (std::isfinite(row[i])) mx = std::max(mx, row[i]);
  head_state& h = grow(head, static_cast<std::uint32_t>(len));
  for (std::size_t i = 0; i < len; ++i) {
    const unsigned s = h.score[i] + quantise(row[i], mx);
    h.score[i] = static_cast<std::uint16_t>(std::min(s, m_max));
  }
}

bool score_board::is_protected(unsigned head, std::uint32_t slot, std::uint64_t newest) const {
  const std::uint64_t p = position(head, slot);
  if (p < m_cfg.sink_tokens) return true;
  // p + recent_window >= newest, without overflow.
  return p >= newest || newest - p <= m_cfg.recent_window;
}

std::uint32_t score_board::victim(unsigned head, std::uint32_t valid_tokens, std::uint64_t newest) const {
  const head_state* h = head < m_heads.size() ? &m_heads[head] : nullptr;
  const std::uint32_t stored = h ? static_cast<std::uint32_t>(h->score.size()) : 0;
  const std::uint32_t written = std::min(stored, valid_tokens);
  std::uint32_t best = no_victim;
  unsigned best_score = 0;
  for (std::uint32_t i = 0; i < written; ++i) {
    if (is_protected(head, i, newest)) continue;
    const unsigned s = h->score[i];
    if (s == 0) return i;  // nothing scores lower, and later slots lose the tie
    if (best == no_victim || s < best_score) {  // strict '<': the lowest index wins ties
      best = i;
      best_score = s;
    }
  }
  // Slots never written score 0 and hold position == index: the first unprotected one, if any,
  // beats every written candidate (all of which score above 0 by now).
  if (valid_tokens > stored) {
    const std::uint64_t first = std::max<std::uint64_t>(stored, m_cfg.sink_tokens);
    if (first < valid_tokens && newest > m_cfg.recent_window && first < newest - m_cfg.recent_window)
      return static_cast<std::uint32_t>(first);
  }
  return best;
}

void score_board::replace(unsigned head, std::uint32_t slot, std::uint64_t position) {
  set(head, slot, 0, position);
}

void score_board::set(unsigned head, std::uint32_t slot, unsigned score, std::uint64_t position) {
  if (slot == no_victim) throw std::invalid_argument("score_board: no such slot");
  head_state& h = grow(head, slot + 1);
  h.score[slot] = static_cast<std::uint16_t>(std::min(score, m_max));
  h.position[slot] = position;
}

unsigned score_board::score(unsigned head, std::uint32_t slot) const {
  if (head >= m_heads.size() || slot >= m_heads[head].score.size()) return 0;
  return m_heads[head].score[slot];
}

std::uint64_t score_board::position(unsigned head, std::uint32_t slot) const {
  if (head >= m_heads.size() || slot >= m_heads[head].position.size()) return slot;
  return m_heads[head].position[slot];
}

std::uint32_t score_board::slots(unsigned head) const {
  return head < m_heads.size() ? static_cast<std::uint32_t>(m_heads[head].score.size()) : 0;
}

}  // namespace kelle
