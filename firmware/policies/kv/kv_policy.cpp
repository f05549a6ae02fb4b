// The KV-policy registry, the report's arithmetic and the 2DRP median. See kv_policy.h and
// docs/policies.md.
#include "firmware/policies/kv/kv_policy.h"

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

}  // namespace kelle
