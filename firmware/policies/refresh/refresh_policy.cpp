#include "firmware/policies/refresh/refresh_policy.h"

#include "models/memory/refresh_control.h"
#include "models/thermal/die_temperature.h"

#include <algorithm>

namespace kelle {

refresh_registry& refresh_policies() {
  static refresh_registry r("refresh", "eDRAM refresh policies (policy.refresh)");
  return r;
}

std::string refresh_policy::set_kv_format(const kv_format& f) {
  if (m_kv_fields.text() == "msb_lsb" || f.bits() == m_kv_fields.width()) return "";
  const std::string own = f.float_fields();
  if (own.empty())
    return f.name() + "'s codes have no sign, exponent or mantissa field; " + name() +
           " splits the KV words by the field map '" + m_kv_fields.text() +
           "': use policy.refresh none, uniform or 2drp with this KV format";
  m_kv_fields = field_map::of_format(f);
  return "";
}

void refresh_policy::record(std::uint64_t addr, std::vector<range> r) {
  for (auto& [a, v] : m_ranges)
    if (a == addr) {
      v = std::move(r);
      return;
    }
  m_ranges.emplace_back(addr, std::move(r));
}

double refresh_policy::scale_for(refresh_control& e) {
  if (!m_temperature_aware) return 1.0;
  const retention_model& m = e.retention();
  die_temperature* d = die_temperature::current();
  m_sensed_C = d ? d->sensed_C() : m.law().reference_C;
  m_scale = m.retention_factor(m_sensed_C + m_guard_C);
  if (m_transient) m_transient->set_scale(scale());
  // A scale other than 1 moves intervals with the temperature: the array accounts refresh as the
  // integral of bytes x dt / interval from now on (at the anchor with guard band 0 the scale is
  // exactly 1 and the accounting stays the grid's, bit for bit).
  if (m_scale != 1.0) e.use_continuous_refresh();
  return m_scale;
}

void refresh_policy::apply_fields(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, double high,
                                  const std::vector<double>& high_us, const std::vector<double>& low_us) {
  std::vector<range> ranges;
  const double s = scale_for(e);
  for (std::size_t f = 0; f < m_kv_fields.size(); ++f) {
    const std::uint64_t b = m_kv_fields.begin(bytes, f), n = m_kv_fields.begin(bytes, f + 1) - b;
    const std::uint64_t hi = static_cast<std::uint64_t>(high * double(n));
    const std::uint64_t parts[2][2] = {{addr + b, hi}, {addr + b + hi, n - hi}};
    const double base[2] = {high_us[f], low_us[f]};
    for (int i = 0; i < 2; ++i) {
      if (parts[i][1] == 0) continue;
      e.set_refresh_interval(parts[i][0], parts[i][1], scaled_refresh_interval(base[i], scale()));
      ranges.push_back({double(parts[i][1]) * 8, base[i] * s * 1e-6, unsigned(f)});
    }
  }
  record(addr, std::move(ranges));
}

double refresh_policy::expected_failed_bits(const retention_model& m) const {
  double bits = 0;
  for (const auto& [a, v] : m_ranges)
    for (const range& r : v) bits += r.bits * m.failure_probability(r.interval_s);
  return bits;
}

std::vector<double> refresh_policy::expected_failed_bits_by_field(const retention_model& m) const {
  std::vector<double> bits(m_kv_fields.size(), 0.0);
  for (const auto& [a, v] : m_ranges)
    for (const range& r : v)
      for (std::size_t f = 0; f < bits.size(); ++f)
        if (r.field == f || r.field == all_fields)
          bits[f] += r.bits * m.failure_probability(r.interval_s) *
                     (r.field == f ? 1.0 : double(m_kv_fields.fields()[f].bits()) / m_kv_fields.width());
  return bits;
}

}  // namespace kelle
