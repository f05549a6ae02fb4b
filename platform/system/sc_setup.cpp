#include "platform/system/sc_setup.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <systemc>

#include <cstdlib>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define KELLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KELLE_ASAN 1
#endif
#endif
#ifdef KELLE_ASAN
#include <pthread.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace kelle {
namespace {

void report_handler(const sc_core::sc_report& r, const sc_core::sc_actions& actions) {
  // Notes and warnings muted with set_actions(..., SC_DO_NOTHING) stay muted.
  if (actions == sc_core::SC_DO_NOTHING && r.get_severity() <= sc_core::SC_WARNING) return;
  const std::string where = r.get_msg_type();
  const std::string msg = r.get_msg();
  const std::string t = sc_core::sc_time_stamp().to_string();
  switch (r.get_severity()) {
    case sc_core::SC_INFO:
      spdlog::info("[{}] {}: {}", t, where, msg);
      break;
    case sc_core::SC_WARNING:
      spdlog::warn("[{}] {}: {}", t, where, msg);
      break;
    default:
      // An exception that escaped a process comes back as this report from inside SystemC's
      // handler, which only catches sc_report: rethrow the report itself (sc_start then throws
      // it to the caller); anything else becomes a simulation_error.
      if (where == "uncaught exception") throw sc_core::sc_report(r);
      throw simulation_error("[" + t + "] " + where + ": " + msg);
  }
}

#ifdef KELLE_ASAN
// Tells AddressSanitizer this thread runs on its own stack again: a switch "to" the stack it is
// on, with the bounds the thread library reports (the fake stack, if any, kept across it).
void restore_thread_stack_for_sanitizer() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* bottom = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &bottom, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || bottom == nullptr) return;
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
}
#endif

}  // namespace

void sc_start_for(double seconds_limit) {
#ifdef KELLE_ASAN
  struct restore {
    ~restore() { restore_thread_stack_for_sanitizer(); }
  } on_return;
#endif
  sc_core::sc_start(sc_core::sc_time(seconds_limit, sc_core::SC_SEC), sc_core::SC_EXIT_ON_STARVATION);
}

void setup_systemc_process() {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  sc_core::sc_report_handler::set_handler(report_handler);
  // Log to standard error: standard output carries the report.
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "kelle", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  spdlog::default_logger()->set_pattern("%^%l%$: %v");
}

}  // namespace kelle
