// `edram`: a banked 3T gain-cell eDRAM array with refresh and retention.
//
// Refresh is accounted lazily, never with a SystemC event per refresh. The array's refresh
// controller refreshes at every multiple of a region's refresh interval (ticks k x I) all rows
// that hold live data (`refresh_scope: written`: data written and not released) or every row
// (`refresh_scope: all`). The bytes refreshed over [t0, t1] for live bytes L with interval I
// are L x (floor(t1/I) - floor(t0/I)); they are brought up to date whenever the live set
// changes and when statistics are read (with temperature-aware refresh, once intervals move:
// L x (t1 - t0) / I, use_continuous_refresh()). Refresh energy = refreshed bits x energy per bit.
// Refresh steals bank time: each refreshed row keeps its bank busy for refresh_row_ns, so an
// access sees the banks' bandwidth scaled by the share of time not spent refreshing.
//
// Firmware and controllers (2DRP, lifetimes) talk to the array through set_refresh_interval()
// and release(); see docs/models/memory-edram.md.
#pragma once

#include "models/memory/banked_array.h"
#include "models/memory/edram/retention.h"
#include "models/memory/refresh_control.h"

#include <map>
#include <vector>

namespace kelle {

class edram : public banked_array, public refresh_control {
 public:
  edram(const sc_core::sc_module_name& name, const memory_args& args);

  refresh_control* refresh() override { return this; }

  // Data in [addr, addr+len) is refreshed every `interval` from now on (0: never refreshed).
  void set_refresh_interval(std::uint64_t addr, std::uint64_t len, const sc_core::sc_time& interval) override;
  // Data in [addr, addr+len) is not refreshed while it lives (transient data under the lifetime
  // rule: its refresh and failures are accounted by the firmware, add_refresh()).
  void set_unrefreshed(std::uint64_t addr, std::uint64_t len) override;
  void add_refresh(double bytes) override {
    m_refresh_lifetime += bytes;
    transient_refresh(bytes);
  }
  // Data in [addr, addr+len) is dead: it is no longer refreshed (scope `written`). Its refresh
  // over its life (since it became live) counts as transient refresh.
  void release(std::uint64_t addr, std::uint64_t len) override;
  // Data in [addr, addr+len) is stored from now on, as after a write (for data placed without
  // simulated writes, e.g. a KV cache assumed filled by a prefill that is not simulated).
  void mark_live(std::uint64_t addr, std::uint64_t len) override { on_write(addr, len); }

  const retention_model& retention() const override { return m_retention; }
  // The array's own refresh interval (refresh_interval_us), for data no policy has set.
  const sc_core::sc_time& default_refresh_interval() const override { return m_intervals[0].period; }
  double refresh_energy_per_bit_J() const { return m_refresh_J_per_bit; }
  first_order_figures first_order() const override {
    first_order_figures f = banked_array::first_order();
    f.refresh_J_per_bit = m_refresh_J_per_bit;
    f.refresh_interval_s = m_intervals[0].period.to_seconds();
    return f;
  }
  // Temperature-aware refresh moves intervals: from now on refresh is the integral of live bytes x
  // dt / interval (the expectation over the ticks' phase, as transient refresh already is), not
  // ticks on each interval's grid from time 0. Moving bytes to a new interval moves them to
  // another grid, whose phase is unrelated: each move dropped or doubled up to one pass of them
  // (a 45 -> 95 C ramp counted 0 refreshes where 1.86 were due). Only then: without it (no thermal
  // model, or a scale of exactly 1) 2DRP moves bytes between score groups of fixed intervals at
  // every step, and those runs keep the grid's figures bit for bit.
  void use_continuous_refresh() override;
  bool continuous_refresh() const { return m_continuous; }
  // Interval classes: ever created (one per distinct interval set) and those holding live bytes
  // now (what the per-access loops visit).
  std::size_t interval_classes() const { return m_intervals.size(); }
  std::size_t active_interval_classes() const { return m_active.size(); }
  // Brings refresh accounting up to `now` and returns the bytes refreshed so far.
  double refreshed_bytes() override;
  // Bytes currently refreshed (live data, or the whole array with scope `all`).
  std::uint64_t live_bytes() const;

 protected:
  double access_share(const sc_core::sc_time& now) override;
  void on_write(std::uint64_t addr, std::uint64_t len) override;

 private:
  struct segment {
    std::uint64_t end;
    unsigned interval;  // index into m_intervals
    bool live;
    sc_core::sc_time born;  // live data: when it became live (its transient refresh at release)
    bool operator==(const segment& o) const {
      return interval == o.interval && live == o.live && (!live || born == o.born);
    }
  };
  struct interval_class {
    sc_core::sc_time period;     // refresh interval (SC_ZERO_TIME: not refreshed, set_unrefreshed)
    std::uint64_t live_bytes = 0;
    double refreshed_bytes = 0;  // bytes refreshed so far
    double live_bit_s = 0;       // integral of live bits over time
    // With a thermal model: the integral of live bits x P(fail | period, the die's temperature
    // then), and P at the temperature it was last computed for.
    double failed_bit_s = 0;
    double failure_at_C = -1e300;
    double failure = 0;
  };

  unsigned interval_index(const sc_core::sc_time& period);
  void advance(const sc_core::sc_time& now);
  // Applies `f(segment, bytes)` to the segments covering [b, e), keeping live-byte counts right.
  template <class F>
  void update(std::uint64_t b, std::uint64_t e, F f);
  std::map<std::uint64_t, segment>::iterator split(std::uint64_t at);
  void merge_around(std::uint64_t b, std::uint64_t e);
  void read_errors(std::uint64_t addr, std::uint64_t len, const sc_core::sc_time& now);
  // Live bytes, refresh power and refresh activity on the timeline (docs/timeline.md).
  void trace_refresh() const;
  sc_core::sc_time service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                           const sc_core::sc_time& start) override;

  retention_model m_retention;
  double m_refresh_J_per_bit;
  sc_core::sc_time m_refresh_row_time;
  double m_row_bytes;
  bool m_scope_all;
  // [0] is the default interval. A class is kept for good once created (segments of dead data
  // keep its index and a rewrite makes them live at it again; its totals stay in the statistics),
  // but only classes with live bytes are visited per access and per accounting step: m_active,
  // their indices in increasing order (the order of the sums as before). Temperature-aware
  // refresh creates a class per distinct scaled interval (bounded by the sensor's resolution
  // times the policy's intervals; with resolution 0 by the readings); finding one is a map look-up.
  std::vector<interval_class> m_intervals;
  std::map<sc_core::sc_time::value_type, unsigned> m_interval_of;  // period -> index
  std::vector<unsigned> m_active;
  void activity_changed(unsigned idx);
  bool m_continuous = false;  // use_continuous_refresh()
  bool m_temperature_moved = false;  // the die left the anchor temperature at some accounting (thermal model)
  std::map<std::uint64_t, segment> m_segments;   // covers [0, capacity) without gaps
  sc_core::sc_time m_accounted_until;
  stat& m_expected_read_errors;
  stat& m_bits_read_live;
  // Transient refresh: what data that lived and died cost in refresh, as its expectation over the
  // refresh ticks' phase (bytes x life / interval, the interval it had when it died: a buffer that
  // lives a fraction of an interval is refreshed once or not at all by where the ticks fall), plus
  // the lifetime rule's refreshes.
  // A counter: in passes that are not simulated it grows by extrapolation (sampled decode and
  // layers), and what it grew by that way, beyond what the simulation added
  // (m_transient_simulated), is refresh the ticks did not see: part of refreshed_bytes().
  stat& m_transient;
  double m_transient_simulated = 0;
  void transient_refresh(double bytes) {
    m_transient += bytes;
    m_transient_simulated += bytes;
  }
  // Transient refresh added by extrapolation (bytes, included in refreshed_bytes()).
  double extrapolated_refresh() const { return m_transient.value() - m_transient_simulated; }
  // Bytes the lifetime rule refreshed in simulated passes, included in refreshed_bytes().
  double m_refresh_lifetime = 0;
};

}  // namespace kelle
