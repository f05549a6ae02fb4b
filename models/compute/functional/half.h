// IEEE 754 binary16 ("fp16"), the format of the platform's 16-bit activations, KV cache and
// stored x vectors in functional mode (docs/functional.md, "Numerics"). Bits 15-8 (sign, the five
// exponent bits, the two top mantissa bits) sit in the eDRAM's MSB banks, bits 7-0 (the low
// mantissa bits) in the LSB banks. Conversions round to nearest, ties to even; overflow gives inf.
#pragma once

#include <cstdint>
#include <cstring>

namespace kelle::fn {

inline std::uint16_t to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exp = (x >> 23) & 0xffu;
  std::uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<std::uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));  // inf, NaN
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow
  if (e <= 0) {                                                     // subnormal or zero
    if (e < -10) return static_cast<std::uint16_t>(sign);
    man |= 0x800000u;
    const unsigned shift = static_cast<unsigned>(14 - e);
    std::uint32_t h = man >> shift;
    const std::uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) | (man >> 13);
  const std::uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: fine
  return static_cast<std::uint16_t>(sign | h);
}

inline float from_half(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t x;
  if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      x = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (man << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// from_half of every binary16 pattern, built once (256 KiB): the conversion as one load.
inline const float* half_table() {
  static const float* t = [] {
    static float v[65536];
    for (std::uint32_t h = 0; h < 65536; ++h) v[h] = from_half(static_cast<std::uint16_t>(h));
    return v;
  }();
  return t;
}

// Rounds a float to the nearest binary16 value (what storing it as an activation does).
inline float round_half(float f) { return from_half(to_half(f)); }

}  // namespace kelle::fn
