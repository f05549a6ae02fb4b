// `2drp`: two-dimensional adaptive refresh, token importance (high-score / low-score group from
// the KV policy) x bit position (bits 15-8 in the MSB banks, 7-0 in the LSB banks).
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
        m_lst_lsb(c.get_double("lst_lsb_us", 7200, "low-score tokens, bits 7-0, us", 1e-3)) {}
  std::string name() const override { return "2drp"; }
  double interval_s(bool high, bool msb) const override {
    return 1e-6 * (high ? (msb ? m_hst_msb : m_hst_lsb) : (msb ? m_lst_msb : m_lst_lsb));
  }
  bool needs_groups() const override { return true; }
  void apply(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, const kv_layer_report* r) override {
    // The region's first half stands for the MSB banks, the second for the LSB banks; in each,
    // the high-score group's share of the stored bytes first, then the low-score group's.
    const double stored = r ? r->high_bytes + r->low_bytes : 0.0;
    const double high = stored > 0 ? r->high_bytes / stored : 0.5;
    const std::uint64_t half = bytes / 2;
    const std::uint64_t hi = static_cast<std::uint64_t>(high * double(half));
    const std::uint64_t parts[4][2] = {{addr, hi}, {addr + hi, half - hi},
                                       {addr + half, hi}, {addr + half + hi, bytes - half - hi}};
    const double interval[4] = {m_hst_msb, m_lst_msb, m_hst_lsb, m_lst_lsb};
    std::vector<range> ranges;
    for (int i = 0; i < 4; ++i) {
      if (parts[i][1] == 0) continue;
      e.set_refresh_interval(parts[i][0], parts[i][1], us(interval[i]));
      ranges.push_back({double(parts[i][1]) * 8, interval[i] * 1e-6});
    }
    record(addr, std::move(ranges));
  }

 private:
  double m_hst_msb, m_hst_lsb, m_lst_msb, m_lst_lsb;
};

}  // namespace

KELLE_REGISTER(refresh_policies(), "2drp", "two-dimensional adaptive refresh: score group x bit position",
               [](const config_node& c) { return std::make_unique<two_d>(c); });

}  // namespace kelle
