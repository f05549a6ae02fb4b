#include "firmware/policies/refresh/refresh_policy.h"

#include "models/memory/refresh_control.h"

#include <algorithm>

namespace kelle {

refresh_registry& refresh_policies() {
  static refresh_registry r("refresh", "eDRAM refresh policies (policy.refresh)");
  return r;
}

void refresh_policy::record(std::uint64_t addr, std::vector<range> r) {
  for (auto& [a, v] : m_ranges)
    if (a == addr) {
      v = std::move(r);
      return;
    }
  m_ranges.emplace_back(addr, std::move(r));
}

double refresh_policy::expected_failed_bits(const retention_model& m) const {
  double bits = 0;
  for (const auto& [a, v] : m_ranges)
    for (const range& r : v) bits += r.bits * m.failure_probability(r.interval_s);
  return bits;
}

}  // namespace kelle
