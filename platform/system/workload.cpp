#include "platform/system/workload.h"

namespace kelle {

workload_registry& workloads() {
  static workload_registry r("workloads", "workload types (workload.type)");
  return r;
}

}  // namespace kelle
