// A scripted AT initiator for tests: requests are queued with the time to issue them; each is
// issued at that time or as soon as the base protocol allows (END_REQ of the previous one of its
// port), and its phase times and response status are recorded. Registered as workload type
// `test_script`; `ports: 2` gives it a second interconnect port (a second requester).
#pragma once

#include "vp/platform.h"
#include "platform/system/workload.h"

#include "platform/tlm/at_initiator.h"

#include <functional>
#include <memory>
#include <vector>

namespace kelle::test {

struct request {
  tlm::tlm_command cmd = tlm::TLM_READ_COMMAND;
  std::uint64_t addr = 0;
  unsigned len = 64;
  sc_core::sc_time issue_at;           // earliest time to send BEGIN_REQ
  std::vector<unsigned char> data;     // write data / read result
  unsigned char* byte_enable = nullptr;
  unsigned streaming_width = 0;        // 0: the length
  bool debug = false;                  // use transport_dbg (no time passes)
  unsigned port = 0;                   // 0, or 1 with `workload: {type: test_script, ports: 2}`
  unsigned debug_bytes = 0;            // what transport_dbg returned
  // Filled in by the run:
  sc_core::sc_time begin_req, end_req, begin_resp;
  tlm::tlm_response_status status = tlm::TLM_INCOMPLETE_RESPONSE;
  bool done = false;
  sc_core::sc_time latency() const { return begin_resp - begin_req; }
};

class test_initiator : public workload {
 public:
  test_initiator(const sc_core::sc_module_name& name, const workload_args& args);
  ~test_initiator() override;

  // Queues a request; returns its index. Call before the simulation runs.
  std::size_t read(std::uint64_t addr, unsigned len, sc_core::sc_time at = sc_core::SC_ZERO_TIME);
  std::size_t write(std::uint64_t addr, std::vector<unsigned char> data,
                    sc_core::sc_time at = sc_core::SC_ZERO_TIME);
  std::size_t add(request r);
  request& operator[](std::size_t i) { return *m_requests[i]; }
  std::size_t size() const { return m_requests.size(); }
  bool finished() const override;

 private:
  struct tx;
  void run(unsigned port);
  void complete(tlm::tlm_generic_payload& t, const sc_core::sc_time& at);

  std::vector<std::unique_ptr<request>> m_requests;
  std::vector<std::unique_ptr<tx>> m_tx;
  // Each port is its own interconnect initiator (a requester of its own to the targets) and
  // issues its requests in order.
  std::vector<std::unique_ptr<at_initiator>> m_ports;
};

// A platform built from YAML text (the tech file is included from scenarios/) with a
// test_script workload; `p.work()` is the test initiator.
struct bench {
  explicit bench(const std::string& yaml, const std::vector<std::string>& overrides = {});
  config cfg;
  std::unique_ptr<platform> p;
  test_initiator& init() { return dynamic_cast<test_initiator&>(p->work()); }
};

// Runs `f` in a forked child process and returns what it returned (SystemC cannot restart its
// kernel within one process, so a test that compares several simulations runs each in a child).
// An exception in the child comes back as "error: <what>".
std::string in_child_process(const std::function<std::string()>& f);

// Builds the platform of the configuration `make` returns in a child process, runs it and returns
// its results.json; an error in the child is thrown here (std::runtime_error "error: <what>").
nlohmann::json results_in_child(const std::function<config()>& make);

}  // namespace kelle::test
