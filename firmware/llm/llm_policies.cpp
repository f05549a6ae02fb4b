// The llm workload's side of the KV and refresh policies each pass: what the policy kept (the
// kept-set sizes, AERP's x rows, the victims) into the pass, the refresh intervals of the KV held
// in eDRAM, a decode step's policy step, and the KV slots marked live in eDRAM when a step is not
// simulated.
#include "firmware/llm/llm_workload.h"

#include "firmware/llm/recompute_plan.h"
#include "models/memory/refresh_control.h"

#include <algorithm>
#include <cmath>

namespace kelle {

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
    const double x_pairs = std::max(0.0, r.kept_pairs - r.kv_pairs) / m_model.cache_heads() / m_batch;
    p.victims[l] = static_cast<std::uint64_t>(std::llround(r.evicted_pairs));
    p.x_attended[l] = std::min<std::uint64_t>(p.kept_tokens[l], static_cast<std::uint64_t>(std::llround(x_pairs)));
    if (m_recompute) m_recompute->record(l, r, p.x_rows[l]);
  }
}

void llm_workload::apply_refresh() {
  for (unsigned l = 0; l < m_model.layers; ++l) {
    if (!m_plan->kv_touches_chip(l)) continue;
    const kv_layer_report r = m_policy ? m_policy->layer_total(l) : kv_layer_report{};
    const memory_plan::kv_layer& kv = m_plan->kv(l);
    const bool part = !kv.on_chip;
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

void llm_workload::begin_decode_step(pass_info& p, unsigned s) {
  p.prefill = false;
  p.rows = 1;
  p.kv_offset = m_context + s;
  p.kv_tokens = m_context + s + 1;
  p.step = s + 1;
  decode_step_policy(p);
}

void llm_workload::decode_step_policy(pass_info& p) {
  if (!m_policy) {
    if (m_refresh->temperature_aware()) apply_refresh();  // the sensor moved: new intervals
    return;
  }
  m_policy->decode();  // the new token arrives; heads evict, x tokens are decided
  apply_policy(p);
  apply_refresh();     // the score groups changed
}

void llm_workload::mark_context_chip_slots() {
  // A partly placed layer's context goes to DRAM in the prefill (one projection writes all of
  // it); its first slots are copied to chip as the prefill ends, where decode reads them.
  const unsigned l = m_plan->kv_partial_layer();
  if (l >= m_model.layers || !m_ops->chip_slots(l)) return;
  const memory_plan::kv_layer& kv = m_plan->kv(l);
  const double share = static_cast<double>(std::min(m_context, kv.chip_tokens)) / static_cast<double>(kv.chip_tokens);
  for (const region* r : {&kv.k_chip, &kv.v_chip})
    mark_live(*r, static_cast<std::uint64_t>(share * static_cast<double>(r->bytes)));
}

void llm_workload::mark_kv_live(const pass_info& p) {
  for (unsigned l = 0; l < m_model.layers; ++l)
    for (bool v : {false, true}) {
      if (!m_plan->kv_touches_chip(l)) continue;
      const region r = m_ops->kv_slot(l, v, p);
      mark_live(r, r.bytes);
    }
}

void llm_workload::mark_live(const region& r, std::uint64_t bytes) const {
  std::uint64_t local = 0;
  if (refresh_control* e = refresh_of(r, local)) e->mark_live(local, bytes);
}

}  // namespace kelle
