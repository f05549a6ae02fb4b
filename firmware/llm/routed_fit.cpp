// The routed-expert fit of sampled decode (routed_fit.h): the samples layer_ops' probe takes of
// each detailed MoE layer's routed experts, and their least squares.
#include "firmware/llm/routed_fit.h"

#include <systemc>

#include <algorithm>

namespace kelle {

void routed_fit::add(double x, double dt, const counter_snapshot& d) {
  // The sums in d's layout (counters only ever appear: the earlier sums' are a subsequence).
  m_sd.values = align(m_sd, d);
  m_sxd.values = align(m_sxd, d);
  m_sd.stats = m_sxd.stats = d.stats;
  for (std::size_t i = 0; i < d.values.size(); ++i) {
    m_sd.values[i] += d.values[i];
    m_sxd.values[i] += x * d.values[i];
  }
  m_n += 1;
  m_sx += x;
  m_sxx += x * x;
  m_st += dt;
  m_sxt += x * dt;
  // Least squares; until the samples' expert counts differ, what they added over how many
  // (proportional).
  const double n = m_n, sx = m_sx, var = n * m_sxx - sx * sx;
  const bool fit = n >= 2 && var > 1e-9 * m_sxx * n;
  auto solve = [&](double sy, double sxy) { return fit ? (n * sxy - sx * sy) / var : (sx > 0 ? sy / sx : 0.0); };
  m_slope_dt = solve(m_st, m_sxt);
  m_slope.stats = d.stats;
  m_slope.values.resize(d.values.size());
  for (std::size_t i = 0; i < d.values.size(); ++i) m_slope.values[i] = solve(m_sd.values[i], m_sxd.values[i]);
}

void routed_fit::routed_begin(std::size_t experts) {
  m_before = snapshot_counters();
  m_ops.alive(m_routed_alive);
  m_t0 = sc_core::sc_time_stamp().to_seconds();
  m_experts = static_cast<double>(experts);
}

void routed_fit::routed_end() {
  const double dt = sc_core::sc_time_stamp().to_seconds() - m_t0;
  counter_snapshot d = counter_delta(m_before, snapshot_counters());
  // The buffers made in the layer and alive across the routed experts: their lifetimes, counted
  // when they die after this, grew by its time.
  const std::vector<lifetime_kind>& kinds = m_ops.lifetimes();
  m_ops.still_alive(m_layer_alive, m_outer);
  m_ops.still_alive(m_routed_alive, m_across);
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    const unsigned inner = m_across[k] - std::min(m_across[k], m_outer[k]);
    if (!inner) continue;
    const auto at = std::find(d.stats.begin(), d.stats.end(), kinds[k].total_s);
    if (at != d.stats.end()) d.values[static_cast<std::size_t>(at - d.stats.begin())] += inner * dt;
  }
  add(m_experts, dt, d);
}

}  // namespace kelle
