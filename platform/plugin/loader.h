// Loads plugins (platform/plugin/plugin.h) into the running platform: dlopen, check the plugin's
// interface version and C++ ABI, then enter its registrations into the registries. Called by
// `kelle-vp --plugin FILE` and by the scenario loader for a scenario's `plugins:` list.
//
// Every failure is a config_error (one line: where the plugin was named, the file, the reason):
// a missing file, a file that is not a shared library, an undefined symbol, a library without
// KELLE_PLUGIN, another interface version or C++ ABI, a name that is already registered.
#pragma once

#include <string>
#include <vector>

namespace kelle {

struct loaded_plugin {
  std::string path;     // as canonical absolute path
  std::string name;     // from KELLE_PLUGIN
  std::string cxx_abi;  // from KELLE_PLUGIN
  std::vector<std::string> provides;  // "kind/name" of every registration
};

// Loads the plugin at `path` (relative to the working directory). `where` says where it was
// named ("command line --plugin", "scenario.yaml:3: plugins[0]") for error messages. Loading a
// file that is already loaded does nothing and returns the earlier record.
const loaded_plugin& load_plugin(const std::string& path, const std::string& where);

// Every plugin loaded so far, in load order.
const std::vector<loaded_plugin>& loaded_plugins();

}  // namespace kelle
