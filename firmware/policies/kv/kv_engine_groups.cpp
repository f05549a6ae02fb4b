// The KV-cache engine's report after each pass (kv_engine.h): stored sizes and bytes, and the
// 2DRP high/low-score groups, computed in every pass or when asked.
#include "firmware/policies/kv/kv_engine.h"

namespace kelle {

void kv_engine::groups_each_pass(const std::vector<bool>& layers) {
  // A tracked layer reports for the model layers mapped to it: needed if any of them is.
  std::vector<bool> need(m_layers.size(), false);
  for (unsigned l = 0; l < m_model.layers && l < layers.size(); ++l)
    if (layers[l]) need[m_layer_rep[l]] = true;
  for (auto& seq : m_state)
    for (std::size_t li = 0; li < seq.size(); ++li) seq[li].groups_each_pass = need[li];
}

void kv_engine::update_groups() {
  for (auto& seq : m_state)
    for (layer_state& ls : seq)
      if (ls.groups_stale) groups(ls);
}

void kv_engine::finish(layer_state& ls, u64 n, bool) {
  kv_layer_report& r = ls.rep;
  double kept = 0, kv = 0;
  for (head_state& hs : ls.heads) {
    kept += double(hs.pos.size());
    for (u32 p : hs.pos) kv += ls.x[p] ? 0 : 1;
  }
  const double xb = double(m_model.x_bytes_per_token()), pb = pair_bytes();
  r.kept_pairs = kept * m_head_scale;
  r.kept_per_head = r.kept_pairs / m_model.kv_heads;
  r.x_tokens = double(ls.x_tokens);
  r.kv_pairs = kv * m_head_scale;
  r.kv_bytes = r.kv_pairs * pb;
  r.x_bytes = r.x_tokens * xb;
  ls.groups_n = n;
  ls.groups_stale = true;
  if (ls.groups_each_pass) groups(ls);
}

void kv_engine::groups(layer_state& ls) {
  kv_layer_report& r = ls.rep;
  const u64 n = ls.groups_n;
  ls.groups_stale = false;
  // Counted without branches on the scores (above or below the median is a coin toss), in
  // integers (the same sums as adding ones in double); x tokens' votes only when there are any.
  const bool any_x = ls.x_tokens > 0;
  if (any_x) {
    m_high.assign(n, 0);
    m_seen.assign(n, 0);
  }
  u64 hkv = 0, lkv = 0;
  for (head_state& hs : ls.heads) {
    if (hs.pos.empty()) continue;
    const double median = score_median(hs.score, hs.median, m_tmp);
    const std::size_t m = hs.pos.size();
    const u32* pos = hs.pos.data();
    const double* score = hs.score.data();
    if (!any_x) {
      u64 high = 0;
      for (std::size_t i = 0; i < m; ++i) high += score[i] > median;
      hkv += high;
      lkv += m - high;
      continue;
    }
    for (std::size_t i = 0; i < m; ++i) {
      const unsigned high = score[i] > median, x = ls.x[pos[i]] != 0;
      m_high[pos[i]] += high & x;
      hkv += high & (x ^ 1u);
      lkv += (high ^ 1u) & (x ^ 1u);
    }
  }
  double hx = 0, lx = 0;
  if (any_x)
    for (head_state& hs : ls.heads)
      for (u32 p : hs.pos)
        if (ls.x[p] && !m_seen[p]) {
          m_seen[p] = 1;
          (2u * m_high[p] > ls.count[p] ? hx : lx) += 1;
        }
  const double xb = double(m_model.x_bytes_per_token()), pb = pair_bytes();
  r.high_kv_pairs = double(hkv) * m_head_scale;
  r.low_kv_pairs = double(lkv) * m_head_scale;
  r.high_x_tokens = hx;
  r.low_x_tokens = lx;
  r.high_bytes = r.high_kv_pairs * pb + hx * xb;
  r.low_bytes = r.low_kv_pairs * pb + lx * xb;
}

}  // namespace kelle
