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

run_lengths run_lengths::read(const config_node& p) {
  run_lengths r;
  r.task_name = p.get_choice("task", "none", [] {
    auto v = tasks().name_list();
    v.insert(v.begin(), "none");
    return v;
  }());
  if (r.task_name != "none") r.task = *tasks().create(r.task_name);
  r.batch = static_cast<unsigned>(p.get_uint("batch", r.task.batch, "sequences decoded together", 1, 4096));
  r.context = p.get_uint("context_len", r.task.context_len, "context (prompt) tokens per sequence", 1, 1 << 24);
  r.decode = p.get_uint("decode_len", r.task.decode_len, "tokens generated per sequence", 0, 1 << 24);
  return r;
}

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
