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

}  // namespace kelle
