// A first-order (roofline) estimate of each phase of an LLM run on the same hardware, beside the
// simulated time: each memory's bytes over its sustainable bandwidth, each compute block's work
// at its peak rate (memory_target::sustainable_bandwidth_Bps, compute_block::work_cycles_at_peak).
// A schedule that overlaps everything perfectly takes the largest of these demands (the bound);
// one that overlaps nothing, the sum of the DRAM's and the compute blocks' demands. The simulated
// time against the bound is what the schedule, refresh, bubbles and contention add
// (docs/firmware.md, "Roofline"). Taken from the statistics counters at the phase's start and
// end, so it covers sampled (extrapolated) work too.
#pragma once

#include "platform/system/workload.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

class memory_target;
class compute_block;

class roofline {
 public:
  // The platform's memories and compute blocks; `dram` names the main memory.
  roofline(platform_view& p, std::string dram);

  // The phase starts (counters taken) and ends (`simulated_s` of simulated time, `passes` passes
  // over the model: 1 for the prefill, the decode steps).
  void begin();
  void end(double simulated_s, std::uint64_t passes);

  nlohmann::json results() const;
  // One report line, or "" before end().
  std::string summary(const std::string& phase) const;

 private:
  struct resource {
    std::string name;
    const memory_target* mem = nullptr;   // a memory (bytes at its sustainable bandwidth)
    const compute_block* block = nullptr; // or a compute block (work cycles at its clock)
    double rate = 0;                      // bytes or cycles per second
    double start = 0, amount = 0;         // counter at begin(); moved or worked in the phase
    double demand_s() const { return rate > 0 ? amount / rate : 0.0; }
  };
  double counter(const resource& r) const;

  std::string m_dram;
  std::vector<resource> m_res;
  double m_simulated_s = 0, m_bound_s = 0, m_no_overlap_s = 0;
  std::uint64_t m_passes = 0;
  std::string m_bottleneck;
  bool m_ended = false;
};

}  // namespace kelle
