// `uniform`: one refresh interval for all KV data (45 us "Org", 360 us "Uni").
#include "firmware/policies/refresh/refresh_policy.h"

#include "models/memory/refresh_control.h"

namespace kelle {
namespace {

class uniform : public refresh_policy {
 public:
  explicit uniform(const config_node& c)
      : m_us(c.get_double("refresh_interval_us", 45.0, "refresh interval of all KV data, us", 1e-3)) {}
  std::string name() const override { return "uniform"; }
  double interval_s(bool, bool) const override { return m_us * m_scale * 1e-6; }
  void apply(refresh_control& e, std::uint64_t addr, std::uint64_t bytes, const kv_layer_report*) override {
    const double s = scale_for(e);
    e.set_refresh_interval(addr, bytes, scaled_refresh_interval(m_us, scale()));
    record(addr, {{double(bytes) * 8, m_us * s * 1e-6, all_fields}});
  }

 private:
  double m_us;
};

}  // namespace

KELLE_REGISTER(refresh_policies(), "uniform", "one interval for all KV data (45 us Org, 360 us Uni)",
               [](const config_node& c) { return std::make_unique<uniform>(c); });

}  // namespace kelle
