// The initiator side of the TLM-2.0 approximately-timed base protocol, written once for every
// initiator of the platform (traffic generator, compute blocks' operand engines, the firmware's
// driver, tests). send() issues BEGIN_REQ from the owner's SC_THREAD and returns once the
// request has been accepted (END_REQ, or a response that implies it), so the request-exclusion
// rule holds; every response (BEGIN_RESP, or a TLM_COMPLETED answer) goes to the owner's
// callback with the time it arrives, and END_RESP is given at once (TLM_COMPLETED).
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <functional>

namespace kelle {

class at_initiator {
 public:
  using response_fn = std::function<void(tlm::tlm_generic_payload&, const sc_core::sc_time&)>;

  tlm_utils::simple_initiator_socket<at_initiator> socket;

  // Construct inside the owning module's constructor.
  at_initiator(const char* name, response_fn on_response);

  // Sends BEGIN_REQ; returns when the target side has accepted the request.
  void send(tlm::tlm_generic_payload& t);

 private:
  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph, sc_core::sc_time& d);

  response_fn m_on_response;
  tlm::tlm_generic_payload* m_awaiting_end_req = nullptr;
  sc_core::sc_event m_end_req;
};

}  // namespace kelle
