// The bit-field map of a refresh policy: the bits of a stored value (16, or a KV format's code)
// grouped into fields, each field in banks of its own with its own refresh interval. Named maps:
//   msb_lsb   bits 15-8 | 7-0             (Kelle's MSB / LSB banks, 2DRP)
//   the name of a 16-bit floating-point KV format (models/compute/kv_format/): its sign+exponent
//   and mantissa, as the format gives them (kv_format::float_fields()):
//     binary16  sign+exponent 15-10 | mantissa 9-0
//     bfloat16  sign+exponent 15-7  | mantissa 6-0   (SHIELD's split)
// or any list of bit ranges from the top bit down ("15-12,11-4,3-0": every bit once, no gaps).
// of_format() gives a narrower format's map over its own code's bits (an 8-bit float's 7-3 | 2-0).
// A region of B bytes holding such values is laid out field by field in bank order (bit slicing):
// field i takes bytes [B x above_i / W, B x (above_i + bits_i) / W), W the map's width and above_i
// the bits of the fields before it; for msb_lsb that is the region's first and second half.
#pragma once

#include "models/compute/kv_format/kv_format.h"
#include "platform/config/config.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

class field_map {
 public:
  struct field {
    std::string name;
    unsigned hi, lo;  // bit range, inclusive, hi >= lo
    unsigned bits() const { return hi - lo + 1; }
  };
  // The widest code a map covers.
  static constexpr unsigned max_width = 16;

  // A named map or a list of ranges of a 16-bit word; throws std::invalid_argument with what was
  // expected.
  static field_map parse(const std::string& text);
  // A format's floating-point fields (sign+exponent, mantissa) over its code's bits, named by the
  // format; throws std::invalid_argument if it has none.
  static field_map of_format(const kv_format& f);
  // Reads `key` of `c` (default `def`); bad text is a configuration error naming the key.
  static field_map from_config(const config_node& c, const std::string& key, const std::string& def);

  const std::vector<field>& fields() const { return m_fields; }
  std::size_t size() const { return m_fields.size(); }
  unsigned field_of(unsigned bit) const { return m_of[bit]; }
  const std::string& text() const { return m_text; }
  // Bits of the code the map covers.
  unsigned width() const { return m_width; }
  // Field i's part of a region of `bytes` bytes: [begin(bytes, i), begin(bytes, i + 1)).
  std::uint64_t begin(std::uint64_t bytes, std::size_t i) const {
    return i >= m_fields.size() ? bytes : bytes * m_above[i] / m_width;
  }

 private:
  static field_map parse_ranges(const std::string& text, const std::string& ranges, const std::vector<std::string>& names,
                                unsigned width, const std::string& expected);
  std::string m_text;
  unsigned m_width = 16;
  std::vector<field> m_fields;
  std::vector<unsigned> m_above;
  std::array<unsigned, max_width> m_of{};
};

}  // namespace kelle
