// The 16-bit word formats of the KV cache: the engine's binary16 values stored as a 16-bit word,
// 2 bytes per element and nothing beside them (command code 0):
//   binary16  IEEE 754 half: sign, 5 exponent, 10 mantissa bits (the default)
//   bfloat16  sign, 8 exponent, 7 mantissa bits
//   fixed16   16-bit two's complement with one global scale (functional.kv_fixed_scale)
// In functional mode a value is read as stored (binary16) unless a fault flips a bit of its word:
// then the value is taken as the format's word (to_word), its bits flipped and read back into
// binary16 (from_word) (docs/functional.md, "Number formats").
#include "models/compute/kv_format/kv_format.h"

#include "models/compute/functional/half.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace kelle {
namespace {

// A 16-bit word with nothing stored beside it; binary16 itself (the engine's values as they are).
class word16 : public kv_number_format {
 public:
  word16(std::string name, std::string fields) : m_name(std::move(name)), m_fields(std::move(fields)) {}
  std::string name() const override { return m_name; }
  unsigned bits() const override { return 16; }
  unsigned command_code() const override { return 0; }
  std::string float_fields() const override { return m_fields; }

 private:
  std::string m_name, m_fields;  // the name; sign+exponent and mantissa ranges ("" for none)
};

class bfloat16 : public word16 {
 public:
  bfloat16() : word16("bfloat16", "15-7,6-0") {}
  std::uint16_t to_word(std::uint16_t h, double) const override {
    // The top 16 bits of the binary32 value, rounded to nearest even.
    const float f = fn::from_half(h);
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7f800000u) == 0x7f800000u) return std::uint16_t(x >> 16 | ((x & 0xffffu) ? 0x40u : 0u));
    x += 0x7fffu + ((x >> 16) & 1u);
    return std::uint16_t(x >> 16);
  }
  std::uint16_t from_word(std::uint16_t w, double) const override {
    const std::uint32_t x = std::uint32_t(w) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    // The engine computes in binary16: a finite value beyond its range reads as its largest.
    if (std::isfinite(f) && std::fabs(f) > 65504.0f) f = std::copysign(65504.0f, f);
    return fn::to_half(f);
  }
};

class fixed16 : public word16 {
 public:
  fixed16() : word16("fixed16", "") {}
  std::uint16_t to_word(std::uint16_t h, double lsb) const override {  // two's complement, saturating
    const double q = std::nearbyint(double(fn::from_half(h)) / lsb);
    const double c = std::isnan(q) ? 0.0 : std::min(32767.0, std::max(-32768.0, q));
    return std::uint16_t(std::int16_t(c));
  }
  std::uint16_t from_word(std::uint16_t w, double lsb) const override {
    return fn::to_half(float(double(std::int16_t(w)) * lsb));
  }
};

}  // namespace

const kv_number_format& binary16_format() {
  static const word16 f("binary16", "15-10,9-0");
  return f;
}

KELLE_REGISTER(kv_formats(), "binary16", "IEEE 754 half: sign, 5 exponent and 10 mantissa bits (the default)",
               [] { return std::make_unique<word16>("binary16", "15-10,9-0"); });
KELLE_REGISTER(kv_formats(), "bfloat16", "sign, 8 exponent and 7 mantissa bits",
               [] { return std::make_unique<bfloat16>(); });
KELLE_REGISTER(kv_formats(), "fixed16", "16-bit two's complement, one global scale (functional.kv_fixed_scale)",
               [] { return std::make_unique<fixed16>(); });

}  // namespace kelle
