// A latency histogram with logarithmic bins (1000 per decade from 1 ps): constant memory and
// time per sample, percentiles within 0.25 % of the exact value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kelle {

class log_histogram {
 public:
  void add(double seconds) {
    ++m_count;
    m_sum += seconds;
    const double x = std::max(seconds, 1e-12);
    const long b = static_cast<long>(std::floor((std::log10(x) + 12.0) * bins_per_decade));
    const std::size_t i = static_cast<std::size_t>(std::max(0L, b));
    if (i >= m_bins.size()) m_bins.resize(i + 1, 0);
    ++m_bins[i];
    m_max = std::max(m_max, seconds);
  }
  std::uint64_t count() const { return m_count; }
  double mean() const { return m_count ? m_sum / m_count : 0.0; }
  double max() const { return m_max; }
  // The q-quantile (0 < q <= 1): the upper edge of the bin that holds it, capped at the maximum.
  double quantile(double q) const {
    if (!m_count) return 0.0;
    const double target = q * static_cast<double>(m_count);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < m_bins.size(); ++i) {
      seen += m_bins[i];
      if (static_cast<double>(seen) >= target)
        return std::min(m_max, std::pow(10.0, static_cast<double>(i + 1) / bins_per_decade - 12.0));
    }
    return m_max;
  }

  static constexpr double bins_per_decade = 1000.0;

 private:
  std::vector<std::uint64_t> m_bins;
  std::uint64_t m_count = 0;
  double m_sum = 0.0;
  double m_max = 0.0;
};

}  // namespace kelle
