// Latent KV (multi-head latent attention, absorbed) in functional mode: the operands of the
// commands layer_ops::latent_attention issues (docs/models/model-zoo.md, "Latent attention in the
// firmware"). Layouts:
//   - the cache: one cache head; a token's latent row (kv_lora_rank latent values, then the
//     qk_rope_dim RoPE key) is split in two halves, K (MM_k: W_kv_a's first half of columns) and V
//     (MM_v: the second half), each in its slot as a dense KV row ([slot][sequence][half]);
//   - q: [token][sequence][head][qk_nope_dim + qk_rope_dim] (MM_q's output, the RoPE part rotated);
//   - the latent queries (q_latent) and the weighted latents (o_latent): [head][token, sequence]
//     rows of kv_lora_rank + qk_rope_dim (only the first kv_lora_rank are written: the RoPE part
//     of a score row's query is read from q) and kv_lora_rank elements;
//   - the attention's output: [token][sequence][head][v_head_dim], what MM_o reads.
#include "firmware/functional/functional_run.h"

#include <algorithm>
#include <cmath>

namespace kelle {

void functional_run::latent_gemm(fn::desc& d, const command& g, const weight_info& wi, std::uint64_t col0) {
  const std::uint64_t H = m_heads, D = m_shape.head_dim, rows = g.m;
  // project() writes tile i's columns at y + rows x col0 (tile-major): y is the head's output base.
  const std::uint64_t y = g.addr_c - rows * col0 * 2;
  d.c.resize(1);
  if (wi.kind == 'K') {  // q_nope x W_uk: A is the head's first qk_nope_dim columns of q's rows
    const std::uint64_t L = m_shape.kv_lora_rank + m_shape.qk_rope_dim;
    d.a.resize(1);
    for (std::uint32_t t = 0; t < rows; ++t) {
      d.a[0].push_back({t, 0, g.k, g.addr_a + t * H * D * 2});
      d.c[0].push_back({t, 0, g.n, y + (t * L + col0) * 2});
    }
  } else {  // the weighted latent x W_uv into the head's v_head_dim columns of the output rows
    const std::uint64_t width = H * m_shape.v_head_dim;
    for (std::uint32_t t = 0; t < rows; ++t) d.c[0].push_back({t, 0, g.n, y + (t * width + col0) * 2});
  }
}

void functional_run::latent(const command& c, unsigned l, std::uint64_t s0, std::uint64_t q, std::uint64_t ql,
                            bool av) {
  // Product p: sequence s0 + p, every head; row R: head R / T, token R mod T (T new tokens).
  const std::uint64_t H = m_heads, T = m_pass.rows, r = m_shape.kv_lora_rank, dr = m_shape.qk_rope_dim;
  const std::uint64_t dn = m_shape.qk_nope_dim, D = m_shape.head_dim, L = r + dr, half = m_hd;
  const std::uint64_t P = c.batch ? c.batch : 1, N = av ? c.k : c.n;
  if (c.m != H * T) throw std::logic_error("functional: a latent attention command of " + std::to_string(c.m) + " rows");
  auto d = std::make_shared<fn::desc>();
  fn::operand_map& rows = av ? d->c : d->a;
  rows.assign(P, {});
  d->b.assign(P, {});
  for (std::uint64_t p = 0; p < P; ++p) {
    const unsigned b = unsigned(s0 + p);
    for (std::uint32_t R = 0; R < c.m; ++R) {
      const unsigned head = unsigned(R / T);
      const std::uint64_t row = R % T * m_batch + b;
      if (av) {
        rows[p].push_back({R, 0, std::uint32_t(r), latent_row(ql, head, row, r)});
      } else {  // the latent query beside the head's rotated RoPE part of q
        rows[p].push_back({R, 0, std::uint32_t(r), latent_row(ql, head, row, L)});
        rows[p].push_back({R, std::uint32_t(r), std::uint32_t(dr), q + ((row * H + head) * D + dn) * 2});
      }
    }
    const head_slots& h = hs(l, b, 0);
    if (h.kept.size() > N)
      throw std::logic_error("functional: a sequence keeps " + std::to_string(h.kept.size()) +
                             " latent rows, more than the attention's " + std::to_string(N));
    for (std::uint32_t j = 0; j < h.kept.size(); ++j) {
      const std::uint64_t slot = h.pos_slot.at(h.kept[j]);
      const std::uint64_t k = kv_addr(l, false, slot, b, 0), v = kv_addr(l, true, slot, b, 0);
      // A key row is the whole latent row; a value row its first kv_lora_rank elements.
      const std::uint64_t width = av ? r : L;
      d->b[p].push_back({j, 0, std::uint32_t(std::min(width, half)), k});
      if (width > half) d->b[p].push_back({j, std::uint32_t(half), std::uint32_t(width - half), v});
    }
  }
  if (!av) {
    m_attn = attn_ctx{};
    m_attn.layer = l;
    m_attn.latent = true;
    m_attn.s0 = s0;
  }
  attach(std::move(d));
}

void functional_run::latent_softmax(const command& c, fn::desc& d) {
  // Row R: sequence s0 + R / (H T), head R mod (H T) / T, the query of token R mod T; its keys
  // the sequence's kept latent rows up to its position (the causal mask).
  const unsigned l = m_attn.layer;
  const std::uint64_t H = m_heads, T = m_pass.rows, per = H * T, s0 = m_attn.s0, off = m_pass.kv_offset;
  d.scale = 1.0f / std::sqrt(float(m_shape.head_dim));  // qk_nope_dim + qk_rope_dim
  for (std::uint64_t R = 0; R < c.m; ++R) {
    const auto& keys = hs(l, unsigned(s0 + R / per), 0).kept;
    const std::uint32_t qpos = std::uint32_t(off + R % per % T);
    d.valid.push_back(std::uint32_t(std::upper_bound(keys.begin(), keys.end(), qpos) - keys.begin()));
  }
  d.on_row = [this, l, per, T, s0, off](std::uint64_t R, const float* pr, std::uint32_t n) {
    const unsigned b = unsigned(s0 + R / per), head = unsigned(R % per / T);
    const std::uint64_t qpos = off + R % per % T;
    head_slots& h = hs(l, b, 0);
    auto* row = m_record_probs ? &m_probs[((std::uint64_t(b) * m_shape.layers + l) * m_heads + head) << 32 | qpos]
                               : nullptr;
    if (row) row->clear();
    if (h.score.size() < qpos + 1) h.score.resize(qpos + 1, 0.0);
    for (std::uint32_t j = 0; j < n; ++j) {
      if (row) row->emplace_back(h.kept[j], pr[j]);
      h.score[h.kept[j]] += pr[j];
    }
  };
}

}  // namespace kelle
