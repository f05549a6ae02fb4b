// The lifetime rule for transient data (activation buffers): the firmware knows from the schedule
// when each buffer is written (its producer completes) and when it dies (its last consumer
// completes). A value's bits are grouped by a field map; a field is either refreshed at an
// interval (0: the array's own) or lifetime-aware with a retention budget B: it is left
// unrefreshed, and
//   - a buffer consumed within B (lifetime L <= B) costs no refresh; its expected failed bits are
//     bits x P(fail | L);
//   - a buffer that lives longer (a stall, or a buffer that spans the pass) is, with
//     `stall: refresh`, refreshed at every multiple of B it outlives (floor(L / B) refreshes of
//     the field's bytes, failures bits x P(B)), or, with `stall: count`, left alone and its
//     failures counted (bits x P(L)).
// Per buffer, not per transaction: two interval changes when it is placed, one account when it
// dies. The refreshes a stall costs are added to the array's refreshed bytes when the buffer dies
// (refresh_control::add_refresh), so energy and sampled decode see them.
#pragma once

#include "firmware/policies/refresh/field_map.h"
#include "platform/stats/stats.h"

#include <systemc>

#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

// The temperature-aware scale of refresh intervals (docs/models/thermal.md): the factor, and the
// sensed temperature and guard band it was computed for (named by the error below). {1, ...}: the
// intervals as given.
struct refresh_scale {
  double factor = 1.0;
  double sensed_C = 0;
  double guard_C = 0;
};

// A refresh interval of `base_us` x `s.factor` us (a policy's interval x the temperature-aware
// scale) as a sc_time. When it is not at least the kernel's time resolution (the sensed
// temperature so far above the anchor that the cells would need refreshing more often than the
// simulator can tell times apart: the refresh cannot keep up, typically a die whose temperature
// ran away under its own refresh power), the run stops with a one-line input error naming the
// temperature and the interval; a run not yet started throws a config_error.
sc_core::sc_time scaled_refresh_interval(double base_us, const refresh_scale& s);

class refresh_control;
class retention_model;

class lifetime_rule {
 public:
  enum class stall_action { refresh, count };
  struct field_rule {
    double interval_us;  // refreshed fields: their interval (0: the array's own)
    double budget_us;    // > 0: lifetime-aware with this retention budget (not refreshed)
  };
  // Figures since the start of the run, by field (passes not simulated included: they are
  // counters of the rule's statistics, `lifetime_rule.*`, which sampled simulation extrapolates).
  struct figures {
    std::vector<double> bits;                  // bits placed in the field (each buffer once)
    std::vector<double> expected_failed_bits;  // lifetime-aware fields
    std::vector<double> refreshed_bytes;       // stalls' refreshes
    double buffers = 0, within_budget = 0, outlived = 0;  // buffers of lifetime-aware fields
  };

  lifetime_rule(field_map fields, std::vector<field_rule> rules, stall_action stall);

  // A buffer of `bytes` at `addr` (local to `e`) is allocated, before it is written.
  void placed(refresh_control& e, std::uint64_t addr, std::uint64_t bytes);
  // Its last consumer completed `lifetime_s` after its producer did; before the array releases it.
  void released(refresh_control& e, std::uint64_t bytes, double lifetime_s);

  // Temperature-aware refresh: intervals and budgets x `s.factor` from now on.
  void set_scale(const refresh_scale& s) { m_scale = s; }
  double scale() const { return m_scale.factor; }
  const field_map& fields() const { return m_fields; }
  const std::vector<field_rule>& rules() const { return m_rules; }
  stall_action stall() const { return m_stall; }
  figures totals() const;

 private:
  field_map m_fields;
  std::vector<field_rule> m_rules;
  stall_action m_stall;
  refresh_scale m_scale;
  stat_group m_stats;
  struct field_counters {
    stat* bits;
    stat* expected_failed_bits;
    stat* refreshed_bytes;
  };
  std::vector<field_counters> m_field;
  stat& m_buffers;
  stat& m_within_budget;
  stat& m_outlived;
};

}  // namespace kelle
