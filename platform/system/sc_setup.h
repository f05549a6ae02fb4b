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

}  // namespace kelle
