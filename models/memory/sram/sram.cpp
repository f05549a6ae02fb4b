// `sram`: a banked SRAM array; cell figures from `tech.sram` (paper's Table 1, DESTINY 65 nm).
// See docs/models/memory-sram.md.
#include "models/memory/banked_array.h"

namespace kelle {
namespace {

class sram : public banked_array {
 public:
  explicit sram(const memory_args& a) : banked_array(a, "sram") {}
};

KELLE_REGISTER(memories(), "sram", "banked SRAM array: bandwidth, banks, latency, energy/byte, leakage",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<sram>(a);
               });

}  // namespace
}  // namespace kelle
