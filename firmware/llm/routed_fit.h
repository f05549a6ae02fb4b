// Sampled decode of a mixture-of-experts model (docs/firmware.md, "Sampled decode"): what one
// more routed expert adds to a decode layer (its time and every counter), fitted over the
// detailed layers' routed experts as least squares of what they added against how many they were
// (a layer's experts share the batch's rows whatever the routing, so the work per row is in the
// intercept, not in the slope). A layer or step that is not simulated routes to its own experts
// (the routing is known without simulating): its time and counters are the sample's plus (its
// routed experts - the sample's) x this slope.
// The lifetimes of the buffers alive across the routed experts grow with them: those made in the
// layer (the FFN's input and output, the router's choice) in the slope; those from before the
// layer (the residual stream, which a skipped layer's time stretches as it passes) by kind
// (outer()), for skipped steps.
// layer_ops tells it when a layer's routed experts begin and end (layer_ops::expert_probe); the
// llm workload tells it when a decode layer begins and asks it the slope.
#pragma once

#include "firmware/schedulers/layer_ops.h"
#include "platform/stats/stats.h"

#include <cstddef>
#include <vector>

namespace kelle {

class routed_fit final : public layer_ops::expert_probe {
 public:
  explicit routed_fit(const layer_ops& ops) : m_ops(ops) {}

  // A decode layer begins: the buffers alive now are from before it.
  void layer_begins() { m_ops.alive(m_layer_alive); }
  // The fit: the time and the counters' values per routed expert.
  double slope_dt() const { return m_slope_dt; }
  const counter_snapshot& slope() const { return m_slope; }
  // Of the buffers from before the last fitted layer, those alive across its routed experts, by
  // lifetime kind.
  const std::vector<unsigned>& outer() const { return m_outer; }

  void routed_begin(std::size_t experts) override;
  void routed_end() override;

 private:
  // Adds a sample: `x` routed experts added `dt` and `d`.
  void add(double x, double dt, const counter_snapshot& d);

  const layer_ops& m_ops;
  double m_n = 0, m_sx = 0, m_sxx = 0, m_st = 0, m_sxt = 0;  // samples, sums of x, x^2, dt, x dt
  counter_snapshot m_sd, m_sxd;                              // sums of d and of x d, per counter
  double m_slope_dt = 0;
  counter_snapshot m_slope;
  std::vector<unsigned> m_outer;
  counter_snapshot m_before;
  layer_ops::alive_set m_layer_alive;   // the buffers alive when the layer began
  layer_ops::alive_set m_routed_alive;  // the buffers alive when the routed experts began
  std::vector<unsigned> m_across;       // scratch: of those, alive when they ended, by kind
  double m_t0 = 0, m_experts = 0;
};

}  // namespace kelle
