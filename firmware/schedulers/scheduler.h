// A scheduler decides in which order, and with how much overlap, the firmware issues one
// decoder layer's commands. It is written against layer_ops (and the driver under it); adding
// one is one file with a KELLE_REGISTER(schedulers(), ...) line (docs/write-a-scheduler.md).
#pragma once

#include "firmware/schedulers/layer_ops.h"
#include "platform/registry/registry.h"

namespace kelle {

class scheduler {
 public:
  virtual ~scheduler() = default;
  // Issues decoder layer `layer` of `pass`. `x` is the residual stream (batch x rows x hidden),
  // updated in place: on return x.producer is the command that last wrote it.
  virtual void layer(layer_ops& ops, const pass_info& pass, unsigned layer, tensor& x) = 0;
};

using scheduler_registry = registry<scheduler>;
scheduler_registry& schedulers();

}  // namespace kelle
