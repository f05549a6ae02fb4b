#include "firmware/workload/attention/attention_source.h"

namespace kelle {

attention_source_registry& attention_sources() {
  static attention_source_registry r("attention_sources",
                                     "attention-score sources for the KV-cache policies");
  return r;
}

std::unique_ptr<attention_source> make_attention_source(const attention_source_args& args) {
  const std::string type = args.cfg.get_choice("type", "synthetic", attention_sources().name_list());
  return attention_sources().create(type, args);
}

}  // namespace kelle
