// AERP's recomputation budget on the platform: the firmware reads the hardware facts of
// decide_recompute() from the platform's models (the array, the weight stream's memories, the
// activation arena, each layer's KV memory), sets the policy's limits from policy.recompute
// (auto, all, none, N) before the first pass, and accounts what the recomputation did, layer by
// layer, for results.json and the report (docs/policies/aerp.md, "The recomputation budget").
#pragma once

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/kv/recompute_budget.h"
#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/memory_plan.h"
#include "firmware/workload/model_zoo.h"
#include "platform/system/workload.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kelle {

class recompute_plan {
 public:
  // Decides the budget of every layer and sets it on `policy` (which recomputes).
  recompute_plan(kv_policy& policy, const model_shape& m, unsigned batch, const memory_plan& plan,
                 const layer_ops& ops, platform_view& platform);

  // Layer `l` of a pass as the policy decided it (every decode step, simulated or not): `r` its
  // report summed over the batch, `rows` the stacked rows the pass recomputes.
  void record(unsigned l, const kv_layer_report& r, std::uint64_t rows);

  nlohmann::json results() const;
  // One line for the report.
  std::string summary() const;

 private:
  struct layer {
    std::string store;              // the memory holding the layer's cache and x vectors
    recompute_layer_budget budget;  // the cost model's figures (auto) and the limits set
    double rows = 0;                // stacked rows recomputed, over the run (batch)
    double x_tokens = 0;            // x tokens stored after the last pass (batch)
    double kv_bytes_saved = 0;      // over the run: K, V bytes replaced by x less the x bytes, per pass
    double cycles_added = 0;        // model: rows beyond the array's slack x cycles per row
  };
  std::string m_mode;
  std::uint64_t m_fixed = 0;
  double m_pair_bytes;              // one (token, KV head) pair's K and V
  std::vector<layer> m_layers;
};

}  // namespace kelle
