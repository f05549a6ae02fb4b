// Helpers of the DRAM model tests (lpddr4, lpddr5, the controller options): a scenario with one
// DRAM instance `dram` behind a zero-latency unlimited interconnect, its statistics, and a run
// of the traffic generator with the model's closed-form expectations added to the results.
#pragma once

#include "models/memory/lpddr4/lpddr4.h"
#include "vp/platform.h"

#include <string>
#include <vector>

namespace kelle::test {

// The YAML of a scenario: `dram: {<dram_keys>}` (model, capacity, ...) and `workload: {<workload>}`.
inline std::string dram_scenario(const std::string& dram_keys, const std::string& workload) {
  return "include: tech/65nm.yaml\n"
         "system:\n"
         "  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}\n"
         "  memories:\n"
         "    dram: {base_addr: 0, store_data: false, " + dram_keys + "}\n"
         "workload: {" + workload + "}\n";
}

inline double ns(const sc_core::sc_time& t) { return t.to_seconds() * 1e9; }

inline lpddr4& dram_of(platform& p) { return dynamic_cast<lpddr4&>(*p.memory("dram")); }

inline double dram_stat(const nlohmann::json& r, const std::string& name) {
  return r["stats"]["dram"][name]["value"].get<double>();
}

// Runs the scenario and adds the model's expectations: expected_read_GBps, expected_write_GBps
// (streaming bandwidth), expected_lone_ns (a lone stream of 64 B reads), unloaded_hit_ns.
inline nlohmann::json run_dram(const std::string& yaml, const std::vector<std::string>& overrides) {
  auto cfg = config::from_string(yaml, "dram.yaml", overrides);
  platform p(cfg);
  p.run();
  auto r = p.results();
  const lpddr4& m = dram_of(p);
  const std::uint64_t bursts = (64 + m.burst_bytes() - 1) / m.burst_bytes();
  r["expected_read_GBps"] = m.expected_stream_bandwidth_Bps(tlm::TLM_READ_COMMAND) / 1e9;
  r["expected_write_GBps"] = m.expected_stream_bandwidth_Bps(tlm::TLM_WRITE_COMMAND) / 1e9;
  r["expected_lone_ns"] = ns(m.lone_stream_latency(tlm::TLM_READ_COMMAND, bursts));
  r["unloaded_hit_ns"] = ns(m.unloaded_latency(tlm::TLM_READ_COMMAND, bursts, lpddr4::row_state::hit));
  return r;
}

}  // namespace kelle::test
