// The llm workload's sampled decode: what a detailed step adds to every figure sampled decode
// extrapolates (sample_vector), the regimes samples are not extrapolated across, and the steps
// that are not simulated (skip_steps). docs/firmware.md, "Sampled decode".
#include "firmware/llm/llm_workload.h"

#include "firmware/functional/functional_run.h"
#include "firmware/llm/recompute_plan.h"
#include "models/memory/memory_target.h"
#include "models/memory/refresh_control.h"
#include "platform/support/hash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kelle {

double llm_workload::cost_driver(const pass_info& p) const {
  double x = 0;
  for (unsigned l = 0; l < m_model.layers; ++l)
    x += static_cast<double>(p.attended(l)) + static_cast<double>(p.recompute_rows(l));
  return x;
}

std::vector<double> llm_workload::sample_vector(const counter_snapshot& c) const {
  std::vector<double> v = c.values;
  const auto& d = m_ops->dram();
  v.insert(v.end(), {d.weights, d.kv, d.activations, m_ops->kv_bytes_written(),
                     static_cast<double>(m_driver->commands_submitted()) + m_extra_commands});
  // The simulated refresh only (what earlier extrapolations added is in the counters above), as
  // its expectation over the refresh ticks' phase: a buffer that lives a fraction of an interval
  // is refreshed once or not at all by where the ticks fall, and a few samples' lottery repeated
  // over every skipped step would not average out as the simulated steps do.
  for (refresh_control* e : m_edrams) v.push_back(e->fluid_refresh_bytes());
  // The lifetime rule's figures: the activation buffers a pass or a layer releases.
  if (const lifetime_rule* t = m_refresh->transient()) t->flatten(v);
  v.insert(v.end(), m_layer_s.begin(), m_layer_s.end());
  const std::size_t base = v.size();
  auto& kinds = m_life_kind;  // kinds seen so far, in order of first appearance
  v.resize(base + 2 * kinds.size(), 0.0);
  auto slot = [&](const std::string& kind) {
    auto it = kinds.find(kind);
    if (it == kinds.end()) {
      it = kinds.emplace(kind, static_cast<unsigned>(kinds.size())).first;
      v.resize(base + 2 * kinds.size(), 0.0);
    }
    return base + 2 * it->second;
  };
  for (const auto& l : m_ops->lifetimes()) {
    if (l.open) continue;
    const std::size_t i = slot(l.kind);
    v[i] += 1;
    v[i + 1] += (l.end - l.start).to_seconds();
  }
  for (const auto& [kind, e] : m_extra_life) {  // the layers and steps extrapolated so far
    const std::size_t i = slot(kind);
    v[i] += e.first;
    v[i + 1] += e.second;
  }
  return v;
}

std::vector<double> llm_workload::sample_delta(const counter_snapshot& before, const std::vector<double>& v0,
                                               const sc_core::sc_time& start) const {
  std::vector<double> v = sample_vector(snapshot_counters());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] -= i < v0.size() ? v0[i] : 0.0;
  // Of each eDRAM's refresh in the sample, only what transient data (live during the sample
  // only) cost is extrapolated: the data still live after it keeps being refreshed while the
  // skipped time passes: its continuous refresh, the live set's rate over the sample's time, is
  // exactly what it added to the continuous figure above.
  const double dt = (sc_core::sc_time_stamp() - start).to_seconds();
  for (std::size_t i = 0; i < m_edrams.size(); ++i)
    v[before.stats.size() + firmware_figures + i] -= m_edrams[i]->refresh_rate_Bps() * dt;
  return v;
}

layer_ops::traffic llm_workload::add_extrapolated(const std::vector<double>& amount) {
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
  if (lifetime_rule* t = m_refresh->transient()) {
    t->add_extrapolated(f);
    f += t->flat_size();
  }
  for (unsigned l = 0; l < m_model.layers; ++l) m_layer_s[l] += f[l];
  const double* life = f + m_model.layers;
  const std::size_t life_base = static_cast<std::size_t>(life - amount.data());
  for (const auto& [kind, i] : m_life_kind)
    if (life_base + 2 * i + 1 < amount.size()) {
      m_extra_life[kind].first += life[2 * i];
      m_extra_life[kind].second += life[2 * i + 1];
    }
  return t;
}

std::uint64_t llm_workload::layer_signature(const pass_info& p, unsigned l) const {
  // Where the layer's KV lives, what its attention reads and recomputes, and whether it evicts:
  // layers alike in these issue the same commands (their weights have the same shapes).
  const unsigned where = l < m_plan->kv_layers_on_chip() ? 0u : l < m_plan->kv_layers_touching_chip() ? 1u : 2u;
  std::uint64_t h = splitmix64(where);
  h = splitmix64(h ^ p.attended(l));
  h = splitmix64(h ^ p.recompute_rows(l));
  h = splitmix64(h ^ p.attended_x(l));
  h = splitmix64(h ^ (p.victims.empty() ? 0 : p.victims[l]));
  const bool slots = p.recompute_rows(l) && m_ops->x_store_in_slots(l, p.recompute_rows(l));
  return splitmix64(h ^ (slots ? 1u : 0u));
}

void llm_workload::skip_layer(const pass_info& p, unsigned l, const layer_sample& s) {
  // The platform idles for the sample's time (time-driven figures accrue); the layer's new K and
  // V become live mid-layer. Its activity is the sample's, its time counted as its own.
  sc_core::wait(sc_core::sc_time(s.dt / 2, sc_core::SC_SEC));
  if (l < m_plan->kv_layers_touching_chip())
    for (bool v : {false, true}) {
      const region r = m_ops->kv_slot(l, v, p);
      mark_live(r, r.bytes);
    }
  sc_core::wait(sc_core::sc_time(s.dt - s.dt / 2, sc_core::SC_SEC));
  add_extrapolated(s.v);
  m_layer_s[l] += s.dt;
  ++m_layers_extrapolated;
}

std::uint64_t llm_workload::regime(const pass_info& p) const {
  // Bit 0: a layer evicts; bit 1: a layer recomputes; above them, how many layers' x stores have
  // outgrown their slots (x read from DRAM instead of the layer's KV memory); hashed with where
  // every layer's activation buffers land (arena or DRAM) and how its attention groups KV heads,
  // which step as the tokens attended grow (layer_ops::placement).
  std::uint64_t r = 0, outgrown = 0, where = 0;
  for (unsigned l = 0; l < m_model.layers; ++l) {
    r |= (p.evicts(l) ? 1u : 0u) | (p.recompute_rows(l) ? 2u : 0u);
    if (p.recompute_rows(l) && !m_ops->x_store_in_slots(l, p.recompute_rows(l))) ++outgrown;
    where = splitmix64(where ^ m_ops->placement(p, l));
  }
  const std::uint64_t h = splitmix64((r | outgrown << 2) ^ where);
  return h == no_regime ? 0 : h;
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
  const layer_ops::traffic t = add_extrapolated(amount);
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

}  // namespace kelle
