// `aerp`: AEP plus recomputation (spec section 3). A token kept by more than
// popularity_threshold of a layer's KV heads is stored once as its input vector x instead of K and
// V in every head, and its K, V are recomputed each decode step; it keeps the x format until every
// head has evicted it. When the decision is taken: docs/policies.md.
#include "firmware/policies/kv/kv_policy.h"

namespace kelle {

KELLE_REGISTER(kv_policies(), "aerp", "AEP plus recomputation of popular tokens stored as x",
               [](const kv_policy_args& a) {
                 kv_engine_params p;
                 p.name = "aerp";
                 p.kv_budget = a.budget_or(128);
                 p.sink_tokens = 10;
                 p.recent_window = a.window_or(64);
                 p.recompute = true;
                 read_common_params(a.cfg, p, true, true);
                 p.popularity_threshold = a.cfg.get_double(
                     "popularity_threshold", 0.5,
                     "fraction of a layer's KV heads that must keep a token for the x format", 0, 1);
                 p.x_only_if_smaller = a.cfg.get_bool(
                     "x_only_if_smaller", true,
                     "store x only when it is smaller than the K and V it replaces");
                 p.decide_after = a.cfg.get_uint(
                     "decide_after", 0,
                     "decode steps after a token's first eviction round before its popularity is judged "
                     "(0: at that round, the spec's reading)",
                     0, 1u << 20);
                 p.decide_when_full = a.cfg.get_bool(
                     "decide_when_full", false,
                     "tokens leaving the recent window while the heads are below budget stay K, V");
                 return make_kv_engine(a, p);
               });

}  // namespace kelle
