// The `synthetic` attention source: seeded, closed-form pre-softmax logits. See docs/policies.md.
//
//   logit(s, l, h, t, k) = sink_logit                         if k < sink_positions
//                        + recency_logit * exp(-(t - k) / recency_tokens)
//                        + -ln(u_{s,l,h,k}) / heavy_tail_index
//                        + noise_logit * (2 v_{s,l,h,t,k} - 1)
//
// u and v are uniform in (0, 1), drawn by hashing (seed, sequence, layer, head, positions), so a
// value costs O(1) and does not depend on what was asked before. The heavy-hitter term makes the
// softmax weight of token k proportional to u^(-1/alpha): a Pareto(alpha) importance that is
// persistent (it does not depend on the query t). With probability head_sharing, head h uses the
// layer's shared draw u_{s,l,k} for token k, else its own draw u_{s,l,h,k}: head_sharing = 1 makes
// every head of a layer rank the tokens alike (heavy hitters are popular across heads: many x
// tokens in AERP), 0 makes the heads' heavy hitters independent (few popular tokens).
#include "firmware/workload/attention/attention_source.h"
#include "platform/support/hash.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace kelle {
namespace {

std::uint64_t hash(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d,
                   std::uint64_t e) {
  return splitmix64(splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d) ^ e);
}

class synthetic_source final : public attention_source {
 public:
  explicit synthetic_source(const attention_source_args& a) : m_layers(a.layers), m_heads(a.heads) {
    const config_node& c = a.cfg;
    m_seed = c.get_uint("seed", 1, "a seed (the same seed gives the same logits)");
    m_sinks = c.get_uint("sink_positions", 4, "the first positions that act as attention sinks", 0,
                         1u << 20);
    m_sink_logit = c.get_double("sink_logit", 5.0, "logit added to the sink positions", 0, 100);
    m_recency_logit = c.get_double("recency_logit", 3.0, "logit added to the newest token", 0, 100);
    m_recency_tokens = c.get_double("recency_tokens", 32.0,
                                    "e-folding distance of the recency bias, in tokens", 1e-3, 1e9);
    m_alpha = c.get_double("heavy_tail_index", 1.0,
                           "Pareto index of the persistent token importance (smaller: heavier tail)",
                           0.05, 100);
    m_sharing = c.get_double("head_sharing", 0.5,
                             "probability that a head shares the layer's token importance", 0, 1);
    m_noise = c.get_double("noise_logit", 0.5, "half-width of the uniform per-query noise", 0, 100);
    m_distinct_seq = c.get_uint("distinct_sequences", 0,
                                "sequence s repeats sequence s mod this (0 = all distinct)");
    m_distinct_layers = c.get_uint("distinct_layers", 0,
                                   "layer l repeats layer l mod this (0 = all distinct)");
    if (m_layers == 0 || m_heads == 0)
      throw std::logic_error("synthetic attention source: no layers or heads");
  }

  unsigned layers() const override { return m_layers; }
  unsigned heads() const override { return m_heads; }
  std::uint64_t max_tokens() const override { return std::numeric_limits<std::uint32_t>::max(); }

  void scores(unsigned sequence, unsigned layer, unsigned head, std::uint64_t query,
              const std::uint32_t* keys, std::size_t n, double* out) const override {
    const std::uint64_t seq = m_distinct_seq ? sequence % m_distinct_seq : sequence;
    const std::uint64_t lay = m_distinct_layers ? layer % m_distinct_layers : layer;
    const std::uint64_t base = hash(m_seed, seq, lay, 0x5eedull, 0);
    const std::uint64_t head_base = splitmix64(base ^ (std::uint64_t(head) + 1) * 0x100000001b3ull);
    // The terms that do not depend on the query are computed once per key and kept, the
    // recency term once per distance: the same values, in the same order of additions, as
    // evaluating the formula each time (the policies' bookkeeping asks for every kept key at
    // every step).
    const std::vector<double>& heavy = heavy_terms(seq, lay, head, base, head_base, query);
    const std::vector<double>& recency = recency_terms(query);
    // hash(head_base, query, k, 3, 0) with its first two rounds, which do not depend on k, hoisted.
    const std::uint64_t hq = splitmix64(splitmix64(head_base) ^ query);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t k = keys[i];
      if (k > query) throw std::out_of_range("synthetic attention source: key after the query");
      double x = k < m_sinks ? m_sink_logit : 0.0;
      x += recency[query - k];
      x += heavy[k];
      if (m_noise > 0) x += m_noise * (2.0 * unit_interval(splitmix64(splitmix64(splitmix64(hq ^ k) ^ 0x3) ^ 0)) - 1.0);
      out[i] = x;
    }
  }

 private:
  // -ln(u_k) / heavy_tail_index of keys 0 .. query for one (sequence, layer, head).
  const std::vector<double>& heavy_terms(std::uint64_t seq, std::uint64_t lay, unsigned head, std::uint64_t base,
                                         std::uint64_t head_base, std::uint64_t query) const {
    std::vector<double>& v = m_heavy[(seq * m_layers + lay) * m_heads + head];
    const double inv_alpha = 1.0 / m_alpha;
    for (std::uint64_t k = v.size(); k <= query; ++k) {
      const bool shared = unit_interval(splitmix64(head_base ^ (k * 0xc2b2ae3d27d4eb4full) ^ 0x1)) < m_sharing;
      const std::uint64_t hu = shared ? splitmix64(base ^ (k * 0x9e3779b97f4a7c15ull))
                                      : splitmix64(head_base ^ (k * 0x9e3779b97f4a7c15ull) ^ 0x2);
      v.push_back(-std::log(unit_interval(hu)) * inv_alpha);
    }
    return v;
  }
  // recency_logit * exp(-d / recency_tokens) for distances 0 .. query.
  const std::vector<double>& recency_terms(std::uint64_t query) const {
    const double inv_rec = 1.0 / m_recency_tokens;
    for (std::uint64_t d = m_recency.size(); d <= query; ++d)
      m_recency.push_back(m_recency_logit * std::exp(-double(d) * inv_rec));
    return m_recency;
  }

  unsigned m_layers, m_heads;
  mutable std::unordered_map<std::uint64_t, std::vector<double>> m_heavy;
  mutable std::vector<double> m_recency;
  std::uint64_t m_seed = 1, m_sinks = 4, m_distinct_seq = 0, m_distinct_layers = 0;
  double m_sink_logit = 5, m_recency_logit = 3, m_recency_tokens = 32, m_alpha = 1,
         m_sharing = 0.5, m_noise = 0.5;
};

}  // namespace

KELLE_REGISTER(attention_sources(), "synthetic",
               "seeded logits: sinks, recency bias, Pareto heavy hitters shared across heads",
               [](const attention_source_args& a) -> std::unique_ptr<attention_source> {
                 return std::make_unique<synthetic_source>(a);
               });

}  // namespace kelle
