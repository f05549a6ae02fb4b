// What a memory whose cells need refresh offers the firmware (refresh policies, activation
// lifetimes, functional faults): the refresh interval of an address range (or none, for
// transient data) and releasing dead data. The eDRAM implements it; a plugin memory may too
// (memory_target::refresh() returns it). Addresses are local to the memory. What the refresh
// costs is the memory's own statistics (counters that sampled simulation extrapolates with the
// rest).
#pragma once

#include "models/memory/edram/retention.h"

#include <systemc>

#include <cstdint>

namespace kelle {

class refresh_control {
 public:
  virtual ~refresh_control() = default;
  // Data in [addr, addr+len) is refreshed every `interval` from now on.
  virtual void set_refresh_interval(std::uint64_t addr, std::uint64_t len, const sc_core::sc_time& interval) = 0;
  // Data in [addr, addr+len) is not refreshed from now on while it lives (transient data whose
  // lifetime the firmware accounts: the lifetime rule of the refresh policies).
  virtual void set_unrefreshed(std::uint64_t addr, std::uint64_t len) = 0;
  // Bytes refreshed outside the intervals (the lifetime rule's refreshes of a stalled buffer).
  virtual void add_refresh(double bytes) = 0;
  // Data in [addr, addr+len) is dead: it is no longer refreshed. (The memory accounts what such
  // transient data cost in refresh over its life.)
  virtual void release(std::uint64_t addr, std::uint64_t len) = 0;
  // Data in [addr, addr+len) is stored from now on, as after a write (data placed without
  // simulated writes).
  virtual void mark_live(std::uint64_t addr, std::uint64_t len) = 0;
  virtual const retention_model& retention() const = 0;
  // The memory's own interval, for data no policy has set.
  virtual const sc_core::sc_time& default_refresh_interval() const = 0;
  // Bytes refreshed so far (accounting brought up to now).
  virtual double refreshed_bytes() = 0;
  // From now on the intervals set move with the temperature (temperature-aware refresh applied a
  // scale other than 1): the memory accounts refresh as the integral of bytes x dt / interval
  // rather than on each interval's grid of ticks from time 0, whose phase a changed interval
  // loses. A memory that accounts refresh its own way may ignore it.
  virtual void use_continuous_refresh() {}
};

}  // namespace kelle
