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

}  // namespace kelle
