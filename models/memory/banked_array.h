// An on-chip memory array (SRAM or eDRAM macro) split into banks that work in parallel.
// Consecutive `interleave_bytes` chunks go to consecutive banks; an access occupies each bank it
// touches for (its bytes in that bank) / (bank bandwidth) and its response is ready one access
// latency after the last of its banks finishes. Accesses to a busy bank wait (bank conflicts);
// accesses to different banks overlap. Cell figures (latency, energy per byte, leakage, area)
// come from the technology description, section `tech.<cell>`.
#pragma once

#include "models/memory/memory_target.h"

#include <vector>

namespace kelle {

class banked_array : public memory_target {
 public:
  banked_array(const sc_core::sc_module_name& name, const memory_args& args, const std::string& cell);

  double peak_bandwidth_Bps() const override { return m_bank_Bps * m_banks; }
  double area_mm2() const override { return m_area_mm2; }

 protected:
  sc_core::sc_time service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                           const sc_core::sc_time& start) override;
  // Share of a bank's time left for accesses at `now` (an eDRAM gives part of it to refresh).
  virtual double access_share(const sc_core::sc_time& /*now*/) { return 1.0; }

  unsigned m_banks;
  std::uint64_t m_interleave;   // bytes per bank before moving to the next bank
  double m_bank_Bps;            // bytes per second of one bank
  sc_core::sc_time m_latency;   // access latency of the array
  double m_energy_J_per_B;      // dynamic energy per byte read or written
  double m_leakage_W;           // leakage of this instance (scaled by capacity)
  double m_area_mm2;            // area of this instance (scaled by capacity)
  std::vector<sc_core::sc_time> m_bank_free;  // when each bank finishes its queued work
  stat& m_bank_wait;
};

}  // namespace kelle
