#include "firmware/workload/memory_plan.h"
#include "platform/system/workload.h"

#include "models/interconnect/router.h"
#include "models/memory/memory_target.h"
#include "models/memory/refresh_control.h"

#include <map>
#include <sstream>

namespace kelle {

namespace {

std::uint64_t align(std::uint64_t v, std::uint64_t a = 4096) { return (v + a - 1) / a * a; }

// A region of memory `mem` (which the system has), its memory resolved.
region place(platform_view& p, const std::string& mem, std::uint64_t addr, std::uint64_t bytes, bool on_chip) {
  return region{mem, addr, bytes, on_chip, p.memory(mem), p.interconnect().base_of(mem)};
}

}  // namespace

unsigned memory_plan::kv_layers_fitting(unsigned layers, std::uint64_t kv_capacity, std::uint64_t half) {
  // Each on-chip layer takes its K and V halves, each aligned (the constructor's take()).
  return static_cast<unsigned>(std::min<std::uint64_t>(layers, kv_capacity / (2 * align(half))));
}

std::uint64_t memory_plan::kv_chip_tokens(std::uint64_t left, std::uint64_t token_bytes, std::uint64_t max_tokens) {
  std::uint64_t t = std::min<std::uint64_t>(max_tokens - 1, left / (2 * token_bytes));
  while (t && 2 * align(t * token_bytes) > left) --t;  // aligned fit
  return t;
}

memory_plan::layer_weights memory_plan::layer_layout(const model_shape& m, unsigned layer, std::uint64_t base,
                                                     std::uint64_t& end) {
  const std::uint64_t c = m.hidden, q = std::uint64_t(m.heads) * m.head_dim, kv = m.kv_half_width();
  const bool gated = m.gated_ffn();
  layer_weights w;
  std::uint64_t d = base;
  w.q = d, d += align(c * q);
  w.k = d, d += align(c * kv);
  w.v = d, d += align(c * kv);
  if (m.latent_kv()) {  // W_kv_b; W_o takes the heads' values (v_head_dim each)
    w.kv_b = d, d += align(std::uint64_t(m.kv_lora_rank) * m.heads * (m.qk_nope_dim + m.v_head_dim));
    w.o = d, d += align(std::uint64_t(m.heads) * m.v_head_dim * c);
  } else {
    w.o = d, d += align(q * c);
  }
  if (m.moe_layer(layer)) {  // the router, then the routed experts and the shared ones
    w.gate = w.up = w.down = 0;
    w.router = d, d += align(c * m.experts);
    w.gated_experts = gated;
    w.experts = d;
    w.expert_matrix = align(c * m.expert_ffn);
    w.expert_stride = (gated ? 3 : 2) * w.expert_matrix;
    d += std::uint64_t(m.experts + m.shared_experts) * w.expert_stride;
    end = d;
    return w;
  }
  w.gate = gated ? d : 0, d += gated ? align(c * m.ffn) : 0;
  w.up = d, d += align(c * m.ffn);
  w.down = d, d += align(std::uint64_t(m.ffn) * c);
  end = d;
  return w;
}

memory_plan::sizes memory_plan::size(const model_shape& m, unsigned batch, std::uint64_t max_tokens, const config_node& pl,
                                     const std::function<std::uint64_t(const std::string&)>& capacity,
                                     const std::string& names) {
  constexpr std::uint64_t none = ~std::uint64_t(0);
  auto pick = [&](std::initializer_list<const char*> options) -> std::string {  // the first the system has
    for (const char* n : options)
      if (capacity(n) != none) return n;
    return {};
  };
  sizes z;
  z.dram = pl.get_string("dram", "dram", "memory holding weights and off-chip data");
  if (capacity(z.dram) == none) pl.fail("dram", "no memory named '" + z.dram + "' (this system has: " + names + ")");
  z.weight_mem = pl.get_string("weight_memory", pick({"weight_sram", "sram"}), "on-chip memory of the weight tile buffers");
  z.kv_mem = pl.get_string("kv_memory", pick({"kv_edram", "sram"}), "on-chip memory of the KV cache");
  z.act_mem = pl.get_string("act_memory", pick({"act_edram", "sram"}), "on-chip memory of activations");
  for (const auto& [key, name] : {std::pair<const char*, std::string>{"weight_memory", z.weight_mem},
                                  {"kv_memory", z.kv_mem}, {"act_memory", z.act_mem}})
    if (capacity(name) == none) pl.fail(key, "no memory named '" + name + "' (this system has: " + names + ")");

  // On-chip carve-up: memories shared by several roles (the SRAM baselines' one SRAM) are split
  // in order weights, activations, KV (the constructor's take() in the same order).
  std::map<std::string, std::uint64_t> used;
  const std::uint64_t wcap = capacity(z.weight_mem);
  const bool shared_w = z.weight_mem == z.kv_mem || z.weight_mem == z.act_mem;
  const std::uint64_t wbuf = pl.get_uint("weight_buffer_KiB", (shared_w ? wcap / 2 : wcap) / 1024,
                                         "bytes of the weight SRAM used for the two tile buffers, KiB", 2) * 1024;
  if (wbuf > wcap)
    pl.fail("weight_buffer_KiB", "larger than " + z.weight_mem + " (" + std::to_string(wcap / 1024) + " KiB)");
  z.tile_buffer = wbuf / 2;
  used[z.weight_mem] += 2 * align(z.tile_buffer);

  const std::uint64_t acap = capacity(z.act_mem) - used[z.act_mem];
  const bool shared_a = z.act_mem == z.kv_mem;
  z.arena = pl.get_uint("act_arena_KiB", (shared_a ? std::min<std::uint64_t>(acap, 256 * 1024) : acap) / 1024,
                        "bytes of the activation memory used for activations, KiB", 1) * 1024;
  if (z.arena > acap)
    pl.fail("act_arena_KiB", "larger than what is left of " + z.act_mem + " (" + std::to_string(acap / 1024) + " KiB)");
  used[z.act_mem] += align(z.arena);

  // Weights in DRAM.
  std::uint64_t d = 0;
  for (unsigned l = 0; l < m.layers; ++l) layer_layout(m, l, d, d);
  d += align(std::uint64_t(m.vocab) * m.hidden);                                     // the LM head
  d += m.tied_embeddings ? 0 : align(std::uint64_t(m.vocab) * m.hidden);             // the embedding table
  z.weight_bytes = d;

  // KV stream buffers (opt-in): the paper pages the KV that does not fit on chip to DRAM and
  // prefetches it sequentially into the eDRAM (section 6, long contexts); the buffers' size is
  // not given. Off by default: docs/firmware.md, "KV streaming", says why.
  const std::uint64_t sfree = capacity(z.kv_mem) - used[z.kv_mem];
  const std::uint64_t sbytes =
      pl.get_uint("kv_stream_KiB", 0,
                  "bytes of the KV memory used for the two buffers the DRAM-resident KV streams through, KiB (0: none)",
                  0) * 1024;
  if (sbytes > sfree)
    pl.fail("kv_stream_KiB", "larger than what is left of " + z.kv_mem + " (" + std::to_string(sfree / 1024) + " KiB)");
  if (sbytes && sbytes < 2 * 4096) pl.fail("kv_stream_KiB", "at least 8 KiB (two 4 KiB buffers), or 0 for none");
  z.stream = sbytes / 2 / 4096 * 4096;
  used[z.kv_mem] += 2 * align(z.stream);

  // KV cache: K (or V) of one token of one sequence is kv_heads rows in the KV format.
  z.kv_slot = std::uint64_t(batch) * m.kv_bytes_per_token_layer() / 2;
  z.kv_half = max_tokens * z.kv_slot;
  const std::uint64_t kvcap = capacity(z.kv_mem) - used[z.kv_mem];
  z.fill = pl.get_choice("kv_placement", "fill", {"first_layers", "fill"}) == "fill";
  // Windowed layers take the KV memory first: once W tokens have arrived, every byte of a window
  // is read by every decode step, while a global layer's slots are sized for the run's last
  // token and partly empty before it, so a byte of eDRAM saves the most DRAM traffic per step in
  // a window (docs/firmware.md, "Placement").
  for (unsigned l = 0; l < m.layers; ++l)
    if (m.window(l) && m.kv_slots(l, max_tokens) < max_tokens) z.chip_order.push_back(l);
  for (unsigned l = 0; l < m.layers; ++l)
    if (!(m.window(l) && m.kv_slots(l, max_tokens) < max_tokens)) z.chip_order.push_back(l);
  std::uint64_t left = kvcap;
  for (const unsigned l : z.chip_order) {  // whole layers, each K and V half aligned (take())
    const std::uint64_t two = 2 * align(z.half_of(m, l, max_tokens));
    if (two > left) break;
    left -= two;
    ++z.kv_on_chip;
  }
  if (z.fill && z.kv_on_chip < m.layers)  // what capacity is left holds the next layer's first slots
    z.chip_tokens = kv_chip_tokens(left, z.kv_slot, m.kv_slots(z.chip_order[z.kv_on_chip], max_tokens));
  return z;
}

memory_plan::memory_plan(const model_shape& m, unsigned batch, std::uint64_t max_tokens, platform_view& p,
                         const config_node& pl, bool functional)
    : m_kv_tokens(max_tokens) {
  const sizes z = size(
      m, batch, max_tokens, pl,
      [&p](const std::string& name) {
        const memory_target* t = p.memory(name);
        return t ? t->capacity_bytes() : ~std::uint64_t(0);
      },
      p.memory_names());
  m_dram = z.dram;
  memory_target* dram = p.memory(m_dram);
  const std::string& wmem = z.weight_mem;
  const std::string& kvmem = z.kv_mem;
  const std::string& amem = z.act_mem;

  // On-chip regions, in the order size() carved them.
  std::map<std::string, std::uint64_t> used;
  auto take = [&](const std::string& mem, std::uint64_t bytes) {
    region r = place(p, mem, p.interconnect().base_of(mem) + used[mem], bytes, true);
    used[mem] += align(bytes);
    return r;
  };
  m_weight_buf[0] = take(wmem, z.tile_buffer);
  m_weight_buf[1] = take(wmem, z.tile_buffer);
  m_act = activation_arena(take(amem, z.arena));

  // Weights in DRAM.
  std::uint64_t d = p.interconnect().base_of(m_dram);
  for (unsigned l = 0; l < m.layers; ++l) m_weights.push_back(layer_layout(m, l, d, d));
  m_lm_head = d, d += align(std::uint64_t(m.vocab) * m.hidden);
  d += m.tied_embeddings ? 0 : align(std::uint64_t(m.vocab) * m.hidden);  // the embedding table

  if (z.stream) {
    m_kv_stream[0] = take(kvmem, z.stream);
    m_kv_stream[1] = take(kvmem, z.stream);
  }

  // KV cache.
  if (!m.kv.is_default())
    m_kv_format = m.kv.name() + (m.kv.group() ? " G=" + std::to_string(m.kv.group()) : std::string()) + " KV";
  const std::uint64_t half = z.kv_half;  // K or V of a layer
  const bool fill = z.fill;
  m_kv_on_chip = z.kv_on_chip;
  const std::uint64_t token_bytes = z.kv_slot;  // one slot, K or V
  // The DRAM-resident KV: when weights and KV exceed the DRAM, the run is refused unless the
  // scenario allows the overflow (placement.allow_dram_overflow). Then the KV halves that do not
  // fit share addresses with others in a fold of the DRAM (every half still at an address of
  // its own bank and row pattern; the activation spills share them too), and the DRAM's timing
  // and energy are those of the modelled part: the run reports by how many bytes it exceeded the
  // capacity (docs/firmware.md, "Placement"). Functional mode carries real data and cannot fold.
  const std::uint64_t base = p.interconnect().base_of(m_dram), dram_end = base + dram->capacity_bytes();
  m_kv.resize(m.layers);
  for (unsigned i = 0; i < m_kv_on_chip; ++i) m_kv[z.chip_order[i]].on_chip = true;
  m_partial = fill && m_kv_on_chip < m.layers && z.chip_tokens ? z.chip_order[m_kv_on_chip] : m.layers;
  std::uint64_t kv_dram = 0;
  for (unsigned l = 0; l < m.layers; ++l) {
    m_kv[l].slots = m.kv_slots(l, max_tokens);
    if (!m_kv[l].on_chip) kv_dram += 2 * align(z.half_of(m, l, max_tokens));
  }
  const bool allow = pl.get_bool("allow_dram_overflow", false,
                                 "let weights and KV exceed the DRAM's capacity (KV addresses folded; timing and energy unchanged)");
  const std::uint64_t need = d - base + kv_dram;
  std::uint64_t fold_base = d, fold_slots = 0;
  if (need >= dram->capacity_bytes()) {
    const std::string what = m.name + " does not fit in " + m_dram + ": weights and KV need " + std::to_string(need >> 20) +
                             " MiB of its " + std::to_string(dram->capacity_bytes() >> 20) + " MiB";
    if (!allow)
      pl.fail("allow_dram_overflow", what + "; reduce workload.batch, context_len or decode_len, choose a smaller model, "
                                           "or set workload.placement.allow_dram_overflow: true to run it anyway");
    if (functional) pl.fail("allow_dram_overflow", what + ": functional mode cannot fold the KV's addresses");
    // The fold: every DRAM-resident K or V half at one of the addresses after the weights.
    if (d + 2 * align(half) > dram_end)
      pl.fail("allow_dram_overflow", what + ": the weights leave no room for a layer's KV");
    fold_slots = (dram_end - d) / align(half);
    m_overflow_bytes = need - dram->capacity_bytes();
  }
  std::uint64_t dram_half = 0;  // DRAM-resident K and V halves placed so far
  auto place_kv_half = [&](std::uint64_t bytes) {  // at most `half` (a windowed layer's fewer)
    region r;
    if (fold_slots) {
      r = place(p, m_dram, fold_base + (dram_half % fold_slots) * align(half), bytes, false);
      d = std::max(d, std::min(fold_base + fold_slots * align(half), fold_base + (dram_half + 1) * align(half)));
    } else {
      r = place(p, m_dram, d, bytes, false);
      d += align(bytes);
    }
    ++dram_half;
    return r;
  };
  for (unsigned i = 0; i < m_kv_on_chip; ++i) {  // the whole layers on chip, in chip order
    kv_layer& k = m_kv[z.chip_order[i]];
    k.k = take(kvmem, z.half_of(m, z.chip_order[i], max_tokens));
    k.v = take(kvmem, z.half_of(m, z.chip_order[i], max_tokens));
  }
  for (unsigned l = 0; l < m.layers; ++l) {
    kv_layer& k = m_kv[l];
    if (k.on_chip) continue;
    k.k = place_kv_half(z.half_of(m, l, max_tokens));
    k.v = place_kv_half(z.half_of(m, l, max_tokens));
  }
  if (m_partial < m.layers) {  // what capacity is left holds this layer's first slots
    kv_layer& k = m_kv[m_partial];
    k.chip_tokens = z.chip_tokens;
    k.k_chip = take(kvmem, k.chip_tokens * token_bytes);
    k.v_chip = take(kvmem, k.chip_tokens * token_bytes);
  }

  // DRAM spill area for activations: what is left of DRAM.
  m_dram_used = d - base;
  m_allow_overflow = allow;
  m_spill_error = allow ? pl.error_text("allow_dram_overflow",
                                        "the activations of a pass do not fit in " + m_dram +
                                            " even with its addresses shared (a buffer larger than the DRAM "
                                            "after the weights); reduce workload.batch or context_len")
                        : pl.error_text("allow_dram_overflow",
                                        "the activations of a pass do not fit in " + m_dram +
                                            " beside the weights and KV; reduce workload.batch or context_len, or "
                                            "set workload.placement.allow_dram_overflow: true to let them share its "
                                            "addresses");
  m_fold_base = fold_base;
  m_fold_bytes = dram_end - fold_base;
  if (!fold_slots && d >= dram_end)  // the weights alone (the KV's need was checked above)
    pl.fail("allow_dram_overflow", m.name + "'s weights need " + std::to_string(m_dram_used >> 20) + " MiB of " +
                                       m_dram + "'s " + std::to_string(dram->capacity_bytes() >> 20) + " MiB");
  // With a fold, the activation spills share the addresses after the weights with the folded
  // KV (both are timing only).
  if (fold_slots) d = fold_base;
  m_spill = place(p, m_dram, d, dram_end - d, false);
}

refresh_control* refresh_of(const region& r, std::uint64_t& local) {
  local = r.addr - r.base;
  return r.target ? r.target->refresh() : nullptr;
}

region memory_plan::alloc(std::uint64_t bytes) {
  region r;
  if (m_act.alloc(bytes, r)) return r;  // the arena if it fits, else the DRAM spill
  if (m_spill_used + bytes > m_spill.bytes) {
    // With the overflow allowed, spills that do not fit share addresses after the weights
    // (timing only); the bytes beyond the DRAM's capacity are counted as overflow.
    if (m_allow_overflow && bytes <= m_fold_bytes) {
      const std::uint64_t over = m_spill_used + bytes - m_spill.bytes;
      if (over > m_spill_overflow) {
        m_overflow_bytes += over - m_spill_overflow;
        m_spill_overflow = over;
      }
      r = m_spill;
      r.addr = m_fold_base + (m_spill_used % (m_fold_bytes - bytes + 1)) / 64 * 64;
      r.bytes = bytes;
      m_spill_used += align(bytes, 64);
      return r;
    }
    record_run_input_error(m_spill_error + " (" + std::to_string(bytes) + " B more wanted)");
    stop_run_for_input_error();
  }
  r = m_spill;
  r.addr = m_spill.addr + m_spill_used;
  r.bytes = bytes;
  m_spill_used += align(bytes, 64);
  return r;
}

std::string memory_plan::activations_error(std::uint64_t live, std::uint64_t largest, const std::string& what) const {
  const auto mib = [](std::uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; };
  if (m_allow_overflow) {
    if (largest <= arena().bytes || largest <= m_fold_bytes) return {};
    return m_spill_error + " (" + what + ": a buffer of " + mib(largest) + ", more than the " + mib(m_fold_bytes) +
           " of " + m_dram + " after the weights)";
  }
  if (live <= arena().bytes + m_spill.bytes) return {};
  return m_spill_error + " (" + what + ": at least " + mib(live) + " at once; the arena and the spare " + m_dram +
         " hold " + mib(arena().bytes + m_spill.bytes) + ")";
}

std::uint64_t memory_plan::reserve_top(std::uint64_t bytes) {
  if (bytes > m_spill.bytes - m_spill_used)
    throw std::runtime_error(std::to_string(bytes >> 20) + " MiB wanted, " +
                             std::to_string((m_spill.bytes - m_spill_used) >> 20) + " MiB of " + m_dram + " free");
  m_spill.bytes -= bytes;
  return m_spill.addr + m_spill.bytes;
}

std::string memory_plan::describe() const {
  std::ostringstream o;
  o << "weight tile buffers 2 x " << (m_weight_buf[0].bytes >> 10) << " KiB in " << m_weight_buf[0].memory
    << "; KV of " << m_kv_on_chip << " of " << m_kv.size() << " layers on chip";
  if (!m_kv.empty()) {
    std::uint64_t local = 0, global = 0;  // a windowed layer's and a global layer's KV
    for (const kv_layer& k : m_kv) (k.slots < m_kv_tokens ? local : global) = k.k.bytes * 2;
    o << " (";
    if (local) o << (local >> 10) << " KiB per windowed layer, on chip first" << (global ? ", " : "");
    if (global) o << (global >> 10) << " KiB per " << (local ? "global " : "") << "layer";
    o << (m_kv_format.empty() ? "" : ", " + m_kv_format) << ")";
  }
  if (m_partial < m_kv.size())
    o << " and the first " << m_kv[m_partial].chip_tokens << " token slots of layer " << m_partial;
  if (kv_stream_bytes()) o << "; KV stream buffers 2 x " << (kv_stream_bytes() >> 10) << " KiB in " << m_kv_stream[0].memory;
  o << "; activation arena " << (arena().bytes >> 10) << " KiB in " << arena().memory;
  if (m_overflow_bytes)
    o << "; weights and KV exceed " << m_dram << " by " << (m_overflow_bytes >> 20) << " MiB (KV addresses folded)";
  return o.str();
}

}  // namespace kelle
