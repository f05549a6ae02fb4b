#include "models/traffic/traffic_generator.h"

#include "models/interconnect/router.h"
#include "models/memory/memory_target.h"
#include "platform/tlm/extensions.h"

#include <cmath>
#include <cstdio>

namespace kelle {

struct traffic_generator::issue_time : tlm::tlm_extension<issue_time> {
  sc_core::sc_time at;
  tlm::tlm_extension_base* clone() const override { return new issue_time(*this); }
  void copy_from(const tlm::tlm_extension_base& e) override { at = static_cast<const issue_time&>(e).at; }
};

traffic_generator::traffic_generator(const sc_core::sc_module_name& name, const workload_args& a)
    : workload(name),
      m_port("socket", [this](tlm::tlm_generic_payload& t, const sc_core::sc_time& at) { complete(t, at); }),
      m_stats("stats") {
  const config_node& p = a.params;
  m_target = p.require_string("target", "the name of a memory (" + a.platform.memory_names() + ")");
  memory_target* mem = a.platform.memory(m_target);
  if (!mem) p.fail("target", "no memory named '" + m_target + "' (expected one of: " +
                                 a.platform.memory_names() + ")");
  const std::string pat = p.get_choice("pattern", "sequential", {"sequential", "strided", "random"});
  m_pattern = pat == "random" ? pattern::random : pat == "strided" ? pattern::strided : pattern::sequential;
  const std::string o = p.get_choice("op", "read", {"read", "write", "mix"});
  m_op = o == "write" ? op::write : o == "mix" ? op::mix : op::read;
  m_burst = p.get_uint("burst_bytes", 64, "bytes per request", 1, 1ull << 31);
  if (m_op == op::mix)
    m_read_fraction = p.get_double("read_fraction", 2.0 / 3.0,
                                   "share of the requests that are reads (op: mix), 0 to 1", 0, 1);
  if (m_pattern == pattern::strided) {
    const std::uint64_t stride = p.get_uint("stride_bytes", m_burst,
                                            "distance between consecutive requests in bytes (pattern: strided)",
                                            1, 1ull << 40);
    if (stride % m_burst != 0)
      p.fail("stride_bytes", "must be a multiple of burst_bytes (" + std::to_string(m_burst) + " B)");
    m_stride_slots = stride / m_burst;
  }
  m_total = p.require_uint("total_bytes", "bytes to transfer in all", 1);
  m_outstanding = p.get_uint("outstanding", 8, "requests in flight at most", 1, 1 << 16);
  m_data = p.get_bool("carry_data", false, "copy real data (false: timing only, faster)");
  const std::uint64_t offset = p.get_uint("offset_bytes", 0, "first byte used inside the target");
  if (offset >= mem->capacity_bytes())
    p.fail("offset_bytes", "must be below the target's capacity (" +
                               std::to_string(mem->capacity_bytes()) + " B)");
  m_region = p.get_uint("region_bytes", mem->capacity_bytes() - offset,
                        "bytes of the target the pattern covers (wraps around)", 1);
  if (m_region > mem->capacity_bytes() - offset)
    p.fail("region_bytes", "offset_bytes + region_bytes exceeds the target's capacity (" +
                               std::to_string(mem->capacity_bytes()) + " B)");
  if (m_region < m_burst) p.fail("region_bytes", "must hold at least one burst");
  m_rng.seed(p.get_uint("seed", a.platform.seed(), "random seed (default: the scenario's seed)"));
  m_count = m_total / m_burst + (m_total % m_burst != 0);
  // A bound on the run's work: at about a million requests per second of wall time, the largest
  // run takes minutes, not days (docs/models/traffic.md).
  constexpr std::uint64_t max_requests = 100000000;
  if (m_count > max_requests)
    p.fail("total_bytes", std::to_string(m_total) + " bytes in bursts of " + std::to_string(m_burst) + " are " +
                              std::to_string(m_count) + " requests; a traffic run may issue at most " +
                              std::to_string(max_requests) + " (raise burst_bytes or lower total_bytes)");
  m_base = a.platform.interconnect().base_of(m_target) + offset;

  a.platform.interconnect().add_initiator(basename());
  m_port.socket.bind(a.platform.interconnect().target_socket);
  SC_HAS_PROCESS(traffic_generator);
  SC_THREAD(run);

  m_stats.formula("requests", "count", "requests completed", [this] { return double(m_completed); });
  m_stats.formula("bytes", "B", "bytes transferred", [this] { return double(m_bytes_done); });
  m_stats.formula("bandwidth", "GB/s", "bytes / (last response - first request)",
                  [this] { return bandwidth_GBps(); });
  m_stats.formula("latency_avg", "ns", "mean request latency (BEGIN_REQ -> BEGIN_RESP)",
                  [this] { return m_latency.mean() * 1e9; });
  m_stats.formula("latency_p99", "ns", "99th-percentile request latency",
                  [this] { return m_latency.quantile(0.99) * 1e9; });
  m_stats.formula("latency_max", "ns", "largest request latency", [this] { return m_latency.max() * 1e9; });
  m_stats.formula("errors", "count", "responses with an error status", [this] { return double(m_errors); });
}

std::uint64_t traffic_generator::next_address() {
  const std::uint64_t slots = m_region / m_burst;
  switch (m_pattern) {
    case pattern::random: return m_base + (m_rng() % slots) * m_burst;
    case pattern::strided: return m_base + (m_issued * m_stride_slots % slots) * m_burst;
    case pattern::sequential: break;
  }
  return m_base + (m_issued % slots) * m_burst;
}

bool traffic_generator::next_is_write() const {
  if (m_op != op::mix) return m_op == op::write;
  // Request i is a read when floor((i + 1) f) > floor(i f): exactly f of every run of requests,
  // evenly spread (2/3: read, read, write, ...), the same in every run.
  const double i = static_cast<double>(m_issued);
  return std::floor((i + 1) * m_read_fraction) == std::floor(i * m_read_fraction);
}

void traffic_generator::run() {
  m_first_issue = sc_core::sc_time_stamp();
  while (m_issued < m_count) {
    while (m_in_flight >= m_outstanding) sc_core::wait(m_response);
    const std::uint64_t len = std::min(m_burst, m_total - m_issued * m_burst);
    tlm::tlm_generic_payload* t = m_pool.acquire(m_data ? len : 0);
    t->set_data_length(static_cast<unsigned>(len));
    t->set_streaming_width(static_cast<unsigned>(len));
    t->set_command(next_is_write() ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
    t->set_address(next_address());
    if (!m_data && !t->get_extension<timing_only>()) t->set_extension(new timing_only);
    issue_time* it = t->get_extension<issue_time>();
    if (!it) t->set_extension(it = new issue_time);
    it->at = sc_core::sc_time_stamp();
    ++m_issued;
    ++m_in_flight;

    m_port.send(*t);
  }
}

void traffic_generator::complete(tlm::tlm_generic_payload& t, const sc_core::sc_time& at) {
  if (t.is_response_error()) ++m_errors;
  m_latency.add((at - t.get_extension<issue_time>()->at).to_seconds());
  m_last_response = std::max(m_last_response, at);
  m_bytes_done += t.get_data_length();
  ++m_completed;
  --m_in_flight;
  t.release();
  m_response.notify(at - sc_core::sc_time_stamp());
}

double traffic_generator::bandwidth_GBps() const {
  const double t = (m_last_response - m_first_issue).to_seconds();
  return t > 0 ? static_cast<double>(m_bytes_done) / t / 1e9 : 0.0;
}

void traffic_generator::add_results(nlohmann::json& r) const {
  r["traffic"] = {{"target", m_target},
                  {"requests", m_completed},
                  {"bytes", m_bytes_done},
                  {"errors", m_errors},
                  {"bandwidth_GBps", bandwidth_GBps()},
                  {"latency_avg_ns", m_latency.mean() * 1e9},
                  {"latency_p99_ns", m_latency.quantile(0.99) * 1e9},
                  {"latency_max_ns", m_latency.max() * 1e9}};
}

std::string traffic_generator::report() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "Traffic (%s, %s %s, %llu B bursts, %llu outstanding)\n"
                "  requests           %llu (%llu errors)\n"
                "  bandwidth          %.3f GB/s\n"
                "  latency avg / p99  %.2f ns / %.2f ns (max %.2f ns)\n",
                m_target.c_str(),
                m_pattern == pattern::random    ? "random"
                : m_pattern == pattern::strided ? "strided"
                                                : "sequential",
                m_op == op::write ? "write" : m_op == op::mix ? "read/write mix" : "read",
                static_cast<unsigned long long>(m_burst),
                static_cast<unsigned long long>(m_outstanding),
                static_cast<unsigned long long>(m_completed),
                static_cast<unsigned long long>(m_errors), bandwidth_GBps(), m_latency.mean() * 1e9,
                m_latency.quantile(0.99) * 1e9, m_latency.max() * 1e9);
  return buf;
}

KELLE_REGISTER(workloads(), "traffic", "traffic generator: memory microbenchmark on one memory",
               [](const workload_args& a) -> std::unique_ptr<workload> {
                 return std::make_unique<traffic_generator>("traffic", a);
               });

}  // namespace kelle
