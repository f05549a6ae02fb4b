// AERP in functional mode: the x store, the staging buffers of the recomputed K and V rows, where
// the attention reads them, the copy of the new rows into the cache, the bit-for-bit check.
#include "firmware/functional/functional_run.h"

#include <algorithm>

namespace kelle {

bool functional_run::staged(unsigned l) const {
  return m_stage.layer == int(l) && m_stage.addr[0] && m_stage.addr[1];
}

std::uint64_t functional_run::staged_row(const stage& st, bool v, std::uint64_t row, unsigned kvh) const {
  return st.addr[v] + (row * m_kvh + kvh) * m_hd * 2;
}

int functional_run::stacked_index(unsigned l, unsigned b, std::uint32_t pos) const {
  const auto& xs = m_x[l];
  const auto it = std::lower_bound(xs.begin(), xs.end(), std::make_pair(b, pos));
  return it != xs.end() && *it == std::make_pair(b, pos) ? int(it - xs.begin()) : -1;
}

std::uint64_t functional_run::x_addr(unsigned l, unsigned b, std::uint64_t pos) const {
  return m_xstore + ((std::uint64_t(l) * m_batch + b) * (m_context + m_decode) + pos) * m_q.cfg.dim * 2;
}

std::uint64_t functional_run::key_addr(unsigned l, bool v, unsigned b, unsigned kvh, std::uint32_t pos) const {
  if (staged(l)) {  // AERP: the new token and the x tokens from the staging buffer
    if (pos >= m_pass.kv_offset) return staged_row(m_stage, v, (pos - m_pass.kv_offset) * m_batch + b, kvh);
    const int i = m_x_from_cache ? -1 : stacked_index(l, b, pos);
    if (i >= 0) return staged_row(m_stage, v, m_stage.rows + std::uint64_t(i), kvh);
  }
  return kv_addr(l, v, hs(l, b, kvh).pos_slot.at(pos), b, kvh);
}

void functional_run::check_recomputed(unsigned l, const stage& st) {
  // Each x token's recomputed K (after RoPE) and V against what its cache slot holds since the
  // token was projected, in every KV head that keeps it: the bytes as written (no fault).
  std::vector<unsigned char> a(m_hd * 2), c(m_hd * 2);
  const auto& xs = m_x[l];
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
      const auto& slots = hs(l, xs[i].first, kvh).pos_slot;
      const auto it = slots.find(xs[i].second);
      if (it == slots.end()) continue;  // this head has evicted the token
      for (bool v : {false, true}) {
        debug(tlm::TLM_READ_COMMAND, staged_row(st, v, st.rows + i, kvh), a.data(), a.size());
        debug(tlm::TLM_READ_COMMAND, kv_addr(l, v, it->second, xs[i].first, kvh), c.data(), c.size());
        m_recomputed_rows += 1;
        if (a == c) m_recomputed_equal += 1;
      }
    }
}

void functional_run::copy_new_rows(unsigned l, bool v) {
  // The staged new rows (K after its RoPE) into each head's slot for the token (a banded prefill:
  // the tokens the window keeps).
  if (!staged(l)) throw std::logic_error("functional: a copy of staged rows of layer " + std::to_string(l) + ", not staged");
  auto d = std::make_shared<fn::desc>();
  for (std::uint64_t row = 0; row < m_stage.rows; ++row) {
    const unsigned b = unsigned(row % m_batch);
    const std::uint32_t pos = std::uint32_t(m_pass.kv_offset + row / m_batch);
    for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
      const auto& slots = hs(l, b, kvh).pos_slot;
      const auto it = slots.find(pos);
      if (it == slots.end()) {  // a banded prefill's token before the window: gone
        if (!m_pass.banded(l)) throw std::logic_error("functional: a new token without a KV slot");
        continue;
      }
      d->moves.push_back({staged_row(m_stage, v, row, kvh), kv_addr(l, v, it->second, b, kvh), std::uint64_t(m_hd) * 2});
    }
  }
  attach(std::move(d));
  // A band's staging buffers are dead once copied (V is copied last): the arena reuses their bytes.
  if (v && m_pass.banded(l)) m_stage = stage{};
}

}  // namespace kelle
