// `prefetch`: the worked example of docs/write-a-scheduler.md. The baseline's order (MM_q,
// MM_k, MM_v, attention, MM_o, FFN) with one of the Kelle scheduler's two ideas: every
// projection's first weight tile is requested while the previous operation computes, and the
// firmware waits only for data it needs. It separates the gain of overlapping memory with
// compute from the gain of reordering (q produced last), which it does not do.
#include "firmware/schedulers/scheduler.h"

namespace kelle {
namespace {

class prefetch_scheduler : public scheduler {
 public:
  void layer(scheduler_ops& ops, const pass_info& p, unsigned l, tensor& x) override {
    const model_shape& m = ops.model();
    const layer_weights& w = ops.weights(l);
    const auto [rows, C, Q, KV] = ops.dims(p);
    const std::uint64_t ab = model_shape::act_bytes;
    layer_scope scope(ops, x);  // the layer's buffers: freed at its end, once x is written

    // Attention half: norm, q, k, v, RoPE, attention, output projection, residual.
    tile_load next = ops.prefetch(w.q, C, Q);  // W_Q loads while the norm runs
    tensor xn = ops.produce("xn", rows * C * ab);
    ops.produced(xn, ops.sfu(ops.norm(), x, rows, C, xn.where));
    tensor q = ops.produce("q", rows * Q * ab);
    ops.produced(q, ops.project(xn, w.q, C, Q, q.where, rows, next));
    next = ops.prefetch(w.k, C, KV);
    const ticket tk = ops.append_kv(xn, l, false, p, next);
    next = ops.prefetch(w.v, C, KV);
    const ticket tv = ops.append_kv(xn, l, true, p, next);
    ops.last_use(xn, tv);
    ops.wait(ops.rope_k(l, p, tk));
    q.producer = ops.sfu(opcode::rope, q, rows * m.heads, m.head_dim, q.where);

    // W_O loads while the attention reads K and V; a latent attention loads its own W_kv_b tiles
    // into both tile buffers, so W_O's are loaded after it (on demand).
    next = m.latent_kv() ? tile_load{} : ops.prefetch(w.o, Q, C);
    tensor attn = ops.produce("attn", rows * Q * ab);
    const ticket ta = ops.attention(q, p, l, attn.where);
    ops.last_use(q, ta);
    ops.produced(attn, ta);
    tensor o = ops.produce("o", rows * C * ab);
    ops.produced(o, ops.project(attn, w.o, Q, C, o.where, rows, next));
    ops.last_use(attn, o.producer);
    next = ops.prefetch_ffn(l);
    const ticket add = ops.sfu(opcode::add, x, rows, C, x.where, &o);
    ops.last_use(o, add);
    x.producer = add;

    // FFN half, overlapped the same way.
    ops.ffn(x, l, rows, /*overlap=*/true, next);
  }
};

KELLE_REGISTER(schedulers(), "prefetch",
               "baseline order with the next weights prefetched (example: docs/write-a-scheduler.md)",
               [] { return std::make_unique<prefetch_scheduler>(); });

}  // namespace
}  // namespace kelle
