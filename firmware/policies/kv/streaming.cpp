// `streaming`: StreamingLLM-style attention sinks plus a sliding window: the first sink_tokens
// and the newest kv_budget - sink_tokens tokens (the oldest non-sink token is the victim).
#include "firmware/policies/kv/kv_engine.h"

namespace kelle {

KELLE_REGISTER(kv_policies(), "streaming", "attention sinks plus a sliding window of recent tokens",
               [](const kv_policy_args& a) {
                 kv_engine_params p;
                 p.name = "streaming";
                 p.kv_budget = a.budget_or(default_kv_budget);
                 p.recent_window = 0;  // the window is the rest of the budget
                 p.victim = kv_engine_params::victim_rule::oldest;
                 read_common_params(a, p, true, false);
                 return make_kv_engine(a, p);
               });

}  // namespace kelle
