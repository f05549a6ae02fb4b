// The firmware choices of an LLM run, resolved once before anything is built from them: the
// scheduler, the KV policy and the refresh policy, each from the scenario's top level
// (`scheduler`, `policy.kv`, `policy.refresh`), else from the system's firmware defaults
// (`system.firmware.scheduler`, `system.firmware.policy.kv`, `system.firmware.policy.refresh`),
// else the platform's default. Each choice keeps where it came from; the results report both
// (`llm.firmware`). docs/scenario-format.md, "type: llm".
//
// The values the KV policy and the systolic evictor share have one source each (see
// kv_policy_args::evictor and kv_policy::protection): the register width and scale are the
// evictor's hardware; the protected sink and recent tokens are the policy's, which the firmware
// programs into the evictor.
#pragma once

#include "firmware/workload/tasks.h"
#include "platform/config/config.h"

#include <nlohmann/json.hpp>

#include <string>

namespace kelle {

// The batch and lengths of an LLM run: a named task's (workload.task) defaults, each overridden
// by its own key (workload.batch, context_len, decode_len); read the same way by the run and
// by the first-order estimate (firmware/llm/estimate.h).
struct run_lengths {
  std::string task_name = "none";
  task_spec task{128, 16, 1, 0, 0};  // without a task: 128 + 16 tokens, batch 1
  unsigned batch = 1;
  std::uint64_t context = 0, decode = 0;
  static run_lengths read(const config_node& workload);
  // The KV budget a policy with `default_budget` of its own gets unless policy.kv_budget is given.
  std::uint64_t budget_default(std::uint64_t default_budget) const {
    return task.kv_budget ? task.kv_budget : default_budget;
  }
};

struct run_config {
  struct choice {
    std::string name;
    std::string from;  // "file:line" or "command line -p k=v" of the key that set it, or "default"
  };
  choice scheduler, kv_policy, refresh_policy;

  // Reads the three choices from the scenario's top level `root` (names checked against the
  // registries; an unknown name is a config error naming the key).
  static run_config resolve(const config_node& root);
  nlohmann::json to_json() const;
};

}  // namespace kelle
