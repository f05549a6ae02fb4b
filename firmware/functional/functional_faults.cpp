// The fault model of functional mode: retention faults or a fixed bit-error rate in the KV data
// the engine reads from the eDRAM, with the writes' times it needs and the flipped-bit counts.
#include "firmware/functional/functional_run.h"

#include "models/memory/memory_target.h"
#include "models/memory/refresh_control.h"
#include "platform/support/hash.h"

#include <algorithm>
#include <cmath>

namespace kelle {

// functional.faults: the mode, its seed and, for a bit-error rate, the rate and the bit groups.
void functional_run::configure_faults(const config_node& f) {
  const config_node fl = f.child_or_empty("faults");
  const std::string mode = fl.get_choice("mode", "none", {"none", "retention", "ber"});
  m_fault = mode == "retention" ? fault_mode::retention : mode == "ber" ? fault_mode::ber : fault_mode::none;
  m_fault_seed = fl.get_uint("seed", m_seed, "seed of the cells' retention times and of the bit errors");
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

void functional_run::connect_faults(const memory_plan& plan) {
  m_kv_on_chip = plan.kv_layers_on_chip();
  if (m_kv_on_chip && plan.kv(0).k.target) m_kv_edram = plan.kv(0).k.target->refresh();
  if (!m_kv_edram) m_kv_on_chip = 0;  // faults model eDRAM cells only
  if (m_fault != fault_mode::none) m_written.resize(m_kv_on_chip);  // only the fault model reads it
  for (unsigned l = 0; l < m_written.size(); ++l)
    for (int v = 0; v < 2; ++v) m_written[l][v].assign((v ? plan.kv(l).v : plan.kv(l).k).bytes / 2, kv_elem{});
}

void functional_run::note_write(std::uint64_t addr, std::uint64_t len) {
  const double now = sc_core::sc_time_stamp().to_seconds();
  for (unsigned l = 0; l < m_kv_on_chip; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = v ? m_plan->kv(l).v : m_plan->kv(l).k;
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      for (std::uint64_t a = b & ~1ull; a < e; a += 2) {
        kv_elem& el = m_written[l][v][(a - r.addr) / 2];
        el.written = now;
        ++el.generation;
      }
    }
}

void functional_run::inject(std::uint64_t addr, unsigned char* data, std::uint64_t len) {
  const double now = sc_core::sc_time_stamp().to_seconds();
  const retention_model& ret = m_kv_edram->retention();
  const double own = m_kv_edram->default_refresh_interval().to_seconds();
  for (unsigned l = 0; l < m_kv_on_chip; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = v ? m_plan->kv(l).v : m_plan->kv(l).k;
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      for (std::uint64_t a = b; a + 2 <= e; a += 2) {
        const std::uint64_t elem = (a - r.addr) / 2;
        const std::uint64_t hi = elem / m_hd;  // (slot, sequence, kv head)
        const unsigned kvh = unsigned(hi % m_kvh), sq = unsigned(hi / m_kvh % m_batch);
        const std::uint64_t slot = hi / m_kvh / m_batch;
        head_slots& h = hs(l, sq, kvh);
        if (slot >= h.slot_pos.size() || h.slot_pos[slot] < 0) continue;  // not a stored token
        const std::uint32_t pos = std::uint32_t(h.slot_pos[slot]);
        const bool high = pos < h.score.size() && h.score[pos] > h.threshold;
        const kv_elem& el = m_written[l][v][elem];
        std::uint16_t val = std::uint16_t(data[a - addr] | (data[a - addr + 1] << 8));
        for (unsigned bit = 0; bit < 16; ++bit) {
          const bool msb = bit >= 8;
          const int g = (high ? 0 : 2) + (msb ? 0 : 1);
          m_bits_read[g] += 1;
          const std::uint64_t cell = splitmix64(m_fault_seed ^ splitmix64((a << 4) | bit));
          if (m_fault == fault_mode::ber) {
            if (m_ber_groups[g] && unit_interval(splitmix64(cell ^ el.generation)) < m_ber) {
              val ^= std::uint16_t(1u << bit);
              m_flipped[g] += 1;
            }
            continue;
          }
          if (!(val >> bit & 1u)) continue;  // a discharged cell (0) has nothing to lose
          // Exposure: the longest time the cell went without a write or refresh since its write.
          double I = m_refresh ? m_refresh->interval_s(high, msb) : 0.0;
          if (I <= 0) I = own;
          const double tw = el.written;
          const double kw = std::floor(tw / I), kn = std::floor(now / I);
          double exposure = now - tw;
          if (kn > kw)
            exposure = std::max({(kw + 1) * I - tw, kn - kw >= 2 ? I : 0.0, now - kn * I});
          // The cell's retention time is F^-1(u) for its uniform draw u: it has failed iff u < F(exposure).
          if (unit_interval(cell) < ret.failure_probability(exposure)) {
            val = std::uint16_t(val & ~(1u << bit));  // a charged cell leaks to 0
            m_flipped[g] += 1;
          }
        }
        data[a - addr] = static_cast<unsigned char>(val & 0xff);
        data[a - addr + 1] = static_cast<unsigned char>(val >> 8);
      }
    }
}

}  // namespace kelle
