// kelle-vp: the command-line front end of the platform.
//   kelle-vp                      run the default scenario and print the report
//   kelle-vp run FILE [-p k=v]... [-o DIR [--force]]
//   kelle-vp list [KIND]          registered names of a kind (memories, workloads, ...)
//   run ... --timeline FILE.json [--timeline-steps A:B]  a Chrome/Perfetto trace (docs/timeline.md)
//   --plugin FILE (run, list, op; repeatable) loads a plugin first (platform/plugin/loader.h)
#include "platform/config/config.h"
#include "platform/plugin/loader.h"
#include "platform/registry/registry.h"
#include "vp/platform.h"
#include "platform/system/sc_setup.h"
#include "platform/trace/timeline.h"

#include <CLI/CLI.hpp>
#include <systemc>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#ifndef KELLE_VP_VERSION
#define KELLE_VP_VERSION "unknown"
#endif

namespace fs = std::filesystem;

namespace {

struct run_options {
  std::string scenario;
  std::vector<std::string> overrides;
  std::string outdir;
  bool force = false;
  bool quiet = false;
  kelle::timeline_options timeline;  // path empty: no timeline
  std::string timeline_steps = "0:2";
};

// Files a run writes (the llm workload adds its CSVs); a folder holding any of them has results.
const char* const result_files[] = {"results.json", "report.txt", "steps.csv", "layers.csv"};

// Refuses to write into a folder that already holds results, unless forced.
void prepare_outdir(const run_options& o) {
  if (o.outdir.empty()) return;
  const fs::path dir(o.outdir);
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw kelle::config_error(o.outdir + ": -o expects a folder, and this is a file");
  if (!o.force)
    for (const char* f : result_files)
      if (fs::exists(dir / f))
        throw kelle::config_error(o.outdir + " already holds results (" + f +
                                  "); choose another folder or add --force to overwrite");
  fs::create_directories(dir);
}

// Checks the timeline options and starts the recorder (before the platform is built: the
// workload claims the recording window). Refuses to overwrite a file unless forced.
void start_timeline(run_options& o) {
  const auto [a, b] = kelle::parse_step_range(o.timeline_steps);
  o.timeline.first_step = a;
  o.timeline.last_step = b;
  if (o.timeline.max_events == 0)
    throw kelle::config_error("--timeline-max-events 0: expected at least 1 event");
  if (!(o.timeline.gap_ns >= 0))
    throw kelle::config_error("--timeline-gap-ns: expected a gap >= 0 ns");
  if (o.timeline.path.empty()) return;
  const fs::path f(o.timeline.path);
  if (fs::is_directory(f)) throw kelle::config_error(o.timeline.path + ": --timeline expects a file, and this is a folder");
  if (fs::exists(f) && !o.force)
    throw kelle::config_error(o.timeline.path + " already exists; choose another file or add --force to overwrite");
  if (f.has_parent_path()) fs::create_directories(f.parent_path());
  kelle::timeline::get().start(o.timeline);
}

// Closes the timeline however the run ends; a run that fails before recording anything leaves no file.
struct timeline_guard {
  const run_options& o;
  bool done = false;
  ~timeline_guard() {
    if (done || !kelle::timeline::open()) return;
    const bool empty = kelle::timeline::get().events() == 0;
    try {
      kelle::timeline::get().finish();
    } catch (const std::exception&) {
    }
    std::error_code ec;
    if (empty) fs::remove(o.timeline.path, ec);
  }
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  if (!(f << text)) throw std::runtime_error(p.string() + ": cannot write");
}

int run(run_options& o) {
  prepare_outdir(o);
  start_timeline(o);
  timeline_guard guard{o};
  kelle::config cfg = kelle::config::load(o.scenario, o.overrides);
  kelle::platform p(cfg);
  p.run();
  if (kelle::timeline::open()) {
    guard.done = true;
    const std::uint64_t events = kelle::timeline::get().finish();
    std::cerr << "Timeline written to " << o.timeline.path << " (" << events << " events, "
              << fs::file_size(o.timeline.path) << " bytes, passes " << o.timeline.first_step << ".."
              << o.timeline.last_step << ")\n";
  }
  const std::string report = p.report();
  if (!o.quiet) std::cout << report << std::flush;
  if (!o.outdir.empty()) {
    write_file(fs::path(o.outdir) / "results.json", p.results().dump(2) + "\n");
    write_file(fs::path(o.outdir) / "report.txt", report);
    for (const auto& [name, text] : p.work().extra_files()) write_file(fs::path(o.outdir) / name, text);
    std::cerr << "Results written to " << o.outdir << "/\n";
  }
  return 0;
}

struct op_options {
  std::string name;
  std::uint64_t m = 1, k = 1, n = 1, extra = 0;
  std::string system = "kelle_edram";
  std::vector<std::string> overrides;
  bool json = false;
};

// One command on the platform: a scenario made of the system and an `op` workload.
int op(const op_options& o) {
  char yaml[512];
  std::snprintf(yaml, sizeof yaml,
                "name: op\nsystem: %s\nworkload: {type: op, op: %s, m: %llu, k: %llu, n: %llu, extra: %llu}\n",
                o.system.c_str(), o.name.c_str(), static_cast<unsigned long long>(o.m),
                static_cast<unsigned long long>(o.k), static_cast<unsigned long long>(o.n),
                static_cast<unsigned long long>(o.extra));
  kelle::config cfg = kelle::config::from_string(yaml, "kelle-vp op", o.overrides);
  kelle::platform p(cfg);
  p.run();
  const auto r = p.results();
  if (o.json) {
    std::cout << r["op"].dump(2) << std::endl;
  } else {
    std::cout << p.report() << std::flush;
  }
  return r["op"]["status"] == "ok" ? 0 : 1;
}

int list(const std::string& kind) {
  const auto& all = kelle::registry_base::all();
  if (kind.empty() || kind == "kinds") {
    for (const auto& [k, r] : all) std::printf("%-12s %s\n", k.c_str(), r->description().c_str());
    return 0;
  }
  auto it = all.find(kind);
  if (it == all.end()) {
    std::string kinds;
    for (const auto& e : all) kinds += (kinds.empty() ? "" : ", ") + e.first;
    throw kelle::config_error("list: unknown kind '" + kind + "' (expected one of: " + kinds + ")");
  }
  for (const auto& [name, desc] : it->second->list()) {
    std::string from;
    const std::string origin = it->second->origin(name);
    for (const auto& p : kelle::loaded_plugins())
      if (!origin.empty() && p.path == origin) from = "  [plugin " + p.name + ": " + p.path + "]";
    std::printf("%-12s %s%s\n", name.c_str(), desc.c_str(), from.c_str());
  }
  return 0;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  CLI::App app{"Kelle VP: a SystemC/TLM-2.0 virtual platform of the Kelle eDRAM LLM accelerator.\n"
               "Without a command, runs the default scenario and prints its report."};
  app.set_version_flag("--version", std::string("kelle-vp ") + KELLE_VP_VERSION);
  app.require_subcommand(0, 1);

  run_options ro;
  ro.scenario = (fs::path(kelle::scenarios_dir()) / "default.yaml").string();
  auto* run_cmd = app.add_subcommand("run", "run a scenario");
  run_cmd->add_option("scenario", ro.scenario, "scenario file (YAML)")->required();
  run_cmd->add_option("-p,--param", ro.overrides, "override a key: key.path=value (repeatable)");
  run_cmd->add_option("-o,--outdir", ro.outdir, "write results.json and report.txt into this folder");
  run_cmd->add_flag("--force", ro.force, "overwrite results already in the output folder");
  run_cmd->add_flag("-q,--quiet", ro.quiet, "do not print the report");
  run_cmd->add_option("--timeline", ro.timeline.path,
                      "write a Chrome/Perfetto trace (JSON) of the run to this file (docs/timeline.md)");
  run_cmd->add_option("--timeline-steps", ro.timeline_steps,
                      "passes the timeline records, A:B inclusive (0 is the prefill, N decode step N); default 0:2");
  run_cmd->add_option("--timeline-layer", ro.timeline.layer,
                      "layer whose activation lifetimes the timeline draws; default 0");
  run_cmd->add_option("--timeline-max-events", ro.timeline.max_events,
                      "the timeline stops recording after this many events; default 2000000");
  run_cmd->add_option("--timeline-gap-ns", ro.timeline.gap_ns,
                      "a memory's busy span closes after this idle gap, ns; default 5000");
  std::vector<std::string> plugins;
  const char* plugin_help = "load a plugin (shared library) first (repeatable)";
  run_cmd->add_option("--plugin", plugins, plugin_help);

  std::string kind;
  auto* list_cmd = app.add_subcommand("list", "print the registered names of a kind");
  list_cmd->add_option("kind", kind, "memories, workloads, ... ('kinds' or nothing: every kind)");
  list_cmd->add_option("--plugin", plugins, plugin_help);

  op_options oo;
  auto* op_cmd = app.add_subcommand("op", "run one command on a compute block and print its cost");
  op_cmd->add_option("name", oo.name, "the command: gemm, gemm_transposed, softmax, ...")->required();
  op_cmd->add_option("--m", oo.m, "rows M (tokens)");
  op_cmd->add_option("--k", oo.k, "reduction length / row length K");
  op_cmd->add_option("--n", oo.n, "output columns N");
  op_cmd->add_option("--extra", oo.extra, "stacked recompute rows (gemm)");
  op_cmd->add_option("--system", oo.system, "built-in system name or system file");
  op_cmd->add_option("-p,--param", oo.overrides, "override a key: key.path=value (repeatable)");
  op_cmd->add_flag("--json", oo.json, "print one JSON object (cycles, utilization, energy_J, ...)");
  op_cmd->add_option("--plugin", plugins, plugin_help);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const auto& p : plugins) kelle::load_plugin(p, "command line --plugin");
    if (*list_cmd) return list(kind);
    if (*op_cmd) return op(oo);
    return run(ro);
  } catch (const kelle::config_error& e) {
    std::fprintf(stderr, "kelle-vp: error: %s\n", e.what());
    return 2;
  } catch (const sc_core::sc_report& e) {
    std::fprintf(stderr, "kelle-vp: error: %s: %s\n", e.get_msg_type(), e.get_msg());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kelle-vp: error: %s\n", e.what());
    return 1;
  }
}

int main(int argc, char* argv[]) {
  kelle::setup_systemc_process();
  return sc_core::sc_elab_and_sim(argc, argv);
}
