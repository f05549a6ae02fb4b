// kelle-pingpong: the reference point of the simulation-speed benchmark (scripts/bench,
// docs/benchmark.md). A bare SystemC/TLM-2.0 approximately-timed ping-pong: one initiator, one
// target, the 4-phase base protocol (BEGIN_REQ, END_REQ, BEGIN_RESP, END_RESP, each an explicit
// nb_transport call), a payload event queue in the target, payloads from a memory manager, one
// transaction in flight. Nothing else: no interconnect, no timing model, no statistics. What a
// transaction costs here is what the SystemC kernel and the TLM sockets cost.
//
//   kelle-pingpong [--transactions N] [--bytes 0|64]
// prints {"transactions": N, "wall_s": ..., "tps": ..., ...} (one line of JSON).
#include <systemc>
#include <tlm>
#include <tlm_utils/peq_with_cb_and_phase.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

// Payloads are reused: acquire() hands out a reset payload with a data buffer, the last
// release() returns it here.
class memory_manager : public tlm::tlm_mm_interface {
 public:
  explicit memory_manager(std::size_t bytes) : m_bytes(bytes) {}
  ~memory_manager() override {
    for (auto* p : m_all) {
      p->set_data_ptr(nullptr);
      delete p;
    }
  }
  tlm::tlm_generic_payload* acquire() {
    tlm::tlm_generic_payload* p;
    if (m_free.empty()) {
      p = new tlm::tlm_generic_payload(this);
      m_all.push_back(p);
      m_buffers.emplace_back(m_bytes ? m_bytes : 1);
      p->set_data_ptr(m_buffers.back().data());
    } else {
      p = m_free.back();
      m_free.pop_back();
    }
    p->acquire();
    return p;
  }
  void free(tlm::tlm_generic_payload* p) override {
    p->reset();  // frees auto extensions; the data pointer stays
    m_free.push_back(p);
  }

 private:
  std::size_t m_bytes;
  std::vector<tlm::tlm_generic_payload*> m_all;
  std::vector<tlm::tlm_generic_payload*> m_free;
  std::vector<std::vector<unsigned char>> m_buffers;
};

// Internal phase of the target: the response is ready.
DECLARE_EXTENDED_PHASE(respond);

class target : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<target> socket;

  explicit target(const sc_core::sc_module_name& n)
      : sc_core::sc_module(n), socket("socket"), m_peq(this, &target::peq_cb) {
    socket.register_nb_transport_fw(this, &target::nb_transport_fw);
  }

 private:
  tlm::tlm_sync_enum nb_transport_fw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph, sc_core::sc_time& d) {
    if (ph == tlm::BEGIN_REQ) {
      t.acquire();
      m_peq.notify(t, ph, d);
      return tlm::TLM_ACCEPTED;
    }
    if (ph == tlm::END_RESP) {
      m_peq.notify(t, ph, d);
      return tlm::TLM_COMPLETED;
    }
    SC_REPORT_FATAL(name(), "unexpected phase on the forward path");
    return tlm::TLM_COMPLETED;
  }

  void peq_cb(tlm::tlm_generic_payload& t, const tlm::tlm_phase& ph) {
    if (ph == tlm::BEGIN_REQ) {
      tlm::tlm_phase p = tlm::END_REQ;
      sc_core::sc_time d = sc_core::SC_ZERO_TIME;
      socket->nb_transport_bw(t, p, d);
      t.set_response_status(tlm::TLM_OK_RESPONSE);
      m_peq.notify(t, respond, m_latency);
    } else if (ph == respond) {
      tlm::tlm_phase p = tlm::BEGIN_RESP;
      sc_core::sc_time d = sc_core::SC_ZERO_TIME;
      const tlm::tlm_sync_enum r = socket->nb_transport_bw(t, p, d);
      if (r == tlm::TLM_COMPLETED) t.release();  // the initiator skipped END_RESP
    } else if (ph == tlm::END_RESP) {
      t.release();
    } else {
      SC_REPORT_FATAL(name(), "unexpected phase");
    }
  }

  tlm_utils::peq_with_cb_and_phase<target> m_peq;
  const sc_core::sc_time m_latency{10, sc_core::SC_NS};
};

class initiator : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<initiator> socket;

  initiator(const sc_core::sc_module_name& n, std::uint64_t transactions, std::size_t bytes)
      : sc_core::sc_module(n), socket("socket"), m_n(transactions), m_bytes(bytes), m_mm(bytes) {
    socket.register_nb_transport_bw(this, &initiator::nb_transport_bw);
    SC_HAS_PROCESS(initiator);
    SC_THREAD(run);
  }
  std::uint64_t completed() const { return m_done; }

 private:
  void run() {
    for (std::uint64_t i = 0; i < m_n; ++i) {
      tlm::tlm_generic_payload* t = m_mm.acquire();
      t->set_command((i & 1) ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
      t->set_address((i * 64) & 0xffff);
      t->set_data_length(static_cast<unsigned>(m_bytes));
      t->set_streaming_width(static_cast<unsigned>(m_bytes));
      t->set_byte_enable_ptr(nullptr);
      t->set_dmi_allowed(false);
      t->set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);

      tlm::tlm_phase ph = tlm::BEGIN_REQ;
      sc_core::sc_time d = sc_core::SC_ZERO_TIME;
      m_in_flight = t;
      m_end_req_seen = m_resp_seen = false;
      if (socket->nb_transport_fw(*t, ph, d) != tlm::TLM_ACCEPTED)
        SC_REPORT_FATAL(name(), "the target is expected to answer BEGIN_REQ with TLM_ACCEPTED");
      if (!m_end_req_seen) sc_core::wait(m_end_req);
      if (!m_resp_seen) sc_core::wait(m_resp);

      ph = tlm::END_RESP;
      d = sc_core::SC_ZERO_TIME;
      socket->nb_transport_fw(*t, ph, d);
      if (t->get_response_status() != tlm::TLM_OK_RESPONSE) SC_REPORT_FATAL(name(), "error response");
      t->release();
      ++m_done;
      sc_core::wait(m_gap);  // the next request one cycle later
    }
  }

  tlm::tlm_sync_enum nb_transport_bw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph, sc_core::sc_time& d) {
    if (&t != m_in_flight) SC_REPORT_FATAL(name(), "a phase for a transaction not in flight");
    if (ph == tlm::END_REQ) {
      m_end_req_seen = true;
      m_end_req.notify(d);
      return tlm::TLM_ACCEPTED;
    }
    if (ph == tlm::BEGIN_RESP) {
      m_resp_seen = true;
      m_resp.notify(d);
      return tlm::TLM_ACCEPTED;  // END_RESP follows on the forward path
    }
    SC_REPORT_FATAL(name(), "unexpected phase on the backward path");
    return tlm::TLM_COMPLETED;
  }

  std::uint64_t m_n, m_done = 0;
  std::size_t m_bytes;
  memory_manager m_mm;
  tlm::tlm_generic_payload* m_in_flight = nullptr;
  bool m_end_req_seen = false, m_resp_seen = false;
  sc_core::sc_event m_end_req, m_resp;
  const sc_core::sc_time m_gap{1, sc_core::SC_NS};
};

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--transactions N] [--bytes 0|64]\n", argv0);
  return 2;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  std::uint64_t n = 1000000;
  std::size_t bytes = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--transactions" || a == "-n") && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--bytes" && i + 1 < argc) {
      bytes = std::strtoull(argv[++i], nullptr, 10);
      if (bytes != 0 && bytes != 64) return usage(argv[0]);
    } else {
      return usage(argv[0]);
    }
  }
  sc_core::sc_report_handler::set_actions("/IEEE_Std_1666/deprecated", sc_core::SC_DO_NOTHING);

  initiator ini("initiator", n, bytes);
  target tgt("target");
  ini.socket.bind(tgt.socket);

  const auto t0 = std::chrono::steady_clock::now();
  sc_core::sc_start();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ini.completed() != n) {
    std::fprintf(stderr, "kelle-pingpong: %llu of %llu transactions completed\n",
                 static_cast<unsigned long long>(ini.completed()), static_cast<unsigned long long>(n));
    return 1;
  }
  std::printf("{\"transactions\": %llu, \"wall_s\": %.6f, \"tps\": %.1f, \"bytes\": %zu, \"sim_time_s\": %.9g}\n",
              static_cast<unsigned long long>(n), wall, wall > 0 ? n / wall : 0.0, bytes,
              sc_core::sc_time_stamp().to_seconds());
  return 0;
}
