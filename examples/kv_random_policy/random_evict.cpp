// `random`: a KV-cache policy that evicts a uniformly random token, as a plugin
// (docs/write-a-policy.md walks through this file).
//
// Each KV head keeps at most `kv_budget` tokens. The first `sink_tokens` positions and the
// `recent_window` newest ones are never evicted (as in the built-in `streaming` and `h2o`);
// when a full head takes a new token, the victim is drawn uniformly from the rest. It is the
// control experiment of score-based eviction: the same budget and protected zones, no scores in
// the choice. The policy still accumulates attention scores (softmax over the kept set, summed
// over a KV head's query heads, as the built-in policies do) because the 2DRP refresh policy
// splits the stored tokens into high- and low-score groups, and the plugin's statistics count
// how often the random victim was a high-score token, i.e. what ignoring the scores costs.
//
// Prefill: a context longer than the budget keeps the protected tokens plus a random sample of
// the others; their starting scores are the attention of the last context query (assumption:
// the built-in policies accumulate every context query; one query keeps the example short).
// Every sequence, layer and head is tracked exactly (no subset mode); the state is
// batch x layers x kv_heads x kv_budget positions and scores.
#include "firmware/policies/kv/kv_policy.h"
#include "platform/plugin/plugin.h"
#include "platform/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

KELLE_PLUGIN("kv_random")

namespace kv_random_plugin {

using namespace kelle;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// The policy's statistics, in a module of their own below the workload that created it.
struct random_stats : sc_core::sc_module {
  stat_group stats;
  stat& evictions;
  stat& evicted_high;
  stat& victim_age;
  explicit random_stats(const sc_core::sc_module_name& n)
      : sc_core::sc_module(n),
        evictions(stats.counter("evictions", "count", "(token, KV head) pairs evicted in decode steps")),
        evicted_high(stats.counter("evicted_high_score", "count",
                                   "evicted pairs whose score was above their head's median")),
        victim_age(stats.counter("victim_age_tokens", "tokens", "sum over evictions of (newest - victim) position")) {
    stats.formula("evicted_high_score_share", "ratio", "evicted_high_score / evictions", [this] {
      return evictions.value() > 0 ? evicted_high.value() / evictions.value() : 0.0;
    });
  }
};

class random_policy : public kv_policy {
 public:
  explicit random_policy(const kv_policy_args& a)
      : m_model(a.model), m_batch(a.batch), m_src(a.source), m_stats(std::make_unique<random_stats>("kv_random")) {
    const config_node& c = a.cfg;
    m_budget = c.get_uint("kv_budget", 128, "tokens kept per KV head (N')", 2, 1u << 30);
    m_sinks = c.get_uint("sink_tokens", 4, "first tokens never evicted", 0, 1u << 30);
    m_window = c.get_uint("recent_window", 16, "most recent tokens never evicted", 0, 1u << 30);
    m_rng.seed(c.get_uint("random_seed", 1, "seed of the victim draws"));
    if (m_budget <= m_sinks + m_window)
      c.fail("kv_budget", "must exceed sink_tokens + recent_window (" + std::to_string(m_sinks + m_window) + ")");
    if (!m_src) throw std::logic_error("random policy: no attention source");
    if (m_model.kv_heads == 0 || m_model.heads % m_model.kv_heads)
      c.fail("", "the model's heads must be a multiple of its kv_heads");
    m_group = m_model.heads / m_model.kv_heads;
    m_heads.assign(std::size_t(m_batch) * m_model.layers * m_model.kv_heads, head{});
    m_reports.assign(std::size_t(m_batch) * m_model.layers, kv_layer_report{});
  }

  std::string name() const override { return "random"; }
  u64 budget() const override { return m_budget; }
  // What the firmware programs into a systolic evictor, if the system has one.
  protection protected_tokens() const override { return {m_sinks, m_window}; }
  u64 tokens() const override { return m_tokens; }
  unsigned batch() const override { return m_batch; }
  unsigned layers() const override { return m_model.layers; }

  void prefill(u64 T) override {
    if (m_tokens || T == 0) throw std::logic_error("random policy: prefill once, of at least one token");
    check(T);
    std::vector<u32> rest;
    every_head([&](unsigned s, unsigned l, unsigned h, head& hd, kv_layer_report& r) {
      rest.clear();
      for (u64 p = 0; p < T; ++p) {
        if (T <= m_budget || is_protected(p, T)) hd.pos.push_back(u32(p));
        else rest.push_back(u32(p));
      }
      const u64 room = m_budget > hd.pos.size() ? m_budget - hd.pos.size() : 0;
      for (u64 i = 0; i < room && i < rest.size(); ++i) {  // a random sample: partial shuffle
        std::swap(rest[i], rest[i + m_rng() % (rest.size() - i)]);
        hd.pos.push_back(rest[i]);
      }
      hd.score.assign(hd.pos.size(), 0.0);
      attend(s, l, h, T - 1, hd);
      r.evicted_pairs += double(T - hd.pos.size());
    });
    m_tokens = T;
  }

  void decode() override {
    if (!m_tokens) throw std::logic_error("random policy: decode before prefill");
    check(m_tokens + 1);
    const u32 t = u32(m_tokens);
    std::vector<std::size_t> candidates;
    every_head([&](unsigned s, unsigned l, unsigned h, head& hd, kv_layer_report& r) {
      std::size_t slot = hd.pos.size();
      if (hd.pos.size() >= m_budget) {
        candidates.clear();
        for (std::size_t i = 0; i < hd.pos.size(); ++i)
          if (!is_protected(hd.pos[i], t)) candidates.push_back(i);
        if (!candidates.empty()) {
          slot = candidates[m_rng() % candidates.size()];
          record_eviction(hd, slot, t);
          r.evicted_pairs += 1;
        }
      }
      if (slot == hd.pos.size()) {  // room left (or all protected): the head grows
        hd.pos.emplace_back();
        hd.score.emplace_back();
      }
      hd.pos[slot] = t;
      hd.score[slot] = 0;
      attend(s, l, h, t, hd);
    });
    ++m_tokens;
  }

  const kv_layer_report& report(unsigned s, unsigned l) const override {
    return m_reports.at(std::size_t(s) * m_model.layers + l);
  }
  bool tracked(unsigned s, unsigned h) const override { return s < m_batch && h < m_model.kv_heads; }
  std::vector<u32> kept(unsigned s, unsigned l, unsigned h) const override {
    std::vector<u32> sorted(at(s, l, h).pos);
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  double score(unsigned s, unsigned l, unsigned h, u32 position) const override {
    const head& hd = at(s, l, h);
    const auto it = std::find(hd.pos.begin(), hd.pos.end(), position);
    if (it == hd.pos.end()) throw std::out_of_range("random policy: position not kept by that head");
    return hd.score[std::size_t(it - hd.pos.begin())];
  }
  bool stored_as_x(unsigned, unsigned, u32) const override { return false; }  // no recomputation

 private:
  struct head {
    std::vector<u32> pos;       // slot -> token position
    std::vector<double> score;  // slot -> accumulated attention probability
  };

  head& at(unsigned s, unsigned l, unsigned h) {
    return m_heads.at((std::size_t(s) * m_model.layers + l) * m_model.kv_heads + h);
  }
  const head& at(unsigned s, unsigned l, unsigned h) const {
    if (s >= m_batch || l >= m_model.layers || h >= m_model.kv_heads)
      throw std::out_of_range("random policy: no such sequence, layer or head");
    return m_heads[(std::size_t(s) * m_model.layers + l) * m_model.kv_heads + h];
  }
  kv_layer_report& report_of(unsigned s, unsigned l) { return m_reports[std::size_t(s) * m_model.layers + l]; }
  // One pass: f(sequence, layer, kv head, its state, the layer's report) for every head, the
  // reports cleared first and finished after each layer.
  template <class F>
  void every_head(F&& f) {
    for (unsigned s = 0; s < m_batch; ++s)
      for (unsigned l = 0; l < m_model.layers; ++l) {
        kv_layer_report& r = report_of(s, l);
        r = {};
        for (unsigned h = 0; h < m_model.kv_heads; ++h) f(s, l, h, at(s, l, h), r);
        finish(s, l);
      }
  }
  bool is_protected(u64 p, u64 newest) const { return p < m_sinks || p + m_window >= newest; }
  void check(u64 n) const {
    if (n > m_src->max_tokens() || n > 0xffffffull)
      throw std::out_of_range("random policy: position " + std::to_string(n - 1) + " beyond the attention source");
  }

  // Adds query `q`'s attention (softmax over the kept set, summed over the group) to the scores.
  void attend(unsigned s, unsigned l, unsigned h, u64 q, head& hd) {
    m_row.resize(hd.pos.size());
    for (unsigned g = 0; g < m_group; ++g) {
      m_src->scores(s, l, h * m_group + g, q, hd.pos.data(), hd.pos.size(), m_row.data());
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (double v : m_row)
        if (std::isfinite(v)) mx = std::max(mx, v);
      for (double& v : m_row) sum += (v = std::isfinite(v) ? std::exp(v - mx) : 0.0);
      if (sum > 0)
        for (std::size_t i = 0; i < m_row.size(); ++i) hd.score[i] += m_row[i] / sum;
    }
  }

  double median(const head& hd) {
    m_tmp = hd.score;
    auto mid = m_tmp.begin() + static_cast<std::ptrdiff_t>(m_tmp.size() / 2);
    std::nth_element(m_tmp.begin(), mid, m_tmp.end());
    return *mid;
  }

  void record_eviction(const head& hd, std::size_t slot, u32 newest) {
    ++m_stats->evictions;
    if (hd.score[slot] > median(hd)) ++m_stats->evicted_high;
    m_stats->victim_age += double(newest - hd.pos[slot]);
  }

  // Sizes, bytes and the 2DRP groups of (s, l) after a pass: a pair is high-score when its score
  // is strictly above its head's median (the built-in policies' rule).
  void finish(unsigned s, unsigned l) {
    kv_layer_report& r = report_of(s, l);
    double kept = 0, high = 0;
    for (unsigned h = 0; h < m_model.kv_heads; ++h) {
      const head& hd = at(s, l, h);
      kept += double(hd.pos.size());
      if (hd.pos.empty()) continue;
      const double med = median(hd);
      for (double v : hd.score) high += v > med;
    }
    const double pair_bytes = 2.0 * double(m_model.kv_row_bytes());  // K and V in the KV format
    r.kept_pairs = kept;
    r.kept_per_head = kept / m_model.kv_heads;
    r.kv_pairs = kept;
    r.kv_bytes = kept * pair_bytes;
    r.high_kv_pairs = high;
    r.low_kv_pairs = kept - high;
    r.high_bytes = high * pair_bytes;
    r.low_bytes = (kept - high) * pair_bytes;
  }

  model_shape m_model;
  unsigned m_batch;
  const attention_source* m_src;
  std::unique_ptr<random_stats> m_stats;
  u64 m_budget = 0, m_sinks = 0, m_window = 0, m_tokens = 0;
  unsigned m_group = 1;
  std::mt19937_64 m_rng;
  std::vector<head> m_heads;              // [sequence][layer][kv head]
  std::vector<kv_layer_report> m_reports; // [sequence][layer]
  std::vector<double> m_row, m_tmp;
};

KELLE_REGISTER(kv_policies(), "random", "per-head budget, uniformly random victim outside sinks and window (plugin example)",
               [](const kv_policy_args& a) -> std::unique_ptr<kv_policy> {
                 return std::make_unique<random_policy>(a);
               });

}  // namespace kv_random_plugin
