#include "firmware/policies/refresh/field_map.h"

#include <sstream>
#include <stdexcept>

namespace kelle {

field_map field_map::parse(const std::string& text) {
  std::string ranges = text;
  std::vector<std::string> names;
  // The named maps: msb_lsb, and each 16-bit floating-point KV format's own fields.
  std::string formats;
  for (const std::string& n : kv_format::names()) {
    const kv_format f = kv_format::named(n);
    if (f.bits() != max_width || f.float_fields().empty()) continue;
    formats += n + ", ";
    if (n == text) {
      ranges = f.float_fields();
      names = {"sign_exp", "mantissa"};
    }
  }
  if (text == "msb_lsb") {
    ranges = "15-8,7-0";
    names = {"msb", "lsb"};
  }
  const std::string expected =
      "msb_lsb, " + formats + "or bit ranges from bit 15 down to bit 0 such as \"15-8,7-0\"";
  return parse_ranges(text, ranges, names, max_width, expected);
}

field_map field_map::of_format(const kv_format& f) {
  const std::string ranges = f.float_fields();
  if (ranges.empty()) throw std::invalid_argument(f.name() + " has no sign, exponent or mantissa field");
  return parse_ranges(f.name(), ranges, {"sign_exp", "mantissa"}, f.bits(),
                      "the bit ranges of " + f.name() + "'s code from bit " + std::to_string(f.bits() - 1) + " down");
}

field_map field_map::parse_ranges(const std::string& text, const std::string& ranges,
                                  const std::vector<std::string>& names, unsigned width, const std::string& expected) {
  if (width == 0 || width > max_width) throw std::invalid_argument(expected + " (a code of 1 to 16 bits)");
  if (ranges.empty() || ranges.back() == ',') throw std::invalid_argument(expected);
  field_map m;
  m.m_text = text;
  m.m_width = width;
  unsigned next = width;  // the next range must start at bit next - 1
  std::stringstream ss(ranges);
  std::string item;
  while (std::getline(ss, item, ',')) {
    unsigned hi = 0, lo = 0;
    char dash = 0, extra = 0;
    std::stringstream is(item);
    if (!(is >> hi)) throw std::invalid_argument(expected);
    if (is >> dash) {
      if (dash != '-' || !(is >> lo) || (is >> extra)) throw std::invalid_argument(expected);
    } else {
      lo = hi;
    }
    if (hi + 1 != next || lo > hi)
      throw std::invalid_argument(expected + " (got '" + item + "' where a range from bit " + std::to_string(next - 1) +
                                  " down was next)");
    const std::size_t i = m.m_fields.size();
    m.m_fields.push_back({i < names.size() ? names[i] : "bits_" + std::to_string(hi) + "_" + std::to_string(lo), hi, lo});
    next = lo;
  }
  if (next != 0 || m.m_fields.empty()) throw std::invalid_argument(expected);
  unsigned above = 0;
  for (std::size_t i = 0; i < m.m_fields.size(); ++i) {
    m.m_above.push_back(above);
    above += m.m_fields[i].bits();
    for (unsigned b = m.m_fields[i].lo; b <= m.m_fields[i].hi; ++b) m.m_of[b] = static_cast<unsigned>(i);
  }
  return m;
}

field_map field_map::from_config(const config_node& c, const std::string& key, const std::string& def) {
  const std::string text = c.get_string(key, def, "a bit-field map");
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    c.fail(key, std::string("expected ") + e.what());
  }
}

}  // namespace kelle
