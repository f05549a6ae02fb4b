// `2drp`: two-dimensional adaptive refresh, token importance (high-score / low-score group from
// the KV policy) x bit field: the field map msb_lsb (bits 15-8 in the MSB banks, 7-0 in the LSB
// banks), one interval per group and field. With `activation_lifetime: true` the transient
// activations follow the lifetime rule with the same two fields (budgets act_msb_budget_us,
// act_lsb_budget_us).
#include "firmware/policies/refresh/refresh_policy.h"

#include "models/memory/refresh_control.h"

namespace kelle {
namespace {

class two_d : public refresh_policy {
 public:
  explicit two_d(const config_node& c)
      : m_hst_msb(c.get_double("hst_msb_us", 360, "high-score tokens, bits 15-8, us", 1e-3)),
        m_hst_lsb(c.get_double("hst_lsb_us", 5400, "high-score tokens, bits 7-0, us", 1e-3)),
        m_lst_msb(c.get_double("lst_msb_us", 1440, "low-score tokens, bits 15-8, us", 1e-3)),
        m_lst_lsb(c.get_double("lst_lsb_us", 7200, "low-score tokens, bits 7-0, us", 1e-3)) {
    if (c.get_bool("activation_lifetime", false, "the lifetime rule on the transient activations")) {
      // Budgets: the shortest interval 2DRP gives each byte of the KV data (its high-score group's).
      const double msb = c.get_double("act_msb_budget_us", m_hst_msb, "activations' bits 15-8: retention budget, us", 1e-3);
      const double lsb = c.get_double("act_lsb_budget_us", m_hst_lsb, "activations' bits 7-0: retention budget, us", 1e-3);
      const std::string stall = c.get_choice("act_stall", "refresh", {"refresh", "count"});
      m_transient = std::make_unique<lifetime_rule>(
          m_kv_fields, std::vector<lifetime_rule::field_rule>{{0, msb}, {0, lsb}},
          stall == "refresh" ? lifetime_rule::stall_action::refresh : lifetime_rule::stall_action::count);
    }
  }
  std::string name() const override { return "2drp"; }
  double interval_s(bool high, bool msb) const override {
    return 1e-6 * m_scale * (high ? (msb ? m_hst_msb : m_hst_lsb) : (msb ? m_lst_msb : m_lst_lsb));
  }
  bool needs_groups() const override { return true; }
  void apply(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, const kv_layer_report* r) override {
    // Field by field (MSB banks, then LSB banks); in each, the high-score group's share of the
    // stored bytes first, then the low-score group's. Before the first scores: half and half.
    const double stored = r ? r->high_bytes + r->low_bytes : 0.0;
    apply_fields(e, addr, bytes, stored > 0 ? r->high_bytes / stored : 0.5, {m_hst_msb, m_hst_lsb},
                 {m_lst_msb, m_lst_lsb});
  }

 private:
  double m_hst_msb, m_hst_lsb, m_lst_msb, m_lst_lsb;
};

}  // namespace

KELLE_REGISTER(refresh_policies(), "2drp", "two-dimensional adaptive refresh: score group x bit position",
               [](const config_node& c) { return std::make_unique<two_d>(c); });

}  // namespace kelle
