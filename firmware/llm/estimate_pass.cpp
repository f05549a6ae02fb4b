// The first-order estimate's price of a pass (estimate_pass.h): pass_eval issues a layer's
// commands as layer_ops issues them (the projections tile by tile, the attention per group of KV
// heads, latent attention, the SFU's operations, a mixture-of-experts FFN) and times each as the
// largest of its demands on the memories and blocks; pass() runs it over the model's layers by
// where their KV is.
#include "firmware/llm/estimate_pass.h"

#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/activation_arena.h"
#include "models/compute/command.h"

#include <algorithm>
#include <cmath>

namespace kelle::estimate_model {

namespace {

// One pass over the model: its commands, each timed as the largest of its demands.
class pass_eval {
 public:
  pass_eval(const design& d, ledger& l) : m_d(d), m_l(l) {}

  // Opens a command's (or a set of overlapped commands') demands; close() adds its time.
  void open() {
    m_bytes.fill(0);
    m_cycles.fill(0);
  }
  void close() {
    double t = 0;
    for (std::size_t i = 0; i < m_d.mems.size(); ++i)
      if (m_bytes[i] > 0 && m_d.mems[i].bw_Bps > 0 && std::isfinite(m_d.mems[i].bw_Bps))
        t = std::max(t, m_bytes[i] / m_d.mems[i].bw_Bps);
    for (std::size_t i = 0; i < m_d.blocks.size(); ++i) t = std::max(t, m_cycles[i] / m_d.clock_Hz[i]);
    m_l.time_s += t;
  }
  void read(int mem, double bytes) {
    if (mem < 0 || mem >= static_cast<int>(max_res)) return;  // no operand there
    m_bytes[static_cast<std::size_t>(mem)] += bytes;
    m_l.rd[static_cast<std::size_t>(mem)] += bytes;
  }
  void write(int mem, double bytes) {
    if (mem < 0 || mem >= static_cast<int>(max_res)) return;
    m_bytes[static_cast<std::size_t>(mem)] += bytes;
    m_l.wr[static_cast<std::size_t>(mem)] += bytes;
  }
  // `reps` commands `c` on `block` in the open stage, operands a, b, c (written), d in those
  // memories.
  void issue(int block, const command& c, int a, int b, int cl, int dl, double reps = 1) {
    if (block < 0 || block >= static_cast<int>(max_res)) return;
    const compute_block& blk = *m_d.blocks[static_cast<std::size_t>(block)].model;
    const auto ob = blk.operand_bytes(c);
    const auto cost = blk.first_order(c);
    if (ob[0]) read(a, reps * static_cast<double>(ob[0]));
    if (ob[1]) read(b, reps * static_cast<double>(ob[1]));
    if (ob[2]) write(cl, reps * static_cast<double>(ob[2]));
    if (ob[3]) read(dl, reps * static_cast<double>(ob[3]));
    const int at[4] = {a, b, cl, dl};  // the cache's bytes in the DRAM, as the run counts them
    for (unsigned o = 0; o < 4; ++o)
      if (at[o] == m_d.dram && operand_class(c, static_cast<operand>(o)) == traffic_class::kv)
        m_l.dram_kv += reps * static_cast<double>(ob[o]);
    m_cycles[static_cast<std::size_t>(block)] += reps * cost.cycles;
    m_l.cyc[static_cast<std::size_t>(block)] += reps * cost.cycles;
    m_l.J[static_cast<std::size_t>(block)] += reps * cost.energy_J;
  }
  // A copy (the DMA): no compute, its bytes on both memories.
  void copy(int src, int dst, double bytes) {
    read(src, bytes);
    write(dst, bytes);
  }

  // --- the layer's operations, as layer_ops issues them -----------------------------------------
  // An activation buffer: the arena if it fits beside what the layer holds, else the DRAM.
  int alloc(std::uint64_t bytes) { return activation_arena::place(m_used, m_d.arena, bytes) ? m_d.amem : m_d.dram; }
  std::uint64_t used() const { return m_used; }
  void set_used(std::uint64_t u) { m_used = u; }

  // A k x n projection of `rows` rows, weights streamed tile by tile through the tile buffers
  // (DRAM -> weight memory -> array), overlapped with the tiles' GEMMs.
  void project(int x, std::uint64_t k, std::uint64_t n, int y, std::uint64_t rows, bool into_cache = false) {
    const std::uint64_t tn = layer_ops::tile_cols(m_d.tile_buffer, m_d.rsa_cols, k, n);
    const std::uint64_t full = n / tn, rem = n % tn;
    open();
    for (const auto& [count, ni] : {std::pair<std::uint64_t, std::uint64_t>{full, tn}, {rem ? std::uint64_t(1) : std::uint64_t(0), rem}}) {
      if (!count) continue;
      command g;
      g.op = opcode::gemm;
      g.m = static_cast<std::uint32_t>(rows);
      g.k = static_cast<std::uint32_t>(k);
      g.n = static_cast<std::uint32_t>(ni);
      if (into_cache) {  // MM_k and MM_v write the cache's number format, as layer_ops does
        set_operand_class(g, operand_c, traffic_class::kv);
        g.flags |= m_d.m.kv.command_bits();
      }
      const double reps = static_cast<double>(count);  // every tile's demands in this one stage
      copy(m_d.dram, m_d.wmem, reps * static_cast<double>(k * ni));
      issue(m_d.rsa, g, x, m_d.wmem, y, none, reps);
    }
    close();
  }
  // An attention command whose B operand is the cache, in the cache's number format.
  command kv_operand(command c) const {
    set_operand_class(c, operand_b, traffic_class::kv);
    c.flags |= m_d.m.kv.command_bits();
    return c;
  }
  // An SFU operation on rows x len elements (in `in`; `second` or the norm weights beside `in`),
  // its operands of traffic class `kind` (the keys' RoPE in the cache: kv; as layer_ops::sfu_as).
  void sfu(opcode op, std::uint64_t rows, std::uint64_t len, int in, int out, int second = none,
           traffic_class kind = traffic_class::activations) {
    command c;
    c.op = op;
    c.m = static_cast<std::uint32_t>(rows);
    c.k = static_cast<std::uint32_t>(len);
    set_operand_class(c, operand_a, kind);
    set_operand_class(c, operand_b, second == none ? kind : traffic_class::activations);
    set_operand_class(c, operand_c, kind);
    open();
    issue(m_d.sfu, c, in, second == none ? in : second, out, none);
    close();
  }
  // The attention of `rows` query rows per sequence against `n` tokens in the parts `parts`
  // (memory, tokens), in groups of KV heads whose two score buffers fit the arena.
  void attention(std::uint64_t T, std::uint64_t N, int q, int out, const std::vector<std::pair<int, std::uint64_t>>& parts,
                 bool select) {
    const model_shape& m = m_d.m;
    const std::uint64_t B = m_d.batch, g = m.heads / m.kv_heads, D = m.head_dim;
    const std::uint64_t per_head = B * g * T * N * ab;
    const std::uint64_t free = m_used < m_d.arena ? m_d.arena - m_used : 0;
    const std::uint64_t hg = layer_ops::score_heads(m.kv_heads, per_head, free);
    const int s[2] = {alloc(hg * per_head), alloc(hg * per_head)};
    const int victims = select ? alloc(B * m.kv_heads * 4) : none;
    const std::uint64_t groups = ceil_div(m.kv_heads, hg);
    for (std::uint64_t j = 0; j < groups; ++j) {
      const std::uint64_t h = std::min(hg, m.kv_heads - j * hg);
      const int sj = s[j % 2];
      for (const auto& [mem, n] : parts) {
        open();
        issue(m_d.rsa, kv_operand(layer_ops::qk_shape(D, B * h, g * T, n)), q, mem, sj, none);
        close();
      }
      sfu(opcode::softmax, B * h * g * T, N, sj, sj);
      if (select && m_d.evictor == none) sfu(opcode::min_search, B * h, N, sj, victims);
      for (const auto& [mem, n] : parts) {
        open();
        issue(m_d.rsa, kv_operand(layer_ops::av_shape(D, B * h, g * T, n)), sj, mem, out, none);
        close();
      }
    }
  }

  // Latent attention (absorbed), as layer_ops::latent_attention issues it: each head's query
  // taken into latent space (q_nope x W_uk), the scores of every head over the latents in groups
  // of sequences whose two score buffers fit the arena, softmax, the weighted latents (their first
  // kv_lora_rank elements: fused, from the latents the scores read), each head's W_uv into the
  // attention's output.
  void latent_attention(std::uint64_t T, std::uint64_t N, int q, int out,
                        const std::vector<std::pair<int, std::uint64_t>>& parts, bool select) {
    const model_shape& m = m_d.m;
    const std::uint64_t B = m_d.batch, H = m.heads, r = m.kv_lora_rank, L = r + m.qk_rope_dim;
    const std::uint64_t dn = m.qk_nope_dim, dv = m.v_head_dim, rows = B * T;
    const int ql = alloc(rows * H * L * ab);
    for (std::uint64_t h = 0; h < H; ++h) project(q, dn, r, ql, rows);
    const std::uint64_t per_seq = H * T * N * ab;
    const std::uint64_t free = m_used < m_d.arena ? m_d.arena - m_used : 0;
    const std::uint64_t sg = layer_ops::score_heads(B, per_seq, free);
    const int s[2] = {alloc(sg * per_seq), alloc(sg * per_seq)};
    const int victims = select ? alloc(B * 4) : none;
    const int ol = alloc(rows * H * r * ab);
    const std::uint64_t groups = ceil_div(B, sg);
    for (std::uint64_t j = 0; j < groups; ++j) {
      const std::uint64_t bs = std::min(sg, B - j * sg);
      const int sj = s[j % 2];
      for (const auto& [mem, n] : parts) {
        open();
        issue(m_d.rsa, kv_operand(layer_ops::qk_shape(L, bs, H * T, n)), ql, mem, sj, none);
        close();
      }
      sfu(opcode::softmax, bs * H * T, N, sj, sj);
      if (select && m_d.evictor == none) sfu(opcode::min_search, bs, N, sj, victims);
      for (const auto& [mem, n] : parts) {
        open();
        issue(m_d.rsa, layer_ops::latent_av_command(m, bs, H * T, n), sj, mem, ol, none);
        close();
      }
    }
    for (std::uint64_t h = 0; h < H; ++h) project(ol, r, dv, out, rows);
  }

  // One decoder layer `l` (the buffers in the order the schedulers produce them). `kv` is where the
  // new tokens' K and V go, `parts` where the attended tokens are.
  void layer(unsigned l, std::uint64_t T, std::uint64_t N, int x, int kv,
             const std::vector<std::pair<int, std::uint64_t>>& parts, bool select) {
    const model_shape& m = m_d.m;
    const std::uint64_t rows = m_d.batch * T, C = m.hidden, Q = std::uint64_t(m.heads) * m.head_dim,
                        KV = m.kv_half_width(), F = m.ffn;
    // W_O's rows: the heads' values (v_head_dim each with latent KV).
    const std::uint64_t O = m.latent_kv() ? std::uint64_t(m.heads) * m.v_head_dim : Q;
    const opcode norm = m.norm == norm_kind::rmsnorm ? opcode::rmsnorm : opcode::layernorm;
    const std::uint64_t mark = m_used;
    const int xn = alloc(rows * C * ab);
    sfu(norm, rows, C, x, xn);
    project(xn, C, KV, kv, rows, true);  // MM_k, MM_v into the cache slots
    project(xn, C, KV, kv, rows, true);
    if (m.latent_kv())  // the RoPE key: the last qk_rope_dim elements of each new latent
      sfu(opcode::rope, rows, m.qk_rope_dim, kv, kv, none, traffic_class::kv);
    else
      sfu(opcode::rope, rows * m.kv_heads, m.head_dim, kv, kv, none, traffic_class::kv);
    const int q = alloc(rows * Q * ab);
    project(xn, C, Q, q, rows);
    sfu(opcode::rope, rows * m.heads, m.head_dim, q, q);
    const int attn = alloc(rows * Q * ab);
    if (m.latent_kv())
      latent_attention(T, N, q, attn, parts, select);
    else
      attention(T, N, q, attn, parts, select);
    const int o = alloc(rows * C * ab);
    project(attn, O, C, o, rows);
    sfu(opcode::add, rows, C, x, x, o);
    // The FFN.
    const int xn2 = alloc(rows * C * ab);
    sfu(norm, rows, C, x, xn2);
    if (m.moe_layer(l)) {
      moe_ffn(rows, xn2, x);
      m_used = mark;
      return;
    }
    const int h = alloc(rows * F * ab);
    const int out = alloc(rows * C * ab);
    if (m.gated_ffn()) {
      const int up = alloc(rows * F * ab);
      project(xn2, C, F, h, rows);
      sfu(m.ffn_type == ffn_kind::gated_gelu ? opcode::gelu : opcode::silu, rows, F, h, h);
      project(xn2, C, F, up, rows);
      sfu(opcode::mul, rows, F, h, h, up);
    } else {
      project(xn2, C, F, h, rows);
      sfu(opcode::gelu, rows, F, h, h);  // ReLU costed as the LUT activation, as layer_ops does
    }
    project(h, F, C, out, rows);
    sfu(opcode::add, rows, C, x, x, out);
    m_used = mark;
  }

  // A mixture-of-experts FFN on `rows` rows of xn (in `xn`), added into x: the router, its softmax
  // and top-k search, the shared experts on every row, and the expected number of distinct routed
  // experts under uniform routing (model_shape::expected_experts), each streamed once and run on
  // its share of the rows (rows x k / experts used, rounded up), as layer_ops::moe_ffn issues them.
  void moe_ffn(std::uint64_t rows, int xn, int x) {
    const model_shape& m = m_d.m;
    const std::uint64_t C = m.hidden, E = m.experts, F = m.expert_ffn;
    const int logits = alloc(rows * E * ab);
    project(xn, C, E, logits, rows);
    sfu(opcode::softmax, rows, E, logits, logits);
    const int chosen = alloc(rows * 4);
    sfu(opcode::min_search, rows, E, logits, chosen);
    const double used = m.expected_experts(rows);
    const std::uint64_t share = static_cast<std::uint64_t>(std::ceil(double(rows) * m.experts_per_token / used - 1e-9));
    const std::uint64_t most = m.shared_experts ? rows : std::min(rows, share);
    const int out = alloc(rows * C * ab);
    const int h = alloc(most * F * ab);
    const int up = m.gated_ffn() ? alloc(most * F * ab) : none;
    const int y = alloc(most * C * ab);
    auto expert = [&](pass_eval& e, std::uint64_t n) {
      if (m.gated_ffn()) {
        e.project(xn, C, F, h, n);
        e.sfu(m.ffn_type == ffn_kind::gated_gelu ? opcode::gelu : opcode::silu, n, F, h, h);
        e.project(xn, C, F, up, n);
        e.sfu(opcode::mul, n, F, h, h, up);
      } else {
        e.project(xn, C, F, h, n);
        e.sfu(opcode::gelu, n, F, h, h);
      }
      e.project(h, F, C, y, n);
      e.sfu(opcode::add, n, C, out, out, y);
    };
    for (unsigned s = 0; s < m.shared_experts; ++s) expert(*this, rows);
    ledger one;
    pass_eval e(m_d, one);
    expert(e, share);
    m_l.add(one, used);
    sfu(opcode::add, rows, C, x, x, out);
  }

 private:
  const design& m_d;
  ledger& m_l;
  std::uint64_t m_used = 0;
  std::array<double, max_res> m_bytes{}, m_cycles{};
};

}  // namespace

// A pass of T new rows per sequence attending to N tokens, with `held` tokens of KV per sequence
// live in each layer's cache (refresh).
ledger pass(const design& d, std::uint64_t T, std::uint64_t N, std::uint64_t held, bool prefill, bool select) {
  ledger total;
  const model_shape& m = d.m;
  const std::uint64_t rows = d.batch * T, C = m.hidden;
  pass_eval top(d, total);
  const int x = top.alloc(rows * C * ab);
  top.open();
  top.copy(d.dram, x, static_cast<double>(rows * C));  // the embeddings, int8 rows of the table
  top.close();
  // The layers, by where their KV is: whole on chip, partly (placement fill), in DRAM.
  const unsigned partial = d.chip_tokens > 0 && d.kv_on_chip < m.layers ? 1 : 0;
  const unsigned in_dram = m.layers - d.kv_on_chip - partial;
  // `count` layers like layer `l` (their KV in the same place).
  auto one = [&](unsigned l, double count, int kv_new, std::vector<std::pair<int, std::uint64_t>> parts) {
    if (count <= 0) return;
    ledger l_;
    pass_eval e(d, l_);
    e.set_used(top.used());
    e.layer(l, T, N, x, kv_new, parts, select);
    total.add(l_, count);
  };
  const double kvb = static_cast<double>(m.kv_bytes_per_token_layer()) * d.batch;
  double live_kv = 0;
  // Layer by layer when layers differ in more than their KV's place: a windowed layer's tokens and
  // place are its own; a model's first dense layers and its MoE layers issue other FFNs.
  if (m.sliding_window || m.moe()) {
    for (unsigned i = 0; i < m.layers; ++i) {
      const unsigned l = d.chip_order[i];
      const std::uint64_t w = m.window(l);
      // Attended: the window in decode; the prefill's blocks of W rows see 2W - 1 keys (layer_ops).
      const std::uint64_t n = !w ? N : prefill ? (T > w ? std::min(T, 2 * w - 1) : T) : std::min(N, w);
      const std::uint64_t h = w ? std::min<std::uint64_t>(held, w) : held;
      if (i < d.kv_on_chip) {
        one(l, 1, d.kvmem, {{d.kvmem, n}});
        live_kv += kvb * static_cast<double>(h);
      } else if (i == d.kv_on_chip && partial) {
        const std::uint64_t on = std::min(n, d.chip_tokens);
        std::vector<std::pair<int, std::uint64_t>> parts{{d.kvmem, on}};
        if (n > on) parts.push_back({d.dram, n - on});
        one(l, 1, (prefill ? T : n) <= d.chip_tokens ? d.kvmem : d.dram, parts);
        live_kv += kvb * static_cast<double>(std::min(h, d.chip_tokens));
      } else {
        one(l, 1, d.dram, {{d.dram, n}});
      }
    }
  } else {
    one(0, d.kv_on_chip, d.kvmem, {{d.kvmem, N}});
    live_kv = kvb * (static_cast<double>(d.kv_on_chip) * static_cast<double>(held) +
                     (partial ? static_cast<double>(std::min(held, d.chip_tokens)) : 0.0));
  }
  const bool by_layer = m.sliding_window || m.moe();
  if (partial && !by_layer) {
    const std::uint64_t on = std::min(N, d.chip_tokens);
    // New slots go on chip while they are among the first chip_tokens (layer_ops::kv_slot).
    const bool new_on_chip = prefill ? T <= d.chip_tokens : N <= d.chip_tokens;
    std::vector<std::pair<int, std::uint64_t>> parts{{d.kvmem, on}};
    if (N > on) parts.push_back({d.dram, N - on});
    one(0, 1, new_on_chip ? d.kvmem : d.dram, parts);
  }
  if (!by_layer) one(0, in_dram, d.dram, {{d.dram, N}});
  // The LM head on the last token of every sequence.
  const int xn = top.alloc(d.batch * C * ab);
  top.sfu(m.norm == norm_kind::rmsnorm ? opcode::rmsnorm : opcode::layernorm, d.batch, C, x, xn);
  const int logits = top.alloc(d.batch * std::uint64_t(m.vocab) * ab);
  top.project(xn, C, m.vocab, logits, d.batch);
  // Live bits over the pass: the on-chip KV (what the cache holds), the residual stream.
  total.kv_live_bit_s = live_kv * 8 * total.time_s;
  total.act_live_bit_s = x == d.amem ? static_cast<double>(rows * C * ab) * 8 * total.time_s : 0.0;
  return total;
}

}  // namespace kelle::estimate_model
