// A platform with one 4 MiB eDRAM `kv` at address 0 and a scripted initiator (test::bench), for
// the tests of the eDRAM array and of the refresh policies.
#pragma once

#include "models/memory/edram/edram.h"
#include "tests/support/test_initiator.h"

namespace kelle::test {

inline const char* const edram_bench_yaml = R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    kv: {model: edram, base_addr: 0, capacity_MiB: 4, bandwidth_GBps: 256, banks: 32}
workload: {type: test_script}
)";

inline edram& kv_edram(bench& b) { return dynamic_cast<edram&>(*b.p->memory("kv")); }

}  // namespace kelle::test
