// The on-chip interconnect: an approximately-timed TLM-2.0 router (4-phase base protocol) that
// connects any number of initiators to the memory-mapped targets of an address map.
//
// - Address decode from the map; the target sees addresses relative to its base. An unmapped
//   address completes at once with TLM_ADDRESS_ERROR_RESPONSE.
// - Per target port, requests wait in a buffer per initiator (`buffer_depth` requests) and are
//   forwarded one at a time (the base protocol's request exclusion) with round-robin
//   arbitration between initiators. A request that finds room in its buffer gets END_REQ at
//   once; one that finds the buffer full gets it when a buffered request has been accepted by
//   the target, so a target's back-pressure reaches the initiators.
// - Responses are buffered per initiator port and delivered in order of readiness.
// - Every port has a latency (a crossing pays the latency of both ports it uses) and a
//   bandwidth per direction: a port's data transfers are serialised on it (a transfer of B bytes
//   occupies it B / bandwidth), overlapping with the memory's own transfer when the port is idle.
// - transport_dbg is decoded and passed through, for preloading memories.
// Unknown phases are fatal errors.
#pragma once

#include "platform/config/config.h"
#include "platform/stats/stats.h"
#include "platform/tlm/extensions.h"

#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace kelle {

class router : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<router> target_socket;        // initiators bind here
  tlm_utils::multi_passthrough_initiator_socket<router> initiator_socket;  // targets bind here

  // `params` is system.interconnect: latency_ns and bandwidth_GBps of every port, and
  // ports.<name>.{latency_ns, bandwidth_GBps} for one port.
  router(const sc_core::sc_module_name& name, const config_node& params);
  ~router() override;

  // Declare ports in the order their sockets are bound. Address ranges must not overlap.
  void add_target(const std::string& name, std::uint64_t base, std::uint64_t size);
  void add_initiator(const std::string& name);

  struct mapping {
    std::string name;
    std::uint64_t base, size;
  };
  std::vector<mapping> address_map() const;
  // The global base address of a target port by name (throws std::out_of_range if unknown).
  std::uint64_t base_of(const std::string& target) const;

 private:
  struct pending {
    tlm::tlm_generic_payload* t;
    sc_core::sc_time ready;
  };
  // One direction of a port's data path: when it is next free, and the time the last transfer
  // size took on it (transfers mostly repeat one size: the sc_time is built from a double once).
  struct link {
    sc_core::sc_time free;
    std::uint64_t last_bytes = 0;
    sc_core::sc_time last_time;
  };
  struct port {
    std::string name;
    sc_core::sc_time latency;
    double Bps;                      // bytes per second per direction (inf: no limit)
    link down;                       // the downstream (request data) link
    link up;                         // the upstream (response data) link
    sc_core::sc_event wake;
    stat* transactions = nullptr;
    stat* bytes = nullptr;
    stat* wait = nullptr;
  };
  struct target_port : port {
    std::uint64_t base = 0, size = 0;
    std::vector<std::deque<pending>> queues;  // one buffer per initiator
    std::vector<tlm::tlm_generic_payload*> held;  // per initiator: request not yet given END_REQ
    unsigned rr = 0;                          // next initiator the arbiter looks at
    tlm::tlm_generic_payload* awaiting_end_req = nullptr;
    sc_core::sc_event end_req;
    // The arbiter's state between activations: arbitrating, or the request of initiator
    // `current` waiting to be sent (its write data on the links) or to be accepted.
    enum class step { arbitrate, send, accepted } at = step::arbitrate;
    unsigned current = 0;
  };
  struct initiator_port : port {
    std::deque<pending> responses;  // ordered by ready time
    sc_core::sc_event end_resp;
  };
  using route = routed;  // the tlm_extension that carries the route of a transaction

  tlm::tlm_sync_enum nb_transport_fw(int id, tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                     sc_core::sc_time& delay);
  tlm::tlm_sync_enum nb_transport_bw(int id, tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                     sc_core::sc_time& delay);
  unsigned int transport_dbg(int id, tlm::tlm_generic_payload& t);
  void before_end_of_elaboration() override;
  // The arbiter of a target port and the responder of an initiator port: method processes
  // (a state machine each, re-triggered by next_trigger), which cost the kernel a function call
  // per activation where a thread costs two context switches.
  void target_method(unsigned ti);
  void initiator_method(unsigned ii);
  int decode(std::uint64_t addr) const;
  void configure_port(port& p, const std::string& name, const std::string& side);
  void push_response(tlm::tlm_generic_payload& t, const sc_core::sc_time& at);
  route* take_route();
  // Serialises `bytes` on link `l` after what it carries already; returns when they have passed.
  static sc_core::sc_time pass(link& l, double Bps, std::uint64_t bytes, const sc_core::sc_time& at);

  config_node m_params;
  sc_core::sc_time m_default_latency;
  double m_default_Bps;
  std::size_t m_buffer_depth;
  std::vector<std::unique_ptr<target_port>> m_targets;
  std::vector<std::unique_ptr<initiator_port>> m_initiators;
  // Route extensions not in use. One in flight belongs to its payload until the router takes
  // it back, so a payload freed mid-flight (end of simulation) frees it with its extensions.
  std::vector<route*> m_free_routes;
  stat_group m_stats;
  stat& m_decode_errors;
};

}  // namespace kelle
