// layer_ops (layer_ops.h): its set-up, the projections (weight tiles, prefetch, the stacked
// recompute rows), the SFU's row operations and the dense FFN. Beside it: layer_kv.cpp (the KV
// slots and the cache's writes), layer_lifetimes.cpp (activation buffers and their lifetimes),
// layer_arena.cpp (the arena recorder), layer_attention.cpp, layer_latent.cpp, layer_moe.cpp.
#include "firmware/schedulers/layer_ops.h"

#include "models/memory/refresh_control.h"

#include <algorithm>

namespace kelle {

layer_ops::layer_ops(driver& drv, memory_plan& plan, const model_shape& m, platform_view& p, stat_group& stats)
    : m_drv(drv),
      m_plan(plan),
      m_model(m),
      m_platform(p),
      m_arena_log(m.layers),
      m_arena_rules(m.layers),
      m_arena_log_step(m.layers, 0),
      m_stats(stats),
      m_kv_written(stats.counter("kv_bytes_written", "B", "KV bytes the projections wrote into the cache")) {
  drv.block("dma");  // a clear error if one is missing
  m_rsa = &drv.target_of("rsa");
  m_sfu = &drv.target_of("sfu");
  if (!m_rsa->block->systolic_array())
    throw config_error("the firmware needs a systolic array as block 'rsa' (system.compute.rsa.model: rsa)");
  for (compute_block* b : p.blocks())
    if (b->victim_select_heads()) m_evictor = &drv.target_of(b->basename());
  if (m.latent_kv())
    for (unsigned l = 0; l < m.layers; ++l) m_o_weights.push_back(plan.weights(l).o);
  if (m.moe()) {
    const char* phase[2] = {"decode", "prefill"};
    for (int i = 0; i < 2; ++i) {
      m_moe_experts[i] = &stats.counter(std::string("moe_experts_") + phase[i], "count",
                                        std::string("distinct routed experts streamed in the ") + phase[i] +
                                            ", summed over its MoE layer passes");
      m_moe_layers[i] = &stats.counter(std::string("moe_layers_") + phase[i], "count",
                                       std::string("MoE layer passes in the ") + phase[i]);
    }
  }
  if (plan.kv_stream_bytes())  // the stream releases every chunk it reads
    for (unsigned i = 0; i < 2; ++i) m_stream_edram = refresh_of(plan.kv_stream_buffer(i), m_stream_local[i]);
}

tile_load layer_ops::load_tile(std::uint64_t src, std::uint64_t bytes) {
  unsigned b = m_next_buffer;
  if (m_buffer_pending[b] && !m_buffer_pending[b ^ 1u]) b ^= 1u;  // keep a prefetched tile
  m_next_buffer = b ^ 1u;
  if (m_buffer_user[b].valid()) m_drv.wait(m_buffer_user[b]);  // the buffer's last reader
  m_buffer_src[b] = src;
  m_buffer_pending[b] = false;
  return tile_load{m_drv.dma(src, m_plan.weight_buffer(b).addr, bytes, traffic_class::weights), b};
}

std::uint64_t layer_ops::tile_cols(std::uint64_t k, std::uint64_t n) const {
  return tile_cols(m_plan.weight_buffer_bytes(), m_rsa->block->systolic_array()->cols, k, n);
}

std::uint64_t layer_ops::tile_cols(std::uint64_t buffer, unsigned cols, std::uint64_t k, std::uint64_t n) {
  // As many whole RSA column folds as fit one tile buffer.
  std::uint64_t t = buffer / k / cols * cols;
  if (t == 0) t = std::max<std::uint64_t>(1, buffer / k);
  return std::min(t, n);
}

std::uint64_t layer_ops::rows_of(std::uint64_t w, std::uint64_t k) const {
  if (m_o_weights.empty()) return k;
  const auto it = std::lower_bound(m_o_weights.begin(), m_o_weights.end(), w);
  return it != m_o_weights.end() && *it == w ? std::uint64_t(m_model.heads) * m_model.v_head_dim : k;
}

tile_load layer_ops::prefetch(std::uint64_t w, std::uint64_t k, std::uint64_t n) {
  k = rows_of(w, k);
  const tile_load t = load_tile(w, k * tile_cols(k, n));
  m_buffer_pending[t.buffer] = true;  // until the projection it is for consumes it
  return t;
}

ticket layer_ops::project(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                          std::uint64_t rows, tile_load first) {
  return project_rows(x, w, rows_of(w, k), n, y, rows, first, traffic_class::activations, 0, region{});
}

ticket layer_ops::project_rows(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                               std::uint64_t rows, tile_load first, traffic_class y_kind, std::uint64_t extra,
                               const region& stacked) {
  const std::uint64_t tn = tile_cols(k, n);
  const std::uint64_t tiles = (n + tn - 1) / tn;
  const bool kept = first.valid() && m_buffer_src[first.buffer] == w;  // not overwritten since
  if (first.valid()) m_buffer_pending[first.buffer] = false;  // consumed (or given up)
  tile_load cur = kept ? first : load_tile(w, k * std::min(tn, n));
  depend(x, m_rsa->block);
  ticket last;
  for (std::uint64_t i = 0; i < tiles; ++i) {
    const std::uint64_t ni = std::min(tn, n - i * tn);
    tile_load next;
    if (i + 1 < tiles) next = load_tile(w + (i + 1) * tn * k, k * std::min(tn, n - (i + 1) * tn));
    m_drv.wait(cur.dma);
    command g;
    g.op = opcode::gemm;
    g.m = static_cast<std::uint32_t>(rows);
    g.k = static_cast<std::uint32_t>(k);
    g.n = static_cast<std::uint32_t>(ni);
    g.addr_a = x.where.addr;
    g.addr_b = m_plan.weight_buffer(cur.buffer).addr;
    // Into the cache (class kv) the rows are in the KV format: a tile's rows of tn elements.
    const bool into_cache = y_kind == traffic_class::kv;
    g.addr_c = y.addr + (rows + extra) * i * (into_cache ? m_model.kv.row_bytes(tn) : tn * model_shape::act_bytes);
    set_operand_class(g, operand_a, traffic_class::activations);
    set_operand_class(g, operand_b, traffic_class::weights);
    set_operand_class(g, operand_c, y_kind);
    if (into_cache) g.flags |= m_model.kv.command_bits();
    if (extra) {  // AERP: the stored x vectors stream through the array under the new rows
      g.extra = static_cast<std::uint32_t>(extra);
      g.addr_d = stacked.addr;
      set_operand_class(g, operand_d, traffic_class::kv);  // AERP's x store (KV traffic)
    }
    if (m_fn) m_fn->gemm(g, w, i * tn);
    last = m_drv.submit(*m_rsa, g);
    m_buffer_user[cur.buffer] = last;
    cur = next;
  }
  return last;
}

ticket layer_ops::sfu_as(traffic_class kind, opcode op, const tensor& in, std::uint64_t rows, std::uint64_t len,
                         const region& out, const tensor* second) {
  depend(in, m_sfu->block);
  if (second) depend(*second, m_sfu->block);
  command c;
  c.op = op;
  c.m = static_cast<std::uint32_t>(rows);
  c.k = static_cast<std::uint32_t>(len);
  c.addr_a = in.where.addr;
  c.addr_b = second ? second->where.addr : in.where.addr;
  c.addr_c = out.addr;
  set_operand_class(c, operand_a, kind);
  // c.addr_b without `second`: the table or norm weights, read where `in` is, as `kind`.
  set_operand_class(c, operand_b, second ? traffic_class::activations : kind);
  set_operand_class(c, operand_c, kind);
  if (m_fn) m_fn->sfu(c, in.where);
  return m_drv.submit(*m_sfu, c);
}

tile_load layer_ops::prefetch_ffn(unsigned layer) {
  const auto& w = m_plan.weights(layer);
  if (m_model.moe_layer(layer)) return prefetch(w.router, m_model.hidden, m_model.experts);
  return prefetch(m_model.gated_ffn() ? w.gate : w.up, m_model.hidden, m_model.ffn);
}

void layer_ops::ffn(tensor& x, unsigned layer, std::uint64_t rows, bool overlap, tile_load first) {
  if (m_model.moe_layer(layer)) return moe_ffn(x, layer, rows, overlap, first);
  const auto& w = m_plan.weights(layer);
  const std::uint64_t C = m_model.hidden, F = m_model.ffn, ab = model_shape::act_bytes;
  auto step = [&](const ticket& t) {
    if (!overlap) m_drv.wait(t);
  };
  auto next_weights = [&](std::uint64_t addr, std::uint64_t k, std::uint64_t n) {
    return overlap ? prefetch(addr, k, n) : tile_load{};
  };
  tensor xn = produce("xn", rows * C * ab);
  produced(xn, sfu(norm(), x, rows, C, xn.where));
  step(xn.producer);
  tensor h = produce("ffn", rows * F * ab);
  tensor out = produce("o", rows * C * ab);
  tile_load next;
  if (m_model.gated_ffn()) {  // SwiGLU, or GeGLU (Gemma): the SFU's GeLU on the gate
    tensor up = produce("ffn", rows * F * ab);
    produced(h, project(xn, w.gate, C, F, h.where, rows, first));
    next = next_weights(w.up, C, F);
    step(h.producer);
    h.producer = sfu(m_model.ffn_type == ffn_kind::gated_gelu ? opcode::gelu : opcode::silu, h, rows, F, h.where);
    produced(up, project(xn, w.up, C, F, up.where, rows, next));
    last_use(xn, up.producer);
    next = next_weights(w.down, F, C);
    step(up.producer);
    const ticket mul = sfu(opcode::mul, h, rows, F, h.where, &up);
    last_use(up, mul);
    h.producer = mul;
  } else {
    produced(h, project(xn, w.up, C, F, h.where, rows, first));
    last_use(xn, h.producer);
    next = next_weights(w.down, F, C);
    step(h.producer);
    // ReLU (OPT) is costed as the SFU's LUT activation (GeLU).
    h.producer = sfu(opcode::gelu, h, rows, F, h.where);
  }
  step(h.producer);
  produced(out, project(h, w.down, F, C, out.where, rows, next));
  last_use(h, out.producer);
  step(out.producer);
  const ticket add = sfu(opcode::add, x, rows, C, x.where, &out);
  last_use(out, add);
  x.producer = add;
}

}  // namespace kelle
