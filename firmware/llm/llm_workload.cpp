// The llm workload's set-up (the run's keys and task, the policies, the memory plan, the driver
// and layer_ops, functional mode) and its run: the prefill and the decode steps, each pass layer
// by layer through the scheduler. Beside it: llm_checks.cpp (the checks before the run),
// llm_policies.cpp (the policies each pass), llm_sampler.cpp (sampled decode and layers),
// llm_results.cpp (the results).
#include "firmware/llm/llm_workload.h"

#include "firmware/workload/expert_routing.h"
#include "firmware/workload/tasks.h"

#include "firmware/functional/functional_run.h"
#include "firmware/llm/pass_trace.h"
#include "firmware/llm/recompute_plan.h"
#include "firmware/llm/routed_fit.h"
#include "firmware/llm/roofline.h"
#include "models/compute/compute_block.h"
#include "models/compute/evictor/score_board.h"
#include "models/interconnect/router.h"
#include "models/memory/refresh_control.h"
#include "models/memory/memory_target.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <tuple>

namespace kelle {

llm_workload::llm_workload(const sc_core::sc_module_name& name, const workload_args& a)
    : workload(name), m_platform(a.platform), m_stats("stats"), m_layer_stats("layer_time", false) {
  const config_node& p = a.params;
  m_model = runnable_model_from_config(p);
  // A named task sets the defaults of the lengths, the batch and the policy's budget and window.
  const run_lengths len = run_lengths::read(p);
  const task_spec& task = len.task;
  const std::string& task_name = len.task_name;
  m_batch = len.batch;
  m_context = len.context;
  m_decode = len.decode;
  m_skip_prefill = p.get_bool("skip_prefill", false,
                              "decode only: the context's KV is taken as already in the cache");
  if (task_name != "none") {
    // A key given beside the task wins over the task's value; say so, since a task named on the
    // command line over a scenario that sets its own lengths keeps the scenario's.
    const std::string task_from = p.origin("task");
    m_task_origins = nlohmann::json::object();
    m_task_origins["task"] = task_from;
    std::string kept;
    const std::pair<const char*, std::uint64_t> own[] = {
        {"batch", task.batch}, {"context_len", task.context_len}, {"decode_len", task.decode_len}};
    const std::uint64_t used[] = {m_batch, m_context, m_decode};
    for (std::size_t i = 0; i < 3; ++i) {
      const std::string from = p.origin(own[i].first);
      m_task_origins[own[i].first] = from == "default" ? "task " + task_name : from;
      if (from != "default" && used[i] != own[i].second)
        kept += std::string(kept.empty() ? "" : ", ") + own[i].first + " " + std::to_string(used[i]) + " (" + from +
                "; the task's " + std::to_string(own[i].second) + ")";
    }
    if (!kept.empty()) {
      m_task_note = "task " + task_name + " (" + task_from + "): kept " + kept;
      std::fprintf(stderr, "kelle-vp: note: %s\n", m_task_note.c_str());
    }
  }
  const std::uint64_t limit = p.get_uint("max_tokens", 65536, "limit on context_len + decode_len per sequence", 1);
  if (m_context + m_decode > limit)
    p.fail("context_len", "context_len + decode_len = " + std::to_string(m_context + m_decode) +
                              " tokens exceeds workload.max_tokens = " + std::to_string(limit));
  if (!a.root) throw config_error("the llm workload needs the scenario's top level");
  // The KV cache's number format sizes every KV byte of the run (docs/policies/kv-format.md).
  m_model.kv = kv_format::from_config(a.root->child_or_empty("policy"), m_model.head_dim);
  m_run = run_config::resolve(*a.root);
  m_scheduler = schedulers().create(m_run.scheduler.name);
  m_progress = p.get_bool("progress", true, "show progress on a terminal") && isatty(STDERR_FILENO);
  m_sample_layers = p.get_bool("sample_layers", false,
                               "simulate the first two layers of each run of alike layers in detail and repeat the "
                               "second for the others (docs/firmware.md, \"Sampled layers\")");
  m_sample_every = static_cast<unsigned>(p.get_uint(
      "sample_every", 1,
      "simulate every k-th decode step in detail and extrapolate the others (1: every step)", 1, 1u << 20));
  // Functional mode: the platform carries real data (docs/functional.md).
  if (a.root->get_choice("mode", "timing", {"timing", "functional"}) == "functional") {
    if (m_skip_prefill) p.fail("skip_prefill", "functional mode computes the context's KV: it needs the prefill");
    if (m_sample_every != 1) p.fail("sample_every", "functional mode simulates every decode step (1)");
    if (m_sample_layers) p.fail("sample_layers", "functional mode simulates every layer (false)");
    m_fn = std::make_unique<functional_run>(*a.root, p, m_model, m_batch, m_context, m_decode, a.platform.seed(),
                                            a.platform);
  }

  // KV-cache policy (top-level `policy`) and where its attention scores come from.
  const config_node pol = a.root->child_or_empty("policy");
  const std::string& kv_name = m_run.kv_policy.name;
  std::uint64_t kv_tokens = m_context + m_decode;
  if (kv_name == "full") {
    // A full cache has no budget, window or sinks: a study that sweeps systems sets them for
    // the policies that evict; here they are read and have no effect.
    for (const char* k : {"kv_budget", "recent_window", "sink_tokens", "exact_sequences", "exact_layers", "exact_heads"})
      pol.get_uint(k, 0, "ignored by full");
  } else {
    // `full` keeps every token: no scores to track (its bookkeeping would cost O(tokens^2)).
    const config_node att = p.child_or_empty("attention");
    const bool functional_scores = m_fn && att.get_choice("type", "functional", attention_sources().name_list()) == "functional";
    m_source = functional_scores ? m_fn->make_source()
                                 : make_attention_source(attention_source_args{att, m_model.layers, m_model.heads});
    if (!functional_scores && m_source->max_tokens() < m_context + m_decode)
      att.fail("file", "the attention trace records " + std::to_string(m_source->max_tokens()) +
                           " tokens per sequence; the run needs context_len + decode_len = " +
                           std::to_string(m_context + m_decode));
    // The policy keeps tokens per cache head: with latent KV the one latent every head shares.
    model_shape cached = m_model;
    cached.kv_heads = m_model.cache_heads();
    kv_policy_args pa{pol, cached, m_batch, m_source.get()};
    pa.deferred_scores = functional_scores;  // the step's scores exist only after its attention
    pa.task_budget = task.kv_budget;
    pa.task_window = task.recent_window;
    compute_block* ev = nullptr;  // the block whose score registers the policy programs
    for (compute_block* b : a.platform.blocks())
      if (b->victim_scores()) ev = b;
    if (ev) {
      pa.evictor = &ev->victim_scores()->config();
      pa.evictor_path = ev->params().path();
    }
    m_policy = kv_policies().create(kv_name, pa);
    if (ev) {  // the firmware programs the evictor's protection from the policy: one source
      for (const char* k : {"sink_tokens", "recent_window"})
        if (ev->params().origin(k) != "default")
          ev->params().fail(k, std::string("the firmware programs it from the KV policy: give policy.") + k +
                                   " instead");
      const kv_policy::protection pr = m_policy->protected_tokens();
      ev->victim_scores()->set_protection(pr.sink_tokens, pr.recent_window);
    }
    if (m_policy->budget() > 0)  // the prefill holds the whole context; then at most the budget
      kv_tokens = std::min(kv_tokens, std::max<std::uint64_t>(m_policy->budget(), m_context));
  }
  const std::string& refresh_name = m_run.refresh_policy.name;
  m_refresh = refresh_policies().create(refresh_name, pol);
  // The refresh policy lays the KV out by the format's bit fields (SHIELD: the codes' sign and
  // exponent against their mantissa), or says why it cannot.
  const std::string refusal = m_refresh->set_kv_format(m_model.kv);
  if (!refusal.empty()) pol.fail("kv_format", refusal);
  // Temperature-aware refresh: the policy's intervals follow the on-die sensor (docs/models/thermal.md).
  if (pol.get_bool("temperature_aware", false,
                   "scale the refresh intervals with the on-die sensor's temperature (uniform, 2drp, shield)")) {
    if (refresh_name == "none")
      pol.fail("temperature_aware", "policy.refresh none leaves the array's own interval: choose uniform, 2drp or shield");
    m_refresh->set_temperature_aware(
        true, pol.get_double("guard_band_C", 5.0, "added to the sensed temperature before scaling the intervals, C", 0, 50));
  }
  if (m_refresh->needs_groups() && !m_policy)
    pol.fail("refresh", refresh_name + " needs the high/low-score groups of a KV policy that scores tokens "
                                       "(policy.kv: aep, aerp, streaming or h2o; this scenario has full)");
  m_plan = std::make_unique<memory_plan>(m_model, m_batch, kv_tokens, a.platform, p.child_or_empty("placement"),
                                         m_fn != nullptr);
  if (m_policy) {  // the run reads the score groups only for the layers the eDRAM holds (2DRP)
    std::vector<bool> groups(m_model.layers, false);
    if (m_refresh->needs_groups())
      for (unsigned l = 0; l < m_model.layers; ++l) groups[l] = m_plan->kv_touches_chip(l);
    m_policy->groups_each_pass(groups);
  }
  check_sfu_rows(a, kv_tokens);
  m_driver = std::make_unique<driver>("firmware", a.platform, m_stats);
  m_dram = a.platform.memory(m_plan->dram());
  // The DRAM's own counts by class, also under the firmware's statistics (results.json's keys are
  // kept: docs/results.md).
  const std::pair<const char*, traffic_class> views[] = {{"dram_weight_bytes", traffic_class::weights},
                                                        {"dram_kv_bytes", traffic_class::kv},
                                                        {"dram_activation_bytes", traffic_class::activations}};
  for (const auto& [key, cls] : views)
    m_stats.formula(key, "B", std::string("the DRAM's bytes of class ") + name_of(cls) + " (its bytes_" + name_of(cls) + ")",
                    [this, c = cls] { return m_dram->bytes_of(c); });
  m_roof_prefill = std::make_unique<roofline>(a.platform, m_plan->dram());
  m_roof_decode = std::make_unique<roofline>(a.platform, m_plan->dram());
  m_ops = std::make_unique<layer_ops>(*m_driver, *m_plan, m_model, a.platform, m_stats);
  m_routed = std::make_unique<routed_fit>(*m_ops);
  check_commands(a, kv_tokens);
  if (m_model.moe()) {  // which experts each pass streams (docs/models/model-zoo.md, "Mixture of experts")
    m_routing = std::make_unique<expert_routing>(m_model, p.child_or_empty("routing"), a.platform.seed(), m_batch,
                                                 m_context, m_decode, !m_skip_prefill);
    m_ops->set_routing(m_routing.get());
    if (m_sample_every > 1 || m_sample_layers) m_ops->set_expert_probe(m_routed.get());  // sampled decode's routed experts
  } else if (p.has("routing")) {
    p.fail("routing", "the routing of experts is for a mixture-of-experts model; " + m_model.name + " has dense FFNs");
  }
  m_ops->set_transient_refresh(m_refresh->transient());  // the lifetime rule, if the policy has one
  if (m_policy && m_policy->recomputes())  // AERP: how much to recompute, from the hardware
    m_recompute = std::make_unique<recompute_plan>(*m_policy, m_model, m_batch, *m_plan, *m_ops, a.platform);
  if (m_fn) m_fn->connect(*m_driver, *m_plan, *m_ops, m_policy.get(), m_refresh.get());
  for (unsigned l = 0; l < m_model.layers; ++l)
    m_layer_time.push_back(&m_layer_stats.counter("layer_" + std::to_string(l) + "_s", "s",
                                                  "simulated time in layer " + std::to_string(l) + ", all passes"));
  pass_trace::attach(m_model.layers, m_skip_prefill ? 1 : 0, static_cast<unsigned>(m_decode));  // the timeline records only the passes in its range

  SC_HAS_PROCESS(llm_workload);
  SC_THREAD(run);
}

llm_workload::~llm_workload() = default;

void llm_workload::progress(const char* phase, unsigned step, unsigned steps) {
  if (!m_progress) return;
  const auto now = std::chrono::steady_clock::now();
  if (step == 0) m_phase_wall0 = now;
  const double wall = std::chrono::duration<double>(now - m_wall0).count();
  const double in_phase = std::chrono::duration<double>(now - m_phase_wall0).count();
  const double eta = step > 0 ? in_phase / step * (steps - step) : 0.0;
  std::fprintf(stderr, "\r  %s %u/%u   simulated %.4g ms   wall %.1f s   remaining ~%.0f s   ", phase, step, steps,
               sc_core::sc_time_stamp().to_seconds() * 1e3, wall, eta);
  if (step == steps) std::fprintf(stderr, "\n");
}

void llm_workload::pass(const pass_info& p) {
  const double t0 = sc_core::sc_time_stamp().to_seconds();
  pass_trace trace(p, *m_ops);
  m_ops->begin_pass(p);
  const std::array<double, traffic_classes> before = dram_by_class();
  const auto mark = m_plan->mark();
  const std::uint64_t rows = std::uint64_t(p.batch) * p.rows, C = m_model.hidden, ab = model_shape::act_bytes;

  // The new tokens' embeddings (one int8 row per token of the table in DRAM).
  tensor x = m_ops->produce("x", rows * C * ab);
  m_ops->produced(x, m_driver->dma(m_plan->lm_head(), x.where.addr, rows * C, traffic_class::weights,
                                    traffic_class::activations));
  if (m_fn) m_fn->begin_pass(p, x);  // functional: the tokens' embeddings land in x
  // Sampled layers: not in functional mode (every layer computes data) nor in a traced pass.
  const bool sample_layers = m_sample_layers && !m_fn && !trace.on();
  layer_sample smp;
  bool have = false;
  std::uint64_t prev = 0;
  for (unsigned l = 0; l < m_model.layers; ++l) {
    const std::uint64_t sig = sample_layers ? layer_signature(p, l) : 0;
    const bool steady = sample_layers && l > 0 && sig == prev;  // like the layer before it
    prev = sig;
    // The last layer of a run is simulated as a check of the sample (results: sampling).
    const bool last_of_run = sample_layers && (l + 1 == m_model.layers || layer_signature(p, l + 1) != sig);
    const bool check = steady && have && smp.signature == sig && last_of_run;
    if (steady && have && smp.signature == sig && !last_of_run) {
      skip_layer(p, l, smp);
      continue;
    }
    const counter_snapshot before = steady ? snapshot_counters() : counter_snapshot{};
    const double l0 = sc_core::sc_time_stamp().to_seconds();
    trace.layer_begin(l);
    {
      struct recording {  // the layer's arena events (sampled decode's regimes), however it ends
        layer_ops& ops;
        ~recording() { ops.end_layer(); }
      } rec{*m_ops};
      if (m_sample_every > 1) m_ops->begin_layer(p, l);
      if (m_routing && (m_sample_every > 1 || m_sample_layers)) m_routed->layer_begins();  // routed_end()
      m_scheduler->layer(*m_ops, p, l, x);
    }
    trace.layer_end(l);
    const double dt = sc_core::sc_time_stamp().to_seconds() - l0;
    *m_layer_time[l] += dt;
    if (check) {
      m_layer_check.add(std::abs(dt - layer_dt(p, l, smp)) / std::max(dt, 1e-30));
    } else if (steady) {  // the second layer of a run: the sample the rest of the run takes
      smp.signature = sig;
      smp.dt = dt;
      smp.routed = routed_experts(p, l);
      smp.d = counter_delta(before, snapshot_counters());
      for (std::size_t i = 0; i < smp.d.stats.size(); ++i)  // its time: skip_layer's own
        if (smp.d.stats[i] == m_layer_time[l]) smp.d.values[i] = 0;
      have = true;
    }
  }
  // The LM head on the last token of every sequence.
  tensor last{x.where, x.producer, x.lifetime, "x"};
  last.where.addr += (p.rows - 1) * C * ab * p.batch;  // the last rows
  tensor xn = m_ops->produce("xn", std::uint64_t(p.batch) * C * ab);
  m_ops->produced(xn, m_ops->sfu(m_ops->norm(), last, p.batch, C, xn.where));
  m_ops->last_use(x, xn.producer);
  tensor logits = m_ops->produce("logits", std::uint64_t(p.batch) * m_model.vocab * ab);
  const ticket lm = m_ops->project(xn, m_plan->lm_head(), C, m_model.vocab, logits.where, p.batch);
  m_ops->last_use(xn, lm);
  m_ops->produced(logits, lm);
  m_ops->last_use(logits, lm);  // the host samples the next token from the logits
  m_ops->finish_pass();
  m_driver->wait_all();
  if (m_fn) m_fn->end_pass(p, logits.where.addr);  // functional: read the logits, pick the next tokens
  trace.end();
  m_plan->release(mark);

  const std::array<double, traffic_classes> after = dram_by_class();
  m_steps.push_back(step_record{p.prefill ? "prefill" : "decode", p.step, t0, sc_core::sc_time_stamp().to_seconds(),
                                after[index_of(traffic_class::weights)] - before[index_of(traffic_class::weights)],
                                after[index_of(traffic_class::kv)] - before[index_of(traffic_class::kv)],
                                after[index_of(traffic_class::activations)] -
                                    before[index_of(traffic_class::activations)]});
}

void llm_workload::run() {
  m_wall0 = std::chrono::steady_clock::now();
  pass_info p;
  for (unsigned l = 0; l < m_model.layers && m_model.sliding_window; ++l) p.window.push_back(m_model.window(l));
  p.prefill = true;
  p.batch = m_batch;
  p.rows = m_context;
  p.kv_tokens = m_context;
  p.kv_offset = 0;
  apply_refresh();  // from the start: the prefill writes KV too (no score groups yet: half and half)
  if (m_skip_prefill) {
    if (m_policy) m_policy->prefill(m_context);
    apply_refresh();
    // The context's K and V are in the cache from the start: on-chip arrays hold them.
    mark_kv_live(p);
    mark_context_chip_slots();
  } else {
    progress("prefill", 0, 1);
    m_roof_prefill->begin();
    pass(p);  // the prefill attends to the whole context
    m_roof_prefill->end(sc_core::sc_time_stamp().to_seconds(), 1);
    mark_context_chip_slots();
    if (m_policy) m_policy->prefill(m_context);
    apply_refresh();
    progress("prefill", 1, 1);
  }
  m_prefill_s = sc_core::sc_time_stamp().to_seconds();
  progress("decode step", 0, static_cast<unsigned>(m_decode));
  m_roof_decode->begin();
  // Detailed: every k-th step, the last, and within each regime whose cost driver moves (the
  // first from step 0) its steps 0, 1, 2, 4, 8, ... up to k (enter_regime: not after a change of
  // placement alone, which carries the slope): the slope that the skipped steps are extrapolated with
  // comes from the last two detailed steps, and a sample's own error (a few microseconds, from
  // sampled layers or a refresh falling into it) divided by their distance lands on every skipped
  // step; spacing the first samples geometrically keeps the skipped span at most twice that
  // distance, where two adjacent steps would multiply it by up to k.
  auto detailed = [this](unsigned s) {
    const unsigned o = s - m_regime_start;
    return m_force_detailed > 0 || s % m_sample_every == 0 ||
           (o < m_sample_every && (o == 0 || o >= m_geometric_from) && (o & (o - 1)) == 0) || s + 1 == m_decode;
  };
  for (unsigned s = 0; s < m_decode;) {
    if (!detailed(s)) {
      unsigned end = s + 1;
      while (end < m_decode && !detailed(end)) ++end;
      const unsigned from = s;
      s = skip_steps(p, s, end);
      if (s > from) m_skipped_since_sample = true;
      progress("decode step", s, static_cast<unsigned>(m_decode));
      continue;
    }
    if (m_force_detailed) --m_force_detailed;
    if (!m_step_ready) begin_decode_step(p, s);
    m_step_ready = false;
    // A new regime (enter_regime: its own slope, the slope carried over a change of placement, or
    // an earlier regime's samples at its sample's shape).
    std::uint64_t core = 0;
    if (const std::uint64_t r = regime(p, &core); r != m_regime)
      enter_regime(r, core, step_shape(p), cost_driver(p), s);
    const bool sampling = m_sample_every > 1;
    const counter_snapshot before = sampling ? snapshot_counters() : counter_snapshot{};
    // What the extrapolation would have given this step (a check of sampled decode: results,
    // sampling), when the two samples it would use are of its regime and steps were skipped.
    double predicted = -1;
    if (sampling && !m_samples.empty() && m_skipped_since_sample) {
      const step_sample &last = m_samples.back(), &q = m_samples.front();  // q: last when one sample
      // At a flat driver, the regime's sample at this step's shape (skip_steps' model).
      const step_sample* flat = last.x == q.x && !m_flat.empty() ? flat_sample(step_shape(p), last.x) : nullptr;
      const step_sample& a = flat ? *flat : last;
      const double w = a.x != q.x ? (cost_driver(p) - a.x) / (a.x - q.x) : 0.0;
      const double u_dt = m_routed->slope_dt();  // skip_steps' model
      const double routed = m_routing ? routed_experts(p) - a.routed : 0.0;
      predicted = std::max(
          0.0, a.dt + (a.x != q.x ? (a.dt - q.dt - (a.routed - q.routed) * u_dt) * w : 0.0) + routed * u_dt);
    }
    m_skipped_since_sample = false;
    const double t0 = sc_core::sc_time_stamp().to_seconds();
    pass(p);
    if (predicted >= 0) {
      const double dt = sc_core::sc_time_stamp().to_seconds() - t0;
      m_step_check.add(std::abs(predicted - dt) / std::max(dt, 1e-30));
    }
    if (m_fn && m_policy) {  // functional scores: the policy sees this step's attention now
      m_policy->observe();
      apply_refresh();
    }
    ++m_detailed_steps;
    if (sampling)  // the regimes predict from the layers' arena logs: each must replay its own pass
      for (unsigned l = 0; l < m_model.layers; ++l)
        if (!m_ops->replays_as_run(p, l))
          throw std::logic_error("sampled decode: layer " + std::to_string(l) + "'s arena log of step " +
                                 std::to_string(p.step) + " does not replay the placement it ran with");
    // The step's regime as it ran: where the buffers land is known once the layers have run a
    // decode pass (the first step), or changed with it; a sample before it is of another regime.
    if (const std::uint64_t r = regime(p, &core); r != m_regime)
      enter_regime(r, core, step_shape(p), cost_driver(p), s);
    if (sampling) {
      step_sample smp;
      smp.x = cost_driver(p);
      smp.shape = step_shape(p);
      smp.routed = routed_experts(p);
      smp.dt = sc_core::sc_time_stamp().to_seconds() - t0;
      smp.d = counter_delta(before, snapshot_counters());
      // Right after steps of earlier regimes, the step also pays for data those left live over
      // the skipped span: a check of the regime's samples, not one of them (unless it has none;
      // the next one taken otherwise replaces it).
      smp.after_known = m_known_since_sample > 0;
      keep_sample(std::move(smp));
    }
    m_known_since_sample = 0;
    ++s;
    progress("decode step", s, static_cast<unsigned>(m_decode));
  }
  m_decode_s = sc_core::sc_time_stamp().to_seconds() - m_prefill_s;
  if (m_decode > 0) m_roof_decode->end(m_decode_s, m_decode);
  if (m_policy) m_policy->update_groups();  // for the results
  m_done = true;
}

KELLE_REGISTER(workloads(), "llm", "LLM inference through the firmware model (prefill + decode)",
               [](const workload_args& a) -> std::unique_ptr<workload> {
                 return std::make_unique<llm_workload>("firmware", a);
               });

}  // namespace kelle
