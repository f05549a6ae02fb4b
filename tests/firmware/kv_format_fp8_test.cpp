// The OCP 8-bit floating-point KV formats (models/compute/kv_format/fp8.cpp; OFP8 rev 1.0, 2023):
// encode and decode by hand (the largest normals, subnormals, ties to even, saturation,
// infinities and NaN), the bytes a row takes and the command that carries it, the fields SHIELD
// refreshes (functional mode against the reference: kv_format_test.cpp).
#include <catch2/catch.hpp>

#include "firmware/policies/refresh/refresh_policy.h"
#include "models/compute/command.h"
#include "models/compute/functional/half.h"
#include "models/compute/kv_format/kv_format.h"
#include "platform/config/config.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

using namespace kelle;

namespace {

const kv_format::group_params unit{1.0f, 0.0f};

std::uint32_t enc(const kv_format& f, float x) { return f.quantise(x, unit); }
float dec(const kv_format& f, std::uint32_t c) { return f.dequantise(c, unit); }

}  // namespace

TEST_CASE("kv_format fp8_e4m3: encode and decode by hand", "[kv_format][fp8]") {
  const kv_format e4m3 = kv_format::named("fp8_e4m3");
  // Sign, 4 exponent bits (bias 7), 3 mantissa bits. The largest normal S.1111.110 = 1.75 x 2^8.
  CHECK(enc(e4m3, 448.0f) == 0x7e);
  CHECK(dec(e4m3, 0x7e) == 448.0f);
  CHECK(enc(e4m3, -448.0f) == 0xfe);
  CHECK(dec(e4m3, 0xfe) == -448.0f);
  // Saturation: beyond 448 (and 464, a tie between 448 and the NaN code's 480) stays 448.
  CHECK(enc(e4m3, 464.0f) == 0x7e);
  CHECK(enc(e4m3, 500.0f) == 0x7e);
  CHECK(enc(e4m3, 1e6f) == 0x7e);
  CHECK(enc(e4m3, -std::numeric_limits<float>::infinity()) == 0xfe);
  // NaN is S.1111.111 only.
  CHECK(enc(e4m3, std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  CHECK(std::isnan(dec(e4m3, 0x7f)));
  CHECK(std::isnan(dec(e4m3, 0xff)));
  CHECK(dec(e4m3, 0x78) == 256.0f);  // S.1111.000 is a normal number, not infinity
  // One and its neighbours: 1.0 = 0.0111.000; ties to even: 1.0625 -> 1.0, 1.1875 -> 1.25.
  CHECK(enc(e4m3, 1.0f) == 0x38);
  CHECK(enc(e4m3, 1.0625f) == 0x38);
  CHECK(enc(e4m3, 1.1875f) == 0x3a);
  CHECK(dec(e4m3, 0x3a) == 1.25f);
  CHECK(enc(e4m3, 1.96875f) == 0x40);  // rounds up into the next binade: 2.0 = 0.1000.000
  // The smallest normal 2^-6 = 0.0001.000, the subnormals m x 2^-9 below it.
  CHECK(dec(e4m3, 0x08) == 0.015625f);
  CHECK(enc(e4m3, 0.0155f) == 0x08);  // 7.94 steps of 2^-9: rounds to the smallest normal
  CHECK(dec(e4m3, 0x01) == std::ldexp(1.0f, -9));
  CHECK(dec(e4m3, 0x07) == std::ldexp(7.0f, -9));
  CHECK(enc(e4m3, std::ldexp(1.0f, -9)) == 0x01);
  CHECK(enc(e4m3, std::ldexp(1.0f, -10)) == 0x00);  // half the smallest subnormal: a tie, to even (0)
  CHECK(enc(e4m3, std::ldexp(3.0f, -10)) == 0x02);  // 1.5 steps: to even (2)
  CHECK(enc(e4m3, -0.0f) == 0x80);
  // Every code that is a number reads back to itself.
  for (std::uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    INFO(c);
    CHECK(enc(e4m3, dec(e4m3, c)) == c);
  }
}

TEST_CASE("kv_format fp8_e5m2: encode and decode by hand", "[kv_format][fp8]") {
  const kv_format e5m2 = kv_format::named("fp8_e5m2");
  // Sign, 5 exponent bits (bias 15), 2 mantissa bits. The largest normal S.11110.11 = 1.75 x 2^15.
  CHECK(enc(e5m2, 57344.0f) == 0x7b);
  CHECK(dec(e5m2, 0x7b) == 57344.0f);
  // Round to nearest even, not saturating: below 61440 (halfway to 2^16) to 57344, from it infinity.
  CHECK(enc(e5m2, 61439.0f) == 0x7b);
  CHECK(enc(e5m2, 61440.0f) == 0x7c);
  CHECK(enc(e5m2, 65504.0f) == 0x7c);
  CHECK(enc(e5m2, -std::numeric_limits<float>::infinity()) == 0xfc);
  CHECK(std::isinf(dec(e5m2, 0x7c)));
  CHECK(dec(e5m2, 0xfc) < 0);
  // NaN: S.11111.{01, 10, 11}.
  for (std::uint32_t c : {0x7du, 0x7eu, 0x7fu, 0xffu}) CHECK(std::isnan(dec(e5m2, c)));
  CHECK(std::isnan(dec(e5m2, enc(e5m2, std::numeric_limits<float>::quiet_NaN()))));
  // Ties to even: 1.125 between 1.0 (00) and 1.25 (01) -> 1.0; 1.375 between 1.25 and 1.5 -> 1.5.
  CHECK(enc(e5m2, 1.0f) == 0x3c);
  CHECK(enc(e5m2, 1.125f) == 0x3c);
  CHECK(enc(e5m2, 1.375f) == 0x3e);
  // The smallest normal 2^-14 = 0.00001.00, the subnormals m x 2^-16.
  CHECK(dec(e5m2, 0x04) == std::ldexp(1.0f, -14));
  CHECK(dec(e5m2, 0x01) == std::ldexp(1.0f, -16));
  CHECK(dec(e5m2, 0x03) == std::ldexp(3.0f, -16));
  CHECK(enc(e5m2, std::ldexp(1.0f, -17)) == 0x00);  // a tie, to even
  CHECK(enc(e5m2, std::ldexp(3.0f, -17)) == 0x02);
  // E5M2 is binary16's top byte: every binary16 value whose low byte is 0 encodes to that byte
  // (NaN payloads aside), and every code decodes to it.
  for (std::uint32_t c = 0; c < 256; ++c) {
    INFO(c);
    const float h = fn::from_half(std::uint16_t(c << 8));
    if (std::isnan(h)) {
      CHECK(std::isnan(dec(e5m2, c)));
      continue;
    }
    CHECK(enc(e5m2, h) == c);
    CHECK(dec(e5m2, c) == h);
  }
}

TEST_CASE("kv_format fp8: a per-tensor scale, one byte per element, its command and its fields", "[kv_format][fp8]") {
  const kv_format e4m3 = kv_format::named("fp8_e4m3"), e5m2 = kv_format::named("fp8_e5m2");
  // x is stored as x / scale: with scale 2 the largest E4M3 value is 896.
  auto cfg = config::from_string("policy: {kv_format: fp8_e4m3, kv_scale: 2}\n");
  const kv_format s2 = kv_format::from_config(cfg.root().child("policy"), 128);
  const kv_format::group_params p = s2.params(0.0f, 0.0f);
  CHECK(p.scale == 2.0f);
  CHECK(s2.quantise(896.0f, p) == 0x7e);
  CHECK(s2.dequantise(0x7e, p) == 896.0f);
  CHECK(s2.quantise(1e5f, p) == 0x7e);
  // A Llama head of 128 channels: 128 B, no scales stored with the rows (half binary16's 256 B).
  for (const kv_format* f : {&e4m3, &e5m2}) {
    CHECK(f->bits() == 8);
    CHECK(f->group() == 0);
    CHECK(f->scale_bytes(128) == 0);
    CHECK(f->row_bytes(128) == 128);
    CHECK(f->quantises());
    const kv_format back = kv_format::from_command(f->command_bits() | flag_b_16bit);
    CHECK(back.name() == f->name());
    CHECK(back.row_bytes(128) == 128);
  }
  CHECK(e4m3.command_bits() != e5m2.command_bits());
  // SHIELD's banks: sign+exponent 7-3 | mantissa 2-0 (E4M3), 7-2 | 1-0 (E5M2); a 4096-byte region
  // of codes is 5/8 and 3/8 of it (6/8 and 2/8).
  auto pol = config::from_string("policy: {}\n");
  for (const auto& [f, se] : {std::pair<const kv_format*, unsigned>{&e4m3, 5}, {&e5m2, 6}}) {
    auto shield = refresh_policies().create("shield", pol.root().child("policy"));
    CHECK(shield->set_kv_format(*f).empty());
    const field_map& m = shield->kv_fields();
    CHECK(m.width() == 8);
    CHECK(m.text() == f->name());
    REQUIRE(m.size() == 2);
    CHECK(m.fields()[0].bits() == se);
    CHECK(m.begin(4096, 1) == 4096 * se / 8);
    CHECK(shield->map_bit(8 - se, 8) == 8 - se);  // the exponent's lowest bit
    CHECK(shield->bit_interval_s(false, 8 - se) == Approx(45e-6));
    CHECK(shield->bit_interval_s(false, 7 - se) == Approx(1.2e-3));  // the mantissa's highest
  }
  // An integer code has no such fields.
  auto shield = refresh_policies().create("shield", pol.root().child("policy"));
  CHECK_THAT(shield->set_kv_format(kv_format::named("int4")), Catch::Contains("no sign, exponent or mantissa"));
}

namespace {

// The specification's rounding by arithmetic (round a / step to nearest, ties to even, at the
// step of a's binade), independent of the format's search over midpoints: the oracle below.
std::uint32_t fp8_by_arithmetic(float x, float scale, unsigned exp, unsigned man) {
  const bool e4m3 = exp == 4;
  const int bias = (1 << (exp - 1)) - 1;
  const int top = e4m3 ? (1 << exp) - 1 : (1 << exp) - 2;
  const unsigned man_top = e4m3 ? (1u << man) - 2 : (1u << man) - 1;
  const float max = std::ldexp(1.0f + float(man_top) / float(1u << man), top - bias);
  const std::uint32_t max_code = (unsigned(top) << man) | man_top, beyond = e4m3 ? max_code : 0x7cu;
  const std::uint32_t sign = std::signbit(x) ? 0x80u : 0u;
  if (std::isnan(x)) return sign | (e4m3 ? 0x7fu : 0x7eu);
  const float a = std::fabs(x) / scale;
  if (std::isinf(a)) return sign | beyond;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  const int emin = 1 - bias, eu = std::max(e - 1, emin);
  const float step = std::ldexp(1.0f, eu - int(man));
  const float n = std::nearbyint(a / step);
  if (n * step > max) return sign | beyond;
  if (e - 1 < emin) return sign | std::uint32_t(n);
  std::uint32_t biased = std::uint32_t(eu + bias), m = std::uint32_t(n);
  if (m == (2u << man)) {
    ++biased;
    m >>= 1;
  }
  return sign | (biased << man) | (m - (1u << man));
}

}  // namespace

TEST_CASE("kv_format fp8: encode equals the specification's arithmetic on every binary16 value, every midpoint and "
          "random floats",
          "[kv_format][fp8]") {
  for (const auto& [name, exp, man] : {std::tuple<const char*, unsigned, unsigned>{"fp8_e4m3", 4, 3}, {"fp8_e5m2", 5, 2}}) {
    const kv_format f = kv_format::named(name);
    INFO(name);
    for (const float scale : {1.0f, 2.0f, 0.5f, 3.0f, 0.013f}) {
      const kv_format::group_params p{scale, 0.0f};
      INFO("scale " << scale);
      std::uint64_t wrong = 0;
      for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const float x = fn::from_half(std::uint16_t(h));
        wrong += f.quantise(x, p) != fp8_by_arithmetic(x, scale, exp, man);
      }
      // Each code's value, the midpoints between neighbours (ties) and the floats either side.
      for (std::uint32_t c = 0; c < 0x7f; ++c) {
        const float v = f.dequantise(c, unit), w = f.dequantise(c + 1, unit);
        if (!std::isfinite(v) || !std::isfinite(w)) continue;
        for (const float m : {v, (v + w) / 2})
          for (const float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e30f)})
            for (const float s : {x * scale, -x * scale})
              wrong += f.quantise(s, p) != fp8_by_arithmetic(s, scale, exp, man);
      }
      std::uint32_t r = 12345;
      for (int i = 0; i < 200000; ++i) {
        r = r * 1664525u + 1013904223u;
        float x;
        std::memcpy(&x, &r, 4);
        wrong += f.quantise(x, p) != fp8_by_arithmetic(x, scale, exp, man);
      }
      CHECK(wrong == 0);
      // Decoding at this scale and back at scale 1 (the table follows the scale).
      const std::uint32_t one = f.quantise(1.0f, unit);
      CHECK(f.dequantise(one, p) == fn::from_half(fn::to_half(scale)));
      CHECK(f.dequantise(one, unit) == 1.0f);
    }
  }
}
