#include "firmware/llm/estimate.h"

#include "firmware/llm/run_config.h"
#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/refresh_policy.h"
#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/activation_arena.h"
#include "firmware/workload/memory_plan.h"
#include "firmware/workload/model_zoo.h"
#include "models/compute/command.h"
#include "models/compute/compute_block.h"
#include "models/memory/memory_target.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace kelle {

namespace {

constexpr std::uint64_t ab = model_shape::act_bytes;
constexpr std::size_t max_res = 16;  // memories and blocks a design may have, each
constexpr int none = -1;

std::uint64_t align(std::uint64_t v) { return (v + 4095) / 4096 * 4096; }  // memory_plan's alignment
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The text of a subtree as a cache key: every key and scalar in order (no emitter: it is the
// estimate's hot path).
void key_of(const YAML::Node& n, std::string& out) {
  if (n.IsMap()) {
    out += '{';
    for (const auto& kv : n) {
      out += kv.first.Scalar();
      out += ':';
      key_of(kv.second, out);
      out += ',';
    }
    out += '}';
  } else if (n.IsSequence()) {
    out += '[';
    for (const auto& e : n) {
      key_of(e, out);
      out += ',';
    }
    out += ']';
  } else if (n.IsScalar()) {
    out += n.Scalar();
  }
}

std::string dump(const YAML::Node& n) {
  std::string out;
  key_of(n, out);
  return out;
}

struct mem_info {
  std::string name;
  const memory_target* model = nullptr;
  double bw_Bps = 0;  // sustainable (docs/firmware.md, "Roofline")
  memory_target::first_order_figures fig;
  std::uint64_t capacity = 0;
};

struct block_info {
  std::string name;
  const compute_block* model = nullptr;
};

// What a set of commands uses: bytes read and written per memory, busy cycles and energy per
// block, and its time (the sum of its commands' times).
struct ledger {
  std::array<double, max_res> rd{}, wr{}, cyc{}, J{};
  double time_s = 0;
  double kv_live_bit_s = 0, act_live_bit_s = 0;  // live on-chip bits x time (refresh)
  double dram_kv = 0;  // bytes of the KV cache read from and written to the DRAM (traffic class kv)
  void add(const ledger& o, double w) {
    for (std::size_t i = 0; i < max_res; ++i) {
      rd[i] += w * o.rd[i];
      wr[i] += w * o.wr[i];
      cyc[i] += w * o.cyc[i];
      J[i] += w * o.J[i];
    }
    time_s += w * o.time_s;
    kv_live_bit_s += w * o.kv_live_bit_s;
    act_live_bit_s += w * o.act_live_bit_s;
    dram_kv += w * o.dram_kv;
  }
};

// A design resolved from its scenario: the hardware, the workload and the firmware's placement.
struct design {
  std::vector<mem_info> mems;
  std::vector<block_info> blocks;
  std::vector<double> clock_Hz;
  int dram = none, wmem = none, kvmem = none, amem = none;
  int rsa = none, sfu = none, evictor = none;
  unsigned rsa_cols = 1;
  model_shape m;
  unsigned batch = 1;
  std::uint64_t context = 0, decode = 0, budget = 0, kv_slots = 0;
  bool skip_prefill = false;
  std::uint64_t tile_buffer = 0, arena = 0;
  unsigned kv_on_chip = 0;
  std::uint64_t chip_tokens = 0;  // placement fill: the partly placed layer's on-chip slots
  std::vector<unsigned> chip_order;  // the order layers take the KV memory in (memory_plan::sizes)
  double kv_refresh_rate = 0;     // refreshes per second of a live KV bit (the policy's intervals)
  double act_refresh_rate = 0;    // of a live activation bit (the array's own interval)
};

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

// A scenario's memory or block, keyed by everything its constructor reads.
template <class T>
struct instance {
  std::shared_ptr<config> cfg;  // the scenario it was built from (its sections stay readable)
  std::unique_ptr<T> model;
};

int index_of(const std::vector<mem_info>& v, const std::string& name) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return static_cast<int>(i);
  return none;
}

}  // namespace

struct first_order_estimate::cache {
  std::map<std::string, instance<memory_target>> mems;
  std::map<std::string, instance<compute_block>> blocks;
  unsigned built = 0;
};

first_order_estimate::first_order_estimate() : m_cache(std::make_unique<cache>()) {}
first_order_estimate::~first_order_estimate() = default;

nlohmann::json first_order_estimate::evaluate(const std::shared_ptr<config>& cfg_ptr) {
  config& cfg = *cfg_ptr;
  const config_node root = cfg.root();
  if (!root.has("tech")) root.missing("tech", "a map (name a system, system: kelle_edram, or include a technology file)");
  const config_node tech = root.child("tech");
  const config_node sys = root.child("system");
  const std::string tech_key = dump(cfg.effective()["tech"]);
  const double clock_GHz = sys.get_double("clock_GHz", 1.0, "accelerator clock in GHz", 1e-3, 1e3);
  design d;

  // The hardware: each memory and block the model a run builds, from the same sections.
  const config_node mems = sys.child("memories");
  for (const std::string& n : mems.keys()) {
    const config_node mn = mems.child(n);
    const std::string model = mn.require_choice("model", memories().name_list());
    const std::string key = model + "\n" + dump(cfg.effective()["system"]["memories"][n]) + tech_key;
    auto it = m_cache->mems.find(key);
    if (it == m_cache->mems.end()) {
      instance<memory_target> inst{cfg_ptr, memories().create(model, memory_args{
          "estimate" + std::to_string(m_cache->built++) + "_" + n, mn, tech})};
      it = m_cache->mems.emplace(key, std::move(inst)).first;
    }
    const memory_target* mt = it->second.model.get();
    if (d.mems.size() == max_res) sys.fail("memories", "more than " + std::to_string(max_res) + " memories");
    d.mems.push_back({n, mt, mt->sustainable_bandwidth_Bps(), mt->first_order(), mt->capacity_bytes()});
  }
  const config_node comp = sys.child_or_empty("compute");
  for (const std::string& n : comp.keys()) {
    const config_node cn = comp.child(n);
    if (!cn.get_bool("enabled", true, "instantiate the block (false: the system without it)")) continue;
    const std::string model = cn.require_choice("model", compute_blocks().name_list());
    const std::string key = model + "\n" + dump(cfg.effective()["system"]["compute"][n]) + tech_key +
                            std::to_string(clock_GHz);
    auto it = m_cache->blocks.find(key);
    if (it == m_cache->blocks.end()) {
      instance<compute_block> inst{cfg_ptr, compute_blocks().create(model, compute_args{
          "estimate" + std::to_string(m_cache->built++) + "_" + n, cn, tech, clock_GHz})};
      it = m_cache->blocks.emplace(key, std::move(inst)).first;
    }
    if (d.blocks.size() == max_res) sys.fail("compute", "more than " + std::to_string(max_res) + " blocks");
    const int i = static_cast<int>(d.blocks.size());
    const compute_block* b = it->second.model.get();
    d.blocks.push_back({n, b});
    d.clock_Hz.push_back(b->clock_Hz());
    if (b->systolic_array() && d.rsa == none) {
      d.rsa = i;
      d.rsa_cols = b->systolic_array()->cols;
    } else if (model == "sfu" && d.sfu == none) {
      d.sfu = i;
    } else if (model == "evictor" && d.evictor == none) {
      d.evictor = i;
    }
  }
  if (d.rsa == none || d.sfu == none)
    sys.fail("compute", "the estimate needs a systolic array (model rsa) and an SFU (model sfu)");

  // The workload and the firmware's choices, read as the run reads them.
  const config_node wl = root.child("workload");
  const std::string type = wl.get_string("type", "llm", "workload type");
  if (type != "llm") wl.fail("type", "the estimate models LLM inference (type: llm), got '" + type + "'");
  d.m = runnable_model_from_config(wl);
  d.m.kv = kv_format::from_config(root.child_or_empty("policy"), d.m.head_dim);  // as the run sets it
  const run_lengths len = run_lengths::read(wl);
  d.batch = len.batch;
  d.context = len.context;
  d.decode = len.decode;
  d.skip_prefill = wl.get_bool("skip_prefill", false, "assume the context already in the cache; decode only");
  const run_config rc = run_config::resolve(root);
  const config_node pol = root.child_or_empty("policy");
  d.kv_slots = d.context + d.decode;
  if (rc.kv_policy.name != "full") {
    d.budget = pol.get_uint("kv_budget", len.budget_default(default_kv_budget), "tokens kept per KV head (N')", 1,
                            1u << 30);
    d.kv_slots = std::min(d.kv_slots, std::max(d.budget, d.context));
  }

  // Placement: memory_plan's own sizes.
  const config_node pl = wl.child_or_empty("placement");
  std::string names;
  for (const auto& mi : d.mems) names += (names.empty() ? "" : ", ") + mi.name;
  const memory_plan::sizes z = memory_plan::size(
      d.m, d.batch, d.kv_slots, pl,
      [&d](const std::string& n) {
        const int i = index_of(d.mems, n);
        return i == none ? ~std::uint64_t(0) : d.mems[static_cast<std::size_t>(i)].capacity;
      },
      names);
  d.dram = index_of(d.mems, z.dram);
  d.wmem = index_of(d.mems, z.weight_mem);
  d.kvmem = index_of(d.mems, z.kv_mem);
  d.amem = index_of(d.mems, z.act_mem);
  d.tile_buffer = z.tile_buffer;
  d.arena = z.arena;
  d.kv_on_chip = z.kv_on_chip;
  d.chip_tokens = z.chip_tokens;
  d.chip_order = z.chip_order;
  const bool allow = pl.get_bool("allow_dram_overflow", false, "let weights and KV exceed the DRAM's capacity");

  // Refresh rates: the KV at the refresh policy's intervals (high- and low-score groups taken
  // half and half, each bit half at its own), the activations at the array's own.
  const auto& kvfig = d.mems[static_cast<std::size_t>(d.kvmem)].fig;
  const auto refresh = refresh_policies().create(rc.refresh_policy.name, pol);
  if (kvfig.refresh_J_per_bit > 0) {
    double rate = 0;
    for (bool high : {true, false})
      for (bool msb : {true, false}) {
        const double i = refresh->interval_s(high, msb);
        const double iv = i > 0 ? i : kvfig.refresh_interval_s;
        rate += iv > 0 ? 0.25 / iv : 0.0;
      }
    d.kv_refresh_rate = rate;
  }
  const auto& afig = d.mems[static_cast<std::size_t>(d.amem)].fig;
  d.act_refresh_rate = afig.refresh_interval_s > 0 ? 1.0 / afig.refresh_interval_s : 0.0;

  // DRAM fit: weights (memory_plan's layout) and the KV not on chip.
  const std::uint64_t weights = z.weight_bytes;
  std::uint64_t kv_dram = 0;
  for (unsigned i = d.kv_on_chip; i < d.m.layers; ++i) kv_dram += 2 * align(z.half_of(d.m, z.chip_order[i], d.kv_slots));
  const std::uint64_t dram_cap = d.mems[static_cast<std::size_t>(d.dram)].capacity;
  const bool fits = weights + kv_dram < dram_cap;

  // The phases.
  ledger prefill, decode;
  if (!d.skip_prefill) prefill = pass(d, d.context, d.context, d.context / 2, true, false);
  const std::uint64_t cap = d.budget ? d.budget : ~std::uint64_t(0);
  const std::uint64_t grow = d.budget ? std::min(d.decode, d.budget > d.context ? d.budget - d.context : 0) : d.decode;
  auto step = [&](std::uint64_t s) {
    const std::uint64_t n = std::min(d.context + s + 1, cap);
    return pass(d, 1, n, n, false, d.budget && d.context + s + 1 > d.budget);
  };
  if (grow >= 3) {  // Simpson's rule over the steps where the cache grows
    const double g = static_cast<double>(grow);
    decode.add(step(0), g / 6);
    decode.add(step((grow - 1) / 2), 4 * g / 6);
    decode.add(step(grow - 1), g / 6);
  } else {
    for (std::uint64_t s = 0; s < grow; ++s) decode.add(step(s), 1);
  }
  if (d.decode > grow) decode.add(step(grow), static_cast<double>(d.decode - grow));

  // Results.
  auto phase_json = [&](const ledger& l) {
    double bound = 0, no_overlap = 0;
    std::string bottleneck;
    nlohmann::json res = nlohmann::json::object();
    for (std::size_t i = 0; i < d.mems.size(); ++i) {
      const double dem = std::isfinite(d.mems[i].bw_Bps) && d.mems[i].bw_Bps > 0 ? (l.rd[i] + l.wr[i]) / d.mems[i].bw_Bps : 0;
      res[d.mems[i].name] = {{"bytes_read", l.rd[i]}, {"bytes_written", l.wr[i]}, {"demand_s", dem}};
      if (dem > bound) bound = dem, bottleneck = d.mems[i].name;
      if (static_cast<int>(i) == d.dram) no_overlap += dem;
    }
    for (std::size_t i = 0; i < d.blocks.size(); ++i) {
      const double dem = l.cyc[i] / d.clock_Hz[i];
      res[d.blocks[i].name] = {{"cycles", l.cyc[i]}, {"demand_s", dem}};
      if (dem > bound) bound = dem, bottleneck = d.blocks[i].name;
      no_overlap += dem;
    }
    return nlohmann::json{{"latency_s", l.time_s},     {"bound_s", bound},
                          {"no_overlap_s", no_overlap}, {"bottleneck", bottleneck},
                          {"dram_kv_bytes", l.dram_kv}, {"resources", res}};
  };
  ledger all;
  all.add(prefill, 1);
  all.add(decode, 1);
  const double T = all.time_s;
  nlohmann::json energy = nlohmann::json::object();
  double etotal = 0;
  auto put = [&](const std::string& k, double j) {
    if (j == 0) return;
    energy[k] = j;
    etotal += j;
  };
  nlohmann::json area = nlohmann::json::object();
  double atotal = 0;
  for (std::size_t i = 0; i < d.mems.size(); ++i) {
    const mem_info& mi = d.mems[i];
    const auto& f = mi.fig;
    const bool on_chip = mi.model->area_mm2() > 0;
    put(mi.name + ".access", all.rd[i] * f.read_J_per_B + all.wr[i] * f.write_J_per_B);
    put(mi.name + ".activate", (all.rd[i] + all.wr[i]) * f.activate_J_per_B);
    put(mi.name + (on_chip ? ".leakage" : ".background"), f.static_W * T);
    double refresh = f.refresh_W * T;
    if (static_cast<int>(i) == d.kvmem) refresh += all.kv_live_bit_s * d.kv_refresh_rate * f.refresh_J_per_bit;
    if (static_cast<int>(i) == d.amem) refresh += all.act_live_bit_s * d.act_refresh_rate * f.refresh_J_per_bit;
    put(mi.name + ".refresh", refresh);
    if (on_chip) {
      area[mi.name] = mi.model->area_mm2();
      atotal += mi.model->area_mm2();
    }
  }
  for (std::size_t i = 0; i < d.blocks.size(); ++i) {
    put(d.blocks[i].name + ".compute", all.J[i]);
    if (d.blocks[i].model->area_mm2() > 0) {
      area[d.blocks[i].name] = d.blocks[i].model->area_mm2();
      atotal += d.blocks[i].model->area_mm2();
    }
  }
  energy["total"] = etotal;
  area["total"] = atotal;
  const double tokens = static_cast<double>(d.batch) * static_cast<double>(d.decode);
  const std::string sys_name = cfg.effective()["system"]["name"] ? cfg.effective()["system"]["name"].Scalar() : "custom";
  nlohmann::json r;
  r["system"] = sys_name;
  r["llm"] = {{"model", d.m.name},   {"batch", d.batch},         {"context_len", d.context},
              {"decode_len", d.decode}, {"task", len.task_name}, {"kv_budget", d.budget},
              {"firmware", rc.to_json()}};
  r["latency_s"] = {{"prefill", prefill.time_s}, {"decode", decode.time_s}, {"total", T},
                    {"per_decode_step", d.decode ? decode.time_s / static_cast<double>(d.decode) : 0.0}};
  r["throughput"] = {{"tokens_per_s", T > 0 ? tokens / T : 0.0}};
  r["energy_J"] = energy;
  r["energy_per_token_J"] = tokens > 0 ? etotal / tokens : 0.0;
  r["area_mm2"] = area;
  r["placement"] = {{"kv_layers_on_chip", d.kv_on_chip}, {"kv_chip_tokens_partial_layer", d.chip_tokens},
                    {"kv_token_slots", d.kv_slots}, {"tile_buffer_bytes", d.tile_buffer}, {"act_arena_bytes", d.arena}};
  r["dram_fit"] = {{"capacity_bytes", dram_cap}, {"weights_bytes", weights}, {"kv_bytes", kv_dram},
                   {"fits", fits}, {"overflow_allowed", allow}};
  r["phases"] = {{"prefill", phase_json(prefill)}, {"decode", phase_json(decode)}};
  return r;
}

}  // namespace kelle
