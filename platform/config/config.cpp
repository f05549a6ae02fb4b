#include "platform/config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace fs = std::filesystem;

namespace kelle {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

// Read-only navigation: never creates nodes (yaml-cpp's non-const operator[] would).
YAML::Node find(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = root;
  if (path.empty()) return cur;
  for (const auto& part : split_path(path)) {
    if (!cur.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node& c = cur;
    YAML::Node next = c[part];
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(next);
  }
  return cur;
}

// The map `cur[key]`, created when absent.
YAML::Node child_map(YAML::Node& cur, const std::string& key) {
  const YAML::Node existing = find(cur, key);
  if (existing.IsDefined()) return existing;
  cur[key] = YAML::Node(YAML::NodeType::Map);
  return find(cur, key);
}

const char* kind_of(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  if (n.IsNull()) return "no value";
  return "a value";
}

// Overlays `over` onto `base`: maps merge key by key, anything else replaces.
YAML::Node merge(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return YAML::Clone(over);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : over) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& ob = out;
    YAML::Node existing = ob[key];
    if (existing.IsDefined())
      out[key] = merge(existing, kv.second);
    else
      out[key] = YAML::Clone(kv.second);
  }
  return out;
}

void record_origins(const YAML::Node& n, const std::string& path, const std::string& file,
                    std::map<std::string, std::string>& origin) {
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    const std::string p = join(path, kv.first.Scalar());
    origin[p] = file + ":" + std::to_string(kv.first.Mark().line + 1);
    record_origins(kv.second, p, file, origin);
  }
}

// What is wrong with the size of a YAML tree, aliases expanded (what a merge or results.json
// would build): "" if nothing. The count stops as soon as the budget is spent, so an alias bomb
// costs at most `budget` steps; the depth stops an alias inside its own anchor (&x {d: *x}), a
// tree without end that yaml-cpp builds as a cycle.
std::string oversize(const YAML::Node& n, std::uint64_t& budget, unsigned depth = 0) {
  if (budget == 0)
    return "more than " + std::to_string(config_limits::nodes) + " YAML nodes (aliases expanded)";
  if (depth > config_limits::nesting)
    return "nested deeper than " + std::to_string(config_limits::nesting) +
           " levels (an alias inside its own anchor?)";
  --budget;
  if (n.IsMap()) {
    for (const auto& kv : n)
      if (std::string why = oversize(kv.second, budget, depth + 1); !why.empty()) return why;
  } else if (n.IsSequence()) {
    for (const auto& e : n)
      if (std::string why = oversize(e, budget, depth + 1); !why.empty()) return why;
  }
  return {};
}

// How many YAML documents a text holds: 0, 1 or 2 (two or more), and where the second starts.
// yaml-cpp 0.7 never returns from YAML::LoadAll on a token that no rule of a document consumes
// (a ',' at a document's start or after a top-level scalar, say): its parser returns an empty
// document at that token again and again, allocating until memory runs out (fixed upstream after
// 0.8.0). The documents are counted first, at most three, with a handler that builds nothing; a
// document that starts where the one before it did is that token: a YAML::ParserException there.
struct document_count {
  int documents = 0;
  YAML::Mark second;
};

class document_starts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& m) override { starts.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

document_count count_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  document_starts h;
  while (h.starts.size() < 3 && parser.HandleNextDocument(h)) {
    const std::size_t n = h.starts.size();
    if (n >= 2 && h.starts[n - 1].pos == h.starts[n - 2].pos) {
      const YAML::Mark& m = h.starts[n - 1];
      const unsigned char c = m.pos >= 0 && static_cast<std::size_t>(m.pos) < text.size() ? text[m.pos] : 0;
      char shown[8];
      std::snprintf(shown, sizeof shown, c >= 0x20 && c < 0x7f ? "'%c'" : "byte 0x%02x", c);
      throw YAML::ParserException(m, std::string("unexpected ") + shown + " (no YAML node starts with it here)");
    }
  }
  document_count r;
  r.documents = static_cast<int>(std::min<std::size_t>(h.starts.size(), 2));
  if (h.starts.size() >= 2) r.second = h.starts[1];
  return r;
}

std::string line_of(const std::string& name, const YAML::Mark& m) {
  return name + ":" + std::to_string(m.line + 1);
}

// What yaml-cpp accepts without a word and a user would not mean: a key given twice (the first
// would win), a key that is not a plain name (a map or list as a key), a key with a dot (it
// reads as a path on the command line, never in a file).
// `lines`: name "file:line" (a file); else only `name` (a -p value, one line of the command line).
void check_keys(const YAML::Node& n, const std::string& path, const std::string& name, bool lines = true) {
  auto at = [&](const YAML::Mark& m) { return lines ? line_of(name, m) : name; };
  if (n.IsSequence()) {
    std::size_t i = 0;
    for (const auto& e : n) check_keys(e, path + "[" + std::to_string(i++) + "]", name, lines);
    return;
  }
  if (!n.IsMap()) return;
  std::map<std::string, int> seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar())
      throw config_error(at(kv.first.Mark()) + ": " + (path.empty() ? "top level" : path) +
                         ": expected a plain key name, got " + (kv.first.IsMap() ? "a map" : kv.first.IsSequence() ? "a list" : "no value"));
    const std::string& k = kv.first.Scalar();
    const std::string p = path.empty() ? k : path + "." + k;
    if (k.empty()) throw config_error(at(kv.first.Mark()) + ": " + p + ": empty key");
    if (k.find('.') != std::string::npos)
      throw config_error(at(kv.first.Mark()) + ": key '" + k +
                         "' has a dot; write the path as nested maps (a dotted path is for -p on the command line)");
    auto [it, fresh] = seen.emplace(k, kv.first.Mark().line + 1);
    if (!fresh)
      throw config_error(at(kv.first.Mark()) + ": " + p + ": duplicate key" +
                         (lines ? " (first given at line " + std::to_string(it->second) + ")" : std::string()));
    check_keys(kv.second, p, name, lines);
  }
}

std::string list_systems() {
  std::string out;
  std::error_code ec;
  const fs::path dir = fs::path(scenarios_dir()) / "systems";
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") names.insert(e.path().stem().string());
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

// The text of a scenario file: a regular file of at most config_limits::file_bytes (a folder,
// a device such as /dev/zero or a huge file is refused before it is read).
std::string read_scenario_file(const fs::path& file) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st)) throw config_error(file.string() + ": cannot open the file (no such file)");
  if (fs::is_directory(st)) throw config_error(file.string() + ": is a folder, expected a YAML file");
  if (!fs::is_regular_file(st)) throw config_error(file.string() + ": not a regular file, expected a YAML file");
  const std::uint64_t limit = config_limits::file_bytes;
  const std::uint64_t size = fs::file_size(file, ec);
  if (!ec && size > limit)
    throw config_error(file.string() + ": " + std::to_string(size) + " bytes; a scenario file may have at most " +
                       std::to_string(limit));
  std::FILE* f = std::fopen(file.string().c_str(), "rb");
  if (!f) throw config_error(file.string() + ": cannot open the file");
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() <= limit) text.append(buf, n);
  std::fclose(f);
  if (text.size() > limit)
    throw config_error(file.string() + ": more than " + std::to_string(limit) + " bytes; a scenario file may have at most that");
  return text;
}

struct loader {
  std::map<std::string, std::string>& origin;
  std::vector<std::string> stack;  // files being loaded, to catch include cycles
  // `plugins:` of every file loaded, in load order: (absolute path, "file:line: plugins[i]").
  std::vector<std::pair<std::string, std::string>> plugins = {};

  // `plugins: FILE` or `plugins: [A, B]`: shared libraries, relative to the file that names them.
  void take_plugins(YAML::Node& node, const fs::path& file, const std::string& name) {
    const YAML::Node list = node["plugins"];
    const std::string where = name + ":" + std::to_string(list.Mark().line + 1) + ": plugins";
    std::vector<YAML::Node> items;
    if (list.IsScalar()) {
      items.push_back(list);
    } else if (list.IsSequence()) {
      for (const auto& i : list) items.push_back(i);
    } else if (!list.IsNull()) {
      throw config_error(where + ": expected a plugin file (.so) or a list of them, got " + kind_of(list));
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::string at = where + (list.IsSequence() ? "[" + std::to_string(i) + "]" : "");
      if (!items[i].IsScalar() || items[i].Scalar().empty())
        throw config_error(at + ": expected a plugin file (.so), got " + kind_of(items[i]));
      const fs::path p = fs::path(items[i].Scalar()).is_absolute()
                             ? fs::path(items[i].Scalar())
                             : fs::absolute(file).parent_path() / items[i].Scalar();
      plugins.emplace_back(p.lexically_normal().string(), at);
    }
    node.remove("plugins");
  }

  fs::path resolve_include(const std::string& name, const fs::path& from, const std::string& where) {
    if (name.empty()) throw config_error(where + ": include: expected a file name, got an empty one");
    std::error_code ec;
    const fs::path rel = from.parent_path() / name;
    const fs::path builtin = fs::path(scenarios_dir()) / name;
    for (const fs::path& p : {rel, builtin}) {
      if (!fs::exists(p, ec)) continue;
      if (fs::is_directory(p, ec))
        throw config_error(where + ": include '" + name + "': " + p.string() + " is a folder, expected a YAML file");
      return p;
    }
    throw config_error(where + ": include '" + name + "': file not found (looked in " +
                       rel.parent_path().string() + " and " + scenarios_dir() + ")");
  }

  // `system: NAME` names a built-in system (scenarios/systems/NAME.yaml); `system: FILE.yaml`
  // names a system file relative to the scenario.
  fs::path resolve_system(const std::string& name, const fs::path& from, const std::string& where) {
    const bool looks_like_file = name.find('/') != std::string::npos ||
                                 fs::path(name).extension() == ".yaml" ||
                                 fs::path(name).extension() == ".yml";
    std::error_code ec;  // a name the file system refuses (too long, say) is a name not found
    if (looks_like_file) {
      const fs::path rel = from.parent_path() / name;
      if (fs::exists(rel, ec)) return rel;
      throw config_error(where + ": system: file '" + name + "' not found (looked in " +
                         rel.parent_path().string() + ")");
    }
    const fs::path builtin = fs::path(scenarios_dir()) / "systems" / (name + ".yaml");
    if (fs::exists(builtin, ec)) return builtin;
    throw config_error(where + ": system: '" + name +
                       "' is not a built-in system (expected one of: " + list_systems() +
                       ") nor a .yaml file");
  }

  YAML::Node parse(const std::string& text, const std::string& name) {
    YAML::Node n;
    try {
      const document_count docs = count_documents(text);
      if (docs.documents > 1)
        throw config_error(line_of(name, docs.second) +
                           ": a second YAML document ('---'); a scenario file holds one (use include: for more files)");
      if (docs.documents == 1) n = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      throw config_error(line_of(name, e.mark) + ": YAML syntax error: " + e.msg);
    } catch (const YAML::Exception& e) {  // e.g. an alias to an anchor not defined
      throw config_error(line_of(name, e.mark) + ": YAML error: " + e.msg);
    }
    if (!n.IsDefined() || n.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!n.IsMap())
      throw config_error(name + ": expected a map of keys at the top level, got " + kind_of(n));
    std::uint64_t budget = config_limits::nodes;
    if (const std::string why = oversize(n, budget); !why.empty())
      throw config_error(name + ": " + why + "; a scenario is far smaller");
    check_keys(n, "", name);
    return n;
  }

  YAML::Node load_text(const std::string& text, const fs::path& file, const std::string& name,
                       const std::optional<std::string>& system_override) {
    YAML::Node node = parse(text, name);
    std::vector<fs::path> includes;
    if (node["include"]) {
      const YAML::Node inc = node["include"];
      const std::string where = name + ":" + std::to_string(inc.Mark().line + 1);
      if (inc.IsScalar()) {
        includes.push_back(resolve_include(inc.Scalar(), file, where));
      } else if (inc.IsSequence()) {
        for (const auto& i : inc) {
          if (!i.IsScalar())
            throw config_error(where + ": include: expected a file name, got " + kind_of(i));
          includes.push_back(resolve_include(i.Scalar(), file, where));
        }
      } else {
        throw config_error(where + ": include: expected a file name or a list of file names");
      }
      node.remove("include");
    }
    if (node["plugins"]) take_plugins(node, file, name);
    if (system_override || (node["system"] && node["system"].IsScalar())) {
      const std::string where =
          system_override ? std::string("command line -p system=") + *system_override
                          : name + ":" + std::to_string(node["system"].Mark().line + 1);
      const std::string sys = system_override ? *system_override : node["system"].Scalar();
      includes.push_back(resolve_system(sys, file, where));
      if (node["system"] && node["system"].IsScalar()) node.remove("system");
    }
    YAML::Node base(YAML::NodeType::Map);
    for (const auto& inc : includes) base = merge(base, load_file(inc));
    record_origins(node, "", name, origin);
    return merge(base, node);
  }

  YAML::Node load_file(const fs::path& file,
                       const std::optional<std::string>& system_override = std::nullopt) {
    if (file.empty()) throw config_error("scenario file: expected a file name, got an empty one");
    std::error_code ec;
    const std::string canon = fs::weakly_canonical(file, ec).string();
    for (const auto& s : stack)
      if (s == canon) throw config_error(file.string() + ": include cycle (the file includes itself)");
    if (stack.size() >= config_limits::include_depth)
      throw config_error(file.string() + ": includes nested more than " +
                         std::to_string(config_limits::include_depth) + " deep");
    const std::string text = read_scenario_file(file);
    stack.push_back(canon);
    YAML::Node out = load_text(text, file, file.string(), system_override);
    stack.pop_back();
    return out;
  }
};

std::optional<std::string> take_system_override(std::vector<std::string>& overrides) {
  std::optional<std::string> sys;
  for (auto it = overrides.begin(); it != overrides.end();) {
    if (it->rfind("system=", 0) == 0) {
      sys = it->substr(7);
      it = overrides.erase(it);
    } else {
      ++it;
    }
  }
  return sys;
}

}  // namespace

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

std::string scenarios_dir() {
  if (const char* env = std::getenv("KELLE_VP_SCENARIOS")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "kelle-vp" / "scenarios";
    if (fs::is_directory(installed, ec)) return installed.string();
  }
#ifdef KELLE_VP_SOURCE_SCENARIOS
  return KELLE_VP_SOURCE_SCENARIOS;
#else
  return "scenarios";
#endif
}

config config::load(const std::string& file, const std::vector<std::string>& overrides) {
  config c;
  c.m_main_file = file;
  std::vector<std::string> rest = overrides;
  const auto sys = take_system_override(rest);
  loader l{c.m_origin, {}};
  c.m_root = l.load_file(file, sys);
  if (c.m_root.size() == 0 && !sys)
    throw config_error(file + ": the scenario is empty (expected at least system: and workload:, "
                       "docs/scenario-format.md)");
  c.use_plugins(l.plugins);
  for (const auto& o : rest) c.apply_override(o);
  return c;
}

config config::from_string(const std::string& yaml, const std::string& name,
                           const std::vector<std::string>& overrides) {
  config c;
  std::vector<std::string> rest = overrides;
  const auto sys = take_system_override(rest);
  loader l{c.m_origin, {}};
  c.m_root = l.load_text(yaml, fs::current_path() / name, name, sys);
  c.use_plugins(l.plugins);
  for (const auto& o : rest) c.apply_override(o);
  return c;
}

void config::use_plugins(const std::vector<std::pair<std::string, std::string>>& plugins) {
  if (plugins.empty()) return;
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& [path, where] : plugins) list.push_back(path);
  m_plugins = plugins;
  m_root["plugins"] = list;  // the effective configuration lists them with absolute paths
  m_used.insert("plugins");
}

void config::apply_override(const std::string& assignment) {
  const auto eq = assignment.find('=');
  const std::string where = "command line -p " + assignment;
  if (eq == std::string::npos || eq == 0)
    throw config_error(where + ": expected key.path=value");
  const std::string path = assignment.substr(0, eq);
  if (path == "plugins" || path.rfind("plugins.", 0) == 0)
    throw config_error(where + ": plugins are loaded before the scenario is read: use --plugin FILE");
  const std::string text = assignment.substr(eq + 1);
  if (text.empty()) throw config_error(where + ": the value is empty");
  YAML::Node value;
  try {
    count_documents(text);
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw config_error(where + ": the value is not valid YAML: " + e.msg);
  }
  std::uint64_t budget = config_limits::nodes;
  if (const std::string why = oversize(value, budget); !why.empty())
    throw config_error(where + ": the value: " + why);
  check_keys(value, path, where, false);
  const auto parts = split_path(path);
  YAML::Node cur = m_root;
  std::string so_far;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].empty()) throw config_error(where + ": empty key in '" + path + "'");
    so_far = join(so_far, parts[i]);
    const YAML::Node existing = find(cur, parts[i]);
    if (existing.IsDefined() && !existing.IsMap())
      throw config_error(where + ": cannot set '" + path + "': '" + so_far + "' is " +
                         kind_of(existing) + ", not a map");
    if (!existing.IsDefined()) m_origin[so_far] = where;  // a section the override creates
    cur.reset(child_map(cur, parts[i]));
  }
  if (parts.back().empty()) throw config_error(where + ": empty key in '" + path + "'");
  cur[parts.back()] = value;
  // The value and everything below it now come from the command line (errors blame it, and
  // relative file names in it resolve against the working folder).
  const std::string prefix = path + ".";
  for (auto it = m_origin.lower_bound(prefix); it != m_origin.end() && it->first.compare(0, prefix.size(), prefix) == 0;)
    it = m_origin.erase(it);
  m_origin[path] = where;
  std::map<std::string, std::string> below;
  record_origins(value, path, where, below);
  for (const auto& kv : below) m_origin[kv.first] = where;
}

std::string config::base_dir(const std::string& path) const {
  // the nearest enclosing key that has an origin
  std::string p = path;
  std::string o;
  for (;;) {
    o = where(p);
    if (!o.empty() || p.empty()) break;
    const auto dot = p.rfind('.');
    p = dot == std::string::npos ? std::string() : p.substr(0, dot);
  }
  if (o.empty() || o.rfind("command line", 0) == 0) return fs::current_path().string();
  const auto colon = o.rfind(':');
  const std::string file = colon == std::string::npos ? o : o.substr(0, colon);
  return fs::absolute(fs::path(file)).parent_path().string();
}

std::string config::where(const std::string& path) const {
  auto it = m_origin.find(path);
  return it == m_origin.end() ? std::string() : it->second;
}

void config::accept_unread(const std::string& path) {
  const std::string prefix = path + ".";
  for (const auto& u : m_used)
    if (u.compare(0, prefix.size(), prefix) == 0) return;  // something below was read: validate
  accept_subtree(path);
}

void config::accept_subtree(const std::string& path) {
  struct marker {
    std::set<std::string>& used;
    void mark(const YAML::Node& n, const std::string& p) {
      used.insert(p);
      if (n.IsMap())
        for (const auto& kv : n) mark(kv.second, join(p, kv.first.Scalar()));
    }
  };
  marker{m_used}.mark(find(m_root, path), path);
}

void config::check_all_used() const {
  struct walker {
    const config& c;
    void walk(const YAML::Node& n, const std::string& path) {
      if (!n.IsMap()) return;
      for (const auto& kv : n) {
        const std::string p = join(path, kv.first.Scalar());
        if (!c.m_used.count(p)) {
          std::string known;
          auto it = c.m_asked.find(path);
          if (it != c.m_asked.end())
            for (const auto& k : it->second) known += (known.empty() ? "" : ", ") + k;
          std::string where = c.where(p);
          if (where.empty()) where = c.m_main_file.empty() ? "<scenario>" : c.m_main_file;
          throw config_error(where + ": unknown key '" + p + "'" +
                             (known.empty() ? std::string(" (nothing reads keys here)")
                                            : " (expected one of: " + known + ")"));
        }
        walk(kv.second, p);
      }
    }
  };
  walker{*this}.walk(m_root, "");
}

// ---- config_node ----

std::string config_node::key_path(const std::string& key) const {
  return key.empty() ? m_path : join(m_path, key);
}

YAML::Node config_node::lookup(const std::string& key) const { return find(m_cfg->m_root, key_path(key)); }

void config_node::mark(const std::string& key) const {
  m_cfg->m_used.insert(key_path(key));
  m_cfg->m_asked[m_path].insert(key);
}

std::string config_node::error_text(const std::string& key, const std::string& message) const {
  const std::string p = key_path(key);
  std::string where = m_cfg->where(p);
  if (where.empty()) where = m_cfg->where(m_path);
  if (where.empty()) where = m_cfg->m_main_file.empty() ? "<scenario>" : m_cfg->m_main_file;
  return where + ": " + p + ": " + message;
}

void config_node::fail(const std::string& key, const std::string& message) const {
  throw config_error(error_text(key, message));
}

namespace {
std::string& run_input_error() {
  static std::string text;
  return text;
}
}  // namespace

void record_run_input_error(const std::string& text) {
  if (run_input_error().empty()) run_input_error() = text;
}

std::string take_run_input_error() {
  std::string t;
  t.swap(run_input_error());
  return t;
}

void config_node::set_default(const std::string& key, const std::string& text) const {
  YAML::Node cur = m_cfg->m_root;
  for (const auto& part : split_path(m_path)) {
    if (part.empty()) break;
    cur.reset(child_map(cur, part));
  }
  cur[key] = text;
}

bool config_node::is_map(const std::string& key) const { return lookup(key).IsMap(); }

bool config_node::has(const std::string& key) const {
  const YAML::Node n = lookup(key);
  return n.IsDefined() && !n.IsNull();
}

template <class T>
T config_node::convert(const std::string& key, const YAML::Node& n, const std::string& expected) const {
  if (!n.IsScalar()) fail(key, "expected " + expected + ", got " + kind_of(n));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail(key, "expected " + expected + ", got '" + n.Scalar() + "'");
  }
}

double config_node::get_double(const std::string& key, double def, const std::string& expected,
                               double min, double max) const {
  return read_double(key, def, expected, min, max, false);
}

double config_node::get_double_or_inf(const std::string& key, double def, const std::string& expected,
                                      double min) const {
  return read_double(key, def, expected, min, std::numeric_limits<double>::infinity(), true);
}

double config_node::read_double(const std::string& key, double def, const std::string& expected, double min,
                                double max, bool allow_inf) const {
  mark(key);
  const YAML::Node n = lookup(key);
  if (!n.IsDefined()) {
    set_default(key, format_number(def));
    return def;
  }
  const double v = convert<double>(key, n, expected);
  if (std::isnan(v) || (std::isinf(v) && !(allow_inf && v > 0)))
    fail(key, "expected " + expected + " (a finite number), got " + n.Scalar());
  if (!(v >= min && v <= max))
    fail(key, "expected " + expected + " in [" + format_number(min) + ", " + format_number(max) +
                  "], got " + n.Scalar());
  return v;
}

double config_node::require_double(const std::string& key, const std::string& expected, double min,
                                   double max) const {
  if (!lookup(key).IsDefined()) fail(key, "missing; expected " + expected);
  return get_double(key, 0.0, expected, min, max);
}

std::uint64_t config_node::get_uint(const std::string& key, std::uint64_t def,
                                    const std::string& expected, std::uint64_t min,
                                    std::uint64_t max) const {
  mark(key);
  const YAML::Node n = lookup(key);
  if (!n.IsDefined()) {
    set_default(key, std::to_string(def));
    return def;
  }
  if (!n.IsScalar()) fail(key, "expected " + expected + ", got " + kind_of(n));
  std::uint64_t v = 0;
  const std::string& s = n.Scalar();
  bool ok = !s.empty() && s[0] != '-';
  if (ok) {
    try {
      v = n.as<std::uint64_t>();
    } catch (const YAML::Exception&) {
      // Accept integral values written in floating-point notation (1e9).
      try {
        const double d = n.as<double>();
        ok = d >= 0 && d < 1.8e19 && std::floor(d) == d;
        v = ok ? static_cast<std::uint64_t>(d) : 0;
      } catch (const YAML::Exception&) {
        ok = false;
      }
    }
  }
  if (!ok) fail(key, "expected " + expected + " (a whole number >= 0), got '" + s + "'");
  if (v < min || v > max)
    fail(key, "expected " + expected + " in [" + std::to_string(min) + ", " + std::to_string(max) +
                  "], got " + s);
  return v;
}

std::uint64_t config_node::require_uint(const std::string& key, const std::string& expected,
                                        std::uint64_t min, std::uint64_t max) const {
  if (!lookup(key).IsDefined()) fail(key, "missing; expected " + expected);
  return get_uint(key, 0, expected, min, max);
}

bool config_node::get_bool(const std::string& key, bool def, const std::string& expected) const {
  mark(key);
  const YAML::Node n = lookup(key);
  if (!n.IsDefined()) {
    set_default(key, def ? "true" : "false");
    return def;
  }
  return convert<bool>(key, n, expected + " (true or false)");
}

std::string config_node::get_string(const std::string& key, const std::string& def,
                                    const std::string& expected) const {
  mark(key);
  const YAML::Node n = lookup(key);
  if (!n.IsDefined()) {
    set_default(key, def);
    return def;
  }
  return convert<std::string>(key, n, expected);
}

std::string config_node::get_path(const std::string& key, const std::string& def,
                                  const std::string& expected) const {
  const std::string v = get_string(key, def, expected);
  if (v.empty() || fs::path(v).is_absolute()) return v;
  return (fs::path(m_cfg->base_dir(key_path(key))) / v).lexically_normal().string();
}

std::string config_node::require_path(const std::string& key, const std::string& expected) const {
  if (!lookup(key).IsDefined()) fail(key, "missing; expected " + expected);
  const std::string v = get_path(key, "", expected);
  if (v.empty()) fail(key, "expected " + expected + ", got an empty name");
  return v;
}

std::string config_node::origin(const std::string& key) const {
  const std::string w = m_cfg->where(key_path(key));
  return w.empty() ? "default" : w;
}

std::string config_node::require_string(const std::string& key, const std::string& expected) const {
  if (!lookup(key).IsDefined()) fail(key, "missing; expected " + expected);
  return get_string(key, "", expected);
}

std::string config_node::get_choice(const std::string& key, const std::string& def,
                                    const std::vector<std::string>& allowed) const {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  const std::string v = get_string(key, def, "one of: " + list);
  for (const auto& a : allowed)
    if (a == v) return v;
  fail(key, "expected one of: " + list + "; got '" + v + "'");
}

std::string config_node::require_choice(const std::string& key,
                                        const std::vector<std::string>& allowed) const {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  if (!lookup(key).IsDefined()) fail(key, "missing; expected one of: " + list);
  return get_choice(key, "", allowed);
}

config_node config_node::child(const std::string& key) const {
  const YAML::Node n = lookup(key);
  if (!n.IsDefined()) fail(key, "missing; expected a map");
  if (!n.IsMap()) fail(key, std::string("expected a map, got ") + kind_of(n));
  mark(key);
  return config_node(*m_cfg, key_path(key));
}

config_node config_node::child_or_empty(const std::string& key) const {
  const YAML::Node n = lookup(key);
  if (n.IsDefined() && !n.IsMap()) fail(key, std::string("expected a map, got ") + kind_of(n));
  mark(key);
  return config_node(*m_cfg, key_path(key));
}

std::vector<std::string> config_node::keys() const {
  std::vector<std::string> out;
  const YAML::Node n = find(m_cfg->m_root, m_path);
  if (n.IsMap())
    for (const auto& kv : n) out.push_back(kv.first.Scalar());
  return out;
}

}  // namespace kelle
