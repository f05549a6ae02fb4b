// One statistics mechanism for every module: a module owns a `stat_group` (an sc_object named
// "stats"), adds named statistics with a unit and a description, and the report collects them by
// walking the SystemC object hierarchy. Energy parts are statistics in joules that also appear in
// the energy breakdown (component "<module>.<part>").
#pragma once

#include <systemc>

#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace kelle {

class stat {
 public:
  stat(std::string name, std::string unit, std::string description,
       std::function<double()> formula = nullptr, bool energy_part = false)
      : m_name(std::move(name)),
        m_unit(std::move(unit)),
        m_description(std::move(description)),
        m_formula(std::move(formula)),
        m_energy_part(energy_part) {}

  stat& operator+=(double v) {
    m_value += v;
    return *this;
  }
  stat& operator++() {
    m_value += 1.0;
    return *this;
  }
  void set(double v) { m_value = v; }
  double value() const { return m_formula ? m_formula() : m_value; }

  const std::string& name() const { return m_name; }
  const std::string& unit() const { return m_unit; }
  const std::string& description() const { return m_description; }
  bool energy_part() const { return m_energy_part; }
  bool is_counter() const { return !m_formula; }

 private:
  std::string m_name;
  std::string m_unit;
  std::string m_description;
  std::function<double()> m_formula;  // derived statistics are computed when read
  bool m_energy_part;
  double m_value = 0.0;
};

class stat_group : public sc_core::sc_object {
 public:
  explicit stat_group(const char* name = "stats") : sc_core::sc_object(name) {}
  const char* kind() const override { return "kelle_stat_group"; }

  // A value the module updates (counts, bytes, accumulated time).
  stat& counter(const std::string& name, const std::string& unit, const std::string& description) {
    return m_stats.emplace_back(name, unit, description);
  }
  // A value derived when the report is made (averages, bandwidths, utilisation).
  void formula(const std::string& name, const std::string& unit, const std::string& description,
               std::function<double()> f) {
    m_stats.emplace_back(name, unit, description, std::move(f));
  }
  // A part of the energy breakdown, in joules (dynamic energy, leakage, refresh, ...).
  void energy(const std::string& name, const std::string& description, std::function<double()> f) {
    m_stats.emplace_back(name, "J", description, std::move(f), true);
  }

  const std::deque<stat>& all() const { return m_stats; }
  std::deque<stat>& all() { return m_stats; }
  // The hierarchical name of the module the statistics belong to.
  std::string owner() const {
    const sc_core::sc_object* p = get_parent_object();
    return p ? p->name() : std::string(name());
  }

 private:
  std::deque<stat> m_stats;  // a deque keeps references stable as statistics are added
};

// Every stat_group below the top-level objects, in hierarchy order.
std::vector<const stat_group*> collect_stat_groups();

// The values of every counter (statistics without a formula) of every stat_group at one moment.
// Counters count activity (accesses, bytes, MACs, busy cycles); formulas are either derived from
// counters or driven by time (leakage, refresh, background power). That split is what sampled
// simulation relies on: activity between detailed samples is extrapolated into the counters,
// while time-driven figures accrue by themselves as simulated time advances.
struct counter_snapshot {
  std::vector<stat*> stats;
  std::vector<double> values;
};
counter_snapshot snapshot_counters();
// Adds amounts[i] to counter stats[i] of `layout` (a snapshot of the same elaboration).
void add_to_counters(const counter_snapshot& layout, const std::vector<double>& amounts);

// Simulated time so far in seconds (for leakage and bandwidth formulas).
inline double now_s() { return sc_core::sc_time_stamp().to_seconds(); }

}  // namespace kelle
