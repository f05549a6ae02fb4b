#include "firmware/llm/run_config.h"

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/refresh_policy.h"
#include "firmware/schedulers/scheduler.h"

namespace kelle {

namespace {

// `key` under `top` if the scenario gives it there, else under `system` (the system's firmware
// defaults), else `def`.
run_config::choice pick(const config_node& top, const config_node& system, const std::string& key,
                        const std::string& def, const std::vector<std::string>& allowed) {
  const std::string fallback = system.get_choice(key, def, allowed);
  const std::string name = top.get_choice(key, fallback, allowed);
  const std::string from = top.origin(key);
  return {name, from != "default" ? from : system.origin(key)};
}

}  // namespace

run_config run_config::resolve(const config_node& root) {
  const config_node fw = root.child_or_empty("system").child_or_empty("firmware");
  const config_node pol = root.child_or_empty("policy");
  const config_node fw_pol = fw.child_or_empty("policy");
  run_config r;
  r.scheduler = pick(root, fw, "scheduler", "kelle", schedulers().name_list());
  r.kv_policy = pick(pol, fw_pol, "kv", "full", kv_policies().name_list());
  r.refresh_policy = pick(pol, fw_pol, "refresh", "none", refresh_policies().name_list());
  return r;
}

nlohmann::json run_config::to_json() const {
  auto one = [](const choice& c) { return nlohmann::json{{"name", c.name}, {"from", c.from}}; };
  return {{"scheduler", one(scheduler)}, {"kv_policy", one(kv_policy)}, {"refresh_policy", one(refresh_policy)}};
}

}  // namespace kelle
