// `op`: a workload that runs one command on one compute block, the way the firmware does: it
// places the operands in memories, writes the 64-byte descriptor to the block's command port
// over the interconnect, and waits for the completion interrupt. `kelle-vp op` uses it for
// quick what-if studies of one operation. See docs/models/compute-commands.md.
#pragma once

#include "models/compute/compute_block.h"
#include "platform/system/workload.h"

#include <tlm_utils/simple_initiator_socket.h>

namespace kelle {

class op_workload : public workload {
 public:
  tlm_utils::simple_initiator_socket<op_workload> socket;

  op_workload(const sc_core::sc_module_name& name, const workload_args& args);
  bool finished() const override { return m_done; }
  void add_results(nlohmann::json& results) const override;
  std::string report() const override;
  const completion& result() const { return m_completion; }

  // The opcode of a name (gemm, softmax, ...), or throws config_error via `where`.
  static opcode parse_opcode(const config_node& where, const std::string& key);

 private:
  void run();
  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph, sc_core::sc_time& d);

  compute_block* m_block;
  std::string m_block_name;
  std::uint64_t m_block_base;
  command m_cmd;
  std::array<std::string, 4> m_operand_memory;
  bool m_done = false;
  tlm::tlm_response_status m_write_status = tlm::TLM_INCOMPLETE_RESPONSE;
  completion m_completion;
  nlohmann::json m_block_report;
  sc_core::sc_event m_response;
};

}  // namespace kelle
