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
#include <cmath>
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
    m_max = std::ldexp(1.0f + float(man_top) / float(1u << man), top - m_bias);
    m_max_code = (unsigned(top) << man) | man_top;
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
  std::uint32_t encode(float x, const scale& s) const override {
    const std::uint32_t sign = std::signbit(x) ? 0x80u : 0u;
    if (std::isnan(x)) return sign | (m_e4m3 ? 0x7fu : 0x7eu);
    const float a = std::fabs(x) / s.scale;
    if (std::isinf(a)) return sign | (m_e4m3 ? m_max_code : 0x7cu);
    if (a == 0) return sign;
    // a = 1.f x 2^e; the step of the codes at a's binade (or the subnormals' below the normals).
    int e;
    std::frexp(a, &e);
    const int emin = 1 - m_bias;
    const int eu = std::max(e - 1, emin);
    const float step = std::ldexp(1.0f, eu - int(m_man));
    const float n = std::nearbyint(a / step);  // round to nearest, ties to even (the default mode)
    if (n * step > m_max) return sign | (m_e4m3 ? m_max_code : 0x7cu);  // E4M3 saturates, E5M2 is infinite
    // Below the normals the code is the count of steps (2^man of them is the smallest normal);
    // in a binade, 2^man steps are its leading one and a carry to 2^(man+1) the next binade's.
    if (e - 1 < emin) return sign | std::uint32_t(n);
    std::uint32_t biased = std::uint32_t(eu + m_bias), m = std::uint32_t(n);
    if (m == (2u << m_man)) {
      ++biased;
      m >>= 1;
    }
    return sign | (biased << m_man) | (m - (1u << m_man));
  }
  float decode(std::uint32_t code, const scale& s) const override {
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
    return fn::from_half(fn::to_half((negative ? -v : v) * s.scale));
  }

 private:
  unsigned m_exp, m_man, m_code;
  int m_bias;
  bool m_e4m3;
  float m_max = 0;
  std::uint32_t m_max_code = 0;
};

}  // namespace

KELLE_REGISTER(kv_formats(), "fp8_e4m3", "OCP FP8 E4M3: 4 exponent, 3 mantissa bits, saturating at 448; a per-tensor scale (kv_scale)",
               [] { return std::make_unique<fp8>(4, 3, 5); });
KELLE_REGISTER(kv_formats(), "fp8_e5m2", "OCP FP8 E5M2: 5 exponent, 2 mantissa bits, infinities and NaN; a per-tensor scale (kv_scale)",
               [] { return std::make_unique<fp8>(5, 2, 6); });

}  // namespace kelle
