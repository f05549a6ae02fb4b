#include "firmware/llm/recompute_plan.h"

#include "models/compute/compute_block.h"
#include "models/memory/memory_target.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kelle {

namespace {
memory_target& memory_of(platform_view& p, const std::string& name) {
  memory_target* m = p.memory(name);
  if (!m) throw std::logic_error("recompute plan: no memory '" + name + "'");
  return *m;
}
}  // namespace

recompute_plan::recompute_plan(kv_policy& policy, const model_shape& m, unsigned batch, const memory_plan& plan,
                               const layer_ops& ops, platform_view& platform)
    : m_pair_bytes(2.0 * double(m.kv_row_bytes())) {
  using mode = kv_policy::recompute_request::mode;
  const kv_policy::recompute_request req = policy.recompute_budget();
  m_mode = req.kind == mode::automatic ? "auto" : req.kind == mode::all ? "all" : req.kind == mode::none ? "none" : "fixed";
  m_fixed = req.tokens;

  recompute_hw hw;
  compute_block* rsa = platform.block("rsa");
  const compute_block::array_params* arr = rsa ? rsa->systolic_array() : nullptr;
  if (!arr) throw std::logic_error("recompute plan: the system has no systolic array 'rsa'");
  hw.array_rows = arr->rows;
  hw.array_cols = arr->cols;
  hw.fill_cycles = arr->fill_cycles;
  hw.double_buffered = arr->double_buffered;
  hw.clock_Hz = rsa->clock_Hz();
  hw.mac_J = arr->mac_J;
  hw.idle_pe_J = arr->idle_pe_J;
  hw.weight_stream_Bps = memory_of(platform, plan.dram()).peak_bandwidth_Bps();
  hw.tile_read_Bps = memory_of(platform, plan.weight_buffer(0).memory).peak_bandwidth_Bps();
  hw.hidden = m.hidden;
  hw.kv_dim = std::uint64_t(m.kv_heads) * m.head_dim;
  hw.q_dim = std::uint64_t(m.heads) * m.head_dim;
  hw.tile_cols = ops.tile_cols(m.hidden, hw.kv_dim);
  const memory_target& arena = memory_of(platform, plan.arena().memory);
  hw.arena_bytes = static_cast<double>(plan.arena().bytes);
  hw.arena_Bps = arena.peak_bandwidth_Bps();
  hw.arena_access_J_per_byte = arena.read_energy_J_per_byte();
  hw.batch = batch;
  hw.x_bytes = static_cast<double>(m.x_bytes_per_token());
  hw.kv_bytes = static_cast<double>(m.kv_bytes_per_token_layer());

  kv_policy::recompute_limits lim;
  m_layers.resize(m.layers);
  for (unsigned l = 0; l < m.layers; ++l) {
    layer& L = m_layers[l];
    // x vectors are stored with the layer's cache (layer_ops::x_store): its V region's memory.
    L.store = plan.kv(l).v.memory;
    const memory_target& st = memory_of(platform, L.store);
    recompute_store s;
    s.weight_memory = L.store == plan.dram();
    s.bandwidth_Bps = st.peak_bandwidth_Bps();
    s.read_J_per_byte = st.read_energy_J_per_byte();
    L.budget = decide_recompute(hw, s);
    if (req.kind == mode::automatic) continue;
    L.budget.max_x_tokens = req.kind == mode::all ? no_x_limit : req.kind == mode::none ? 0 : req.tokens;
    L.budget.min_saved_bytes = 0;  // the popularity rule alone
  }
  if (req.kind == mode::all) return;  // no limits: the policy as the spec states it
  for (const layer& L : m_layers) {
    lim.max_x_tokens.push_back(L.budget.max_x_tokens);
    lim.min_saved_bytes.push_back(L.budget.min_saved_bytes);
  }
  policy.set_recompute_limits(lim);
}

void recompute_plan::record(unsigned l, const kv_layer_report& r, std::uint64_t stacked) {
  layer& L = m_layers[l];
  const double rows = static_cast<double>(stacked);
  L.rows += rows;
  L.x_tokens = r.x_tokens;
  L.kv_bytes_saved += std::max(0.0, r.kept_pairs - r.kv_pairs) * m_pair_bytes - r.x_bytes;
  L.cycles_added += std::max(0.0, rows - L.budget.free_rows_array) * L.budget.cycles_per_row_beyond;
}

nlohmann::json recompute_plan::results() const {
  nlohmann::json layers = nlohmann::json::array();
  double rows = 0, x = 0, saved = 0, cycles = 0;
  for (unsigned l = 0; l < m_layers.size(); ++l) {
    const layer& L = m_layers[l];
    const recompute_layer_budget& b = L.budget;
    rows += L.rows;
    x += L.x_tokens;
    saved += L.kv_bytes_saved;
    cycles += L.cycles_added;
    layers.push_back({{"layer", l},
                      {"store", L.store},
                      {"max_x_tokens_per_sequence",
                       b.max_x_tokens == no_x_limit ? nlohmann::json(nullptr) : nlohmann::json(b.max_x_tokens)},
                      {"min_saved_bytes", std::isfinite(b.min_saved_bytes) ? nlohmann::json(b.min_saved_bytes)
                                                                           : nlohmann::json(nullptr)},
                      {"fold_period_cycles", b.fold_period_cycles},
                      {"fold_busy_cycles", b.fold_busy_cycles},
                      {"free_rows_array", b.free_rows_array},
                      {"free_rows_port", b.free_rows_port},
                      {"free_rows_staging", b.free_rows_staging},
                      {"free_rows", b.free_rows},
                      {"energy_per_row_J", b.energy_per_row_J},
                      {"saving_per_byte_J", b.saving_per_byte_J},
                      {"rows_recomputed", L.rows},
                      {"x_tokens", L.x_tokens},
                      {"kv_bytes_saved", L.kv_bytes_saved},
                      {"cycles_added", L.cycles_added}});
  }
  return {{"mode", m_mode},
          {"fixed_tokens", m_mode == "fixed" ? nlohmann::json(m_fixed) : nlohmann::json(nullptr)},
          {"rows_recomputed", rows},
          {"x_tokens", x},
          {"kv_bytes_saved", saved},
          {"cycles_added", cycles},
          {"layers", layers}};
}

std::string recompute_plan::summary() const {
  double rows = 0, saved = 0, cycles = 0, budget = 0;
  unsigned unlimited = 0;
  for (const layer& L : m_layers) {
    rows += L.rows;
    saved += L.kv_bytes_saved;
    cycles += L.cycles_added;
    if (L.budget.max_x_tokens == no_x_limit) {
      ++unlimited;
    } else {
      budget += static_cast<double>(L.budget.max_x_tokens);
    }
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: %s%.4g x tokens per sequence over the layers; %.4g rows recomputed, %.4g B of K, V saved, "
                "%.4g array cycles added (model)",
                m_mode.c_str(), unlimited ? "unlimited in some layers, " : "", budget, rows, saved, cycles);
  return buf;
}

}  // namespace kelle
