// A DRAM device's organisation and timings as data: a memspec-like YAML file per device and
// speed bin (scenarios/memspec/*.yaml, the shape of DRAMSys's memspecs) that an instance names
// with `memspec:`. The DRAM models take its values as the defaults of their keys of the same
// names. See docs/models/memory-lpddr4.md ("Memspec files").
#pragma once

#include "platform/config/config.h"

#include <set>
#include <string>

namespace kelle {

class memspec_file {
 public:
  // Reads the instance's `memspec` key (default `default_name`): a file path, or the name of a
  // file in <scenarios>/memspec/ with or without .yaml. Throws a config_error naming the key
  // when the file is missing or is not a map of the sections `architecture` and `timing`.
  memspec_file(const config_node& params, const std::string& default_name);

  // The value of `key` (in either section), required: a missing or non-numeric value is an
  // error naming the file, its line and the key.
  double num(const std::string& key) const;
  std::uint64_t uint(const std::string& key) const;
  // The value of `key` when the file has it, else `fallback` (keys added after memspec files were
  // written, e.g. the MR4 derating thresholds: a user's older file stays valid).
  double num_or(const std::string& key, double fallback) const;
  // Throws a config_error for the first key of the file that no num()/uint() asked for.
  void check_all_used() const;
  const std::string& file() const { return m_file; }

 private:
  YAML::Node find(const std::string& key) const;
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& message) const;

  std::string m_file;
  YAML::Node m_root;
  mutable std::set<std::string> m_used;
};

}  // namespace kelle
