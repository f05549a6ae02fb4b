#include "firmware/policies/refresh/lifetime_rule.h"

#include "models/memory/refresh_control.h"

#include <cmath>

namespace kelle {

lifetime_rule::lifetime_rule(field_map fields, std::vector<field_rule> rules, stall_action stall)
    : m_fields(std::move(fields)), m_rules(std::move(rules)), m_stall(stall) {
  const std::size_t n = m_fields.size();
  m_fig.bits.assign(n, 0.0);
  m_fig.expected_failed_bits.assign(n, 0.0);
  m_fig.refreshed_bytes.assign(n, 0.0);
}

void lifetime_rule::placed(refresh_control& e, std::uint64_t addr, std::uint64_t bytes) {
  for (std::size_t f = 0; f < m_fields.size(); ++f) {
    const std::uint64_t b = m_fields.begin(bytes, f), n = m_fields.begin(bytes, f + 1) - b;
    if (n == 0) continue;
    const field_rule& r = m_rules[f];
    if (r.budget_us > 0)
      e.set_unrefreshed(addr + b, n);
    else
      e.set_refresh_interval(addr + b, n,
                             r.interval_us > 0 ? sc_core::sc_time(r.interval_us, sc_core::SC_US)
                                               : e.default_refresh_interval());
  }
}

void lifetime_rule::released(refresh_control& e, std::uint64_t bytes, double lifetime_s) {
  const retention_model& m = e.retention();
  bool aware = false, outlived = false;
  for (std::size_t f = 0; f < m_fields.size(); ++f) {
    const double n = double(m_fields.begin(bytes, f + 1) - m_fields.begin(bytes, f));
    m_fig.bits[f] += n * 8;
    const double B = m_rules[f].budget_us * 1e-6;
    if (B <= 0 || n == 0) continue;
    aware = true;
    if (lifetime_s <= B) {
      m_fig.expected_failed_bits[f] += n * 8 * m.failure_probability(lifetime_s);
      continue;
    }
    outlived = true;
    if (m_stall == stall_action::count) {
      m_fig.expected_failed_bits[f] += n * 8 * m.failure_probability(lifetime_s);
      continue;
    }
    const double refreshed = n * std::floor(lifetime_s / B);
    e.add_refresh(refreshed);
    m_fig.refreshed_bytes[f] += refreshed;
    m_fig.expected_failed_bits[f] += n * 8 * m.failure_probability(B);
  }
  if (!aware) return;
  m_fig.buffers += 1;
  (outlived ? m_fig.outlived : m_fig.within_budget) += 1;
}

void lifetime_rule::flatten(std::vector<double>& out) const {
  for (std::size_t f = 0; f < m_fields.size(); ++f)
    out.insert(out.end(), {m_fig.bits[f], m_fig.expected_failed_bits[f], m_fig.refreshed_bytes[f]});
  out.insert(out.end(), {m_fig.buffers, m_fig.within_budget, m_fig.outlived});
}

void lifetime_rule::add_extrapolated(const double* a) {
  for (std::size_t f = 0; f < m_fields.size(); ++f, a += 3) {
    m_fig.bits[f] += a[0];
    m_fig.expected_failed_bits[f] += a[1];
    m_fig.refreshed_bytes[f] += a[2];
  }
  m_fig.buffers += a[0];
  m_fig.within_budget += a[1];
  m_fig.outlived += a[2];
}

}  // namespace kelle
