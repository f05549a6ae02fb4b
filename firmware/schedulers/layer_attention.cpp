// layer_ops, the attention: q . K^T, softmax and A . V per group of KV heads, over the parts of
// the cache a layer's tokens are in (on chip, in DRAM, streamed through the KV stream buffers,
// AERP's staging buffers), and the victims of an evicting layer (systolic evictor or SFU). Latent
// attention is in layer_latent.cpp.
#include "firmware/schedulers/layer_ops.h"

#include "models/memory/refresh_control.h"

#include <algorithm>

namespace kelle {

command layer_ops::qk_shape(std::uint64_t head_dim, std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens) {
  command c;
  c.op = opcode::gemm_transposed;
  c.batch = static_cast<std::uint32_t>(heads);
  c.m = static_cast<std::uint32_t>(rows);
  c.k = static_cast<std::uint32_t>(head_dim);
  c.n = static_cast<std::uint32_t>(tokens);
  return c;
}

command layer_ops::av_shape(std::uint64_t head_dim, std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens) {
  command c;
  c.op = opcode::gemm;
  c.flags = flag_b_16bit;
  c.batch = static_cast<std::uint32_t>(heads);
  c.m = static_cast<std::uint32_t>(rows);
  c.k = static_cast<std::uint32_t>(tokens);
  c.n = static_cast<std::uint32_t>(head_dim);
  return c;
}

command layer_ops::qk_command(std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens, std::uint64_t q,
                              std::uint64_t k, std::uint64_t scores, traffic_class kv) const {
  command c = qk_shape(m_model.head_dim, heads, rows, tokens);
  c.addr_a = q;
  c.addr_b = k;
  c.addr_c = scores;
  set_operand_class(c, operand_a, traffic_class::activations);
  set_operand_class(c, operand_b, kv);
  set_operand_class(c, operand_c, traffic_class::activations);
  if (kv == traffic_class::kv) c.flags |= m_model.kv.command_bits();  // the cache's number format
  return c;
}

command layer_ops::av_command(std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens, std::uint64_t scores,
                              std::uint64_t v, std::uint64_t out, traffic_class kv) const {
  command c = av_shape(m_model.head_dim, heads, rows, tokens);
  c.addr_a = scores;
  c.addr_b = v;
  c.addr_c = out;
  set_operand_class(c, operand_a, traffic_class::activations);
  set_operand_class(c, operand_b, kv);
  set_operand_class(c, operand_c, traffic_class::activations);
  if (kv == traffic_class::kv) c.flags |= m_model.kv.command_bits();  // the cache's number format
  return c;
}

std::uint64_t layer_ops::score_heads(const pass_info& pass, unsigned layer, std::uint64_t arena_free) const {
  return score_heads(m_model.latent_kv() ? pass.batch : m_model.kv_heads, score_bytes(pass, layer, 1), arena_free);
}

std::uint64_t layer_ops::score_heads(std::uint64_t kv_heads, std::uint64_t bytes_per_head, std::uint64_t arena_free) {
  std::uint64_t heads = kv_heads;
  while (heads > 1 && 2 * heads * bytes_per_head > arena_free) --heads;
  return heads;
}

ticket layer_ops::attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out) {
  if (pass.banded(layer)) return banded_attention(q, pass, layer, out);
  if (m_model.latent_kv()) return latent_attention(q, pass, layer, out);
  const std::uint64_t B = pass.batch, T = pass.rows, N = pass.attended(layer), D = m_model.head_dim;
  const std::uint64_t kvh = m_model.kv_heads, g = m_model.heads / m_model.kv_heads;
  // R: one token's K (or V) row of one head in the cache (the KV format's bytes); the staging
  // buffer holds 16-bit rows.
  const std::uint64_t ab = model_shape::act_bytes, R = m_model.kv_row_bytes();
  const std::uint64_t hg = score_heads(pass, layer, m_plan.arena_free());
  tensor buf[2] = {produce("scores", score_bytes(pass, layer, hg), size_rule::scores_first),
                   produce("scores", score_bytes(pass, layer, hg), size_rule::scores_second)};
  ticket user[2];
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  depend(q, m_rsa->block);
  ticket last;
  // The tokens a head attends to occupy its first slots; with a partly placed layer the first
  // chip_tokens of them are read from chip and the rest from DRAM; with AERP the new token and
  // the x tokens come from the staging buffer (their K, V just computed). Each part has its own
  // commands.
  const bool select = !m_fn && !pass.prefill && pass.evicts(layer);
  if (select) m_victims = produce("victims", victims_bytes(pass), size_rule::victims);
  else if (!pass.prefill) absent(size_rule::victims);
  const bool staged = m_stage.layer == layer && m_stage.copy_pending[0] && m_stage.copy_pending[1];
  const std::uint64_t n_stage = staged ? std::min(N, T + pass.attended_x(layer)) : 0, n_cache = N - n_stage;
  const std::uint64_t n_chip = chip_slots(layer) ? std::min(n_cache, kv.chip_tokens) : 0;
  std::vector<kv_part> parts;
  if (n_chip) parts.push_back({kv.k_chip, kv.v_chip, 0, n_chip, 0, B * kv.chip_tokens * R, R, traffic_class::kv});
  if (n_cache > n_chip && (n_chip || staged))
    parts.push_back({kv.k, kv.v, n_chip, n_cache - n_chip, n_chip * R, B * kv.slots * R, R, traffic_class::kv});
  if (parts.empty() && streamed(kv.k))  // the whole layer in DRAM: streamed in one part
    parts.push_back({kv.k, kv.v, 0, N, 0, B * kv.slots * R, R, traffic_class::kv});
  if (n_stage) {
    const std::uint64_t head = (m_stage.rows + m_stage.stacked) * D * ab;
    parts.push_back({m_stage.buf[0].where, m_stage.buf[1].where, n_cache, n_stage, 0, head, D * ab,
                     traffic_class::activations});
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
    command qk = qk_command(B * h, g * T, N, q.where.addr + B * h0 * g * T * D * ab, kv.k.addr + B * h0 * N * R,
                            s.where.addr, traffic_class::kv);
    if (select && m_evictor) qk.flags |= flag_scores_to_evictor;
    if (m_fn) m_fn->scores(qk, layer, h0, q.where.addr, 0, N);
    const ticket t1 = m_drv.submit(*m_rsa, qk);
    produced(s, t1);
    const ticket t2 = sfu(opcode::softmax, s, B * h * g * T, N, s.where);
    s.producer = t2;
    if (select && !m_evictor) search_min(s, pass, h0, h, N);
    command av = av_command(B * h, g * T, N, s.where.addr, kv.v.addr + B * h0 * N * R,
                            out.addr + B * h0 * g * T * D * ab, traffic_class::kv);
    depend(s, m_rsa->block);
    if (m_fn) m_fn->context(av, layer, h0, out.addr, 0, N);
    last = m_drv.submit(*m_rsa, av);
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

ticket layer_ops::banded_attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out) {
  // Like the dense prefill, which computes the whole T x T square of which the causal mask keeps
  // half, a block of W query rows computes the 2W - 1 keys its rows' windows span (the masked
  // corners included): 2W - 1 keys a query row, O(T W) for the layer, not O(T^2).
  const std::uint64_t B = pass.batch, T = pass.rows, W = pass.window[layer], D = m_model.head_dim;
  const std::uint64_t kvh = m_model.kv_heads, g = m_model.heads / kvh, ab = model_shape::act_bytes;
  const std::uint64_t per_head = B * g * W * std::min(T, 2 * W - 1) * ab;  // the widest block's scores
  const std::uint64_t hg = score_heads(kvh, per_head, m_plan.arena_free());
  tensor buf[2] = {produce("scores", hg * per_head), produce("scores", hg * per_head)};
  ticket user[2], last;
  depend(q, m_rsa->block);
  depend(tensor{m_stage.buf[0].where, m_stage.ready[0], -1, "k"}, m_rsa->block);  // the keys' RoPE
  const std::uint64_t K = m_stage.buf[0].where.addr, V = m_stage.buf[1].where.addr;
  std::uint64_t j = 0;
  for (std::uint64_t h0 = 0; h0 < kvh; h0 += hg)
    for (std::uint64_t r0 = 0; r0 < T; r0 += W, ++j) {
      const std::uint64_t h = std::min(hg, kvh - h0), c = std::min(W, T - r0);
      const std::uint64_t k0 = r0 >= W ? r0 - W + 1 : 0, n = r0 + c - k0;  // the block's keys
      tensor& s = buf[j % 2];
      if (user[j % 2].valid()) m_drv.wait(user[j % 2]);  // the buffer's previous block is done
      const command qk = qk_command(B * h, g * c, n, q.where.addr + (B * h0 * g * T + g * r0) * D * ab,
                                    K + (B * h0 * T + k0) * D * ab, s.where.addr, traffic_class::activations);
      if (m_fn) m_fn->band(qk, layer, h0, q.where.addr, r0, k0, false);
      produced(s, m_drv.submit(*m_rsa, qk));
      s.producer = sfu(opcode::softmax, s, B * h * g * c, n, s.where);
      depend(s, m_rsa->block);
      const command av = av_command(B * h, g * c, n, s.where.addr, V + (B * h0 * T + k0) * D * ab,
                                    out.addr + (B * h0 * g * T + g * r0) * D * ab, traffic_class::activations);
      if (m_fn) m_fn->band(av, layer, h0, out.addr, r0, k0, true);
      last = m_drv.submit(*m_rsa, av);
      last_use(s, last);
      user[j % 2] = last;
      s = tensor{s.where, {}, -1, "scores"};
    }
  for (tensor& t : m_stage.buf) last_use(t, last);
  copy_new_rows();  // the window's last W tokens into the ring
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
  const std::uint64_t heads = std::uint64_t(pass.batch) * m_model.cache_heads();
  const std::uint64_t per = m_evictor->block->victim_select_heads();
  for (std::uint64_t h = 0; h < heads; h += per) {
    command c;
    c.op = opcode::evict_select;
    c.m = static_cast<std::uint32_t>(std::min(per, heads - h));
    c.n = static_cast<std::uint32_t>(pass.kv_offset);  // the arriving token's position
    c.k = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(n, pass.kv_offset)));
    c.addr_c = m_victims.where.addr + h * 4;
    set_operand_class(c, operand_c, traffic_class::activations);
    m_drv.submit(*m_evictor, c);
  }
}

std::uint64_t layer_ops::chunk_count(const stream_job& job) const {
  const stream_chunk c = chunk_at(job, 0);
  return (job.pairs + c.np - 1) / c.np * ((job.tokens + c.nt - 1) / c.nt);
}

layer_ops::stream_chunk layer_ops::chunk_at(const stream_job& job, std::uint64_t i) const {
  // As many whole tokens of a pair as fit a buffer, then as many pairs as fit.
  const std::uint64_t row = m_model.kv_row_bytes(), buf = m_plan.kv_stream_bytes();  // streamed: cache rows
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
  const std::uint64_t row = m_model.kv_row_bytes();
  const std::uint64_t bytes = c.np * c.nt * row;
  // The chunk's data in DRAM (timing addresses: which memory and banks, not a slot map).
  std::uint64_t src = job.src + (c.p0 * job.tokens + c.t0) * row;
  if (src + bytes > job.limit) src = job.limit - bytes;
  return stream_load{m_drv.dma(src, m_plan.kv_stream_buffer(b).addr, bytes, job.kind), b, job.src};
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
      const std::uint64_t bytes = c.np * c.nt * m_model.kv_row_bytes();
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
    const std::uint64_t bytes = B * h * pt.n * pt.row;
    if (streamed(pt.k)) {
      const stream_job next = first_v ? job(first_v->v, *first_v) : stream_job{};
      t1 = stream(job(pt.k, pt), [&](const stream_chunk& c) {
        command qk = qk_command(c.np, g * T, c.nt, q.where.addr + (B * h0 + c.p0) * g * T * D * ab, c.addr,
                                s.where.addr + (c.p0 * g * T * N + pt.first + c.t0) * ab, pt.kind);
        if (to_evictor) qk.flags |= flag_scores_to_evictor;
        return m_drv.submit(*m_rsa, qk);
      }, &pt == last_k && first_v ? &next : nullptr);
      continue;
    }
    command qk = qk_command(B * h, g * T, pt.n, q.where.addr + B * h0 * g * T * D * ab, at(pt.k, pt, bytes),
                            s.where.addr + pt.first * ab, pt.kind);
    if (to_evictor) qk.flags |= flag_scores_to_evictor;
    if (m_fn) m_fn->scores(qk, layer, h0, q.where.addr, pt.first, N);
    t1 = m_drv.submit(*m_rsa, qk);
  }
  produced(s, t1);
  s.producer = sfu(opcode::softmax, s, B * h * g * T, N, s.where);
  if (select && !m_evictor) search_min(s, pass, h0, h, N);
  depend(s, m_rsa->block);
  ticket last;
  for (const kv_part& pt : parts) {  // A . V accumulated over the parts
    const std::uint64_t bytes = B * h * pt.n * pt.row;
    if (streamed(pt.v)) {
      last = stream(job(pt.v, pt), [&](const stream_chunk& c) {
        const command av = av_command(c.np, g * T, c.nt, s.where.addr + (c.p0 * g * T * N + pt.first + c.t0) * ab,
                                      c.addr, out.addr + (B * h0 + c.p0) * g * T * D * ab, pt.kind);
        return m_drv.submit(*m_rsa, av);
      });
      continue;
    }
    command av = av_command(B * h, g * T, pt.n, s.where.addr + pt.first * ab, at(pt.v, pt, bytes),
                            out.addr + B * h0 * g * T * D * ab, pt.kind);
    if (m_fn) m_fn->context(av, layer, h0, out.addr, pt.first, N);
    last = m_drv.submit(*m_rsa, av);
  }
  last_use(s, last);
  s.producer = last;
}

}  // namespace kelle
