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

// The first of `names` that the system has.
std::string pick(platform_view& p, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (p.memory(n)) return n;
  return {};
}

// A region of memory `mem` (which the system has), its memory resolved.
region place(platform_view& p, const std::string& mem, std::uint64_t addr, std::uint64_t bytes, bool on_chip) {
  return region{mem, addr, bytes, on_chip, p.memory(mem), p.interconnect().base_of(mem)};
}

}  // namespace

unsigned memory_plan::kv_layers_fitting(unsigned layers, std::uint64_t kv_capacity, std::uint64_t half) {
  return static_cast<unsigned>(std::min<std::uint64_t>(layers, kv_capacity / align(2 * half)));
}

std::uint64_t memory_plan::kv_chip_tokens(std::uint64_t left, std::uint64_t token_bytes, std::uint64_t max_tokens) {
  std::uint64_t t = std::min<std::uint64_t>(max_tokens - 1, left / (2 * token_bytes));
  while (t && 2 * align(t * token_bytes) > left) --t;  // aligned fit
  return t;
}

memory_plan::memory_plan(const model_shape& m, unsigned batch, std::uint64_t max_tokens, platform_view& p,
                         const config_node& pl, bool functional)
    : m_kv_tokens(max_tokens) {
  m_dram = pl.get_string("dram", "dram", "memory holding weights and off-chip data");
  memory_target* dram = p.memory(m_dram);
  if (!dram)
    pl.fail("dram", "no memory named '" + m_dram + "' (this system has: " + p.memory_names() + ")");
  const std::string wmem = pl.get_string("weight_memory", pick(p, {"weight_sram", "sram"}),
                                         "on-chip memory of the weight tile buffers");
  const std::string kvmem = pl.get_string("kv_memory", pick(p, {"kv_edram", "sram"}), "on-chip memory of the KV cache");
  const std::string amem = pl.get_string("act_memory", pick(p, {"act_edram", "sram"}), "on-chip memory of activations");
  for (const auto& [key, name] : {std::pair<const char*, std::string>{"weight_memory", wmem},
                                  {"kv_memory", kvmem}, {"act_memory", amem}})
    if (!p.memory(name)) pl.fail(key, "no memory named '" + name + "' (this system has: " + p.memory_names() + ")");

  // On-chip carve-up: memories shared by several roles (the SRAM baselines' one SRAM) are split
  // in order weights, activations, KV.
  std::map<std::string, std::uint64_t> used;
  auto take = [&](const std::string& mem, std::uint64_t bytes) {
    region r = place(p, mem, p.interconnect().base_of(mem) + used[mem], bytes, true);
    used[mem] += align(bytes);
    return r;
  };
  const std::uint64_t wcap = p.memory(wmem)->capacity_bytes();
  const bool shared_w = wmem == kvmem || wmem == amem;
  const std::uint64_t wbuf = pl.get_uint("weight_buffer_KiB", (shared_w ? wcap / 2 : wcap) / 1024,
                                         "bytes of the weight SRAM used for the two tile buffers, KiB", 2) * 1024;
  if (wbuf > wcap) pl.fail("weight_buffer_KiB", "larger than " + wmem + " (" + std::to_string(wcap / 1024) + " KiB)");
  m_weight_buf[0] = take(wmem, wbuf / 2);
  m_weight_buf[1] = take(wmem, wbuf / 2);

  const std::uint64_t acap = p.memory(amem)->capacity_bytes() - used[amem];
  const bool shared_a = amem == kvmem;
  const std::uint64_t abytes = pl.get_uint("act_arena_KiB", (shared_a ? std::min<std::uint64_t>(acap, 256 * 1024) : acap) / 1024,
                                           "bytes of the activation memory used for activations, KiB", 1) * 1024;
  if (abytes > acap) pl.fail("act_arena_KiB", "larger than what is left of " + amem + " (" + std::to_string(acap / 1024) + " KiB)");
  m_act = activation_arena(take(amem, abytes));

  // Weights in DRAM.
  std::uint64_t d = p.interconnect().base_of(m_dram);
  const std::uint64_t c = m.hidden, q = std::uint64_t(m.heads) * m.head_dim, kv = std::uint64_t(m.kv_heads) * m.head_dim;
  const bool gated = m.ffn_type == ffn_kind::gated_silu;
  for (unsigned l = 0; l < m.layers; ++l) {
    layer_weights w;
    w.q = d, d += align(c * q);
    w.k = d, d += align(c * kv);
    w.v = d, d += align(c * kv);
    w.o = d, d += align(q * c);
    w.gate = gated ? d : 0, d += gated ? align(c * m.ffn) : 0;
    w.up = d, d += align(c * m.ffn);
    w.down = d, d += align(std::uint64_t(m.ffn) * c);
    m_weights.push_back(w);
  }
  m_lm_head = d, d += align(std::uint64_t(m.vocab) * c);
  d += m.tied_embeddings ? 0 : align(std::uint64_t(m.vocab) * c);  // the embedding table

  // KV stream buffers (opt-in): the paper pages the KV that does not fit on chip to DRAM and
  // prefetches it sequentially into the eDRAM (section 6, long contexts); the buffers' size is
  // not given. Off by default: docs/firmware.md, "KV streaming", says why.
  const std::uint64_t sfree = p.memory(kvmem)->capacity_bytes() - used[kvmem];
  const std::uint64_t sbytes =
      pl.get_uint("kv_stream_KiB", 0,
                  "bytes of the KV memory used for the two buffers the DRAM-resident KV streams through, KiB (0: none)",
                  0) * 1024;
  if (sbytes > sfree)
    pl.fail("kv_stream_KiB", "larger than what is left of " + kvmem + " (" + std::to_string(sfree / 1024) + " KiB)");
  if (sbytes >= 2 * 4096) {
    m_kv_stream[0] = take(kvmem, sbytes / 2 / 4096 * 4096);
    m_kv_stream[1] = take(kvmem, sbytes / 2 / 4096 * 4096);
  } else if (sbytes) {
    pl.fail("kv_stream_KiB", "at least 8 KiB (two 4 KiB buffers), or 0 for none");
  }

  // KV cache: K (or V) of one token of one sequence is kv_heads rows in the KV format.
  const std::uint64_t kv_token = std::uint64_t(m.kv_heads) * m.kv_row_bytes();
  if (m.kv.type() != kv_format::kind::binary16)
    m_kv_format = m.kv.name() + (m.kv.grouped() ? " G=" + std::to_string(m.kv.group()) : std::string()) + " KV";
  const std::uint64_t half = std::uint64_t(batch) * max_tokens * kv_token;  // K or V of a layer
  const std::uint64_t kvcap = p.memory(kvmem)->capacity_bytes() - used[kvmem];
  const bool fill = pl.get_choice("kv_placement", "fill", {"first_layers", "fill"}) == "fill";
  m_kv_on_chip = kv_layers_fitting(m.layers, kvcap, half);
  const std::uint64_t token_bytes = std::uint64_t(batch) * kv_token;  // one slot, K or V
  // The DRAM-resident KV: when weights and KV exceed the DRAM, the run is refused unless the
  // scenario allows the overflow (placement.allow_dram_overflow). Then the KV halves that do not
  // fit share addresses with others in a fold of the DRAM (every half still at an address of
  // its own bank and row pattern; the activation spills share them too), and the DRAM's timing
  // and energy are those of the modelled part: the run reports by how many bytes it exceeded the
  // capacity (docs/firmware.md, "Placement"). Functional mode carries real data and cannot fold.
  const std::uint64_t base = p.interconnect().base_of(m_dram), dram_end = base + dram->capacity_bytes();
  const std::uint64_t kv_dram = std::uint64_t(m.layers - m_kv_on_chip) * 2 * align(half);
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
  auto place_kv_half = [&]() {
    region r;
    if (fold_slots) {
      r = place(p, m_dram, fold_base + (dram_half % fold_slots) * align(half), half, false);
      d = std::max(d, std::min(fold_base + fold_slots * align(half), fold_base + (dram_half + 1) * align(half)));
    } else {
      r = place(p, m_dram, d, half, false);
      d += align(half);
    }
    ++dram_half;
    return r;
  };
  for (unsigned l = 0; l < m.layers; ++l) {
    kv_layer k;
    if (l < m_kv_on_chip) {
      k.k = take(kvmem, half);
      k.v = take(kvmem, half);
    } else {
      k.k = place_kv_half();
      k.v = place_kv_half();
      if (fill && l == m_kv_on_chip) {  // what capacity is left holds this layer's first slots
        const std::uint64_t left = p.memory(kvmem)->capacity_bytes() - used[kvmem];
        k.chip_tokens = kv_chip_tokens(left, token_bytes, max_tokens);
        if (k.chip_tokens) {
          k.k_chip = take(kvmem, k.chip_tokens * token_bytes);
          k.v_chip = take(kvmem, k.chip_tokens * token_bytes);
        }
      }
    }
    m_kv.push_back(k);
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
  if (!m_kv.empty())
    o << " (" << (m_kv[0].k.bytes * 2 >> 10) << " KiB per layer" << (m_kv_format.empty() ? "" : ", " + m_kv_format)
      << ")";
  if (kv_layers_touching_chip() > m_kv_on_chip)
    o << " and the first " << m_kv[m_kv_on_chip].chip_tokens << " token slots of layer " << m_kv_on_chip;
  if (kv_stream_bytes()) o << "; KV stream buffers 2 x " << (kv_stream_bytes() >> 10) << " KiB in " << m_kv_stream[0].memory;
  o << "; activation arena " << (arena().bytes >> 10) << " KiB in " << arena().memory;
  if (m_overflow_bytes)
    o << "; weights and KV exceed " << m_dram << " by " << (m_overflow_bytes >> 20) << " MiB (KV addresses folded)";
  return o.str();
}

}  // namespace kelle
