// layer_ops' arena recorder: each decode layer's activation arena events and their size rules
// (begin_layer, end_layer), replayed at another pass's sizes to predict where its buffers land
// (placement, replays_as_run): what sampled layers compare layers by.
#include "firmware/schedulers/layer_ops.h"

#include "platform/support/hash.h"

namespace kelle {

void layer_ops::begin_layer(const pass_info& pass, unsigned layer) {
  if (pass.prefill) return;
  m_arena_log_step[layer] = pass.step;
  m_arena_rules[layer].clear();
  m_recording = layer;
  m_plan.act().record(&m_arena_log[layer]);
}

void layer_ops::end_layer() {
  m_recording = ~0u;
  m_plan.act().record(nullptr);
}

std::uint64_t layer_ops::size_in(size_rule rule, std::uint64_t logged, const pass_info& pass, unsigned layer,
                                 std::uint64_t arena_free, std::uint64_t& heads) const {
  switch (rule) {
    case size_rule::fixed:
      return logged;
    case size_rule::scores_first:
      heads = score_heads(pass, layer, arena_free);
      [[fallthrough]];
    case size_rule::scores_second:
      return score_bytes(pass, layer, heads);
    case size_rule::staging:  // none in a pass in which the layer does not recompute
      return pass.recompute_rows(layer) ? staging_bytes(pass, layer) : 0;
    case size_rule::victims:  // none in a pass in which the layer does not evict
      return pass.evicts(layer) ? victims_bytes(pass) : 0;
  }
  return logged;
}

std::uint64_t layer_ops::placement(const pass_info& pass, unsigned layer) const {
  return predict(pass, layer, nullptr);
}

bool layer_ops::replays_as_run(const pass_info& pass, unsigned layer) const {
  if (m_arena_log[layer].empty() || m_arena_log_step[layer] != pass.step) return true;
  bool as_run = true;
  predict(pass, layer, &as_run);
  return as_run;
}

std::uint64_t layer_ops::predict(const pass_info& pass, unsigned layer, bool* as_run) const {
  const activation_arena::log& log = m_arena_log[layer];
  if (log.empty()) return 0;
  const std::vector<size_rule>& rules = m_arena_rules[layer];
  std::uint64_t heads = 0, h = splitmix64(layer + 1);
  m_plan.act().predict(
      log,
      [&](std::size_t k, const activation_arena::event& e, std::uint64_t free) {
        return size_in(k < rules.size() ? rules[k] : size_rule::fixed, e.bytes, pass, layer, free, heads);
      },
      [&](std::size_t, std::uint64_t bytes, bool fits, const activation_arena::event& e) {
        if (as_run && (bytes != e.bytes || fits != e.in_arena)) *as_run = false;
        h = splitmix64(h ^ (fits ? 1u : 2u) ^ heads << 2);
      });
  return h;
}

}  // namespace kelle
