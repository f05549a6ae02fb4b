// Builds a system from a scenario and runs it: the interconnect, the memories of the address
// map (each chosen by name from the memory registry), and the workload (chosen by
// workload.type). Afterwards it gathers results.json and the text report.
#pragma once

#include "models/interconnect/router.h"
#include "models/compute/compute_block.h"
#include "models/memory/memory_target.h"
#include "models/thermal/thermal.h"
#include "platform/config/config.h"
#include "platform/system/workload.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kelle {

class platform : public platform_view {
 public:
  // Elaborates the platform; every key of the scenario must be read by then.
  explicit platform(config& cfg);
  ~platform() override;

  // Simulates until the workload has finished; throws if it has not within sim.time_limit_s.
  // Returns early, with input_error() set, when a process stopped the run for an input error
  // only the run meets (stop_run_for_input_error): the caller reports it (no exception is
  // thrown once the kernel's coroutines have run).
  void run();
  const std::string& input_error() const { return m_input_error; }

  nlohmann::json results() const;
  std::string report() const;

  router& interconnect() override { return *m_router; }
  memory_target* memory(const std::string& name) override;
  std::string memory_names() const override;
  std::vector<memory_target*> memory_targets() override;
  compute_block* block(const std::string& name) override;
  std::string block_names() const override;
  std::vector<compute_block*> blocks() override;
  std::uint64_t seed() const override { return m_seed; }
  workload& work() { return *m_workload; }

 private:
  config& m_cfg;
  std::string m_name;
  std::string m_system_name;
  std::uint64_t m_seed;
  double m_time_limit_s;
  std::unique_ptr<thermal_model> m_thermal;  // the scenario's `thermal:` (null: the technology's temperature)
  std::unique_ptr<router> m_router;
  std::vector<std::unique_ptr<memory_target>> m_memories;
  std::vector<std::string> m_memory_models;
  std::vector<std::unique_ptr<compute_block>> m_blocks;
  std::unique_ptr<workload> m_workload;
  double m_wall_s = 0.0;
  nlohmann::json m_thermal_results;  // the thermal model's figures at the end of the run
  std::string m_input_error;  // run() stopped by an input error (stop_run_for_input_error)
};

// The effective configuration as JSON (plain scalars become numbers or booleans where they are).
nlohmann::json yaml_to_json(const YAML::Node& n);

}  // namespace kelle
