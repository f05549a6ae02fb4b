// The integer formats of the KV cache, after KIVI (Liu et al., "KIVI: A Tuning-Free Asymmetric
// 2bit Quantization for KV Cache", ICML 2024, arXiv:2402.02750, section 3):
//   int8  8-bit unsigned codes, asymmetric, with a scale and a zero point per group
//   int4  4-bit unsigned codes, the same
// Keys are quantised per channel (a group is G consecutive tokens of one channel), values per
// token (a group is G consecutive channels of one token); each group has a binary16 scale
// s = (max - min) / (2^b - 1) and a binary16 zero point z = min; a value x is stored as the code
// round((x - z) / s) in [0, 2^b - 1] and read as code x s + z. G is `policy.kv_group_size`
// (KIVI's default 32). A K group of G tokens carries head_dim scale/zero pairs, a V row
// ceil(head_dim / G) pairs: with G dividing head_dim both are 4 x head_dim / G bytes per token and
// head. KIVI also keeps the most recent R tokens in full precision (its residual); this model does
// not: every token of the cache is stored in the format (docs/policies/kv-format.md says what that
// changes). Integer codes have no sign, exponent or mantissa field (no float_fields()).
#include "models/compute/kv_format/kv_format.h"

#include "models/compute/functional/half.h"
#include "platform/config/config.h"

#include <algorithm>
#include <cmath>

namespace kelle {
namespace {

class kivi : public kv_number_format {
 public:
  // Bytes of one group's scale and zero point (two binary16 values, as KIVI keeps them).
  static constexpr unsigned scale_bytes_per_group = 4;

  kivi(unsigned bits, unsigned code) : m_bits(bits), m_code(code) {}
  std::string name() const override { return "int" + std::to_string(m_bits); }
  unsigned bits() const override { return m_bits; }
  unsigned command_code() const override { return m_code; }
  unsigned group(const kv_format_params& p) const override { return p.group ? p.group : 1; }
  // A V row's ceil(channels / G) groups; a K group of G tokens holds `channels` pairs, the same per
  // token when G divides `channels` (configure() checks that it divides head_dim).
  std::uint64_t scale_bytes(std::uint64_t channels, const kv_format_params& p) const override {
    const unsigned g = group(p);
    return (channels + g - 1) / g * scale_bytes_per_group;
  }
  void configure(const config_node& policy, unsigned head_dim, kv_format_params& p) const override {
    const unsigned g = p.group;
    if (g & (g - 1)) policy.fail("kv_group_size", std::to_string(g) + " is not a power of two (1, 2, 4, .. 32768)");
    if (head_dim % g)
      policy.fail("kv_group_size", std::to_string(g) + " does not divide the model's head_dim (" +
                                       std::to_string(head_dim) + "): a value row must be whole groups");
  }

  bool quantises() const override { return true; }
  scale group_scale(float lo, float hi, const kv_format_params&) const override {
    // Both are kept in binary16 (KIVI stores them in fp16); the scale is rounded once.
    const float levels = float((1u << m_bits) - 1);
    scale s;
    s.zero = fn::from_half(fn::to_half(lo));
    s.scale = fn::from_half(fn::to_half((hi - s.zero) / levels));
    return s;
  }
  std::uint32_t encode(float x, const scale& s) const override {
    // Clamped to [0, 2^bits - 1]; a zero scale gives 0.
    if (!(s.scale > 0)) return 0;
    const float q = std::nearbyint((x - s.zero) / s.scale);
    const float top = float((1u << m_bits) - 1);
    return static_cast<std::uint32_t>(std::isnan(q) ? 0.0f : std::min(top, std::max(0.0f, q)));
  }
  float decode(std::uint32_t code, const scale& s) const override {
    return fn::from_half(fn::to_half(float(code) * s.scale + s.zero));
  }

 private:
  unsigned m_bits, m_code;
};

}  // namespace

KELLE_REGISTER(kv_formats(), "int8", "8-bit codes with KIVI's binary16 scale and zero point per group of kv_group_size",
               [] { return std::make_unique<kivi>(8, 3); });
KELLE_REGISTER(kv_formats(), "int4", "4-bit codes with KIVI's binary16 scale and zero point per group of kv_group_size",
               [] { return std::make_unique<kivi>(4, 4); });

}  // namespace kelle
