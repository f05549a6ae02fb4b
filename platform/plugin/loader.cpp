#include "platform/plugin/loader.h"

#include "platform/config/config.h"
#include "platform/plugin/plugin.h"
#include "platform/registry/registry.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <filesystem>
#include <memory>
#include <set>

namespace fs = std::filesystem;

namespace kelle {
namespace {

std::vector<loaded_plugin>& plugins() {
  static std::vector<loaded_plugin> p;
  return p;
}

// dlerror() text without the file name it usually starts with (the message names it already).
std::string load_error(const std::string& path) {
  const char* e = dlerror();
  std::string s = e ? e : "unknown error";
  if (s.compare(0, path.size() + 2, path + ": ") == 0) s.erase(0, path.size() + 2);
  return s;
}

// Whether `addr`, found by dlsym, is a function's code (a library that exports the name as data
// would otherwise be called into and crash).
bool is_function(void* addr) {
  if (!addr) return false;
  Dl_info info;
  void* entry = nullptr;  // the ElfW(Sym) of the symbol
  if (!dladdr1(addr, &info, &entry, RTLD_DL_SYMENT) || !entry) return false;
  const auto* sym = static_cast<const ElfW(Sym)*>(entry);
  const unsigned type = ELF64_ST_TYPE(sym->st_info);
  return type == STT_FUNC || type == STT_GNU_IFUNC;
}

struct library {
  void* handle = nullptr;
  ~library() {
    if (handle) dlclose(handle);
  }
};

}  // namespace

const std::vector<loaded_plugin>& loaded_plugins() { return plugins(); }

const loaded_plugin& load_plugin(const std::string& path, const std::string& where) {
  const std::string prefix = (where.empty() ? "" : where + ": ") + "plugin " + path + ": ";
  std::error_code ec;
  if (!fs::exists(path, ec)) throw config_error(prefix + "file not found");
  if (fs::is_directory(path, ec)) throw config_error(prefix + "is a folder, expected a shared library (.so)");
  const std::string canon = fs::canonical(path, ec).string();
  for (const auto& p : plugins())
    if (p.path == canon) return p;

  // RTLD_NOW: every undefined symbol is resolved now, so a plugin built against other headers or
  // libraries fails here with a message instead of aborting in the middle of a simulation.
  // RTLD_LOCAL: a plugin's own symbols stay out of the global scope, so two plugins that happen
  // to define the same symbol do not bind to each other's; the platform's symbols reach every
  // plugin anyway through its dependency on libkellevp, which is already loaded globally.
  library lib;
  {
    // Registrations made by the plugin's static initialisers wait here until it is checked.
    auto pending = std::make_unique<deferred_registrations>();
    dlerror();
    lib.handle = dlopen(canon.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle) throw config_error(prefix + "cannot load: " + load_error(canon));

    using version_fn = unsigned (*)();
    using text_fn = const char* (*)();
    auto version = reinterpret_cast<version_fn>(dlsym(lib.handle, "kelle_plugin_abi_version"));
    auto name_of = reinterpret_cast<text_fn>(dlsym(lib.handle, "kelle_plugin_name"));
    auto abi_of = reinterpret_cast<text_fn>(dlsym(lib.handle, "kelle_plugin_cxx_abi"));
    if (!version || !name_of || !abi_of)
      throw config_error(prefix +
                         "not a Kelle VP plugin: no kelle_plugin_abi_version symbol (add "
                         "KELLE_PLUGIN(\"name\") from platform/plugin/plugin.h to one source file)");
    for (const auto& [sym, addr] : {std::pair<const char*, void*>{"kelle_plugin_abi_version", reinterpret_cast<void*>(version)},
                                    {"kelle_plugin_name", reinterpret_cast<void*>(name_of)},
                                    {"kelle_plugin_cxx_abi", reinterpret_cast<void*>(abi_of)}})
      if (!is_function(addr))
        throw config_error(prefix + "not a Kelle VP plugin: " + sym +
                           " is not a function (the library exports it as data; KELLE_PLUGIN(\"name\") defines it)");
    loaded_plugin rec;
    rec.path = canon;
    rec.name = name_of() ? name_of() : "";
    rec.cxx_abi = abi_of() ? abi_of() : "";
    const std::string named = (where.empty() ? "" : where + ": ") + "plugin '" + rec.name + "' (" + path + "): ";
    if (version() != KELLE_PLUGIN_ABI_VERSION)
      throw config_error(named + "built against plugin interface version " + std::to_string(version()) +
                         ", this kelle-vp has version " + std::to_string(KELLE_PLUGIN_ABI_VERSION) +
                         "; rebuild the plugin against this installation");
    if (rec.cxx_abi != KELLE_PLUGIN_CXX_ABI)
      throw config_error(named + "built with C++ ABI '" + rec.cxx_abi + "', this kelle-vp has '" +
                         KELLE_PLUGIN_CXX_ABI + "'; rebuild the plugin with the same compiler and standard");
    for (const auto& p : plugins())
      if (p.name == rec.name)
        throw config_error(named + "a plugin of that name is already loaded from " + p.path);

    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& i : pending->items()) {
      const std::string& kind = i.registry->kind();
      if (i.registry->has(i.name)) {
        const std::string by = i.registry->origin(i.name);
        throw config_error(named + "registers " + kind + " '" + i.name + "', which is already registered " +
                           (by.empty() ? std::string("by the platform") : "by the plugin " + by));
      }
      if (!seen.insert({kind, i.name}).second)
        throw config_error(named + "registers " + kind + " '" + i.name + "' twice");
      rec.provides.push_back(kind + "/" + i.name);
    }
    pending->commit(canon);
    plugins().push_back(std::move(rec));
  }
  lib.handle = nullptr;  // accepted: stays loaded for the life of the process
  return plugins().back();
}

}  // namespace kelle
