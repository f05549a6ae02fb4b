// The KV-policy registry, the report's arithmetic and the 2DRP median. See kv_policy.h and
// docs/policies.md.
#include "firmware/policies/kv/kv_policy.h"

#include <algorithm>
#include <cmath>
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

double score_median(const std::vector<double>& scores, median_guess& g, std::vector<double>& band) {
  const std::size_t n = scores.size(), t = n / 2;
  band.resize(n);
  if (g.half_width >= 0) {
    const double lo = g.centre - g.half_width, hi = g.centre + g.half_width;
    std::size_t below = 0, m = 0;
    for (std::size_t i = 0; i < n; ++i) {  // without branches: the outcome is a coin toss
      const double x = scores[i];
      below += x < lo;
      band[m] = x;
      m += (x >= lo) & (x <= hi);
    }
    if (below <= t && t < below + m) {  // the element of rank t is the band's of rank t - below
      const auto mid = band.begin() + static_cast<std::ptrdiff_t>(t - below);
      std::nth_element(band.begin(), mid, band.begin() + static_cast<std::ptrdiff_t>(m));
      g.centre = *mid;
      if (m > 256) g.half_width /= 2;  // keep the band small: a few dozen elements
      return g.centre;
    }
  }
  std::copy(scores.begin(), scores.end(), band.begin());
  g.centre = score_median(band);
  g.half_width = g.half_width > 0 ? 2 * g.half_width : std::max(1e-3 * std::fabs(g.centre), 1e-300);
  return g.centre;
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
