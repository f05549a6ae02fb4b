#include "vp/platform.h"

#include "models/memory/refresh_control.h"
#include "platform/plugin/loader.h"
#include "platform/system/sc_setup.h"
#include "platform/stats/stats.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#ifndef KELLE_VP_VERSION
#define KELLE_VP_VERSION "unknown"
#endif

namespace kelle {

platform::platform(config& cfg) : m_cfg(cfg) {
  // The scenario's plugins first: their models enter the registries the system is built from.
  for (const auto& [path, where] : cfg.plugins()) load_plugin(path, where);
  config_node root = cfg.root();
  // The top level's keys (the llm workload reads the last four): a misspelt one is named, with the
  // nearest of these, before a required key it leaves missing.
  root.declare({"name", "description", "seed", "sim", "tech", "system", "workload", "plugins", "scheduler", "mode",
                "policy", "functional", "thermal"});
  const std::string stem =
      cfg.main_file().empty() ? "scenario" : std::filesystem::path(cfg.main_file()).stem().string();
  m_name = root.get_string("name", stem, "a name for the scenario");
  root.get_string("description", "", "what the scenario is for");
  m_seed = root.get_uint("seed", 1, "seed of every random choice in the run");
  const config_node sim = root.child_or_empty("sim");
  m_time_limit_s = sim.get_double("time_limit_s", 3600.0,
                                  "simulated seconds after which an unfinished run is an error", 1e-12);

  if (!root.has("tech"))
    root.missing("tech", "a map (name a system, system: kelle_edram, or include a technology file)");
  const config_node tech = root.child("tech");
  tech.get_double("node_nm", 65, "technology node in nm", 1);
  tech.get_double("temperature_C", 105, "temperature the figures are given for, C");
  // The die's temperature over the run (docs/models/thermal.md), before anything that reads it.
  die_temperature::set_current(nullptr);
  if (root.has("thermal")) {
    m_thermal = std::make_unique<thermal_model>(root.child("thermal"), tech);
    die_temperature::set_current(m_thermal.get());
  }

  const config_node sys = root.child("system");
  m_system_name = sys.get_string("name", "custom", "name of the system");
  sys.get_string("description", "", "what the system is");
  m_router = std::make_unique<router>("interconnect", sys.child_or_empty("interconnect"));

  const config_node mems = sys.child("memories");
  const auto names = mems.keys();
  if (names.empty()) mems.fail("", "expected at least one memory");
  for (const auto& n : names) {
    const config_node m = mems.child(n);
    const std::string model = m.require_choice("model", memories().name_list());
    const std::uint64_t base = m.require_uint("base_addr", "global base address of the memory");
    auto mem = memories().create(model, memory_args{n, m, tech});
    try {
      m_router->add_target(n, base, mem->capacity_bytes());
    } catch (const config_error& e) {
      m.fail("base_addr", e.what());
    }
    m_router->initiator_socket.bind(mem->socket);
    m_memories.push_back(std::move(mem));
    m_memory_models.push_back(model);
  }

  // Compute blocks: a command port in the address map and an operand initiator each.
  const double clock_GHz = sys.get_double("clock_GHz", 1.0, "accelerator clock in GHz", 1e-3, 1e3);
  const config_node comp = sys.child_or_empty("compute");
  std::vector<std::string> block_models;
  for (const auto& n : comp.keys()) {
    const config_node c = comp.child(n);
    if (!c.get_bool("enabled", true, "instantiate the block (false: the system without it)")) {
      cfg.accept_subtree(comp.key_path(n));  // its other keys describe a block that is not built
      continue;
    }
    const std::string model = c.require_choice("model", compute_blocks().name_list());
    const std::uint64_t base = c.require_uint("base_addr", "address of the block's command port");
    auto blk = compute_blocks().create(model, compute_args{n, c, tech, clock_GHz});
    try {
      attach(*blk, *m_router, base);
    } catch (const config_error& e) {
      c.fail("base_addr", e.what());
    }
    m_blocks.push_back(std::move(blk));
    block_models.push_back(model);
  }

  for (auto& b : m_blocks) b->connect(*this);

  const config_node wl = root.child("workload");
  const std::string type = wl.require_choice("type", workloads().name_list());
  m_workload = workloads().create(type, workload_args{wl, *this, &root});

  // Sections of the shared technology description this system has no instance of.
  // A section is a model's (tech.<model>): one no model has is a typo, not a spare section.
  std::vector<std::string> models = memories().name_list();
  for (const auto& n : compute_blocks().name_list()) models.push_back(n);
  for (const auto& k : tech.keys()) {
    if (tech.is_map(k) && std::find(models.begin(), models.end(), k) == models.end()) {
      std::string list;
      for (const auto& n : models) list += (list.empty() ? "" : ", ") + n;
      tech.fail(k, "no memory or compute model is named '" + k + "' (a tech section is a model's: " + list + ")");
    }
    // A section of a model this system builds is validated where something read it; one of a
    // model it does not build is spare, even when the thermal model read its retention law.
    const bool built = std::find(m_memory_models.begin(), m_memory_models.end(), k) != m_memory_models.end() ||
                       std::find(block_models.begin(), block_models.end(), k) != block_models.end();
    if (built) cfg.accept_unread(tech.key_path(k));
    else cfg.accept_subtree(tech.key_path(k));
  }
  // The system's firmware defaults (system.firmware) when no firmware runs (traffic, op); when
  // one does, it has read them and a key it did not read is a typo.
  if (sys.is_map("firmware")) cfg.accept_unread(sys.key_path("firmware"));
  cfg.check_all_used();
}

platform::~platform() {
  if (die_temperature::current() == m_thermal.get()) die_temperature::set_current(nullptr);
}

memory_target* platform::memory(const std::string& name) {
  for (auto& m : m_memories)
    if (m->basename() == name) return m.get();
  return nullptr;
}

compute_block* platform::block(const std::string& name) {
  for (auto& b : m_blocks)
    if (b->basename() == name) return b.get();
  return nullptr;
}

std::vector<compute_block*> platform::blocks() {
  std::vector<compute_block*> v;
  for (auto& b : m_blocks) v.push_back(b.get());
  return v;
}

std::vector<memory_target*> platform::memory_targets() {
  std::vector<memory_target*> v;
  for (auto& m : m_memories) v.push_back(m.get());
  return v;
}

std::string platform::block_names() const {
  std::string s;
  for (const auto& b : m_blocks) s += (s.empty() ? "" : ", ") + std::string(b->basename());
  return s;
}

std::string platform::memory_names() const {
  std::string s;
  for (const auto& m : m_memories) s += (s.empty() ? "" : ", ") + std::string(m->basename());
  return s;
}

void platform::run() {
  const auto t0 = std::chrono::steady_clock::now();
  sc_start_for(m_time_limit_s);
  m_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m_input_error = take_run_input_error();  // a process stopped the run (stop_run_for_input_error)
  if (!m_input_error.empty()) return;
  if (m_thermal) {  // the die went beyond the retention law's validated range without `extrapolate`
    m_thermal_results = m_thermal->results();
    m_input_error = m_thermal->range_error();
    if (!m_input_error.empty()) return;
  }
  if (!m_workload->finished())
    throw std::runtime_error("the workload did not finish within sim.time_limit_s = " +
                             format_number(m_time_limit_s) + " s of simulated time");
}

nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : n) j[kv.first.Scalar()] = yaml_to_json(kv.second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : n) j.push_back(yaml_to_json(e));
    return j;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted in the file: a string
  if (s == "true" || s == "false") return s == "true";
  if (s == ".inf" || s == ".Inf") return "inf";
  char* end = nullptr;
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.')) {
    if (s.find_first_of(".eE") == std::string::npos || s.rfind("0x", 0) == 0) {
      const long long v = std::strtoll(s.c_str(), &end, 0);
      if (end && *end == '\0') return v;
    }
    const double d = std::strtod(s.c_str(), &end);
    if (end && *end == '\0' && std::isfinite(d)) return d;
  }
  return s;
}

namespace {

// Energy parts of every module: component "<module>.<part>" -> joules, and the part's statistic.
struct energy_part {
  std::string component;
  double joules;
  const stat_group* group;
  const stat* part;
};
std::vector<energy_part> energy_parts() {
  std::vector<energy_part> parts;
  for (const stat_group* g : collect_stat_groups())
    for (const stat& s : g->all())
      if (s.energy_part()) parts.push_back({g->owner() + "." + s.name(), s.value(), g, &s});
  return parts;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Engineering notation with an SI prefix: 1.234 uJ, 56.7 ns.
std::string si(double v, const std::string& unit) {
  static const char* prefixes[] = {"p", "n", "u", "m", "", "k", "M", "G", "T"};
  if (v == 0 || !std::isfinite(v)) return fmt("%.4g ", v) + unit;
  int e = static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3));
  e = std::max(-4, std::min(4, e));
  return fmt("%.4g ", v / std::pow(1000.0, e)) + prefixes[e + 4] + unit;
}

}  // namespace

namespace {
// The refresh energy of the memories whose cells need refresh (that offer a refresh_control: the
// eDRAM arrays, a plugin's own cell), in statistics order.
double edram_refresh_J(const std::vector<energy_part>& parts,
                       const std::vector<std::unique_ptr<memory_target>>& memories) {
  std::set<const stat_group*> refreshed;
  for (const auto& m : memories)
    if (m->refresh()) refreshed.insert(&m->stats());
  double j = 0;
  for (const energy_part& p : parts)
    if (p.part->tag().energy == energy_kind::refresh && refreshed.count(p.group)) j += p.joules;
  return j;
}
}  // namespace

nlohmann::json platform::results() const {
  nlohmann::json r;
  r["kelle_vp_version"] = KELLE_VP_VERSION;
  r["scenario"] = {{"name", m_name}, {"file", m_cfg.main_file()}, {"system", m_system_name},
                   {"overlays", m_cfg.overlays()}};
  r["config"] = yaml_to_json(m_cfg.effective());
  r["sim_time_s"] = sc_core::sc_time_stamp().to_seconds();
  r["wall_time_s"] = m_wall_s;
  nlohmann::json plugins = nlohmann::json::array();
  for (const auto& p : loaded_plugins())
    plugins.push_back({{"name", p.name}, {"path", p.path}, {"cxx_abi", p.cxx_abi}, {"provides", p.provides}});
  r["plugins"] = plugins;

  nlohmann::json stats = nlohmann::json::object();
  for (const stat_group* g : collect_stat_groups()) {
    if (!g->reported()) continue;
    nlohmann::json& m = stats[g->owner()];
    for (const stat& s : g->all()) {
      const double v = s.value();
      m[s.name()] = {{"value", std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr)},
                     {"unit", s.unit()},
                     {"description", s.description()}};
    }
  }
  r["stats"] = stats;

  nlohmann::json by = nlohmann::json::object();
  double total = 0;
  const auto parts = energy_parts();
  for (const energy_part& p : parts) {
    by[p.component] = p.joules;
    total += p.joules;
  }
  r["energy_J"] = {{"total", total}, {"by_component", by}, {"edram_refresh", edram_refresh_J(parts, m_memories)}};

  nlohmann::json amap = nlohmann::json::array();
  for (size_t i = 0; i < m_memories.size(); ++i) {
    const auto& m = m_memories[i];
    amap.push_back({{"name", m->basename()},
                    {"model", m_memory_models[i]},
                    {"base_addr", m_router->base_of(m->basename())},
                    {"capacity_bytes", m->capacity_bytes()}});
  }
  r["address_map"] = amap;
  if (m_thermal) r["thermal"] = m_thermal_results;
  m_workload->add_results(r);
  return r;
}

std::string platform::report() const {
  std::ostringstream o;
  o << "Kelle VP " << KELLE_VP_VERSION << "  scenario '" << m_name << "'";
  if (!m_cfg.main_file().empty()) o << " (" << m_cfg.main_file() << ")";
  o << "\nSystem: " << m_system_name << "\n";
  for (const std::string& f : m_cfg.overlays()) o << "Overlay: " << f << "\n";
  for (const auto& p : loaded_plugins()) o << "Plugin: " << p.name << " (" << p.path << ")\n";
  o << "Simulated time: " << si(sc_core::sc_time_stamp().to_seconds(), "s")
    << "   wall time: " << fmt("%.3f", m_wall_s) << " s\n\n";

  o << "Address map\n";
  for (size_t i = 0; i < m_memories.size(); ++i) {
    const auto& m = m_memories[i];
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-12s %-7s base 0x%010llx  %12.4g MiB  peak %8.4g GB/s\n",
                  m->basename(), m_memory_models[i].c_str(),
                  static_cast<unsigned long long>(m_router->base_of(m->basename())),
                  m->capacity_bytes() / 1048576.0, m->peak_bandwidth_Bps() / 1e9);
    o << buf;
  }
  o << "\n" << m_workload->report() << "\n";
  if (m_thermal) {
    const nlohmann::json& t = m_thermal_results;
    o << "Thermal (" << t["model"].get<std::string>() << ")\n";
    char buf[256];
    std::snprintf(buf, sizeof buf, "  die %.4g C at the end, %.4g to %.4g C (mean %.4g C); heat %s%s\n\n",
                  t["final_C"].get<double>(), t["min_C"].get<double>(), t["max_C"].get<double>(),
                  t["mean_C"].get<double>(), si(t["heat_J"].get<double>(), "J").c_str(),
                  t["extrapolated"].get<bool>() ? "; EXTRAPOLATED beyond the retention law's validated range" : "");
    o << buf;
  }

  const auto parts = energy_parts();
  double total = 0;
  for (const energy_part& p : parts) total += p.joules;
  const double refresh = edram_refresh_J(parts, m_memories);
  o << "Energy\n";
  for (const energy_part& p : parts) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-28s %14s  %5.1f %%\n", p.component.c_str(), si(p.joules, "J").c_str(),
                  total > 0 ? 100.0 * p.joules / total : 0.0);
    o << buf;
  }
  {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-28s %14s\n", "total", si(total, "J").c_str());
    o << buf;
    std::snprintf(buf, sizeof buf, "  eDRAM refresh: %s (%.1f %% of the total)\n", si(refresh, "J").c_str(),
                  total > 0 ? 100.0 * refresh / total : 0.0);
    o << buf;
  }

  o << "\nStatistics\n";
  for (const stat_group* g : collect_stat_groups()) {
    if (!g->reported()) continue;
    o << "  " << g->owner() << "\n";
    for (const stat& s : g->all()) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "    %-34s %14.6g %-6s %s\n", s.name().c_str(), s.value(),
                    s.unit().c_str(), s.description().c_str());
      o << buf;
    }
  }
  return o.str();
}

}  // namespace kelle
