// `baseline`: the order of the paper's Figure 12(a). Each operation runs after the previous one
// has finished: MM_q, MM_k, MM_v, then q . K^T (K read when needed), softmax, A . V, MM_o, the
// FFN; each projection's weights are fetched only when it starts (on demand; within a
// projection the tiles are double-buffered). q waits while W_K and W_V are fetched and used, so
// its lifetime is about 2 T_SRAM + T_eDRAM.
#include "firmware/schedulers/scheduler.h"

namespace kelle {
namespace {

class baseline : public scheduler {
 public:
  void layer(scheduler_ops& ops, const pass_info& p, unsigned l, tensor& x) override {
    const model_shape& m = ops.model();
    const layer_weights& w = ops.weights(l);
    const auto [rows, C, Q, KV] = ops.dims(p);
    const std::uint64_t ab = model_shape::act_bytes;
    layer_scope scope(ops, x);  // the layer's buffers: freed at its end, once x is written

    tensor xn = ops.produce("xn", rows * C * ab);
    ops.produced(xn, ops.sfu(ops.norm(), x, rows, C, xn.where));
    tensor q = ops.produce("q", rows * Q * ab);
    ops.produced(q, ops.project(xn, w.q, C, Q, q.where, rows));
    ops.wait(q.producer);
    const ticket tk = ops.append_kv(xn, l, false, p);
    ops.wait(tk);
    const ticket tv = ops.append_kv(xn, l, true, p);
    ops.last_use(xn, tv);
    ops.wait(tv);
    ops.wait(ops.rope_k(l, p, tk));
    q.producer = ops.sfu(opcode::rope, q, rows * m.heads, m.head_dim, q.where);
    ops.wait(q.producer);

    tensor attn = ops.produce("attn", rows * Q * ab);
    const ticket ta = ops.attention(q, p, l, attn.where);
    ops.last_use(q, ta);
    ops.produced(attn, ta);
    ops.wait(ta);
    tensor o = ops.produce("o", rows * C * ab);
    ops.produced(o, ops.project(attn, w.o, Q, C, o.where, rows));
    ops.last_use(attn, o.producer);
    ops.wait(o.producer);
    const ticket add1 = ops.sfu(opcode::add, x, rows, C, x.where, &o);
    ops.last_use(o, add1);
    x.producer = add1;

    ops.ffn(x, l, rows, /*overlap=*/false);
  }
};

KELLE_REGISTER(schedulers(), "baseline", "the paper's Figure 12(a): one operation after another, weights on demand",
               [] { return std::make_unique<baseline>(); });

}  // namespace

scheduler_registry& schedulers() {
  static scheduler_registry r("schedulers", "firmware schedulers (scheduler)");
  return r;
}

}  // namespace kelle
