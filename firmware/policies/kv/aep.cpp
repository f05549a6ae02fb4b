// `aep`: attention-based eviction (spec section 3). Per KV head a budget of kv_budget tokens;
// sinks and the recent window are never evicted; after prefill each head keeps its kv_budget best
// tokens; in decode each full head evicts its own minimum-score token and the newcomer takes the
// freed slot.
#include "firmware/policies/kv/kv_engine.h"

namespace kelle {

KELLE_REGISTER(kv_policies(), "aep", "attention-based eviction: per-head budget, min-score victim",
               [](const kv_policy_args& a) {
                 kv_engine_params p;
                 p.name = "aep";
                 p.kv_budget = a.budget_or(default_kv_budget);
                 p.recent_window = a.window_or(p.recent_window);
                 read_common_params(a, p, true, true);
                 return make_kv_engine(a, p);
               });

}  // namespace kelle
