#include "models/compute/functional/engine.h"

#include "models/compute/functional/half.h"
#include "models/compute/functional/kernels.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kelle::fn {

namespace {

void put_half(std::vector<unsigned char>& out, const std::vector<float>& v, std::size_t from, std::size_t n) {
  out.resize(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = to_half(v[from + i]);
    out[2 * i] = static_cast<unsigned char>(h & 0xff);
    out[2 * i + 1] = static_cast<unsigned char>(h >> 8);
  }
}

const operand_map* use(const desc* d, const operand_map desc::*m) {
  return d && !(d->*m).empty() ? &(d->*m) : nullptr;
}

}  // namespace

std::vector<float> engine::gather(const operand_map* map, std::size_t p, std::uint64_t base, std::uint64_t rows,
                                  std::uint64_t cols) {
  std::vector<float> v;
  gather(map, p, base, rows, cols, v);
  return v;
}

void engine::gather(const operand_map* map, std::size_t p, std::uint64_t base, std::uint64_t rows, std::uint64_t cols,
                    std::vector<float>& v) {
  std::vector<std::uint16_t>& h = m_half;
  const float* half = half_table();
  auto load = [&](std::uint64_t addr, std::size_t at, std::size_t n) {
    if (h.size() < n) h.resize(n);
    m_mem.read(addr, h.data(), n * 2);
    float* o = &v[at];
    for (std::size_t i = 0; i < n; ++i) o[i] = half[h[i]];
  };
  if (!map) {  // every element read
    v.resize(rows * cols);
    load(base, 0, rows * cols);
    return;
  }
  v.assign(rows * cols, 0.0f);
  if (p >= map->size()) throw std::logic_error("functional: operand map has too few products");
  for (const piece& pc : (*map)[p]) {
    if (pc.row >= rows || pc.col + pc.n > cols) throw std::logic_error("functional: piece outside its operand");
    load(pc.addr, std::size_t(pc.row) * cols + pc.col, pc.n);
  }
}

void engine::scatter(const operand_map* map, std::size_t p, std::uint64_t base, std::uint64_t rows,
                     std::uint64_t cols, const std::vector<float>& v, writes& w) {
  if (!map) {
    w.emplace_back(base, std::vector<unsigned char>());
    put_half(w.back().second, v, 0, rows * cols);
    return;
  }
  if (p >= map->size()) throw std::logic_error("functional: operand map has too few products");
  for (const piece& pc : (*map)[p]) {
    if (pc.row >= rows || pc.col + pc.n > cols) throw std::logic_error("functional: piece outside its operand");
    w.emplace_back(pc.addr, std::vector<unsigned char>());
    put_half(w.back().second, v, std::size_t(pc.row) * cols + pc.col, pc.n);
  }
}

void engine::start(const compute_block& block, const command& c) { m_pending[&block][c.id] = compute(c); }

void engine::run(const command& c) {
  for (const auto& [addr, bytes] : compute(c)) m_mem.write(addr, bytes.data(), bytes.size());
}

engine::writes engine::compute(const command& c) {
  auto it = m_desc.find(c.id);
  std::shared_ptr<const desc> d;
  if (it != m_desc.end()) {
    d = it->second;
    m_desc.erase(it);
  }
  writes w;
  if (d && d->on_start) d->on_start();
  switch (c.op) {
    case opcode::gemm:
    case opcode::gemm_transposed: gemm(c, d.get(), w); break;
    case opcode::copy: {
      if (d) {
        for (const desc::move& mv : d->moves) {
          w.emplace_back(mv.dst, std::vector<unsigned char>(mv.bytes));
          m_mem.read(mv.src, w.back().second.data(), mv.bytes);
        }
        break;
      }
      const std::uint64_t n = std::uint64_t(c.m) * c.k;
      w.emplace_back(c.addr_c, std::vector<unsigned char>(n));
      m_mem.read(c.addr_a, w.back().second.data(), n);
      break;
    }
    case opcode::evict_select: break;  // the evictor's victims come from its score registers
    default: sfu(c, d.get(), w); break;
  }
  ++m_commands;
  return w;
}

void engine::finish(const compute_block& block, const command& c) {
  auto& per = m_pending[&block];
  auto it = per.find(c.id);
  if (it == per.end()) return;
  for (const auto& [addr, bytes] : it->second) m_mem.write(addr, bytes.data(), bytes.size());
  per.erase(it);
}

KELLE_AVX2_CLONES void engine::gemm(const command& c, const desc* d, writes& w) {
  const bool tr = c.op == opcode::gemm_transposed;
  const bool b16 = tr || (c.flags & flag_b_16bit);
  const std::uint64_t M = c.m, K = c.k, N = c.n, S = c.extra, Mp = M + S, B = c.batch ? c.batch : 1;
  const operand_map *am = use(d, &desc::a), *bm = use(d, &desc::b), *cm = use(d, &desc::c);
  std::vector<float> scales(N, 1.0f);
  if (!b16 && d && d->scales) m_mem.read(d->scales, scales.data(), N * 4);
  if (!b16 && d && d->accumulate) throw std::logic_error("functional: an accumulating gemm needs a 16-bit B");
  std::vector<float>&a = m_a, &b = m_b, &bt = m_bt, &out = m_out;
  std::vector<std::int8_t>& q = m_q;
  for (std::uint64_t p = 0; p < B; ++p) {
    if (am) {
      gather(am, p, 0, Mp, K, a);
    } else {
      gather(nullptr, p, c.addr_a + p * M * K * 2, M, K, a);
      if (S) {
        const auto e = gather(nullptr, p, c.addr_d + p * S * K * 2, S, K);
        a.insert(a.end(), e.begin(), e.end());
      }
    }
    // B as a K x N matrix (gemm_transposed: stored N x K, transposed here); int8 B as read.
    if (b16) {
      if (tr) {
        gather(bm, p, c.addr_b + p * N * K * 2, N, K, bt);
        b.resize(K * N);
        for (std::uint64_t n = 0; n < N; ++n)
          for (std::uint64_t k = 0; k < K; ++k) b[k * N + n] = bt[n * K + k];
      } else {
        gather(bm, p, c.addr_b + p * K * N * 2, K, N, b);
      }
    } else {
      q.resize(K * N);
      m_mem.read(c.addr_b + p * K * N, q.data(), K * N);
    }
    if (d && p < d->keep_a.size())  // the input rows also go where the description says
      for (const piece& pc : d->keep_a[p]) {
        if (pc.row >= Mp || pc.col + pc.n > K) throw std::logic_error("functional: piece outside its operand");
        w.emplace_back(pc.addr, std::vector<unsigned char>());
        put_half(w.back().second, a, std::size_t(pc.row) * K + pc.col, pc.n);
      }
    if (d && d->accumulate)
      gather(cm, p, c.addr_c + p * Mp * N * 2, Mp, N, out);
    else
      out.assign(Mp * N, 0.0f);
    // Each output element sums its products in the order of k (a zero input, a masked
    // probability, contributes nothing), a row's N elements side by side.
    for (std::uint64_t r = 0; r < Mp; ++r) {
      float* o = &out[r * N];
      for (std::uint64_t k = 0; k < K; ++k) {
        const float x = a[r * K + k];
        if (x == 0.0f) continue;  // a zero (masked) input contributes nothing
        if (b16)
          axpy(o, &b[k * N], x, N);
        else
          axpy(o, &q[k * N], x, N);
      }
      if (!b16) fn::scale(o, scales.data(), N);
    }
    scatter(cm, p, c.addr_c + p * Mp * N * 2, Mp, N, out, w);
  }
}

void engine::sfu(const command& c, const desc* d, writes& w) {
  const std::uint64_t M = c.m, K = c.k;
  const operand_map *am = use(d, &desc::a), *cm = use(d, &desc::c);
  std::vector<float> x = gather(am, 0, c.addr_a, M, K);
  std::vector<float> y(M * K, 0.0f);
  switch (c.op) {
    case opcode::softmax: {
      const float sc = d ? d->scale : 1.0f;
      for (std::uint64_t r = 0; r < M; ++r) {
        const std::uint64_t n = d && !d->valid.empty() ? std::min<std::uint64_t>(K, d->valid.at(r)) : K;
        const std::uint64_t f = d && !d->first.empty() ? std::min<std::uint64_t>(n, d->first.at(r)) : 0;
        const float* in = &x[r * K];
        float* o = &y[r * K];
        float mx = -std::numeric_limits<float>::infinity();
        for (std::uint64_t i = f; i < n; ++i)
          if (!std::isnan(in[i])) mx = std::max(mx, in[i] * sc);
        float sum = 0;
        for (std::uint64_t i = f; i < n; ++i) sum += (o[i] = std::isnan(in[i]) || !std::isfinite(mx) ? 0.0f : std::exp(in[i] * sc - mx));
        for (std::uint64_t i = f; i < n; ++i) o[i] = sum > 0 ? o[i] / sum : 0.0f;
        if (d && d->on_row) d->on_row(r, o, static_cast<std::uint32_t>(n));
      }
      break;
    }
    case opcode::rmsnorm:
    case opcode::layernorm: {
      const bool ln = c.op == opcode::layernorm;
      const std::uint64_t ga = d && d->gamma ? d->gamma : c.addr_b;
      const std::vector<float> g = gather(nullptr, 0, ga, ln ? 2 : 1, K);
      const float eps = d ? d->eps : 1e-5f;
      for (std::uint64_t r = 0; r < M; ++r) {
        const float* in = &x[r * K];
        float mean = 0, ss = 0;
        if (ln) {
          for (std::uint64_t i = 0; i < K; ++i) mean += in[i];
          mean /= float(K);
        }
        for (std::uint64_t i = 0; i < K; ++i) ss += (in[i] - mean) * (in[i] - mean);
        const float s = 1.0f / std::sqrt(ss / float(K) + eps);
        for (std::uint64_t i = 0; i < K; ++i) y[r * K + i] = (in[i] - mean) * s * g[i] + (ln ? g[K + i] : 0.0f);
      }
      break;
    }
    case opcode::rope: {
      std::vector<float> table;
      const bool pos = d && !d->positions.empty();
      if (!pos) table = gather(nullptr, 0, c.addr_b, M, K);
      const std::uint64_t from = d ? std::min<std::uint64_t>(d->rope_from, K) : 0, dim = K - from;
      for (std::uint64_t r = 0; r < M; ++r)
        for (std::uint64_t i = 0; i < from; ++i) y[r * K + i] = x[r * K + i];
      for (std::uint64_t r = 0; r < M; ++r)
        for (std::uint64_t i = from; i + 1 < K; i += 2) {
          float cs, sn;
          if (pos) {
            const double a =
                double(d->positions.at(r)) * std::pow(double(d->theta), -double(i - from) / double(dim));
            cs = float(std::cos(a)), sn = float(std::sin(a));
          } else {
            cs = table[r * K + i], sn = table[r * K + i + 1];
          }
          const float x0 = x[r * K + i], x1 = x[r * K + i + 1];
          y[r * K + i] = x0 * cs - x1 * sn;
          y[r * K + i + 1] = x0 * sn + x1 * cs;
        }
      break;
    }
    case opcode::add:
    case opcode::mul: {
      const std::vector<float> b = gather(nullptr, 0, c.addr_b, M, K);
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = c.op == opcode::add ? x[i] + b[i] : x[i] * b[i];
      break;
    }
    case opcode::silu:
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
      break;
    case opcode::gelu:
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] / std::sqrt(2.0f)));
      break;
    case opcode::exp:
      for (std::size_t i = 0; i < y.size(); ++i) y[i] = std::exp(x[i]);
      break;
    case opcode::min_search: {
      std::vector<std::uint32_t> idx(M);
      for (std::uint64_t r = 0; r < M; ++r)
        idx[r] = static_cast<std::uint32_t>(std::min_element(x.begin() + std::ptrdiff_t(r * K), x.begin() + std::ptrdiff_t(r * K + K)) -
                                            (x.begin() + std::ptrdiff_t(r * K)));
      w.emplace_back(c.addr_c, std::vector<unsigned char>(M * 4));
      std::memcpy(w.back().second.data(), idx.data(), M * 4);
      return;
    }
    default: return;
  }
  scatter(cm, 0, c.addr_c, M, K, y, w);
}

}  // namespace kelle::fn
