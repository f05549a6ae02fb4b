#include "firmware/llm/llm_workload.h"

#include "firmware/workload/tasks.h"

#include "firmware/functional/functional_run.h"
#include "firmware/llm/pass_trace.h"
#include "firmware/llm/recompute_plan.h"
#include "models/interconnect/router.h"
#include "models/memory/refresh_control.h"
#include "models/memory/memory_target.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace kelle {
namespace {
// DRAM weight, KV and activation bytes, KV bytes written and commands (sample_vector()).
constexpr std::size_t firmware_figures = 5;
}  // namespace

llm_workload::llm_workload(const sc_core::sc_module_name& name, const workload_args& a)
    : workload(name), m_platform(a.platform), m_stats("stats") {
  const config_node& p = a.params;
  m_model = model_from_config(p);
  // A named task sets the defaults of the lengths, the batch and the policy's budget and window.
  task_spec task{128, 16, 1, 0, 0};
  const std::string task_name = p.get_choice("task", "none", [] {
    auto v = tasks().name_list();
    v.insert(v.begin(), "none");
    return v;
  }());
  if (task_name != "none") task = *tasks().create(task_name);
  m_batch = static_cast<unsigned>(p.get_uint("batch", task.batch, "sequences decoded together", 1, 4096));
  m_context = p.get_uint("context_len", task.context_len, "context (prompt) tokens per sequence", 1, 1 << 24);
  m_decode = p.get_uint("decode_len", task.decode_len, "tokens generated per sequence", 0, 1 << 24);
  m_skip_prefill = p.get_bool("skip_prefill", false,
                              "decode only: the context's KV is taken as already in the cache");
  const std::uint64_t limit = p.get_uint("max_tokens", 65536, "limit on context_len + decode_len per sequence", 1);
  if (m_context + m_decode > limit)
    p.fail("context_len", "context_len + decode_len = " + std::to_string(m_context + m_decode) +
                              " tokens exceeds workload.max_tokens = " + std::to_string(limit));
  if (!a.root) throw config_error("the llm workload needs the scenario's top level");
  // The system's firmware (system.firmware: scheduler, policy.kv, policy.refresh) unless the
  // scenario's top level says otherwise.
  const config_node fw = a.root->child_or_empty("system").child_or_empty("firmware");
  const config_node fw_policy = fw.child_or_empty("policy");
  m_scheduler_name = a.root->get_choice("scheduler", fw.get_choice("scheduler", "kelle", schedulers().name_list()),
                                        schedulers().name_list());
  m_scheduler = schedulers().create(m_scheduler_name);
  m_progress = p.get_bool("progress", true, "show progress on a terminal") && isatty(STDERR_FILENO);
  m_sample_every = static_cast<unsigned>(p.get_uint(
      "sample_every", 1,
      "simulate every k-th decode step in detail and extrapolate the others (1: every step)", 1, 1u << 20));
  // Functional mode: the platform carries real data (docs/functional.md).
  if (a.root->get_choice("mode", "timing", {"timing", "functional"}) == "functional") {
    if (m_skip_prefill) p.fail("skip_prefill", "functional mode computes the context's KV: it needs the prefill");
    if (m_sample_every != 1) p.fail("sample_every", "functional mode simulates every decode step (1)");
    m_fn = std::make_unique<functional_run>(*a.root, p, m_model, m_batch, m_context, m_decode, a.platform.seed(),
                                            a.platform);
  }

  // KV-cache policy (top-level `policy`) and where its attention scores come from.
  const config_node pol = a.root->child_or_empty("policy");
  const std::string kv_name =
      pol.get_choice("kv", fw_policy.get_choice("kv", "full", kv_policies().name_list()), kv_policies().name_list());
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
    kv_policy_args pa{pol, m_model, m_batch, m_source.get()};
    pa.deferred_scores = functional_scores;  // the step's scores exist only after its attention
    pa.task_budget = task.kv_budget;
    pa.task_window = task.recent_window;
    m_policy = kv_policies().create(kv_name, pa);
    if (m_policy->budget() > 0)  // the prefill holds the whole context; then at most the budget
      kv_tokens = std::min(kv_tokens, std::max<std::uint64_t>(m_policy->budget(), m_context));
  }
  const std::string refresh_name = pol.get_choice(
      "refresh", fw_policy.get_choice("refresh", "none", refresh_policies().name_list()), refresh_policies().name_list());
  m_refresh = refresh_policies().create(refresh_name, pol);
  if (m_refresh->needs_groups() && !m_policy)
    pol.fail("refresh", refresh_name + " needs the high/low-score groups of a KV policy that scores tokens "
                                       "(policy.kv: aep, aerp, streaming or h2o; this scenario has full)");
  m_plan = std::make_unique<memory_plan>(m_model, m_batch, kv_tokens, a.platform, p.child_or_empty("placement"));
  if (m_policy) {  // the run reads the score groups only for the layers the eDRAM holds (2DRP)
    std::vector<bool> groups(m_model.layers, false);
    if (m_refresh->needs_groups())
      for (unsigned l = 0; l < m_plan->kv_layers_touching_chip(); ++l) groups[l] = true;
    m_policy->groups_each_pass(groups);
  }
  m_driver = std::make_unique<driver>("firmware", a.platform);
  m_ops = std::make_unique<layer_ops>(*m_driver, *m_plan, m_model, a.platform);
  if (m_policy && m_policy->recomputes())  // AERP: how much to recompute, from the hardware
    m_recompute = std::make_unique<recompute_plan>(*m_policy, m_model, m_batch, *m_plan, *m_ops, a.platform);
  if (m_fn) m_fn->connect(*m_driver, *m_plan, *m_ops, m_policy.get(), m_refresh.get());
  m_layer_s.assign(m_model.layers, 0.0);
  pass_trace::attach(m_model.layers);  // the timeline records only the passes in its range

  m_stats.formula("commands", "count", "commands the firmware submitted",
                  [this] { return static_cast<double>(m_driver->commands_submitted()) + m_extra_commands; });
  for (memory_target* mem : a.platform.memory_targets())
    if (refresh_control* e = mem->refresh()) m_edrams.push_back(e);
  m_stats.formula("dram_weight_bytes", "B", "weight bytes the firmware fetched from DRAM",
                  [this] { return m_ops->dram().weights; });
  m_stats.formula("dram_kv_bytes", "B", "KV bytes read from or written to DRAM",
                  [this] { return m_ops->dram().kv; });
  m_stats.formula("dram_activation_bytes", "B", "activation bytes read from or written to DRAM",
                  [this] { return m_ops->dram().activations; });
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
  const auto before = m_ops->dram();
  const auto mark = m_plan->mark();
  const std::uint64_t rows = std::uint64_t(p.batch) * p.rows, C = m_model.hidden, ab = model_shape::act_bytes;

  // The new tokens' embeddings (one int8 row per token of the table in DRAM).
  tensor x = m_ops->produce("x", rows * C * ab);
  m_ops->produced(x, m_driver->dma(m_plan->lm_head(), x.where.addr, rows * C));
  if (m_fn) m_fn->begin_pass(p, x);  // functional: the tokens' embeddings land in x
  for (unsigned l = 0; l < m_model.layers; ++l) {
    const double l0 = sc_core::sc_time_stamp().to_seconds();
    trace.layer_begin(l);
    m_scheduler->layer(*m_ops, p, l, x);
    trace.layer_end(l);
    m_layer_s[l] += sc_core::sc_time_stamp().to_seconds() - l0;
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

  const auto& after = m_ops->dram();
  m_steps.push_back(step_record{p.prefill ? "prefill" : "decode", p.step, t0, sc_core::sc_time_stamp().to_seconds(),
                                after.weights - before.weights, after.kv - before.kv,
                                after.activations - before.activations});
}

void llm_workload::apply_policy(pass_info& p) {
  p.kept_tokens.assign(m_model.layers, 0);
  p.x_rows.assign(m_model.layers, 0);
  p.x_attended.assign(m_model.layers, 0);
  p.victims.assign(m_model.layers, 0);
  for (unsigned l = 0; l < m_model.layers; ++l) {
    const kv_layer_report r = m_policy->layer_total(l);
    m_recompute_macs += r.recompute_macs;
    // Per sequence, rounded up: the commands carry whole tokens.
    p.kept_tokens[l] = static_cast<std::uint64_t>(std::ceil(r.kept_per_head / m_batch - 1e-9));
    // AERP: the x tokens' K and V are recomputed by MM_k and MM_v (stacked rows, the whole
    // batch's) and read by the attention from there; per head, the kept pairs not stored as K, V.
    p.x_rows[l] = static_cast<std::uint64_t>(std::llround(r.x_attended));
    const double x_pairs = std::max(0.0, r.kept_pairs - r.kv_pairs) / m_model.kv_heads / m_batch;
    p.victims[l] = static_cast<std::uint64_t>(std::llround(r.evicted_pairs));
    p.x_attended[l] = std::min<std::uint64_t>(p.kept_tokens[l], static_cast<std::uint64_t>(std::llround(x_pairs)));
  }
  if (m_recompute) m_recompute->record(*m_policy, p);
}

void llm_workload::apply_refresh() {
  for (unsigned l = 0; l < m_plan->kv_layers_touching_chip(); ++l) {
    const kv_layer_report r = m_policy ? m_policy->layer_total(l) : kv_layer_report{};
    const memory_plan::kv_layer& kv = m_plan->kv(l);
    const bool part = l >= m_plan->kv_layers_on_chip();
    for (const region* reg : {part ? &kv.k_chip : &kv.k, part ? &kv.v_chip : &kv.v}) {
      std::uint64_t local = 0;
      if (refresh_control* e = refresh_of(*reg, local)) m_refresh->apply(*e, local, reg->bytes, m_policy ? &r : nullptr);
    }
  }
  // The KV stream buffers hold KV of every layer in turn: no score groups (half and half).
  for (unsigned b = 0; b < 2; ++b) {
    std::uint64_t local = 0;
    const region& reg = m_plan->kv_stream_buffer(b);
    if (reg.bytes)
      if (refresh_control* e = refresh_of(reg, local)) m_refresh->apply(*e, local, reg.bytes, nullptr);
  }
}

void llm_workload::run() {
  m_wall0 = std::chrono::steady_clock::now();
  pass_info p;
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
    pass(p);  // the prefill attends to the whole context
    mark_context_chip_slots();
    if (m_policy) m_policy->prefill(m_context);
    apply_refresh();
    progress("prefill", 1, 1);
  }
  m_prefill_s = sc_core::sc_time_stamp().to_seconds();
  progress("decode step", 0, static_cast<unsigned>(m_decode));
  // Detailed: the first two steps (a slope to extrapolate with from the start), every k-th, the
  // last, and the first two of every new regime.
  auto detailed = [this](unsigned s) {
    return m_force_detailed > 0 || s % m_sample_every == 0 || s == 1 || s + 1 == m_decode;
  };
  for (unsigned s = 0; s < m_decode;) {
    if (!detailed(s)) {
      unsigned end = s + 1;
      while (end < m_decode && !detailed(end)) ++end;
      s = skip_steps(p, s, end);
      progress("decode step", s, static_cast<unsigned>(m_decode));
      continue;
    }
    if (m_force_detailed) --m_force_detailed;
    if (!m_step_ready) begin_decode_step(p, s);
    m_step_ready = false;
    if (const std::uint64_t r = regime(p); r != m_regime) {  // a new regime: a fresh slope from two of its steps
      if (m_regime != no_regime) m_force_detailed = 1;
      m_samples.clear();
      m_regime = r;
    }
    const bool sampling = m_sample_every > 1;
    const counter_snapshot before = sampling ? snapshot_counters() : counter_snapshot{};
    const std::vector<double> v0 = sampling ? sample_vector(before) : std::vector<double>{};
    const double t0 = sc_core::sc_time_stamp().to_seconds();
    pass(p);
    if (m_fn && m_policy) {  // functional scores: the policy sees this step's attention now
      m_policy->observe();
      apply_refresh();
    }
    ++m_detailed_steps;
    if (sampling) {
      step_sample smp;
      smp.x = cost_driver(p);
      smp.dt = sc_core::sc_time_stamp().to_seconds() - t0;
      smp.v = sample_vector(snapshot_counters());
      for (std::size_t i = 0; i < smp.v.size(); ++i) smp.v[i] -= i < v0.size() ? v0[i] : 0.0;
      // Of each eDRAM's refresh in the step, only what transient data (live during the pass
      // only) cost is extrapolated: the data still live after the pass keeps being refreshed
      // while the skipped steps' time passes.
      for (std::size_t i = 0; i < m_edrams.size(); ++i)
        smp.v[before.stats.size() + firmware_figures + i] -= m_edrams[i]->refresh_rate_Bps() * smp.dt;
      m_samples.push_back(std::move(smp));
      if (m_samples.size() > 2) m_samples.erase(m_samples.begin());
    }
    ++s;
    progress("decode step", s, static_cast<unsigned>(m_decode));
  }
  m_decode_s = sc_core::sc_time_stamp().to_seconds() - m_prefill_s;
  if (m_policy) m_policy->update_groups();  // for the results
  m_done = true;
}

void llm_workload::begin_decode_step(pass_info& p, unsigned s) {
  p.prefill = false;
  p.rows = 1;
  p.kv_offset = m_context + s;
  p.kv_tokens = m_context + s + 1;
  p.step = s + 1;
  decode_step_policy(p);
}

void llm_workload::decode_step_policy(pass_info& p) {
  if (!m_policy) return;
  m_policy->decode();  // the new token arrives; heads evict, x tokens are decided
  apply_policy(p);
  apply_refresh();     // the score groups changed
}

double llm_workload::cost_driver(const pass_info& p) const {
  double x = 0;
  for (unsigned l = 0; l < m_model.layers; ++l)
    x += static_cast<double>(p.attended(l)) + static_cast<double>(p.recompute_rows(l));
  return x;
}

void llm_workload::mark_context_chip_slots() {
  // A partly placed layer's context goes to DRAM in the prefill (one projection writes all of
  // it); its first slots are copied to chip as the prefill ends, where decode reads them.
  const unsigned l = m_plan->kv_layers_on_chip();
  if (l >= m_plan->kv_layers_touching_chip() || !m_ops->chip_slots(l)) return;
  const memory_plan::kv_layer& kv = m_plan->kv(l);
  const double share = static_cast<double>(std::min(m_context, kv.chip_tokens)) / static_cast<double>(kv.chip_tokens);
  for (const region* r : {&kv.k_chip, &kv.v_chip})
    mark_live(*r, static_cast<std::uint64_t>(share * static_cast<double>(r->bytes)));
}

void llm_workload::mark_kv_live(const pass_info& p) {
  for (unsigned l = 0; l < m_plan->kv_layers_touching_chip(); ++l)
    for (bool v : {false, true}) {
      const region r = m_ops->kv_slot(l, v, p);
      mark_live(r, r.bytes);
    }
}

void llm_workload::mark_live(const region& r, std::uint64_t bytes) const {
  std::uint64_t local = 0;
  if (refresh_control* e = refresh_of(r, local)) e->mark_live(local, bytes);
}

std::vector<double> llm_workload::sample_vector(const counter_snapshot& c) const {
  std::vector<double> v = c.values;
  const auto& d = m_ops->dram();
  v.insert(v.end(), {d.weights, d.kv, d.activations, m_ops->kv_bytes_written(),
                     static_cast<double>(m_driver->commands_submitted())});
  for (refresh_control* e : m_edrams) v.push_back(e->refreshed_bytes());
  v.insert(v.end(), m_layer_s.begin(), m_layer_s.end());
  const std::size_t base = v.size();
  v.resize(base + 2 * m_life_kind.size(), 0.0);
  auto& kinds = m_life_kind;  // kinds seen so far, in order of first appearance
  for (const auto& l : m_ops->lifetimes()) {
    if (l.open) continue;
    auto it = kinds.find(l.kind);
    if (it == kinds.end()) {
      it = kinds.emplace(l.kind, static_cast<unsigned>(kinds.size())).first;
      v.resize(base + 2 * kinds.size(), 0.0);
    }
    v[base + 2 * it->second] += 1;
    v[base + 2 * it->second + 1] += (l.end - l.start).to_seconds();
  }
  return v;
}

std::uint64_t llm_workload::regime(const pass_info& p) const {
  // Bit 0: a layer evicts; bit 1: a layer recomputes; above them, how many layers' x stores have
  // outgrown their slots (x read from DRAM instead of the layer's KV memory).
  std::uint64_t r = 0, outgrown = 0;
  for (unsigned l = 0; l < m_model.layers; ++l) {
    r |= (p.evicts(l) ? 1u : 0u) | (p.recompute_rows(l) ? 2u : 0u);
    if (p.recompute_rows(l) && !m_ops->x_store_in_slots(l, p.recompute_rows(l))) ++outgrown;
  }
  return r | (outgrown << 2);
}

unsigned llm_workload::skip_steps(pass_info& p, unsigned first, unsigned end) {
  // The last two detailed steps: a (latest) and q (before it).
  const step_sample* a = m_samples.empty() ? nullptr : &m_samples.back();
  const step_sample* q = m_samples.size() > 1 ? &m_samples.front() : nullptr;
  if (!a) throw std::logic_error("sampled decode: no detailed step to extrapolate from");
  const bool slope = q && a->x != q->x;
  std::vector<double> amount(a->v.size(), 0.0);
  double weights = 0;  // sum over the skipped steps of (x_j - x_a) / (x_a - x_q)
  const double t_skip0 = sc_core::sc_time_stamp().to_seconds();
  for (unsigned s = first; s < end; ++s) {
    begin_decode_step(p, s);
    if (regime(p) != m_regime) {  // stop: this step is simulated in detail
      m_step_ready = true;
      m_force_detailed = 1;
      end = s;
      break;
    }
    const double w = slope ? (cost_driver(p) - a->x) / (a->x - q->x) : 0.0;
    weights += w;
    const double dt = std::max(0.0, a->dt + (slope ? (a->dt - q->dt) * w : 0.0));
    const double t0 = sc_core::sc_time_stamp().to_seconds();
    // The platform idles (time-driven figures accrue); the new token's K and V become live
    // mid-step, as the layers write them.
    sc_core::wait(sc_core::sc_time(dt / 2, sc_core::SC_SEC));
    mark_kv_live(p);
    sc_core::wait(sc_core::sc_time(dt - dt / 2, sc_core::SC_SEC));
    step_record r{"decode", p.step, t0, sc_core::sc_time_stamp().to_seconds(), 0, 0, 0, false};
    m_steps.push_back(r);
  }
  if (end == first) return end;
  const double n = end - first;
  for (std::size_t i = 0; i < amount.size(); ++i) {
    const double di = a->v[i], dq = q && i < q->v.size() ? q->v[i] : di;
    amount[i] = std::max(0.0, n * di + (slope ? (di - dq) * weights : 0.0));
  }
  // Split the extrapolated amounts back into what they extrapolate.
  const counter_snapshot layout = snapshot_counters();
  const std::size_t nc = layout.stats.size();
  add_to_counters(layout, std::vector<double>(amount.begin(), amount.begin() + std::min(nc, amount.size())));
  const double* f = amount.data() + nc;
  layer_ops::traffic t;
  t.weights = f[0];
  t.kv = f[1];
  t.activations = f[2];
  m_ops->add_extrapolated(t, f[3]);
  m_extra_commands += f[4];
  f += firmware_figures;
  for (refresh_control* e : m_edrams) e->add_extrapolated_refresh(*f++);
  for (unsigned l = 0; l < m_model.layers; ++l) m_layer_s[l] += f[l];
  const double* life = f + m_model.layers;
  const std::size_t life_base = static_cast<std::size_t>(life - amount.data());
  for (const auto& [kind, i] : m_life_kind)
    if (life_base + 2 * i + 1 < amount.size()) {
      m_extra_life[kind].first += life[2 * i];
      m_extra_life[kind].second += life[2 * i + 1];
    }
  // The skipped steps' rows in steps.csv: their share of the extrapolated traffic by duration.
  const double span = sc_core::sc_time_stamp().to_seconds() - t_skip0;
  for (std::size_t i = m_steps.size() - (end - first); i < m_steps.size(); ++i) {
    const double share = span > 0 ? (m_steps[i].end_s - m_steps[i].start_s) / span : 1.0 / n;
    m_steps[i].dram_weights = t.weights * share;
    m_steps[i].dram_kv = t.kv * share;
    m_steps[i].dram_act = t.activations * share;
  }
  return end;
}

void llm_workload::add_results(nlohmann::json& r) const {
  const double total = m_prefill_s + m_decode_s;
  const double generated = static_cast<double>(m_batch) * static_cast<double>(m_decode);
  const double energy = r.contains("energy_J") ? r["energy_J"]["total"].get<double>() : 0.0;
  r["latency_s"] = {{"prefill", m_prefill_s},
                    {"decode", m_decode_s},
                    {"total", total},
                    {"decode_per_step", m_decode ? m_decode_s / static_cast<double>(m_decode) : 0.0}};
  r["throughput"] = {{"tokens_per_s", total > 0 ? generated / total : 0.0},
                     {"tokens_per_J", energy > 0 ? generated / energy : 0.0},
                     {"generated_tokens", generated}};
  double dram_total = 0;
  if (r.contains("stats") && r["stats"].contains(m_plan->dram()))
    dram_total = r["stats"][m_plan->dram()]["bytes_read"]["value"].get<double>() +
                 r["stats"][m_plan->dram()]["bytes_written"]["value"].get<double>();
  r["traffic_bytes"] = {{"dram_weights", m_ops->dram().weights},
                        {"dram_kv", m_ops->dram().kv},
                        {"dram_activations", m_ops->dram().activations},
                        {"dram_total", dram_total}};
  // Energy in the paper's categories: compute, on-chip memory access and refresh by role, DRAM
  // by kind (access and activation energy shared out by the bytes of each kind; background and
  // refresh power are not attributable), leakage.
  nlohmann::json cat = nlohmann::json::object();
  if (r.contains("energy_J")) {
    const double kinds = m_ops->dram().weights + m_ops->dram().kv + m_ops->dram().activations;
    auto add = [&](const std::string& k, double j) { cat[k] = cat.value(k, 0.0) + j; };
    for (const auto& [name, j] : r["energy_J"]["by_component"].items()) {
      const auto dot = name.rfind('.');
      const std::string mod = name.substr(0, dot), part = name.substr(dot + 1);
      const double e = j.get<double>();
      if (part == "leakage") {
        add("leakage", e);
      } else if (mod == m_plan->dram()) {
        if ((part == "access" || part == "activate") && kinds > 0) {
          add("dram_weights", e * m_ops->dram().weights / kinds);
          add("dram_kv", e * m_ops->dram().kv / kinds);
          add("dram_activations", e * m_ops->dram().activations / kinds);
        } else {
          add("dram_background_refresh", e);
        }
      } else if (m_platform.memory(mod)) {
        add(mod + (part == "refresh" ? "_refresh" : "_access"), e);
      } else {
        add("compute", e);
      }
    }
  }
  r["energy_breakdown_J"] = cat;

  nlohmann::json life = nlohmann::json::object();
  std::map<std::string, std::tuple<double, double, double>> acc;  // count, total, max
  for (const auto& l : m_ops->lifetimes()) {
    if (l.open) continue;
    auto& [n, t, mx] = acc[l.kind];
    const double d = (l.end - l.start).to_seconds();
    n += 1;
    t += d;
    mx = std::max(mx, d);
  }
  for (const auto& [kind, e] : m_extra_life) {  // sampled decode: the steps not simulated
    std::get<0>(acc[kind]) += e.first;
    std::get<1>(acc[kind]) += e.second;
  }
  double all = 0;
  for (const auto& [k, v] : acc) {
    const auto& [n, t, mx] = v;
    life[k] = {{"count", n}, {"total_s", t}, {"mean_s", t / n}, {"max_s", mx}};
    all += t;
  }
  r["activation_lifetimes"] = {{"total_s", all}, {"by_kind", life}};
  if (m_policy) {
    const kv_layer_report kv = m_policy->total();
    r["kv"] = {{"policy", m_policy->name()},
               {"budget_tokens", m_policy->budget()},
               {"tokens_kept", kv.kept_pairs / m_model.kv_heads},
               {"tokens_as_x", kv.x_tokens},
               {"kv_bytes_stored", kv.kv_bytes},
               {"x_bytes_stored", kv.x_bytes},
               {"recompute_macs", m_recompute_macs},
               {"high_score_bytes", kv.high_bytes},
               {"low_score_bytes", kv.low_bytes}};
    if (m_recompute) r["kv"]["recompute"] = m_recompute->results();
  } else {  // full: every token of every sequence, in every layer
    const double tokens = double(m_batch) * double(m_context + m_decode);
    r["kv"] = {{"policy", "full"},
               {"budget_tokens", 0},
               {"tokens_kept", tokens * m_model.layers},
               {"tokens_as_x", 0},
               {"kv_bytes_stored", tokens * m_model.layers * double(m_model.kv_bytes_per_token_layer())},
               {"x_bytes_stored", 0},
               {"recompute_macs", 0},
               {"high_score_bytes", nullptr},
               {"low_score_bytes", nullptr}};
  }
  // Refresh of the on-chip KV data.
  nlohmann::json fail = nullptr, rate = nullptr;
  if (m_plan->kv_layers_touching_chip() > 0) {
    // The first on-chip KV: layer 0's, or (placement `fill` with no whole layer on chip) the first
    // token slots of layer 0.
    const region& kv0 = m_plan->kv_layers_on_chip() > 0 ? m_plan->kv(0).k : m_plan->kv(0).k_chip;
    if (refresh_control* e = kv0.target ? kv0.target->refresh() : nullptr) {
      if (m_refresh->name() != "none") fail = m_refresh->expected_failed_bits(e->retention());
      if (r.contains("stats") && r["stats"].contains(kv0.memory))
        rate = r["stats"][kv0.memory]["retention_failure_rate"]["value"];
    }
  }
  r["refresh"] = {{"policy", m_refresh->name()},
                  {"energy_J", r.contains("energy_J") ? r["energy_J"]["edram_refresh"] : nlohmann::json(nullptr)},
                  {"expected_failed_bits", fail},
                  {"avg_failure_rate", rate}};
  r["llm"] = {{"model", m_model.name},
              {"batch", m_batch},
              {"context_len", m_context},
              {"decode_len", m_decode},
              {"skip_prefill", m_skip_prefill},
              {"sample_every", m_sample_every},
              {"detailed_decode_steps", m_detailed_steps},
              {"kv_bytes_written", m_ops->kv_bytes_written()},
              {"scheduler", m_scheduler_name},
              {"weight_bytes_per_pass", m_model.weight_bytes_per_pass()},
              {"kv_layers_on_chip", m_plan->kv_layers_on_chip()},
              {"kv_chip_tokens", m_plan->kv_layers_touching_chip() > m_plan->kv_layers_on_chip()
                                     ? m_plan->kv(m_plan->kv_layers_on_chip()).chip_tokens
                                     : 0},
              {"placement", m_plan->describe()},
              {"energy_per_token_J", generated > 0 ? energy / generated : 0.0}};
  if (m_fn) m_fn->add_results(r);  // `quality` and `functional`
}

std::string llm_workload::report() const {
  nlohmann::json r;
  add_results(r);
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "LLM inference: %s, batch %u, context %llu + decode %llu tokens, scheduler %s\n"
                "  placement          %s\n"
                "  latency            prefill %.4g ms, decode %.4g ms (%.4g ms per step), total %.4g ms\n"
                "  throughput         %.4g tokens/s\n"
                "  DRAM traffic       weights %.4g MB, KV %.4g MB, activations %.4g MB\n"
                "  activation life    %.4g ms in all (sum over buffers)\n",
                m_model.name.c_str(), m_batch, static_cast<unsigned long long>(m_context),
                static_cast<unsigned long long>(m_decode), m_scheduler_name.c_str(), m_plan->describe().c_str(),
                m_prefill_s * 1e3, m_decode_s * 1e3, r["latency_s"]["decode_per_step"].get<double>() * 1e3,
                (m_prefill_s + m_decode_s) * 1e3, r["throughput"]["tokens_per_s"].get<double>(),
                m_ops->dram().weights / 1e6, m_ops->dram().kv / 1e6, m_ops->dram().activations / 1e6,
                r["activation_lifetimes"]["total_s"].get<double>() * 1e3);
  std::string s = buf;
  if (m_sample_every > 1) {
    std::snprintf(buf, sizeof buf,
                  "  sampled decode     %u of %llu decode steps simulated in detail (every %u-th, the first two and "
                  "the last); the others extrapolated\n",
                  m_detailed_steps, static_cast<unsigned long long>(m_decode), m_sample_every);
    s += buf;
  }
  if (m_policy) {
    std::snprintf(buf, sizeof buf,
                  "  KV policy          %s, budget %llu tokens per head: %.4g tokens kept, %.4g stored as x, "
                  "%.4g recompute MACs (rows stacked in MM_k and MM_v)\n",
                  m_policy->name().c_str(), static_cast<unsigned long long>(m_policy->budget()),
                  r["kv"]["tokens_kept"].get<double>(), r["kv"]["tokens_as_x"].get<double>(), m_recompute_macs);
    s += buf;
    if (m_recompute) s += "  recompute budget   " + m_recompute->summary() + "\n";
  }
  if (m_fn) s += m_fn->report();
  return s;
}

std::map<std::string, std::string> llm_workload::extra_files() const {
  std::ostringstream steps, layers;
  steps << "phase,step,start_s,end_s,latency_s,dram_weight_bytes,dram_kv_bytes,dram_activation_bytes,detailed\n";
  for (const auto& s : m_steps)
    steps << s.phase << ',' << s.step << ',' << s.start_s << ',' << s.end_s << ',' << (s.end_s - s.start_s) << ','
          << s.dram_weights << ',' << s.dram_kv << ',' << s.dram_act << ',' << (s.detailed ? 1 : 0) << '\n';
  layers << "layer,time_s,kv_on_chip\n";
  for (unsigned l = 0; l < m_layer_s.size(); ++l)
    layers << l << ',' << m_layer_s[l] << ',' << (l < m_plan->kv_layers_on_chip() ? 1 : 0) << '\n';
  return {{"steps.csv", steps.str()}, {"layers.csv", layers.str()}};
}

KELLE_REGISTER(workloads(), "llm", "LLM inference through the firmware model (prefill + decode)",
               [](const workload_args& a) -> std::unique_ptr<workload> {
                 return std::make_unique<llm_workload>("firmware", a);
               });

}  // namespace kelle
