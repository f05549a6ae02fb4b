// The number format of the KV cache (`policy.kv_format`, docs/policies/kv-format.md): how many
// bits a stored K or V element has and, for the integer formats, the scales stored beside them.
// One definition for every place that sizes or reads the KV cache: the memory plan (placement,
// tokens per eDRAM megabyte), the compute blocks (bytes of the KV operands they read and write),
// the KV policies (AERP's x-versus-K,V bytes, the 2DRP groups' bytes), the recomputation budget
// and functional mode (the values: quantisation at the cache, faults in the stored codes).
//
//   binary16  IEEE half: sign, 5 exponent, 10 mantissa bits (the default)
//   bfloat16  sign, 8 exponent, 7 mantissa bits
//   fixed16   16-bit two's complement with one global scale (functional.kv_fixed_scale)
//   int8      8-bit unsigned codes, asymmetric, with a scale and a zero point per group
//   int4      4-bit unsigned codes, the same
//
// The integer formats follow KIVI (Liu et al., "KIVI: A Tuning-Free Asymmetric 2bit Quantization
// for KV Cache", ICML 2024, arXiv:2402.02750, section 3): keys are quantised per channel (a group
// is G consecutive tokens of one channel), values per token (a group is G consecutive channels of
// one token); each group has a binary16 scale s = (max - min) / (2^b - 1) and a binary16 zero
// point z = min; a value x is stored as the code round((x - z) / s) in [0, 2^b - 1] and read as
// code x s + z. G is `policy.kv_group_size` (KIVI's default 32). A K group of G tokens carries
// head_dim scale/zero pairs, a V row ceil(head_dim / G) pairs: with G dividing head_dim both are
// 4 x head_dim / G bytes per token and head. KIVI also keeps the most recent R tokens in full
// precision (its residual); this model does not: every token of the cache is stored in the
// format (docs/policies/kv-format.md says what that changes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

class config_node;

class kv_format {
 public:
  enum class kind : std::uint8_t { binary16 = 0, bfloat16 = 1, fixed16 = 2, int8 = 3, int4 = 4 };
  // Bytes of one group's scale and zero point (two binary16 values, as KIVI keeps them).
  static constexpr unsigned scale_bytes_per_group = 4;

  kv_format() = default;
  // `group`: elements per scale group of the integer formats (a power of two); ignored otherwise.
  kv_format(kind k, unsigned group);

  // The format names, in kind order.
  static const std::vector<std::string>& names();
  // `policy.kv_format` and `policy.kv_group_size` of the scenario's `policy` section; a group
  // must divide the model's `head_dim` (a value row is whole groups). Errors name the key.
  static kv_format from_config(const config_node& policy, unsigned head_dim);

  kind type() const { return m_kind; }
  const std::string& name() const { return names()[static_cast<unsigned>(m_kind)]; }
  // Stored bits per element.
  unsigned bits() const { return m_kind == kind::int8 ? 8 : m_kind == kind::int4 ? 4 : 16; }
  // Whether the format stores integer codes with group scales (int8, int4).
  bool grouped() const { return m_kind == kind::int8 || m_kind == kind::int4; }
  // Elements per scale group (0 for the 16-bit formats).
  unsigned group() const { return grouped() ? m_group : 0; }

  // Bytes of the codes of one token's `channels` elements (a head's K or V row).
  std::uint64_t code_bytes(std::uint64_t channels) const { return (channels * bits() + 7) / 8; }
  // Bytes of scales and zero points per token for a row of `channels` elements: a V row's
  // ceil(channels / G) groups; a K group of G tokens holds `channels` pairs, the same per token
  // when G divides `channels` (from_config checks that it divides head_dim).
  std::uint64_t scale_bytes(std::uint64_t channels) const {
    return grouped() ? (channels + m_group - 1) / m_group * scale_bytes_per_group : 0;
  }
  // Bytes one token's row of `channels` elements takes in the cache: codes plus scales.
  std::uint64_t row_bytes(std::uint64_t channels) const { return code_bytes(channels) + scale_bytes(channels); }

  // A command's flag bits (models/compute/command.h, flag_kv_format_*) that tell a block the
  // format of its KV operands: 0 for the 16-bit formats (their bytes are 16-bit), so a binary16
  // run's commands are unchanged.
  std::uint32_t command_bits() const;
  // The format command_bits() encoded (binary16 when the bits are 0).
  static kv_format from_command(std::uint32_t flags);

  // Quantisation of the grouped formats (KIVI's asymmetric min/max quantiser). Values are
  // binary16 (the engine's) and so are the scale and the zero point.
  struct group_params {
    float scale = 0, zero = 0;
  };
  // The scale and zero point of a group whose values span [lo, hi].
  group_params params(float lo, float hi) const;
  // The code of `x` in a group (clamped to [0, 2^bits - 1]; a zero scale gives 0).
  unsigned quantise(float x, const group_params& p) const;
  // The value a code stands for, rounded to binary16 (what the engine reads).
  float dequantise(unsigned code, const group_params& p) const;

 private:
  kind m_kind = kind::binary16;
  unsigned m_group = 32;
};

}  // namespace kelle
