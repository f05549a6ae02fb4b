#include "models/memory/banked_array.h"

#include <algorithm>
#include <cmath>

namespace kelle {

banked_array::banked_array(const sc_core::sc_module_name& name, const memory_args& a,
                           const std::string& cell)
    : memory_target(name, a),
      m_banks(static_cast<unsigned>(a.params.get_uint("banks", 16, "number of banks", 1, 4096))),
      m_interleave(a.params.get_uint("interleave_bytes", 64,
                                     "bytes mapped to one bank before the next bank", 1, 1 << 20)),
      m_bank_Bps(a.params.require_double("bandwidth_GBps", "peak bandwidth of the array in GB/s",
                                         1e-6) *
                 1e9 / m_banks),
      m_latency(sc_core::sc_time(a.params.get_double(
                                     "access_latency_ns",
                                     tech_value(a.tech, cell, "access_latency_ns",
                                                "array access latency in ns"),
                                     "access latency in ns (default: the technology's)", 0.0),
                                 sc_core::SC_NS)),
      m_bank_wait(m_stats.counter("bank_wait_time", "s",
                                  "time accesses waited for a bank busy with earlier accesses")) {
  const double ref_MiB = tech_value(a.tech, cell, "reference_capacity_MiB",
                                    "capacity the cell figures are given for, MiB", 1e-9);
  const double scale = capacity_bytes() / (ref_MiB * 1024 * 1024);
  // Per-byte access energy grows with the array (longer bit lines, word lines and H-tree wires):
  // E = E_ref x (capacity / reference capacity)^exponent (docs/models/memory-sram.md).
  const double exponent = a.tech.child(cell).require_double(
      "access_energy_capacity_exponent", "exponent of the access energy's growth with capacity",
      0.0, 1.0);
  m_energy_J_per_B = tech_value(a.tech, cell, "access_energy_pJ_per_byte",
                                "dynamic energy per byte accessed, pJ") *
                     1e-12 * std::pow(scale, exponent);
  m_leakage_W = tech_value(a.tech, cell, "leakage_mW", "leakage power of the reference array, mW") *
                1e-3 * scale;
  m_area_mm2 = tech_value(a.tech, cell, "area_mm2", "area of the reference array, mm2") * scale;
  m_bank_free.assign(m_banks, sc_core::SC_ZERO_TIME);

  m_stats.formula("area", "mm2", "array area (technology figure scaled by capacity)",
                  [this] { return m_area_mm2; });
  m_stats.formula("peak_bandwidth", "GB/s", "banks x bank bandwidth",
                  [this] { return peak_bandwidth_Bps() / 1e9; });
  m_stats.formula("access_energy_per_byte", "pJ",
                  "technology figure scaled to this capacity (capacity exponent)",
                  [this] { return m_energy_J_per_B * 1e12; });
  m_stats.energy("access", "bytes accessed x access energy per byte", [this] {
    return (m_bytes_read.value() + m_bytes_written.value()) * m_energy_J_per_B;
  });
  m_stats.energy("leakage", "leakage power x simulated time",
                 [this] { return m_leakage_W * now_s(); });
}

sc_core::sc_time banked_array::service(tlm::tlm_command, std::uint64_t addr, std::uint64_t len,
                                       const sc_core::sc_time& start) {
  if (len == 0) return start + m_latency;
  // Bytes of this access in each bank, from the chunk range [c0, c1] it covers.
  const std::uint64_t c0 = addr / m_interleave, c1 = (addr + len - 1) / m_interleave;
  const std::uint64_t chunks = c1 - c0 + 1;
  const std::uint64_t rounds = chunks / m_banks, extra = chunks % m_banks;
  const unsigned first_bank = static_cast<unsigned>(c0 % m_banks);
  const unsigned last_bank = static_cast<unsigned>(c1 % m_banks);
  const std::uint64_t head_cut = addr % m_interleave;                        // bytes before addr
  const std::uint64_t tail_cut = (c1 + 1) * m_interleave - (addr + len);     // bytes after the end
  const double share = access_share(start);
  const double s_per_B = 1.0 / (m_bank_Bps * share);

  sc_core::sc_time done = start;
  double waited = 0.0;
  for (unsigned i = 0; i < m_banks && i < chunks; ++i) {
    const unsigned b = (first_bank + i) % m_banks;
    std::uint64_t bytes = (rounds + (i < extra ? 1 : 0)) * m_interleave;
    if (b == first_bank) bytes -= head_cut;
    if (b == last_bank) bytes -= tail_cut;
    const sc_core::sc_time begin = std::max(start, m_bank_free[b]);
    waited = std::max(waited, (begin - start).to_seconds());
    m_bank_free[b] = begin + sc_core::sc_time(static_cast<double>(bytes) * s_per_B, sc_core::SC_SEC);
    done = std::max(done, m_bank_free[b]);
  }
  m_bank_wait += waited;
  return done + m_latency;
}

}  // namespace kelle
