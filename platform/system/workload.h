// A workload drives the platform: it owns the initiators that issue transactions (the `llm`
// firmware model, the `traffic` generator, one command with `op`). Chosen by `workload.type`
// from a registry; it sees the system through platform_view.
#pragma once

#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <nlohmann/json.hpp>
#include <systemc>

#include <map>
#include <string>
#include <vector>

namespace kelle {

class router;
class memory_target;
class compute_block;

// What the platform offers a workload while it is built.
class platform_view {
 public:
  virtual ~platform_view() = default;
  virtual router& interconnect() = 0;
  // The memory instance of that name, or nullptr.
  virtual memory_target* memory(const std::string& name) = 0;
  virtual std::string memory_names() const = 0;
  virtual std::vector<memory_target*> memory_targets() = 0;
  // The compute block of that name (rsa, sfu, evictor), or nullptr.
  virtual compute_block* block(const std::string& name) = 0;
  virtual std::string block_names() const = 0;
  virtual std::vector<compute_block*> blocks() = 0;
  virtual std::uint64_t seed() const = 0;
};

class workload : public sc_core::sc_module {
 public:
  using sc_core::sc_module::sc_module;
  // Whether everything the workload set out to do has completed.
  virtual bool finished() const = 0;
  // Adds the workload's own results (e.g. `traffic`) to results.json.
  virtual void add_results(nlohmann::json& /*results*/) const {}
  // The workload's section of the text report.
  virtual std::string report() const { return {}; }
  // Further result files (name -> text), written beside results.json (per-step CSVs, ...).
  virtual std::map<std::string, std::string> extra_files() const { return {}; }
};

struct workload_args {
  config_node params;  // the `workload` section
  platform_view& platform;
  const config_node* root = nullptr;  // the scenario's top level (top-level keys such as `scheduler`)
};

// Ends the run from inside a workload's SystemC thread after record_run_input_error (config.h):
// the simulation stops and the calling thread is never resumed; platform::run reports the error.
// Does not return, so the caller lets its own heap objects go first (the message included): the
// suspended frames are never unwound.
[[noreturn]] void stop_run_for_input_error();

using workload_registry = registry<workload, const workload_args&>;
workload_registry& workloads();

}  // namespace kelle
