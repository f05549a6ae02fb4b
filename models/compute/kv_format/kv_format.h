// The number format of the KV cache (`policy.kv_format`, docs/policies/kv-format.md): one class
// per format, registered by name (`kv_formats()`, `kelle-vp list kv_format`), which every place
// that sizes, moves, refreshes or reads the KV cache asks:
//   - its bits per element, the scales stored with a row and the bytes of a row (the memory plan,
//     the KV policies, the recomputation budget, the compute blocks' KV operands);
//   - its command code (models/compute/command.h, flag_kv_format_*): how a compute block knows the
//     bytes of its KV operands;
//   - functional mode's encode and decode of a stored element (a code of bits() bits and back) or,
//     for a 16-bit word format, the word the engine's binary16 value is stored as (the faults flip
//     its bits);
//   - its refresh bit fields (a floating-point code's sign+exponent and mantissa, which SHIELD's
//     banks split) and so where a stored bit sits for the fault model.
// The formats, one file per family beside this one: float16.cpp (binary16, bfloat16, fixed16),
// kivi.cpp (int8, int4 with KIVI's group scales), fp8.cpp (OCP FP8 E4M3 and E5M2 with one
// per-tensor scale). A new format is one class and one
// KELLE_REGISTER(kv_formats(), ...) line in its own file.
//
// `kv_format` (below) is a run's format: a registered format with the scenario's parameters (the
// group size, a per-tensor scale), a small value that model_shape carries and the blocks decode
// from a command's flags without a look-up by name.
#pragma once

#include "platform/registry/registry.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

class config_node;

// What the scenario sets of a format (policy.kv_group_size and a format's own keys).
struct kv_format_params {
  unsigned group = 32;  // elements per scale group of a grouped format (KIVI's G)
  float scale = 1.0f;   // a per-tensor scale of a format that has one (x is stored as x / scale)
};

class kv_number_format {
 public:
  virtual ~kv_number_format() = default;
  virtual std::string name() const = 0;
  // Stored bits per element (of its code).
  virtual unsigned bits() const = 0;
  // The command code (command.h, flag_kv_format_shift; 3 bits): 0 for a format whose elements are
  // 16-bit words with nothing stored beside them (a block moves 2 bytes per element, as for any
  // 16-bit operand), else a code of this format's own (1 to 7).
  virtual unsigned command_code() const = 0;
  // Elements per scale group whose scales are stored with the rows (0: none).
  virtual unsigned group(const kv_format_params&) const { return 0; }
  // Bytes of the scales stored per token for a row of `channels` elements.
  virtual std::uint64_t scale_bytes(std::uint64_t /*channels*/, const kv_format_params&) const { return 0; }
  // Reads the format's own keys of the `policy` section into `p` and checks `p` against the
  // model's head_dim; errors name the key. Called after kv_group_size is read.
  virtual void configure(const config_node& /*policy*/, unsigned /*head_dim*/, kv_format_params& /*p*/) const {}

  // Functional mode. A format that quantises stores each element as a code of bits() bits: every
  // read of the cache returns decode(encode(x)) of the value written (faults flip the code's bits).
  // A format that does not stores a 16-bit word: the engine's binary16 value as to_word() gives it.
  virtual bool quantises() const { return false; }
  // The scale (and zero point) of a code: a group's from its values' extremes [lo, hi] for a
  // grouped format; the format's fixed one otherwise.
  struct scale {
    float scale = 0, zero = 0;
  };
  virtual scale group_scale(float /*lo*/, float /*hi*/, const kv_format_params& p) const { return {p.scale, 0.0f}; }
  // The code of `x` (its bits() low bits), and the value a code stands for as the engine reads it
  // (rounded to binary16).
  virtual std::uint32_t encode(float x, const scale& s) const;
  virtual float decode(std::uint32_t code, const scale& s) const;
  // A 16-bit word format: a binary16 value's bits as the format's word, and back (`lsb`: the value
  // of a fixed-point word's least significant bit).
  virtual std::uint16_t to_word(std::uint16_t half_bits, double /*lsb*/) const { return half_bits; }
  virtual std::uint16_t from_word(std::uint16_t word, double /*lsb*/) const { return word; }

  // Refresh: the code's floating-point fields as bit ranges from its top bit, sign+exponent then
  // mantissa ("15-7,6-0"), which SHIELD keeps in banks of their own; "" when the code has none
  // (integer codes, two's complement).
  virtual std::string float_fields() const { return ""; }
};

using kv_format_registry = registry<kv_number_format>;
kv_format_registry& kv_formats();

// binary16, the default format (defined in float16.cpp; usable before any registration ran).
const kv_number_format& binary16_format();

class kv_format {
 public:
  using group_params = kv_number_format::scale;

  kv_format() = default;  // binary16
  kv_format(const kv_number_format& type, kv_format_params p) : m_type(&type), m_p(p) {}

  // The registered formats' names (sorted).
  static std::vector<std::string> names();
  // The format named `name` with default parameters; throws std::out_of_range if none is.
  static kv_format named(const std::string& name);
  // `policy.kv_format`, `policy.kv_group_size` and the format's own keys of the scenario's
  // `policy` section. Errors name the key.
  static kv_format from_config(const config_node& policy, unsigned head_dim);
  // The format command_bits() encoded (binary16 when the bits are 0 or name no format).
  static kv_format from_command(std::uint32_t flags);

  const kv_number_format& type() const { return m_type ? *m_type : binary16_format(); }
  std::string name() const { return type().name(); }
  // Whether this is the default format (binary16).
  bool is_default() const { return !m_type || name() == "binary16"; }
  unsigned bits() const { return type().bits(); }
  // Elements per scale group stored with the rows (0: none).
  unsigned group() const { return type().group(m_p); }
  // Bytes of the codes of one token's `channels` elements (a head's K or V row).
  std::uint64_t code_bytes(std::uint64_t channels) const { return (channels * bits() + 7) / 8; }
  // Bytes of the scales stored per token for a row of `channels` elements.
  std::uint64_t scale_bytes(std::uint64_t channels) const { return type().scale_bytes(channels, m_p); }
  // Bytes one token's row of `channels` elements takes in the cache: codes plus scales.
  std::uint64_t row_bytes(std::uint64_t channels) const { return code_bytes(channels) + scale_bytes(channels); }
  // A command's flag bits (command.h, flag_kv_format_*) that tell a block the format of its KV
  // operands: 0 for a 16-bit word format, so such a run's commands are a binary16 run's.
  std::uint32_t command_bits() const;

  // Functional mode (the type's encode and decode with this run's parameters).
  bool quantises() const { return type().quantises(); }
  group_params params(float lo, float hi) const { return type().group_scale(lo, hi, m_p); }
  std::uint32_t quantise(float x, const group_params& p) const { return type().encode(x, p); }
  float dequantise(std::uint32_t code, const group_params& p) const { return type().decode(code, p); }
  std::uint16_t to_word(std::uint16_t half_bits, double lsb) const { return type().to_word(half_bits, lsb); }
  std::uint16_t from_word(std::uint16_t word, double lsb) const { return type().from_word(word, lsb); }
  std::string float_fields() const { return type().float_fields(); }

 private:
  const kv_number_format* m_type = nullptr;  // null: binary16
  kv_format_params m_p;
};

}  // namespace kelle
