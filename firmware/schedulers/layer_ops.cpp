#include "firmware/schedulers/layer_ops.h"

#include "models/memory/refresh_control.h"

#include <algorithm>

namespace kelle {

layer_ops::layer_ops(driver& drv, memory_plan& plan, const model_shape& m, platform_view& p)
    : m_drv(drv), m_plan(plan), m_model(m), m_platform(p) {
  drv.block("dma");  // a clear error if one is missing
  m_rsa = &drv.target_of("rsa");
  m_sfu = &drv.target_of("sfu");
  if (!m_rsa->block->systolic_array())
    throw config_error("the firmware needs a systolic array as block 'rsa' (system.compute.rsa.model: rsa)");
  for (compute_block* b : p.blocks())
    if (b->victim_select_heads()) m_evictor = &drv.target_of(b->basename());
  if (plan.kv_stream_bytes())  // the stream releases every chunk it reads
    for (unsigned i = 0; i < 2; ++i) m_stream_edram = refresh_of(plan.kv_stream_buffer(i), m_stream_local[i]);
}

void layer_ops::count(const region& r, std::uint64_t bytes, double traffic::*kind) {
  if (!r.on_chip) m_dram_traffic.*kind += static_cast<double>(bytes);
}

tile_load layer_ops::load_tile(std::uint64_t src, std::uint64_t bytes) {
  const unsigned b = m_next_buffer;
  m_next_buffer ^= 1u;
  if (m_buffer_user[b].valid()) m_drv.wait(m_buffer_user[b]);  // the buffer's last reader
  m_dram_traffic.weights += static_cast<double>(bytes);
  return tile_load{m_drv.dma(src, m_plan.weight_buffer(b).addr, bytes), b};
}

std::uint64_t layer_ops::tile_cols(std::uint64_t k, std::uint64_t n) const {
  // As many whole RSA column folds as fit one tile buffer.
  const unsigned cols = m_rsa->block->systolic_array()->cols;
  const std::uint64_t buffer = m_plan.weight_buffer_bytes();
  std::uint64_t t = buffer / k / cols * cols;
  if (t == 0) t = std::max<std::uint64_t>(1, buffer / k);
  return std::min(t, n);
}

tile_load layer_ops::prefetch(std::uint64_t w, std::uint64_t k, std::uint64_t n) {
  return load_tile(w, k * tile_cols(k, n));
}

ticket layer_ops::project(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                          std::uint64_t rows, tile_load first, double traffic::*y_kind) {
  return project_rows(x, w, k, n, y, rows, first, y_kind, 0, region{});
}

ticket layer_ops::project_rows(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                               std::uint64_t rows, tile_load first, double traffic::*y_kind, std::uint64_t extra,
                               const region& stacked) {
  const std::uint64_t tn = tile_cols(k, n);
  const std::uint64_t tiles = (n + tn - 1) / tn;
  tile_load cur = first.valid() ? first : load_tile(w, k * std::min(tn, n));
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
    g.addr_c = y.addr + (rows + extra) * i * tn * model_shape::act_bytes;
    if (extra) {  // AERP: the stored x vectors stream through the array under the new rows
      g.extra = static_cast<std::uint32_t>(extra);
      g.addr_d = stacked.addr;
    }
    if (m_fn) m_fn->gemm(g, w, i * tn);
    last = m_drv.submit(*m_rsa, g);
    m_buffer_user[cur.buffer] = last;
    count(x.where, rows * k * model_shape::act_bytes, &traffic::activations);
    count(stacked, extra * k * model_shape::act_bytes, &traffic::kv);
    count(y, (rows + extra) * ni * model_shape::act_bytes, y_kind);
    cur = next;
  }
  return last;
}

ticket layer_ops::sfu(opcode op, const tensor& in, std::uint64_t rows, std::uint64_t len, const region& out,
                      const tensor* second, double traffic::*kind) {
  depend(in, m_sfu->block);
  if (second) depend(*second, m_sfu->block);
  command c;
  c.op = op;
  c.m = static_cast<std::uint32_t>(rows);
  c.k = static_cast<std::uint32_t>(len);
  c.addr_a = in.where.addr;
  c.addr_b = second ? second->where.addr : in.where.addr;
  c.addr_c = out.addr;
  const auto bytes = m_sfu->block->operand_bytes(c);
  count(in.where, bytes[0], kind);
  if (second)
    count(second->where, bytes[1], &traffic::activations);
  else
    count(in.where, bytes[1], kind);  // c.addr_b: the table or norm weights, read where `in` is
  count(out, bytes[2], kind);
  if (m_fn) m_fn->sfu(c, in.where);
  return m_drv.submit(*m_sfu, c);
}

region layer_ops::kv_slot(unsigned layer, bool v, const pass_info& pass) const {
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  const std::uint64_t per_token = std::uint64_t(m_model.kv_heads) * m_model.head_dim * model_shape::act_bytes;
  // A new token takes an evicted slot once the cache is full (policies overwrite in place).
  const std::uint64_t slot = pass.kv_offset % m_plan.kv_token_slots();
  // Slots below chip_tokens of a partly placed layer are on chip (a range that straddles the
  // boundary, a prefill's, is written to DRAM; docs/firmware.md).
  const bool chip = chip_slots(layer) && slot + pass.rows <= kv.chip_tokens;
  region r = chip ? (v ? kv.v_chip : kv.k_chip) : (v ? kv.v : kv.k);
  r.addr += slot * per_token * pass.batch;
  r.bytes = pass.batch * pass.rows * per_token;
  return r;
}

ticket layer_ops::append_kv(const tensor& xn, unsigned layer, bool v, const pass_info& pass, tile_load first) {
  const auto& w = m_plan.weights(layer);
  const region slot = kv_slot(layer, v, pass);
  const std::uint64_t kv = std::uint64_t(m_model.kv_heads) * m_model.head_dim, rows = std::uint64_t(pass.batch) * pass.rows;
  // The prefill computes every token's K and V anyway: nothing to recompute.
  const std::uint64_t S = pass.prefill ? 0 : pass.recompute_rows(layer);
  if (m_stage.layer != layer) copy_new_rows();  // a previous layer's, if its attention did not run
  if (S == 0) {
    const ticket t = project(xn, v ? w.v : w.k, m_model.hidden, kv, slot, rows, first, &traffic::kv);
    m_kv_written += static_cast<double>(slot.bytes);
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
  buf = produce(v ? "v_recomputed" : "k_recomputed", (rows + S) * kv * model_shape::act_bytes);
  const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, buf.where, rows, first, &traffic::activations,
                                S, x_store(layer, S));
  produced(buf, t);
  m_stage.slot[v] = slot;
  m_stage.ready[v] = t;
  m_stage.copy_pending[v] = true;
  return t;
}

ticket layer_ops::rope_k(unsigned layer, const pass_info& pass, const ticket& k) {
  const std::uint64_t rows = std::uint64_t(pass.batch) * pass.rows;
  const bool staged = m_stage.layer == layer && m_stage.copy_pending[0];
  // The new rows' and, staged, the recomputed rows' keys (positions from the firmware's tables).
  tensor in{staged ? m_stage.buf[0].where : kv_slot(layer, false, pass), k, -1, "k"};
  const std::uint64_t n = staged ? rows + m_stage.stacked : rows;
  if (staged) in.where.bytes = n * m_model.kv_heads * m_model.head_dim * model_shape::act_bytes;
  // Keys in the cache are KV traffic; the staging buffer is an activation buffer.
  const ticket t = sfu(opcode::rope, in, n * m_model.kv_heads, m_model.head_dim, in.where, nullptr,
                       staged ? &traffic::activations : &traffic::kv);
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
    m_drv.dma(m_stage.buf[v].where.addr, slot.addr, slot.bytes);
    count(m_stage.buf[v].where, slot.bytes, &traffic::activations);
    count(slot, slot.bytes, &traffic::kv);
    m_kv_written += static_cast<double>(slot.bytes);
  }
}

ticket layer_ops::attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out) {
  const std::uint64_t B = pass.batch, T = pass.rows, N = pass.attended(layer), D = m_model.head_dim;
  const std::uint64_t kvh = m_model.kv_heads, g = m_model.heads / m_model.kv_heads;
  const std::uint64_t ab = model_shape::act_bytes;
  // KV heads per group: two score buffers (ping-pong) of the group must fit the arena.
  auto scores_bytes = [&](std::uint64_t h) { return B * h * g * T * N * ab; };
  std::uint64_t hg = kvh;
  while (hg > 1 && 2 * scores_bytes(hg) > m_plan.arena_free()) --hg;
  tensor buf[2] = {produce("scores", scores_bytes(hg)), produce("scores", scores_bytes(hg))};
  ticket user[2];
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  depend(q, m_rsa->block);
  ticket last;
  // The tokens a head attends to occupy its first slots; with a partly placed layer the first
  // chip_tokens of them are read from chip and the rest from DRAM; with AERP the new token and
  // the x tokens come from the staging buffer (their K, V just computed). Each part has its own
  // commands.
  const bool select = !m_fn && !pass.prefill && pass.evicts(layer);
  if (select) m_victims = produce("victims", B * kvh * 4);  // one 32-bit slot index per KV head
  const bool staged = m_stage.layer == layer && m_stage.copy_pending[0] && m_stage.copy_pending[1];
  const std::uint64_t n_stage = staged ? std::min(N, T + pass.attended_x(layer)) : 0, n_cache = N - n_stage;
  const std::uint64_t n_chip = chip_slots(layer) ? std::min(n_cache, kv.chip_tokens) : 0;
  std::vector<kv_part> parts;
  if (n_chip) parts.push_back({kv.k_chip, kv.v_chip, 0, n_chip, 0, B * kv.chip_tokens * D * ab, &traffic::kv});
  if (n_cache > n_chip && (n_chip || staged))
    parts.push_back({kv.k, kv.v, n_chip, n_cache - n_chip, n_chip * D * ab, B * m_plan.kv_token_slots() * D * ab,
                     &traffic::kv});
  if (parts.empty() && streamed(kv.k))  // the whole layer in DRAM: streamed in one part
    parts.push_back({kv.k, kv.v, 0, N, 0, B * m_plan.kv_token_slots() * D * ab, &traffic::kv});
  if (n_stage) {
    const std::uint64_t head = (m_stage.rows + m_stage.stacked) * D * ab;
    parts.push_back({m_stage.buf[0].where, m_stage.buf[1].where, n_cache, n_stage, 0, head, &traffic::activations});
    depend(tensor{m_stage.buf[0].where, m_stage.ready[0], -1, "k"}, m_rsa->block);  // the keys' RoPE
  }
  for (std::uint64_t h0 = 0, j = 0; h0 < kvh; h0 += hg, ++j) {
    const std::uint64_t h = std::min(hg, kvh - h0);
    tensor& s = buf[j % 2];
    if (user[j % 2].valid()) m_drv.wait(user[j % 2]);  // the buffer's previous group is done
    if (!parts.empty()) {
      parts_attention(q, pass, layer, out, s, h0, h, parts, select);
      last = s.producer;
      user[j % 2] = last;
      s = tensor{s.where, {}, -1, "scores"};
      continue;
    }
    command qk;
    qk.op = opcode::gemm_transposed;
    qk.batch = static_cast<std::uint32_t>(B * h);
    qk.m = static_cast<std::uint32_t>(g * T);
    qk.k = static_cast<std::uint32_t>(D);
    qk.n = static_cast<std::uint32_t>(N);
    qk.addr_a = q.where.addr + B * h0 * g * T * D * ab;
    qk.addr_b = kv.k.addr + B * h0 * N * D * ab;
    qk.addr_c = s.where.addr;
    if (select && m_evictor) qk.flags = flag_scores_to_evictor;
    if (m_fn) m_fn->scores(qk, layer, h0, q.where.addr, 0, N);
    const ticket t1 = m_drv.submit(*m_rsa, qk);
    count(kv.k, B * h * N * D * ab, &traffic::kv);
    count(q.where, B * h * g * T * D * ab, &traffic::activations);
    count(s.where, scores_bytes(h), &traffic::activations);
    produced(s, t1);
    const ticket t2 = sfu(opcode::softmax, s, B * h * g * T, N, s.where);
    s.producer = t2;
    if (select && !m_evictor) search_min(s, pass, h0, h, N);
    command av;
    av.op = opcode::gemm;
    av.flags = flag_b_16bit;
    av.batch = static_cast<std::uint32_t>(B * h);
    av.m = static_cast<std::uint32_t>(g * T);
    av.k = static_cast<std::uint32_t>(N);
    av.n = static_cast<std::uint32_t>(D);
    av.addr_a = s.where.addr;
    av.addr_b = kv.v.addr + B * h0 * N * D * ab;
    av.addr_c = out.addr + B * h0 * g * T * D * ab;
    depend(s, m_rsa->block);
    if (m_fn) m_fn->context(av, layer, h0, out.addr, 0, N);
    last = m_drv.submit(*m_rsa, av);
    count(kv.v, B * h * N * D * ab, &traffic::kv);
    count(s.where, scores_bytes(h), &traffic::activations);
    count(out, B * h * g * T * D * ab, &traffic::activations);
    last_use(s, last);
    user[j % 2] = last;
    s = tensor{s.where, {}, -1, "scores"};
  }
  if (staged) {
    for (tensor& t : m_stage.buf) last_use(t, last);
    // The new rows go into their cache slots now, while the staging buffers are still the
    // layer's: the DMA runs in order, so the copies finish before the weight tiles the layer's
    // FFN needs (and before the arena is reused by the next layer).
    copy_new_rows();
  }
  if (select && m_evictor) select_victims(pass, N);
  // The score buffers are free once the last group is done; the scheduler rewinds the arena at
  // the end of the layer.
  return last;
}

bool layer_ops::chip_slots(unsigned layer) const {
  // Functional mode reads the cache in one command per group (its data layout), so it keeps
  // the partly placed layer in DRAM.
  return !m_fn && m_plan.kv(layer).chip_tokens > 0;
}

void layer_ops::search_min(const tensor& s, const pass_info& pass, std::uint64_t h0, std::uint64_t h,
                           std::uint64_t n) {
  // Without the evictor the SFU scans each KV head's n scores for the minimum (min_search_
  // elements_per_cycle); one row per KV head of the group and sequence.
  const std::uint64_t rows = std::uint64_t(pass.batch) * h;
  region out = m_victims.where;
  out.addr += std::uint64_t(pass.batch) * h0 * 4;
  out.bytes = rows * 4;
  sfu(opcode::min_search, s, rows, n, out);
}

void layer_ops::select_victims(const pass_info& pass, std::uint64_t n) {
  // Each KV head of each sequence picks its victim; the evictor serves max_heads per command.
  const std::uint64_t heads = std::uint64_t(pass.batch) * m_model.kv_heads;
  const std::uint64_t per = m_evictor->block->victim_select_heads();
  for (std::uint64_t h = 0; h < heads; h += per) {
    command c;
    c.op = opcode::evict_select;
    c.m = static_cast<std::uint32_t>(std::min(per, heads - h));
    c.n = static_cast<std::uint32_t>(pass.kv_offset);  // the arriving token's position
    c.k = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(n, pass.kv_offset)));
    c.addr_c = m_victims.where.addr + h * 4;
    m_drv.submit(*m_evictor, c);
    count(m_victims.where, std::uint64_t(c.m) * 4, &traffic::activations);
  }
}

std::uint64_t layer_ops::chunk_count(const stream_job& job) const {
  const stream_chunk c = chunk_at(job, 0);
  return (job.pairs + c.np - 1) / c.np * ((job.tokens + c.nt - 1) / c.nt);
}

layer_ops::stream_chunk layer_ops::chunk_at(const stream_job& job, std::uint64_t i) const {
  // As many whole tokens of a pair as fit a buffer, then as many pairs as fit.
  const std::uint64_t row = std::uint64_t(m_model.head_dim) * model_shape::act_bytes, buf = m_plan.kv_stream_bytes();
  const std::uint64_t nt = std::min(job.tokens, std::max<std::uint64_t>(1, buf / row));
  const std::uint64_t np = std::min(job.pairs, std::max<std::uint64_t>(1, buf / (nt * row)));
  const std::uint64_t tchunks = (job.tokens + nt - 1) / nt;
  stream_chunk c;
  c.p0 = i / tchunks * np;
  c.t0 = i % tchunks * nt;
  c.np = std::min(np, job.pairs - c.p0);
  c.nt = std::min(nt, job.tokens - c.t0);
  return c;
}

layer_ops::stream_load layer_ops::load_chunk(const stream_job& job, const stream_chunk& c) {
  const unsigned b = m_next_stream;
  m_next_stream ^= 1u;
  if (m_stream_user[b].valid()) m_drv.wait(m_stream_user[b]);  // the buffer's last reader
  const std::uint64_t row = std::uint64_t(m_model.head_dim) * model_shape::act_bytes;
  const std::uint64_t bytes = c.np * c.nt * row;
  // The chunk's data in DRAM (timing addresses: which memory and banks, not a slot map).
  std::uint64_t src = job.src + (c.p0 * job.tokens + c.t0) * row;
  if (src + bytes > job.limit) src = job.limit - bytes;
  m_dram_traffic.*job.kind += static_cast<double>(bytes);
  return stream_load{m_drv.dma(src, m_plan.kv_stream_buffer(b).addr, bytes), b, job.src};
}

template <typename Issue>
ticket layer_ops::stream(const stream_job& job, Issue issue, const stream_job* next) {
  const std::uint64_t n = chunk_count(job);
  stream_load cur;
  if (m_stream_ahead.dma.valid() && m_stream_ahead.src == job.src) cur = m_stream_ahead;
  else cur = load_chunk(job, chunk_at(job, 0));
  m_stream_ahead = {};
  ticket last;
  for (std::uint64_t i = 0; i < n; ++i) {
    stream_load nxt;
    if (i + 1 < n) nxt = load_chunk(job, chunk_at(job, i + 1));
    else if (next) m_stream_ahead = load_chunk(*next, chunk_at(*next, 0));
    m_drv.wait(cur.dma);
    stream_chunk c = chunk_at(job, i);
    const region& buf = m_plan.kv_stream_buffer(cur.buffer);
    c.addr = buf.addr;
    last = issue(c);
    m_stream_user[cur.buffer] = last;
    // Read once: the eDRAM stops refreshing the chunk when its reader completes.
    if (refresh_control* e = m_stream_edram) {
      const std::uint64_t local = m_stream_local[cur.buffer];
      const std::uint64_t bytes = c.np * c.nt * std::uint64_t(m_model.head_dim) * model_shape::act_bytes;
      m_drv.after(last, [e, local, bytes] { e->release(local, bytes); });
    }
    cur = nxt;
  }
  return last;
}

void layer_ops::parts_attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out, tensor& s,
                                std::uint64_t h0, std::uint64_t h, const std::vector<kv_part>& parts,
                                bool select) {
  const bool to_evictor = select && m_evictor;
  const std::uint64_t B = pass.batch, T = pass.rows, D = m_model.head_dim;
  const std::uint64_t g = m_model.heads / m_model.kv_heads, ab = model_shape::act_bytes;
  std::uint64_t N = 0;
  for (const kv_part& pt : parts) N += pt.n;
  // The group's data in a part: its heads' stride, clamped into the region (timing addresses).
  auto at = [&](const region& r, const kv_part& pt, std::uint64_t bytes) {
    const std::uint64_t off = pt.offset + h0 * pt.head_bytes;
    return r.addr + std::min(off, r.bytes > bytes ? r.bytes - bytes : 0);
  };
  const std::uint64_t scores = B * h * g * T * N * ab;
  auto job = [&](const region& r, const kv_part& pt) {
    return stream_job{at(r, pt, 0), r.addr + r.bytes, B * h, pt.n, pt.kind};
  };
  // The first part streamed for V, requested after the last chunk of K (while softmax runs).
  const kv_part *first_v = nullptr, *last_k = nullptr;
  for (const kv_part& pt : parts) {
    if (!first_v && streamed(pt.v)) first_v = &pt;
    if (streamed(pt.k)) last_k = &pt;
  }
  ticket t1;
  for (const kv_part& pt : parts) {  // q . K^T of each part into its columns of the score rows
    const std::uint64_t bytes = B * h * pt.n * D * ab;
    if (streamed(pt.k)) {
      const stream_job next = first_v ? job(first_v->v, *first_v) : stream_job{};
      t1 = stream(job(pt.k, pt), [&](const stream_chunk& c) {
        command qk;
        qk.op = opcode::gemm_transposed;
        qk.batch = static_cast<std::uint32_t>(c.np);
        qk.m = static_cast<std::uint32_t>(g * T);
        qk.k = static_cast<std::uint32_t>(D);
        qk.n = static_cast<std::uint32_t>(c.nt);
        qk.addr_a = q.where.addr + (B * h0 + c.p0) * g * T * D * ab;
        qk.addr_b = c.addr;
        qk.addr_c = s.where.addr + (c.p0 * g * T * N + pt.first + c.t0) * ab;
        if (to_evictor) qk.flags = flag_scores_to_evictor;
        count(q.where, c.np * g * T * D * ab, &traffic::activations);
        return m_drv.submit(*m_rsa, qk);
      }, &pt == last_k && first_v ? &next : nullptr);
      continue;
    }
    command qk;
    qk.op = opcode::gemm_transposed;
    qk.batch = static_cast<std::uint32_t>(B * h);
    qk.m = static_cast<std::uint32_t>(g * T);
    qk.k = static_cast<std::uint32_t>(D);
    qk.n = static_cast<std::uint32_t>(pt.n);
    qk.addr_a = q.where.addr + B * h0 * g * T * D * ab;
    qk.addr_b = at(pt.k, pt, bytes);
    qk.addr_c = s.where.addr + pt.first * ab;
    if (to_evictor) qk.flags = flag_scores_to_evictor;
    if (m_fn) m_fn->scores(qk, layer, h0, q.where.addr, pt.first, N);
    t1 = m_drv.submit(*m_rsa, qk);
    count(pt.k, bytes, pt.kind);
    count(q.where, B * h * g * T * D * ab, &traffic::activations);
  }
  count(s.where, scores, &traffic::activations);
  produced(s, t1);
  s.producer = sfu(opcode::softmax, s, B * h * g * T, N, s.where);
  if (select && !m_evictor) search_min(s, pass, h0, h, N);
  depend(s, m_rsa->block);
  ticket last;
  for (const kv_part& pt : parts) {  // A . V accumulated over the parts
    const std::uint64_t bytes = B * h * pt.n * D * ab;
    if (streamed(pt.v)) {
      last = stream(job(pt.v, pt), [&](const stream_chunk& c) {
        command av;
        av.op = opcode::gemm;
        av.flags = flag_b_16bit;
        av.batch = static_cast<std::uint32_t>(c.np);
        av.m = static_cast<std::uint32_t>(g * T);
        av.k = static_cast<std::uint32_t>(c.nt);
        av.n = static_cast<std::uint32_t>(D);
        av.addr_a = s.where.addr + (c.p0 * g * T * N + pt.first + c.t0) * ab;
        av.addr_b = c.addr;
        av.addr_c = out.addr + (B * h0 + c.p0) * g * T * D * ab;
        count(s.where, c.np * g * T * c.nt * ab, &traffic::activations);
        return m_drv.submit(*m_rsa, av);
      });
      continue;
    }
    command av;
    av.op = opcode::gemm;
    av.flags = flag_b_16bit;
    av.batch = static_cast<std::uint32_t>(B * h);
    av.m = static_cast<std::uint32_t>(g * T);
    av.k = static_cast<std::uint32_t>(pt.n);
    av.n = static_cast<std::uint32_t>(D);
    av.addr_a = s.where.addr + pt.first * ab;
    av.addr_b = at(pt.v, pt, bytes);
    av.addr_c = out.addr + B * h0 * g * T * D * ab;
    if (m_fn) m_fn->context(av, layer, h0, out.addr, pt.first, N);
    last = m_drv.submit(*m_rsa, av);
    count(pt.v, bytes, pt.kind);
    count(s.where, B * h * g * T * pt.n * ab, &traffic::activations);
  }
  count(out, B * h * g * T * D * ab, &traffic::activations);
  last_use(s, last);
  s.producer = last;
}

tile_load layer_ops::prefetch_ffn(unsigned layer) {
  const auto& w = m_plan.weights(layer);
  return prefetch(m_model.ffn_type == ffn_kind::gated_silu ? w.gate : w.up, m_model.hidden, m_model.ffn);
}

void layer_ops::ffn(tensor& x, unsigned layer, std::uint64_t rows, bool overlap, tile_load first) {
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
  if (m_model.ffn_type == ffn_kind::gated_silu) {
    tensor up = produce("ffn", rows * F * ab);
    produced(h, project(xn, w.gate, C, F, h.where, rows, first));
    next = next_weights(w.up, C, F);
    step(h.producer);
    h.producer = sfu(opcode::silu, h, rows, F, h.where);
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
  tensor t;
  t.where = m_plan.alloc(bytes);
  t.kind = kind;
  return t;
}

void layer_ops::produced(tensor& t, const ticket& producer) {
  t.producer = producer;
  t.lifetime = static_cast<int>(m_lifetimes.size());
  m_lifetimes.push_back(lifetime_record{t.kind, sc_core::SC_ZERO_TIME, sc_core::SC_ZERO_TIME, true});
  const int i = t.lifetime;
  m_drv.after(producer, [this, i] { m_lifetimes[i].start = sc_core::sc_time_stamp(); });
}

void layer_ops::last_use(tensor& t, const ticket& consumer) {
  const int i = t.lifetime;
  std::uint64_t local = 0;
  refresh_control* e = refresh_of(t.where, local);
  const std::uint64_t bytes = t.where.bytes;
  m_drv.after(consumer, [this, i, e, local, bytes] {
    if (i >= 0) {
      m_lifetimes[i].end = sc_core::sc_time_stamp();
      m_lifetimes[i].open = false;
    }
    if (e) e->release(local, bytes);  // dead data is no longer refreshed
  });
}

void layer_ops::depend(const tensor& t, const compute_block* block) {
  if (t.producer.valid() && t.producer.block != block) m_drv.wait(t.producer);
}

}  // namespace kelle
