#include "firmware/policies/refresh/lifetime_rule.h"

#include "models/memory/refresh_control.h"
#include "models/thermal/die_temperature.h"
#include "platform/config/config.h"
#include "platform/system/workload.h"

#include <cmath>

namespace kelle {

sc_core::sc_time scaled_refresh_interval(double base_us, const refresh_scale& s) {
  const double v = base_us * s.factor;
  const sc_core::sc_time res = sc_core::sc_get_time_resolution();
  if (v * 1e-6 >= res.to_seconds()) return sc_core::sc_time(v, sc_core::SC_US);
  {
    std::string text = "temperature-aware refresh cannot keep up at a sensed " + format_number(s.sensed_C) +
                             " C + a " + format_number(s.guard_C) + " C guard band: the cells retain " +
                             format_number(s.factor) + " times as long as at the anchor, so a " +
                             format_number(base_us) + " us refresh interval becomes " + format_number(v * 1e6) +
                             " ps, below the simulator's time resolution (" + res.to_string() +
                             "); the die is beyond any temperature the retention law can serve (a temperature "
                             "that ran away under its own power, or thermal.extrapolate far beyond the validated range)";
    // A die that went beyond the validated range (without thermal.extrapolate) and ran away
    // under its own refresh power: that is the input error, this is where it ends the run.
    const die_temperature* die = die_temperature::current();
    const std::string why = die ? die->range_error() : "";
    if (!why.empty()) text = why + "; " + text;
    const sc_core::sc_process_handle h = sc_core::sc_get_current_process_handle();
    if (!h.valid() || h.proc_kind() != sc_core::SC_THREAD_PROC_) throw config_error(text);
    record_run_input_error(text);
  }
  stop_run_for_input_error();
}

lifetime_rule::lifetime_rule(field_map fields, std::vector<field_rule> rules, stall_action stall)
    : m_fields(std::move(fields)),
      m_rules(std::move(rules)),
      m_stall(stall),
      m_stats("lifetime_rule"),
      m_buffers(m_stats.counter("buffers", "count", "activation buffers with a lifetime-aware field")),
      m_within_budget(m_stats.counter("within_budget", "count", "of which: consumed within the retention budget")),
      m_outlived(m_stats.counter("outlived", "count", "of which: outlived it (a stall)")) {
  for (const auto& f : m_fields.fields())
    m_field.push_back(
        {&m_stats.counter(f.name + "_stored_bits", "bits", "bits of field " + f.name + " placed (each buffer once)"),
         &m_stats.counter(f.name + "_expected_failed_bits", "bits", "expected failed bits of field " + f.name),
         &m_stats.counter(f.name + "_refreshed_bytes", "B", "the stalls' refreshes of field " + f.name)});
}

lifetime_rule::figures lifetime_rule::totals() const {
  figures r;
  for (const field_counters& f : m_field) {
    r.bits.push_back(f.bits->value());
    r.expected_failed_bits.push_back(f.expected_failed_bits->value());
    r.refreshed_bytes.push_back(f.refreshed_bytes->value());
  }
  r.buffers = m_buffers.value();
  r.within_budget = m_within_budget.value();
  r.outlived = m_outlived.value();
  return r;
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
                             r.interval_us > 0 ? scaled_refresh_interval(r.interval_us, m_scale)
                                               : e.default_refresh_interval());
  }
}

void lifetime_rule::released(refresh_control& e, std::uint64_t bytes, double lifetime_s) {
  const retention_model& m = e.retention();
  bool aware = false, outlived = false;
  for (std::size_t f = 0; f < m_fields.size(); ++f) {
    const double n = double(m_fields.begin(bytes, f + 1) - m_fields.begin(bytes, f));
    *m_field[f].bits += n * 8;
    const double B = m_rules[f].budget_us * 1e-6 * m_scale.factor;
    if (B <= 0 || n == 0) continue;
    aware = true;
    if (lifetime_s <= B) {
      *m_field[f].expected_failed_bits += n * 8 * m.failure_probability(lifetime_s);
      continue;
    }
    outlived = true;
    if (m_stall == stall_action::count) {
      *m_field[f].expected_failed_bits += n * 8 * m.failure_probability(lifetime_s);
      continue;
    }
    const double refreshed = n * std::floor(lifetime_s / B);
    e.add_refresh(refreshed);
    *m_field[f].refreshed_bytes += refreshed;
    *m_field[f].expected_failed_bits += n * 8 * m.failure_probability(B);
  }
  if (!aware) return;
  ++m_buffers;
  ++(outlived ? m_outlived : m_within_budget);
}

}  // namespace kelle
