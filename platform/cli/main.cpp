// kelle-vp: the command-line front end of the platform.
//   kelle-vp                      run the default scenario and print the report
//   kelle-vp run FILE [-p k=v]... [-o DIR [--force]]
//   kelle-vp list [KIND]          registered names of a kind (memories, workloads, ...)
#include "platform/config/config.h"
#include "platform/registry/registry.h"
#include "platform/system/platform.h"
#include "platform/system/sc_setup.h"

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

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  if (!(f << text)) throw std::runtime_error(p.string() + ": cannot write");
}

int run(const run_options& o) {
  prepare_outdir(o);
  kelle::config cfg = kelle::config::load(o.scenario, o.overrides);
  kelle::platform p(cfg);
  p.run();
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
  for (const auto& [name, desc] : it->second->list()) std::printf("%-12s %s\n", name.c_str(), desc.c_str());
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

  std::string kind;
  auto* list_cmd = app.add_subcommand("list", "print the registered names of a kind");
  list_cmd->add_option("kind", kind, "memories, workloads, ... ('kinds' or nothing: every kind)");

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
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
