#include "models/compute/kv_format.h"

#include "models/compute/command.h"
#include "models/compute/functional/half.h"
#include "platform/config/config.h"

#include <algorithm>
#include <cmath>

namespace kelle {

kv_format::kv_format(kind k, unsigned group) : m_kind(k), m_group(group ? group : 1) {}

const std::vector<std::string>& kv_format::names() {
  static const std::vector<std::string> n = {"binary16", "bfloat16", "fixed16", "int8", "int4"};
  return n;
}

kv_format kv_format::from_config(const config_node& policy, unsigned head_dim) {
  const std::string name = policy.get_choice("kv_format", "binary16", names());
  const kind k = static_cast<kind>(std::find(names().begin(), names().end(), name) - names().begin());
  // KIVI's group size (its experiments use G = 32).
  const std::uint64_t g = policy.get_uint(
      "kv_group_size", 32, "int8/int4: elements per scale group (KIVI's G), a power of two dividing head_dim", 1, 1u << 15);
  const kv_format f(k, static_cast<unsigned>(g));
  if (f.grouped()) {
    if (g & (g - 1)) policy.fail("kv_group_size", std::to_string(g) + " is not a power of two (1, 2, 4, .. 32768)");
    if (head_dim % g)
      policy.fail("kv_group_size", std::to_string(g) + " does not divide the model's head_dim (" +
                                       std::to_string(head_dim) + "): a value row must be whole groups");
  }
  return f;
}

std::uint32_t kv_format::command_bits() const {
  if (!grouped()) return 0;
  unsigned lg = 0;
  while ((1u << lg) < m_group) ++lg;
  return (static_cast<std::uint32_t>(m_kind) << flag_kv_format_shift) | (lg << flag_kv_group_shift);
}

kv_format kv_format::from_command(std::uint32_t flags) {
  const unsigned k = (flags >> flag_kv_format_shift) & 0x7u;
  if (k != static_cast<unsigned>(kind::int8) && k != static_cast<unsigned>(kind::int4)) return {};
  return kv_format(static_cast<kind>(k), 1u << ((flags >> flag_kv_group_shift) & 0xfu));
}

kv_format::group_params kv_format::params(float lo, float hi) const {
  // Both are kept in binary16 (KIVI stores them in fp16); the scale is rounded once.
  const float levels = float((1u << bits()) - 1);
  group_params p;
  p.zero = fn::from_half(fn::to_half(lo));
  p.scale = fn::from_half(fn::to_half((hi - p.zero) / levels));
  return p;
}

unsigned kv_format::quantise(float x, const group_params& p) const {
  if (!(p.scale > 0)) return 0;
  const float q = std::nearbyint((x - p.zero) / p.scale);
  const float top = float((1u << bits()) - 1);
  return static_cast<unsigned>(std::isnan(q) ? 0.0f : std::min(top, std::max(0.0f, q)));
}

float kv_format::dequantise(unsigned code, const group_params& p) const {
  return fn::from_half(fn::to_half(float(code) * p.scale + p.zero));
}

}  // namespace kelle
