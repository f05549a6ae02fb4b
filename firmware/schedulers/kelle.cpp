// `kelle`: the Kelle scheduler, the paper's Figure 12(b). The firmware never waits for an
// operation to finish unless the next one needs its result: the next projection's first weight
// tile is requested while the current one computes (weight fetches overlap compute across
// operations), the attention's K and V reads overlap the fetch of W_O, and k and v are produced
// before q, so q is consumed by q . K^T as soon as it exists and the new k and v go straight
// into the cache: activation lifetimes shrink and memory overlaps compute.
#include "firmware/schedulers/scheduler.h"

namespace kelle {
namespace {

class kelle_scheduler : public scheduler {
 public:
  void layer(scheduler_ops& ops, const pass_info& p, unsigned l, tensor& x) override {
    const model_shape& m = ops.model();
    const layer_weights& w = ops.weights(l);
    const auto [rows, C, Q, KV] = ops.dims(p);
    const std::uint64_t ab = model_shape::act_bytes;
    layer_scope scope(ops, x);  // the layer's buffers: freed at its end, once x is written

    // Weights of W_K start loading before the norm is even done.
    tile_load next = ops.prefetch(w.k, C, KV);
    tensor xn = ops.produce("xn", rows * C * ab);
    ops.produced(xn, ops.sfu(ops.norm(), x, rows, C, xn.where));
    const ticket tk = ops.append_kv(xn, l, false, p, next);
    next = ops.prefetch(w.v, C, KV);
    ops.append_kv(xn, l, true, p, next);  // the RSA runs MM_v before the attention (in order)
    const ticket rk = ops.rope_k(l, p, tk);
    next = ops.prefetch(w.q, C, Q);
    tensor q = ops.produce("q", rows * Q * ab);
    ops.produced(q, ops.project(xn, w.q, C, Q, q.where, rows, next));
    ops.last_use(xn, q.producer);
    q.producer = ops.sfu(opcode::rope, q, rows * m.heads, m.head_dim, q.where);
    ops.wait(rk);

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
    next = ops.prefetch_ffn(l);  // the FFN's weights load while the residual add runs
    const ticket add1 = ops.sfu(opcode::add, x, rows, C, x.where, &o);
    ops.last_use(o, add1);
    x.producer = add1;
    ops.ffn(x, l, rows, /*overlap=*/true, next);
  }
};

KELLE_REGISTER(schedulers(), "kelle", "the paper's Figure 12(b): weight and KV fetches overlapped, k and v first",
               [] { return std::make_unique<kelle_scheduler>(); });

}  // namespace
}  // namespace kelle
