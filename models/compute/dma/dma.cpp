// `dma`: a copy engine. The firmware streams weights from DRAM into the weight SRAM, moves KV
// between DRAM and the KV eDRAM, and so on, with `copy` commands: m x k bytes from addr_a to
// addr_c, chunk by chunk, each chunk written as soon as it has been read (reads and writes share
// `outstanding` requests in flight). The time is the memories' and the interconnect's; the engine
// adds one cycle per command. See docs/models/compute-dma.md.
#include "models/compute/compute_block.h"

namespace kelle {
namespace {

class dma : public compute_block {
 public:
  dma(const sc_core::sc_module_name& n, const compute_args& a) : compute_block(n, a) {}

  std::array<std::uint64_t, 4> operand_bytes(const command& c) const override {
    const std::uint64_t len = std::uint64_t(c.m) * c.k;
    return {len, 0, len, 0};
  }

 protected:
  cmd_status validate(const command& c) const override {
    if (c.op != opcode::copy) return cmd_status::bad_opcode;
    if (c.m == 0 || c.k == 0) return cmd_status::bad_shape;
    return cmd_status::ok;
  }
  cmd_status execute(const command& c) override {
    sc_core::wait(cycles(1));
    return copy(operand_class(c, operand_a), c.addr_a, operand_class(c, operand_c), c.addr_c,
                std::uint64_t(c.m) * c.k);
  }
};

KELLE_REGISTER(compute_blocks(), "dma", "copy engine (weights DRAM -> SRAM, KV DRAM <-> eDRAM)",
               [](const compute_args& a) -> std::unique_ptr<compute_block> {
                 return std::make_unique<dma>(a.name.c_str(), a);
               });

}  // namespace
}  // namespace kelle
