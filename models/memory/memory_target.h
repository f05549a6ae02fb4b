// The base of every memory model: an approximately-timed TLM-2.0 target that implements the
// base protocol once (payload event queue, back-pressure by withholding END_REQ when the request
// queue is full, one response in flight at a time, errors for bad addresses, byte enables and
// streaming widths, transport_dbg for preloading) and asks the derived model only one question:
// when is the response to this access ready? (A model may answer it later: deferred().) Models
// count actions; energy is counts x energy per action from the technology description.
#pragma once

#include "models/memory/sparse_store.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"
#include "platform/stats/stats.h"
#include "platform/tlm/traffic_class.h"

#include <systemc>
#include <tlm>
#include <tlm_utils/peq_with_cb_and_phase.h>
#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

namespace kelle {

class memory_target;
class refresh_control;

// What a memory model's factory receives.
struct memory_args {
  std::string name;   // instance name: dram, weight_sram, kv_edram, act_edram, sram, ...
  config_node params; // the instance's section, system.memories.<name>
  config_node tech;   // the technology description shared by every system, `tech`
};

using memory_registry = registry<memory_target, const memory_args&>;
memory_registry& memories();

class memory_target : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<memory_target> socket;

  // `name` must be the factory's sc_module_name (it has to outlive the whole constructor chain:
  // SystemC leaves the module's scope when it is destroyed); make_unique<M>(args.name.c_str(),
  // args) does that.
  memory_target(const sc_core::sc_module_name& name, const memory_args& args);

  std::uint64_t capacity_bytes() const { return m_capacity; }
  // The model's peak data bandwidth in bytes per second (what a perfect stream would reach).
  virtual double peak_bandwidth_Bps() const = 0;
  // What a long sequential read stream sustains, bytes per second: the peak less what refresh
  // and row switches take (first-order estimates, the roofline of docs/firmware.md). The peak
  // unless the model knows better.
  virtual double sustainable_bandwidth_Bps() const { return peak_bandwidth_Bps(); }
  // Bytes read and written so far (the requests served).
  double bytes_moved() const { return m_bytes_read.value() + m_bytes_written.value(); }
  // Of those, the bytes of one traffic class (the class the initiator tagged the transaction
  // with, platform/tlm/traffic_class.h); the classes add up to bytes_moved().
  double bytes_of(traffic_class c) const { return m_class_bytes[index_of(c)]->value(); }
  // The memory's access energy (its `access` and `activate` energy parts) shared out by the bytes
  // of each class: the energy the class's transactions cost.
  double access_energy_of(traffic_class c) const;
  // The memory's statistics (its energy parts, its figures by traffic class).
  const stat_group& stats() const { return m_stats; }
  // Silicon area of the array in mm2 (0 for off-chip memories).
  virtual double area_mm2() const { return 0.0; }
  // Dynamic energy of reading one byte, J (0 when the model does not say): what the firmware's
  // cost models (AERP's recomputation budget) weigh a byte read from this memory with.
  virtual double read_energy_J_per_byte() const { return 0.0; }
  // The memory's refresh control, for memories whose cells need refresh (eDRAM), else nullptr.
  virtual refresh_control* refresh() { return nullptr; }

  // What a first-order model of a run takes from the memory without simulating it (kelle-vp
  // estimate, firmware/llm/estimate.h): the figures the model's own energy parts are made of.
  struct first_order_figures {
    double read_J_per_B = 0, write_J_per_B = 0;  // dynamic energy per byte read, written
    double activate_J_per_B = 0;  // row activations of a sequential stream, per byte (DRAM)
    double static_W = 0;          // leakage (arrays) or background power (DRAM), always drawn
    double refresh_W = 0;         // refresh of the whole device whatever it holds (DRAM)
    double refresh_J_per_bit = 0; // energy per live bit refreshed (eDRAM)
    double refresh_interval_s = 0;  // the array's own refresh interval (eDRAM)
  };
  virtual first_order_figures first_order() const { return {}; }

 protected:
  // The timing model, called once per accepted request in acceptance order with the time its
  // service may start; returns the time its response (read data or write acknowledge) is ready.
  // Implementations update bank/channel state and count actions.
  virtual sc_core::sc_time service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                                   const sc_core::sc_time& start) = 0;
  // Called after the data of an accepted write has been stored (eDRAM marks data live).
  virtual void on_write(std::uint64_t /*addr*/, std::uint64_t /*len*/) {}

  // A model whose requests share its resources (a request's end then depends on requests that
  // arrive later) returns deferred() from service() and calls complete() with the request's id,
  // current_request() during that service() call, once it knows when the response is ready.
  static const sc_core::sc_time& deferred() { return sc_core::sc_max_time(); }
  std::uint64_t current_request() const { return m_current; }
  // The interconnect port the request in service() came from (kelle::routed), or no_requester.
  static constexpr unsigned no_requester = ~0u;
  unsigned current_requester() const;
  void complete(std::uint64_t request, const sc_core::sc_time& ready);

  stat_group m_stats;
  stat& m_reads;
  stat& m_writes;
  stat& m_bytes_read;
  stat& m_bytes_written;

 private:
  std::array<stat*, traffic_classes> m_class_bytes{};  // bytes_<class>: read and written
  tlm::tlm_sync_enum nb_transport_fw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                     sc_core::sc_time& delay);
  unsigned int transport_dbg(tlm::tlm_generic_payload& t);
  void peq_cb(tlm::tlm_generic_payload& t, const tlm::tlm_phase& ph);
  void begin_service(tlm::tlm_generic_payload& t);  // END_REQ on the backward path, then start_service()
  void start_service(tlm::tlm_generic_payload& t);  // the request accepted: its service begins now
  void send_next_response();
  void finish_response(tlm::tlm_generic_payload& t);  // END_RESP received
  void end_response(tlm::tlm_generic_payload& t);     // the response channel is free again
  tlm::tlm_response_status check(const tlm::tlm_generic_payload& t) const;

  std::uint64_t m_capacity;
  unsigned m_queue_depth;   // requests accepted and not yet answered, at most
  bool m_store_data;        // keep a backing store (functional data)
  sparse_store m_store;
  tlm_utils::peq_with_cb_and_phase<memory_target> m_peq;
  unsigned m_in_service = 0;
  std::deque<tlm::tlm_generic_payload*> m_waiting;    // requests held back (no END_REQ yet)
  std::deque<tlm::tlm_generic_payload*> m_responses;  // ready, waiting for the response channel
  std::uint64_t m_current = 0;                        // the request in service() (deferred models)
  tlm::tlm_generic_payload* m_current_payload = nullptr;  // and its payload
  struct deferred_request {
    tlm::tlm_generic_payload* t;
    sc_core::sc_time start;
  };
  std::unordered_map<std::uint64_t, deferred_request> m_deferred;
  std::uint64_t m_next_request = 1;
  tlm::tlm_generic_payload* m_resp_in_flight = nullptr;
  stat& m_backpressure;
};

// Reads `<tech_section>.<key>` from the technology description with a unit in the key's name.
double tech_value(const config_node& tech, const std::string& section, const std::string& key,
                  const std::string& expected, double min = 0.0);

}  // namespace kelle
