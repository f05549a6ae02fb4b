#include "platform/config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <yaml-cpp/depthguard.h>
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

// yaml-cpp's terse messages, as what was expected there (the caller names the file and line).
std::string yaml_problem(const YAML::Exception& e) {
  if (const auto* d = dynamic_cast<const YAML::DeepRecursion*>(&e))
    return "lists and maps nested too deep here (yaml-cpp stops at depth " + std::to_string(d->depth()) +
           "; a scenario nests at most " + std::to_string(config_limits::nesting) +
           " levels): expected the ']' or '}' that closes them";
  static const std::pair<const char*, const char*> said[] = {
      {"end of map flow not found", "expected ',' or '}' here (a flow map '{ ...' is not closed)"},
      {"end of sequence flow not found", "expected ',' or ']' here (a flow list '[ ...' is not closed)"},
      {"end of map not found",
       "expected 'key: value' at the indentation of the map above, or less indentation to end it"},
      {"end of sequence not found",
       "expected '- item' at the indentation of the list above, or less indentation to end it"},
      {"illegal map value",
       "unexpected ':' (expected a value; a value holding ': ' must be quoted, and a nested map starts on a new line)"},
      {"illegal map key", "unexpected '?' (expected a plain 'key: value')"},
      {"illegal block entry", "unexpected '- ' (expected 'key: value' here; a list item needs a key above it)"},
      {"illegal flow end", "unexpected ']' or '}' (no '[' or '{' is open here)"},
      {"illegal tab when looking for indentation", "a tab in the indentation (expected spaces: YAML indents with spaces)"},
      {"unknown token", "unexpected character (expected a key, a value, '- ', '[' or '{')"},
      {"illegal EOF in scalar", "the file ends inside a quoted value (expected its closing quote)"},
      {"illegal document indicator in scalar", "'---' or '...' inside a quoted value (expected its closing quote first)"},
      {"end of verbatim tag not found", "expected '>' to close the tag '!<...'"},
      {"alias not found after *", "expected an anchor name after '*'"},
      {"anchor not found after &", "expected an anchor name after '&'"},
      {"the referenced anchor is not defined", "an alias '*NAME' whose anchor '&NAME' is not defined before it"},
  };
  for (const auto& [from, to] : said)
    if (e.msg == from) return to;
  return e.msg;
}

// ---- near misses of a key: "did you mean" ----------------------------------------------------

// The code points of UTF-8 text (a byte that does not decode counts as one code point of its own).
std::u32string code_points(const std::string& s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    bool ok = n > 0 && i + n <= s.size();
    for (int k = 1; ok && k < n; ++k) {
      const unsigned char t = static_cast<unsigned char>(s[i + k]);
      ok = (t >> 6) == 2;
      v = (v << 6) | (t & 0x3f);
    }
    out.push_back(ok ? v : 0xDC00 + c);  // an undecodable byte: a code point no letter imitates
    i += ok ? n : 1;
  }
  return out;
}

// The ASCII character a code point imitates (Cyrillic and Greek letters, fullwidth forms, ...);
// 0 for an invisible one (zero-width space, soft hyphen), the code point itself for any other.
char32_t look_alike(char32_t c) {
  if (c < 0x80) return c;
  if (c >= 0xFF01 && c <= 0xFF5E) return c - 0xFF01 + 0x21;  // fullwidth ASCII
  static const std::pair<char32_t, char> table[] = {
      // Cyrillic
      {0x0430, 'a'}, {0x0435, 'e'}, {0x043E, 'o'}, {0x0440, 'p'}, {0x0441, 'c'}, {0x0443, 'y'}, {0x0445, 'x'},
      {0x0455, 's'}, {0x0456, 'i'}, {0x0458, 'j'}, {0x04BB, 'h'}, {0x04CF, 'l'}, {0x0501, 'd'}, {0x051B, 'q'},
      {0x051D, 'w'}, {0x0410, 'A'}, {0x0412, 'B'}, {0x0415, 'E'}, {0x041A, 'K'}, {0x041C, 'M'}, {0x041D, 'H'},
      {0x041E, 'O'}, {0x0420, 'P'}, {0x0421, 'C'}, {0x0422, 'T'}, {0x0423, 'Y'}, {0x0425, 'X'}, {0x0405, 'S'},
      {0x0406, 'I'}, {0x0408, 'J'},
      // Greek
      {0x03B1, 'a'}, {0x03B3, 'y'}, {0x03B9, 'i'}, {0x03BA, 'k'}, {0x03BD, 'v'}, {0x03BF, 'o'}, {0x03C1, 'p'},
      {0x03C5, 'u'}, {0x03C7, 'x'}, {0x0391, 'A'}, {0x0392, 'B'}, {0x0395, 'E'}, {0x0396, 'Z'}, {0x0397, 'H'},
      {0x0399, 'I'}, {0x039A, 'K'}, {0x039C, 'M'}, {0x039D, 'N'}, {0x039F, 'O'}, {0x03A1, 'P'}, {0x03A4, 'T'},
      {0x03A5, 'Y'}, {0x03A7, 'X'},
      // Latin and punctuation
      {0x0131, 'i'}, {0x0269, 'i'}, {0x01C0, 'l'}, {0x2113, 'l'}, {0x00A0, ' '}, {0x2010, '-'}, {0x2011, '-'},
      {0x2012, '-'}, {0x2013, '-'}, {0x2212, '-'}, {0x02CD, '_'}, {0x2017, '_'},
      // invisible
      {0x00AD, 0}, {0x200B, 0}, {0x200C, 0}, {0x200D, 0}, {0x2060, 0}, {0xFEFF, 0}};
  for (const auto& [from, to] : table)
    if (from == c) return static_cast<char32_t>(static_cast<unsigned char>(to));
  return c;
}

std::string hex_code_point(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c >= 0xDC80 && c < 0xDD00 ? c - 0xDC00 : c));
  return buf;
}

std::string utf8(char32_t c) {
  std::string s;
  if (c >= 0xDC80 && c < 0xDD00) return std::string(1, static_cast<char>(c - 0xDC00));  // an undecodable byte
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | ((c >> 18) & 0x07));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// Optimal string alignment distance (Levenshtein with transpositions) of two code point strings.
std::size_t edit_distance(const std::u32string& a, const std::u32string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

struct near_miss {
  std::string match;      // the valid key (empty: none near)
  std::size_t distance = 0;
  std::string note;       // what in the key is not what it looks like (" (its 'о' is U+043E, ...)")
};

// The valid key nearest to `key`: the same once look-alike characters are read as what they
// imitate, or within a few edits (a transposition is one), or a prefix of it.
near_miss nearest(const std::string& key, const std::set<std::string>& valid) {
  near_miss r;
  if (key.size() > 200) return r;  // not a typo of a key name
  const std::u32string raw = code_points(key);
  std::u32string skel;
  for (char32_t c : raw) {
    const char32_t a = look_alike(c);
    if (r.note.empty() && a == 0) r.note = " (it holds the invisible character " + hex_code_point(c) + ")";
    if (r.note.empty() && a != c && a != 0)
      r.note = " (its '" + utf8(c) + "', " + hex_code_point(c) + ", looks like '" + std::string(1, char(a)) + "' and is not)";
    if (r.note.empty() && a >= 0x80) r.note = " (it holds the non-ASCII character " + hex_code_point(c) + ")";
    if (a) skel.push_back(a);
  }
  std::size_t best = ~std::size_t(0);
  for (const auto& v : valid) {
    if (v == key || v.size() > 200) continue;  // the key itself is not a suggestion
    const std::u32string cand = code_points(v);
    const std::size_t allowed = cand.size() <= 3 ? 1 : cand.size() <= 6 ? 2 : 3;
    const bool prefix = skel.size() >= 3 && cand.size() > skel.size() && cand.compare(0, skel.size(), skel) == 0;
    const std::size_t gap = skel.size() > cand.size() ? skel.size() - cand.size() : cand.size() - skel.size();
    if (!prefix && gap > allowed) continue;  // too far apart to be a typo (and not worth the distance)
    const std::size_t d = prefix ? std::min<std::size_t>(2, edit_distance(skel, cand)) : edit_distance(skel, cand);
    if (d <= allowed && d < best) {
      best = d;
      r.match = v;
      r.distance = d;
    }
  }
  if (r.match.empty()) r.note.clear();
  return r;
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
  bool overlay = false;            // loading an overlay (--overlay): its own file names no system
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
      throw config_error(line_of(name, e.mark) + ": YAML syntax error: " + yaml_problem(e));
    } catch (const YAML::Exception& e) {  // e.g. an alias to an anchor not defined
      throw config_error(line_of(name, e.mark) + ": YAML error: " + yaml_problem(e));
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
    if (overlay && node["system"] && node["system"].IsScalar())  // the overlay or a file it includes
      throw config_error(name + ":" + std::to_string(node["system"].Mark().line + 1) +
                         ": system: an overlay replaces keys of a scenario and names no system "
                         "(choose one with -p system=NAME)");
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

config config::load(const std::string& file, const std::vector<std::string>& overrides,
                    const std::vector<std::string>& overlays) {
  config c;
  c.m_main_file = file;
  std::vector<std::string> rest = overrides;
  const auto sys = take_system_override(rest);
  loader l{c.m_origin, {}};
  c.m_root = l.load_file(file, sys);
  if (c.m_root.size() == 0 && !sys)
    throw config_error(file + ": the scenario is empty (expected at least system: and workload:, "
                       "docs/scenario-format.md)");
  // Each overlay is merged over the whole scenario, its system's files included, then the -p
  // overrides over both: an overlay replaces what the technology or system files say.
  l.overlay = true;
  for (const std::string& ov : overlays) {
    const YAML::Node n = l.load_file(ov);
    if (n.size() == 0)
      throw config_error("--overlay " + ov + ": the overlay is empty (expected the scenario keys it replaces)");
    c.m_root = merge(c.m_root, n);
    c.m_overlays.push_back(ov);
  }
  c.use_plugins(l.plugins);
  for (const auto& o : rest) c.apply_override(o);
  return c;
}

config config::with_overrides(const std::vector<std::string>& overrides) const {
  config c;
  c.m_main_file = m_main_file;
  c.m_root = YAML::Clone(m_root);
  c.m_plugins = m_plugins;
  c.m_overlays = m_overlays;
  c.m_origin = m_origin;
  c.m_used = m_used;
  for (const auto& o : overrides) {
    if (o.rfind("system=", 0) == 0)
      throw config_error("command line -p " + o + ": with_overrides: a system selects files; load the scenario with it");
    c.apply_override(o);
  }
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
    throw config_error(where + ": the value is not valid YAML: " + yaml_problem(e));
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
          std::set<std::string> valid;
          auto it = c.m_asked.find(path);
          if (it != c.m_asked.end())
            for (const auto& k : it->second) {
              known += (known.empty() ? "" : ", ") + k;
              valid.insert(k);
            }
          if (auto d = c.m_declared.find(path); d != c.m_declared.end()) valid.insert(d->second.begin(), d->second.end());
          const near_miss near = nearest(kv.first.Scalar(), valid);
          std::string where = c.where(p);
          if (where.empty()) where = c.m_main_file.empty() ? "<scenario>" : c.m_main_file;
          throw config_error(where + ": unknown key '" + p + "'" + near.note +
                             (near.match.empty() ? std::string() : "; did you mean '" + join(path, near.match) + "'?") +
                             (known.empty() ? std::string(" (nothing reads keys here)")
                                            : " (expected one of: " + known + ")"));
        }
        walk(kv.second, p);
      }
    }
  };
  walker{*this}.walk(m_root, "");
}

void config::check_override_paths(const config& base, const std::vector<std::string>& paths,
                                  const std::string& where) const {
  for (const std::string& p : paths) {
    if (find(base.m_root, p).IsDefined() || m_used.count(p)) continue;
    // The first section of the path that is neither in the scenario nor read: a near miss of a
    // key valid there is the typo.
    std::string parent;
    std::size_t from = 0;
    while (true) {
      const std::size_t dot = p.find('.', from);
      const std::string key = p.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      const std::string here = join(parent, key);
      const bool known = find(base.m_root, here).IsDefined() || m_used.count(here) ||
                         (m_asked.count(parent) && m_asked.at(parent).count(key));
      if (!known) {
        std::set<std::string> valid;
        const YAML::Node n = find(base.m_root, parent);
        if (n.IsMap())
          for (const auto& kv : n)
            if (kv.first.IsScalar()) valid.insert(kv.first.Scalar());
        if (auto a = m_asked.find(parent); a != m_asked.end()) valid.insert(a->second.begin(), a->second.end());
        if (auto d = m_declared.find(parent); d != m_declared.end()) valid.insert(d->second.begin(), d->second.end());
        const near_miss near = nearest(key, valid);
        if (!near.match.empty() && near.match != key)
          throw config_error(where + ": unknown key '" + p + "'" + near.note + "; did you mean '" +
                             join(parent, near.match) + "'?");
        break;
      }
      if (dot == std::string::npos) break;
      parent = here;
      from = dot + 1;
    }
  }
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

void config_node::declare(const std::vector<std::string>& keys) const {
  m_cfg->m_declared[m_path].insert(keys.begin(), keys.end());
}

void config_node::missing(const std::string& key, const std::string& expected) const {
  // A key of this map that nothing has read and that is a near miss of a valid one (the missing
  // key first): the typo is what the user should see, not the missing key it left.
  const YAML::Node n = find(m_cfg->m_root, m_path);
  if (n.IsMap()) {
    std::set<std::string> valid{key};
    if (auto a = m_cfg->m_asked.find(m_path); a != m_cfg->m_asked.end()) valid.insert(a->second.begin(), a->second.end());
    if (auto d = m_cfg->m_declared.find(m_path); d != m_cfg->m_declared.end())
      valid.insert(d->second.begin(), d->second.end());
    std::string typo;
    near_miss best;
    std::size_t seen = 0;
    for (const auto& kv : n) {
      if (++seen > 1000) break;  // a typo is among the first keys of a map a person wrote
      if (!kv.first.IsScalar()) continue;
      const std::string& k = kv.first.Scalar();
      if (valid.count(k) || m_cfg->m_used.count(key_path(k))) continue;
      // One edit at most (or look-alike letters): a key not read yet may be a valid one read
      // later (tech.sfu's silu beside a missing gelu), and it is the typo only when that close.
      const near_miss m = nearest(k, valid);
      if (m.match.empty() || m.distance > 1) continue;
      // The missing key's own typo first, then the nearest.
      const auto rank = [&](const near_miss& x) { return 2 * x.distance + (x.match == key ? 0 : 1); };
      if (typo.empty() || rank(m) < rank(best)) {
        typo = k;
        best = m;
      }
    }
    if (!typo.empty()) {
      std::string where = m_cfg->where(key_path(typo));
      if (where.empty()) where = m_cfg->m_main_file.empty() ? "<scenario>" : m_cfg->m_main_file;
      throw config_error(where + ": unknown key '" + key_path(typo) + "'" + best.note + "; did you mean '" +
                         key_path(best.match) + "'? (" + key_path(key) + ": missing)");
    }
  }
  fail(key, "missing; expected " + expected);
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
  if (!lookup(key).IsDefined()) missing(key, expected);
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
  if (!lookup(key).IsDefined()) missing(key, expected);
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
  if (v.empty()) return v;
  const std::string p =
      fs::path(v).is_absolute() ? v : (fs::path(m_cfg->base_dir(key_path(key))) / v).lexically_normal().string();
  std::error_code ec;
  if (fs::is_directory(p, ec)) fail(key, p + ": is a folder, expected " + expected);
  return p;
}

std::string config_node::require_path(const std::string& key, const std::string& expected) const {
  if (!lookup(key).IsDefined()) missing(key, expected);
  const std::string v = get_path(key, "", expected);
  if (v.empty()) fail(key, "expected " + expected + ", got an empty name");
  return v;
}

std::string config_node::origin(const std::string& key) const {
  const std::string w = m_cfg->where(key_path(key));
  return w.empty() ? "default" : w;
}

std::string config_node::require_string(const std::string& key, const std::string& expected) const {
  if (!lookup(key).IsDefined()) missing(key, expected);
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
  if (!lookup(key).IsDefined()) missing(key, "one of: " + list);
  return get_choice(key, "", allowed);
}

config_node config_node::child(const std::string& key) const {
  const YAML::Node n = lookup(key);
  if (!n.IsDefined()) missing(key, "a map");
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
