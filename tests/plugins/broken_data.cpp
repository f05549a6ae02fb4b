// A shared library that exports the plugin's three names as data, not functions: refused as
// "not a Kelle VP plugin" instead of being called into (which would crash the loader).
extern "C" {
extern const char kelle_plugin_name[];
extern const char kelle_plugin_cxx_abi[];
extern unsigned kelle_plugin_abi_version;
const char kelle_plugin_name[] = "broken_data";
const char kelle_plugin_cxx_abi[] = "none";
unsigned kelle_plugin_abi_version = 1;
}
