// `full`: no eviction, every token's K and V kept (the paper's "Original" systems).
#include "firmware/policies/kv/kv_engine.h"

namespace kelle {

KELLE_REGISTER(kv_policies(), "full", "no eviction: every token's K and V kept",
               [](const kv_policy_args& a) {
                 kv_engine_params p;
                 p.name = "full";
                 p.kv_budget = 0;
                 p.sink_tokens = 0;
                 p.recent_window = 0;
                 read_common_params(a, p, /*has_budget=*/false, /*has_window=*/false);
                 return make_kv_engine(a, p);
               });

}  // namespace kelle
