// The KV-cache engine shared by every policy (kv_engine.h): setup, the exact-state queries, and
// the prefill and decode passes (scoring, eviction, AERP's conversion to x).
#include "firmware/policies/kv/kv_engine.h"

#include <algorithm>
#include <cmath>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <limits>
#include <stdexcept>

namespace kelle {

kv_engine::kv_engine(const kv_policy_args& a, const kv_engine_params& p)
    : m_p(p), m_model(a.model), m_batch(a.batch), m_src(a.source), m_deferred(a.deferred_scores) {
  if (!m_src) throw std::logic_error("kv policy: no attention source");
  if (m_batch == 0) throw std::logic_error("kv policy: empty batch");
  if (m_model.kv_heads == 0 || m_model.heads % m_model.kv_heads)
    throw std::logic_error("kv policy: heads must be a multiple of kv_heads");
  if (m_src->heads() != m_model.heads || m_src->layers() < 1)
    a.cfg.fail("", "the attention source has " + std::to_string(m_src->heads()) +
                       " heads, the model " + std::to_string(m_model.heads));
  m_group = m_model.heads / m_model.kv_heads;
  m_exact_seq = p.exact_sequences ? std::min(p.exact_sequences, m_batch) : m_batch;
  const unsigned eh = p.exact_heads ? std::min<unsigned>(p.exact_heads, m_model.kv_heads)
                                    : m_model.kv_heads;
  m_head_tracked.assign(m_model.kv_heads, -1);
  for (unsigned i = 0; i < eh; ++i) {  // evenly spaced heads
    const unsigned h = static_cast<unsigned>(u64(i) * m_model.kv_heads / eh);
    m_head_tracked[h] = static_cast<int>(m_heads.size());
    m_heads.push_back(h);
  }
  m_head_scale = double(m_model.kv_heads) / double(m_heads.size());
  score_board_config sb;
  sb.score_bits = p.score_bits;
  sb.scale = p.score_scale;
  m_board = score_board(sb);
  const unsigned el = p.exact_layers ? std::min(p.exact_layers, m_model.layers) : m_model.layers;
  m_layer_rep.resize(m_model.layers);
  m_layer_tracked.assign(m_model.layers, -1);
  for (unsigned i = 0; i < el; ++i) {  // evenly spaced layers; layer l reports its sample
    const unsigned l = static_cast<unsigned>(u64(i) * m_model.layers / el);
    m_layer_tracked[l] = static_cast<int>(m_layers.size());
    m_layers.push_back(l);
  }
  for (unsigned l = 0; l < m_model.layers; ++l)
    m_layer_rep[l] = static_cast<unsigned>(u64(l) * el / m_model.layers);
  m_state.assign(m_exact_seq, std::vector<layer_state>(m_layers.size()));
  for (auto& seq : m_state)
    for (auto& l : seq) l.heads.resize(m_heads.size());
}

void kv_engine::set_recompute_limits(const recompute_limits& l) {
  if (m_tokens) throw std::logic_error("kv policy: recompute limits set after the first pass");
  if ((!l.max_x_tokens.empty() && l.max_x_tokens.size() != m_model.layers) ||
      (!l.min_saved_bytes.empty() && l.min_saved_bytes.size() != m_model.layers))
    throw std::logic_error("kv policy: recompute limits need one entry per layer");
  m_x_cap.assign(m_layers.size(), std::numeric_limits<u64>::max());
  m_x_min_saved.assign(m_layers.size(), 0.0);
  // A tracked layer stands for the layers mapped to it: it takes its own layer's limits.
  for (std::size_t li = 0; li < m_layers.size(); ++li) {
    if (!l.max_x_tokens.empty()) m_x_cap[li] = l.max_x_tokens[m_layers[li]];
    if (!l.min_saved_bytes.empty()) m_x_min_saved[li] = l.min_saved_bytes[m_layers[li]];
  }
}

std::vector<std::uint32_t> kv_engine::kept(unsigned s, unsigned l, unsigned h) const {
  std::vector<u32> v = head(s, l, h).pos;
  std::sort(v.begin(), v.end());
  return v;
}

double kv_engine::score(unsigned s, unsigned l, unsigned h, u32 position) const {
  const head_state& hs = head(s, l, h);
  for (std::size_t i = 0; i < hs.pos.size(); ++i)
    if (hs.pos[i] == position) return hs.score[i];
  throw std::out_of_range("kv policy: position not kept by that head");
}

bool kv_engine::stored_as_x(unsigned s, unsigned l, u32 position) const {
  const layer_state& ls = state(s, l);
  return position < ls.x.size() && ls.x[position];
}

void kv_engine::prefill(u64 context_len) {
  if (m_tokens) throw std::logic_error("kv policy: prefill after the first pass");
  if (context_len == 0) throw std::logic_error("kv policy: empty context");
  check_tokens(context_len);
  m_context = context_len;
  for (unsigned s = 0; s < m_exact_seq; ++s)
    for (unsigned li = 0; li < m_layers.size(); ++li) prefill_layer(s, li, context_len);
  m_tokens = context_len;
}

void kv_engine::decode() {
  if (!m_tokens) throw std::logic_error("kv policy: decode before prefill");
  check_tokens(m_tokens + 1);
  for (unsigned s = 0; s < m_exact_seq; ++s)
    for (unsigned li = 0; li < m_layers.size(); ++li)
      decode_layer(s, li, static_cast<u32>(m_tokens));
  ++m_tokens;
}

void kv_engine::observe() {
  if (!m_deferred || !m_tokens) return;
  for (unsigned s = 0; s < m_exact_seq; ++s)
    for (unsigned li = 0; li < m_layers.size(); ++li) score_layer(s, li, static_cast<u32>(m_tokens - 1));
}

void kv_engine::check_tokens(u64 n) const {
  if (n > m_src->max_tokens())
    throw std::out_of_range("kv policy: position " + std::to_string(n - 1) +
                            " beyond the attention source's " +
                            std::to_string(m_src->max_tokens()) + " tokens");
  if (n >= std::numeric_limits<std::uint32_t>::max() || n > 0xffffffull)
    throw std::out_of_range("kv policy: too many tokens");
}

void kv_engine::attend(unsigned s, unsigned l, unsigned kv, u64 q, const u32* keys, std::size_t n,
                       double* acc) {
  m_row.resize(n);
  double* row = m_row.data();
  for (unsigned g = 0; g < m_group; ++g) {
    m_src->scores(s, l, kv * m_group + g, q, keys, n, row);
    const double mx = finite_max(row, n);
    if (m_p.scores == kv_engine_params::score_model::evictor) {
      const double cap = m_board.max_score();
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = std::min(cap, acc[i] + m_board.quantise(row[i], mx));
    } else {
      double sum = 0;
      for (std::size_t i = 0; i < n; ++i) {
        row[i] = std::isfinite(row[i]) ? std::exp(row[i] - mx) : 0.0;
        sum += row[i];
      }
      if (sum > 0) add_quotients(acc, row, n, sum);
    }
  }
}

double kv_engine::finite_max(const double* x, std::size_t n) {
  // Four running maxima: the largest value does not depend on the order it is found in, and
  // one chain of dependent max operations would take their latency per element.
  constexpr double lowest = -std::numeric_limits<double>::infinity();
  double m[4] = {lowest, lowest, lowest, lowest};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j)
      if (std::isfinite(x[i + j])) m[j] = std::max(m[j], x[i + j]);
  for (; i < n; ++i)
    if (std::isfinite(x[i])) m[0] = std::max(m[0], x[i]);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

void kv_engine::add_quotients(double* acc, const double* x, std::size_t n, double d) {
  // acc[i] += x[i] / d, two lanes at a time (each lane the same IEEE division and addition).
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128d dv = _mm_set1_pd(d);
  for (; i + 2 <= n; i += 2)
    _mm_storeu_pd(acc + i, _mm_add_pd(_mm_loadu_pd(acc + i), _mm_div_pd(_mm_loadu_pd(x + i), dv)));
#endif
  for (; i < n; ++i) acc[i] += x[i] / d;
}

bool kv_engine::can_store_x() const {
  // Every tracked head keeping a token is the most its K and V can save.
  return m_p.recompute && bytes_favour_x(static_cast<std::uint16_t>(m_heads.size()), 0);
}

bool kv_engine::bytes_favour_x(std::uint16_t count, double min_saved) const {
  // Latent KV: a token's cached latent (kv_lora_rank + qk_rope_dim elements, shared by every head)
  // is smaller than its x (hidden elements) in every model, so storing x never pays; and its K
  // and V would be the latent's down-projection anyway. AERP keeps latents (docs/policies/aerp.md).
  if (m_model.latent_kv()) return false;
  const double saved = double(count) * m_head_scale * pair_bytes() - double(m_model.x_bytes_per_token());
  if (min_saved > 0) return saved >= min_saved;
  return !m_p.x_only_if_smaller || saved > 0;
}

void kv_engine::maybe_convert(std::size_t li, layer_state& ls, u32 p) {
  if (!m_p.recompute || ls.x[p] || ls.count[p] == 0) return;
  // The recomputation budget: beyond it a popular token keeps its K and V.
  const u64 cap = m_x_cap.empty() ? std::numeric_limits<u64>::max() : m_x_cap[li];
  const double min_saved = m_x_min_saved.empty() ? 0.0 : m_x_min_saved[li];
  if (ls.x_tokens >= cap) return;
  if (popular(ls.count[p]) && bytes_favour_x(ls.count[p], min_saved)) {
    ls.x[p] = 1;
    ++ls.x_tokens;
    ls.rep.x_converted += 1;
  }
}

void kv_engine::prefill_layer(unsigned s, unsigned li, u64 T) {
  layer_state& ls = m_state[s][li];
  const unsigned l = m_layers[li];
  grow(ls, T);
  ls.rep = {};
  const u64 q0 = m_p.prefill_queries && m_p.prefill_queries < T ? T - m_p.prefill_queries : 0;
  // A windowed layer: query q sees the keys (q - W, q]; the cache holds the last W tokens (the
  // earlier ones are gone whatever the policy); the policy chooses among those.
  const u64 w = m_model.window(l), lo = w && T > w ? T - w : 0;
  std::vector<u32> keys(T);
  for (u64 k = 0; k < T; ++k) keys[k] = static_cast<u32>(k);
  std::vector<double> imp(T);
  std::vector<u32> order;
  for (std::size_t hi = 0; hi < m_heads.size(); ++hi) {
    std::fill(imp.begin(), imp.end(), 0.0);
    for (u64 q = q0; q < T; ++q) {
      const u64 k0 = w && q + 1 > w ? q + 1 - w : 0;
      attend(s, l, m_heads[hi], q, keys.data() + k0, q + 1 - k0, imp.data() + k0);
    }
    head_state& hs = ls.heads[hi];
    hs.pos.clear();
    hs.score.clear();
    if (m_p.kv_budget == 0 || T - lo <= m_p.kv_budget) {
      hs.pos.assign(keys.begin() + static_cast<std::ptrdiff_t>(lo), keys.end());
      hs.score.assign(imp.begin() + static_cast<std::ptrdiff_t>(lo), imp.end());
    } else {
      order.clear();
      for (u64 k = lo; k < T; ++k) {
        if (is_protected(k, T)) {
          hs.pos.push_back(static_cast<u32>(k));
          hs.score.push_back(imp[k]);
        } else {
          order.push_back(static_cast<u32>(k));
        }
      }
      const u64 room = m_p.kv_budget > hs.pos.size() ? m_p.kv_budget - hs.pos.size() : 0;
      const bool by_age = m_p.victim == kv_engine_params::victim_rule::oldest;
      // Best first: highest score (newest on ties), or newest.
      std::sort(order.begin(), order.end(), [&](u32 a, u32 b) {
        if (!by_age && imp[a] != imp[b]) return imp[a] > imp[b];
        return a > b;
      });
      for (u64 i = 0; i < room && i < order.size(); ++i) {
        hs.pos.push_back(order[i]);
        hs.score.push_back(imp[order[i]]);
      }
    }
    for (u32 p : hs.pos) ++ls.count[p];
    ls.rep.evicted_pairs += double(T - lo - hs.pos.size()) * m_head_scale;  // the window's not counted
  }
  // Context tokens outside the protected zone are decided after the heads' top-N' choice.
  const bool full = m_p.kv_budget && T >= m_p.kv_budget;
  if (m_p.recompute && m_p.decide_after == 0 && (full || !m_p.decide_when_full))
    for (u64 k = 0; k < T; ++k)
      if (!is_protected(k, T)) maybe_convert(li, ls, static_cast<u32>(k));
  finish(ls, T, /*decode=*/false);
}

void kv_engine::decode_layer(unsigned s, unsigned li, u32 p) {
  layer_state& ls = m_state[s][li];
  grow(ls, u64(p) + 1);
  ls.rep = {};
  bool full = true;
  // A windowed layer: the token leaving the window is gone, whatever the policy; its slot takes
  // the new token (token t in slot t mod W). The policy evicts only when its budget is below
  // what the window still holds.
  const u64 w = m_model.window(m_layers[li]);
  for (std::size_t hi = 0; hi < m_heads.size(); ++hi) {
    head_state& hs = ls.heads[hi];
    std::size_t slot = hs.pos.size();
    if (w && p >= w) {
      const u32 gone = static_cast<u32>(p - w);
      for (std::size_t i = 0; i < hs.pos.size() && slot == hs.pos.size(); ++i)
        if (hs.pos[i] == gone) slot = i;
    }
    if (slot < hs.pos.size()) {  // the window's expiry, no victim chosen
      const u32 old = hs.pos[slot];
      if (--ls.count[old] == 0 && ls.x[old]) {
        ls.x[old] = 0;
        --ls.x_tokens;
        ls.rep.x_freed += 1;
      }
      if (!m_p.kv_budget || hs.pos.size() < m_p.kv_budget) full = false;
    } else if (m_p.kv_budget && hs.pos.size() >= m_p.kv_budget) {
      slot = victim(hs, p);
      if (slot < hs.pos.size()) {
        const u32 old = hs.pos[slot];
        ls.rep.evicted_pairs += m_head_scale;
        if (--ls.count[old] == 0 && ls.x[old]) {
          ls.x[old] = 0;
          --ls.x_tokens;
          ls.rep.x_freed += 1;
        }
      }
    } else {
      full = false;
    }
    if (slot < hs.pos.size()) {
      hs.pos[slot] = p;
      hs.score[slot] = 0;
    } else {
      hs.pos.push_back(p);
      hs.score.push_back(0);
    }
    ++ls.count[p];
  }
  if (m_p.recompute) {
    ls.rep.x_attended = double(ls.x_tokens);
    ls.rep.recompute_macs = double(ls.x_tokens) * m_model.hidden * 2.0 * m_model.kv_heads *
                            m_model.head_dim;
  }
  ls.full = full;
  if (m_deferred)
    finish(ls, u64(p) + 1, /*decode=*/true);  // the kept set now; observe() redoes it
  else
    score_layer(s, li, p);
}

void kv_engine::score_layer(unsigned s, unsigned li, u32 p) {
  layer_state& ls = m_state[s][li];
  const unsigned l = m_layers[li];
  const bool full = ls.full;
  for (std::size_t hi = 0; hi < m_heads.size(); ++hi) {
    head_state& hs = ls.heads[hi];
    attend(s, l, m_heads[hi], p, hs.pos.data(), hs.pos.size(), hs.score.data());
  }
  // The token that left the protected window decide_after steps ago has now faced
  // decide_after + 1 eviction rounds (the first on the step it left the window).
  const u64 d = m_p.decide_after, T = m_context;
  if (m_p.recompute && p >= m_p.recent_window + 1 + d && (full || !m_p.decide_when_full)) {
    const u64 c = p - m_p.recent_window - 1 - d;
    // A context token's first round was the prefill's top-N' choice: with a delay, those are
    // decided together after d decode steps.
    if (c >= m_p.sink_tokens && (d == 0 || c + m_p.recent_window >= T)) maybe_convert(li, ls, static_cast<u32>(c));
  }
  if (m_p.recompute && d > 0 && u64(p) + 1 == T + d && (full || !m_p.decide_when_full))
    for (u64 c = m_p.sink_tokens; c + m_p.recent_window < T; ++c) maybe_convert(li, ls, static_cast<u32>(c));
  finish(ls, u64(p) + 1, /*decode=*/true);
}

std::size_t kv_engine::victim(const head_state& hs, u64 newest) const {
  // The unprotected token of least score (the oldest on ties), or the oldest one. The best so
  // far is kept in locals: this scan runs for every tracked head at every step.
  const std::size_t n = hs.pos.size();
  const u32* pos = hs.pos.data();
  const double* score = hs.score.data();
  if (m_p.victim == kv_engine_params::victim_rule::oldest) {
    std::size_t best = n;
    u32 best_pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (is_protected(pos[i], newest)) continue;
      if (best == n || pos[i] < best_pos) best = i, best_pos = pos[i];
    }
    return best;
  }
  // Without branches on the data: the least score among the unprotected tokens, then the oldest
  // of those at it (the least position: a token is kept once per head), then where it is; the
  // same choice as one pass keeping the best (scores are finite). Unprotected: sink_tokens <= p <
  // newest - recent_window, one unsigned comparison (positions are below 2^24: check_tokens).
  const u64 lo = m_p.sink_tokens, hi = newest >= m_p.recent_window ? newest - m_p.recent_window : 0;
  if (hi <= lo) return n;
  const u32 lo32 = static_cast<u32>(lo), span = static_cast<u32>(hi - lo);
  constexpr double none = std::numeric_limits<double>::infinity();
  constexpr u32 no_pos = std::numeric_limits<u32>::max();
  double least = none;
  std::size_t open = 0, i = 0;
#if defined(__SSE2__)
  // Four tokens at a time: their four 32-bit masks, widened to two pairs of 64-bit lanes.
  const __m128i sign = _mm_set1_epi32(std::int32_t(0x80000000u)), lov = _mm_set1_epi32(std::int32_t(lo32));
  const __m128i spanv = _mm_set1_epi32(std::int32_t(span ^ 0x80000000u));
  auto unprotected = [&](std::size_t k) {  // all ones where pos[k + j] is unprotected
    const __m128i d = _mm_sub_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos + k)), lov);
    return _mm_cmplt_epi32(_mm_xor_si128(d, sign), spanv);
  };
  const __m128d inf = _mm_set1_pd(none);
  __m128d m01 = inf, m23 = inf;
  __m128i count = _mm_setzero_si128();
  for (; i + 4 <= n; i += 4) {
    const __m128i ok = unprotected(i);
    const __m128d ok01 = _mm_castsi128_pd(_mm_unpacklo_epi32(ok, ok)), ok23 = _mm_castsi128_pd(_mm_unpackhi_epi32(ok, ok));
    const __m128d s01 = _mm_or_pd(_mm_and_pd(ok01, _mm_loadu_pd(score + i)), _mm_andnot_pd(ok01, inf));
    const __m128d s23 = _mm_or_pd(_mm_and_pd(ok23, _mm_loadu_pd(score + i + 2)), _mm_andnot_pd(ok23, inf));
    m01 = _mm_min_pd(s01, m01);
    m23 = _mm_min_pd(s23, m23);
    count = _mm_sub_epi32(count, ok);
  }
  const __m128d m = _mm_min_pd(m01, m23);
  least = std::min(_mm_cvtsd_f64(m), _mm_cvtsd_f64(_mm_unpackhi_pd(m, m)));
  alignas(16) std::uint32_t c[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(c), count);
  open = std::size_t(c[0]) + c[1] + c[2] + c[3];
#endif
  for (; i < n; ++i) {
    const bool ok = pos[i] - lo32 < span;
    if (ok && score[i] < least) least = score[i];
    open += ok;
  }
  if (open == 0) return n;
  u32 oldest = no_pos;
  i = 0;
#if defined(__SSE2__)
  const __m128d l = _mm_set1_pd(least);
  const __m128i no_posv = _mm_set1_epi32(std::int32_t(no_pos ^ 0x80000000u));  // sign-flipped: signed order
  __m128i old = no_posv;
  for (; i + 4 <= n; i += 4) {
    const __m128i ok = unprotected(i);
    const __m128 eq = _mm_shuffle_ps(_mm_castpd_ps(_mm_cmpeq_pd(_mm_loadu_pd(score + i), l)),
                                     _mm_castpd_ps(_mm_cmpeq_pd(_mm_loadu_pd(score + i + 2), l)), _MM_SHUFFLE(2, 0, 2, 0));
    const __m128i pick = _mm_and_si128(ok, _mm_castps_si128(eq));
    const __m128i p = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos + i)), sign);
    const __m128i cand = _mm_or_si128(_mm_and_si128(pick, p), _mm_andnot_si128(pick, no_posv));
    const __m128i less = _mm_cmplt_epi32(cand, old);
    old = _mm_or_si128(_mm_and_si128(less, cand), _mm_andnot_si128(less, old));
  }
  alignas(16) std::uint32_t o[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(o), _mm_xor_si128(old, sign));
  oldest = std::min(std::min(o[0], o[1]), std::min(o[2], o[3]));
#endif
  for (; i < n; ++i)
    if (pos[i] - lo32 < span && score[i] == least && pos[i] < oldest) oldest = pos[i];
  for (i = 0; i < n; ++i)
    if (pos[i] == oldest) return i;
  return n;  // not reached: an unprotected token has the least score
}


kv_policy::protection kv_engine::protected_tokens() const {
  protection r{m_p.sink_tokens, m_p.recent_window};
  // Evicting the oldest non-sink token of a full head (streaming) is the evictor's min-score
  // choice with every other non-sink token protected: a window of budget - sinks - 1.
  if (m_p.victim == kv_engine_params::victim_rule::oldest && m_p.kv_budget > m_p.sink_tokens)
    r.recent_window = m_p.kv_budget - m_p.sink_tokens - 1;
  return r;
}
void read_common_params(const kv_policy_args& a, kv_engine_params& p, bool has_budget,
                        bool has_window) {
  const config_node& c = a.cfg;
  if (has_budget)
    p.kv_budget = c.get_uint("kv_budget", p.kv_budget, "tokens kept per KV head (N')", 1, 1u << 30);
  p.sink_tokens = c.get_uint("sink_tokens", p.sink_tokens, "first tokens never evicted", 0, 1u << 30);
  if (has_window)
    p.recent_window = c.get_uint("recent_window", p.recent_window,
                                 "most recent tokens never evicted", 0, 1u << 30);
  const std::string sm = c.get_choice("score_model", "softmax", {"softmax", "evictor"});
  p.scores = sm == "evictor" ? kv_engine_params::score_model::evictor
                             : kv_engine_params::score_model::softmax;
  if (a.evictor) {  // the hardware's registers: one source
    for (const char* k : {"score_bits", "score_scale"})
      if (c.origin(k) != "default")
        c.fail(k, std::string("this system's systolic evictor sets it: give ") + a.evictor_path + "." + k + " instead");
    p.score_bits = a.evictor->score_bits;
    p.score_scale = a.evictor->scale;
  } else {
    p.score_bits = static_cast<unsigned>(
        c.get_uint("score_bits", p.score_bits, "evictor score register width", 1, 16));
    p.score_scale = c.get_double("score_scale", p.score_scale, "evictor logit units per level", 1e-9);
  }
  p.prefill_queries = c.get_uint("prefill_queries", 0,
                                 "prefill importance from the last queries only (0 = all)");
  p.exact_sequences = static_cast<unsigned>(c.get_uint(
      "exact_sequences", 0, "sequences with exact bookkeeping (0 = all)", 0, 1u << 20));
  p.exact_layers = static_cast<unsigned>(
      c.get_uint("exact_layers", 0, "layers with exact bookkeeping (0 = all)", 0, 1u << 16));
  p.exact_heads = static_cast<unsigned>(
      c.get_uint("exact_heads", 0, "KV heads per layer with exact bookkeeping (0 = all)", 0, 1u << 16));
  if (p.kv_budget && p.victim == kv_engine_params::victim_rule::min_score &&
      p.kv_budget <= p.sink_tokens + p.recent_window)
    c.fail("kv_budget", "must exceed sink_tokens + recent_window (" +
                            std::to_string(p.sink_tokens + p.recent_window) + ")");
  if (p.kv_budget && p.kv_budget <= p.sink_tokens)
    c.fail("kv_budget", "must exceed sink_tokens (" + std::to_string(p.sink_tokens) + ")");
}

std::unique_ptr<kv_policy> make_kv_engine(const kv_policy_args& a, const kv_engine_params& p) {
  return std::make_unique<kv_engine>(a, p);
}

}  // namespace kelle
