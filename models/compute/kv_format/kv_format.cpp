#include "models/compute/kv_format/kv_format.h"

#include "models/compute/command.h"
#include "models/compute/functional/half.h"
#include "platform/config/config.h"

#include <array>
#include <map>
#include <memory>
#include <stdexcept>

namespace kelle {

kv_format_registry& kv_formats() {
  static kv_format_registry r("kv_format", "number formats of the KV cache (policy.kv_format)");
  return r;
}

std::uint32_t kv_number_format::encode(float x, const scale&) const { return fn::to_half(x); }
float kv_number_format::decode(std::uint32_t code, const scale&) const {
  return fn::from_half(static_cast<std::uint16_t>(code));
}

namespace {

// One instance of each registered format, by name and by command code. Built at the first
// look-up and again when a name is missing (a plugin registered a format since); commands are
// decoded from the code table, never by name.
struct format_table {
  std::map<std::string, std::unique_ptr<kv_number_format>> by_name;
  std::array<const kv_number_format*, 8> by_code{};
};

format_table& table() {
  static format_table t;
  return t;
}

void refresh_table() {
  format_table& t = table();
  for (const std::string& n : kv_formats().name_list()) {
    if (t.by_name.count(n)) continue;
    std::unique_ptr<kv_number_format> f = kv_formats().create(n);
    const unsigned code = f->command_code();
    if (code >= t.by_code.size())
      throw std::logic_error("kv_format: '" + n + "' has command code " + std::to_string(code) + " (0 to 7)");
    if (code) {
      if (t.by_code[code])
        throw std::logic_error("kv_format: '" + n + "' and '" + t.by_code[code]->name() + "' share command code " +
                               std::to_string(code));
      t.by_code[code] = f.get();
    }
    t.by_name.emplace(n, std::move(f));
  }
}

const kv_number_format* find(const std::string& name) {
  format_table& t = table();
  auto it = t.by_name.find(name);
  if (it == t.by_name.end()) {
    refresh_table();
    it = t.by_name.find(name);
  }
  return it == t.by_name.end() ? nullptr : it->second.get();
}

}  // namespace

std::vector<std::string> kv_format::names() { return kv_formats().name_list(); }

kv_format kv_format::named(const std::string& name) {
  const kv_number_format* f = find(name);
  if (!f) throw std::out_of_range("kv_format: no entry named '" + name + "' (known: " + kv_formats().names() + ")");
  return kv_format(*f, kv_format_params{});
}

kv_format kv_format::from_config(const config_node& policy, unsigned head_dim) {
  const std::string name = policy.get_choice("kv_format", "binary16", names());
  const kv_number_format* f = find(name);
  kv_format_params p;
  // KIVI's group size (its experiments use G = 32); read for every format, so that a study may
  // set it beside a format axis.
  p.group = static_cast<unsigned>(policy.get_uint(
      "kv_group_size", 32, "int8/int4: elements per scale group (KIVI's G), a power of two dividing head_dim", 1,
      1u << 15));
  f->configure(policy, head_dim, p);
  return kv_format(*f, p);
}

std::uint32_t kv_format::command_bits() const {
  const unsigned code = type().command_code();
  if (!code) return 0;
  unsigned lg = 0;
  while ((1u << lg) < group()) ++lg;
  return (std::uint32_t(code) << flag_kv_format_shift) | (lg << flag_kv_group_shift);
}

kv_format kv_format::from_command(std::uint32_t flags) {
  const unsigned code = (flags >> flag_kv_format_shift) & 0x7u;
  if (code && !table().by_code[code]) refresh_table();  // no format looked up by name yet
  const kv_number_format* f = code ? table().by_code[code] : nullptr;
  if (!f) return {};
  kv_format_params p;
  p.group = 1u << ((flags >> flag_kv_group_shift) & 0xfu);
  return kv_format(*f, p);
}

}  // namespace kelle
