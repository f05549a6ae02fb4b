// `traffic`: a traffic-generator initiator for memory microbenchmarks. It issues `total_bytes`
// in bursts of `burst_bytes` to one memory, sequentially, strided or at random burst-aligned
// addresses, reads, writes or a read/write mix, keeping up to `outstanding` requests in flight,
// over the AT base protocol.
// It measures achieved bandwidth and the latency of every request (BEGIN_REQ issued -> BEGIN_RESP
// received). See docs/models/traffic.md.
#pragma once

#include "platform/stats/histogram.h"
#include "platform/stats/stats.h"
#include "platform/system/workload.h"
#include "platform/tlm/at_initiator.h"
#include "platform/tlm/payload_pool.h"

#include <random>

namespace kelle {

class traffic_generator : public workload {
 public:
  traffic_generator(const sc_core::sc_module_name& name, const workload_args& args);

  bool finished() const override { return m_completed == m_count; }
  void add_results(nlohmann::json& results) const override;
  std::string report() const override;

  double bandwidth_GBps() const;

 private:
  void run();
  void complete(tlm::tlm_generic_payload& t, const sc_core::sc_time& at);
  std::uint64_t next_address();
  bool next_is_write() const;

  struct issue_time;  // extension: when a payload's request was issued

  std::string m_target;
  enum class pattern { sequential, strided, random };
  enum class op { read, write, mix };
  pattern m_pattern;
  op m_op;
  double m_read_fraction = 1.0;  // op mix: share of the requests that are reads
  bool m_data;
  std::uint64_t m_burst, m_total, m_count, m_outstanding;
  std::uint64_t m_stride_slots = 1;  // pattern strided: the stride in bursts
  std::uint64_t m_base, m_region;
  std::mt19937_64 m_rng;
  payload_pool m_pool;

  std::uint64_t m_issued = 0, m_completed = 0, m_in_flight = 0, m_errors = 0, m_bytes_done = 0;
  sc_core::sc_time m_first_issue, m_last_response;
  at_initiator m_port;
  sc_core::sc_event m_response;
  log_histogram m_latency;
  stat_group m_stats;
};

}  // namespace kelle
