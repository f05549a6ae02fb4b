#include "firmware/schedulers/layer_ops.h"

#include "firmware/policies/refresh/lifetime_rule.h"
#include "models/memory/refresh_control.h"
#include "platform/support/hash.h"

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

region layer_ops::kv_slot(unsigned layer, bool v, const pass_info& pass) const {
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  const std::uint64_t per_token = m_model.kv_bytes_per_token_layer() / 2;  // K or V, in the KV format
  // A new token takes an evicted slot once the cache is full (policies overwrite in place); a
  // windowed layer's token t takes slot t mod W (its slots are a ring).
  const std::uint64_t slot = pass.kv_offset % kv.slots;
  // A banded prefill (more context than the window) fills the whole ring with its last W tokens.
  const std::uint64_t rows = pass.banded(layer) ? kv.slots : pass.rows;
  // Slots below chip_tokens of a partly placed layer are on chip (a range that straddles the
  // boundary, a prefill's, is written to DRAM; docs/firmware.md).
  const bool chip = chip_slots(layer) && slot + rows <= kv.chip_tokens;
  region r = chip ? (v ? kv.v_chip : kv.k_chip) : (v ? kv.v : kv.k);
  r.addr += slot * per_token * pass.batch;
  r.bytes = pass.batch * rows * per_token;
  return r;
}

ticket layer_ops::append_kv(const tensor& xn, unsigned layer, bool v, const pass_info& pass, tile_load first) {
  const auto& w = m_plan.weights(layer);
  const region slot = kv_slot(layer, v, pass);
  const std::uint64_t kv = m_model.kv_half_width(), rows = std::uint64_t(pass.batch) * pass.rows;
  // The prefill computes every token's K and V anyway: nothing to recompute.
  const std::uint64_t S = pass.prefill ? 0 : pass.recompute_rows(layer);
  if (m_stage.layer != layer) copy_new_rows();  // a previous layer's, if its attention did not run
  if (pass.banded(layer)) {
    // The prefill of a windowed layer with more context than its window: every context token's
    // K and V go to a staging buffer (activations), which the band attention reads; the last W
    // tokens are then copied into the ring (copy_new_rows), the earlier ones are gone.
    if (m_stage.layer != layer) {
      m_stage = staging{};
      m_stage.layer = layer;
    }
    m_stage.rows = rows;
    m_stage.stacked = 0;
    tensor& buf = m_stage.buf[v];
    buf = produce(v ? "v_band" : "k_band", rows * kv * model_shape::act_bytes);
    const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, buf.where, rows, first,
                                  traffic_class::activations, 0, region{});
    produced(buf, t);
    m_stage.slot[v] = slot;
    m_stage.from[v] = buf.where.bytes - std::min(buf.where.bytes, slot.bytes);  // the last W tokens
    m_stage.ready[v] = t;
    m_stage.copy_pending[v] = true;
    return t;
  }
  if (S == 0) {
    absent(size_rule::staging);  // where a pass that recomputes would put its staging buffer
    const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, slot, rows, first, traffic_class::kv, 0,
                                  region{});
    m_kv_written += static_cast<double>(slot.bytes);
    if (v) m_latent_v = t;  // latent KV: the RoPE key is in this half
    return t;
  }
  // AERP: [new rows; recomputed rows] into the staging buffer, weights streamed once.
  if (m_stage.layer != layer) {
    m_stage = staging{};
    m_stage.layer = layer;
  }
  m_stage.rows = rows;
  m_stage.stacked = S;
  tensor& buf = m_stage.buf[v];
  buf = produce(v ? "v_recomputed" : "k_recomputed", staging_bytes(pass, layer), size_rule::staging);
  const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, buf.where, rows, first, traffic_class::activations,
                                S, x_store(layer, S));
  produced(buf, t);
  m_stage.slot[v] = slot;
  m_stage.from[v] = 0;
  m_stage.ready[v] = t;
  m_stage.copy_pending[v] = true;
  return t;
}

ticket layer_ops::rope_k(unsigned layer, const pass_info& pass, const ticket& k) {
  const std::uint64_t rows = std::uint64_t(pass.batch) * pass.rows;
  if (m_model.latent_kv()) {
    // The RoPE key: the last qk_rope_dim elements of each new latent row, which MM_v (W_kv_a's
    // second half of columns) wrote into the cache's V half.
    const std::uint64_t dr = m_model.qk_rope_dim, ab = model_shape::act_bytes;
    tensor in{kv_slot(layer, true, pass), m_latent_v, -1, "k"};
    in.where.addr += in.where.bytes - std::min(in.where.bytes, rows * dr * ab);
    in.where.bytes = std::min(in.where.bytes, rows * dr * ab);
    return sfu_as(traffic_class::kv, opcode::rope, in, rows, dr, in.where);
  }
  const bool staged = m_stage.layer == layer && m_stage.copy_pending[0];
  // The new rows' and, staged, the recomputed rows' keys (positions from the firmware's tables).
  tensor in{staged ? m_stage.buf[0].where : kv_slot(layer, false, pass), k, -1, "k"};
  const std::uint64_t n = staged ? rows + m_stage.stacked : rows;
  if (staged) in.where.bytes = n * m_model.kv_heads * m_model.head_dim * model_shape::act_bytes;
  // The SFU reads and writes 16-bit elements. In a cache of an integer KV format the new keys'
  // RoPE is costed as 16-bit reads and writes of their rows (a quantising design rotates before
  // it quantises; docs/policies/kv-format.md): kept inside the layer's region.
  const std::uint64_t sfu_bytes = n * m_model.kv_heads * m_model.head_dim * model_shape::act_bytes;
  if (!staged && sfu_bytes > in.where.bytes) {
    const memory_plan::kv_layer& kv = m_plan.kv(layer);
    const region& whole = in.where.addr >= kv.k.addr && in.where.addr < kv.k.addr + kv.k.bytes ? kv.k : kv.k_chip;
    in.where.addr = std::max(whole.addr, std::min(in.where.addr, whole.addr + whole.bytes - std::min(whole.bytes, sfu_bytes)));
    in.where.bytes = sfu_bytes;
  }
  // Keys in the cache are KV traffic; the staging buffer is an activation buffer.
  const ticket t = sfu_as(staged ? traffic_class::activations : traffic_class::kv, opcode::rope, in,
                          n * m_model.kv_heads, m_model.head_dim, in.where);
  if (staged) m_stage.ready[0] = t;
  return t;
}

region layer_ops::x_store(unsigned layer, std::uint64_t rows) const {
  // x of a token replaces its K and V. Timing addresses model which memory and banks are
  // touched, not a slot map: the x vectors are placed at the end of the layer's allocation (V,
  // then K before it). A token keeps the x format until every head has evicted it, so the x
  // store can outgrow the layer's slots; what does not fit them is in DRAM, at the end of the
  // spare DRAM (activation spills grow from its start).
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  region r = kv.v;
  r.bytes = rows * m_model.hidden * model_shape::act_bytes;
  if (x_store_in_slots(layer, rows)) {
    r.addr = kv.v.addr + kv.v.bytes - r.bytes;
    return r;
  }
  const region& spare = m_plan.dram_spare();
  if (r.bytes > spare.bytes)
    throw std::runtime_error("AERP: the " + std::to_string(rows) + " x vectors of layer " + std::to_string(layer) +
                             " do not fit in " + spare.memory + " (" + std::to_string(spare.bytes >> 20) +
                             " MiB left after weights and KV)");
  r = spare;
  r.addr = spare.addr + spare.bytes - rows * m_model.hidden * model_shape::act_bytes;
  r.bytes = rows * m_model.hidden * model_shape::act_bytes;
  return r;
}

bool layer_ops::x_store_in_slots(unsigned layer, std::uint64_t rows) const {
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  return rows * m_model.hidden * model_shape::act_bytes <= kv.v.addr + kv.v.bytes - kv.k.addr;
}

void layer_ops::finish_pass() { copy_new_rows(); }

void layer_ops::copy_new_rows() {
  for (unsigned v = 0; v < 2; ++v) {
    if (!m_stage.copy_pending[v]) continue;
    m_stage.copy_pending[v] = false;
    const region& slot = m_stage.slot[v];
    m_drv.wait(m_stage.ready[v]);  // K roped, V projected
    if (m_fn) m_fn->copy_new_rows(m_stage.layer, v);
    m_drv.dma(m_stage.buf[v].where.addr + m_stage.from[v], slot.addr, slot.bytes, traffic_class::activations,
              traffic_class::kv);
    m_kv_written += static_cast<double>(slot.bytes);
  }
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

tensor layer_ops::produce(const std::string& kind, std::uint64_t bytes) {
  return produce(kind, bytes, size_rule::fixed);
}

tensor layer_ops::produce(const std::string& kind, std::uint64_t bytes, size_rule rule) {
  tensor t;
  if (m_recording != ~0u) m_arena_rules[m_recording].push_back(rule);
  t.where = m_plan.alloc(bytes);
  t.kind = kind;
  if (m_transient) {  // its fields' refresh, before it is written
    std::uint64_t local = 0;
    if (refresh_control* e = refresh_of(t.where, local)) m_transient->placed(*e, local, bytes);
  }
  return t;
}

unsigned layer_ops::kind_index(const std::string& kind) {
  for (unsigned i = 0; i < m_life_kinds.size(); ++i)
    if (m_life_kinds[i].name == kind) return i;
  m_life_kinds.push_back(lifetime_kind{
      kind, &m_stats.counter("lifetime_" + kind + "_count", "count", "activation buffers of kind " + kind + " that died"),
      &m_stats.counter("lifetime_" + kind + "_s", "s", "their lifetimes, summed (producer done to last consumer done)")});
  return static_cast<unsigned>(m_life_kinds.size() - 1);
}

void layer_ops::produced(tensor& t, const ticket& producer) {
  t.producer = producer;
  int i;
  if (m_free_open.empty()) {
    i = static_cast<int>(m_open.size());
    m_open.emplace_back();
  } else {
    i = m_free_open.back();
    m_free_open.pop_back();
  }
  t.lifetime = i;
  open_life& o = m_open[static_cast<std::size_t>(i)];
  o.kind = kind_index(t.kind);
  o.start = sc_core::SC_ZERO_TIME;
  o.record = -1;
  const std::uint32_t gen = ++o.gen;
  if (m_records) {
    o.record = static_cast<int>(m_records->size());
    m_records->push_back(lifetime_record{t.kind, sc_core::SC_ZERO_TIME, sc_core::SC_ZERO_TIME, true});
  }
  m_drv.after(producer, [this, i, gen] {
    open_life& s = m_open[static_cast<std::size_t>(i)];
    if (s.gen == gen) s.start = sc_core::sc_time_stamp();
  });
}

void layer_ops::alive(alive_set& out) const {
  out.clear();
  for (std::size_t i = 0; i < m_open.size(); ++i)
    if (m_open[i].gen & 1u) out.emplace_back(i, m_open[i].gen);
}

void layer_ops::still_alive(const alive_set& then, std::vector<unsigned>& by_kind) const {
  by_kind.assign(m_life_kinds.size(), 0);
  for (const auto& [i, gen] : then)
    if (m_open[i].gen == gen) ++by_kind[m_open[i].kind];
}

void layer_ops::last_use(tensor& t, const ticket& consumer) {
  const int i = t.lifetime;
  const std::uint32_t gen = i >= 0 ? m_open[static_cast<std::size_t>(i)].gen : 0;
  std::uint64_t local = 0;
  refresh_control* e = refresh_of(t.where, local);
  const std::uint64_t bytes = t.where.bytes;
  std::vector<lifetime_record>* records = m_records;
  m_drv.after(consumer, [this, i, gen, e, local, bytes, records] {
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (i >= 0 && m_open[static_cast<std::size_t>(i)].gen == gen) {
      open_life& slot = m_open[static_cast<std::size_t>(i)];
      const open_life o = slot;
      ++slot.gen;  // closed: a second last_use of a copy of the tensor is ignored
      m_free_open.push_back(i);
      const double life = (now - o.start).to_seconds();
      lifetime_kind& k = m_life_kinds[o.kind];
      *k.count += 1;
      *k.total_s += life;
      k.max_s = std::max(k.max_s, life);
      if (records && o.record >= 0) {
        lifetime_record& r = (*records)[static_cast<std::size_t>(o.record)];
        r.start = o.start;
        r.end = now;
        r.open = false;
      }
      if (m_transient && e)  // the lifetime rule: its unrefreshed fields' refresh or failures
        m_transient->released(*e, bytes, life);
    }
    if (e) e->release(local, bytes);  // dead data is no longer refreshed
  });
}

void layer_ops::depend(const tensor& t, const compute_block* block) {
  if (t.producer.valid() && t.producer.block != block) m_drv.wait(t.producer);
}

void layer_ops::absent(size_rule rule) {
  if (m_recording != ~0u) m_arena_rules[m_recording].push_back(rule);
  m_plan.alloc(0);  // no bytes: in the arena, taking nothing
}

void layer_ops::begin_layer(const pass_info& pass, unsigned layer) {
  if (pass.prefill) return;
  m_arena_log_step[layer] = pass.step;
  m_arena_rules[layer].clear();
  m_recording = layer;
  m_plan.act().record(&m_arena_log[layer]);
}

void layer_ops::end_layer() {
  m_recording = ~0u;
  m_plan.act().record(nullptr);
}

std::uint64_t layer_ops::size_in(size_rule rule, std::uint64_t logged, const pass_info& pass, unsigned layer,
                                 std::uint64_t arena_free, std::uint64_t& heads) const {
  switch (rule) {
    case size_rule::fixed:
      return logged;
    case size_rule::scores_first:
      heads = score_heads(pass, layer, arena_free);
      [[fallthrough]];
    case size_rule::scores_second:
      return score_bytes(pass, layer, heads);
    case size_rule::staging:  // none in a pass in which the layer does not recompute
      return pass.recompute_rows(layer) ? staging_bytes(pass, layer) : 0;
    case size_rule::victims:  // none in a pass in which the layer does not evict
      return pass.evicts(layer) ? victims_bytes(pass) : 0;
  }
  return logged;
}

std::uint64_t layer_ops::placement(const pass_info& pass, unsigned layer) const {
  return predict(pass, layer, nullptr);
}

bool layer_ops::replays_as_run(const pass_info& pass, unsigned layer) const {
  if (m_arena_log[layer].empty() || m_arena_log_step[layer] != pass.step) return true;
  bool as_run = true;
  predict(pass, layer, &as_run);
  return as_run;
}

std::uint64_t layer_ops::predict(const pass_info& pass, unsigned layer, bool* as_run) const {
  const activation_arena::log& log = m_arena_log[layer];
  if (log.empty()) return 0;
  const std::vector<size_rule>& rules = m_arena_rules[layer];
  std::uint64_t heads = 0, h = splitmix64(layer + 1);
  m_plan.act().predict(
      log,
      [&](std::size_t k, const activation_arena::event& e, std::uint64_t free) {
        return size_in(k < rules.size() ? rules[k] : size_rule::fixed, e.bytes, pass, layer, free, heads);
      },
      [&](std::size_t, std::uint64_t bytes, bool fits, const activation_arena::event& e) {
        if (as_run && (bytes != e.bytes || fits != e.in_arena)) *as_run = false;
        h = splitmix64(h ^ (fits ? 1u : 2u) ^ heads << 2);
      });
  return h;
}

}  // namespace kelle
