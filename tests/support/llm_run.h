// Runs the Kelle+eDRAM system with an llm workload in a child process (a fresh SystemC kernel) and
// returns its results.json, with the run's extra files (steps.csv, layers.csv) under "files". A full
// cache and no refresh policy unless `overrides` set them (kelle_edram's firmware defaults are AERP
// and 2DRP); larger operand transactions than the system's defaults: the same totals, faster runs.
#pragma once

#include "tests/support/test_initiator.h"

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kelle::test {

inline nlohmann::json llm_run(const std::vector<std::string>& overrides) {
  const std::string out = in_child_process([&] {
    std::vector<std::string> o = {"policy.kv=full", "policy.refresh=none", "system.compute.rsa.chunk_bytes=262144",
                                  "system.compute.rsa.weight_buffer_bytes=1048576",
                                  "system.compute.dma.chunk_bytes=1048576", "workload.progress=false"};
    o.insert(o.end(), overrides.begin(), overrides.end());
    auto cfg = config::from_string("system: kelle_edram\nworkload: {type: llm}\n", "llm.yaml", o);
    platform p(cfg);
    p.run();
    auto r = p.results();
    for (const auto& [name, text] : p.work().extra_files()) r["files"][name] = text;
    return r.dump();
  });
  if (out.rfind("error: ", 0) == 0) throw std::runtime_error(out);
  return nlohmann::json::parse(out);
}

// A column of steps.csv over the decode steps (column 5: dram_weight_bytes, 6: dram_kv_bytes; the
// file has 6 significant digits).
inline std::vector<double> decode_column(const nlohmann::json& r, int column) {
  std::istringstream in(r["files"]["steps.csv"].get<std::string>());
  std::string line;
  std::getline(in, line);  // header: phase,step,start_s,end_s,latency_s,dram_weight_bytes,dram_kv_bytes,...
  std::vector<double> v;
  while (std::getline(in, line)) {
    if (line.rfind("decode", 0) != 0) continue;
    std::istringstream f(line);
    std::string cell;
    for (int i = 0; i <= column; ++i) std::getline(f, cell, ',');
    v.push_back(std::stod(cell));
  }
  return v;
}

}  // namespace kelle::test
