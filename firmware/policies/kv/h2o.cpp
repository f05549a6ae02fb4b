// `h2o`: Heavy-Hitter Oracle. Heavy hitters by accumulated attention probability plus a recent
// window (by default half the budget each) and no sinks; a full head evicts its minimum
// accumulated-score token outside the window.
#include "firmware/policies/kv/kv_engine.h"

namespace kelle {

KELLE_REGISTER(kv_policies(), "h2o", "heavy hitters by accumulated score plus a recent window",
               [](const kv_policy_args& a) {
                 kv_engine_params p;
                 p.name = "h2o";
                 p.kv_budget =
                     a.cfg.get_uint("kv_budget", a.budget_or(default_kv_budget), "tokens kept per KV head (N')", 2, 1u << 30);
                 p.sink_tokens = 0;
                 p.recent_window = p.kv_budget / 2;
                 read_common_params(a, p, false, true);
                 return make_kv_engine(a, p);
               });

}  // namespace kelle
