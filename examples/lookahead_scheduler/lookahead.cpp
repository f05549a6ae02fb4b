// `lookahead`: the Kelle scheduler's order with one more overlap, across the layer boundary
// (docs/write-a-scheduler.md, "A scheduler as a plugin", walks through this file).
//
// Every built-in scheduler requests a layer's first weight tile when the layer starts, i.e.
// after the firmware has waited for the previous layer's last command (the FFN's down projection
// and its residual add): the RSA idles while that first tile crosses from DRAM. `lookahead`
// requests the next layer's first tile (W_K) as soon as the current layer's FFN commands are
// issued, before that wait, so the fetch overlaps the end of the layer. Within a layer it keeps
// the Kelle order: k and v first, then q, W_O fetched while the attention runs, the FFN's
// weights while the residual add runs.
//
// The tile stays valid across the boundary because nothing between the two calls uses the tile
// buffers (the next layer starts with its norm on the SFU). The last layer of a pass prefetches
// nothing: the LM head streams its own weights through the same buffers.
//
// Statistics (results.json stats.<workload>.lookahead.*): the cross-layer prefetches issued and
// how much earlier than a layer start they were requested (the lead the overlap had).
#include "firmware/schedulers/scheduler.h"
#include "platform/plugin/plugin.h"
#include "platform/stats/stats.h"

KELLE_PLUGIN("lookahead")

namespace lookahead_plugin {

using namespace kelle;

// The scheduler's statistics, in a module of their own below the workload.
struct lookahead_stats : sc_core::sc_module {
  stat_group stats;
  stat& prefetches;
  stat& lead_s;
  explicit lookahead_stats(const sc_core::sc_module_name& n)
      : sc_core::sc_module(n),
        prefetches(stats.counter("cross_layer_prefetches", "count",
                                 "first weight tiles requested before the previous layer ended")),
        lead_s(stats.counter("prefetch_lead_s", "s",
                             "sum over those of (layer start - request time): the overlap gained")) {}
};

class lookahead_scheduler : public scheduler {
 public:
  // Created while the workload is elaborated, so the statistics module is its child.
  lookahead_scheduler() : m_stats(std::make_unique<lookahead_stats>("lookahead")) {}

  void layer(scheduler_ops& ops, const pass_info& p, unsigned l, tensor& x) override {
    layer_scope scope(ops, x);  // the layer's buffers: freed once x is written (the next layer reuses the arena)
    tile_load wk = carried(ops, p, l);
    attention_half(ops, p, l, x, wk);
    ops.ffn(x, l, ops.dims(p).rows, /*overlap=*/true, ops.prefetch_ffn(l));
    if (l + 1 < ops.model().layers) {  // the next layer's W_K, before waiting for this one
      const auto& wn = ops.weights(l + 1);
      m_carry = ops.prefetch(wn.k, ops.model().hidden, ops.dims(p).kv);
      m_carry_layer = l + 1;
      m_carry_pass = {p.prefill, p.step};
      m_carry_time = sc_core::sc_time_stamp();
      ++m_stats->prefetches;
    }
  }

 private:
  // The W_K tile requested by the previous call for this layer, or a fresh request.
  tile_load carried(scheduler_ops& ops, const pass_info& p, unsigned l) {
    tile_load t;
    if (m_carry.valid() && m_carry_layer == l && m_carry_pass == std::make_pair(p.prefill, p.step)) {
      t = m_carry;
      m_stats->lead_s += (sc_core::sc_time_stamp() - m_carry_time).to_seconds();
    } else {
      t = ops.prefetch(ops.weights(l).k, ops.model().hidden, ops.dims(p).kv);
    }
    m_carry = {};
    return t;
  }

  // Norm, k and v into the cache, q, RoPE, attention, W_O and the first residual add (Kelle order).
  static void attention_half(scheduler_ops& ops, const pass_info& p, unsigned l, tensor& x, tile_load wk) {
    const model_shape& m = ops.model();
    const auto& w = ops.weights(l);
    const auto d = ops.dims(p);
    const std::uint64_t act = model_shape::act_bytes;
    tensor xn = ops.produce("xn", d.rows * d.hidden * act);
    ops.produced(xn, ops.sfu(ops.norm(), x, d.rows, d.hidden, xn.where));
    const ticket k_done = ops.append_kv(xn, l, false, p, wk);
    ops.append_kv(xn, l, true, p, ops.prefetch(w.v, d.hidden, d.kv));
    const ticket k_roped = ops.rope_k(l, p, k_done);
    const tile_load wq = ops.prefetch(w.q, d.hidden, d.q);
    tensor q = ops.produce("q", d.rows * d.q * act);
    ops.produced(q, ops.project(xn, w.q, d.hidden, d.q, q.where, d.rows, wq));
    ops.last_use(xn, q.producer);
    q.producer = ops.sfu(opcode::rope, q, d.rows * m.heads, m.head_dim, q.where);
    ops.wait(k_roped);
    const tile_load wo = ops.prefetch(w.o, d.q, d.hidden);
    tensor a = ops.produce("attn", d.rows * d.q * act);
    ops.produced(a, ops.attention(q, p, l, a.where));
    ops.last_use(q, a.producer);
    tensor o = ops.produce("o", d.rows * d.hidden * act);
    ops.produced(o, ops.project(a, w.o, d.q, d.hidden, o.where, d.rows, wo));
    ops.last_use(a, o.producer);
    const ticket sum = ops.sfu(opcode::add, x, d.rows, d.hidden, x.where, &o);
    ops.last_use(o, sum);
    x.producer = sum;
  }

  std::unique_ptr<lookahead_stats> m_stats;
  tile_load m_carry;
  unsigned m_carry_layer = 0;
  std::pair<bool, unsigned> m_carry_pass{false, 0};
  sc_core::sc_time m_carry_time;
};

KELLE_REGISTER(schedulers(), "lookahead",
               "Kelle order plus the next layer's first weight tile requested before the layer ends (plugin example)",
               [] { return std::make_unique<lookahead_scheduler>(); });

}  // namespace lookahead_plugin
