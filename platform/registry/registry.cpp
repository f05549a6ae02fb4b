#include "platform/registry/registry.h"

namespace kelle {
namespace {

std::map<std::string, registry_base*>& registries() {
  static std::map<std::string, registry_base*> r;
  return r;
}

}  // namespace

registry_base::registry_base(std::string kind, std::string description)
    : m_kind(std::move(kind)), m_description(std::move(description)) {
  registries()[m_kind] = this;
}

const std::map<std::string, registry_base*>& registry_base::all() { return registries(); }

namespace {
deferred_registrations* g_active = nullptr;
}  // namespace

deferred_registrations::deferred_registrations() : m_previous(g_active) { g_active = this; }
deferred_registrations::~deferred_registrations() { g_active = m_previous; }
deferred_registrations* deferred_registrations::active() { return g_active; }

void deferred_registrations::commit(const std::string& origin) {
  // Taken out first: a commit must not land here again.
  std::vector<item> items;
  items.swap(m_items);
  for (auto& i : items) i.commit(origin);
}

}  // namespace kelle
