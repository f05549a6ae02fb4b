#include "firmware/functional/reference.h"

#include "models/compute/functional/half.h"
#include "models/compute/functional/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kelle::fn {

packed_matrix pack(const qmatrix& m) {
  constexpr unsigned B = packed_matrix::block;
  packed_matrix p;
  p.out = m.out;
  p.in = m.in;
  p.scale = m.scale;
  p.w.assign(std::size_t(m.out + B - 1) / B * B * m.in, 0.0f);
  for (unsigned o = 0; o < m.out; ++o)
    for (unsigned i = 0; i < m.in; ++i)
      p.w[std::size_t(o / B * B) * m.in + std::size_t(i) * B + o % B] = float(m.q[std::size_t(o) * m.in + i]);
  return p;
}

std::shared_ptr<const packed_model> pack(const quantised_model& m) {
  auto p = std::make_shared<packed_model>();
  for (const auto& L : m.layers)
    p->layers.push_back({pack(L.wq), pack(L.wk), pack(L.wv), pack(L.wo), pack(L.gate), pack(L.up), pack(L.down)});
  p->classifier = pack(m.classifier);
  return p;
}

KELLE_AVX2_CLONES void matvec(const packed_matrix& w, const float* x, float* y) {
  // One accumulator per output row of a block, each summing its products in the order of i (the
  // same sums as a row at a time), the block's rows side by side: vectorisable.
  // Four groups of four rows: the form the compiler keeps in four vector registers.
  static_assert(packed_matrix::block == 16, "matvec's kernel is written for blocks of 16 rows");
  const float* p = w.w.data();
  for (unsigned o0 = 0; o0 < w.out; o0 += 16) {
    float a0[4] = {}, a1[4] = {}, a2[4] = {}, a3[4] = {};
    for (unsigned i = 0; i < w.in; ++i, p += 16) {
      const float xi = x[i];
      for (unsigned j = 0; j < 4; ++j) a0[j] += p[j] * xi;
      for (unsigned j = 0; j < 4; ++j) a1[j] += p[4 + j] * xi;
      for (unsigned j = 0; j < 4; ++j) a2[j] += p[8 + j] * xi;
      for (unsigned j = 0; j < 4; ++j) a3[j] += p[12 + j] * xi;
    }
    const float* acc[4] = {a0, a1, a2, a3};
    for (unsigned j = 0; j < 16 && o0 + j < w.out; ++j) y[o0 + j] = acc[j / 4][j % 4] * w.scale[o0 + j];
  }
}

void rmsnorm(const float* x, const std::vector<float>& g, float eps, unsigned n, float* out) {
  float ss = 0;
  for (unsigned i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (unsigned i = 0; i < n; ++i) out[i] = x[i] * r * g[i];
}

void rope(float* v, unsigned hd, std::uint64_t pos, float theta) {
  for (unsigned i = 0; i < hd; i += 2) {
    const double freq = std::pow(double(theta), -double(i) / double(hd));
    const double a = double(pos) * freq;
    const float c = float(std::cos(a)), s = float(std::sin(a));
    const float x0 = v[i], x1 = v[i + 1];
    v[i] = x0 * c - x1 * s;
    v[i + 1] = x0 * s + x1 * c;
  }
}

reference_model::reference_model(const quantised_model& m) : reference_model(m, pack(m)) {}

reference_model::reference_model(const quantised_model& m, std::shared_ptr<const packed_model> packed)
    : m_m(m), m_p(std::move(packed)), m_k(m.cfg.layers), m_v(m.cfg.layers) {}

const float* reference_model::k(unsigned l, unsigned h, std::uint64_t p) const {
  return &m_k[l][p * m_m.cfg.kv_dim() + std::size_t(h) * m_m.cfg.head_dim()];
}
const float* reference_model::v(unsigned l, unsigned h, std::uint64_t p) const {
  return &m_v[l][p * m_m.cfg.kv_dim() + std::size_t(h) * m_m.cfg.head_dim()];
}

void reference_model::quantise_kept(unsigned l, unsigned kvh, const std::vector<std::uint32_t>& keys) {
  const unsigned hd = m_m.cfg.head_dim(), G = m_fmt.group();
  auto half = [](float x) { return from_half(to_half(x)); };  // as the cache stores it
  m_kq.assign(keys.size() * hd, 0.0f);
  m_vq.assign(keys.size() * hd, 0.0f);
  // What was quantised before is kept: a key group's rows for the kept positions it had (the same
  // positions give the same rows: a position's K never changes), a position's value row.
  const std::size_t head = std::size_t(l) * m_m.cfg.kv_heads + kvh;
  if (m_kgroups.size() <= head) m_kgroups.resize(std::size_t(m_m.cfg.layers) * m_m.cfg.kv_heads);
  if (m_vrow.size() <= head) m_vrow.resize(m_kgroups.size());
  if (m_krow.size() <= head) m_krow.resize(m_kgroups.size());
  // A position's row quantised once into `c`: per group of G channels from their extremes (a
  // grouped format's values), or every channel with the format's one scale (a format without groups).
  auto position_row = [&](quantised_group& c, std::uint32_t pos, const float* x) -> const float* {
    if (c.keys.size() <= pos) {
      c.keys.resize(pos + 1, 0);
      c.rows.resize(std::size_t(pos + 1) * hd, 0.0f);
    }
    float* row = &c.rows[std::size_t(pos) * hd];
    if (!c.keys[pos]) {
      c.keys[pos] = 1;
      const unsigned width = G ? G : hd;
      for (unsigned c0 = 0; c0 < hd; c0 += width) {
        float lo = half(x[c0]), hi = lo;
        for (unsigned ch = c0; G && ch < c0 + width; ++ch) {
          lo = std::min(lo, half(x[ch]));
          hi = std::max(hi, half(x[ch]));
        }
        const kv_format::group_params p = G ? m_fmt.params(lo, hi) : m_fmt.params(0.0f, 0.0f);
        for (unsigned ch = c0; ch < c0 + width; ++ch) row[ch] = m_fmt.dequantise(m_fmt.quantise(half(x[ch]), p), p);
      }
    }
    return row;
  };
  if (!G) {  // a format without groups: a position's K row is kept as its V row is
    for (std::size_t j = 0; j < keys.size(); ++j) {
      const float* kr = position_row(m_krow[head], keys[j], k(l, kvh, keys[j]));
      std::copy(kr, kr + hd, m_kq.begin() + std::ptrdiff_t(j * hd));
      const float* vr = position_row(m_vrow[head], keys[j], v(l, kvh, keys[j]));
      std::copy(vr, vr + hd, m_vq.begin() + std::ptrdiff_t(j * hd));
    }
    return;
  }
  std::vector<quantised_group>& kg = m_kgroups[head];
  // Keys: per channel over the kept positions of each group of G consecutive positions.
  for (std::size_t j0 = 0; j0 < keys.size();) {
    std::size_t j1 = j0;
    while (j1 < keys.size() && keys[j1] / G == keys[j0] / G) ++j1;
    const std::size_t g = keys[j0] / G;
    if (kg.size() <= g) kg.resize(g + 1);
    quantised_group& c = kg[g];
    if (!std::equal(keys.begin() + std::ptrdiff_t(j0), keys.begin() + std::ptrdiff_t(j1), c.keys.begin(), c.keys.end())) {
      c.keys.assign(keys.begin() + std::ptrdiff_t(j0), keys.begin() + std::ptrdiff_t(j1));
      c.rows.assign((j1 - j0) * hd, 0.0f);
      for (unsigned ch = 0; ch < hd; ++ch) {
        float lo = half(k(l, kvh, keys[j0])[ch]), hi = lo;
        for (std::size_t j = j0; j < j1; ++j) {
          const float x = half(k(l, kvh, keys[j])[ch]);
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
        const kv_format::group_params p = m_fmt.params(lo, hi);
        for (std::size_t j = j0; j < j1; ++j)
          c.rows[(j - j0) * hd + ch] = m_fmt.dequantise(m_fmt.quantise(half(k(l, kvh, keys[j])[ch]), p), p);
      }
    }
    std::copy(c.rows.begin(), c.rows.end(), m_kq.begin() + std::ptrdiff_t(j0 * hd));
    j0 = j1;
  }
  // Values: per token over each group of G consecutive channels.
  for (std::size_t j = 0; j < keys.size(); ++j) {
    const float* row = position_row(m_vrow[head], keys[j], v(l, kvh, keys[j]));
    std::copy(row, row + hd, m_vq.begin() + std::ptrdiff_t(j * hd));
  }
}

void reference_model::latent_attention(unsigned l, std::uint64_t pos, const float* xn, float* att,
                                       const kept_fn& kept) {
  // Multi-head latent attention the plain way (DeepSeek-V2, section 2.1.2, before absorption):
  // each key's latent is expanded by W_kv_b into every head's key (non-RoPE part) and value.
  const llama_config& c = m_m.cfg;
  const auto& L = m_m.layers[l];
  const packed_model::layer& P = m_p->layers[l];
  const unsigned H = c.heads, r = c.kv_lora_rank, dr = c.qk_rope_dim, dn = c.qk_nope_dim, dv = c.v_head_dim;
  const unsigned D = dn + dr, row = r + dr, half = c.kv_dim();
  std::vector<float> q(std::size_t(H) * D);
  matvec(P.wq, xn, q.data());
  for (unsigned h = 0; h < H; ++h) rope(&q[std::size_t(h) * D + dn], dr, pos, c.rope_theta);  // q's RoPE part
  // The cached row: W_kv_a's output (latent, then the RoPE key, rotated), its two halves.
  m_k[l].resize((pos + 1) * row);
  float* lat = &m_k[l][pos * row];
  matvec(P.wk, xn, lat);
  matvec(P.wv, xn, lat + half);
  rope(lat + r, dr, pos, c.rope_theta);
  const std::vector<std::uint32_t>* keys = kept ? kept(l, 0) : nullptr;  // one cache head
  std::vector<std::uint32_t> all;
  if (!keys) {
    for (std::uint32_t i = 0; i <= pos; ++i) all.push_back(i);
    keys = &all;
  }
  const float inv = 1.0f / std::sqrt(float(D));
  std::vector<float> s(keys->size()), kn(dn), vals(keys->size() * dv);
  for (unsigned h = 0; h < H; ++h) {
    const qmatrix &uk = L.uk[h], &uv = L.uv[h];
    const float* qh = &q[std::size_t(h) * D];
    float mx = -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < keys->size(); ++j) {
      const float* cj = &m_k[l][std::size_t((*keys)[j]) * row];
      for (unsigned i = 0; i < dn; ++i) {  // K_nope = W_uk_h c_kv
        float a = 0;
        for (unsigned k = 0; k < r; ++k) a += uk.at(k, i) * cj[k];
        kn[i] = a;
      }
      float dot = 0;
      for (unsigned i = 0; i < dn; ++i) dot += qh[i] * kn[i];
      for (unsigned i = 0; i < dr; ++i) dot += qh[dn + i] * cj[r + i];
      s[j] = dot * inv;
      mx = std::max(mx, s[j]);
      for (unsigned o = 0; o < dv; ++o) {  // V = W_uv_h c_kv
        float a = 0;
        for (unsigned k = 0; k < r; ++k) a += uv.at(o, k) * cj[k];
        vals[j * dv + o] = a;
      }
    }
    if (m_observer) m_observer(l, h, pos, *keys, s.data());
    float sum = 0;
    for (auto& e : s) sum += (e = std::exp(e - mx));
    float* out = att + std::size_t(h) * dv;
    std::fill(out, out + dv, 0.0f);
    for (std::size_t j = 0; j < keys->size(); ++j)
      for (unsigned o = 0; o < dv; ++o) out[o] += s[j] / sum * vals[j * dv + o];
  }
}

KELLE_AVX2_CLONES std::vector<float> reference_model::step(int token, const kept_fn& kept) {
  const llama_config& c = m_m.cfg;
  const unsigned d = c.dim, hd = c.head_dim(), kvd = c.kv_dim(), G = c.heads / c.kv_heads;
  const std::uint64_t pos = m_pos++;
  std::vector<float> x(d), xn(d), q(std::size_t(c.heads) * hd), o(d), h(c.ffn), u(c.ffn);
  std::vector<float> att(std::size_t(c.heads) * (c.latent() ? c.v_head_dim : hd));
  for (unsigned i = 0; i < d; ++i) x[i] = m_m.embed.at(unsigned(token), i);
  std::vector<std::uint32_t> all, windowed;
  for (unsigned l = 0; l < c.layers; ++l) {
    const auto& L = m_m.layers[l];
    const packed_model::layer& P = m_p->layers[l];
    rmsnorm(x.data(), L.attn_norm, c.norm_eps, d, xn.data());
    if (c.latent()) {
      latent_attention(l, pos, xn.data(), att.data(), kept);
    } else {
      matvec(P.wq, xn.data(), q.data());
      m_k[l].resize((pos + 1) * kvd);
      m_v[l].resize((pos + 1) * kvd);
      float* kp = &m_k[l][pos * kvd];
      float* vp = &m_v[l][pos * kvd];
      matvec(P.wk, xn.data(), kp);
      matvec(P.wv, xn.data(), vp);
      for (unsigned hh = 0; hh < c.heads; ++hh) rope(&q[std::size_t(hh) * hd], hd, pos, c.rope_theta);
      for (unsigned hh = 0; hh < c.kv_heads; ++hh) rope(kp + std::size_t(hh) * hd, hd, pos, c.rope_theta);
      const float inv = 1.0f / std::sqrt(float(hd));
      // A windowed layer's query sees the keys max(0, pos - W + 1) .. pos, whatever is kept.
      const std::uint64_t W = c.window(l), lo = W && pos + 1 > W ? pos + 1 - W : 0;
      for (unsigned kvh = 0; kvh < c.kv_heads; ++kvh) {
        const std::vector<std::uint32_t>* keys = kept ? kept(l, kvh) : nullptr;
        if (!keys) {
          all.resize(pos + 1 - lo);
          for (std::uint64_t i = lo; i <= pos; ++i) all[i - lo] = std::uint32_t(i);
          keys = &all;
        } else if (lo && !keys->empty() && keys->front() < lo) {
          windowed.assign(std::lower_bound(keys->begin(), keys->end(), std::uint32_t(lo)), keys->end());
          keys = &windowed;
        }
        std::vector<float> s(keys->size());
        const bool quantised = m_fmt.quantises() && kept;
        if (quantised) quantise_kept(l, kvh, *keys);
        std::vector<const float*>&krows = m_krows, &vrows = m_vrows;  // the attended keys' and values' rows
        krows.resize(keys->size());
        vrows.resize(keys->size());
        for (std::size_t j = 0; j < keys->size(); ++j) {
          krows[j] = quantised ? &m_kq[j * hd] : k(l, kvh, (*keys)[j]);
          vrows[j] = quantised ? &m_vq[j * hd] : v(l, kvh, (*keys)[j]);
        }
        for (unsigned g = 0; g < G; ++g) {
          const unsigned hh = kvh * G + g;
          const float* qh = &q[std::size_t(hh) * hd];
          float mx = -std::numeric_limits<float>::infinity();
          dots(qh, krows.data(), keys->size(), hd, s.data());
          for (float& e : s) mx = std::max(mx, e *= inv);
          if (m_observer) m_observer(l, hh, pos, *keys, s.data());
          float sum = 0;
          for (auto& e : s) sum += (e = std::exp(e - mx));
          float* out = &att[std::size_t(hh) * hd];
          std::fill(out, out + hd, 0.0f);
          for (std::size_t j = 0; j < keys->size(); ++j) axpy(out, vrows[j], s[j] / sum, hd);
        }
      }
    }
    matvec(P.wo, att.data(), o.data());
    for (unsigned i = 0; i < d; ++i) x[i] += o[i];
    rmsnorm(x.data(), L.ffn_norm, c.norm_eps, d, xn.data());
    matvec(P.gate, xn.data(), h.data());
    matvec(P.up, xn.data(), u.data());
    for (unsigned i = 0; i < c.ffn; ++i) h[i] = h[i] / (1.0f + std::exp(-h[i])) * u[i];
    matvec(P.down, h.data(), o.data());
    for (unsigned i = 0; i < d; ++i) x[i] += o[i];
  }
  rmsnorm(x.data(), m_m.final_norm, c.norm_eps, d, xn.data());
  std::vector<float> logits(c.vocab);
  matvec(m_p->classifier, xn.data(), logits.data());
  return logits;
}

std::vector<double> log_softmax(const std::vector<float>& z) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float v : z)
    if (std::isfinite(v)) mx = std::max(mx, double(v));
  std::vector<double> out(z.size());
  if (!std::isfinite(mx)) {
    std::fill(out.begin(), out.end(), -std::log(double(z.size())));
    return out;
  }
  double sum = 0;
  for (float v : z)
    if (std::isfinite(v)) sum += std::exp(double(v) - mx);
  const double lse = mx + std::log(sum);
  for (std::size_t i = 0; i < z.size(); ++i)
    out[i] = std::isfinite(z[i]) ? double(z[i]) - lse : -std::numeric_limits<double>::infinity();
  return out;
}

int argmax(const std::vector<float>& z) {
  int best = 0;
  float bv = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < z.size(); ++i)
    if (z[i] > bv) {  // false for NaN
      bv = z[i];
      best = int(i);
    }
  return best;
}

void quality_metrics::add(const std::vector<float>& p, const std::vector<float>& r, int next) {
  ++rows;
  const auto lp = log_softmax(p), lr = log_softmax(r);
  double kl = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (!std::isfinite(p[i])) ++nonfinite;
    const double err = std::isfinite(p[i]) ? std::fabs(double(p[i]) - double(r[i])) : std::numeric_limits<double>::infinity();
    max_abs_logit_error = std::max(max_abs_logit_error, err);
    max_abs_logit = std::max(max_abs_logit, std::fabs(double(r[i])));
    const double pr = std::exp(lr[i]);
    if (pr > 0) kl += pr * (lr[i] - std::max(lp[i], -1e30));
  }
  sum_kl += kl;
  if (argmax(p) == argmax(r)) ++top1_agree;
  if (next >= 0) {
    nll += -std::max(lp[std::size_t(next)], -1e30);
    ref_nll += -lr[std::size_t(next)];
    ++nll_count;
  }
}

}  // namespace kelle::fn
