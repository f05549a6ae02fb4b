// Retention-failure model of an eDRAM cell: the probability that a bit has lost its value a
// given time after it was last written or refreshed. Retention times are log-normal in log10(t)
// (parameters in tech.edram.retention; calibration in docs/models/memory-edram.md).
#pragma once

#include "platform/config/config.h"

namespace kelle {

class retention_model {
 public:
  retention_model(double median_s, double sigma_decades);
  // Reads tech.edram.retention.{distribution, median_ms, sigma_decades}.
  static retention_model from_tech(const config_node& edram_tech);

  // P(retention time < t): the fraction of bits that fail when left t seconds unrefreshed.
  double failure_probability(double t_s) const;
  double median_s() const { return m_median_s; }
  double sigma_decades() const { return m_sigma; }

 private:
  double m_median_s;
  double m_sigma;
};

}  // namespace kelle
