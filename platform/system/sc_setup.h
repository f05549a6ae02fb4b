// Process-wide SystemC set-up shared by the program and the tests: no banner, and SystemC
// reports routed to the log (warnings) or turned into exceptions (errors, fatal errors), so a
// modelling error ends a run with a one-line message instead of an abort.
#pragma once

#include <stdexcept>

namespace kelle {

// A SystemC error or fatal report, as an exception.
class simulation_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Call first thing in main(), before any SystemC object exists.
void setup_systemc_process();

// Runs sc_start(...) with these arguments and then, in a sanitizer build, gives AddressSanitizer
// back the real bounds of this thread's stack. SystemC's coroutine switches annotate each switch
// for the sanitizer, but the return to the caller's stack at the end of sc_start leaves the
// thread registered with the last coroutine's stack; that stack is freed with its process, and
// LeakSanitizer's exit-time scan then reads a freed range (it dies with "Tracer caught signal 11"
// in about half the runs, by where the allocator happens to have reused that range).
void sc_start_for(double seconds_limit);

}  // namespace kelle
