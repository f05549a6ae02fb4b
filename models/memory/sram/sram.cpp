// `sram`: a banked SRAM array; cell figures from `tech.sram` (paper's Table 1, DESTINY 65 nm).
// See docs/models/memory-sram.md.
#include "models/memory/banked_array.h"

namespace kelle {
namespace {

class sram : public banked_array {
 public:
  sram(const sc_core::sc_module_name& n, const memory_args& a) : banked_array(n, a, "sram") {}
};

KELLE_REGISTER(memories(), "sram", "banked SRAM array: bandwidth, banks, latency, energy/byte, leakage",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<sram>(a.name.c_str(), a);
               });

}  // namespace
}  // namespace kelle
