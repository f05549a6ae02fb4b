#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "platform/system/sc_setup.h"

#include <systemc>

int main(int argc, char* argv[]) {
  kelle::setup_systemc_process();
  return Catch::Session().run(argc, argv);
}

// libsystemc refers to sc_main; the tests drive the kernel from their TEST_CASEs instead.
int sc_main(int, char*[]) { return 0; }
