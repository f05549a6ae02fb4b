#include "platform/stats/stats.h"

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

void add_to_counters(const counter_snapshot& layout, const std::vector<double>& amounts) {
  for (std::size_t i = 0; i < layout.stats.size() && i < amounts.size(); ++i) *layout.stats[i] += amounts[i];
}

}  // namespace kelle
