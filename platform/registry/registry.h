// Models, workloads and policies are chosen by name from registries. A model registers itself
// with one line in its own source file:
//
//   KELLE_REGISTER(memories(), "sram", "banked SRAM array", [](const memory_args& a) { ... });
//
// `kelle-vp list KIND` prints what every registry holds.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kelle {

// What `kelle-vp list` needs from any registry.
class registry_base {
 public:
  registry_base(std::string kind, std::string description);
  virtual ~registry_base() = default;
  const std::string& kind() const { return m_kind; }
  const std::string& description() const { return m_description; }
  // (name, description) of every entry, sorted by name.
  virtual std::vector<std::pair<std::string, std::string>> list() const = 0;

  // Every registry, by kind.
  static const std::map<std::string, registry_base*>& all();

 private:
  std::string m_kind;
  std::string m_description;
};

template <class Product, class... Args>
class registry : public registry_base {
 public:
  using factory = std::function<std::unique_ptr<Product>(Args...)>;

  using registry_base::registry_base;

  void add(const std::string& name, const std::string& description, factory make) {
    if (m_entries.count(name))
      throw std::logic_error(kind() + ": '" + name + "' is registered twice");
    m_entries.emplace(name, entry{description, std::move(make)});
  }
  bool has(const std::string& name) const { return m_entries.count(name) != 0; }
  std::unique_ptr<Product> create(const std::string& name, Args... args) const {
    auto it = m_entries.find(name);
    if (it == m_entries.end())
      throw std::out_of_range(kind() + ": no entry named '" + name + "' (known: " + names() + ")");
    return it->second.make(std::forward<Args>(args)...);
  }
  std::string names() const {
    std::string s;
    for (const auto& e : m_entries) s += (s.empty() ? "" : ", ") + e.first;
    return s;
  }
  std::vector<std::string> name_list() const {
    std::vector<std::string> v;
    for (const auto& e : m_entries) v.push_back(e.first);
    return v;
  }
  std::vector<std::pair<std::string, std::string>> list() const override {
    std::vector<std::pair<std::string, std::string>> v;
    for (const auto& e : m_entries) v.emplace_back(e.first, e.second.description);
    return v;
  }

 private:
  struct entry {
    std::string description;
    factory make;
  };
  std::map<std::string, entry> m_entries;
};

}  // namespace kelle

#define KELLE_CONCAT_INNER(a, b) a##b
#define KELLE_CONCAT(a, b) KELLE_CONCAT_INNER(a, b)
// Registers `factory` under `name` in `registry_expr` when the library is loaded.
#define KELLE_REGISTER(registry_expr, name, description, factory)                     \
  static const bool KELLE_CONCAT(kelle_registered_, __LINE__) = [] {                \
    (registry_expr).add(name, description, factory);                                 \
    return true;                                                                     \
  }()
