// KV-cache policies: which tokens each attention head keeps, in which format, and what that costs
// (plain C++, no SystemC; the firmware model (firmware/llm) runs them each pass). See docs/policies.md.
//
// A policy runs a whole batch: prefill(context_len) once, then decode() once per generated token
// (one token per sequence). After each pass, report(sequence, layer) gives what timing and energy
// need for that pass: tokens kept per KV head and in total, tokens stored as x, KV and x bytes
// stored, evictions, recompute MACs, and the 2DRP split of the stored tokens into high-score and
// low-score groups. Scores come from an attention_source (pre-softmax logits).
#pragma once

#include "models/compute/evictor/score_board.h"

#include "firmware/workload/attention/attention_source.h"
#include "firmware/workload/model_zoo.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kelle {

// One pass of one (sequence, layer). Counts are doubles because the subset mode scales them; in
// exhaustive mode they are whole numbers. A "pair" is one (token, KV head).
struct kv_layer_report {
  double kept_pairs = 0;      // pairs kept after the pass, over all KV heads
  double kept_per_head = 0;   // kept_pairs / kv_heads (mean tokens kept by a head)
  double x_tokens = 0;        // tokens stored once as their input vector x (AERP)
  double kv_pairs = 0;        // pairs stored as K and V (kept pairs of tokens not stored as x)
  double kv_bytes = 0;        // kv_pairs x 2 x head_dim x 2 B
  double x_bytes = 0;         // x_tokens x hidden x 2 B
  double evicted_pairs = 0;   // pairs evicted by the pass (prefill: context pairs not kept)
  double x_converted = 0;     // tokens switched to the x format by the pass
  double x_freed = 0;         // x tokens evicted by every head in the pass
  double x_attended = 0;      // x tokens the pass's attention read (their K, V recomputed)
  double recompute_macs = 0;  // x_attended x hidden x 2 x kv_heads x head_dim (decode only)
  // 2DRP: a kept pair is high-score when its accumulated score is strictly above the median of
  // its head's kept set (re-evaluated every pass); an x token is high-score when it is high in
  // more than half of the heads that keep it.
  double high_kv_pairs = 0, low_kv_pairs = 0;
  double high_x_tokens = 0, low_x_tokens = 0;
  double high_bytes = 0, low_bytes = 0;  // KV and x bytes of each group

  double stored_bytes() const { return kv_bytes + x_bytes; }
  kv_layer_report& operator+=(const kv_layer_report& o);
};

// The 2DRP threshold of a head: the median of its scores, the element of rank size / 2 (the
// upper of the two middle ones for an even size). Reorders `scores`, which must not be empty.
double score_median(std::vector<double>& scores);
// The same value, for a set whose median moves little from call to call (a head's scores from
// step to step): only the elements within `half_width` of the last median are ordered, found in
// one pass; when the median is not among them, the whole set is (and the band widens). `band` is
// scratch space. Leaves `scores` as it is.
struct median_guess {
  double centre = 0, half_width = -1;  // half_width < 0: no guess yet
};
double score_median(const std::vector<double>& scores, median_guess& guess, std::vector<double>& band);

class kv_policy {
 public:
  virtual ~kv_policy() = default;
  virtual std::string name() const = 0;
  // Tokens a KV head keeps at most (0: no limit): what the KV cache has to hold per head.
  virtual std::uint64_t budget() const = 0;
  // Whether tokens may be stored as x and their K and V recomputed (AERP): the firmware has to
  // keep each token's x until the policy has decided.
  virtual bool recomputes() const { return false; }
  // Whether some token can ever be stored as x: it recomputes, and x is smaller than the K and V
  // of every KV head (or the policy converts whatever the sizes).
  virtual bool can_store_x() const { return recomputes(); }  // without the sizes: whenever it recomputes
  // AERP's recomputation budget (policy.recompute, docs/policies/aerp.md): what the scenario asks
  // for, and the limits the firmware sets from the hardware before the first pass.
  struct recompute_request {
    enum class mode { all, none, fixed, automatic } kind = mode::all;
    std::uint64_t tokens = 0;  // fixed: x tokens a sequence may hold per layer
  };
  virtual recompute_request recompute_budget() const { return {}; }
  // The tokens a KV head never evicts, which the firmware programs into the systolic evictor so
  // that the hardware protects what the policy protects. The default is the evictor's own.
  struct protection {
    std::uint64_t sink_tokens = score_board_config{}.sink_tokens;      // positions < sink_tokens
    std::uint64_t recent_window = score_board_config{}.recent_window;  // p + recent_window >= newest
  };
  virtual protection protected_tokens() const { return {}; }
  // Per model layer: the x tokens a sequence may hold (UINT64_MAX: no limit) and the K, V bytes
  // a token must replace beyond its own x bytes to be stored as x.
  struct recompute_limits {
    std::vector<std::uint64_t> max_x_tokens;
    std::vector<double> min_saved_bytes;
  };
  virtual void set_recompute_limits(const recompute_limits& l) { (void)l; }

  // Prefill of `context_len` tokens in every sequence (positions 0 .. context_len - 1).
  virtual void prefill(std::uint64_t context_len) = 0;
  // One decode step: every sequence appends the token at position tokens().
  virtual void decode() = 0;
  // Positions seen so far per sequence (context + decode steps).
  virtual std::uint64_t tokens() const = 0;
  // With kv_policy_args::deferred_scores, decode() only evicts and admits the new token; this
  // call, once the step's attention has run, adds the new token's query scores to the
  // accumulated scores and recomputes the report (functional mode: the scores are the ones the
  // platform computed in that step). Without it, decode() does both and this does nothing.
  virtual void observe() {}

  // The last pass of (sequence, layer). A sequence outside the exact subset reports the exact
  // sequence that represents it (sequence mod exact_sequences).
  virtual const kv_layer_report& report(unsigned sequence, unsigned layer) const = 0;
  virtual unsigned batch() const = 0;
  virtual unsigned layers() const = 0;
  // The report's high/low-score groups (2DRP) cost a median per head and pass. By default they
  // are computed in every pass for every layer; a workload that reads them during the run only
  // for some layers (those whose KV the eDRAM holds) names them here, the other layers' groups
  // are left stale until update_groups(), which it calls before reading them at the end. The
  // figures are the same either way.
  virtual void groups_each_pass(const std::vector<bool>& layers) { (void)layers; }
  virtual void update_groups() {}
  // The last pass summed over the batch (one layer) or over the batch and every layer.
  kv_layer_report layer_total(unsigned layer) const;
  kv_layer_report total() const;

  // Exact state, for tests and debugging. Tracked = kept with exact bookkeeping (kept(), score()
  // and stored_as_x() throw std::out_of_range for a sequence, layer or head that is not).
  virtual bool tracked(unsigned sequence, unsigned kv_head) const = 0;
  // Positions kept by a tracked head, ascending; throws std::out_of_range for an untracked one.
  virtual std::vector<std::uint32_t> kept(unsigned sequence, unsigned layer,
                                          unsigned kv_head) const = 0;
  // Accumulated score of `position` in a tracked head (throws if the head does not keep it).
  virtual double score(unsigned sequence, unsigned layer, unsigned kv_head,
                       std::uint32_t position) const = 0;
  virtual bool stored_as_x(unsigned sequence, unsigned layer, std::uint32_t position) const = 0;
};

struct kv_policy_args {
  config_node cfg;                    // the policy's section (keys in docs/policies.md)
  model_shape model;                  // layers, heads, kv_heads, head_dim, hidden
  unsigned batch = 1;                 // sequences
  const attention_source* source = nullptr;  // must outlive the policy
  // The task's budget and recent window (workload.task), the defaults of kv_budget and
  // recent_window when given (0: the policy's own defaults).
  std::uint64_t task_budget = 0, task_window = 0;
  // A policy's default budget or window: the task's when there is one, else `own`.
  std::uint64_t budget_or(std::uint64_t own) const { return task_budget ? task_budget : own; }
  std::uint64_t window_or(std::uint64_t own) const { return task_budget ? task_window : own; }
  bool deferred_scores = false;       // decode() leaves the new query's scores to observe()
  // The system's systolic evictor, if it has one: its registers' width and scale are the
  // source of the policy's `evictor` score model (score_bits, score_scale), and `evictor_path`
  // (its key path, e.g. system.compute.evictor) is named when a policy sets them as well.
  const score_board_config* evictor = nullptr;
  std::string evictor_path = {};
};

// The paper's KV budget N' (tokens per KV head), the default of every evicting policy when
// neither the scenario nor the task gives one.
constexpr std::uint64_t default_kv_budget = 128;

using kv_policy_registry = registry<kv_policy, const kv_policy_args&>;
// `full`, `aep`, `aerp`, `streaming`, `h2o`.
kv_policy_registry& kv_policies();

}  // namespace kelle
