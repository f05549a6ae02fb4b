// The KV-cache policies on hand-made and synthetic scores (plain C++, no SystemC).
#include <catch2/catch.hpp>

#include "firmware/policies/kv/kv_policy.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <vector>

using namespace kelle;

namespace {

// Logits from a function of (head, query, key).
class table_source final : public attention_source {
 public:
  table_source(unsigned layers, unsigned heads, std::function<double(unsigned, std::uint64_t, unsigned)> f)
      : m_layers(layers), m_heads(heads), m_f(std::move(f)) {}
  unsigned layers() const override { return m_layers; }
  unsigned heads() const override { return m_heads; }
  std::uint64_t max_tokens() const override { return 1u << 20; }
  void scores(unsigned, unsigned, unsigned head, std::uint64_t query, const std::uint32_t* keys,
              std::size_t n, double* out) const override {
    for (std::size_t i = 0; i < n; ++i) out[i] = m_f(head, query, keys[i]);
  }

 private:
  unsigned m_layers, m_heads;
  std::function<double(unsigned, std::uint64_t, unsigned)> m_f;
};

model_shape tiny(unsigned layers, unsigned heads, unsigned kv_heads, unsigned head_dim,
                 unsigned hidden) {
  model_shape m;
  m.name = "tiny";
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.hidden = hidden;
  return m;
}

struct fixture {
  config cfg;
  std::unique_ptr<attention_source> src;
  std::unique_ptr<kv_policy> pol;
};

std::unique_ptr<kv_policy> make_policy(config& cfg, const std::string& name, const model_shape& m,
                                       unsigned batch, const attention_source& src) {
  kv_policy_args a{cfg.root().child_or_empty("kv"), m, batch, &src};
  return kv_policies().create(name, a);
}

fixture synthetic(const std::string& policy, const std::string& kv_yaml,
                  const std::string& attn_yaml, const model_shape& m, unsigned batch) {
  fixture f{config::from_string("kv: {" + kv_yaml + "}\nattention: {" + attn_yaml + "}\n"), {}, {}};
  f.src = make_attention_source({f.cfg.root().child("attention"), m.layers, m.heads});
  f.pol = make_policy(f.cfg, policy, m, batch, *f.src);
  return f;
}

std::vector<std::uint32_t> v(std::initializer_list<std::uint32_t> l) { return l; }

}  // namespace

TEST_CASE("kv: every policy is registered", "[kv]") {
  CHECK(kv_policies().names() == "aep, aerp, full, h2o, streaming");
}

TEST_CASE("kv aep: each head keeps its own best tokens and evicts its own minimum", "[kv]") {
  // Head 0 likes tokens 2 and 4, head 1 likes 3 and 5 (logit 5, others 0).
  table_source src(1, 2, [](unsigned h, std::uint64_t, unsigned k) {
    const bool liked = h == 0 ? (k == 2 || k == 4) : (k == 3 || k == 5);
    return liked ? 5.0 : 0.0;
  });
  auto cfg = config::from_string("kv: {kv_budget: 5, sink_tokens: 1, recent_window: 2}\n");
  auto p = make_policy(cfg, "aep", tiny(1, 2, 2, 4, 8), 1, src);
  p->prefill(8);  // protected: sink 0, window 6, 7; two more slots per head
  CHECK(p->kept(0, 0, 0) == v({0, 2, 4, 6, 7}));
  CHECK(p->kept(0, 0, 1) == v({0, 3, 5, 6, 7}));
  CHECK(p->report(0, 0).evicted_pairs == 6);
  CHECK(p->report(0, 0).kv_bytes == 10 * 2 * 4 * 2);
  CHECK(p->score(0, 0, 0, 2) > p->score(0, 0, 0, 4));  // older: more queries accumulated
  p->decode();  // token 8: each head evicts its own minimum (the younger liked token)
  CHECK(p->kept(0, 0, 0) == v({0, 2, 6, 7, 8}));
  CHECK(p->kept(0, 0, 1) == v({0, 3, 6, 7, 8}));
  CHECK(p->report(0, 0).evicted_pairs == 2);
  p->decode();  // token 9: 6 has left the window and is the minimum (logit 0)
  CHECK(p->kept(0, 0, 0) == v({0, 2, 7, 8, 9}));
  CHECK(p->kept(0, 0, 1) == v({0, 3, 7, 8, 9}));
  CHECK(p->report(0, 0).kept_per_head == 5);
  CHECK(p->report(0, 0).x_tokens == 0);
}

TEST_CASE("kv aep: sinks and the recent window are never evicted", "[kv]") {
  // Sinks and recent tokens get the lowest logits, so only protection keeps them.
  const model_shape m = tiny(2, 4, 4, 8, 32);
  auto f = synthetic("aep", "kv_budget: 24, sink_tokens: 3, recent_window: 8",
                     "seed: 3, sink_positions: 0, recency_logit: 0", m, 2);
  f.pol->prefill(40);
  for (int step = 0; step < 60; ++step) {
    f.pol->decode();
    const std::uint64_t newest = f.pol->tokens() - 1;
    for (unsigned s = 0; s < 2; ++s)
      for (unsigned l = 0; l < 2; ++l)
        for (unsigned h = 0; h < 4; ++h) {
          const auto k = f.pol->kept(s, l, h);
          REQUIRE(k.size() == 24);
          for (std::uint32_t t = 0; t < 3; ++t) CHECK(std::count(k.begin(), k.end(), t) == 1);
          for (std::uint64_t t = newest - 8; t <= newest; ++t)
            CHECK(std::count(k.begin(), k.end(), std::uint32_t(t)) == 1);
        }
  }
}

TEST_CASE("kv aerp: popularity decides the x format, MACs and bytes by hand", "[kv]") {
  // MHA, 4 heads of dim 2, hidden 8: x = 16 B, one (token, head) K+V pair = 8 B.
  // Liked tokens (logit 5): head 0 {2, 3}, head 1 {2, 3}, head 2 {2, 4}, head 3 {4, 5}.
  table_source src(1, 4, [](unsigned h, std::uint64_t, unsigned k) {
    static const std::set<unsigned> liked[4] = {{2, 3}, {2, 3}, {2, 4}, {4, 5}};
    return liked[h].count(k) ? 5.0 : 0.0;
  });
  auto cfg = config::from_string("kv: {kv_budget: 5, sink_tokens: 1, recent_window: 2}\n");
  const model_shape m = tiny(1, 4, 4, 2, 8);
  auto aerp = make_policy(cfg, "aerp", m, 1, src);
  auto aep = make_policy(cfg, "aep", m, 1, src);
  aerp->prefill(8);
  aep->prefill(8);
  // Token 2 is kept by 3 of 4 heads (> 50 %): stored as x. Tokens 3 and 4 (2 of 4) and 5 (1)
  // are not; the sink 0 and the window 6, 7 (kept by every head) are protected and stay K, V.
  CHECK(aerp->stored_as_x(0, 0, 2));
  for (std::uint32_t t : {0u, 3u, 4u, 5u, 6u, 7u}) CHECK_FALSE(aerp->stored_as_x(0, 0, t));
  const auto& r = aerp->report(0, 0);
  CHECK(r.x_tokens == 1);
  CHECK(r.x_converted == 1);
  CHECK(r.kept_pairs == 20);
  CHECK(r.kv_pairs == 17);
  CHECK(r.kv_bytes == 17 * 8);
  CHECK(r.x_bytes == 16);
  CHECK(aep->report(0, 0).kv_bytes == 20 * 8);
  CHECK(r.stored_bytes() == aep->report(0, 0).stored_bytes() - 8);  // 3 pairs (24 B) -> 16 B
  CHECK(r.recompute_macs == 0);  // the prefill computes every K, V anyway

  aerp->decode();  // token 8: heads 0, 1 evict 3, head 2 evicts 4, head 3 evicts 5
  const auto& d = aerp->report(0, 0);
  CHECK(aerp->kept(0, 0, 0) == v({0, 2, 6, 7, 8}));
  CHECK(aerp->kept(0, 0, 3) == v({0, 4, 6, 7, 8}));
  CHECK(d.evicted_pairs == 4);
  CHECK(d.x_attended == 1);
  CHECK(d.recompute_macs == 1.0 * 8 * 2 * 4 * 2);  // x tokens x hidden x 2 x kv_heads x head_dim
  CHECK(d.x_tokens == 1);
  CHECK(d.x_converted == 0);  // token 5 left the window protected zone: kept by no head now
  CHECK(d.kv_pairs == 17);
}

TEST_CASE("kv 2drp groups: a kept pair is high-score when its score is above its head's median", "[kv]") {
  // One head of dim 2 (a pair is 8 B), importance from the last prefill query only: the
  // probabilities follow the logits 3, 0, 2, 0, 1, 0 of tokens 0..5. Sorted: three zeros, then
  // tokens 4, 2, 0; the median (the 4th of 6) is token 4's, so tokens 2 and 0 are high.
  table_source src(1, 1, [](unsigned, std::uint64_t, unsigned k) {
    static const double logit[6] = {3, 0, 2, 0, 1, 0};
    return logit[k];
  });
  auto cfg = config::from_string("kv: {kv_budget: 100, sink_tokens: 1, recent_window: 2, prefill_queries: 1}\n");
  auto p = make_policy(cfg, "aep", tiny(1, 1, 1, 2, 2), 1, src);
  p->prefill(6);
  const auto& r = p->report(0, 0);
  CHECK(r.kept_pairs == 6);
  CHECK(r.high_kv_pairs == 2);
  CHECK(r.low_kv_pairs == 4);
  CHECK(r.high_bytes == 16);
  CHECK(r.low_bytes == 32);
  CHECK(p->score(0, 0, 0, 0) > p->score(0, 0, 0, 2));
  CHECK(p->score(0, 0, 0, 2) > p->score(0, 0, 0, 4));
}

TEST_CASE("kv aerp: a token keeps its format until every head has evicted it", "[kv]") {
  const model_shape m = tiny(1, 8, 8, 16, 128);
  auto f = synthetic("aerp", "kv_budget: 32, sink_tokens: 2, recent_window: 8",
                     "seed: 5, head_sharing: 0.6", m, 1);
  f.pol->prefill(64);
  std::set<std::uint32_t> x_before;
  bool saw_unpopular_x = false, saw_freed = false;
  for (int step = 0; step < 200; ++step) {
    f.pol->decode();
    std::vector<int> count(f.pol->tokens(), 0);
    for (unsigned h = 0; h < 8; ++h)
      for (auto t : f.pol->kept(0, 0, h)) ++count[t];
    for (auto t : x_before) {
      if (count[t] > 0) {
        CHECK(f.pol->stored_as_x(0, 0, t));  // still kept somewhere: still x
        if (count[t] <= 4) saw_unpopular_x = true;
      } else {
        CHECK_FALSE(f.pol->stored_as_x(0, 0, t));  // evicted everywhere: freed
        saw_freed = true;
      }
    }
    x_before.clear();
    for (std::uint32_t t = 0; t < f.pol->tokens(); ++t)
      if (f.pol->stored_as_x(0, 0, t)) x_before.insert(t);
  }
  CHECK(saw_unpopular_x);
  CHECK(saw_freed);
}

TEST_CASE("kv aerp: decide_after judges popularity after more eviction rounds: fewer x tokens", "[kv]") {
  // Synthetic scores, 8 heads: every token leaving the window is still kept by nearly every head,
  // so at its first eviction round it is popular; a few rounds later the heads have disagreed.
  const model_shape m = tiny(2, 8, 8, 16, 128);
  const std::string kv = "kv_budget: 24, sink_tokens: 2, recent_window: 6";
  const std::string attn = "seed: 5, head_sharing: 0.3";
  auto now = synthetic("aerp", kv, attn, m, 1);
  auto spec = synthetic("aerp", kv + ", decide_after: 0", attn, m, 1);
  auto later = synthetic("aerp", kv + ", decide_after: 8", attn, m, 1);
  double x_now = 0, x_spec = 0, x_later = 0;
  for (auto* f : {&now, &spec, &later}) f->pol->prefill(32);
  for (int i = 0; i < 40; ++i) {
    for (auto* f : {&now, &spec, &later}) f->pol->decode();
    x_now += now.pol->total().x_tokens;
    x_spec += spec.pol->total().x_tokens;
    x_later += later.pol->total().x_tokens;
  }
  INFO("x tokens summed over the steps: decide_after 0: " << x_now << ", 8: " << x_later);
  CHECK(x_spec == x_now);  // 0 is the default
  CHECK(x_now > 0);
  CHECK(x_later > 0);
  CHECK(x_later < 0.9 * x_now);
  // A token decided later still keeps its format until every head has evicted it.
  for (unsigned l = 0; l < 2; ++l)
    for (std::uint32_t t = 0; t < 72; ++t)
      if (later.pol->stored_as_x(0, l, t)) {
        bool kept = false;
        for (unsigned h = 0; h < 8; ++h) {
          const auto k = later.pol->kept(0, l, h);
          kept = kept || std::count(k.begin(), k.end(), t) > 0;
        }
        CHECK(kept);
      }
}

TEST_CASE("kv aerp: grouped-query attention never stores x when it is larger", "[kv]") {
  // 4 query heads on 2 KV heads of dim 2, hidden 8: x = 16 B, the K, V of both KV heads 16 B.
  const model_shape m = tiny(1, 4, 2, 2, 8);
  auto f = synthetic("aerp", "kv_budget: 16, sink_tokens: 2, recent_window: 4",
                     "seed: 1, head_sharing: 1", m, 1);
  f.pol->prefill(40);
  for (int i = 0; i < 20; ++i) f.pol->decode();
  CHECK(f.pol->total().x_tokens == 0);
  auto g = synthetic("aerp", "kv_budget: 16, sink_tokens: 2, recent_window: 4, x_only_if_smaller: false",
                     "seed: 1, head_sharing: 1", m, 1);
  g.pol->prefill(40);
  for (int i = 0; i < 20; ++i) g.pol->decode();
  CHECK(g.pol->total().x_tokens > 0);
}

TEST_CASE("kv: full stores the most, aep less, aerp less again on synthetic scores", "[kv]") {
  const model_shape m = tiny(2, 8, 8, 16, 128);
  const std::string kv = "kv_budget: 48, sink_tokens: 4, recent_window: 16";
  const std::string attn = "seed: 11, head_sharing: 0.7";
  auto full = synthetic("full", "", attn, m, 2);
  auto aep = synthetic("aep", kv, attn, m, 2);
  auto aerp = synthetic("aerp", kv, attn, m, 2);
  for (auto* p : {full.pol.get(), aep.pol.get(), aerp.pol.get()}) {
    p->prefill(96);
    for (int i = 0; i < 64; ++i) p->decode();
  }
  const auto f = full.pol->total(), e = aep.pol->total(), r = aerp.pol->total();
  INFO("full " << f.stored_bytes() << " aep " << e.stored_bytes() << " aerp " << r.stored_bytes()
               << " x tokens " << r.x_tokens << " recompute MACs/step " << r.recompute_macs);
  CHECK(f.kept_pairs == 2 * 2 * 8 * 160);
  CHECK(e.kept_pairs == 2 * 2 * 8 * 48);
  CHECK(e.stored_bytes() < f.stored_bytes());
  CHECK(r.stored_bytes() < e.stored_bytes());
  CHECK(r.kept_pairs == e.kept_pairs);
  CHECK(r.x_tokens > 0);
  CHECK(r.recompute_macs == r.x_attended * 128 * 2 * 8 * 16);
  CHECK(e.recompute_macs == 0);
  // 2DRP groups cover every stored token.
  CHECK(r.high_kv_pairs + r.low_kv_pairs == r.kv_pairs);
  CHECK(r.high_x_tokens + r.low_x_tokens == r.x_tokens);
  CHECK(r.high_bytes + r.low_bytes == Approx(r.stored_bytes()));
  CHECK(e.high_kv_pairs > 0.3 * e.kv_pairs);
  CHECK(e.high_kv_pairs <= 0.5 * e.kv_pairs);
}

TEST_CASE("kv streaming and h2o: which tokens they keep", "[kv]") {
  const model_shape m = tiny(1, 2, 2, 4, 8);
  auto s = synthetic("streaming", "kv_budget: 12, sink_tokens: 4", "seed: 2", m, 1);
  s.pol->prefill(30);
  CHECK(s.pol->kept(0, 0, 0) == v({0, 1, 2, 3, 22, 23, 24, 25, 26, 27, 28, 29}));
  s.pol->decode();
  CHECK(s.pol->kept(0, 0, 1) == v({0, 1, 2, 3, 23, 24, 25, 26, 27, 28, 29, 30}));
  // h2o: no sinks, half the budget is the recent window, the rest the heaviest tokens.
  table_source src(1, 2, [](unsigned, std::uint64_t, unsigned k) { return k == 5 ? 6.0 : 0.0; });
  auto cfg = config::from_string("kv: {kv_budget: 8}\n");
  auto h = make_policy(cfg, "h2o", m, 1, src);
  h->prefill(30);
  const auto k = h->kept(0, 0, 0);
  CHECK(k.size() == 8);
  CHECK(std::count(k.begin(), k.end(), 5u) == 1);
  CHECK(std::count(k.begin(), k.end(), 0u) == 1);  // the oldest: most accumulated probability
  for (std::uint32_t t = 26; t < 30; ++t) CHECK(std::count(k.begin(), k.end(), t) == 1);
}

TEST_CASE("kv: budgets are checked and errors name the key", "[kv]") {
  table_source src(1, 2, [](unsigned, std::uint64_t, unsigned) { return 0.0; });
  auto cfg = config::from_string("kv: {kv_budget: 70, sink_tokens: 10, recent_window: 64}\n", "k.yaml");
  CHECK_THROWS_WITH(make_policy(cfg, "aep", tiny(1, 2, 2, 4, 8), 1, src),
                    Catch::Matchers::Contains("kv.kv_budget") &&
                        Catch::Matchers::Contains("must exceed sink_tokens + recent_window"));
}

TEST_CASE("kv: the subset mode agrees with the exhaustive one within 1 percent", "[kv]") {
  // 8 sequences, 4 layers, 32 heads; the synthetic batch holds 2 distinct prompts and one layer
  // statistic repeated (so the sampled units represent the others). Subset: 2 sequences, 2 layers
  // and all heads (an eighth of the work); heads are sampled in a second comparison.
  const model_shape m = tiny(4, 32, 32, 8, 256);
  const std::string kv = "kv_budget: 64, sink_tokens: 4, recent_window: 16";
  const std::string attn = "seed: 21, head_sharing: 0.8, distinct_sequences: 2, distinct_layers: 1";
  auto ex = synthetic("aerp", kv, attn, m, 8);
  auto sub = synthetic("aerp", kv + ", exact_sequences: 2, exact_layers: 2", attn, m, 8);
  auto heads = synthetic("aerp", kv + ", exact_sequences: 2, exact_layers: 2, exact_heads: 16", attn, m, 8);
  kv_layer_report a, b, c;  // summed over every decode step
  for (auto* f : {&ex, &sub, &heads}) {
    f->pol->prefill(128);
    kv_layer_report& acc = f == &ex ? a : f == &sub ? b : c;
    for (int i = 0; i < 96; ++i) {
      f->pol->decode();
      acc += f->pol->total();
    }
  }
  INFO("exhaustive / subset / subset with 16 of 32 heads: kept " << a.kept_pairs << " / "
       << b.kept_pairs << " / " << c.kept_pairs << ", x " << a.x_tokens << " / " << b.x_tokens
       << " / " << c.x_tokens << ", MACs " << a.recompute_macs << " / " << b.recompute_macs
       << " / " << c.recompute_macs << ", high B " << a.high_bytes << " / " << b.high_bytes
       << " / " << c.high_bytes << ", low B " << a.low_bytes << " / " << b.low_bytes << " / "
       << c.low_bytes);
  CHECK(a.x_tokens > 0);
  for (const auto* r : {&b, &c}) {
    const double tol = r == &b ? 0.01 : 0.03;  // head sampling shortens x lifetimes (docs)
    CHECK(r->kept_pairs == Approx(a.kept_pairs).epsilon(0.01));
    CHECK(r->x_tokens == Approx(a.x_tokens).epsilon(tol));
    CHECK(r->recompute_macs == Approx(a.recompute_macs).epsilon(tol));
    CHECK(r->high_bytes == Approx(a.high_bytes).epsilon(tol));
    CHECK(r->low_bytes == Approx(a.low_bytes).epsilon(tol));
    CHECK(r->high_kv_pairs + r->low_kv_pairs == Approx(a.high_kv_pairs + a.low_kv_pairs).epsilon(tol));
  }
  CHECK_THROWS_AS(sub.pol->kept(0, 1, 0), std::out_of_range);  // layer 1 is represented by 0
  CHECK(sub.pol->report(5, 1).x_tokens == sub.pol->report(1, 0).x_tokens);
}

TEST_CASE("kv 2drp groups: computed at the end for the layers that ask for them, the same figures", "[kv]") {
  // The workload asks for the score groups in every pass only for the layers the eDRAM holds;
  // the others' are computed once, by update_groups(). Every figure must be what the eager path
  // reports, x tokens included.
  const model_shape m = tiny(3, 8, 8, 16, 128);
  const std::string kv = "kv_budget: 48, sink_tokens: 4, recent_window: 16";
  const std::string attn = "seed: 5, head_sharing: 0.7";
  auto eager = synthetic("aerp", kv, attn, m, 2);
  auto lazy = synthetic("aerp", kv, attn, m, 2);
  lazy.pol->groups_each_pass({true, false, false});
  for (auto* p : {eager.pol.get(), lazy.pol.get()}) {
    p->prefill(96);
    for (int i = 0; i < 40; ++i) p->decode();
  }
  // Before update_groups() only layer 0's groups are current.
  CHECK(lazy.pol->layer_total(0).high_bytes == eager.pol->layer_total(0).high_bytes);
  CHECK(lazy.pol->layer_total(1).high_bytes == 0);
  lazy.pol->update_groups();
  for (unsigned l = 0; l < m.layers; ++l) {
    const auto a = eager.pol->layer_total(l), b = lazy.pol->layer_total(l);
    CHECK(a.high_kv_pairs == b.high_kv_pairs);
    CHECK(a.low_kv_pairs == b.low_kv_pairs);
    CHECK(a.high_x_tokens == b.high_x_tokens);
    CHECK(a.low_x_tokens == b.low_x_tokens);
    CHECK(a.high_bytes == b.high_bytes);
    CHECK(a.low_bytes == b.low_bytes);
    CHECK(a.kv_pairs == b.kv_pairs);
    CHECK(a.x_tokens == b.x_tokens);
  }
  CHECK(eager.pol->total().x_tokens > 0);
  CHECK(eager.pol->total().high_bytes > 0);
}

TEST_CASE("kv policies: the tokens they protect, which the firmware programs into the evictor", "[kv]") {
  const model_shape m = tiny(1, 2, 2, 4, 8);
  auto prot = [&](const std::string& name, const std::string& kv) {
    return synthetic(name, kv, "seed: 1", m, 1).pol->protected_tokens();
  };
  // AEP and AERP: the evictor's defaults (the paper's 10 sinks, 64 recent tokens) unless given.
  CHECK(prot("aep", "kv_budget: 128").sink_tokens == score_board_config{}.sink_tokens);
  CHECK(prot("aerp", "kv_budget: 128").recent_window == score_board_config{}.recent_window);
  CHECK(prot("aep", "kv_budget: 64, sink_tokens: 4, recent_window: 16").recent_window == 16);
  // StreamingLLM evicts the oldest non-sink token: every other is protected (24 - 4 - 1).
  const auto s = prot("streaming", "kv_budget: 24, sink_tokens: 4");
  CHECK(s.sink_tokens == 4);
  CHECK(s.recent_window == 19);
  // H2O: no sinks, half the budget recent.
  CHECK(prot("h2o", "kv_budget: 40").sink_tokens == 0);
  CHECK(prot("h2o", "kv_budget: 40").recent_window == 20);
}

TEST_CASE("kv score median: the guessed band gives the element of rank n / 2 as a full selection does", "[kv]") {
  // A head's scores over many steps: each step adds a little to every score, replaces a few,
  // and now and then jumps (the band misses and the whole set is ordered); sizes odd and even,
  // ties included.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{64}, std::size_t{2048}, std::size_t{2049}}) {
    std::vector<double> s(n);
    for (auto& x : s) x = std::floor(u(rng) * 50) / 10;  // coarse values: many ties
    median_guess g;
    std::vector<double> band;
    for (int step = 0; step < 300; ++step) {
      for (auto& x : s) x += u(rng) * 1e-3;
      s[rng() % n] = u(rng) * 5;
      if (step % 97 == 96)
        for (auto& x : s) x *= 3;
      std::vector<double> copy = s;
      const double full = score_median(copy);
      const std::vector<double> before = s;
      REQUIRE(score_median(s, g, band) == full);
      REQUIRE(s == before);  // the scores themselves are left as they are
    }
  }
}
