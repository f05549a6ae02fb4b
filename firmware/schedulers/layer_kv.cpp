// layer_ops' KV cache geometry and writes: the slot of a pass's new tokens in a layer's cache
// (kv_slot; a windowed layer's ring, a partly placed layer's chip and DRAM parts), MM_k and MM_v
// into the slots (append_kv), the keys' RoPE in place (rope_k), AERP's x store, and the copy of
// new rows to chip when a pass ends (finish_pass).
#include "firmware/schedulers/layer_ops.h"

#include <algorithm>

namespace kelle {

region layer_ops::kv_slot(unsigned layer, bool v, const pass_info& pass) const {
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  const std::uint64_t per_token = m_model.kv_bytes_per_token_layer() / 2;  // K or V, in the KV format
  // A new token takes an evicted slot once the cache is full (policies overwrite in place); a
  // windowed layer's token t takes slot t mod W (its slots are a ring).
  const std::uint64_t slot = pass.kv_offset % kv.slots;
  // A banded prefill (more context than the window) fills the whole ring with its last W tokens.
  const std::uint64_t rows = pass.banded(layer) ? kv.slots : pass.rows;
  // Slots below chip_tokens of a partly placed layer are on chip (a range that straddles the
  // boundary, a prefill's, is written to DRAM; docs/firmware.md).
  const bool chip = chip_slots(layer) && slot + rows <= kv.chip_tokens;
  region r = chip ? (v ? kv.v_chip : kv.k_chip) : (v ? kv.v : kv.k);
  r.addr += slot * per_token * pass.batch;
  r.bytes = pass.batch * rows * per_token;
  return r;
}

ticket layer_ops::append_kv(const tensor& xn, unsigned layer, bool v, const pass_info& pass, tile_load first) {
  const auto& w = m_plan.weights(layer);
  const region slot = kv_slot(layer, v, pass);
  const std::uint64_t kv = m_model.kv_half_width(), rows = std::uint64_t(pass.batch) * pass.rows;
  // The prefill computes every token's K and V anyway: nothing to recompute.
  const std::uint64_t S = pass.prefill ? 0 : pass.recompute_rows(layer);
  if (m_stage.layer != layer) copy_new_rows();  // a previous layer's, if its attention did not run
  if (pass.banded(layer)) {
    // The prefill of a windowed layer with more context than its window: every context token's
    // K and V go to a staging buffer (activations), which the band attention reads; the last W
    // tokens are then copied into the ring (copy_new_rows), the earlier ones are gone.
    if (m_stage.layer != layer) {
      m_stage = staging{};
      m_stage.layer = layer;
    }
    m_stage.rows = rows;
    m_stage.stacked = 0;
    tensor& buf = m_stage.buf[v];
    buf = produce(v ? "v_band" : "k_band", rows * kv * model_shape::act_bytes);
    const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, buf.where, rows, first,
                                  traffic_class::activations, 0, region{});
    produced(buf, t);
    m_stage.slot[v] = slot;
    m_stage.from[v] = buf.where.bytes - std::min(buf.where.bytes, slot.bytes);  // the last W tokens
    m_stage.ready[v] = t;
    m_stage.copy_pending[v] = true;
    return t;
  }
  if (S == 0) {
    absent(size_rule::staging);  // where a pass that recomputes would put its staging buffer
    const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, slot, rows, first, traffic_class::kv, 0,
                                  region{});
    m_kv_written += static_cast<double>(slot.bytes);
    if (v) m_latent_v = t;  // latent KV: the RoPE key is in this half
    return t;
  }
  // AERP: [new rows; recomputed rows] into the staging buffer, weights streamed once.
  if (m_stage.layer != layer) {
    m_stage = staging{};
    m_stage.layer = layer;
  }
  m_stage.rows = rows;
  m_stage.stacked = S;
  tensor& buf = m_stage.buf[v];
  buf = produce(v ? "v_recomputed" : "k_recomputed", staging_bytes(pass, layer), size_rule::staging);
  const ticket t = project_rows(xn, v ? w.v : w.k, m_model.hidden, kv, buf.where, rows, first, traffic_class::activations,
                                S, x_store(layer, S));
  produced(buf, t);
  m_stage.slot[v] = slot;
  m_stage.from[v] = 0;
  m_stage.ready[v] = t;
  m_stage.copy_pending[v] = true;
  return t;
}

ticket layer_ops::rope_k(unsigned layer, const pass_info& pass, const ticket& k) {
  const std::uint64_t rows = std::uint64_t(pass.batch) * pass.rows;
  if (m_model.latent_kv()) {
    // The RoPE key: the last qk_rope_dim elements of each new latent row, which MM_v (W_kv_a's
    // second half of columns) wrote into the cache's V half.
    const std::uint64_t dr = m_model.qk_rope_dim, ab = model_shape::act_bytes;
    tensor in{kv_slot(layer, true, pass), m_latent_v, -1, "k"};
    in.where.addr += in.where.bytes - std::min(in.where.bytes, rows * dr * ab);
    in.where.bytes = std::min(in.where.bytes, rows * dr * ab);
    return sfu_as(traffic_class::kv, opcode::rope, in, rows, dr, in.where);
  }
  const bool staged = m_stage.layer == layer && m_stage.copy_pending[0];
  // The new rows' and, staged, the recomputed rows' keys (positions from the firmware's tables).
  tensor in{staged ? m_stage.buf[0].where : kv_slot(layer, false, pass), k, -1, "k"};
  const std::uint64_t n = staged ? rows + m_stage.stacked : rows;
  if (staged) in.where.bytes = n * m_model.kv_heads * m_model.head_dim * model_shape::act_bytes;
  // The SFU reads and writes 16-bit elements. In a cache of an integer KV format the new keys'
  // RoPE is costed as 16-bit reads and writes of their rows (a quantising design rotates before
  // it quantises; docs/policies/kv-format.md): kept inside the layer's region.
  const std::uint64_t sfu_bytes = n * m_model.kv_heads * m_model.head_dim * model_shape::act_bytes;
  if (!staged && sfu_bytes > in.where.bytes) {
    const memory_plan::kv_layer& kv = m_plan.kv(layer);
    const region& whole = in.where.addr >= kv.k.addr && in.where.addr < kv.k.addr + kv.k.bytes ? kv.k : kv.k_chip;
    in.where.addr = std::max(whole.addr, std::min(in.where.addr, whole.addr + whole.bytes - std::min(whole.bytes, sfu_bytes)));
    in.where.bytes = sfu_bytes;
  }
  // Keys in the cache are KV traffic; the staging buffer is an activation buffer.
  const ticket t = sfu_as(staged ? traffic_class::activations : traffic_class::kv, opcode::rope, in,
                          n * m_model.kv_heads, m_model.head_dim, in.where);
  if (staged) m_stage.ready[0] = t;
  return t;
}

region layer_ops::x_store(unsigned layer, std::uint64_t rows) const {
  // x of a token replaces its K and V. Timing addresses model which memory and banks are
  // touched, not a slot map: the x vectors are placed at the end of the layer's allocation (V,
  // then K before it). A token keeps the x format until every head has evicted it, so the x
  // store can outgrow the layer's slots; what does not fit them is in DRAM, at the end of the
  // spare DRAM (activation spills grow from its start).
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  region r = kv.v;
  r.bytes = rows * m_model.hidden * model_shape::act_bytes;
  if (x_store_in_slots(layer, rows)) {
    r.addr = kv.v.addr + kv.v.bytes - r.bytes;
    return r;
  }
  const region& spare = m_plan.dram_spare();
  if (r.bytes > spare.bytes)
    throw std::runtime_error("AERP: the " + std::to_string(rows) + " x vectors of layer " + std::to_string(layer) +
                             " do not fit in " + spare.memory + " (" + std::to_string(spare.bytes >> 20) +
                             " MiB left after weights and KV)");
  r = spare;
  r.addr = spare.addr + spare.bytes - rows * m_model.hidden * model_shape::act_bytes;
  r.bytes = rows * m_model.hidden * model_shape::act_bytes;
  return r;
}

bool layer_ops::x_store_in_slots(unsigned layer, std::uint64_t rows) const {
  const memory_plan::kv_layer& kv = m_plan.kv(layer);
  return rows * m_model.hidden * model_shape::act_bytes <= kv.v.addr + kv.v.bytes - kv.k.addr;
}

void layer_ops::finish_pass() { copy_new_rows(); }

void layer_ops::copy_new_rows() {
  for (unsigned v = 0; v < 2; ++v) {
    if (!m_stage.copy_pending[v]) continue;
    m_stage.copy_pending[v] = false;
    const region& slot = m_stage.slot[v];
    m_drv.wait(m_stage.ready[v]);  // K roped, V projected
    if (m_fn) m_fn->copy_new_rows(m_stage.layer, v);
    m_drv.dma(m_stage.buf[v].where.addr + m_stage.from[v], slot.addr, slot.bytes, traffic_class::activations,
              traffic_class::kv);
    m_kv_written += static_cast<double>(slot.bytes);
  }
}

}  // namespace kelle
