// The fault model of functional mode: retention faults or a fixed bit-error rate in the KV data
// the engine reads from the eDRAM, with the writes' times it needs and the flipped-bit counts.
// The KV's number format (functional.kv_format) decides what a flipped bit does: for a 16-bit word
// format the value read (binary16, the engine's format) is taken as the stored word of that format
// (kv_format::to_word), the faults flip the word's bits, and the word is read back into binary16
// (from_word) (docs/functional.md, "Number formats"); a word the faults leave alone is read as
// stored. A format that quantises has its codes' bits flipped (functional_quantised.cpp).
#include "firmware/functional/functional_run.h"

#include "models/memory/memory_target.h"
#include "firmware/policies/refresh/lifetime_rule.h"
#include "models/memory/refresh_control.h"
#include "models/compute/functional/half.h"
#include "platform/support/hash.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace kelle {

// functional.faults: the mode, its seed and, for a bit-error rate, the rate and the bit groups.
void functional_run::configure_faults(const config_node& f) {
  // The stored format is policy.kv_format's unless a 16-bit word format is named here for the
  // faults of a 16-bit cache; a format that quantises is the cache's (it sizes the bytes the
  // commands move).
  const std::string fmt = f.get_choice("kv_format", m_shape.kv.name(), kv_format::names());
  const kv_format named = kv_format::named(fmt);
  if ((named.quantises() || m_shape.kv.quantises()) && fmt != m_shape.kv.name())
    f.fail("kv_format", fmt + " differs from policy.kv_format (" + m_shape.kv.name() +
                            "), which sizes the KV bytes the commands move; a format that quantises is given "
                            "there (functional.kv_format then follows it)");
  if (named.quantises()) m_kv_fmt = m_shape.kv;
  m_kv_format = named;
  m_kv_scale = f.get_double("kv_fixed_scale", 1.0 / 1024,
                            "fixed16: the value of one least significant bit (range +-32768 x scale)", 1e-12);
  // The activations are 16-bit words: any KV format that stores them (one that does not quantise).
  std::vector<std::string> words;
  for (const std::string& n : kv_format::names())
    if (!kv_format::named(n).quantises()) words.push_back(n);
  m_act_format = kv_format::named(f.get_choice("act_format", "binary16", words));
  m_act_scale = f.get_double("act_fixed_scale", 1.0 / 1024,
                             "fixed16 activations: the value of one least significant bit", 1e-12);
  const config_node fl = f.child_or_empty("faults");
  const std::string mode = fl.get_choice("mode", "none", {"none", "retention", "ber"});
  m_fault = mode == "retention" ? fault_mode::retention : mode == "ber" ? fault_mode::ber : fault_mode::none;
  m_fault_seed = fl.get_uint("seed", m_seed, "seed of the cells' retention times and of the bit errors");
  // `interval`: every bit exposed for its whole interval (KV, refreshed activation fields) or
  // budget (lifetime-aware activation fields): the steady state of a long run, which a short
  // functional run does not reach in simulated time.
  m_exposure_interval = fl.get_choice("exposure", "run", {"run", "interval"}) == "interval";
  if (m_fault == fault_mode::ber) {
    m_ber = fl.require_double("ber", "bit-error rate of each stored bit of the chosen group", 0, 1);
    const std::string g = fl.get_choice("group", "all",
                                        {"all", "msb", "lsb", "hst", "lst", "hst_msb", "hst_lsb", "lst_msb", "lst_lsb"});
    for (int i = 0; i < 4; ++i) {
      const bool hst = i < 2, msb = i % 2 == 0;
      m_ber_groups[i] = g == "all" || (g == "msb" && msb) || (g == "lsb" && !msb) || (g == "hst" && hst) ||
                        (g == "lst" && !hst) || g == group_names[i];
    }
  }
}

double functional_run::exposure(double tw, double now, double I) {
  // The longest time the cell went without a write or refresh since its write at tw, refreshed at
  // every multiple of I.
  const double kw = std::floor(tw / I), kn = std::floor(now / I);
  if (kn <= kw) return now - tw;
  return std::max({(kw + 1) * I - tw, kn - kw >= 2 ? I : 0.0, now - kn * I});
}

void functional_run::connect_faults(const memory_plan& plan) {
  m_kv_on_chip = plan.kv_layers_on_chip();
  if (m_kv_on_chip && plan.kv(0).k.target) m_kv_edram = plan.kv(0).k.target->refresh();
  if (!m_kv_edram) m_kv_on_chip = 0;  // faults model eDRAM cells only
  if (m_fault != fault_mode::none) m_written.resize(m_kv_on_chip);  // only the fault model reads it
  for (unsigned l = 0; l < m_written.size(); ++l)
    for (int v = 0; v < 2; ++v) m_written[l][v].assign(kv_region(l, v).bytes / 2, kv_elem{});
  if (m_fault == fault_mode::ber) {  // every element's draws before its first write (generation 0)
    m_ber_bits = m_kv_fmt.quantises() ? m_kv_fmt.bits() : 16;
    m_ber_mask.resize(m_written.size());
    for (unsigned l = 0; l < m_written.size(); ++l)
      for (int v = 0; v < 2; ++v) {
        m_ber_mask[l][v].resize(m_written[l][v].size());
        for (std::uint64_t e = 0; e < m_ber_mask[l][v].size(); ++e) m_ber_mask[l][v][e] = ber_draw(l, v, e, 0);
      }
  }
  // Retention faults in the activation eDRAM under a refresh policy's lifetime rule.
  m_act_rule = m_fault == fault_mode::retention && m_refresh ? m_refresh->transient() : nullptr;
  m_act_edram = m_act_rule && plan.arena().target ? plan.arena().target->refresh() : nullptr;
  if (m_act_edram) {
    m_act_written.assign(plan.arena().bytes / 2, 0.0);
    m_act_flipped.assign(m_act_rule->fields().size(), 0.0);
  }
}

void functional_run::inject_activations(std::uint64_t addr, unsigned char* data, std::uint64_t len) {
  const region& r = m_plan->arena();
  const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
  if (b >= e) return;
  const double now = sc_core::sc_time_stamp().to_seconds();
  const retention_model& ret = m_act_edram->retention();
  const double own = m_act_edram->default_refresh_interval().to_seconds();
  const field_map& fields = m_act_rule->fields();
  const bool stall_refresh = m_act_rule->stall() == lifetime_rule::stall_action::refresh;
  for (std::uint64_t a = b; a + 2 <= e; a += 2) {
    const double tw = m_act_written[(a - r.addr) / 2];
    const std::uint16_t stored = std::uint16_t(data[a - addr] | (data[a - addr + 1] << 8));
    const std::uint16_t word = m_act_format.to_word(stored, m_act_scale);
    std::uint16_t val = word;
    for (unsigned bit = 0; bit < 16; ++bit) {
      if (!(val >> bit & 1u)) continue;  // a discharged cell has nothing to lose
      const unsigned f = fields.field_of(bit);
      const lifetime_rule::field_rule& rule = m_act_rule->rules()[f];
      double x;
      if (rule.budget_us > 0) {  // unrefreshed within the budget; past it, refreshed at every budget
        const double B = rule.budget_us * 1e-6 * m_act_rule->scale();
        x = m_exposure_interval || (stall_refresh && now - tw > B) ? B : now - tw;
      } else {
        const double I = rule.interval_us > 0 ? rule.interval_us * 1e-6 * m_act_rule->scale() : own;
        x = m_exposure_interval ? I : exposure(tw, now, I);
      }
      const std::uint64_t cell = act_cell(a - r.addr, bit);
      if (unit_interval(cell) < ret.failure_probability(x)) {
        val = std::uint16_t(val & ~(1u << bit));
        m_act_flipped[f] += 1;
      }
    }
    if (val == word) continue;
    const std::uint16_t out = m_act_format.from_word(val, m_act_scale);
    data[a - addr] = static_cast<unsigned char>(out & 0xff);
    data[a - addr + 1] = static_cast<unsigned char>(out >> 8);
  }
}

void functional_run::note_write(std::uint64_t addr, std::uint64_t len) {
  const double now = sc_core::sc_time_stamp().to_seconds();
  if (m_act_edram) {
    const region& r = m_plan->arena();
    const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
    for (std::uint64_t a = b & ~1ull; a < e; a += 2) m_act_written[(a - r.addr) / 2] = now;
  }
  for (unsigned l = 0; l < m_kv_on_chip; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = kv_region(l, v);
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      for (std::uint64_t a = b & ~1ull; a < e; a += 2) {
        const std::uint64_t elem = (a - r.addr) / 2;
        kv_elem& el = m_written[l][v][elem];
        el.written = now;
        ++el.generation;
        if (!m_ber_mask.empty()) m_ber_mask[l][v][elem] = ber_draw(l, v, elem, el.generation);
      }
    }
}

std::uint64_t functional_run::kv_cell(unsigned l, int v, std::uint64_t elem, unsigned bit) const {
  // The bit in bits 0-3, the element (in the layer half's functional layout) in bits 4-43, the
  // half in bit 44, the layer above it.
  return splitmix64(m_fault_seed ^ splitmix64((std::uint64_t(l) << 41 | std::uint64_t(v) << 40 | elem) << 4 | bit));
}

std::uint64_t functional_run::act_cell(std::uint64_t offset, unsigned bit) const {
  // Another domain than the KV cells' (the top bit), so the two arrays draw independently.
  return splitmix64(m_fault_seed ^ splitmix64((1ull << 63) | offset << 4 | bit));
}

std::uint32_t functional_run::flip(std::uint32_t word, unsigned bits, unsigned l, int v, std::uint64_t elem,
                                   bool high, double now) {
  if (m_fault == fault_mode::ber) return flip_ber(word, bits, l, v, elem, high);
  const retention_model& ret = m_kv_edram->retention();
  const kv_elem& el = m_written[l][v][elem];
  // Bits leak at the die's true temperature of the moment: a new temperature, new probabilities.
  if (const double T = ret.temperature_C(); T != m_fail_cache_C) {
    m_fail_cache_C = T;
    for (auto& g : m_fail_cache)
      for (auto& e : g) e = {-1.0, 0.0};
  }
  std::uint32_t val = word;
  for (unsigned bit = 0; bit < bits; ++bit) {
    // The upper half of the word's bits is in the MSB banks (a 16-bit word's bits 15-8, an 8-bit
    // code's 7-4, a 4-bit code's 3-2), the lower half in the LSB banks.
    const bool msb = bit >= bits / 2;
    const int g = (high ? 0 : 2) + (msb ? 0 : 1);
    m_bits_read[g] += 1;
    if (!(val >> bit & 1u)) continue;  // a discharged cell (0) has nothing to lose
    const std::uint64_t cell = kv_cell(l, v, elem, bit);
    // Exposure: the longest time the cell went without a write or refresh since its write.
    const unsigned qb = m_refresh ? m_refresh->map_bit(bit, bits) : bit;  // the bit the policy's field map knows
    double I = m_refresh ? m_refresh->bit_interval_s(high, qb) : 0.0;
    if (I <= 0) I = m_kv_edram->default_refresh_interval().to_seconds();
    // The cell's retention time is F^-1(u) for its uniform draw u: it has failed iff u < F(exposure).
    const double x = m_exposure_interval ? I : exposure(el.written, now, I);
    // The failure probability of the last exposure asked for, per (group, bit): with
    // faults.exposure: interval every read of a bit asks for the same one, so the retention
    // model's log10 and erfc run once rather than once per bit read.
    auto& pf = m_fail_cache[high][qb];
    if (pf.first != x) pf = {x, ret.failure_probability(x)};
    if (unit_interval(cell) < pf.second) {
      val &= ~(1u << bit);  // a charged cell leaks to 0
      m_flipped[g] += 1;
    }
  }
  return val;
}

std::uint16_t functional_run::ber_draw(unsigned l, int v, std::uint64_t elem, std::uint32_t generation) const {
  const unsigned bits = m_ber_bits;
  const std::uint32_t lsb = (1u << bits / 2) - 1, msb = ((1u << bits) - 1) & ~lsb;
  const std::uint32_t drawn = (m_ber_groups[0] || m_ber_groups[2] ? msb : 0u) |
                              (m_ber_groups[1] || m_ber_groups[3] ? lsb : 0u);
  std::uint32_t mask = 0;
  for (unsigned bit = 0; bit < bits; ++bit)
    if ((drawn >> bit & 1u) && unit_interval(splitmix64(kv_cell(l, v, elem, bit) ^ generation)) < m_ber)
      mask |= 1u << bit;
  return std::uint16_t(mask);
}

std::uint32_t functional_run::ber_flips(unsigned bits, unsigned l, int v, std::uint64_t elem, bool high) {
  // The upper half of the word's bits is in the MSB banks, the lower half in the LSB banks; the
  // bits of the groups the faults hit flip (the token's score group decides, read by read).
  const std::uint32_t lsb = (1u << bits / 2) - 1, msb = ((1u << bits) - 1) & ~lsb;
  const int gm = high ? 0 : 2, gl = gm + 1;
  const std::uint32_t f = m_ber_mask[l][v][elem] & ((m_ber_groups[gm] ? msb : 0u) | (m_ber_groups[gl] ? lsb : 0u));
  if (f) {
    m_flipped[gm] += __builtin_popcount(f & msb);
    m_flipped[gl] += __builtin_popcount(f & lsb);
  }
  return f;
}

std::uint32_t functional_run::flip_ber(std::uint32_t word, unsigned bits, unsigned l, int v, std::uint64_t elem,
                                       bool high) {
  const int gm = high ? 0 : 2;
  m_bits_read[gm] += bits - bits / 2;
  m_bits_read[gm + 1] += bits / 2;
  return word ^ ber_flips(bits, l, v, elem, high);
}

void functional_run::inject(std::uint64_t addr, unsigned char* data, std::uint64_t len) {
  const double now = sc_core::sc_time_stamp().to_seconds();
  const bool ber = m_fault == fault_mode::ber;
  for (unsigned l = 0; l < m_kv_on_chip; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = kv_region(l, v);
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      for (std::uint64_t a = b; a + 2 <= e;) {
        // A row of the layout at a time: (slot, sequence, KV head), head_dim elements.
        const kv_row row = row_at(r, a);
        const std::uint64_t row_end = row.end, slot = row.slot;
        const unsigned kvh = row.kvh, sq = row.seq;
        const head_slots& h = hs(l, sq, kvh);
        if (slot >= h.slot_pos.size() || h.slot_pos[slot] < 0) {  // not a stored token
          a += (row_end - a + 1) / 2 * 2;
          continue;
        }
        const std::uint32_t pos = std::uint32_t(h.slot_pos[slot]);
        const bool high = pos < h.score.size() && h.score[pos] > h.threshold;
        if (ber) {  // the word's format matters only where a bit flips (ber_flips, a row at a time)
          const int gm = high ? 0 : 2;
          const std::uint32_t hit = (m_ber_groups[gm] ? 0xff00u : 0u) | (m_ber_groups[gm + 1] ? 0x00ffu : 0u);
          const std::uint16_t* mask = m_ber_mask[l][v].data() + (a - r.addr) / 2;
          double n = 0;
          for (; a + 2 <= e && a < row_end; a += 2, ++n) {
            const std::uint32_t f = *mask++ & hit;
            if (!f) continue;  // no flip: read as stored
            m_flipped[gm] += __builtin_popcount(f & 0xff00u);
            m_flipped[gm + 1] += __builtin_popcount(f & 0x00ffu);
            const std::uint16_t stored = std::uint16_t(data[a - addr] | (data[a - addr + 1] << 8));
            const std::uint16_t out = m_kv_format.from_word(std::uint16_t(m_kv_format.to_word(stored, m_kv_scale) ^ f), m_kv_scale);
            data[a - addr] = static_cast<unsigned char>(out & 0xff);
            data[a - addr + 1] = static_cast<unsigned char>(out >> 8);
          }
          m_bits_read[gm] += 8 * n;
          m_bits_read[gm + 1] += 8 * n;
          continue;
        }
        for (; a + 2 <= e && a < row_end; a += 2) {
          const std::uint16_t stored = std::uint16_t(data[a - addr] | (data[a - addr + 1] << 8));
          const std::uint16_t word = m_kv_format.to_word(stored, m_kv_scale);
          const std::uint16_t val = std::uint16_t(flip(word, 16, l, v, (a - r.addr) / 2, high, now));
          if (val == word) continue;  // no flip: read as stored
          const std::uint16_t out = m_kv_format.from_word(val, m_kv_scale);
          data[a - addr] = static_cast<unsigned char>(out & 0xff);
          data[a - addr + 1] = static_cast<unsigned char>(out >> 8);
        }
      }
    }
}

}  // namespace kelle
