// `op`: a workload that runs one command on one compute block, the way the firmware does: it
// places the operands in memories, writes the 64-byte descriptor to the block's command port
// over the interconnect, and waits for the completion interrupt. `kelle-vp op` uses it for
// quick what-if studies of one operation. See docs/models/compute-commands.md.
#pragma once

#include "models/compute/compute_block.h"
#include "platform/system/workload.h"
#include "platform/tlm/at_initiator.h"

namespace kelle {

class op_workload : public workload {
 public:
  op_workload(const sc_core::sc_module_name& name, const workload_args& args);
  bool finished() const override { return m_done; }
  void add_results(nlohmann::json& results) const override;
  std::string report() const override;

  // The opcode of a name (gemm, softmax, ...), or throws config_error via `where`.
  static opcode parse_opcode(const config_node& where, const std::string& key);

 private:
  void run();

  compute_block* m_block;
  std::string m_block_name;
  std::uint64_t m_block_base;
  command m_cmd;
  std::array<std::string, 4> m_operand_memory;
  bool m_done = false;
  tlm::tlm_response_status m_write_status = tlm::TLM_INCOMPLETE_RESPONSE;
  completion m_completion;
  nlohmann::json m_block_report;
  bool m_answered = false;
  sc_core::sc_event m_response;
  at_initiator m_port;
};

}  // namespace kelle
