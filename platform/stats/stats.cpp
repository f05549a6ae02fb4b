#include "platform/stats/stats.h"

#include <stdexcept>

namespace kelle {
namespace {

void walk(const sc_core::sc_object* obj, std::vector<const stat_group*>& out) {
  if (auto g = dynamic_cast<const stat_group*>(obj)) out.push_back(g);
  for (const sc_core::sc_object* child : obj->get_child_objects()) walk(child, out);
}

}  // namespace

std::vector<const stat_group*> collect_stat_groups() {
  std::vector<const stat_group*> out;
  for (const sc_core::sc_object* top : sc_core::sc_get_top_level_objects()) walk(top, out);
  return out;
}

counter_snapshot snapshot_counters() {
  counter_snapshot s;
  for (const stat_group* g : collect_stat_groups())
    for (stat& st : const_cast<stat_group*>(g)->all())
      if (st.is_counter()) {
        s.stats.push_back(&st);
        s.values.push_back(st.value());
      }
  return s;
}

std::vector<double> align(const counter_snapshot& d, const counter_snapshot& layout, double missing) {
  std::vector<double> v(layout.stats.size(), missing);
  std::size_t j = 0;
  for (std::size_t i = 0; i < layout.stats.size() && j < d.stats.size(); ++i)
    if (layout.stats[i] == d.stats[j]) v[i] = d.values[j++];
  if (j != d.stats.size()) throw std::logic_error("align: counters out of order (a counter was removed?)");
  return v;
}

counter_snapshot counter_delta(const counter_snapshot& before, const counter_snapshot& after) {
  counter_snapshot d{after.stats, after.values};
  const std::vector<double> b = align(before, after);
  for (std::size_t i = 0; i < d.values.size(); ++i) d.values[i] -= b[i];
  return d;
}

void add_to_counters(const counter_snapshot& amounts) {
  for (std::size_t i = 0; i < amounts.stats.size(); ++i) *amounts.stats[i] += amounts.values[i];
}

}  // namespace kelle
