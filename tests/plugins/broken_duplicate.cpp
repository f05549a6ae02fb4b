// A plugin that registers a memory model under a name the platform already has (`ideal`).
#include "models/memory/memory_target.h"
#include "platform/plugin/plugin.h"

KELLE_PLUGIN("broken_duplicate")

KELLE_REGISTER(kelle::memories(), "ideal", "a second 'ideal': refused",
               [](const kelle::memory_args&) -> std::unique_ptr<kelle::memory_target> { return nullptr; });
