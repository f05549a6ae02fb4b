#include "firmware/llm/pass_trace.h"

#include "platform/config/config.h"
#include "platform/trace/timeline.h"

#include <algorithm>

namespace kelle {

void pass_trace::attach(unsigned layers, unsigned first_pass, unsigned last_pass) {
  timeline& tl = timeline::get();
  if (!timeline::open()) return;
  const auto& o = tl.options();
  if (o.last_step < first_pass || o.first_step > last_pass)
    throw config_error("--timeline-steps " + std::to_string(o.first_step) + ":" + std::to_string(o.last_step) +
                       ": the run has passes " + std::to_string(first_pass) + ":" + std::to_string(last_pass) +
                       " (0 the prefill, N decode step N); nothing would be recorded");
  if (tl.options().layer >= layers)
    throw config_error("--timeline-layer " + std::to_string(tl.options().layer) + ": expected a layer in [0, " +
                       std::to_string(layers - 1) + "] (the model has " + std::to_string(layers) + " layers)");
  tl.claim_window();
}

pass_trace::pass_trace(const pass_info& p, layer_ops& ops)
    : m_ops(ops),
      m_on(timeline::get().wants_pass(p.prefill ? 0 : p.step)),
      m_step(p.prefill ? 0 : p.step),
      m_prefill(p.prefill),
      m_start(sc_core::sc_time_stamp()) {
  if (m_on) timeline::get().set_window_active(true);
}

void pass_trace::layer_begin(unsigned layer) {
  if (!m_on) return;
  m_layer_start = sc_core::sc_time_stamp();
  if (layer == timeline::get().options().layer) m_ops.record_lifetimes(&m_life);
}

void pass_trace::layer_end(unsigned layer) {
  if (!m_on) return;
  timeline& tl = timeline::get();
  if (layer == tl.options().layer) m_ops.record_lifetimes(nullptr);
  tl.complete(tl.thread("firmware", "layers"), "layer " + std::to_string(layer), m_layer_start,
              sc_core::sc_time_stamp(), "\"layer\":" + std::to_string(layer) + ",\"step\":" + std::to_string(m_step));
}

void pass_trace::end() {
  if (!m_on) return;
  timeline& tl = timeline::get();
  const std::string process = "lifetimes (layer " + std::to_string(tl.options().layer) + ")";
  std::vector<const lifetime_record*> life;
  for (const lifetime_record& l : m_life)
    if (!l.open) life.push_back(&l);
  std::stable_sort(life.begin(), life.end(),
                   [](const lifetime_record* a, const lifetime_record* b) { return a->start < b->start; });
  for (const lifetime_record* l : life)
    tl.complete(tl.lane(process, l->kind, l->start, l->end), l->kind, l->start, l->end,
                "\"step\":" + std::to_string(m_step) + ",\"lifetime_us\":" + std::to_string((l->end - l->start).to_seconds() * 1e6));
  tl.complete(tl.thread("firmware", "passes"), m_prefill ? "prefill" : "decode step " + std::to_string(m_step),
              m_start, sc_core::sc_time_stamp(), "\"step\":" + std::to_string(m_step));
  tl.set_window_active(false);
}

}  // namespace kelle
