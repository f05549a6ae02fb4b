// Scenario configuration: YAML files with includes, command-line overrides, typed and
// range-checked reads, unknown-key detection and the effective configuration.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kelle {

// Any error in the user's input: the message names the file, the key path and what was expected.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An input error that only the run finds (a size the scenario asks for that the firmware's
// allocation meets in the middle of a pass). A SystemC process records it here and stops the
// simulation (stop_run_for_input_error, workload.h): no exception crosses the kernel, whose
// coroutine stacks an exception thrown after the simulation started would unwind across.
// platform::run hands it over; the command line reports it as an input error (exit status 2).
void record_run_input_error(const std::string& text);
// The recorded text, once ("" when none).
std::string take_run_input_error();

class config;

// A view of one map in the configuration tree. Every read marks the key as known, records the
// default it used (so the effective configuration holds every parameter) and checks the value.
class config_node {
 public:
  config_node(config& cfg, std::string path) : m_cfg(&cfg), m_path(std::move(path)) {}

  // Optional parameters: the default is used, and recorded, when the key is absent. A value
  // that is not finite (.nan, .inf) is refused; get_double_or_inf accepts .inf (no limit).
  double get_double_or_inf(const std::string& key, double def, const std::string& expected,
                           double min = -std::numeric_limits<double>::infinity()) const;
  double get_double(const std::string& key, double def, const std::string& expected,
                    double min = -std::numeric_limits<double>::infinity(),
                    double max = std::numeric_limits<double>::infinity()) const;
  std::uint64_t get_uint(const std::string& key, std::uint64_t def, const std::string& expected,
                         std::uint64_t min = 0,
                         std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) const;
  bool get_bool(const std::string& key, bool def, const std::string& expected) const;
  std::string get_string(const std::string& key, const std::string& def,
                         const std::string& expected) const;
  // A file name, resolved as `include` is: relative to the folder of the file that set the key
  // (the working folder for a -p override); absolute names unchanged. Empty: the default.
  std::string get_path(const std::string& key, const std::string& def, const std::string& expected) const;
  std::string require_path(const std::string& key, const std::string& expected) const;
  // Where the value at `key` came from ("file:line", "command line -p k=v" or "default").
  std::string origin(const std::string& key) const;
  // One of a fixed set of names.
  std::string get_choice(const std::string& key, const std::string& def,
                         const std::vector<std::string>& allowed) const;

  // Required parameters: a missing key is an error.
  double require_double(const std::string& key, const std::string& expected,
                        double min = -std::numeric_limits<double>::infinity(),
                        double max = std::numeric_limits<double>::infinity()) const;
  std::uint64_t require_uint(const std::string& key, const std::string& expected,
                             std::uint64_t min = 0,
                             std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) const;
  std::string require_string(const std::string& key, const std::string& expected) const;
  std::string require_choice(const std::string& key, const std::vector<std::string>& allowed) const;

  bool has(const std::string& key) const;
  // Whether the value at `key` is a map (a nested section) rather than a value.
  bool is_map(const std::string& key) const;
  // A nested map; `child` requires it, `child_or_empty` allows it to be absent.
  config_node child(const std::string& key) const;
  config_node child_or_empty(const std::string& key) const;
  // The keys of this map in file order (for maps of named instances such as memories).
  std::vector<std::string> keys() const;

  const std::string& path() const { return m_path; }
  std::string key_path(const std::string& key) const;
  // Throws a config_error for `key` that names its file and line.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // A required `key` that is absent: "KEY: missing; expected EXPECTED", unless a key of this map
  // that nothing has read is one edit from a valid one (a typo, a transposition) or the same with
  // look-alike Unicode letters: that key is named first, with the valid key ("did you mean ...").
  [[noreturn]] void missing(const std::string& key, const std::string& expected) const;
  // Keys this map may hold that are read later or elsewhere (the top level's, say): the names a
  // near miss is compared with, besides the keys read so far. Marks nothing as read.
  void declare(const std::vector<std::string>& keys) const;
  // The text fail() would throw.
  std::string error_text(const std::string& key, const std::string& message) const;

 private:
  YAML::Node lookup(const std::string& key) const;
  void mark(const std::string& key) const;
  void set_default(const std::string& key, const std::string& text) const;
  double read_double(const std::string& key, double def, const std::string& expected, double min,
                     double max, bool allow_inf) const;
  template <class T>
  T convert(const std::string& key, const YAML::Node& n, const std::string& expected) const;

  config* m_cfg;
  std::string m_path;
};

// Limits on what a scenario may be (checked before memory is spent on it; docs/scenario-format.md).
struct config_limits {
  static constexpr std::uint64_t file_bytes = 4u << 20;    // one scenario, system or included file
  static constexpr std::uint64_t nodes = 200000;           // YAML nodes, aliases expanded
  static constexpr unsigned include_depth = 32;            // nested includes
  static constexpr unsigned nesting = 64;                  // levels of maps and lists in a tree
};

// A scenario: the merged tree of a file and its includes, with -p overrides applied.
class config {
 public:
  // Loads `file` and what it includes, merges each overlay file over it (its keys replace the
  // scenario's, the system's and the technology's; an overlay names no system), then applies
  // each "key.path=value" override.
  static config load(const std::string& file, const std::vector<std::string>& overrides = {},
                     const std::vector<std::string>& overlays = {});
  // Parses YAML text as if it were a file named `name` (used by tests and embedded defaults).
  static config from_string(const std::string& yaml, const std::string& name = "<string>",
                            const std::vector<std::string>& overrides = {});

  config_node root() { return config_node(*this, ""); }
  // This scenario with `overrides` applied too, without reading its files again: what
  // load(file, the overrides this one was loaded with + overrides) gives, for overrides that name
  // no system (`system=NAME` selects files: load() again). A copy of the merged tree and of where
  // each value came from; for evaluating many designs of one scenario (kelle-vp estimate).
  config with_overrides(const std::vector<std::string>& overrides) const;

  // Throws a config_error naming the first key that no model read (a typo or a stray key).
  void check_all_used() const;
  // For a reader that reads part of the scenario (the first-order estimate, which builds no
  // interconnect and no workload module), after it has read this configuration: throws a
  // config_error when an override key path is in neither `base` (the scenario before the
  // overrides) nor what was read here, and a section on its path is a near miss of a valid key
  // there (a typo the partial reader would otherwise ignore). `where` names the overrides'
  // source. A new key with no near valid key passes: it may be one the run reads.
  void check_override_paths(const config& base, const std::vector<std::string>& paths,
                            const std::string& where) const;
  // Accepts the subtree at `path` without validation when nothing in it was read (a section of
  // the shared technology description that this system has no instance of).
  void accept_unread(const std::string& path);
  // Marks everything under `path` as read, whatever was read below it (a disabled section).
  void accept_subtree(const std::string& path);
  // The effective configuration: the merged tree with every default that was used.
  const YAML::Node& effective() const { return m_root; }
  // The file the scenario was loaded from (empty for from_string).
  const std::string& main_file() const { return m_main_file; }
  // "file:line" of the value at a dotted key path, or "" when not known.
  std::string where(const std::string& path) const;
  // The folder relative names at `path` resolve against: the folder of the file that set it, or
  // the working folder for a -p override (or a key no file set).
  std::string base_dir(const std::string& path) const;
  // The shared libraries the scenario's files name (`plugins:`), as (absolute path, where named),
  // in load order. The config loader only reads them: whoever builds the system loads them.
  const std::vector<std::pair<std::string, std::string>>& plugins() const { return m_plugins; }
  // The overlay files merged over the scenario (load()), in order.
  const std::vector<std::string>& overlays() const { return m_overlays; }

 private:
  friend class config_node;
  config() = default;
  void apply_override(const std::string& assignment);
  // Records the `plugins:` of the scenario's files ((absolute path, where named)); the caller
  // that builds the system loads them (plugins()).
  void use_plugins(const std::vector<std::pair<std::string, std::string>>& plugins);

  YAML::Node m_root;
  std::string m_main_file;
  std::vector<std::pair<std::string, std::string>> m_plugins;
  std::vector<std::string> m_overlays;
  std::map<std::string, std::string> m_origin;             // path -> "file:line"
  std::set<std::string> m_used;                            // paths read by a model
  std::map<std::string, std::set<std::string>> m_asked;    // map path -> keys asked there
  std::map<std::string, std::set<std::string>> m_declared; // map path -> keys declared there
};

// The folder that holds the built-in scenarios, systems, tasks and the technology file.
std::string scenarios_dir();

// Formats a double the way it is written into the effective configuration.
std::string format_number(double v);

}  // namespace kelle
