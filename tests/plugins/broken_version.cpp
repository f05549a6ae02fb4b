// A plugin that says it was built against another plugin interface version (written out by hand
// here; a real one would have been compiled against other headers).
#include "platform/plugin/plugin.h"

extern "C" __attribute__((visibility("default"))) unsigned kelle_plugin_abi_version(void) {
  return KELLE_PLUGIN_ABI_VERSION + 998;
}
extern "C" __attribute__((visibility("default"))) const char* kelle_plugin_name(void) { return "broken_version"; }
extern "C" __attribute__((visibility("default"))) const char* kelle_plugin_cxx_abi(void) {
  return KELLE_PLUGIN_CXX_ABI;
}
