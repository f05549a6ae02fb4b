// The llm workload's sampled decode: the regimes samples are not extrapolated across, and the
// steps and layers that are not simulated (skip_steps, skip_layer), whose activity is extrapolated
// into every statistics counter (each figure's owner keeps it as one). docs/firmware.md,
// "Sampled decode".
#include "firmware/llm/llm_workload.h"

#include "firmware/functional/functional_run.h"
#include "firmware/llm/recompute_plan.h"
#include "firmware/llm/routed_fit.h"
#include "firmware/workload/expert_routing.h"
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

std::array<double, traffic_classes> llm_workload::dram_by_class() const {
  std::array<double, traffic_classes> b{};
  for (std::size_t i = 0; i < traffic_classes && m_dram; ++i) b[i] = m_dram->bytes_of(class_at(i));
  return b;
}

std::uint64_t llm_workload::layer_signature(const pass_info& p, unsigned l) const {
  // Where the layer's KV lives, what its attention reads and recomputes, and whether it evicts:
  // layers alike in these issue the same commands (their weights have the same shapes).
  const unsigned where = m_plan->kv_on_chip(l) ? 0u : m_plan->kv_touches_chip(l) ? 1u : 2u;
  std::uint64_t h = splitmix64(where);
  h = splitmix64(h ^ p.attended(l));
  h = splitmix64(h ^ p.recompute_rows(l));
  h = splitmix64(h ^ p.attended_x(l));
  h = splitmix64(h ^ (p.victims.empty() ? 0 : p.victims[l]));
  const bool slots = p.recompute_rows(l) && m_ops->x_store_in_slots(l, p.recompute_rows(l));
  h = splitmix64(h ^ (m_model.moe_layer(l) ? 2u : 0u));  // a MoE FFN issues other commands than a dense one
  return splitmix64(h ^ (slots ? 1u : 0u));
}

double llm_workload::routed_experts(const pass_info& p, unsigned l) {
  if (!m_routing || !m_model.moe_layer(l)) return 0;
  return static_cast<double>(m_routing->route(p.prefill ? 0 : p.step, l, std::uint64_t(p.batch) * p.rows).size());
}

double llm_workload::routed_experts(const pass_info& p) {
  double n = 0;
  for (unsigned l = 0; l < m_model.layers && m_routing; ++l) n += routed_experts(p, l);
  return n;
}

namespace {
// Adds f x each value of `amounts` to its counter.
void add_scaled_to_counters(const counter_snapshot& amounts, double f) {
  if (f == 0) return;
  for (std::size_t i = 0; i < amounts.stats.size(); ++i) *amounts.stats[i] += f * amounts.values[i];
}
}  // namespace

double llm_workload::layer_dt(const pass_info& p, unsigned l, const layer_sample& s) {
  return std::max(0.0, s.dt + (routed_experts(p, l) - s.routed) * m_routed->slope_dt());
}

void llm_workload::skip_layer(const pass_info& p, unsigned l, const layer_sample& s) {
  // The platform idles for the sample's time (time-driven figures accrue); the layer's new K and
  // V become live mid-layer. Its activity is the sample's, its time counted as its own; a MoE
  // layer streams its own routed experts (the sample's plus the difference x the fitted slope).
  const double more = routed_experts(p, l) - s.routed;
  const double dt = std::max(0.0, s.dt + more * m_routed->slope_dt());
  sc_core::wait(sc_core::sc_time(dt / 2, sc_core::SC_SEC));
  if (m_plan->kv_touches_chip(l))
    for (bool v : {false, true}) {
      const region r = m_ops->kv_slot(l, v, p);
      mark_live(r, r.bytes);
    }
  sc_core::wait(sc_core::sc_time(dt - dt / 2, sc_core::SC_SEC));
  add_to_counters(s.d);
  add_scaled_to_counters(m_routed->slope(), more);
  *m_layer_time[l] += dt;
  ++m_layers_extrapolated;
}

std::uint64_t llm_workload::regime(const pass_info& p, std::uint64_t* core) const {
  // Bit 0: a layer evicts; bit 1: a layer recomputes; above them, how many layers' x stores have
  // outgrown their slots (x read from DRAM instead of the layer's KV memory); hashed with where
  // every layer's activation buffers land (arena or DRAM) and how its attention groups KV heads,
  // which step as the tokens attended grow (layer_ops::placement).
  // Windowed layers: how many attend to a full window (their cost stops growing with the tokens,
  // so the slope of the cost in the tokens attended changes when one fills). Which layers evict
  // and recompute when only some do (on a full window the token leaving it decides whether a
  // head evicts: some layers select victims, the others not).
  std::uint64_t r = 0, outgrown = 0, where = 0, full_windows = 0, which = 0, all = 3;
  for (unsigned l = 0; l < m_model.layers; ++l) {
    const std::uint64_t does = (p.evicts(l) ? 1u : 0u) | (p.recompute_rows(l) ? 2u : 0u);
    r |= does;
    all &= does;
    which = splitmix64(which ^ does);
    if (p.recompute_rows(l) && !m_ops->x_store_in_slots(l, p.recompute_rows(l))) ++outgrown;
    where = splitmix64(where ^ m_ops->placement(p, l));
    if (!p.window.empty() && p.window[l] && p.attended(l) >= p.window[l]) ++full_windows;
  }
  std::uint64_t c = splitmix64(r | outgrown << 2);
  if (full_windows) c = splitmix64(c ^ full_windows << 32);
  if (r != all) c = splitmix64(c ^ which);
  if (core) *core = c;
  const std::uint64_t h = splitmix64(c ^ where);
  return h == no_regime ? 0 : h;
}

std::uint64_t llm_workload::step_shape(const pass_info& p) const {
  std::uint64_t h = 0;
  for (unsigned l = 0; l < m_model.layers; ++l) {
    h = splitmix64(h ^ p.attended(l));
    h = splitmix64(h ^ p.recompute_rows(l));
    h = splitmix64(h ^ p.attended_x(l) << 1 ^ (p.evicts(l) ? 1u : 0u));
  }
  // A partly placed layer writes the new token's K and V on chip or to DRAM by its slot (a
  // window's ring, or a full cache's slots, go round).
  const unsigned part = m_plan->kv_partial_layer();
  if (part < m_model.layers && m_ops->chip_slots(part)) {
    const region& chip = m_plan->kv(part).k_chip;
    const region r = m_ops->kv_slot(part, false, p);
    h = splitmix64(h ^ (r.memory == chip.memory && r.addr >= chip.addr && r.addr < chip.addr + chip.bytes ? 1u : 2u));
  }
  return h;
}

const llm_workload::step_sample* llm_workload::known_sample(std::uint64_t r, std::uint64_t shape) const {
  const step_sample* found = nullptr;  // the latest at that shape, one not after_known first
  for (const known_regime& k : m_known)
    if (k.regime == r)
      for (auto i = k.samples.rbegin(); i != k.samples.rend(); ++i)
        if (!i->synthetic && i->shape == shape && (!found || (found->after_known && !i->after_known))) found = &*i;
  return found;
}

void llm_workload::enter_regime(std::uint64_t r, std::uint64_t core, std::uint64_t shape, double x, unsigned s) {
  // The cost driver as the last sample's: a steady state (a full window at the policy's budget),
  // whose regimes need no slope; a step of one whose driver moved is simulated (skip_steps).
  const bool steady = !m_samples.empty() && m_samples.back().x == x;
  // Only the placement changed: the slope so far can be carried (one not yet used is kept).
  carried_slope carry;
  if (m_regime != no_regime && core == m_regime_core) {
    if (m_carry.set)
      carry = m_carry;
    else if (m_samples.size() == 2 && m_samples.front().x != m_samples.back().x) {
      const step_sample &a = m_samples.back(), &q = m_samples.front();
      carry.set = true;
      carry.dx = a.x - q.x;
      carry.ddt = a.dt - q.dt;
      carry.drouted = a.routed - q.routed;
      carry.dd = a.d;
      const std::vector<double> dq = align(q.d, a.d, std::nan(""));
      for (std::size_t i = 0; i < dq.size(); ++i) carry.dd.values[i] = std::isnan(dq[i]) ? 0.0 : a.d.values[i] - dq[i];
    }
  }
  m_carry = carried_slope{};
  m_carry_open = false;
  m_geometric_from = 1;
  m_pending_start = no_step;
  m_flat.clear();
  if (m_regime != no_regime && !m_samples.empty()) {  // kept: its steps may come back
    auto old = std::find_if(m_known.begin(), m_known.end(), [&](const known_regime& k) { return k.regime == m_regime; });
    if (old != m_known.end()) m_known.erase(old);
    if (m_known.size() == max_known) m_known.erase(m_known.begin());
    m_known.push_back(known_regime{m_regime, std::move(m_samples)});
  }
  m_samples.clear();
  m_regime = r;
  m_regime_core = core;
  auto k = std::find_if(m_known.begin(), m_known.end(), [&](const known_regime& e) { return e.regime == r; });
  if (k != m_known.end()) {
    const bool same = k->samples.back().shape == shape;
    if (same) m_samples = std::move(k->samples);  // a regime seen before, at its latest sample's shape
    m_known.erase(k);
    if (same) return;
  }
  ++m_regimes_started;
  if (steady) {
    // Right after steps of earlier regimes the step's sample also holds what they left live: the
    // next step in detail too, a sample without it (after_known).
    if (m_known_since_sample) m_force_detailed = 1;
    return;
  }
  if (carry.set) {  // this step gives the offset, the geometric series from k/8 the check
    m_carry = std::move(carry);
    m_regime_start = s;
    m_geometric_from = carry_check_offset();
    ++m_carried_slopes;
    return;
  }
  // This step in detail; the geometric start from it once its cost driver moves (a regime in
  // which it does not, the policy at its budget, needs no slope; skip_steps simulates the first
  // step that moves it).
  m_pending_start = s;
}

void llm_workload::keep_sample(step_sample smp) {
  // A new regime's second sample at another cost driver: its geometric start, from its first.
  if (m_pending_start != no_step && !m_samples.empty() && m_samples.back().x != smp.x) {
    m_regime_start = m_pending_start;
    m_geometric_from = 1;
    m_pending_start = no_step;
  }
  if (!smp.after_known) {  // the regime's samples by shape at a flat driver
    if (!m_flat.empty() && m_flat.front().x != smp.x) m_flat.clear();
    auto f = std::find_if(m_flat.begin(), m_flat.end(), [&](const step_sample& e) { return e.shape == smp.shape; });
    if (f != m_flat.end())
      *f = smp;
    else if (m_flat.size() < max_flat_shapes)
      m_flat.push_back(smp);
  }
  if (smp.after_known && !m_samples.empty()) return;  // a check of the regime's samples only
  if (!m_samples.empty() && m_samples.back().after_known) m_samples.pop_back();
  // A regime's first sample with a carried slope: the synthetic one before it (a sample after
  // steps of earlier regimes waits for the next).
  if (m_carry.set && m_samples.empty() && !smp.after_known) {
    m_samples.push_back(carried_before(smp));
    m_carry.set = false;
    m_carry_open = true;
    m_carry_dx_sum = 0;
  } else if (!smp.after_known) {
    close_carried_span(smp);
  }
  m_samples.push_back(std::move(smp));
  if (m_samples.size() > 2) m_samples.erase(m_samples.begin());
}

void llm_workload::close_carried_span(const step_sample& b) {
  // The span's counters were n a + (a - q)/dx S + (routed terms), with q the synthetic sample; the
  // regime's own slope between a and b replaces the carried one over S (the routed experts' part,
  // fitted apart, stays as it was).
  const bool open = m_carry_open;
  m_carry_open = false;
  if (!open || m_samples.size() != 2 || !m_samples.front().synthetic || m_carry_dx_sum == 0) return;
  const step_sample &q = m_samples.front(), &a = m_samples.back();
  if (b.x == a.x || a.x == q.x) return;
  const std::vector<double> da = align(a.d, b.d), dq = align(q.d, b.d);
  // What one more routed expert adds to each counter, the residual stream's lifetimes included
  // (skip_steps adds them apart from the slope).
  std::vector<double> u = align(m_routed->slope(), b.d);
  const std::vector<lifetime_kind>& kinds = m_ops->lifetimes();
  for (std::size_t k = 0; k < m_routed->outer().size() && k < kinds.size(); ++k) {
    auto i = std::find(b.d.stats.begin(), b.d.stats.end(), kinds[k].total_s);
    if (i != b.d.stats.end()) u[i - b.d.stats.begin()] += m_routed->outer()[k] * m_routed->slope_dt();
  }
  counter_snapshot fix = b.d;
  for (std::size_t i = 0; i < fix.values.size(); ++i) {
    const double own = (b.d.values[i] - da[i] - (b.routed - a.routed) * u[i]) / (b.x - a.x);
    const double carried = (da[i] - dq[i] - (a.routed - q.routed) * u[i]) / (a.x - q.x);
    fix.values[i] = m_carry_dx_sum * (own - carried);
  }
  add_to_counters(fix);
  m_carry_dx_sum = 0;
}

const llm_workload::step_sample* llm_workload::flat_sample(std::uint64_t shape, double x) const {
  for (const step_sample& e : m_flat)
    if (e.shape == shape && e.x == x) return &e;
  return nullptr;
}

llm_workload::step_sample llm_workload::carried_before(const step_sample& a) const {
  step_sample q;
  q.x = a.x - m_carry.dx;
  q.dt = a.dt - m_carry.ddt;
  q.routed = a.routed - m_carry.drouted;
  q.shape = a.shape;
  q.synthetic = true;
  q.d = a.d;
  const std::vector<double> dd = align(m_carry.dd, a.d);  // 0 for a counter new since
  for (std::size_t i = 0; i < dd.size(); ++i) q.d.values[i] -= dd[i];
  return q;
}

unsigned llm_workload::skip_steps(pass_info& p, unsigned first, unsigned end) {
  // The last two detailed steps: a (latest) and q (before it).
  const step_sample* a = m_samples.empty() ? nullptr : &m_samples.back();
  const step_sample* q = m_samples.size() > 1 ? &m_samples.front() : nullptr;
  if (!a) throw std::logic_error("sampled decode: no detailed step to extrapolate from");
  const bool slope = q && a->x != q->x;
  double weights = 0;  // sum over the skipped steps of (x_j - x_a) / (x_a - x_q)
  // Mixture of experts: a skipped step streams its own routed experts; the samples' time and
  // counters are taken apart into the routed experts (the fitted slope) and the rest, which the
  // cost driver extrapolates.
  const double u_dt = m_routed->slope_dt();
  const double routed_slope = q ? a->routed - q->routed : 0.0;
  double routed_extra = 0;  // sum over the skipped steps of (routed_j - routed_a)
  unsigned n = 0;           // the skipped steps of the current regime
  // The skipped steps of earlier regimes, each from its regime's sample at its shape, and those
  // of the current one at a flat driver, from its sample at their shape: each as it was.
  struct known_use {
    const step_sample* sample;
    unsigned n;
  };
  std::vector<known_use> known;
  const double t_skip0 = sc_core::sc_time_stamp().to_seconds();
  for (unsigned s = first; s < end; ++s) {
    begin_decode_step(p, s);
    double dt = 0;
    const step_sample* k = nullptr;  // a sample the step takes as it is
    if (const std::uint64_t r = regime(p); r != m_regime) {
      k = m_known.empty() ? nullptr : known_sample(r, step_shape(p));
      if (!k) {  // stop: this step is simulated in detail
        m_step_ready = true;
        m_force_detailed = 1;
        end = s;
        break;
      }
      ++m_known_steps;
      ++m_known_since_sample;
    } else {
      if ((!q || q->x == a->x) && cost_driver(p) != a->x) {  // no slope yet, and the driver moved
        m_step_ready = true;
        m_force_detailed = 1;
        end = s;
        break;
      }
      // The driver flat: a step at another shape than the last sample's (the partly placed
      // layer's new slot on chip or in DRAM, which layers evict) takes the regime's sample at its
      // shape, and one at a shape not seen yet is simulated (up to max_flat_shapes shapes).
      if (!slope && !m_flat.empty()) {
        const std::uint64_t shape = step_shape(p);
        if (shape != a->shape) {
          if (const step_sample* f = flat_sample(shape, a->x))
            k = f;
          else if (m_flat.size() < max_flat_shapes) {
            m_step_ready = true;
            m_force_detailed = 1;
            end = s;
            break;
          }
        }
      }
    }
    if (k) {
      auto u = std::find_if(known.begin(), known.end(), [&](const known_use& e) { return e.sample == k; });
      if (u == known.end()) u = known.insert(known.end(), known_use{k, 0});
      ++u->n;
      const double routed = m_routing ? routed_experts(p) - k->routed : 0.0;
      routed_extra += routed;
      dt = std::max(0.0, k->dt + routed * u_dt);
    } else {
      ++n;
      if (m_carry_open && q && q->synthetic) m_carry_dx_sum += cost_driver(p) - a->x;
      const double w = slope ? (cost_driver(p) - a->x) / (a->x - q->x) : 0.0;
      weights += w;
      const double routed = m_routing ? routed_experts(p) - a->routed : 0.0;
      routed_extra += routed;
      dt = std::max(0.0, a->dt + (slope ? (a->dt - q->dt - routed_slope * u_dt) * w : 0.0) + routed * u_dt);
    }
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
  const std::array<double, traffic_classes> before = dram_by_class();
  if (n > 0) {
    // Each counter: n times what the last sample added, plus its slope in the cost driver (none
    // for a counter that did not exist at the sample before).
    counter_snapshot amount = a->d;
    const std::vector<double> dq = q ? align(q->d, a->d, std::nan("")) : a->d.values;
    for (std::size_t i = 0; i < amount.values.size(); ++i) {
      const double di = a->d.values[i], dqi = std::isnan(dq[i]) ? di : dq[i];
      amount.values[i] = std::max(0.0, n * di + (slope ? (di - dqi) * weights : 0.0));
    }
    add_to_counters(amount);
  }
  for (const known_use& u : known) add_scaled_to_counters(u.sample->d, u.n);
  const double more = routed_extra - (slope ? routed_slope * weights : 0.0);
  add_scaled_to_counters(m_routed->slope(), more);
  const std::vector<lifetime_kind>& kinds = m_ops->lifetimes();
  for (std::size_t k = 0; k < m_routed->outer().size() && k < kinds.size(); ++k)  // the residual stream
    *kinds[k].total_s += m_routed->outer()[k] * more * u_dt;
  const std::array<double, traffic_classes> after = dram_by_class();
  auto moved = [&](traffic_class c) { return after[index_of(c)] - before[index_of(c)]; };
  // The skipped steps' rows in steps.csv: their share of the extrapolated traffic by duration.
  const double span = sc_core::sc_time_stamp().to_seconds() - t_skip0;
  for (std::size_t i = m_steps.size() - (end - first); i < m_steps.size(); ++i) {
    const double share = span > 0 ? (m_steps[i].end_s - m_steps[i].start_s) / span : 1.0 / (end - first);
    m_steps[i].dram_weights = moved(traffic_class::weights) * share;
    m_steps[i].dram_kv = moved(traffic_class::kv) * share;
    m_steps[i].dram_act = moved(traffic_class::activations) * share;
  }
  return end;
}

}  // namespace kelle
