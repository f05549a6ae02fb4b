// The operands of each command as layer_ops issues it (functional_hooks): the projections'
// weights and rows, the SFU's norms, RoPE positions and softmax rows, the attention's maps.
#include "firmware/functional/functional_run.h"

#include <algorithm>
#include <cmath>

namespace kelle {

void functional_run::attach(std::shared_ptr<fn::desc> d) {
  // The driver numbers commands 1, 2, ... in submission order: the next one gets this id.
  m_engine->attach(static_cast<std::uint32_t>(m_drv->commands_submitted() + 1), std::move(d));
}

void functional_run::gemm(const command& g, std::uint64_t w, std::uint64_t col0) {
  auto it = m_weights.find(w);
  if (it == m_weights.end()) throw std::logic_error("functional: a projection with weights the model did not write");
  const weight_info& wi = it->second;
  auto d = std::make_shared<fn::desc>();
  d->scales = wi.scales + col0 * 4;
  // The full output row: project() writes tile i's columns at y + rows x col0 (tile-major);
  // functionally the output is the row-major rows x n matrix the next command reads.
  const fn::qmatrix* m = nullptr;
  if (wi.layer < 0) {
    m = &m_q.classifier;
  } else {
    const auto& L = m_q.layers[std::size_t(wi.layer)];
    m = wi.kind == 'q' ? &L.wq : wi.kind == 'k' ? &L.wk : wi.kind == 'v' ? &L.wv : wi.kind == 'o' ? &L.wo
        : wi.kind == 'g' ? &L.gate : wi.kind == 'u' ? &L.up : wi.kind == 'K' ? &L.uk.at(wi.head)
        : wi.kind == 'U' ? &L.uv.at(wi.head) : &L.down;
  }
  if (wi.kind == 'K' || wi.kind == 'U') {  // latent KV's absorbed W_kv_b, one head
    latent_gemm(*d, g, wi, col0);
    attach(std::move(d));
    return;
  }
  const std::uint64_t N = m->out, rows = g.m, S = g.extra, K = g.k;
  // project() writes tile i's columns of the m + extra rows at y + (m + extra) x col0 (tile-major);
  // functionally the output is the row-major (m + extra) x n matrix the next command reads.
  const std::uint64_t y = g.addr_c - (rows + S) * col0 * 2;
  d->c.resize(1);
  auto& pcs = d->c[0];
  const bool kv = wi.kind == 'k' || wi.kind == 'v';
  // A banded prefill (a windowed layer, more context than its window): every context token's K
  // and V into a staging buffer, row-major, which the band attention reads (layer_ops::append_kv).
  const bool band = kv && m_pass.banded(unsigned(wi.layer));
  if (band) {
    if (m_stage.layer != wi.layer) m_stage = stage{wi.layer, {0, 0}, rows};
    m_stage.addr[wi.kind == 'v'] = y;
  }
  if (kv && !S && !band) {  // into each head's slot for the token (the KV cache)
    const unsigned l = unsigned(wi.layer);
    for (std::uint32_t r = 0; r < rows; ++r) {
      const unsigned b = r % m_batch;
      const std::uint64_t pos = m_pass.kv_offset + r / m_batch;
      for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
        const std::uint64_t h0 = std::uint64_t(kvh) * m_hd, h1 = h0 + m_hd;
        const std::uint64_t c0 = std::max(h0, col0), c1 = std::min(h1, col0 + g.n);
        if (c0 >= c1) continue;
        const std::uint64_t slot = hs(l, b, kvh).pos_slot.at(std::uint32_t(pos));
        pcs.push_back({r, std::uint32_t(c0 - col0), std::uint32_t(c1 - c0),
                       kv_addr(l, wi.kind == 'v', slot, b, kvh) + (c0 - h0) * 2});
      }
    }
  }
  // The row-major output; with stacked rows (command.extra) they follow the m rows: AERP's MM_k
  // and MM_v write the staging buffer so (new rows, then recomputed rows).
  if (!kv || S || band)
    for (std::uint32_t r = 0; r < rows + S; ++r) pcs.push_back({r, 0, g.n, y + (r * N + col0) * 2});
  if (kv && S) {  // AERP: the stacked rows are the x tokens' stored x
    const unsigned l = unsigned(wi.layer);
    const auto& xs = m_x[l];
    if (m_kv_fmt.quantises())  // the staged rows are 16-bit activations the reference cannot tell apart
      throw std::runtime_error("functional mode: AERP recomputes x tokens in layer " + std::to_string(l) +
                               "; with a quantising KV format (" + m_kv_fmt.name() +
                               ") their K and V and the new token's would be read unquantised from the staging "
                               "buffer, which the reference does not model: use policy.kv aep, or AERP with "
                               "x_only_if_smaller: true and a model whose x is not smaller than its K and V");
    if (S != xs.size() || !m_xstore)
      throw std::logic_error("functional: MM_" + std::string(1, wi.kind) + " of layer " + std::to_string(l) + " stacks " +
                             std::to_string(S) + " rows, the policy stores " + std::to_string(xs.size()) +
                             " tokens as x");
    if (m_stage.layer != int(l)) m_stage = stage{int(l), {0, 0}, rows};
    m_stage.addr[wi.kind == 'v'] = y;
    d->a.resize(1);
    for (std::uint32_t r = 0; r < rows; ++r) d->a[0].push_back({r, 0, g.k, g.addr_a + r * K * 2});
    for (std::uint32_t s = 0; s < S; ++s)
      d->a[0].push_back({std::uint32_t(rows + s), 0, g.k, x_addr(l, xs[s].first, xs[s].second)});
  }
  if (wi.kind == 'k' && col0 == 0 && m_xstore) {  // AERP: each new row's x kept as the array reads it
    d->keep_a.resize(1);
    for (std::uint32_t r = 0; r < rows; ++r)
      d->keep_a[0].push_back({r, 0, g.k, x_addr(unsigned(wi.layer), r % m_batch, m_pass.kv_offset + r / m_batch)});
  }
  attach(std::move(d));
}

void functional_run::sfu(const command& c, const region& in) {
  const fn::llama_config& cf = m_q.cfg;
  auto d = std::make_shared<fn::desc>();
  if (c.op == opcode::rmsnorm) {
    const unsigned i = m_norms++;
    if (i >= m_norm_addr.size()) throw std::logic_error("functional: more norms in a pass than the model has");
    d->gamma = m_norm_addr[i];
    d->eps = cf.norm_eps;
  } else if (c.op == opcode::rope) {
    d->theta = cf.rope_theta;
    bool v = false;
    const int l = kv_layer_of(in.addr, v);
    if (m_stage.layer >= 0 && in.addr == m_stage.addr[0]) {
      // AERP's staged keys: rows (new row or stacked row, kv head), dense in place, each at its
      // token's position.
      const unsigned sl = unsigned(m_stage.layer);
      const auto& xs = m_x[sl];
      if (c.m != (m_stage.rows + xs.size()) * m_kvh)
        throw std::logic_error("functional: the staged keys' RoPE has " + std::to_string(c.m) + " rows, expected " +
                               std::to_string((m_stage.rows + xs.size()) * m_kvh));
      for (std::uint32_t r = 0; r < c.m; ++r) {
        const std::uint64_t row = r / m_kvh;
        d->positions.push_back(row < m_stage.rows ? m_pass.kv_offset + row / m_batch : xs[row - m_stage.rows].second);
      }
    } else if (l >= 0 && m_shape.latent_kv()) {
      // Latent KV: the RoPE key, the last qk_rope_dim elements of each new token's V half (rows:
      // token, sequence).
      d->a.resize(1);
      for (std::uint32_t r = 0; r < c.m; ++r) {
        const unsigned b = r % m_batch;
        const std::uint64_t pos = m_pass.kv_offset + r / m_batch;
        d->positions.push_back(pos);
        const std::uint64_t slot = hs(unsigned(l), b, 0).pos_slot.at(std::uint32_t(pos));
        d->a[0].push_back({r, 0, c.k, kv_addr(unsigned(l), true, slot, b, 0) + (m_hd - c.k) * 2});
      }
      d->c = d->a;
    } else if (l >= 0) {  // k: rows (token, sequence, kv head), each in its head's slot
      d->a.resize(1);
      for (std::uint32_t r = 0; r < c.m; ++r) {
        const unsigned kvh = r % m_kvh, b = r / m_kvh % m_batch;
        const std::uint64_t pos = m_pass.kv_offset + r / m_kvh / m_batch;
        d->positions.push_back(pos);
        const std::uint64_t slot = hs(unsigned(l), b, kvh).pos_slot.at(std::uint32_t(pos));
        d->a[0].push_back({r, 0, c.k, kv_addr(unsigned(l), false, slot, b, kvh)});
      }
      d->c = d->a;
    } else {  // q: rows (token, sequence, head)
      for (std::uint32_t r = 0; r < c.m; ++r) d->positions.push_back(m_pass.kv_offset + r / m_heads / m_batch);
      if (m_shape.latent_kv()) d->rope_from = m_shape.qk_nope_dim;  // only each head's RoPE part
    }
  } else if (c.op == opcode::softmax && m_attn.band) {
    band_softmax(*d);
  } else if (c.op == opcode::softmax && m_attn.latent) {
    latent_softmax(c, *d);
  } else if (c.op == opcode::softmax) {
    const unsigned G = m_heads / m_kvh, l = m_attn.layer;
    const std::uint64_t T = m_pass.rows, per = G * T;
    d->scale = 1.0f / std::sqrt(float(m_hd));
    for (std::uint64_t R = 0; R < c.m; ++R) {
      const std::uint64_t pr = R / per, r = R % per;
      const unsigned kvh = unsigned(m_attn.h0 + pr / m_batch), b = unsigned(pr % m_batch);
      const auto& keys = hs(l, b, kvh).kept;
      const std::uint64_t qpos = m_pass.kv_offset + r % T;
      d->valid.push_back(std::uint32_t(std::upper_bound(keys.begin(), keys.end(), std::uint32_t(qpos)) - keys.begin()));
    }
    const std::uint64_t h0 = m_attn.h0, off = m_pass.kv_offset;
    d->on_row = [this, l, h0, per, T, G, off](std::uint64_t R, const float* pr, std::uint32_t n) {
      const std::uint64_t prod = R / per, r = R % per;
      const unsigned kvh = unsigned(h0 + prod / m_batch), b = unsigned(prod % m_batch);
      const unsigned head = kvh * G + unsigned(r / T);
      const std::uint64_t qpos = off + r % T;
      head_slots& h = hs(l, b, kvh);
      auto* row = m_record_probs ? &m_probs[((std::uint64_t(b) * m_shape.layers + l) * m_heads + head) << 32 | qpos]
                                 : nullptr;
      if (row) row->clear();
      if (h.score.size() < qpos + 1) h.score.resize(qpos + 1, 0.0);
      for (std::uint32_t j = 0; j < n; ++j) {
        if (row) row->emplace_back(h.kept[j], pr[j]);
        h.score[h.kept[j]] += pr[j];
      }
    };
  } else {
    return;
  }
  attach(std::move(d));
}

void functional_run::attention_maps(const command& c, unsigned l, std::uint64_t h0, std::uint64_t rows_addr, bool v,
                                    std::uint64_t first, std::uint64_t total, std::uint64_t scores,
                                    fn::operand_map& rows, fn::operand_map& keys, fn::operand_map& score_cols) {
  // Product p: KV head h0 + p / batch of sequence p mod batch. Its rows (query head of the
  // group, token) live in q's (or the result's) [token][sequence][head][head_dim]; its keys are
  // the head's kept tokens, in their slots (or staged). A part covers the columns [first,
  // first + N) of score rows `total` long.
  const unsigned G = m_heads / m_kvh;
  const std::uint64_t T = m_pass.rows, P = c.batch ? c.batch : 1, N = v ? c.k : c.n, M = c.m;
  rows.assign(P, {});
  keys.assign(P, {});
  if (N != total) score_cols.assign(P, {});
  for (std::uint64_t p = 0; p < P; ++p) {
    const unsigned kvh = unsigned(h0 + p / m_batch), b = unsigned(p % m_batch);
    for (std::uint32_t r = 0; r < G * T; ++r) {
      const std::uint64_t t = r % T, head = kvh * G + r / T;
      rows[p].push_back({r, 0, m_hd, rows_addr + ((t * m_batch + b) * m_heads + head) * m_hd * 2});
    }
    const head_slots& h = hs(l, b, kvh);
    if (h.kept.size() > total)
      throw std::logic_error("functional: a head keeps " + std::to_string(h.kept.size()) +
                             " tokens, more than the attention's " + std::to_string(total));
    for (std::uint64_t j = first; j < std::min<std::uint64_t>(h.kept.size(), first + N); ++j)
      keys[p].push_back({std::uint32_t(j - first), 0, m_hd, key_addr(l, v, b, kvh, h.kept[j])});
    if (N != total)
      for (std::uint32_t r = 0; r < M; ++r)
        score_cols[p].push_back({r, 0, std::uint32_t(N), scores + ((p * M + r) * total + first) * 2});
  }
}

void functional_run::band(const command& c, unsigned l, std::uint64_t h0, std::uint64_t q, std::uint64_t r0,
                          std::uint64_t k0, bool av) {
  // Product p: KV head h0 + p / batch of sequence p mod batch; its rows (query head of the group,
  // token r0 + r mod rows) in q's (or the result's) [token][sequence][head][head_dim], its keys
  // the staged K (or V) rows of tokens k0 .. k0 + n - 1. The scores are dense.
  if (!staged(l) || m_stage.rows != std::uint64_t(m_pass.rows) * m_batch)
    throw std::logic_error("functional: a band attention of layer " + std::to_string(l) + " without its staged K and V");
  const unsigned G = m_heads / m_kvh;
  const std::uint64_t P = c.batch ? c.batch : 1, rows = c.m / G, n = av ? c.k : c.n;
  m_attn = attn_ctx{l, h0, true, r0, k0, rows};
  auto d = std::make_shared<fn::desc>();
  fn::operand_map& qmap = av ? d->c : d->a;
  qmap.assign(P, {});
  d->b.assign(P, {});
  for (std::uint64_t p = 0; p < P; ++p) {
    const unsigned kvh = unsigned(h0 + p / m_batch), b = unsigned(p % m_batch);
    for (std::uint32_t r = 0; r < c.m; ++r) {
      const std::uint64_t t = r0 + r % rows, head = std::uint64_t(kvh) * G + r / rows;
      qmap[p].push_back({r, 0, m_hd, q + ((t * m_batch + b) * m_heads + head) * m_hd * 2});
    }
    for (std::uint32_t j = 0; j < n; ++j)
      d->b[p].push_back({j, 0, m_hd, staged_row(m_stage, av, (k0 + j) * m_batch + b, kvh)});
  }
  attach(std::move(d));
}

void functional_run::band_softmax(fn::desc& d) {
  // Row R: product R / (G x rows), the query of token r0 + R mod rows; its keys k0 .. its token,
  // of which the window keeps the last W.
  const unsigned G = m_heads / m_kvh, l = m_attn.layer;
  const std::uint64_t rows = m_attn.rows, per = G * rows, r0 = m_attn.r0, k0 = m_attn.k0, h0 = m_attn.h0;
  const std::uint64_t W = m_shape.window(l), P = std::uint64_t(m_batch) * m_kvh;
  d.scale = 1.0f / std::sqrt(float(m_hd));
  for (std::uint64_t R = 0; R < P * per; ++R) {
    const std::uint64_t qpos = r0 + R % per % rows;
    d.valid.push_back(std::uint32_t(qpos + 1 - k0));
    d.first.push_back(std::uint32_t(qpos + 1 > W + k0 ? qpos + 1 - W - k0 : 0));
  }
  d.on_row = [this, l, h0, per, rows, r0, k0, G, W](std::uint64_t R, const float* pr, std::uint32_t n) {
    const std::uint64_t prod = R / per, r = R % per;
    const unsigned kvh = unsigned(h0 + prod / m_batch), b = unsigned(prod % m_batch);
    const unsigned head = kvh * G + unsigned(r / rows);
    const std::uint64_t qpos = r0 + r % rows, lo = qpos + 1 > W ? qpos + 1 - W : 0;
    head_slots& h = hs(l, b, kvh);
    auto* row = m_record_probs ? &m_probs[((std::uint64_t(b) * m_shape.layers + l) * m_heads + head) << 32 | qpos]
                               : nullptr;
    if (row) row->clear();
    if (h.score.size() < qpos + 1) h.score.resize(qpos + 1, 0.0);
    for (std::uint64_t j = lo - k0; j < n; ++j) {
      if (row) row->emplace_back(std::uint32_t(k0 + j), pr[j]);
      h.score[k0 + j] += pr[j];
    }
  };
}

void functional_run::scores(const command& qk, unsigned l, std::uint64_t h0, std::uint64_t q, std::uint64_t first,
                            std::uint64_t total) {
  m_attn = attn_ctx{l, h0};
  auto d = std::make_shared<fn::desc>();
  attention_maps(qk, l, h0, q, false, first, total, qk.addr_c - first * 2, d->a, d->b, d->c);
  // The staged rows are complete when the layer's first q . K^T starts (the RSA ran MM_v before
  // it, the firmware waited for the keys' RoPE).
  if (staged(l) && h0 == 0 && first == 0) d->on_start = [this, l, st = m_stage] { check_recomputed(l, st); };
  attach(std::move(d));
}

void functional_run::context(const command& av, unsigned l, std::uint64_t h0, std::uint64_t out, std::uint64_t first,
                             std::uint64_t total) {
  auto d = std::make_shared<fn::desc>();
  attention_maps(av, l, h0, out, true, first, total, av.addr_a - first * 2, d->c, d->b, d->a);
  d->accumulate = first > 0;  // a later part adds to the earlier parts' result
  attach(std::move(d));
}

}  // namespace kelle
