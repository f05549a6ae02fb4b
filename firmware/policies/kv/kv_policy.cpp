// The KV-cache bookkeeping engine shared by every policy. See kv_policy.h and docs/policies.md.
#include "firmware/policies/kv/kv_policy.h"

#include "models/compute/evictor/score_board.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kelle {

kv_policy_registry& kv_policies() {
  static kv_policy_registry r("kv_policies", "KV-cache eviction and recomputation policies");
  return r;
}

kv_layer_report& kv_layer_report::operator+=(const kv_layer_report& o) {
  kept_pairs += o.kept_pairs;
  kept_per_head += o.kept_per_head;
  x_tokens += o.x_tokens;
  kv_pairs += o.kv_pairs;
  kv_bytes += o.kv_bytes;
  x_bytes += o.x_bytes;
  evicted_pairs += o.evicted_pairs;
  x_converted += o.x_converted;
  x_freed += o.x_freed;
  x_attended += o.x_attended;
  recompute_macs += o.recompute_macs;
  high_kv_pairs += o.high_kv_pairs;
  low_kv_pairs += o.low_kv_pairs;
  high_x_tokens += o.high_x_tokens;
  low_x_tokens += o.low_x_tokens;
  high_bytes += o.high_bytes;
  low_bytes += o.low_bytes;
  return *this;
}

kv_layer_report kv_policy::layer_total(unsigned layer) const {
  kv_layer_report r;
  for (unsigned s = 0; s < batch(); ++s) r += report(s, layer);
  return r;
}

kv_layer_report kv_policy::total() const {
  kv_layer_report r;
  for (unsigned l = 0; l < layers(); ++l) r += layer_total(l);
  return r;
}

void read_common_params(const config_node& c, kv_engine_params& p, bool has_budget,
                        bool has_window) {
  if (has_budget)
    p.kv_budget = c.get_uint("kv_budget", p.kv_budget, "tokens kept per KV head (N')", 1, 1u << 30);
  p.sink_tokens = c.get_uint("sink_tokens", p.sink_tokens, "first tokens never evicted", 0, 1u << 30);
  if (has_window)
    p.recent_window = c.get_uint("recent_window", p.recent_window,
                                 "most recent tokens never evicted", 0, 1u << 30);
  const std::string sm = c.get_choice("score_model", "softmax", {"softmax", "evictor"});
  p.scores = sm == "evictor" ? kv_engine_params::score_model::evictor
                             : kv_engine_params::score_model::softmax;
  p.score_bits = static_cast<unsigned>(
      c.get_uint("score_bits", p.score_bits, "evictor score register width", 1, 16));
  p.score_scale = c.get_double("score_scale", p.score_scale, "evictor logit units per level", 1e-9);
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

namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

class kv_engine final : public kv_policy {
 public:
  kv_engine(const kv_policy_args& a, const kv_engine_params& p)
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

  std::string name() const override { return m_p.name; }
  std::uint64_t budget() const override { return m_p.kv_budget; }
  bool recomputes() const override { return m_p.recompute; }
  recompute_request recompute_budget() const override { return m_p.budget; }
  void set_recompute_limits(const recompute_limits& l) override {
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
  u64 tokens() const override { return m_tokens; }
  unsigned batch() const override { return m_batch; }
  unsigned layers() const override { return m_model.layers; }

  void groups_each_pass(const std::vector<bool>& layers) override {
    // A tracked layer reports for the model layers mapped to it: needed if any of them is.
    std::vector<bool> need(m_layers.size(), false);
    for (unsigned l = 0; l < m_model.layers && l < layers.size(); ++l)
      if (layers[l]) need[m_layer_rep[l]] = true;
    for (auto& seq : m_state)
      for (std::size_t li = 0; li < seq.size(); ++li) seq[li].groups_each_pass = need[li];
  }
  void update_groups() override {
    for (auto& seq : m_state)
      for (layer_state& ls : seq)
        if (ls.groups_stale) groups(ls);
  }
  const kv_layer_report& report(unsigned s, unsigned l) const override {
    return m_state.at(s % m_exact_seq).at(m_layer_rep.at(l)).rep;
  }
  bool tracked(unsigned s, unsigned h) const override {
    return s < m_exact_seq && h < m_head_tracked.size() && m_head_tracked[h] >= 0;
  }
  std::vector<u32> kept(unsigned s, unsigned l, unsigned h) const override {
    std::vector<u32> v = head(s, l, h).pos;
    std::sort(v.begin(), v.end());
    return v;
  }
  double score(unsigned s, unsigned l, unsigned h, u32 position) const override {
    const head_state& hs = head(s, l, h);
    for (std::size_t i = 0; i < hs.pos.size(); ++i)
      if (hs.pos[i] == position) return hs.score[i];
    throw std::out_of_range("kv policy: position not kept by that head");
  }
  bool stored_as_x(unsigned s, unsigned l, u32 position) const override {
    const layer_state& ls = state(s, l);
    return position < ls.x.size() && ls.x[position];
  }

  void prefill(u64 context_len) override {
    if (m_tokens) throw std::logic_error("kv policy: prefill after the first pass");
    if (context_len == 0) throw std::logic_error("kv policy: empty context");
    check_tokens(context_len);
    m_context = context_len;
    for (unsigned s = 0; s < m_exact_seq; ++s)
      for (unsigned li = 0; li < m_layers.size(); ++li) prefill_layer(s, li, context_len);
    m_tokens = context_len;
  }

  void decode() override {
    if (!m_tokens) throw std::logic_error("kv policy: decode before prefill");
    check_tokens(m_tokens + 1);
    for (unsigned s = 0; s < m_exact_seq; ++s)
      for (unsigned li = 0; li < m_layers.size(); ++li)
        decode_layer(s, li, static_cast<u32>(m_tokens));
    ++m_tokens;
  }

  void observe() override {
    if (!m_deferred || !m_tokens) return;
    for (unsigned s = 0; s < m_exact_seq; ++s)
      for (unsigned li = 0; li < m_layers.size(); ++li) score_layer(s, li, static_cast<u32>(m_tokens - 1));
  }

 private:
  struct head_state {
    std::vector<u32> pos;       // slot -> token position (slots reused in place)
    std::vector<double> score;  // slot -> accumulated score
  };
  struct layer_state {
    std::vector<head_state> heads;    // tracked KV heads
    std::vector<std::uint16_t> count; // position -> tracked heads keeping it
    std::vector<std::uint8_t> x;      // position -> stored as x
    u64 x_tokens = 0;
    bool full = false;  // every head was at its budget in the last decode step
    kv_layer_report rep;
    bool groups_each_pass = true;  // compute the 2DRP groups in every pass (else when asked)
    bool groups_stale = false;     // the last pass's groups are not in rep yet
    u64 groups_n = 0;              // positions seen at the last pass
  };

  const head_state& head(unsigned s, unsigned l, unsigned h) const {
    if (!tracked(s, h)) throw std::out_of_range("kv policy: sequence/head not tracked");
    return state(s, l).heads[static_cast<unsigned>(m_head_tracked[h])];
  }
  const layer_state& state(unsigned s, unsigned l) const {
    if (l >= m_layer_tracked.size() || m_layer_tracked[l] < 0)
      throw std::out_of_range("kv policy: layer not tracked");
    return m_state.at(s).at(static_cast<unsigned>(m_layer_tracked[l]));
  }
  void check_tokens(u64 n) const {
    if (n > m_src->max_tokens())
      throw std::out_of_range("kv policy: position " + std::to_string(n - 1) +
                              " beyond the attention source's " +
                              std::to_string(m_src->max_tokens()) + " tokens");
    if (n >= std::numeric_limits<std::uint32_t>::max() || n > 0xffffffull)
      throw std::out_of_range("kv policy: too many tokens");
  }
  bool is_protected(u64 p, u64 newest) const {
    return p < m_p.sink_tokens || p + m_p.recent_window >= newest;
  }

  // Adds the attention of query `q` (every query head of KV head `kv`'s group) to acc[0..n).
  void attend(unsigned s, unsigned l, unsigned kv, u64 q, const u32* keys, std::size_t n,
              double* acc) {
    m_row.resize(n);
    for (unsigned g = 0; g < m_group; ++g) {
      m_src->scores(s, l, kv * m_group + g, q, keys, n, m_row.data());
      double mx = -std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < n; ++i)
        if (std::isfinite(m_row[i])) mx = std::max(mx, m_row[i]);
      if (m_p.scores == kv_engine_params::score_model::evictor) {
        const double cap = m_board.max_score();
        for (std::size_t i = 0; i < n; ++i)
          acc[i] = std::min(cap, acc[i] + m_board.quantise(m_row[i], mx));
      } else {
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
          m_row[i] = std::isfinite(m_row[i]) ? std::exp(m_row[i] - mx) : 0.0;
          sum += m_row[i];
        }
        if (sum > 0)
          for (std::size_t i = 0; i < n; ++i) acc[i] += m_row[i] / sum;
      }
    }
  }

  bool bytes_favour_x(std::uint16_t count, double min_saved) const {
    const double saved = double(count) * m_head_scale * pair_bytes() - double(m_model.x_bytes_per_token());
    if (min_saved > 0) return saved >= min_saved;
    return !m_p.x_only_if_smaller || saved > 0;
  }
  double pair_bytes() const { return 2.0 * m_model.head_dim * model_shape::act_bytes; }
  bool popular(std::uint16_t count) const {
    return double(count) / double(m_heads.size()) > m_p.popularity_threshold;
  }
  void grow(layer_state& ls, u64 n) {
    if (ls.count.size() < n) {
      ls.count.resize(n, 0);
      ls.x.resize(n, 0);
    }
  }
  void maybe_convert(std::size_t li, layer_state& ls, u32 p) {
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

  void prefill_layer(unsigned s, unsigned li, u64 T) {
    layer_state& ls = m_state[s][li];
    const unsigned l = m_layers[li];
    grow(ls, T);
    ls.rep = {};
    const u64 q0 = m_p.prefill_queries && m_p.prefill_queries < T ? T - m_p.prefill_queries : 0;
    std::vector<u32> keys(T);
    for (u64 k = 0; k < T; ++k) keys[k] = static_cast<u32>(k);
    std::vector<double> imp(T);
    std::vector<u32> order;
    for (std::size_t hi = 0; hi < m_heads.size(); ++hi) {
      std::fill(imp.begin(), imp.end(), 0.0);
      for (u64 q = q0; q < T; ++q) attend(s, l, m_heads[hi], q, keys.data(), q + 1, imp.data());
      head_state& hs = ls.heads[hi];
      hs.pos.clear();
      hs.score.clear();
      if (m_p.kv_budget == 0 || T <= m_p.kv_budget) {
        hs.pos = keys;
        hs.score = imp;
      } else {
        order.clear();
        for (u64 k = 0; k < T; ++k) {
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
      ls.rep.evicted_pairs += double(T - hs.pos.size()) * m_head_scale;
    }
    // Context tokens outside the protected zone are decided after the heads' top-N' choice.
    const bool full = m_p.kv_budget && T >= m_p.kv_budget;
    if (m_p.recompute && m_p.decide_after == 0 && (full || !m_p.decide_when_full))
      for (u64 k = 0; k < T; ++k)
        if (!is_protected(k, T)) maybe_convert(li, ls, static_cast<u32>(k));
    finish(ls, T, /*decode=*/false);
  }

  void decode_layer(unsigned s, unsigned li, u32 p) {
    layer_state& ls = m_state[s][li];
    grow(ls, u64(p) + 1);
    ls.rep = {};
    bool full = true;
    for (std::size_t hi = 0; hi < m_heads.size(); ++hi) {
      head_state& hs = ls.heads[hi];
      std::size_t slot = hs.pos.size();
      if (m_p.kv_budget && hs.pos.size() >= m_p.kv_budget) {
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

  // The second half of a decode step: the new query's scores, AERP's decision, the report.
  void score_layer(unsigned s, unsigned li, u32 p) {
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

  // The unprotected slot to overwrite, or pos.size() when every slot is protected.
  std::size_t victim(const head_state& hs, u64 newest) const {
    std::size_t best = hs.pos.size();
    const bool by_age = m_p.victim == kv_engine_params::victim_rule::oldest;
    for (std::size_t i = 0; i < hs.pos.size(); ++i) {
      if (is_protected(hs.pos[i], newest)) continue;
      if (best == hs.pos.size()) {
        best = i;
        continue;
      }
      const bool better = by_age ? hs.pos[i] < hs.pos[best]
                                 : (hs.score[i] < hs.score[best] ||
                                    (hs.score[i] == hs.score[best] && hs.pos[i] < hs.pos[best]));
      if (better) best = i;
    }
    return best;
  }

  // The stored state after a pass: sizes and bytes, and the 2DRP groups (now, or when asked).
  void finish(layer_state& ls, u64 n, bool) {
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

  // The high/low-score groups of the last pass: a pair is high-score when its score is above
  // its head's median; an x token when it is high in most of the heads keeping it.
  void groups(layer_state& ls) {
    kv_layer_report& r = ls.rep;
    const u64 n = ls.groups_n;
    ls.groups_stale = false;
    m_high.assign(n, 0);
    m_seen.assign(n, 0);
    double hkv = 0, lkv = 0;
    for (head_state& hs : ls.heads) {
      if (hs.pos.empty()) continue;
      m_tmp = hs.score;
      auto mid = m_tmp.begin() + static_cast<std::ptrdiff_t>(m_tmp.size() / 2);
      std::nth_element(m_tmp.begin(), mid, m_tmp.end());
      const double median = *mid;
      for (std::size_t i = 0; i < hs.pos.size(); ++i) {
        const bool high = hs.score[i] > median;
        const u32 p = hs.pos[i];
        if (ls.x[p])
          m_high[p] += high;
        else
          (high ? hkv : lkv) += 1;
      }
    }
    double hx = 0, lx = 0;
    for (head_state& hs : ls.heads)
      for (u32 p : hs.pos)
        if (ls.x[p] && !m_seen[p]) {
          m_seen[p] = 1;
          (2u * m_high[p] > ls.count[p] ? hx : lx) += 1;
        }
    const double xb = double(m_model.x_bytes_per_token()), pb = pair_bytes();
    r.high_kv_pairs = hkv * m_head_scale;
    r.low_kv_pairs = lkv * m_head_scale;
    r.high_x_tokens = hx;
    r.low_x_tokens = lx;
    r.high_bytes = r.high_kv_pairs * pb + hx * xb;
    r.low_bytes = r.low_kv_pairs * pb + lx * xb;
  }

  kv_engine_params m_p;
  model_shape m_model;
  unsigned m_batch;
  const attention_source* m_src;
  unsigned m_group = 1, m_exact_seq = 1;
  std::vector<unsigned> m_heads;     // tracked KV heads
  std::vector<int> m_head_tracked;   // KV head -> index in m_heads or -1
  std::vector<unsigned> m_layers;    // tracked layers
  std::vector<int> m_layer_tracked;  // layer -> index in m_layers or -1
  std::vector<unsigned> m_layer_rep; // layer -> index of the tracked layer that reports for it
  double m_head_scale = 1;
  score_board m_board;
  std::vector<std::vector<layer_state>> m_state;  // [exact sequence][tracked layer]
  u64 m_tokens = 0;
  u64 m_context = 0;  // the prefill's tokens
  bool m_deferred = false;
  std::vector<u64> m_x_cap;          // tracked layer -> x tokens a sequence may hold (empty: no limit)
  std::vector<double> m_x_min_saved; // tracked layer -> K, V bytes an x token must save (empty: 0)
  std::vector<double> m_row, m_tmp;
  std::vector<std::uint16_t> m_high;
  std::vector<std::uint8_t> m_seen;
};

}  // namespace

std::unique_ptr<kv_policy> make_kv_engine(const kv_policy_args& a, const kv_engine_params& p) {
  return std::make_unique<kv_engine>(a, p);
}

}  // namespace kelle
