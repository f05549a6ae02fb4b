// `shield`: lifecycle-aware segmented refresh after SHIELD (Zhang and Fong, arXiv 2604.07396):
// a value's bits in two fields (by default bfloat16's sign+exponent, bits 15-7, and mantissa,
// bits 6-0), each in banks of its own. The sign+exponent banks are refreshed normally
// (`sign_exp_us`, 45 us), the persistent KV mantissas at a relaxed interval (`kv_mantissa_us`,
// 1.2 ms), and the transient activations' mantissas not at all while they live less than their
// budget (`act_mantissa_budget_us`, 1.5 ms: the lifetime rule). No score groups.
#include "firmware/policies/refresh/refresh_policy.h"

#include "models/memory/refresh_control.h"

namespace kelle {
namespace {

class shield : public refresh_policy {
 public:
  explicit shield(const config_node& c) {
    m_kv_fields = field_map::from_config(c, "fields", "bfloat16");
    if (m_kv_fields.size() != 2)
      c.fail("fields", "expected two fields (sign+exponent, then mantissa), got " + std::to_string(m_kv_fields.size()));
    m_sign_exp = c.get_double("sign_exp_us", 45, "sign+exponent banks (KV and activations): refresh interval, us", 1e-3);
    m_mantissa = c.get_double("kv_mantissa_us", 1200, "KV mantissa banks: refresh interval, us", 1e-3);
    const double budget =
        c.get_double("act_mantissa_budget_us", 1500, "activation mantissa banks: retention budget, us", 1e-3);
    const std::string stall = c.get_choice("act_stall", "refresh", {"refresh", "count"});
    m_transient = std::make_unique<lifetime_rule>(
        m_kv_fields, std::vector<lifetime_rule::field_rule>{{m_sign_exp, 0}, {0, budget}},
        stall == "refresh" ? lifetime_rule::stall_action::refresh : lifetime_rule::stall_action::count);
  }
  std::string name() const override { return "shield"; }
  double interval_s(bool, bool msb) const override { return 1e-6 * m_scale * (msb ? m_sign_exp : m_mantissa); }
  double bit_interval_s(bool, unsigned bit) const override {
    return 1e-6 * m_scale * (m_kv_fields.field_of(bit) == 0 ? m_sign_exp : m_mantissa);
  }
  void apply(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, const kv_layer_report*) override {
    apply_fields(e, addr, bytes, 1.0, {m_sign_exp, m_mantissa}, {m_sign_exp, m_mantissa});
  }

 private:
  double m_sign_exp = 45, m_mantissa = 1200;
};

}  // namespace

KELLE_REGISTER(refresh_policies(), "shield",
               "SHIELD: sign+exponent refreshed normally, KV mantissas relaxed, activation mantissas by lifetime",
               [](const config_node& c) { return std::make_unique<shield>(c); });

}  // namespace kelle
