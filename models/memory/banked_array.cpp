#include "models/memory/banked_array.h"

#include <algorithm>
#include <cmath>

namespace kelle {

banked_array::banked_array(const sc_core::sc_module_name& name, const memory_args& a,
                           const std::string& cell)
    : memory_target(name, a),
      m_banks(static_cast<unsigned>(a.params.get_uint("banks", 16, "number of banks", 1, 4096))),
      m_interleave(a.params.get_uint("interleave_bytes", 64,
                                     "bytes mapped to one bank before the next bank", 1, 1 << 20)),
      m_bank_Bps(a.params.require_double("bandwidth_GBps", "peak bandwidth of the array in GB/s",
                                         1e-6) *
                 1e9 / m_banks),
      m_latency(sc_core::sc_time(a.params.get_double(
                                     "access_latency_ns",
                                     tech_value(a.tech, cell, "access_latency_ns",
                                                "array access latency in ns"),
                                     "access latency in ns (default: the technology's)", 0.0),
                                 sc_core::SC_NS)),
      m_bank_wait(m_stats.counter("bank_wait_time", "s",
                                  "time accesses waited for banks busy with other accesses")),
      m_round_robin(a.params.get_choice("bank_arbitration", "fcfs", {"fcfs", "round_robin"}) ==
                    "round_robin") {
  m_interleave_div = divider(m_interleave);
  m_bank_div = divider(m_banks);
  const double ref_MiB = tech_value(a.tech, cell, "reference_capacity_MiB",
                                    "capacity the cell figures are given for, MiB", 1e-9);
  const double scale = capacity_bytes() / (ref_MiB * 1024 * 1024);
  // Per-byte access energy grows with the array (longer bit lines, word lines and H-tree wires):
  // E = E_ref x (capacity / reference capacity)^exponent (docs/models/memory-sram.md).
  const double exponent = a.tech.child(cell).require_double(
      "access_energy_capacity_exponent", "exponent of the access energy's growth with capacity",
      0.0, 1.0);
  m_energy_J_per_B = tech_value(a.tech, cell, "access_energy_pJ_per_byte",
                                "dynamic energy per byte accessed, pJ") *
                     1e-12 * std::pow(scale, exponent);
  m_leakage_W = tech_value(a.tech, cell, "leakage_mW", "leakage power of the reference array, mW") *
                1e-3 * scale;
  m_area_mm2 = tech_value(a.tech, cell, "area_mm2", "area of the reference array, mm2") * scale;
  m_bank_free.assign(m_banks, sc_core::SC_ZERO_TIME);
  if (m_round_robin) {
    m_rr.resize(m_banks);
    SC_HAS_PROCESS(banked_array);
    SC_METHOD(rr_wake);
    sensitive << m_rr_event;
    dont_initialize();
  }

  m_stats.formula("area", "mm2", "array area (technology figure scaled by capacity)",
                  [this] { return m_area_mm2; });
  m_stats.formula("peak_bandwidth", "GB/s", "banks x bank bandwidth",
                  [this] { return peak_bandwidth_Bps() / 1e9; });
  m_stats.formula("access_energy_per_byte", "pJ",
                  "technology figure scaled to this capacity (capacity exponent)",
                  [this] { return m_energy_J_per_B * 1e12; });
  m_stats.energy(energy_kind::access, "access", "bytes accessed x access energy per byte", [this] {
    return (m_bytes_read.value() + m_bytes_written.value()) * m_energy_J_per_B;
  });
  m_stats.energy(energy_kind::leakage, "leakage", "leakage power x simulated time",
                 [this] { return m_leakage_W * now_s(); });
}

template <class F>
void banked_array::for_each_bank(std::uint64_t addr, std::uint64_t len, F f) const {
  // Bytes of this access in each bank, from the chunk range [c0, c1] it covers.
  const divider& g = m_interleave_div;
  const divider& nb = m_bank_div;
  const std::uint64_t c0 = g.div(addr), c1 = g.div(addr + len - 1);
  const std::uint64_t chunks = c1 - c0 + 1;
  const std::uint64_t rounds = nb.div(chunks), extra = nb.mod(chunks);
  const unsigned first_bank = static_cast<unsigned>(nb.mod(c0));
  const unsigned last_bank = static_cast<unsigned>(nb.mod(c1));
  const std::uint64_t head_cut = g.mod(addr);                                // bytes before addr
  const std::uint64_t tail_cut = (c1 + 1) * m_interleave - (addr + len);     // bytes after the end
  for (unsigned i = 0; i < m_banks && i < chunks; ++i) {
    const unsigned b = first_bank + i < m_banks ? first_bank + i : first_bank + i - m_banks;
    std::uint64_t bytes = (rounds + (i < extra ? 1 : 0)) * m_interleave;
    if (b == first_bank) bytes -= head_cut;
    if (b == last_bank) bytes -= tail_cut;
    f(b, bytes);
  }
}

sc_core::sc_time banked_array::service(tlm::tlm_command, std::uint64_t addr, std::uint64_t len,
                                       const sc_core::sc_time& start) {
  if (len == 0) return start + m_latency;
  if (m_round_robin) return rr_serve(addr, len, start);
  const double s_per_B = 1.0 / (m_bank_Bps * access_share(start));
  sc_core::sc_time done = start;
  sc_core::sc_time waited = sc_core::SC_ZERO_TIME;
  for_each_bank(addr, len, [&](unsigned b, std::uint64_t bytes) {
    const sc_core::sc_time begin = std::max(start, m_bank_free[b]);
    waited = std::max(waited, begin - start);
    m_bank_free[b] = begin + bank_time(bytes, s_per_B);
    done = std::max(done, m_bank_free[b]);
  });
  m_bank_wait += waited.to_seconds();
  return done + m_latency;
}

const sc_core::sc_time& banked_array::bank_time(std::uint64_t bytes, double s_per_B) {
  if (bytes != m_last_bytes || s_per_B != m_last_s_per_B) {
    m_last_bytes = bytes;
    m_last_s_per_B = s_per_B;
    m_last_bank_time = sc_core::sc_time(static_cast<double>(bytes) * s_per_B, sc_core::SC_SEC);
  }
  return m_last_bank_time;
}

namespace {
// Seconds to the next whole tick at or after them (a departure is never early).
sc_core::sc_time ceil_time(double seconds) {
  const double ticks = std::ceil(seconds / sc_core::sc_get_time_resolution().to_seconds() - 1e-9);
  return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(std::max(0.0, ticks)));
}
}  // namespace

sc_core::sc_time banked_array::rr_serve(std::uint64_t addr, std::uint64_t len,
                                        const sc_core::sc_time& start) {
  const double rate = m_bank_Bps * access_share(start);
  const std::uint64_t id = current_request();
  const unsigned who = current_requester();
  rr_access acc{who, 0, start, sc_core::SC_ZERO_TIME};
  std::uint64_t most = 0;
  for_each_bank(addr, len, [&](unsigned b, std::uint64_t bytes) {
    rr_advance(b, start, rate);
    rr_bank& k = m_rr[b];
    auto& mine = k.queued[who];
    mine.emplace_back(id, bytes);
    if (mine.size() == 1)  // the requester's only access here: it starts sharing the bank now
      k.tags.emplace(std::make_pair(k.v + static_cast<double>(bytes), id), id);
    ++acc.banks_left;
    most = std::max(most, bytes);
  });
  acc.alone = sc_core::sc_time(static_cast<double>(most) / rate, sc_core::SC_SEC);
  m_rr_access.emplace(id, acc);
  rr_schedule(start, rate);
  return deferred();
}

void banked_array::rr_advance(unsigned bank, const sc_core::sc_time& now, double rate) {
  rr_bank& k = m_rr[bank];
  while (!k.tags.empty()) {
    const double n = static_cast<double>(k.tags.size());
    const double tag = k.tags.begin()->first.first;
    const sc_core::sc_time leave = k.t + ceil_time((tag - k.v) * n / rate);
    if (leave > now) {  // nobody leaves before now: serve the interval
      k.v = std::min(tag, k.v + (now - k.t).to_seconds() * rate / n);
      break;
    }
    k.v = tag;
    k.t = leave;
    while (!k.tags.empty() && k.tags.begin()->first.first <= tag) {
      const std::uint64_t id = k.tags.begin()->second;
      k.tags.erase(k.tags.begin());
      auto it = m_rr_access.find(id);
      // The requester's next access on this bank starts now.
      auto q = k.queued.find(it->second.requester);
      q->second.pop_front();
      if (q->second.empty())
        k.queued.erase(q);
      else
        k.tags.emplace(std::make_pair(k.v + static_cast<double>(q->second.front().second), q->second.front().first),
                       q->second.front().first);
      if (--it->second.banks_left > 0) continue;
      // Its last bank is done: the response is ready one access latency later.
      const rr_access& acc = it->second;
      const sc_core::sc_time took = leave - acc.arrival;
      if (took > acc.alone) m_bank_wait += (took - acc.alone).to_seconds();
      complete(id, std::max(leave + m_latency, sc_core::sc_time_stamp()));
      m_rr_access.erase(it);
    }
  }
  k.t = now;
}

void banked_array::rr_schedule(const sc_core::sc_time& now, double rate) {
  sc_core::sc_time next = sc_core::sc_max_time();
  for (const rr_bank& k : m_rr) {
    if (k.tags.empty()) continue;
    const double n = static_cast<double>(k.tags.size());
    next = std::min(next, k.t + ceil_time((k.tags.begin()->first.first - k.v) * n / rate));
  }
  if (next != sc_core::sc_max_time()) m_rr_event.notify(next > now ? next - now : sc_core::SC_ZERO_TIME);
}

void banked_array::rr_wake() {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  const double rate = m_bank_Bps * access_share(now);
  for (unsigned b = 0; b < m_banks; ++b) rr_advance(b, now, rate);
  rr_schedule(now, rate);
}

}  // namespace kelle
