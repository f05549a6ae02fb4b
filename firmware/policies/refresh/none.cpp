// `none`: the eDRAM keeps its own interval (refresh_interval_us of the memory) for all data.
#include "firmware/policies/refresh/refresh_policy.h"

namespace kelle {
namespace {

class none : public refresh_policy {
 public:
  std::string name() const override { return "none"; }
  void apply(refresh_control&, std::uint64_t, std::uint64_t, const kv_layer_report*) override {}
};

}  // namespace

KELLE_REGISTER(refresh_policies(), "none", "the eDRAM's own interval for all data",
               [](const config_node&) { return std::make_unique<none>(); });

}  // namespace kelle
