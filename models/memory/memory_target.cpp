#include "models/memory/memory_target.h"

#include "platform/tlm/extensions.h"
#include "platform/trace/timeline.h"

#include <cstring>

namespace kelle {

namespace {
// Internal phase: the timing model says the response is ready.
DECLARE_EXTENDED_PHASE(internal_response_ready);
}  // namespace

memory_registry& memories() {
  static memory_registry r("memories", "memory models (system.memories.<name>.model)");
  return r;
}

double tech_value(const config_node& tech, const std::string& section, const std::string& key,
                  const std::string& expected, double min) {
  return tech.child(section).require_double(key, expected, min);
}

memory_target::memory_target(const sc_core::sc_module_name& name, const memory_args& a)
    : sc_core::sc_module(name),
      socket("socket"),
      m_stats("stats"),
      m_reads(m_stats.counter("reads", "count", "read transactions served")),
      m_writes(m_stats.counter("writes", "count", "write transactions served")),
      m_bytes_read(m_stats.counter("bytes_read", "B", "bytes read")),
      m_bytes_written(m_stats.counter("bytes_written", "B", "bytes written")),
      m_capacity(static_cast<std::uint64_t>(
          a.params.require_double("capacity_MiB", "capacity in MiB", 1.0 / 1024, 1 << 24) * 1024 *
          1024)),
      // 16 suits the built-in systems' large transactions; a DRAM fed 64 B requests needs about
      // peak x latency / 64 B in service (64 GB/s x 60 ns: 60) to fill its buses, as a DRAM
      // controller's queues hold (docs/models/memory-lpddr4.md, "Queue depth").
      m_queue_depth(static_cast<unsigned>(a.params.get_uint(
          "queue_depth", 16, "requests the memory accepts before it withholds END_REQ", 1, 4096))),
      m_store_data(a.params.get_bool("store_data", true,
                                     "keep the written data (functional memory)")),
      m_peq(this, &memory_target::peq_cb),
      m_backpressure(m_stats.counter("requests_held", "count",
                                     "requests whose END_REQ was withheld (queue full)")) {
  socket.register_nb_transport_fw(this, &memory_target::nb_transport_fw);
  socket.register_transport_dbg(this, &memory_target::transport_dbg);
  for (std::size_t i = 0; i < traffic_classes; ++i) {
    const traffic_class c = class_at(i);
    m_class_bytes[i] = &m_stats.counter(std::string("bytes_") + name_of(c), "B",
                                        std::string("bytes read and written of traffic class ") + name_of(c),
                                        stat_tag::of_class(c));
  }
  for (std::size_t i = 0; i < traffic_classes; ++i) {
    const traffic_class c = class_at(i);
    m_stats.formula(std::string("access_energy_") + name_of(c), "J",
                    std::string("access and activation energy shared out by the bytes of class ") + name_of(c),
                    [this, c] { return access_energy_of(c); }, stat_tag::of_class(c));
  }
  m_stats.formula("capacity", "B", "capacity of the array",
                  [this] { return static_cast<double>(m_capacity); });
  m_stats.formula("bandwidth_achieved", "GB/s", "bytes moved / simulated time", [this] {
    const double t = now_s();
    return t > 0 ? (m_bytes_read.value() + m_bytes_written.value()) / t / 1e9 : 0.0;
  });
}

double memory_target::access_energy_of(traffic_class c) const {
  const double bytes = bytes_moved();
  if (bytes <= 0) return 0.0;
  double j = 0;
  for (const stat& s : m_stats.all())
    if (s.tag().energy == energy_kind::access || s.tag().energy == energy_kind::activate) j += s.value();
  return j * bytes_of(c) / bytes;
}

tlm::tlm_response_status memory_target::check(const tlm::tlm_generic_payload& t) const {
  const std::uint64_t addr = t.get_address();
  const std::uint64_t len = t.get_data_length();
  if (addr >= m_capacity || len > m_capacity - addr) return tlm::TLM_ADDRESS_ERROR_RESPONSE;
  if (t.get_byte_enable_ptr() != nullptr) return tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE;
  if (t.get_streaming_width() < len) return tlm::TLM_BURST_ERROR_RESPONSE;
  if (t.get_command() == tlm::TLM_IGNORE_COMMAND) return tlm::TLM_COMMAND_ERROR_RESPONSE;
  return tlm::TLM_OK_RESPONSE;
}

tlm::tlm_sync_enum memory_target::nb_transport_fw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                                  sc_core::sc_time& delay) {
  if (ph == tlm::BEGIN_REQ) {
    if (t.has_mm()) t.acquire();
    // A request that arrives now and finds room is accepted on the return path (END_REQ), its
    // service started at once; else it goes through the payload event queue.
    if (delay == sc_core::SC_ZERO_TIME && m_waiting.empty() && m_in_service < m_queue_depth) {
      start_service(t);
      ph = tlm::END_REQ;
      return tlm::TLM_UPDATED;
    }
    m_peq.notify(t, ph, delay);
    return tlm::TLM_ACCEPTED;
  }
  if (ph == tlm::END_RESP) {
    m_peq.notify(t, ph, delay);
    return tlm::TLM_COMPLETED;
  }
  SC_REPORT_FATAL(name(), ("unexpected phase " + std::string(ph.get_name()) +
                           " on the forward path")
                              .c_str());
  return tlm::TLM_COMPLETED;
}

void memory_target::peq_cb(tlm::tlm_generic_payload& t, const tlm::tlm_phase& ph) {
  if (ph == tlm::BEGIN_REQ) {
    if (m_in_service < m_queue_depth) {
      begin_service(t);
    } else {
      ++m_backpressure;
      m_waiting.push_back(&t);
    }
  } else if (ph == internal_response_ready) {
    m_responses.push_back(&t);
    if (!m_resp_in_flight) send_next_response();
  } else if (ph == tlm::END_RESP) {
    finish_response(t);
  } else {
    SC_REPORT_FATAL(name(), ("unexpected phase " + std::string(ph.get_name())).c_str());
  }
}

void memory_target::begin_service(tlm::tlm_generic_payload& t) {
  // Accept the request: END_REQ lets the initiator send its next request.
  tlm::tlm_phase ph = tlm::END_REQ;
  sc_core::sc_time zero = sc_core::SC_ZERO_TIME;
  socket->nb_transport_bw(t, ph, zero);
  start_service(t);
}

void memory_target::start_service(tlm::tlm_generic_payload& t) {
  ++m_in_service;
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  sc_core::sc_time ready = now;
  const tlm::tlm_response_status status = check(t);
  if (status == tlm::TLM_OK_RESPONSE) {
    const std::uint64_t addr = t.get_address(), len = t.get_data_length();
    const bool is_read = t.is_read();
    m_current = m_next_request++;
    m_current_payload = &t;
    ready = service(t.get_command(), addr, len, now);
    if (is_read) {
      ++m_reads;
      m_bytes_read += static_cast<double>(len);
    } else {
      ++m_writes;
      m_bytes_written += static_cast<double>(len);
    }
    *m_class_bytes[index_of(class_of(t))] += static_cast<double>(len);
    if (m_store_data && t.get_extension<timing_only>() == nullptr) {
      if (is_read)
        m_store.read(addr, t.get_data_ptr(), len);
      else
        m_store.write(addr, t.get_data_ptr(), len);
    }
    if (!is_read) on_write(addr, len);
    if (ready == deferred()) {  // the model calls complete() later
      t.set_response_status(status);
      m_deferred.emplace(m_current, deferred_request{&t, now});
      return;
    }
    if (timeline::on())  // busy periods on the memory's timeline track (docs/timeline.md)
      timeline::get().busy(timeline::get().thread_of(this, "memory", basename()), now, ready, len, !is_read);
  }
  t.set_response_status(status);
  m_peq.notify(t, internal_response_ready, ready - now);
}

unsigned memory_target::current_requester() const {
  const routed* via = m_current_payload ? m_current_payload->get_extension<routed>() : nullptr;
  return via ? via->initiator : no_requester;
}

void memory_target::complete(std::uint64_t request, const sc_core::sc_time& ready) {
  const auto it = m_deferred.find(request);
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (it == m_deferred.end() || ready < now) {
    SC_REPORT_FATAL(name(), "complete(): unknown request, or a response time in the past");
    return;
  }
  tlm::tlm_generic_payload& t = *it->second.t;
  if (timeline::on())
    timeline::get().busy(timeline::get().thread_of(this, "memory", basename()), it->second.start, ready,
                         t.get_data_length(), t.is_write());
  m_deferred.erase(it);
  m_peq.notify(t, internal_response_ready, ready - now);
}

void memory_target::send_next_response() {
  while (!m_responses.empty()) {
    tlm::tlm_generic_payload* t = m_responses.front();
    m_responses.pop_front();
    m_resp_in_flight = t;
    tlm::tlm_phase ph = tlm::BEGIN_RESP;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    const tlm::tlm_sync_enum r = socket->nb_transport_bw(*t, ph, delay);
    if (r != tlm::TLM_COMPLETED && !(r == tlm::TLM_UPDATED && ph == tlm::END_RESP))
      return;  // END_RESP comes on the forward path
    if (delay != sc_core::SC_ZERO_TIME) {
      m_peq.notify(*t, tlm::END_RESP, delay);
      return;
    }
    // Completed now (the interconnect buffers responses): the response channel is free at
    // once, without a round through the payload event queue.
    end_response(*t);
  }
}

void memory_target::end_response(tlm::tlm_generic_payload& t) {
  m_resp_in_flight = nullptr;
  --m_in_service;
  if (t.has_mm()) t.release();
  if (!m_waiting.empty() && m_in_service < m_queue_depth) {
    tlm::tlm_generic_payload* next = m_waiting.front();
    m_waiting.pop_front();
    begin_service(*next);
  }
}

void memory_target::finish_response(tlm::tlm_generic_payload& t) {
  if (&t != m_resp_in_flight) {
    SC_REPORT_FATAL(name(), "END_RESP for a transaction whose response is not in flight");
    return;
  }
  end_response(t);
  send_next_response();
}

unsigned int memory_target::transport_dbg(tlm::tlm_generic_payload& t) {
  const std::uint64_t addr = t.get_address();
  std::uint64_t len = t.get_data_length();
  if (addr >= m_capacity) return 0;
  if (len > m_capacity - addr) len = m_capacity - addr;
  if (!m_store_data) return 0;
  if (t.is_read())
    m_store.read(addr, t.get_data_ptr(), len);
  else if (t.is_write())
    m_store.write(addr, t.get_data_ptr(), len);
  else
    return 0;
  t.set_response_status(tlm::TLM_OK_RESPONSE);
  return static_cast<unsigned>(len);
}

}  // namespace kelle
