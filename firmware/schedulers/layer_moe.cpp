// A mixture-of-experts FFN as the firmware issues it (layer_ops::moe_ffn; docs/models/model-zoo.md,
// "Mixture of experts"): the experts the pass's tokens route to are streamed once each.
#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/expert_routing.h"

#include <algorithm>

namespace kelle {

void layer_ops::moe_ffn(tensor& x, unsigned layer, std::uint64_t rows, bool overlap, tile_load first) {
  const auto& w = m_plan.weights(layer);
  const std::uint64_t C = m_model.hidden, F = m_model.expert_ffn, E = m_model.experts, ab = model_shape::act_bytes;
  auto step = [&](const ticket& t) {
    if (!overlap) m_drv.wait(t);
  };
  auto next_weights = [&](std::uint64_t addr, std::uint64_t k, std::uint64_t n) {
    return overlap ? prefetch(addr, k, n) : tile_load{};
  };
  tensor xn = produce("xn", rows * C * ab);
  produced(xn, sfu(norm(), x, rows, C, xn.where));
  step(xn.producer);
  // The router: logits over the experts, their softmax (the gate weights), and per row the k
  // largest: the SFU's search streams each row's E scores once, keeping the k best (its
  // min_search, one comparison per score).
  tensor logits = produce("router", rows * E * ab);
  produced(logits, project(xn, w.router, C, E, logits.where, rows, first));
  step(logits.producer);
  logits.producer = sfu(opcode::softmax, logits, rows, E, logits.where);
  step(logits.producer);
  tensor chosen = produce("router", rows * 4);
  produced(chosen, sfu(opcode::min_search, logits, rows, E, chosen.where));
  last_use(logits, chosen.producer);
  step(chosen.producer);

  // The experts in the order they are streamed: the shared ones (on every row), then the routed
  // ones the pass's tokens use (ascending), each on its tokens.
  const std::vector<expert_routing::load>& routed = m_routing->route(m_pass_index, layer, rows);
  const int phase = m_pass_prefill ? 1 : 0;
  *m_moe_layers[phase] += 1;
  const std::size_t shared = m_model.shared_experts, count = shared + routed.size();
  auto expert_of = [&](std::size_t i) { return i < shared ? unsigned(E + i) : routed[i - shared].expert; };
  auto rows_of_expert = [&](std::size_t i) { return i < shared ? rows : std::uint64_t(routed[i - shared].tokens); };
  const bool gated = m_model.gated_ffn();
  auto first_matrix = [&](unsigned e) { return gated ? w.expert_gate(e) : w.expert_up(e); };

  // The experts' buffers, sized for the most rows an expert takes and reused by each in turn (at
  // the same places, so an expert's writes never reach a buffer the previous one is still read from).
  std::uint64_t most = 0;
  for (std::size_t i = 0; i < count; ++i) most = std::max(most, rows_of_expert(i));
  tensor out = produce("o", rows * C * ab);  // the weighted sum of the experts' outputs
  tensor h = produce("ffn", most * F * ab);
  tensor up = gated ? produce("ffn", most * F * ab) : tensor{};
  tensor y = produce("expert", most * C * ab);
  tile_load next = count ? next_weights(first_matrix(expert_of(0)), C, F) : tile_load{};
  ticket last_gemm = chosen.producer;
  for (std::size_t i = 0; i < count; ++i) {
    if (i >= shared) {
      if (m_probe && !m_pass_prefill && i == shared + 1) m_probe->routed_begin(routed.size() - 1);
      *m_moe_experts[phase] += 1;
    }
    const unsigned e = expert_of(i);
    const std::uint64_t n = rows_of_expert(i);
    // Its tokens' rows of xn: the array's A operand gathers them (n rows read).
    if (gated) {  // SwiGLU, or GeGLU
      produced(h, project(xn, w.expert_gate(e), C, F, h.where, n, next));
      next = next_weights(w.expert_up(e), C, F);
      step(h.producer);
      h.producer = sfu(m_model.ffn_type == ffn_kind::gated_gelu ? opcode::gelu : opcode::silu, h, n, F, h.where);
      produced(up, project(xn, w.expert_up(e), C, F, up.where, n, next));
      next = next_weights(w.expert_down(e), F, C);
      step(up.producer);
      const ticket mul = sfu(opcode::mul, h, n, F, h.where, &up);
      last_use(up, mul);
      h.producer = mul;
    } else {
      produced(h, project(xn, w.expert_up(e), C, F, h.where, n, next));
      next = next_weights(w.expert_down(e), F, C);
      step(h.producer);
      h.producer = sfu(opcode::gelu, h, n, F, h.where);
    }
    step(h.producer);
    produced(y, project(h, w.expert_down(e), F, C, y.where, n, next));
    last_use(h, y.producer);
    last_gemm = y.producer;
    // The next expert's first tile loads while this one's down projection computes.
    next = i + 1 < count ? next_weights(first_matrix(expert_of(i + 1)), C, F) : tile_load{};
    step(y.producer);
    // out += g x y: the expert's output, scaled by its tokens' gate weights (a routed expert; the
    // shared ones are not scaled), added into the layer's output: one multiply-add per element,
    // costed as the SFU's add (the same beats; the row's scale rides with it).
    const ticket add = sfu(opcode::add, out, n, C, out.where, &y);
    last_use(y, add);
    if (i == 0)
      produced(out, add);
    else
      out.producer = add;
    step(add);
  }
  if (m_probe && !m_pass_prefill && count > shared + 1) m_probe->routed_end();
  last_use(xn, last_gemm);
  last_use(chosen, out.producer);
  const ticket add = sfu(opcode::add, x, rows, C, x.where, &out);
  last_use(out, add);
  x.producer = add;
}

}  // namespace kelle
