#include "platform/tlm/at_initiator.h"

#include <string>

namespace kelle {

at_initiator::at_initiator(const char* name, response_fn on_response)
    : socket(name), m_on_response(std::move(on_response)) {
  socket.register_nb_transport_bw(this, &at_initiator::nb_transport_bw);
}

void at_initiator::send(tlm::tlm_generic_payload& t) {
  tlm::tlm_phase ph = tlm::BEGIN_REQ;
  sc_core::sc_time d = sc_core::SC_ZERO_TIME;
  m_awaiting_end_req = &t;
  const tlm::tlm_sync_enum r = socket->nb_transport_fw(t, ph, d);
  if (r == tlm::TLM_ACCEPTED) {
    if (m_awaiting_end_req) sc_core::wait(m_end_req);
    return;
  }
  m_awaiting_end_req = nullptr;
  if (r == tlm::TLM_COMPLETED || ph == tlm::BEGIN_RESP) m_on_response(t, sc_core::sc_time_stamp() + d);
  if (d > sc_core::SC_ZERO_TIME) sc_core::wait(d);
}

tlm::tlm_sync_enum at_initiator::nb_transport_bw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                                 sc_core::sc_time& d) {
  if (ph == tlm::END_REQ || ph == tlm::BEGIN_RESP) {
    if (m_awaiting_end_req == &t) {  // BEGIN_RESP implies END_REQ
      m_awaiting_end_req = nullptr;
      m_end_req.notify(d);
    }
  }
  if (ph == tlm::END_REQ) return tlm::TLM_ACCEPTED;
  if (ph == tlm::BEGIN_RESP) {
    m_on_response(t, sc_core::sc_time_stamp() + d);
    return tlm::TLM_COMPLETED;
  }
  SC_REPORT_FATAL(socket.name(), ("unexpected phase " + std::string(ph.get_name())).c_str());
  return tlm::TLM_COMPLETED;
}

}  // namespace kelle
