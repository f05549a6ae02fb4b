// One statistics mechanism for every module: a module owns a `stat_group` (an sc_object named
// "stats"), adds named statistics with a unit and a description, and the report collects them by
// walking the SystemC object hierarchy. A statistic carries its meaning in a tag: an energy part
// (joules that appear in the energy breakdown, component "<module>.<part>") says which kind of
// energy it is; a figure of one traffic class says which class. Results group statistics by
// their tags, never by their names.
#pragma once

#include "platform/tlm/traffic_class.h"

#include <systemc>

#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace kelle {

// What kind of energy an energy part is (the energy breakdown's categories come from it).
enum class energy_kind : std::uint8_t {
  none = 0,    // not an energy part
  compute,     // a compute block's work (MACs, element operations, active cycles)
  access,      // a memory's reads and writes
  activate,    // a DRAM's row activations (ACT/PRE)
  refresh,     // a memory's refresh
  leakage,     // an on-chip array's leakage power x time
  background,  // a DRAM's background (standby) power x time
};

// A statistic's meaning beyond its name and unit.
struct stat_tag {
  energy_kind energy = energy_kind::none;
  bool by_class = false;  // a figure of one traffic class (`traffic`)
  traffic_class traffic = traffic_class::unclassified;
  static stat_tag of_class(traffic_class c) { return {energy_kind::none, true, c}; }
};

class stat {
 public:
  stat(std::string name, std::string unit, std::string description,
       std::function<double()> formula = nullptr, stat_tag tag = {})
      : m_name(std::move(name)),
        m_unit(std::move(unit)),
        m_description(std::move(description)),
        m_formula(std::move(formula)),
        m_tag(tag) {}

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
  const stat_tag& tag() const { return m_tag; }
  bool energy_part() const { return m_tag.energy != energy_kind::none; }
  bool is_counter() const { return !m_formula; }

 private:
  std::string m_name;
  std::string m_unit;
  std::string m_description;
  std::function<double()> m_formula;  // derived statistics are computed when read
  stat_tag m_tag;
  double m_value = 0.0;
};

class stat_group : public sc_core::sc_object {
 public:
  // A module's statistics are its group "stats"; an object that is not a module (a policy, the
  // firmware's layer operations) owns a group of its own name. An unreported group's counters
  // are part of every snapshot (sampled simulation extrapolates them) but not of the report or
  // of results.json's `stats` (their owner writes them elsewhere, e.g. layers.csv).
  explicit stat_group(const char* name = "stats", bool reported = true)
      : sc_core::sc_object(name), m_reported(reported) {}
  bool reported() const { return m_reported; }
  const char* kind() const override { return "kelle_stat_group"; }

  // A value the module updates (counts, bytes, accumulated time).
  stat& counter(const std::string& name, const std::string& unit, const std::string& description,
                stat_tag tag = {}) {
    return m_stats.emplace_back(name, unit, description, nullptr, tag);
  }
  // A value derived when the report is made (averages, bandwidths, utilisation).
  void formula(const std::string& name, const std::string& unit, const std::string& description,
               std::function<double()> f, stat_tag tag = {}) {
    m_stats.emplace_back(name, unit, description, std::move(f), tag);
  }
  // A part of the energy breakdown, in joules, of kind `kind` (not none).
  void energy(energy_kind kind, const std::string& name, const std::string& description, std::function<double()> f) {
    m_stats.emplace_back(name, "J", description, std::move(f), stat_tag{kind, false, traffic_class::unclassified});
  }

  const std::deque<stat>& all() const { return m_stats; }
  std::deque<stat>& all() { return m_stats; }
  // The hierarchical name of the module the statistics belong to ("<module>.<group>" for a group
  // not named "stats").
  std::string owner() const {
    const sc_core::sc_object* p = get_parent_object();
    if (!p) return basename();
    return std::string(basename()) == "stats" ? std::string(p->name()) : std::string(p->name()) + "." + basename();
  }

 private:
  std::deque<stat> m_stats;  // a deque keeps references stable as statistics are added
  bool m_reported;
};

// Every stat_group below the top-level objects, in hierarchy order.
std::vector<const stat_group*> collect_stat_groups();

// The values of every counter (statistics without a formula) of every stat_group at one moment.
// Counters count activity (accesses, bytes, MACs, busy cycles, lifetimes, layer times); formulas
// are either derived from counters or driven by time (leakage, refresh, background power). That
// split is what sampled simulation relies on: activity between detailed samples is extrapolated
// into the counters, while time-driven figures accrue by themselves as simulated time advances.
// An owner whose figure must follow extrapolation keeps it as a counter (or derives it from one).
struct counter_snapshot {
  std::vector<stat*> stats;
  std::vector<double> values;
};
counter_snapshot snapshot_counters();
// What the counters moved from `before` to `after`, laid out as `after` (a later snapshot of the
// same elaboration; counters created since `before` count from 0). Counters are only ever added,
// never removed, so `before`'s counters are a subsequence of `after`'s.
counter_snapshot counter_delta(const counter_snapshot& before, const counter_snapshot& after);
// `d`'s values laid out as `layout` (a snapshot with `d`'s counters and maybe more; `missing`
// for the counters `d` does not have).
std::vector<double> align(const counter_snapshot& d, const counter_snapshot& layout, double missing = 0.0);
// Adds each value of `amounts` to its counter.
void add_to_counters(const counter_snapshot& amounts);

// Simulated time so far in seconds (for leakage and bandwidth formulas).
inline double now_s() { return sc_core::sc_time_stamp().to_seconds(); }

}  // namespace kelle
