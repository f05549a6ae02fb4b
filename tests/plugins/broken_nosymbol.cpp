// A shared library that registers a memory model but never says KELLE_PLUGIN: refused as "not a
// Kelle VP plugin", and its registration never reaches the registry.
#include "models/memory/memory_target.h"

KELLE_REGISTER(kelle::memories(), "broken_nosymbol", "must never be listed",
               [](const kelle::memory_args&) -> std::unique_ptr<kelle::memory_target> { return nullptr; });
