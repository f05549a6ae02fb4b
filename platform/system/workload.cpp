#include "platform/system/workload.h"

namespace kelle {

void stop_run_for_input_error() {
  // The kernel's "simulation stopped by user" note would be a second line beside the error.
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  sc_core::sc_stop();
  static const sc_core::sc_event never;  // never notified: the thread stays where it is
  for (;;) sc_core::wait(never);
}

workload_registry& workloads() {
  static workload_registry r("workloads", "workload types (workload.type)");
  return r;
}

}  // namespace kelle
