// An on-chip memory array (SRAM or eDRAM macro) split into banks that work in parallel.
// Consecutive `interleave_bytes` chunks go to consecutive banks; an access needs (its bytes in a
// bank) / (bank bandwidth) of each bank it touches and its response is ready one access latency
// after the last of its banks finishes. How a bank divides its time among the accesses in
// service (`bank_arbitration`):
//   fcfs         an access has a bank to itself from its turn on: accesses are served in
//                acceptance order and a later one waits for every earlier one's bytes (a
//                transaction is atomic at the bank)
//   round_robin  the bank alternates among the requesters (interconnect ports) that want it, a
//                burst each, so a short access is not held behind another requester's long one;
//                a requester's own accesses keep their order. Modelled in the fluid limit
//                (processor sharing: each of the n requesters on a bank moves at 1/n of its
//                bandwidth)
// Accesses to different banks overlap in both. Cell figures (latency, energy per byte, leakage,
// area) come from the technology description, section `tech.<cell>`.
#pragma once

#include "models/memory/memory_target.h"
#include "platform/support/divider.h"

#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

namespace kelle {

class banked_array : public memory_target {
 public:
  banked_array(const sc_core::sc_module_name& name, const memory_args& args, const std::string& cell);

  double peak_bandwidth_Bps() const override { return m_bank_Bps * m_banks; }
  double area_mm2() const override { return m_area_mm2; }
  double read_energy_J_per_byte() const override { return m_energy_J_per_B; }
  first_order_figures first_order() const override {
    first_order_figures f;
    f.read_J_per_B = f.write_J_per_B = m_energy_J_per_B;
    f.static_W = m_leakage_W;
    return f;
  }

 protected:
  sc_core::sc_time service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                           const sc_core::sc_time& start) override;
  // Share of a bank's time left for accesses at `now` (an eDRAM gives part of it to refresh).
  virtual double access_share(const sc_core::sc_time& /*now*/) { return 1.0; }

  unsigned m_banks;
  std::uint64_t m_interleave;   // bytes per bank before moving to the next bank
  divider m_interleave_div, m_bank_div;  // by m_interleave and m_banks, on the hot path
  double m_bank_Bps;            // bytes per second of one bank
  sc_core::sc_time m_latency;   // access latency of the array
  double m_energy_J_per_B;      // dynamic energy per byte read or written
  double m_leakage_W;           // leakage of this instance (scaled by capacity)
  double m_area_mm2;            // area of this instance (scaled by capacity)
  std::vector<sc_core::sc_time> m_bank_free;  // when each bank finishes its queued work (fcfs)
  stat& m_bank_wait;
  // The time a bank takes for `bytes` at `s_per_B` seconds per byte. An access's banks mostly
  // take the same bytes, and accesses mostly repeat sizes: the last value is kept, so the
  // sc_time is built from a double once per size rather than once per bank and access.
  const sc_core::sc_time& bank_time(std::uint64_t bytes, double s_per_B);
  std::uint64_t m_last_bytes = 0;
  double m_last_s_per_B = 0.0;
  sc_core::sc_time m_last_bank_time;

 private:
  // Bytes of an access in each bank it touches, from first_bank on (closed form).
  template <class F>
  void for_each_bank(std::uint64_t addr, std::uint64_t len, F f) const;

  // round_robin: each bank is a processor-sharing server over its requesters. Its virtual time
  // V grows by (bandwidth / n) x dt while n requesters share it; a requester's first access on
  // the bank, started at V_s with b bytes there, leaves when V reaches V_s + b (its tag), whatever
  // arrives later; the requester's next access on the bank starts then.
  struct rr_access {
    unsigned requester;      // the base's current_requester()
    unsigned banks_left;     // banks whose share is not served yet
    sc_core::sc_time arrival, alone;  // acceptance, and its time on an idle array
  };
  struct rr_bank {
    double v = 0;                 // bytes served to each requester in service
    sc_core::sc_time t;           // when v was last brought up to date
    std::map<std::pair<double, std::uint64_t>, std::uint64_t> tags;  // (tag, request) -> request
    // Per requester, its accesses on this bank in order (request, bytes); the first is in `tags`.
    std::unordered_map<unsigned, std::deque<std::pair<std::uint64_t, std::uint64_t>>> queued;
  };
  bool m_round_robin;
  std::vector<rr_bank> m_rr;
  std::unordered_map<std::uint64_t, rr_access> m_rr_access;  // by the base's request id
  sc_core::sc_event m_rr_event;
  sc_core::sc_time rr_serve(std::uint64_t addr, std::uint64_t len, const sc_core::sc_time& start);
  // Serves bank `bank` up to `now` at `rate` bytes/s, completing the accesses that leave it.
  void rr_advance(unsigned bank, const sc_core::sc_time& now, double rate);
  void rr_schedule(const sc_core::sc_time& now, double rate);  // wake at the next departure
  void rr_wake();  // SC_METHOD on m_rr_event
};

}  // namespace kelle
