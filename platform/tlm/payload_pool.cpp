#include "platform/tlm/payload_pool.h"

namespace kelle {

payload_pool::~payload_pool() {
  // Payloads own their sticky extensions; free them before the payloads go.
  for (auto& p : m_all) p->free_all_extensions();
}

tlm::tlm_generic_payload* payload_pool::acquire(std::size_t data_bytes) {
  pooled* p;
  if (m_free.empty()) {
    m_all.push_back(std::make_unique<pooled>(this));
    p = m_all.back().get();
  } else {
    p = m_free.back();
    m_free.pop_back();
  }
  if (p->data.size() < data_bytes) p->data.resize(data_bytes);
  p->set_data_ptr(p->data.data());
  p->set_data_length(static_cast<unsigned>(data_bytes));
  p->set_streaming_width(static_cast<unsigned>(data_bytes));
  p->set_byte_enable_ptr(nullptr);
  p->set_byte_enable_length(0);
  p->set_dmi_allowed(false);
  p->set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  p->acquire();
  return p;
}

void payload_pool::free(tlm::tlm_generic_payload* p) {
  p->reset();  // frees auto extensions
  m_free.push_back(static_cast<pooled*>(p));
}

}  // namespace kelle
