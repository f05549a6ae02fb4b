#include "models/memory/lpddr4/memspec_file.h"

#include <cmath>
#include <filesystem>

namespace kelle {

namespace fs = std::filesystem;

namespace {
constexpr const char* sections[] = {"architecture", "timing"};
}

memspec_file::memspec_file(const config_node& p, const std::string& default_name) {
  const std::string name = p.get_string(
      "memspec", default_name, "a memspec file, or the name of one in the scenarios' memspec/ folder");
  const fs::path dir = fs::path(scenarios_dir()) / "memspec";
  std::error_code ec;
  for (const fs::path& f : {fs::path(name), dir / name, dir / (name + ".yaml")})
    if (fs::is_regular_file(f, ec)) {
      m_file = f.string();
      break;
    }
  if (m_file.empty() && !name.empty() && fs::is_directory(name, ec))
    p.fail("memspec", name + ": is a folder, expected a memspec file (YAML)");
  if (m_file.empty())
    p.fail("memspec", "no memspec file '" + name + "' (looked for it as a path and in " + dir.string() + ")");
  try {
    m_root = YAML::LoadFile(m_file);
  } catch (const YAML::Exception& e) {
    p.fail("memspec", m_file + ": not valid YAML: " + e.what());
  }
  if (!m_root.IsMap()) p.fail("memspec", m_file + ": expected a map with the sections architecture and timing");
  for (const auto& kv : m_root) {
    const std::string k = kv.first.Scalar();
    const bool known = k == "memoryId" || k == "memoryType" || k == "architecture" || k == "timing";
    if (!known) fail(kv.first, k, "unknown key (expected memoryId, memoryType, architecture, timing)");
  }
  for (const char* s : sections)
    if (!m_root[s] || !m_root[s].IsMap()) fail(m_root, s, "expected a map (section '" + std::string(s) + "')");
}

void memspec_file::fail(const YAML::Node& at, const std::string& key, const std::string& message) const {
  const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 0;
  throw config_error(m_file + (line > 0 ? ":" + std::to_string(line) : "") + ": " + key + ": " + message);
}

YAML::Node memspec_file::find(const std::string& key) const {
  for (const char* s : sections) {
    const YAML::Node n = m_root[s][key];
    if (n) {
      m_used.insert(std::string(s) + "." + key);
      return n;
    }
  }
  fail(m_root, key, "missing (the DRAM model needs it in section architecture or timing)");
}

double memspec_file::num(const std::string& key) const {
  const YAML::Node n = find(key);
  try {
    if (n.IsScalar()) return n.as<double>();
  } catch (const YAML::Exception&) {
  }
  fail(n, key, "expected a number");
}

double memspec_file::num_or(const std::string& key, double fallback) const {
  for (const char* s : sections)
    if (m_root[s][key]) return num(key);
  return fallback;
}

std::uint64_t memspec_file::uint(const std::string& key) const {
  const double v = num(key);
  if (v < 0 || v != std::floor(v)) fail(find(key), key, "expected a whole number >= 0");
  return static_cast<std::uint64_t>(v);
}

void memspec_file::check_all_used() const {
  for (const char* s : sections)
    for (const auto& kv : m_root[s])
      if (!m_used.count(std::string(s) + "." + kv.first.Scalar()))
        fail(kv.first, std::string(s) + "." + kv.first.Scalar(), "unknown key (not a parameter of the DRAM model)");
}

}  // namespace kelle
