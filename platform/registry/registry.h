// Models, workloads and policies are chosen by name from registries. A model registers itself
// with one line in its own source file:
//
//   KELLE_REGISTER(memories(), "sram", "banked SRAM array", [](const memory_args& a) { ... });
//
// `kelle-vp list KIND` prints what every registry holds. Plugins (platform/plugin/) register the
// same way from their own shared library; while one loads, registrations are deferred (below).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kelle {

class registry_base;

// Registrations made while a plugin's static initialisers run (the plugin loader keeps one of
// these active around dlopen). They enter no registry until the loader has checked the plugin
// (interface version, duplicate names) and commits them; a rejected plugin's are discarded.
// Outside plugin loading, registrations are immediate.
class deferred_registrations {
 public:
  struct item {
    registry_base* registry;
    std::string name;
    std::function<void(const std::string& origin)> commit;
  };
  // Makes this the active collector (at most one at a time) until it is destroyed.
  deferred_registrations();
  ~deferred_registrations();
  deferred_registrations(const deferred_registrations&) = delete;
  deferred_registrations& operator=(const deferred_registrations&) = delete;

  // The active collector, or nullptr outside plugin loading.
  static deferred_registrations* active();
  void add(item i) { m_items.push_back(std::move(i)); }
  const std::vector<item>& items() const { return m_items; }
  // Enters every registration, attributed to `origin` (the plugin file).
  void commit(const std::string& origin);

 private:
  std::vector<item> m_items;
  deferred_registrations* m_previous;
};

// What `kelle-vp list` needs from any registry.
class registry_base {
 public:
  registry_base(std::string kind, std::string description);
  virtual ~registry_base() = default;
  const std::string& kind() const { return m_kind; }
  const std::string& description() const { return m_description; }
  // (name, description) of every entry, sorted by name.
  virtual std::vector<std::pair<std::string, std::string>> list() const = 0;
  virtual bool has(const std::string& name) const = 0;
  // The plugin file an entry came from ("" for the platform's own entries).
  virtual std::string origin(const std::string& name) const = 0;

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
    if (deferred_registrations* d = deferred_registrations::active()) {
      d->add({this, name, [this, name, description, make](const std::string& origin) {
                insert(name, description, make, origin);
              }});
      return;
    }
    insert(name, description, std::move(make), "");
  }
  bool has(const std::string& name) const override { return m_entries.count(name) != 0; }
  std::string origin(const std::string& name) const override {
    auto it = m_entries.find(name);
    return it == m_entries.end() ? std::string() : it->second.origin;
  }
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
  void insert(const std::string& name, const std::string& description, factory make,
              const std::string& origin) {
    if (m_entries.count(name))
      throw std::logic_error(kind() + ": '" + name + "' is registered twice");
    m_entries.emplace(name, entry{description, std::move(make), origin});
  }

  struct entry {
    std::string description;
    factory make;
    std::string origin;  // plugin file, or "" for the platform's own entries
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
