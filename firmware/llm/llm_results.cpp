// The llm workload's results: results.json's llm, latency, traffic, lifetime, KV and refresh
// figures, the report's section, and the per-step and per-layer CSVs.
#include "firmware/llm/llm_workload.h"

#include "firmware/functional/functional_run.h"
#include "firmware/llm/recompute_plan.h"
#include "firmware/llm/roofline.h"
#include "firmware/workload/expert_routing.h"
#include "models/memory/memory_target.h"
#include "models/memory/refresh_control.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kelle {

// refresh.kv_fields, the KV's expected failed bits by field and, under the lifetime rule, the
// activations' figures (docs/policies/refresh.md). Passes and layers that were not simulated
// (sampled decode, sampled layers) have theirs extrapolated with every other figure.
void llm_workload::add_refresh_fields(nlohmann::json& out) const {
  out["kv_fields"] = m_refresh->kv_fields().text();
  const region& kv0 = m_plan->first_chip_kv();
  refresh_control* e = m_plan->kv_layers_touching_chip() > 0 && kv0.target ? kv0.target->refresh() : nullptr;
  nlohmann::json by = nlohmann::json::object();
  if (e && m_refresh->name() != "none") {
    const auto f = m_refresh->expected_failed_bits_by_field(e->retention());
    for (std::size_t i = 0; i < f.size(); ++i) by[m_refresh->kv_fields().fields()[i].name] = f[i];
  }
  out["expected_failed_bits_by_field"] = by;
  if (m_refresh->temperature_aware())  // the intervals as last applied: x scale at the reading
    out["temperature_aware"] = {{"guard_band_C", m_refresh->guard_band_C()},
                                {"sensed_C", m_refresh->sensed_C()},
                                {"interval_scale", m_refresh->temperature_scale()}};
  const lifetime_rule* t = m_refresh->transient();
  if (!t) return;
  const lifetime_rule::figures all = t->totals();  // counters: passes and layers not simulated included
  nlohmann::json fields = nlohmann::json::object();
  for (std::size_t i = 0; i < t->fields().size(); ++i) {
    const auto& rule = t->rules()[i];
    fields[t->fields().fields()[i].name] = {
        {"bits", t->fields().fields()[i].bits()},
        {"interval_us", rule.budget_us > 0 ? nlohmann::json(nullptr) : nlohmann::json(rule.interval_us)},
        {"budget_us", rule.budget_us > 0 ? nlohmann::json(rule.budget_us) : nlohmann::json(nullptr)},
        {"stored_bits", all.bits[i]},
        {"expected_failed_bits", all.expected_failed_bits[i]},
        {"refreshed_bytes", all.refreshed_bytes[i]}};
  }
  out["activation"] = {{"fields", t->fields().text()},
                       {"stall", t->stall() == lifetime_rule::stall_action::refresh ? "refresh" : "count"},
                       {"buffers", all.buffers},
                       {"within_budget", all.within_budget},
                       {"outlived", all.outlived},
                       {"by_field", fields}};
}

// Energy in the paper's categories, from the energy parts' tags: compute, each on-chip memory's
// access and refresh, the DRAM's access and activation energy by traffic class (its own shares,
// memory_target::access_energy_of) and its background and refresh power (not attributable to a
// class), leakage. Summed in the order of the parts' component names (results.json's
// energy_J.by_component).
nlohmann::json llm_workload::energy_breakdown() const {
  nlohmann::json cat = nlohmann::json::object();
  auto add = [&](const std::string& k, double j) { cat[k] = cat.value(k, 0.0) + j; };
  const stat_group* dram = m_dram ? &m_dram->stats() : nullptr;
  std::map<std::string, std::pair<const stat_group*, const stat*>> parts;
  for (const stat_group* g : collect_stat_groups())
    for (const stat& s : g->all())
      if (s.energy_part()) parts[g->owner() + "." + s.name()] = {g, &s};
  for (const auto& [component, part] : parts) {
    const auto& [g, s] = part;
    const energy_kind kind = s->tag().energy;
    if (kind == energy_kind::leakage)
      add("leakage", s->value());
    else if (kind == energy_kind::compute)
      add("compute", s->value());
    else if (g != dram)
      add(g->owner() + (kind == energy_kind::refresh ? "_refresh" : "_access"), s->value());
    else if (kind == energy_kind::refresh || kind == energy_kind::background)
      add("dram_background_refresh", s->value());
  }
  if (dram)
    for (traffic_class c : {traffic_class::weights, traffic_class::kv, traffic_class::activations,
                            traffic_class::unclassified})
      if (const double j = m_dram->access_energy_of(c); j > 0 || c != traffic_class::unclassified)
        add(std::string("dram_") + name_of(c), j);
  return cat;
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
  // DRAM traffic by class, as the DRAM counted its transactions (memory_target::bytes_of).
  const std::array<double, traffic_classes> dram = dram_by_class();
  nlohmann::json traffic = nlohmann::json::object();
  for (traffic_class c : {traffic_class::weights, traffic_class::kv, traffic_class::activations})
    traffic[std::string("dram_") + name_of(c)] = dram[index_of(c)];
  if (dram[index_of(traffic_class::unclassified)] > 0)  // bytes no initiator classified
    traffic["dram_unclassified"] = dram[index_of(traffic_class::unclassified)];
  traffic["dram_total"] = m_dram ? m_dram->bytes_moved() : 0.0;
  r["traffic_bytes"] = traffic;
  r["energy_breakdown_J"] = energy_breakdown();

  // Lifetimes by kind: counters (passes not simulated included), the longest of those simulated.
  nlohmann::json life = nlohmann::json::object();
  std::map<std::string, const lifetime_kind*> kinds;  // by name, as results list them
  for (const lifetime_kind& k : m_ops->lifetimes())
    if (k.count->value() > 0) kinds[k.name] = &k;
  double all = 0;
  for (const auto& [name, k] : kinds) {
    const double n = k->count->value(), t = k->total_s->value();
    life[name] = {{"count", n}, {"total_s", t}, {"mean_s", t / n}, {"max_s", k->max_s}};
    all += t;
  }
  r["activation_lifetimes"] = {{"total_s", all}, {"by_kind", life}};
  if (m_policy) {
    const kv_layer_report kv = m_policy->total();
    r["kv"] = {{"policy", m_policy->name()},
               {"budget_tokens", m_policy->budget()},
               {"tokens_kept", kv.kept_pairs / m_model.cache_heads()},
               {"tokens_as_x", kv.x_tokens},
               {"kv_bytes_stored", kv.kv_bytes},
               {"x_bytes_stored", kv.x_bytes},
               {"recompute_macs", m_recompute_macs},
               {"high_score_bytes", kv.high_bytes},
               {"low_score_bytes", kv.low_bytes}};
    if (m_recompute) r["kv"]["recompute"] = m_recompute->results();
  } else {  // full: every token of every sequence, in every layer (a windowed layer's last W)
    const std::uint64_t tokens = m_context + m_decode;
    double kept = 0;
    for (unsigned l = 0; l < m_model.layers; ++l) kept += double(m_model.kv_slots(l, tokens));
    r["kv"] = {{"policy", "full"},
               {"budget_tokens", 0},
               {"tokens_kept", double(m_batch) * kept},
               {"tokens_as_x", 0},
               {"kv_bytes_stored", double(m_batch) * double(m_model.kv_bytes_held(tokens))},
               {"x_bytes_stored", 0},
               {"recompute_macs", 0},
               {"high_score_bytes", nullptr},
               {"low_score_bytes", nullptr}};
  }
  // The KV cache's number format and what a token takes in it (docs/policies/kv-format.md).
  const double token_layer = double(m_model.kv_bytes_per_token_layer());
  r["kv"]["format"] = {{"name", m_model.kv.name()},
                       {"bits", m_model.kv.bits()},
                       {"group_size", m_model.kv.group()},
                       {"row_bytes", m_model.kv_row_bytes()},
                       {"scale_bytes_per_row", m_model.kv.scale_bytes(m_model.head_dim)},
                       {"bytes_per_token_layer", token_layer},
                       {"tokens_per_MiB_per_layer", double(1 << 20) / token_layer},
                       {"tokens_per_MiB", double(1 << 20) / (token_layer * m_model.layers)}};
  // Refresh of the on-chip KV data.
  nlohmann::json fail = nullptr, rate = nullptr;
  if (m_plan->kv_layers_touching_chip() > 0) {
    // The first on-chip KV: the first whole layer's on chip (layer 0's unless layers are
    // windowed), or (placement `fill` with no whole layer on chip) the partly placed layer's slots.
    const region& kv0 = m_plan->first_chip_kv();
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
  add_refresh_fields(r["refresh"]);
  r["llm"] = {{"model", m_model.name},
              {"batch", m_batch},
              {"context_len", m_context},
              {"decode_len", m_decode},
              {"skip_prefill", m_skip_prefill},
              {"sample_every", m_sample_every},
              {"detailed_decode_steps", m_detailed_steps},
              {"sample_layers", m_sample_layers},
              {"layers_extrapolated", m_layers_extrapolated},
              {"kv_bytes_written", m_ops->kv_bytes_written()},
              {"scheduler", m_run.scheduler.name},
              {"firmware", m_run.to_json()},
              {"weight_bytes_per_pass", m_model.weight_bytes_per_pass()},
              {"kv_layers_on_chip", m_plan->kv_layers_on_chip()},
              {"kv_chip_tokens", m_plan->kv_partial_layer() < m_model.layers
                                     ? m_plan->kv(m_plan->kv_partial_layer()).chip_tokens
                                     : 0},
              {"placement", m_plan->describe()},
              {"dram_overflow_bytes", m_plan->dram_overflow_bytes()},
              {"energy_per_token_J", generated > 0 ? energy / generated : 0.0}};
  // Sampling and its measured error (docs/firmware.md, "Sampled decode", "Sampled layers"):
  // each check is a simulated step (layer) compared with what extrapolation would have given it.
  auto check = [](const sampling_check& c) {
    return nlohmann::json{{"checks", c.n},
                          {"time_error_max", c.n ? nlohmann::json(c.max) : nlohmann::json(nullptr)},
                          {"time_error_mean", c.n ? nlohmann::json(c.sum / c.n) : nlohmann::json(nullptr)}};
  };
  r["sampling"] = {{"decode", {{"sample_every", m_sample_every},
                               {"detailed_steps", m_detailed_steps},
                               {"extrapolated_steps", m_decode - std::min<std::uint64_t>(m_decode, m_detailed_steps)},
                               {"from_earlier_regimes", m_known_steps},
                               {"regimes", m_regimes_started},
                               {"carried_slopes", m_carried_slopes},
                               {"check", check(m_step_check)}}},
                   {"layers", {{"enabled", m_sample_layers},
                               {"extrapolated", m_layers_extrapolated},
                               {"check", check(m_layer_check)}}}};
  // First-order estimates beside the simulated phases (docs/firmware.md, "Roofline").
  r["roofline"] = {{"prefill", m_roof_prefill->results()}, {"decode", m_roof_decode->results()}};
  if (!m_task_origins.is_null()) r["llm"]["origins"] = m_task_origins;
  if (m_routing) {  // which experts the passes streamed, beside uniform routing's expectation
    const std::uint64_t prefill_tokens = std::uint64_t(m_batch) * m_context;
    r["llm"]["moe"] = {
        {"routing", m_routing->describe()},
        {"experts", m_model.experts},
        {"experts_per_token", m_model.experts_per_token},
        {"shared_experts", m_model.shared_experts},
        {"moe_layers", m_model.layers - m_model.first_dense_layers},
        {"decode", {{"experts_per_layer", m_ops->experts_per_layer_pass(false)},
                    {"expected_uniform", m_model.expected_experts(m_batch)}}},
        {"prefill", {{"experts_per_layer", m_ops->experts_per_layer_pass(true)},
                     {"expected_uniform", m_skip_prefill ? 0.0 : m_model.expected_experts(prefill_tokens)}}},
        {"decode_weight_bytes_expected", m_model.decode_weight_bytes(m_batch)}};
  }
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
                static_cast<unsigned long long>(m_decode), m_run.scheduler.name.c_str(), m_plan->describe().c_str(),
                m_prefill_s * 1e3, m_decode_s * 1e3, r["latency_s"]["decode_per_step"].get<double>() * 1e3,
                (m_prefill_s + m_decode_s) * 1e3, r["throughput"]["tokens_per_s"].get<double>(),
                r["traffic_bytes"]["dram_weights"].get<double>() / 1e6, r["traffic_bytes"]["dram_kv"].get<double>() / 1e6,
                r["traffic_bytes"]["dram_activations"].get<double>() / 1e6,
                r["activation_lifetimes"]["total_s"].get<double>() * 1e3);
  std::string s = buf;
  if (m_plan->dram_overflow_bytes()) {
    std::snprintf(buf, sizeof buf,
                  "  DRAM OVERFLOW      weights and KV exceed %s by %.4g MiB (placement.allow_dram_overflow: the KV's "
                  "addresses are folded, the DRAM's timing and energy are its own)\n",
                  m_plan->dram().c_str(), double(m_plan->dram_overflow_bytes()) / (1 << 20));
    s += buf;
  }
  for (const auto& [phase, roof] : {std::pair{"prefill", m_roof_prefill.get()}, std::pair{"decode", m_roof_decode.get()}})
    if (const std::string line = roof->summary(phase); !line.empty()) s += "  " + line + "\n";
  if (!m_task_note.empty()) s += "  " + m_task_note + "\n";
  if (m_sample_every > 1) {
    std::snprintf(buf, sizeof buf,
                  "  sampled decode     %u of %llu decode steps simulated in detail (every %u-th, the last, and each "
                  "regime's steps 0, 1, 2, 4, ...); the others extrapolated; checked on %u steps: time within %.2g %% "
                  "(max)\n",
                  m_detailed_steps, static_cast<unsigned long long>(m_decode), m_sample_every, m_step_check.n,
                  m_step_check.max * 100);
    s += buf;
  }
  if (m_sample_layers) {
    std::snprintf(buf, sizeof buf,
                  "  sampled layers     %llu layer passes repeated from the run of alike layers they belong to; "
                  "checked on %u layers: time within %.2g %% (max)\n",
                  static_cast<unsigned long long>(m_layers_extrapolated), m_layer_check.n, m_layer_check.max * 100);
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
  for (unsigned l = 0; l < m_layer_time.size(); ++l)
    layers << l << ',' << m_layer_time[l]->value() << ',' << (m_plan->kv_on_chip(l) ? 1 : 0) << '\n';
  return {{"steps.csv", steps.str()}, {"layers.csv", layers.str()}};
}

}  // namespace kelle
