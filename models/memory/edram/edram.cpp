#include "models/memory/edram/edram.h"

#include "models/thermal/die_temperature.h"
#include "platform/trace/timeline.h"

#include <algorithm>
#include <cmath>

namespace kelle {

edram::edram(const sc_core::sc_module_name& name, const memory_args& a)
    : banked_array(name, a, "edram"),
      m_retention(retention_model::from_tech(
          a.tech.child("edram"), a.tech.get_double("temperature_C", 105, "temperature the figures are given for, C"))),
      m_expected_read_errors(m_stats.counter(
          "expected_bit_errors_read", "bits",
          "sum over reads of live bits x P(fail | time since the last refresh tick)")),
      m_bits_read_live(m_stats.counter("live_bits_read", "bits", "bits read from live data")),
      m_transient(m_stats.counter("refreshed_bytes_transient", "B",
                                  "refresh of data that lived and died (live bytes x life / interval) and the lifetime "
                                  "rule's refreshes; passes not simulated add theirs by extrapolation")) {
  const config_node tech = a.tech.child("edram");
  const double ref_bytes =
      tech.require_double("reference_capacity_MiB", "capacity the cell figures are given for, MiB", 1e-9) *
      1024 * 1024;
  m_refresh_J_per_bit =
      tech.require_double("refresh_energy_mJ_per_pass", "energy of one refresh pass over the reference array, mJ", 0) *
      1e-3 / (ref_bytes * 8);
  m_refresh_row_time = sc_core::sc_time(
      tech.require_double("refresh_row_ns", "time a bank is busy refreshing one row, ns", 0), sc_core::SC_NS);
  m_row_bytes = tech.require_double("refresh_row_bytes", "bytes refreshed per row operation", 1);
  const double retention_us = tech.require_double("retention_us", "retention time guaranteed free of failures, us", 1e-6);
  const double interval_us = a.params.get_double(
      "refresh_interval_us", retention_us,
      "default refresh interval in us (default: tech.edram.retention_us)", 1e-6);
  m_scope_all = a.params.get_choice("refresh_scope", "written", {"written", "all"}) == "all";

  m_intervals.push_back(interval_class{sc_core::sc_time(interval_us, sc_core::SC_US)});
  m_interval_of.emplace(m_intervals[0].period.value(), 0);
  m_segments.emplace(0, segment{capacity_bytes(), 0, m_scope_all, sc_core::SC_ZERO_TIME});
  if (m_scope_all) {
    m_intervals[0].live_bytes = capacity_bytes();
    m_active.push_back(0);
  }

  m_stats.energy(energy_kind::refresh, "refresh", "refreshed bits x refresh energy per bit",
                 [this] { return refreshed_bytes() * 8 * m_refresh_J_per_bit; });
  m_stats.formula("refreshed_bytes", "B", "bytes refreshed (live bytes x refresh ticks)",
                  [this] { return refreshed_bytes(); });
  m_stats.formula("refreshed_bytes_extrapolated", "B",
                  "refreshed bytes of passes not simulated (sampled decode and layers: their transient refresh)",
                  [this] { return extrapolated_refresh(); });
  m_stats.formula("refreshed_bytes_lifetime", "B",
                  "of which: transient data that outlived its retention budget, refreshed by the refresh "
                  "policy's lifetime rule (detailed passes)",
                  [this] { return m_refresh_lifetime; });
  m_stats.formula("refresh_passes", "count", "refreshed bytes / capacity (equivalent full passes)",
                  [this] { return refreshed_bytes() / static_cast<double>(capacity_bytes()); });
  m_stats.formula("refresh_busy_time", "s",
                  "average time per bank spent refreshing rows (refreshed rows x row time / banks)",
                  [this] {
                    return refreshed_bytes() / m_row_bytes * m_refresh_row_time.to_seconds() / m_banks;
                  });
  m_stats.formula("live_bytes", "B", "bytes being refreshed at the end of the run",
                  [this] { return static_cast<double>(live_bytes()); });
  m_stats.formula("retention_failure_rate", "fraction",
                  "average over refreshed stored bit-time of P(fail | refresh interval)", [this] {
                    advance(sc_core::sc_time_stamp());
                    // With a thermal model each stretch of stored bit-time fails at the die's
                    // temperature of its moment (failed_bit_s); at the anchor all along (or
                    // without one), the calibrated figure as before.
                    const bool varying = m_temperature_moved;
                    double w = 0, p = 0;
                    for (const auto& c : m_intervals) {
                      if (c.period == sc_core::SC_ZERO_TIME) continue;  // the lifetime rule's
                      w += c.live_bit_s;
                      p += varying ? c.failed_bit_s
                                   : c.live_bit_s * m_retention.failure_probability(c.period.to_seconds());
                    }
                    return w > 0 ? p / w : 0.0;
                  });
}

unsigned edram::interval_index(const sc_core::sc_time& period) {
  const auto [it, added] = m_interval_of.emplace(period.value(), static_cast<unsigned>(m_intervals.size()));
  if (added) m_intervals.push_back(interval_class{period});
  return it->second;
}

void edram::activity_changed(unsigned idx) {
  const auto at = std::lower_bound(m_active.begin(), m_active.end(), idx);
  const bool listed = at != m_active.end() && *at == idx;
  if (m_intervals[idx].live_bytes > 0 && !listed) m_active.insert(at, idx);
  if (m_intervals[idx].live_bytes == 0 && listed) m_active.erase(at);
}

void edram::use_continuous_refresh() {
  if (m_continuous) return;
  advance(sc_core::sc_time_stamp());  // the grid's ticks up to now, the integral from now on
  m_continuous = true;
}

void edram::advance(const sc_core::sc_time& now) {
  if (now <= m_accounted_until) return;
  const bool thermal = die_temperature::current() != nullptr;
  // The temperature first: reading it may bring the thermal model up to date, which reads every
  // energy statistic, this array's refresh energy included, which advances this accounting to
  // `now` (a re-entrant call). The stretch is then accounted already; only what is still missing
  // is taken from m_accounted_until after the read (else the outer call counted it twice, and a
  // run with --timeline, whose thermal model updates at every read, differed from one without).
  const double T = thermal ? m_retention.temperature_C() : 0.0;
  if (now <= m_accounted_until) return;
  const double t0 = m_accounted_until.to_seconds(), t1 = now.to_seconds();
  if (thermal && T != m_retention.law().reference_C) m_temperature_moved = true;
  for (const unsigned i : m_active) {
    interval_class& c = m_intervals[i];
    if (const sc_core::sc_time::value_type p = c.period.value()) {
      // Continuous: bytes x dt / interval. The grid: the ticks k x interval in (t0, now].
      const double ticks = m_continuous ? static_cast<double>(now.value() - m_accounted_until.value()) /
                                              static_cast<double>(p)
                                        : static_cast<double>(now.value() / p - m_accounted_until.value() / p);
      c.refreshed_bytes += static_cast<double>(c.live_bytes) * ticks;
    }
    const double bit_s = static_cast<double>(c.live_bytes) * 8 * (t1 - t0);
    c.live_bit_s += bit_s;
    if (thermal && c.period > sc_core::SC_ZERO_TIME) {
      if (c.failure_at_C != T) {  // the temperature moves once per thermal update at most
        c.failure_at_C = T;
        c.failure = m_retention.failure_probability_at(c.period.to_seconds(), T);
      }
      c.failed_bit_s += bit_s * c.failure;
    }
  }
  m_accounted_until = now;
}

double edram::refreshed_bytes() {
  advance(sc_core::sc_time_stamp());
  double s = extrapolated_refresh() + m_refresh_lifetime;
  for (const auto& c : m_intervals) s += c.refreshed_bytes;
  return s;
}

std::uint64_t edram::live_bytes() const {
  std::uint64_t s = 0;
  for (const unsigned i : m_active) s += m_intervals[i].live_bytes;
  return s;
}

std::map<std::uint64_t, edram::segment>::iterator edram::split(std::uint64_t at) {
  auto it = m_segments.upper_bound(at);
  --it;  // the segment containing `at` (segments cover [0, capacity))
  if (it->first == at) return it;
  segment tail = it->second;
  it->second.end = at;
  return m_segments.emplace_hint(std::next(it), at, tail);
}

void edram::merge_around(std::uint64_t b, std::uint64_t e) {
  auto it = m_segments.upper_bound(b);
  if (it != m_segments.begin()) --it;
  if (it != m_segments.begin()) --it;
  while (it != m_segments.end() && it->first <= e) {
    auto next = std::next(it);
    if (next == m_segments.end()) break;
    if (it->second == next->second && it->second.end == next->first) {
      it->second.end = next->second.end;
      m_segments.erase(next);
    } else {
      it = next;
    }
  }
}

template <class F>
void edram::update(std::uint64_t b, std::uint64_t e, F f) {
  if (e > capacity_bytes()) e = capacity_bytes();
  if (b >= e) return;
  advance(sc_core::sc_time_stamp());
  split(b);
  if (e < capacity_bytes()) split(e);
  for (auto it = m_segments.find(b); it != m_segments.end() && it->first < e; ++it) {
    segment& s = it->second;
    const std::uint64_t n = s.end - it->first;
    const bool was_live = s.live;
    const unsigned was = s.interval;
    if (was_live) m_intervals[was].live_bytes -= n;
    f(s, n);
    if (s.live) m_intervals[s.interval].live_bytes += n;
    if (was_live) activity_changed(was);
    if (s.live && (!was_live || s.interval != was)) activity_changed(s.interval);
  }
  merge_around(b, e);
  if (timeline::open()) trace_refresh();
}

void edram::on_write(std::uint64_t addr, std::uint64_t len) {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  update(addr, addr + len, [&now](segment& s, std::uint64_t) {
    if (!s.live) s.born = now;
    s.live = true;
  });
}

void edram::release(std::uint64_t addr, std::uint64_t len) {
  if (m_scope_all) return;
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  double fluid = 0;  // live, refreshed bytes released x their life / their interval
  update(addr, addr + len, [&](segment& s, std::uint64_t n) {
    const sc_core::sc_time& p = m_intervals[s.interval].period;
    if (s.live && p > sc_core::SC_ZERO_TIME) fluid += static_cast<double>(n) * ((now - s.born) / p);
    s.live = false;
  });
  if (fluid > 0) transient_refresh(fluid);
}

void edram::set_refresh_interval(std::uint64_t addr, std::uint64_t len, const sc_core::sc_time& interval) {
  if (interval <= sc_core::SC_ZERO_TIME)
    SC_REPORT_ERROR(name(), "set_refresh_interval: the interval must be positive");
  const unsigned idx = interval_index(interval);
  update(addr, addr + len, [idx](segment& s, std::uint64_t) { s.interval = idx; });
}

void edram::set_unrefreshed(std::uint64_t addr, std::uint64_t len) {
  const unsigned idx = interval_index(sc_core::SC_ZERO_TIME);
  update(addr, addr + len, [idx](segment& s, std::uint64_t) { s.interval = idx; });
}

void edram::trace_refresh() const {
  double live = 0, watts = 0;
  for (const unsigned i : m_active)
    if (const interval_class& c = m_intervals[i]; c.period > sc_core::SC_ZERO_TIME) {
      live += static_cast<double>(c.live_bytes);
      watts += static_cast<double>(c.live_bytes) * 8 * m_refresh_J_per_bit / c.period.to_seconds();
    }
  timeline& tl = timeline::get();
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  const std::string n = basename();
  tl.counter("refresh", n + " live", "bytes", now, live);
  tl.counter("refresh", n + " refresh power", "W", now, watts);
  tl.state(tl.thread_of(this, "refresh", basename()), now, live > 0 ? "refresh" : "");
}

double edram::access_share(const sc_core::sc_time&) {
  // Rows refreshed per second per bank x time per row refresh.
  double busy = 0;
  for (const unsigned i : m_active)
    if (const interval_class& c = m_intervals[i]; c.period > sc_core::SC_ZERO_TIME)
      busy += static_cast<double>(c.live_bytes) / m_row_bytes / c.period.to_seconds();
  busy *= m_refresh_row_time.to_seconds() / m_banks;
  if (busy >= 0.95) {
    SC_REPORT_WARNING(name(), "refresh occupies more than 95 % of the banks' time; accesses are "
                              "given 5 % (the refresh interval is too short for this array)");
    return 0.05;
  }
  return 1.0 - busy;
}

void edram::read_errors(std::uint64_t addr, std::uint64_t len, const sc_core::sc_time& now) {
  auto it = m_segments.upper_bound(addr);
  --it;
  const std::uint64_t end = addr + len;
  // Live bits read, by run of segments of one interval (segments of live data differ by when the
  // data became live, not in how it fails: one failure probability per run).
  unsigned run = ~0u;
  double bits = 0;
  auto account = [&] {
    if (run == ~0u || bits == 0) return;
    const sc_core::sc_time& p = m_intervals[run].period;
    // Time since the last refresh tick (an upper bound for data written after that tick).
    const double since = sc_core::sc_time::from_value(now.value() % p.value()).to_seconds();
    m_bits_read_live += bits;
    m_expected_read_errors += bits * m_retention.failure_probability(since);
    bits = 0;
  };
  for (; it != m_segments.end() && it->first < end; ++it) {
    if (!it->second.live) continue;
    const std::uint64_t b = std::max(it->first, addr), e = std::min(it->second.end, end);
    if (m_intervals[it->second.interval].period == sc_core::SC_ZERO_TIME)
      continue;  // transient data: the lifetime rule accounts it
    if (it->second.interval != run) {
      account();
      run = it->second.interval;
    }
    bits += static_cast<double>(e - b) * 8;
  }
  account();
}

sc_core::sc_time edram::service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                                const sc_core::sc_time& start) {
  if (cmd == tlm::TLM_READ_COMMAND) read_errors(addr, len, start);
  return banked_array::service(cmd, addr, len, start);
}

KELLE_REGISTER(memories(), "edram",
               "banked 3T eDRAM: banked_array + lazy refresh accounting + retention failures",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<edram>(a.name.c_str(), a);
               });

}  // namespace kelle
