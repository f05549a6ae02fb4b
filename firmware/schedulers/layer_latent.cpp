// layer_ops, latent attention (multi-head latent attention, absorbed; docs/models/model-zoo.md):
// each head's query taken into latent space, the scores of every head over the cached latents
// and RoPE keys in groups of sequences whose score buffers fit, softmax, the weighted sum of the
// latents (fused: from the latents the scores read, latent_av_command), each head's W_uv.
#include "firmware/schedulers/layer_ops.h"

#include <algorithm>

namespace kelle {

command layer_ops::latent_av_command(const model_shape& m, std::uint64_t seqs, std::uint64_t rows, std::uint64_t n) {
  command c = av_shape(m.kv_lora_rank, seqs, rows, n);
  set_operand_class(c, operand_b, traffic_class::kv);
  c.flags |= m.kv.command_bits();  // the cache's number format
  if (m.latent_fused) c.flags |= flag_b_held;
  return c;
}

ticket layer_ops::latent_attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out) {
  // Absorbed (DeepSeek-V2, section 2.1.2): W_kv_b is never applied to the cache. Its key half
  // takes each head's query into latent space once per new token, its value half each head's
  // weighted latent once per new token; the cached latents are read as they are, shared by every
  // head (one cache head of kv_lora_rank + qk_rope_dim elements whose first kv_lora_rank serve as
  // values). Fused (the default, model_shape::latent_fused), the scores read each latent once and
  // the weighted sum takes its values from the array's operand buffer, where the kernel keeps a
  // block of latents between its scores and its weighted sum (FlashMLA's online softmax); the model
  // issues the blocks aggregated, two commands per part. docs/models/model-zoo.md, "Latent
  // attention in the firmware".
  const std::uint64_t B = pass.batch, T = pass.rows, N = pass.attended(layer), H = m_model.heads;
  const std::uint64_t r = m_model.kv_lora_rank, L = r + m_model.qk_rope_dim, dn = m_model.qk_nope_dim;
  const std::uint64_t dv = m_model.v_head_dim, D = m_model.head_dim, ab = model_shape::act_bytes, rows = B * T;
  const std::uint64_t w_uk = m_plan.weights(layer).kv_b, w_uv = w_uk + H * dn * r;
  // q_nope x W_uk, per head (dn -> r): the query in latent space, its RoPE part beside it.
  tensor ql = produce("q_latent", rows * H * L * ab);
  ticket t;
  for (std::uint64_t h = 0; h < H; ++h) {
    const tensor qh{region{q.where.memory, q.where.addr + h * D * ab, rows * dn * ab, q.where.on_chip, q.where.target,
                           q.where.base},
                    q.producer, -1, "q"};
    region y = ql.where;
    y.addr += h * rows * L * ab;
    y.bytes = rows * r * ab;
    t = project(qh, w_uk + h * dn * r, dn, r, y, rows);
  }
  produced(ql, t);
  const bool select = !m_fn && !pass.prefill && pass.evicts(layer);
  if (select) m_victims = produce("victims", victims_bytes(pass), size_rule::victims);
  else if (!pass.prefill) absent(size_rule::victims);
  // Groups of sequences, each with every head, whose two score buffers fit the arena.
  const std::uint64_t sg = score_heads(pass, layer, m_plan.arena_free());
  tensor buf[2] = {produce("scores", score_bytes(pass, layer, sg), size_rule::scores_first),
                   produce("scores", score_bytes(pass, layer, sg), size_rule::scores_second)};
  tensor ol = produce("o_latent", rows * H * r * ab);
  // The latents a head attends to: a partly placed layer's first on chip, the rest in DRAM. A
  // token's row is its K half then its V half (timing addresses: the K region and the V after it).
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  const std::uint64_t R = m_model.kv_bytes_per_token_layer();  // one latent row in the KV format
  const std::uint64_t n_chip = chip_slots(layer) ? std::min(N, kv.chip_tokens) : 0;
  struct part {
    std::uint64_t addr, first, n;
  };
  std::vector<part> parts;
  if (n_chip) parts.push_back({kv.k_chip.addr, 0, n_chip});
  if (N > n_chip) parts.push_back({kv.k.addr + n_chip * B * R / 2, n_chip, N - n_chip});
  ticket user[2], last;
  for (std::uint64_t s0 = 0, j = 0; s0 < B; s0 += sg, ++j) {
    const std::uint64_t bs = std::min(sg, B - s0);
    tensor& s = buf[j % 2];
    if (user[j % 2].valid()) m_drv.wait(user[j % 2]);  // the buffer's previous group is done
    depend(ql, m_rsa->block);
    ticket t1;
    for (const part& pt : parts) {  // every head's scores over the latents and RoPE keys
      command qk = qk_shape(L, bs, H * T, pt.n);
      qk.addr_a = ql.where.addr + s0 * H * T * L * ab;
      qk.addr_b = pt.addr + s0 * pt.n * R;
      qk.addr_c = s.where.addr + pt.first * ab;
      set_operand_class(qk, operand_a, traffic_class::activations);
      set_operand_class(qk, operand_b, traffic_class::kv);
      set_operand_class(qk, operand_c, traffic_class::activations);
      qk.flags |= m_model.kv.command_bits();
      if (select && m_evictor) qk.flags |= flag_scores_to_evictor;
      if (m_fn) m_fn->latent(qk, layer, s0, q.where.addr, ql.where.addr, false);
      t1 = m_drv.submit(*m_rsa, qk);
    }
    produced(s, t1);
    s.producer = sfu(opcode::softmax, s, bs * H * T, N, s.where);
    if (select && !m_evictor) {  // each sequence's victim among its N tokens (one cache head)
      region v = m_victims.where;
      v.addr += s0 * 4;
      v.bytes = bs * 4;
      sfu(opcode::min_search, s, bs, N, v);
    }
    depend(s, m_rsa->block);
    for (const part& pt : parts) {  // the weighted sum of the latents (their first r elements)
      command av = latent_av_command(m_model, bs, H * T, pt.n);
      av.addr_a = s.where.addr + pt.first * ab;
      av.addr_b = pt.addr + s0 * pt.n * R;
      av.addr_c = ol.where.addr + s0 * H * T * r * ab;
      set_operand_class(av, operand_a, traffic_class::activations);
      set_operand_class(av, operand_c, traffic_class::activations);
      if (m_fn) m_fn->latent(av, layer, s0, q.where.addr, ol.where.addr, true);
      last = m_drv.submit(*m_rsa, av);
    }
    last_use(s, last);
    user[j % 2] = last;
    s = tensor{s.where, {}, -1, "scores"};
  }
  last_use(ql, last);
  ol.producer = last;
  produced(ol, last);
  if (select && m_evictor) select_victims(pass, N);
  // Each head's weighted latent x W_uv (r -> dv), into its columns of the attention's output.
  for (std::uint64_t h = 0; h < H; ++h) {
    const tensor oh{region{ol.where.memory, ol.where.addr + h * rows * r * ab, rows * r * ab, ol.where.on_chip,
                           ol.where.target, ol.where.base},
                    ol.producer, -1, "o_latent"};
    region y = out;
    y.addr += h * dv * ab;
    y.bytes = rows * dv * ab;
    last = project(oh, w_uv + h * r * dv, r, dv, y, rows);
  }
  last_use(ol, last);
  return last;
}

}  // namespace kelle
