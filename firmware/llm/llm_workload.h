// `llm`: the host firmware model. It runs a whole LLM inference on the platform: the prefill of
// the context, then autoregressive decode, for a batch of sequences, issuing weight fetches, KV
// reads and writes and compute commands through the driver, layer by layer, in the order a
// scheduler chooses. Results: latency (prefill, decode, per step), throughput, DRAM traffic by
// kind, activation lifetimes, per-step and per-layer CSVs. docs/firmware.md. llm_workload.cpp
// sets the run up and runs the passes, llm_checks.cpp checks its commands before the run,
// llm_policies.cpp applies the policies each pass, llm_sampler.cpp holds sampled decode and
// sampled layers (routed_fit.h: a routed expert's cost, for a mixture of experts),
// llm_results.cpp the results.
#pragma once

#include "firmware/driver/driver.h"
#include "firmware/llm/run_config.h"
#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/refresh_policy.h"
#include "firmware/workload/attention/attention_source.h"
#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/memory_plan.h"
#include "firmware/workload/model_zoo.h"
#include "platform/stats/stats.h"
#include "platform/system/workload.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <memory>

namespace kelle {

class llm_workload : public workload {
 public:
  llm_workload(const sc_core::sc_module_name& name, const workload_args& args);
  ~llm_workload() override;

  bool finished() const override { return m_done; }
  void add_results(nlohmann::json& results) const override;
  std::string report() const override;
  // Per-step and per-layer tables (CSV text), written beside results.json.
  std::map<std::string, std::string> extra_files() const override;

  const model_shape& model() const { return m_model; }

 private:
  struct step_record {
    std::string phase;
    unsigned step;
    double start_s, end_s;
    double dram_weights, dram_kv, dram_act;
    bool detailed = true;  // false: extrapolated from detailed steps (sampled decode)
  };
  // What a detailed decode step added to every counter, which is everything sampled decode
  // extrapolates: the memories' bytes by class and access counts, the blocks' work, the KV bytes
  // written, the commands, the lifetimes by kind, each layer's time, transient refresh, the
  // lifetime rule's figures (each kept by its owner); and the step's simulated time.
  struct step_sample {
    double x = 0;  // the step's cost driver (cost_driver())
    double routed = 0;  // the routed experts its MoE layers streamed (routed_experts())
    double dt = 0;
    std::uint64_t shape = 0;  // what its layers attend, recompute and evict (step_shape())
    // Taken right after skipped steps extrapolated from earlier regimes: data that the regimes
    // between leave live in buffers of another layout die in it, their life the skipped span.
    bool after_known = false;
    // Made, not simulated: the point a carried slope puts before a regime's first sample (below).
    bool synthetic = false;
    counter_snapshot d;
  };
  // Mixture of experts: what one more routed expert adds to a decode layer, fitted over the
  // detailed layers (routed_fit.h; layer_ops tells it of each layer's routed experts).
  std::unique_ptr<class routed_fit> m_routed;
  // The routed experts pass `p` streams at `layer` (0 for a dense layer), and over its layers.
  double routed_experts(const pass_info& p, unsigned layer);
  double routed_experts(const pass_info& p);
  // Sampled layers (workload.sample_layers): within a pass, a run of layers that issue the same
  // commands (layer_signature()) is simulated in detail for its first two layers; the others
  // take the second one's time and activity (skip_layer). docs/firmware.md, "Sampled layers".
  struct layer_sample {
    std::uint64_t signature = 0;
    double dt = 0;
    counter_snapshot d;
    double routed = 0;  // a MoE layer's routed experts
  };
  std::uint64_t layer_signature(const pass_info& p, unsigned layer) const;
  // The sample's time for `layer` of `p` (with the layer's own routed experts).
  double layer_dt(const pass_info& p, unsigned layer, const layer_sample& s);
  void skip_layer(const pass_info& p, unsigned layer, const layer_sample& s);
  // The DRAM's bytes by traffic class so far.
  std::array<double, traffic_classes> dram_by_class() const;
  void run();
  void pass(const pass_info& p);
  // Sampled decode: the steps after `last` up to (not including) the next detailed one are not
  // simulated; their cost is extrapolated affinely in the cost driver from the last two
  // detailed steps, while the policies still see every step and simulated time advances.
  // The driver: tokens attended plus AERP's recomputed rows, summed over layers.
  // Returns where it stopped: `end`, or the first step of a new regime (regime()), whose policy
  // step has then been taken (m_step_ready) and which is simulated in detail with the next one.
  unsigned skip_steps(pass_info& p, unsigned first, unsigned end);
  // What decides the shape of a decode step beyond the cost driver: whether any layer evicts
  // (victim selection), whether any recomputes (AERP), and how many layers' x stores have moved
  // to DRAM. Samples of one regime are not extrapolated into another.
  // `core`, when given, gets the regime without where the activation buffers land and how the
  // attention groups KV heads: two regimes of one core differ only in placement.
  std::uint64_t regime(const pass_info& p, std::uint64_t* core = nullptr) const;
  static constexpr std::uint64_t no_regime = ~std::uint64_t(0);
  // A new regime that differs from the one before only in placement (where a buffer lands, how
  // many KV heads a group holds) keeps the old regime's slope in the cost driver, per counter,
  // instead of starting its own geometric series of detailed steps: its first detailed step gives
  // the offset (a synthetic sample one slope-distance before it); its geometric series of detailed
  // steps begins at k/8 steps (at least 8) instead of 1: the first of them (or the next k-th step
  // if sooner) checks the carried slope's time (sampling.decode.check), gives the counters of the
  // steps between by interpolation (close_carried_span) and the regime's own slope from there.
  struct carried_slope {
    bool set = false;
    double dx = 0, ddt = 0, drouted = 0;
    counter_snapshot dd;  // per counter, the later sample's amount minus the earlier's
  };
  carried_slope m_carry;
  // The first offset of the geometric series within a regime: 1, or carry_check_offset() for a
  // regime that carried its slope (a power of two: k/8, at least 8).
  unsigned m_geometric_from = 1;
  unsigned carry_check_offset() const {
    unsigned c = 8;
    while (c * 2 <= m_sample_every / 8) c *= 2;
    return c;
  }
  // The synthetic sample before `a` (a regime's first) with the carried slope.
  step_sample carried_before(const step_sample& a) const;
  // The steps skipped with a carried slope: their counters are priced again, by interpolation
  // between the regime's first sample and its next one, once that one is simulated (a regime left
  // before its next sample keeps the carried slope's counters).
  bool m_carry_open = false;
  double m_carry_dx_sum = 0;  // over those steps, (their cost driver - the first sample's)
  void close_carried_span(const step_sample& next);
  // Per layer, the tokens attended, the recomputed rows and x tokens and whether it evicts, as a
  // hash: two steps of one regime and one shape issue the same commands (and have one cost driver).
  std::uint64_t step_shape(const pass_info& p) const;
  // The regimes left before the current one, each with its last two samples (m_known), for a
  // steady state whose steps alternate between a few regimes: a window's, in which the token
  // leaving the window decides whether the policy evicts. A step of such a regime, at the shape
  // of its latest sample of that shape, is extrapolated from that sample instead of simulated.
  struct known_regime {
    std::uint64_t regime;
    std::vector<step_sample> samples;
  };
  // The latest sample of regime r at shape `shape`, or null.
  const step_sample* known_sample(std::uint64_t r, std::uint64_t shape) const;
  // A detailed step at decode step s, of cost driver x, is of regime r (not the current one): the
  // current regime's samples are kept; r's own come back if its latest is at this step's shape,
  // else r starts afresh: this step in detail, and once a step's cost driver differs from this
  // one's (that step simulated), the geometric series of detailed steps from this one (none while
  // it does not: the policy at its budget; none either when the cost driver is the last sample's,
  // a steady state, or when only the placement changed: a carried slope, below).
  void enter_regime(std::uint64_t r, std::uint64_t core, std::uint64_t shape, double x, unsigned s);
  void decode_step_policy(pass_info& p);
  // Sets `p` up for decode step s (0-based) and lets the policies see the new token.
  void begin_decode_step(pass_info& p, unsigned s);
  // What a decode step's cost grows with, summed over layers: the tokens a head attends to (the
  // KV it reads) plus AERP's stacked recompute rows (x tokens of the batch). Exact when only one
  // of them changes between steps (a growing cache; AERP once the heads are at their budget).
  double cost_driver(const pass_info& p) const;
  // Marks the new tokens' KV slots live in on-chip eDRAM (steps that are not simulated).
  // Marks the first `bytes` of `r` live if `r` is in an eDRAM (its refresh starts counting).
  void mark_live(const region& r, std::uint64_t bytes) const;
  void mark_kv_live(const pass_info& p);
  // Marks the context's slots of a partly placed layer live on chip (after the prefill).
  void mark_context_chip_slots();
  // The kept-set sizes of the policy's last pass, per layer.
  void apply_policy(pass_info& p);
  // Sets the refresh intervals of the on-chip KV regions held in eDRAM.
  void apply_refresh();
  void progress(const char* phase, unsigned step, unsigned steps);
  // Input error when the system's SFU would refuse a row command the run needs.
  void check_sfu_rows(const workload_args& a, std::uint64_t keys) const;
  // Input error when a block would refuse a command of the run at the sizes the workload asks
  // for (the SFU's rows and elements, the array's dimensions, the evictor's slots), or when the
  // activations a pass needs at once cannot be placed: checked before the run, naming the keys.
  void check_commands(const workload_args& a, std::uint64_t kv_tokens) const;

  model_shape m_model;
  unsigned m_batch;
  std::uint64_t m_context, m_decode;
  run_config m_run;  // the scheduler and the policies, resolved once
  // With a named task: where the lengths and the batch came from (the task or a key that set
  // them), and a line for the report when keys of a file shadow a task named on the command line.
  nlohmann::json m_task_origins;
  std::string m_task_note;
  std::unique_ptr<attention_source> m_source;
  std::unique_ptr<kv_policy> m_policy;
  std::unique_ptr<refresh_policy> m_refresh;
  void add_refresh_fields(nlohmann::json& refresh) const;
  nlohmann::json energy_breakdown() const;
  double m_recompute_macs = 0;  // over the run, from the policy's reports
  std::unique_ptr<class recompute_plan> m_recompute;  // AERP: the recomputation budget
  std::unique_ptr<memory_plan> m_plan;
  std::unique_ptr<driver> m_driver;
  std::unique_ptr<scheduler> m_scheduler;
  std::unique_ptr<layer_ops> m_ops;
  std::unique_ptr<class expert_routing> m_routing;  // a mixture-of-experts model's routing
  std::unique_ptr<class functional_run> m_fn;
  // First-order estimates of the prefill and of decode beside the simulated times (roofline.h).
  std::unique_ptr<class roofline> m_roof_prefill, m_roof_decode;  // `mode: functional` (docs/functional.md)
  platform_view& m_platform;
  bool m_done = false;
  bool m_skip_prefill = false;
  bool m_progress;
  unsigned m_sample_every = 1;  // 1: every decode step in detail
  bool m_sample_layers = false;
  // The measured error of sampling: each check compares a simulated step's (layer's) time with
  // what the extrapolation (the layer sample) would have given it.
  struct sampling_check {
    unsigned n = 0;
    double max = 0, sum = 0;
    void add(double e) {
      ++n;
      sum += e;
      max = std::max(max, e);
    }
  };
  sampling_check m_step_check, m_layer_check;
  bool m_skipped_since_sample = false;
  std::uint64_t m_layers_extrapolated = 0;  // layers of all passes not simulated (sample_layers)
  unsigned m_detailed_steps = 0;
  std::vector<step_sample> m_samples;         // the last two detailed decode steps
  std::vector<known_regime> m_known;          // earlier regimes, the least recent first
  static constexpr std::size_t max_known = 16;
  unsigned m_known_steps = 0;                 // steps extrapolated from an earlier regime's sample
  unsigned m_known_since_sample = 0;          // of them since the last detailed step
  std::uint64_t m_regime = no_regime;         // of the last detailed step
  std::uint64_t m_regime_core = no_regime;    // its core (regime())
  unsigned m_regime_start = 0;                // the decode step its regime began at
  static constexpr unsigned no_step = ~0u;
  unsigned m_pending_start = no_step;         // where a new regime whose driver has not moved began
  unsigned m_regimes_started = 0;             // regimes begun afresh (not come back), the first too
  unsigned m_carried_slopes = 0;              // of them, those that carried the slope before
  // While the cost driver does not move (the policy at its budget), the regime's steps differ
  // only in their shape (the partly placed layer's new slot on chip or in DRAM, which layers
  // evict): its latest sample of each shape, at that driver (skip_steps).
  std::vector<step_sample> m_flat;
  static constexpr std::size_t max_flat_shapes = 4;
  const step_sample* flat_sample(std::uint64_t shape, double x) const;  // or null
  // Takes a detailed step's sample into the regime's: its slope samples (m_samples), its samples
  // by shape at a flat driver, a carried slope's synthetic sample or the close of its span.
  void keep_sample(step_sample smp);
  unsigned m_force_detailed = 0;              // steps to simulate in detail whatever k says
  bool m_step_ready = false;                  // the next step's policy step is already taken
  double m_prefill_s = 0, m_decode_s = 0;
  std::vector<step_record> m_steps;
  std::chrono::steady_clock::time_point m_wall0, m_phase_wall0;
  stat_group m_stats;
  stat_group m_layer_stats;         // unreported: layers.csv has the layers' times
  std::vector<stat*> m_layer_time;  // simulated time spent in each layer, all passes (counters)
  memory_target* m_dram = nullptr;  // the DRAM (traffic_bytes: its bytes by class)
};

}  // namespace kelle
