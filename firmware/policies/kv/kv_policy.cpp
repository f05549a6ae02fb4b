// The KV-policy registry, the report's arithmetic, the 2DRP median, the keys every policy shares
// and make_kv_engine (the engine itself: kv_engine.h). See kv_policy.h and docs/policies.md.
#include "firmware/policies/kv/kv_policy.h"

#include "firmware/policies/kv/kv_engine.h"

#include <algorithm>
#include <cstddef>

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

double score_median(std::vector<double>& scores) {
  const auto mid = scores.begin() + static_cast<std::ptrdiff_t>(scores.size() / 2);
  std::nth_element(scores.begin(), mid, scores.end());
  return *mid;
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
