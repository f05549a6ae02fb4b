// Attention-score sources: the synthetic generator and the trace replay.
#include <catch2/catch.hpp>

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/workload/attention/trace_source.h"

#include <cstdio>
#include <numeric>
#include <unistd.h>

using namespace kelle;

namespace {

std::unique_ptr<attention_source> make(config& cfg, unsigned layers, unsigned heads) {
  return make_attention_source({cfg.root().child_or_empty("attention"), layers, heads});
}

std::vector<double> row(const attention_source& s, unsigned seq, unsigned l, unsigned h,
                        std::uint32_t q) {
  std::vector<std::uint32_t> keys(q + 1);
  std::iota(keys.begin(), keys.end(), 0u);
  std::vector<double> out(q + 1);
  s.scores(seq, l, h, q, keys.data(), keys.size(), out.data());
  return out;
}

model_shape mha(unsigned layers, unsigned heads, unsigned head_dim) {
  model_shape m;
  m.name = "t";
  m.layers = layers;
  m.heads = m.kv_heads = heads;
  m.head_dim = head_dim;
  m.hidden = heads * head_dim;
  return m;
}

}  // namespace

TEST_CASE("attention: the sources are registered", "[attention]") {
  // `functional` is functional mode's (docs/functional.md); alone it is a configuration error.
  CHECK(attention_sources().names() == "functional, synthetic, trace");
}

TEST_CASE("attention synthetic: the same seed gives the same logits, another seed others", "[attention]") {
  auto c1 = config::from_string("attention: {type: synthetic, seed: 9}\n");
  auto c2 = config::from_string("attention: {seed: 9}\n");
  auto c3 = config::from_string("attention: {seed: 10}\n");
  auto a = make(c1, 2, 4), b = make(c2, 2, 4), c = make(c3, 2, 4);
  CHECK(row(*a, 1, 1, 3, 200) == row(*b, 1, 1, 3, 200));
  CHECK(row(*a, 1, 1, 3, 200) != row(*c, 1, 1, 3, 200));
  // Order independence: asking a subset gives the same values as the full row.
  const auto full = row(*a, 0, 0, 0, 50);
  const std::uint32_t keys[3] = {7, 0, 50};
  double out[3];
  a->scores(0, 0, 0, 50, keys, 3, out);
  CHECK(out[0] == full[7]);
  CHECK(out[1] == full[0]);
  CHECK(out[2] == full[50]);
}

TEST_CASE("attention synthetic: sinks and recency raise the logits", "[attention]") {
  auto cfg = config::from_string(
      "attention: {sink_positions: 2, sink_logit: 5, recency_logit: 3, recency_tokens: 10, "
      "noise_logit: 0, heavy_tail_index: 100}\n");
  auto s = make(cfg, 1, 1);
  const auto r = row(*s, 0, 0, 0, 400);
  // heavy_tail_index 100 makes the heavy-hitter term almost 0.
  CHECK(r[0] == Approx(5).margin(0.2));
  CHECK(r[200] == Approx(0).margin(0.2));
  CHECK(r[400] == Approx(3).margin(0.2));
  CHECK(r[390] == Approx(3 * std::exp(-1.0)).margin(0.2));
}

TEST_CASE("attention synthetic: head_sharing decides how many tokens are popular", "[attention]") {
  const model_shape m = mha(2, 16, 16);
  double x[2];
  int i = 0;
  for (double sharing : {0.1, 0.9}) {
    auto cfg = config::from_string("attention: {seed: 4, head_sharing: " + std::to_string(sharing) +
                                   "}\nkv: {kv_budget: 64, sink_tokens: 4, recent_window: 16}\n");
    auto src = make(cfg, m.layers, m.heads);
    auto p = kv_policies().create("aerp", kv_policy_args{cfg.root().child("kv"), m, 1, src.get()});
    p->prefill(128);
    for (int s = 0; s < 64; ++s) p->decode();
    x[i++] = p->total().x_tokens;
  }
  INFO("x tokens with head_sharing 0.1: " << x[0] << ", 0.9: " << x[1]);
  CHECK(x[1] > 2 * x[0]);
  CHECK(x[1] > 20);
}

TEST_CASE("attention trace: a recorded trace round-trips and replays the same logits", "[attention]") {
  auto cfg = config::from_string("attention: {seed: 3}\n");
  auto syn = make(cfg, 2, 3);
  const attention_trace t = record_attention_trace(*syn, 2, 40);
  CHECK(t.logits.size() == 2u * 2 * 3 * 820);
  const std::string file = "/tmp/kelle_trace_" + std::to_string(::getpid()) + ".katt";
  t.write(file);
  const attention_trace u = attention_trace::read(file);
  CHECK(u.sequences == 2);
  CHECK(u.layers == 2);
  CHECK(u.heads == 3);
  CHECK(u.tokens == 40);
  CHECK(u.logits == t.logits);
  auto tc = config::from_string("attention: {type: trace, file: " + file + "}\n");
  auto rep = make(tc, 4, 3);  // 4 layers: layer l replays layer l mod 2
  CHECK(rep->max_tokens() == 40);
  const auto a = row(*syn, 1, 1, 2, 39), b = row(*rep, 1, 3, 2, 39), c = row(*rep, 3, 1, 2, 39);
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    CHECK(b[k] == double(float(a[k])));
    CHECK(c[k] == b[k]);  // sequence 3 replays sequence 1
  }
  std::uint32_t key = 0;
  double out;
  CHECK_THROWS_AS(rep->scores(0, 0, 0, 40, &key, 1, &out), std::out_of_range);
  std::remove(file.c_str());
}

TEST_CASE("attention trace: the example file drives a policy", "[attention]") {
  auto cfg = config::from_string(
      "attention: {type: trace, file: traces/example.katt}\n"
      "kv: {kv_budget: 24, sink_tokens: 2, recent_window: 8}\n");
  auto src = make(cfg, 2, 4);
  CHECK(src->max_tokens() == 64);
  CHECK(src->heads() == 4);
  const model_shape m = mha(2, 4, 16);
  auto p = kv_policies().create("aerp", kv_policy_args{cfg.root().child("kv"), m, 1, src.get()});
  p->prefill(32);
  for (int s = 0; s < 32; ++s) p->decode();
  CHECK(p->tokens() == 64);
  CHECK(p->total().kept_pairs == 2 * 4 * 24);
  CHECK_THROWS_AS(p->decode(), std::out_of_range);  // the trace ends at 64 tokens
}

TEST_CASE("attention trace: errors name the key and the file", "[attention]") {
  auto cfg = config::from_string("attention: {type: trace, file: /nonexistent.katt}\n", "a.yaml");
  CHECK_THROWS_WITH(make(cfg, 2, 4), Catch::Matchers::Contains("attention.file") &&
                                         Catch::Matchers::Contains("/nonexistent.katt"));
  auto heads = config::from_string("attention: {type: trace, file: traces/example.katt}\n", "h.yaml");
  CHECK_THROWS_WITH(make(heads, 2, 8), Catch::Matchers::Contains("4 heads, the model 8"));
}
