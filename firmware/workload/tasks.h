// The paper's hardware workloads (spec section 4) by name: `workload.task: triviaqa` sets the
// context and decode lengths, the batch and the KV budget and recent window of the task together.
// Each is a default: a key given in the scenario (workload.context_len, policy.kv_budget, ...)
// still wins. `kelle-vp list tasks` shows them.
#pragma once

#include "platform/registry/registry.h"

#include <cstdint>
#include <string>

namespace kelle {

struct task_spec {
  std::uint64_t context_len = 0;
  std::uint64_t decode_len = 0;
  unsigned batch = 16;
  std::uint64_t kv_budget = 0;      // N' per KV head
  std::uint64_t recent_window = 0;  // tokens before the newest that are never evicted
};

using task_registry = registry<task_spec>;
task_registry& tasks();

}  // namespace kelle
