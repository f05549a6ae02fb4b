// The 8-bit floating-point formats of the KV cache, after the OCP 8-bit Floating Point
// Specification (OFP8), revision 1.0, 2023 (Open Compute Project; Micikevicius et al., "FP8
// Formats for Deep Learning", arXiv:2209.05433):
//   fp8_e4m3  sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, NaN only at
//             S.1111.111, so the largest normal is S.1111.110 = 448; the smallest normal 2^-6,
//             subnormals down to 2^-9. Conversion rounds to nearest, ties to even, and saturates:
//             a magnitude beyond 448 (or an infinity) is stored as 448, a NaN as NaN.
//   fp8_e5m2  sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE 754-like: S.11111.00 is
//             infinity, S.11111.{01,10,11} NaN; the largest normal 57344, the smallest normal
//             2^-14, subnormals down to 2^-16. Round to nearest, ties to even, not saturating: a
//             magnitude that rounds beyond 57344 (from 61440 up) is stored as infinity.
// One code per element, no scales beside the rows: the scale is per tensor, as vLLM's FP8 KV
// cache keeps it (docs.vllm.ai, "Quantized KV Cache": k_scale and v_scale, one per layer's K and
// V, 1.0 when the checkpoint gives none; a value x is stored as x / scale and read as code x
// scale). `policy.kv_scale` sets it (default 1, vLLM's without calibration). The codes' fields
// for SHIELD's banks: sign+exponent 7-3 | mantissa 2-0 (E4M3), 7-2 | 1-0 (E5M2).
#include "models/compute/kv_format/kv_format.h"

#include "models/compute/functional/half.h"
#include "platform/config/config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace kelle {
namespace {

class fp8 : public kv_number_format {
 public:
  // `exp` exponent bits and `man` mantissa bits; E4M3 (no infinities, saturating) when exp is 4.
  fp8(unsigned exp, unsigned man, unsigned code)
      : m_exp(exp), m_man(man), m_code(code), m_bias((1 << (exp - 1)) - 1), m_e4m3(exp == 4) {
    // The largest normal: E5M2's below the infinities' exponent; E4M3's at the top exponent with
    // the mantissa one below NaN's all ones.
    const int top = m_e4m3 ? (1 << exp) - 1 : (1 << exp) - 2;
    const unsigned man_top = m_e4m3 ? (1u << man) - 2 : (1u << man) - 1;
    m_max_code = (unsigned(top) << man) | man_top;
    m_beyond = m_e4m3 ? m_max_code : 0x7cu;
  }
  std::string name() const override { return m_e4m3 ? "fp8_e4m3" : "fp8_e5m2"; }
  unsigned bits() const override { return 8; }
  unsigned command_code() const override { return m_code; }
  std::string float_fields() const override { return "7-" + std::to_string(m_man) + "," + std::to_string(m_man - 1) + "-0"; }
  void configure(const config_node& policy, unsigned, kv_format_params& p) const override {
    p.scale = float(policy.get_double("kv_scale", 1.0,
                                      "fp8: the per-tensor scale of K and V (x stored as x / scale; vLLM's k_scale, "
                                      "v_scale: 1 without calibration)",
                                      1e-30));
  }

  bool quantises() const override { return true; }
  // Rounding to nearest, ties to even, on the bits of a = |x| / scale: the float's exponent and
  // mantissa rounded to `man` bits as one integer (a carry moves into the exponent, as it does
  // from a binade's top into the next), rebiased; below the smallest normal, the significand
  // rounded to a count of the subnormals' steps. A magnitude past the largest normal's code is
  // E5M2's infinity (the next code), E4M3 saturates.
  std::uint32_t encode(float x, const scale& s) const override {
    const std::uint32_t sign = std::signbit(x) ? 0x80u : 0u;
    if (std::isnan(x)) return sign | (m_e4m3 ? 0x7fu : 0x7eu);
    const float a = std::fabs(x) / s.scale;
    std::uint32_t u;
    std::memcpy(&u, &a, sizeof u);
    if (u >= 0x7f800000u) return sign | m_beyond;  // infinite
    const int e = int(u >> 23) - 127;               // a = 1.m x 2^e (u < 2^23: below 2^-126, rounds to 0)
    std::uint32_t k;
    if (e >= 1 - m_bias) {
      const unsigned drop = 23 - m_man;
      k = round_even(u, drop) - (std::uint32_t(127 - m_bias) << m_man);
    } else {
      const int drop = 23 + (1 - m_bias) - int(m_man) - e;  // the subnormals' step is 2^(1 - bias - man)
      k = drop > 24 ? 0 : round_even((u & 0x007fffffu) | 0x00800000u, unsigned(drop));
    }
    return sign | (k > m_max_code ? m_beyond : k);
  }
  // A table of the 256 codes' values at the last scale asked for (the scale is per tensor).
  float decode(std::uint32_t code, const scale& s) const override {
    if (s.scale != m_table_scale) {
      for (std::uint32_t c = 0; c < 256; ++c) m_table[c] = value(c, s.scale);
      m_table_scale = s.scale;
    }
    return m_table[code & 0xffu];
  }

 private:
  // What code `code` stands for at `scale`, as the engine reads it (binary16).
  float value(std::uint32_t code, float scale) const {
    const bool negative = code & 0x80u;
    const unsigned biased = (code >> m_man) & ((1u << m_exp) - 1), m = code & ((1u << m_man) - 1);
    float v;
    if (m_e4m3 && biased == (1u << m_exp) - 1 && m == (1u << m_man) - 1) {
      v = std::numeric_limits<float>::quiet_NaN();
    } else if (!m_e4m3 && biased == (1u << m_exp) - 1) {
      v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    } else if (biased == 0) {
      v = std::ldexp(float(m), 1 - m_bias - int(m_man));
    } else {
      v = std::ldexp(float((1u << m_man) | m), int(biased) - m_bias - int(m_man));
    }
    // The engine reads binary16 (exact for both formats at scale 1).
    return fn::from_half(fn::to_half((negative ? -v : v) * scale));
  }
  // v >> drop rounded to nearest, ties to even (drop 1 to 24).
  static std::uint32_t round_even(std::uint32_t v, unsigned drop) {
    const std::uint32_t r = v >> drop, rest = v & ((1u << drop) - 1), half = 1u << (drop - 1);
    return r + (rest > half || (rest == half && (r & 1u)));
  }

  unsigned m_exp, m_man, m_code;
  int m_bias;
  bool m_e4m3;
  std::uint32_t m_max_code = 0;
  std::uint32_t m_beyond = 0;  // the code of a magnitude past the largest normal
  mutable std::array<float, 256> m_table{};
  mutable float m_table_scale = 0;  // the table's scale (0: none yet; a scale is positive)
};

}  // namespace

KELLE_REGISTER(kv_formats(), "fp8_e4m3", "OCP FP8 E4M3: 4 exponent, 3 mantissa bits, saturating at 448; a per-tensor scale (kv_scale)",
               [] { return std::make_unique<fp8>(4, 3, 5); });
KELLE_REGISTER(kv_formats(), "fp8_e5m2", "OCP FP8 E5M2: 5 exponent, 2 mantissa bits, infinities and NaN; a per-tensor scale (kv_scale)",
               [] { return std::make_unique<fp8>(5, 2, 6); });

}  // namespace kelle
