// `aerp`: AEP plus recomputation (spec section 3). A token kept by more than
// popularity_threshold of a layer's KV heads is stored once as its input vector x instead of K and
// V in every head, and its K, V are recomputed each decode step; it keeps the x format until every
// head has evicted it. When the decision is taken: docs/policies.md.
#include "firmware/policies/kv/kv_engine.h"

namespace kelle {

namespace {
// policy.recompute: auto (the firmware decides from the hardware), all, none, or a number of x
// tokens per sequence and layer.
kv_policy::recompute_request read_recompute_budget(const config_node& c) {
  using mode = kv_policy::recompute_request::mode;
  const std::string v = c.get_string("recompute", "auto",
                                     "auto, all, none, or the x tokens a sequence may hold per layer");
  if (v == "auto") return {mode::automatic, 0};
  if (v == "all") return {mode::all, 0};
  if (v == "none") return {mode::none, 0};
  std::uint64_t n = 0;
  std::size_t used = 0;
  try {
    n = std::stoull(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || v[0] == '-' || v[0] == '+')
    c.fail("recompute", "expected auto, all, none or a whole number of tokens, got '" + v + "'");
  return {n == 0 ? mode::none : mode::fixed, n};
}
}  // namespace

KELLE_REGISTER(kv_policies(), "aerp", "AEP plus recomputation of popular tokens stored as x",
               [](const kv_policy_args& a) {
                 kv_engine_params p;
                 p.name = "aerp";
                 p.kv_budget = a.budget_or(default_kv_budget);
                 p.recent_window = a.window_or(p.recent_window);
                 p.recompute = true;
                 read_common_params(a, p, true, true);
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
                 p.budget = read_recompute_budget(a.cfg);
                 p.decide_when_full = a.cfg.get_bool(
                     "decide_when_full", false,
                     "tokens leaving the recent window while the heads are below budget stay K, V");
                 return make_kv_engine(a, p);
               });

}  // namespace kelle
