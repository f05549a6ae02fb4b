// A plugin that needs a function nothing defines: dlopen (RTLD_NOW) refuses it.
#include "platform/plugin/plugin.h"

KELLE_PLUGIN("broken_undefined")

extern "C" int kelle_test_no_such_function(void);
[[maybe_unused]] static const int kelle_test_value = kelle_test_no_such_function();
