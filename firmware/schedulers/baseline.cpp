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
  void layer(layer_ops& ops, const pass_info& p, unsigned l, tensor& x) override {
    const model_shape& m = ops.model();
    const auto& w = ops.plan().weights(l);
    const std::uint64_t rows = std::uint64_t(p.batch) * p.rows, C = m.hidden, ab = model_shape::act_bytes;
    const std::uint64_t Q = std::uint64_t(m.heads) * m.head_dim;
    driver& d = ops.drv();
    const auto mark = ops.plan().mark();
    const opcode norm = m.norm == norm_kind::rmsnorm ? opcode::rmsnorm : opcode::layernorm;

    tensor xn = ops.produce("xn", rows * C * ab);
    ops.produced(xn, ops.sfu(norm, x, rows, C, xn.where));
    tensor q = ops.produce("q", rows * Q * ab);
    ops.produced(q, ops.project(xn, w.q, C, Q, q.where, rows));
    d.wait(q.producer);
    const ticket tk = ops.append_kv(xn, l, false, p);
    d.wait(tk);
    const ticket tv = ops.append_kv(xn, l, true, p);
    ops.last_use(xn, tv);
    d.wait(tv);
    tensor k_new{ops.kv_slot(l, false, p), tk, -1, "k"};
    d.wait(ops.sfu(opcode::rope, k_new, rows * m.kv_heads, m.head_dim, k_new.where));
    q.producer = ops.sfu(opcode::rope, q, rows * m.heads, m.head_dim, q.where);
    d.wait(q.producer);

    tensor attn = ops.produce("attn", rows * Q * ab);
    const ticket ta = ops.attention(q, p, l, attn.where);
    ops.last_use(q, ta);
    ops.produced(attn, ta);
    d.wait(ta);
    tensor o = ops.produce("o", rows * C * ab);
    ops.produced(o, ops.project(attn, w.o, Q, C, o.where, rows));
    ops.last_use(attn, o.producer);
    d.wait(o.producer);
    const ticket add1 = ops.sfu(opcode::add, x, rows, C, x.where, &o);
    ops.last_use(o, add1);
    x.producer = add1;

    tensor xn2 = ops.produce("xn", rows * C * ab);
    ops.produced(xn2, ops.sfu(norm, x, rows, C, xn2.where));
    tensor h = ops.produce("ffn", rows * m.ffn * ab);
    tensor f_out = ops.produce("o", rows * C * ab);
    if (m.ffn_type == ffn_kind::gated_silu) {
      tensor up = ops.produce("ffn", rows * m.ffn * ab);
      ops.produced(h, ops.project(xn2, w.gate, C, m.ffn, h.where, rows));
      d.wait(h.producer);
      ops.produced(up, ops.project(xn2, w.up, C, m.ffn, up.where, rows));
      ops.last_use(xn2, up.producer);
      d.wait(up.producer);
      h.producer = ops.sfu(opcode::silu, h, rows, m.ffn, h.where);
      const ticket mul = ops.sfu(opcode::mul, h, rows, m.ffn, h.where, &up);
      ops.last_use(up, mul);
      h.producer = mul;
    } else {
      ops.produced(h, ops.project(xn2, w.up, C, m.ffn, h.where, rows));
      ops.last_use(xn2, h.producer);
      d.wait(h.producer);
      // ReLU (OPT) costs as the SFU's LUT activation; GeLU models use the same path.
      h.producer = ops.sfu(opcode::gelu, h, rows, m.ffn, h.where);
    }
    d.wait(h.producer);
    ops.produced(f_out, ops.project(h, w.down, m.ffn, C, f_out.where, rows));
    ops.last_use(h, f_out.producer);
    d.wait(f_out.producer);
    const ticket add2 = ops.sfu(opcode::add, x, rows, C, x.where, &f_out);
    ops.last_use(f_out, add2);
    x.producer = add2;
    d.wait(add2);
    ops.plan().release(mark);
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
