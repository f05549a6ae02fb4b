#include "models/memory/edram/retention.h"

#include <cmath>

namespace kelle {

retention_model::retention_model(double median_s, double sigma_decades)
    : m_median_s(median_s), m_sigma(sigma_decades) {}

retention_model retention_model::from_tech(const config_node& edram_tech) {
  const config_node r = edram_tech.child("retention");
  r.require_choice("distribution", {"lognormal"});
  const double median_ms = r.require_double("median_ms", "median retention time in ms", 1e-9);
  const double sigma = r.require_double("sigma_decades", "standard deviation of log10(retention)", 1e-6);
  return retention_model(median_ms * 1e-3, sigma);
}

double retention_model::failure_probability(double t_s) const {
  if (t_s <= 0) return 0.0;
  const double z = (std::log10(t_s) - std::log10(m_median_s)) / m_sigma;
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

}  // namespace kelle
