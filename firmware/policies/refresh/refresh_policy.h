// Refresh policies of the eDRAM controller: the refresh interval of every stored KV byte and,
// for lifetime-aware policies, of the transient activation data.
//   none     the array's own interval (system.memories.<kv>.refresh_interval_us); nothing set
//   uniform  one interval for all KV data (`refresh_interval_us`: 45 "Org", 360 "Uni")
//   2drp     two-dimensional adaptive refresh: token importance (high-score / low-score group,
//            from the KV policy) x bit field (the field map msb_lsb: bits 15-8 in the MSB banks,
//            7-0 in the LSB banks), four intervals (defaults 0.36, 5.4, 1.44, 7.2 ms: HST-MSB,
//            HST-LSB, LST-MSB, LST-LSB); optionally the lifetime rule on the activations
//   shield   bit field x lifetime (SHIELD): sign+exponent refreshed normally, KV mantissas at a
//            relaxed interval, transient activations' mantissas not refreshed within their
//            lifetime budget
// One file per policy beside this interface (none.cpp, uniform.cpp, 2drp.cpp, shield.cpp);
// refresh_policy.cpp holds the registry, the field-by-field layout and the failed-bits
// accounting they share, lifetime_rule.{h,cpp} the rule for transient data.
// After every pass the firmware applies the policy to each on-chip KV region of an eDRAM. The
// eDRAM accounts refresh lazily, so a changed interval takes effect from that moment. See
// docs/policies/refresh.md.
#pragma once

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/field_map.h"
#include "firmware/policies/refresh/lifetime_rule.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <systemc>

#include <memory>
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
  // The same for bit `bit` of the KV field map (0-15 for a 16-bit word); by default by its half.
  virtual double bit_interval_s(bool high, unsigned bit) const {
    return interval_s(high, bit >= m_kv_fields.width() / 2);
  }
  // Sets the intervals of [addr, addr + bytes) (local to `e`, the memory's refresh control) holding
  // one layer's K or V; `r` is
  // the layer's last report (summed over the batch), or null without a KV policy.
  virtual void apply(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, const kv_layer_report* r) = 0;

  // The field map the KV data is laid out by (msb_lsb unless the policy says otherwise).
  const field_map& kv_fields() const { return m_kv_fields; }
  // The KV cache's number format, before the first apply(): a map of a 16-bit word's fields
  // (SHIELD's `fields`) stays as given for a 16-bit format; for a narrower code the policy takes
  // the format's own floating-point fields (kv_format::float_fields(), e.g. an 8-bit float's
  // sign+exponent and mantissa). msb_lsb splits any code into its upper and lower half. Returns
  // why the policy cannot lay this format out ("" when it can).
  std::string set_kv_format(const kv_format& f);
  // Where bit `bit` of a stored code of `bits` bits sits in the KV field map (its bit in
  // kv_fields(), whose width may be wider: an int4 code's bits 3-2 are in msb_lsb's MSB half,
  // as bits 15-8 of a 16-bit word are), for bit_interval_s().
  unsigned map_bit(unsigned bit, unsigned bits) const { return bit * m_kv_fields.width() / bits; }
  // Expected failed bits of the stored KV data as last applied: bits x P(fail | interval), over
  // every range the policy set (the array's own interval for `none`); in all and by field.
  double expected_failed_bits(const retention_model& m) const;
  std::vector<double> expected_failed_bits_by_field(const retention_model& m) const;

  // Temperature-aware refresh (policy.temperature_aware): every apply() scales the policy's
  // intervals (and the lifetime rule's budgets) by how much longer the cells retain at the on-die
  // sensor's reading plus `guard_C` than at the technology's temperature (the retention model's
  // factor: 1 at the anchor; below 1 above it). Off: the intervals as given.
  void set_temperature_aware(bool on, double guard_C) {
    m_temperature_aware = on;
    m_guard_C = guard_C;
  }
  bool temperature_aware() const { return m_temperature_aware; }
  double guard_band_C() const { return m_guard_C; }
  // The scale of the last apply() (1 when not temperature-aware) and the reading it used.
  double temperature_scale() const { return m_scale; }
  double sensed_C() const { return m_sensed_C; }

  // Transient data (activation buffers) under the lifetime rule; null when the policy leaves
  // them at the array's own interval.
  lifetime_rule* transient() { return m_transient.get(); }
  const lifetime_rule* transient() const { return m_transient.get(); }

 protected:
  refresh_policy() : m_kv_fields(field_map::parse("msb_lsb")) {}
  struct range {
    double bits;
    double interval_s;
    unsigned field;  // index into kv_fields(), or all_fields: every field by its share of the bits
  };
  static constexpr unsigned all_fields = ~0u;
  // The ranges of the latest apply() per region (by address), for expected_failed_bits().
  std::vector<std::pair<std::uint64_t, std::vector<range>>> m_ranges;
  void record(std::uint64_t addr, std::vector<range> r);
  // Lays [addr, addr + bytes) out field by field (kv_fields()); in each field's part the
  // high-score share `high` first, at high_us[field], then the rest at low_us[field] (us). Records
  // the ranges.
  void apply_fields(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, double high,
                    const std::vector<double>& high_us, const std::vector<double>& low_us);
  // The scale of the intervals for `e`'s cells now (temperature-aware refresh; else 1): call at the
  // start of apply(). Sets temperature_scale() and the lifetime rule's; a scale other than 1
  // switches `e` to continuous refresh accounting (refresh_control::use_continuous_refresh).
  double scale_for(refresh_control& e);
  // The scale of the last apply() with the reading and guard band it was computed for.
  refresh_scale scale() const { return {m_scale, m_sensed_C, m_guard_C}; }

  field_map m_kv_fields;
  std::unique_ptr<lifetime_rule> m_transient;
  bool m_temperature_aware = false;
  double m_guard_C = 0;
  double m_scale = 1.0;
  double m_sensed_C = 0;
};

using refresh_registry = registry<refresh_policy, const config_node&>;
refresh_registry& refresh_policies();

}  // namespace kelle
