// Fuzz target: the scenario loader with -p overrides (platform/config/config.cpp). The input is a
// scenario's text; the lines after a line "%%" are overrides, one "key.path=value" each. Every
// rejection must be a config_error (one line for the user); anything else escaping, a crash, a
// leak or undefined behaviour is a finding.
#include "platform/config/config.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::string yaml = in;
  std::vector<std::string> overrides;
  const auto sep = in.find("\n%%\n");
  if (sep != std::string::npos) {
    yaml = in.substr(0, sep);
    std::string rest = in.substr(sep + 4);
    std::size_t pos = 0;
    while (pos <= rest.size() && overrides.size() < 16) {
      const auto nl = rest.find('\n', pos);
      overrides.push_back(rest.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
  }
  try {
    kelle::config c = kelle::config::from_string(yaml, "fuzz.yaml", overrides);
    // The reads a model makes: typed values, maps, paths, origins, then the unknown-key check.
    kelle::config_node root = c.root();
    root.get_string("name", "x", "a name");
    const kelle::config_node w = root.child_or_empty("workload");
    w.get_uint("batch", 1, "a count", 1, 4096);
    w.get_double("rate", 1.0, "a rate", 0, 1e9);
    w.get_double_or_inf("bandwidth_GBps", 1.0, "a bandwidth", 1e-6);
    w.get_bool("skip_prefill", false, "a flag");
    w.get_choice("type", "llm", {"llm", "traffic", "op"});
    w.get_path("file", "", "a file");
    w.origin("batch");
    for (const auto& k : root.child_or_empty("system").keys()) c.where("system." + k);
    c.accept_unread("tech");
    c.check_all_used();
  } catch (const kelle::config_error&) {
  }
  return 0;
}
