// Plugins: models, schedulers and policies built outside the platform's tree, as shared
// libraries that `kelle-vp` loads at run time (`--plugin FILE`, or a scenario's `plugins:` list).
// A plugin registers what it provides with KELLE_REGISTER, exactly like the built-in ones, and
// names itself once with KELLE_PLUGIN in one of its source files:
//
//   #include "platform/plugin/plugin.h"
//   KELLE_PLUGIN("hbm2")
//
// KELLE_PLUGIN exports three extern "C" functions the loader (platform/plugin/loader.h) reads
// before it accepts the plugin: the plugin interface version the plugin was compiled against,
// the plugin's name, and the C++ ABI it was compiled with. A plugin whose interface version or
// C++ ABI differs from the platform's is refused (rebuild it against the installed platform).
#pragma once

// The plugin interface version. Bump it whenever a change to the public headers breaks plugins
// that were compiled against the previous ones (a changed class layout, virtual function or
// registry signature).
#define KELLE_PLUGIN_ABI_VERSION 7

#define KELLE_PLUGIN_STRINGIFY_INNER(x) #x
#define KELLE_PLUGIN_STRINGIFY(x) KELLE_PLUGIN_STRINGIFY_INNER(x)

#if defined(_GLIBCXX_USE_CXX11_ABI)
#define KELLE_PLUGIN_CXX11_ABI KELLE_PLUGIN_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)
#else
#define KELLE_PLUGIN_CXX11_ABI "n/a"
#endif
#if defined(__GXX_ABI_VERSION)
#define KELLE_PLUGIN_GXX_ABI KELLE_PLUGIN_STRINGIFY(__GXX_ABI_VERSION)
#else
#define KELLE_PLUGIN_GXX_ABI "n/a"
#endif

// What must match between the platform and a plugin for C++ objects to cross between them: the
// compiler's C++ ABI version, libstdc++'s std::string/std::list ABI, and the language standard
// (SystemC is built for one standard). Compared as a string by the loader.
#define KELLE_PLUGIN_CXX_ABI                                                     \
  "gxx-abi " KELLE_PLUGIN_GXX_ABI "; cxx11-abi " KELLE_PLUGIN_CXX11_ABI "; c++ " \
  KELLE_PLUGIN_STRINGIFY(__cplusplus)

// Names the plugin and exports its identification. Use it once, at namespace scope, in one
// source file of the plugin.
#define KELLE_PLUGIN(name)                                                                     \
  extern "C" __attribute__((visibility("default"))) unsigned kelle_plugin_abi_version(void) { \
    return KELLE_PLUGIN_ABI_VERSION;                                                           \
  }                                                                                            \
  extern "C" __attribute__((visibility("default"))) const char* kelle_plugin_name(void) {     \
    return name;                                                                               \
  }                                                                                            \
  extern "C" __attribute__((visibility("default"))) const char* kelle_plugin_cxx_abi(void) {  \
    return KELLE_PLUGIN_CXX_ABI;                                                               \
  }
