// Refresh policies of the eDRAM controller: the refresh interval of every stored KV byte.
//   none     the array's own interval (system.memories.<kv>.refresh_interval_us); nothing set
//   uniform  one interval for all KV data (`refresh_interval_us`: 45 "Org", 360 "Uni")
//   2drp     two-dimensional adaptive refresh: token importance (high-score / low-score group,
//            from the KV policy) x bit position (bits 15-8 in the MSB banks, 7-0 in the LSB
//            banks), four intervals (defaults 0.36, 5.4, 1.44, 7.2 ms: HST-MSB, HST-LSB,
//            LST-MSB, LST-LSB)
// One file per policy beside this interface (none.cpp, uniform.cpp, 2drp.cpp); refresh_policy.cpp
// holds the registry and the failed-bits accounting they share.
// After every pass the firmware applies the policy to each on-chip KV region of an eDRAM. The
// eDRAM accounts refresh lazily, so a changed interval takes effect from that moment. See
// docs/policies.md, "Refresh policies".
#pragma once

#include "firmware/policies/kv/kv_policy.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <systemc>

#include <string>
#include <vector>

namespace kelle {

class refresh_control;
class retention_model;

class refresh_policy {
 public:
  virtual ~refresh_policy() = default;
  virtual std::string name() const = 0;
  // Whether the policy needs the KV policy's high/low-score groups.
  virtual bool needs_groups() const { return false; }
  // The interval the policy gives KV bits of a score group (high / low) and position (bits 15-8
  // or 7-0), in seconds; 0 when it leaves the array's own interval (functional fault model).
  virtual double interval_s(bool /*high*/, bool /*msb*/) const { return 0.0; }
  // Sets the intervals of [addr, addr + bytes) (local to `e`, the memory's refresh control) holding
  // one layer's K or V; `r` is
  // the layer's last report (summed over the batch), or null without a KV policy.
  virtual void apply(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, const kv_layer_report* r) = 0;

  // Expected failed bits of the stored KV data as last applied: bits x P(fail | interval), over
  // every range the policy set (the array's own interval for `none`).
  double expected_failed_bits(const retention_model& m) const;

 protected:
  struct range {
    double bits;
    double interval_s;
  };
  // The ranges of the latest apply() per region (by address), for expected_failed_bits().
  std::vector<std::pair<std::uint64_t, std::vector<range>>> m_ranges;
  void record(std::uint64_t addr, std::vector<range> r);
  // An interval given in microseconds, as the policies' keys are.
  static sc_core::sc_time us(double v) { return sc_core::sc_time(v, sc_core::SC_US); }
};

using refresh_registry = registry<refresh_policy, const config_node&>;
refresh_registry& refresh_policies();

}  // namespace kelle
