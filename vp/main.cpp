// kelle-vp: the command-line front end of the platform.
//   kelle-vp                      run the default scenario and print the report
//   kelle-vp run FILE [-p k=v]... [-o DIR [--force]]
//   kelle-vp check FILE [-p k=v]...  load, validate, elaborate; no simulation (scripts/sweep --dry-run)
//   kelle-vp list [KIND]          registered names of a kind (memories, workloads, ...)
//   run ... --timeline FILE.json [--timeline-steps A:B]  a Chrome/Perfetto trace (docs/timeline.md)
//   kelle-vp export-attention --model W --text T --tokenizer B --tokens N [--sequences S] -o F.katt [--force]
//   kelle-vp export-attention --synthetic [--layers L --heads H -p key=value] --tokens N -o F.katt
//                                 a trained model's attention over a text as a trace (docs/attention.md)
//   kelle-vp estimate FILE [-p k=v]... [--json] [--designs FILE|- [--csv]]
//                                 the first-order model of the same scenario, no simulation
//                                 (firmware/llm/estimate.h); --designs: one design per line
//   --plugin FILE (run, list, op; repeatable) loads a plugin first (platform/plugin/loader.h)
#include "firmware/functional/attention_export.h"
#include "firmware/llm/estimate.h"
#include "firmware/workload/attention/attention_source.h"
#include "platform/config/config.h"
#include "platform/plugin/loader.h"
#include "platform/registry/registry.h"
#include "vp/platform.h"
#include "platform/system/sc_setup.h"
#include "platform/trace/timeline.h"

#include <CLI/CLI.hpp>
#include <systemc>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <chrono>
#include <map>
#include <system_error>

#ifndef KELLE_VP_VERSION
#define KELLE_VP_VERSION "unknown"
#endif

namespace fs = std::filesystem;

namespace {

struct run_options {
  std::string scenario;
  std::vector<std::string> overrides;
  std::vector<std::string> overlays;  // --overlay files, merged over the scenario before -p
  std::string outdir;
  bool force = false;
  bool quiet = false;
  bool check_only = false;           // `kelle-vp check`: load, validate, elaborate; no simulation
  bool outdir_given = false, timeline_given = false, steps_given = false;
  kelle::timeline_options timeline;  // path empty: no timeline
  std::string timeline_steps = "0:2";
};

// Files a run writes (the llm workload adds its CSVs); a folder holding any of them has results.
const char* const result_files[] = {"results.json", "report.txt", "steps.csv", "layers.csv"};

// ---- outputs: written under a temporary name, renamed when complete ----------------------------
// An interrupted run (SIGINT, SIGTERM) removes its temporary files and leaves the user's files as
// they were: the old file or nothing. Every write, the close and the rename are checked: a failure
// (a full disk, a quota) is an error naming the file and the system's reason, and the run's
// temporary files are removed (nothing partial is left). An output that exists and is neither a
// file nor a folder (a device such as /dev/null or /dev/full, a pipe) is written in place.
constexpr int max_temp = 16;
char g_temp[max_temp][4096];
volatile std::sig_atomic_t g_temps = 0;

extern "C" void on_signal(int sig) {
  for (int i = 0; i < g_temps; ++i)
    if (g_temp[i][0]) ::unlink(g_temp[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// "OPTION PATH: cannot write the file (REASON)": an output error, exit status 2 as every other.
kelle::config_error write_error(const std::string& option, const fs::path& path, int err) {
  return kelle::config_error(option + " " + path.string() + ": cannot write the file (" +
                             std::strerror(err ? err : EIO) + ")");
}

// Writes all of `text` to `fd`; 0, or the errno of the write that failed.
int write_all(int fd, const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

// The report on stdout, every byte checked (a full disk, a closed pipe): 0 or the errno.
int print(const std::string& text) {
  std::cout.flush();
  std::fflush(stdout);
  return write_all(STDOUT_FILENO, text);
}

// Whether `p` exists and is neither a regular file nor a folder (written in place, not replaced).
bool special_file(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

// A temporary name beside `final` (same folder: the rename is atomic), removed on a signal or
// when the run fails. For a special file (special_file) the name is `final` itself: nothing to
// rename or remove.
struct temp_file {
  std::string path;
  fs::path final;
  std::string option;  // the option that named the file, for errors
  int slot = -1;
  bool in_place = false;
  temp_file(const fs::path& final_, const std::string& option_) : final(final_), option(option_) {
    if (special_file(final)) {
      in_place = true;
      path = final.string();
      return;
    }
    path = (final.parent_path() / ("." + final.filename().string() + ".tmp" + std::to_string(::getpid()))).string();
    if (g_temps < max_temp && path.size() < sizeof g_temp[0]) {
      slot = g_temps;
      std::snprintf(g_temp[slot], sizeof g_temp[slot], "%s", path.c_str());
      g_temps = g_temps + 1;
    }
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  // Writes `text` into the temporary file: every write and the close checked. Returns 0 or the
  // errno of what failed (no exception: outputs are written after the simulation, where the
  // sanitizers' handling of a throw trips over SystemC's coroutine stacks).
  int write(const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return errno ? errno : EIO;
    if (const int err = write_all(fd, text)) {
      ::close(fd);
      return err;
    }
    if (::close(fd) != 0 && errno != EINTR) return errno ? errno : EIO;
    return 0;
  }
  // Renames the temporary file to `final`; 0 or the errno.
  int commit() {
    if (in_place) {
      path.clear();
      return 0;
    }
    if (::rename(path.c_str(), final.c_str()) != 0) return errno ? errno : EIO;
    forget();
    return 0;
  }
  void forget() {
    if (slot >= 0) g_temp[slot][0] = '\0';
    slot = -1;
    path.clear();
  }
  ~temp_file() {
    if (path.empty() || in_place) return;
    ::unlink(path.c_str());
    forget();
  }
};

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code e1, e2;
  const fs::path ca = fs::weakly_canonical(a, e1), cb = fs::weakly_canonical(b, e2);
  return !e1 && !e2 && ca == cb;
}

// Whether `dir` exists or can be created: its nearest existing ancestor is a writable folder.
void check_creatable(const fs::path& dir, const std::string& option) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    throw kelle::config_error(option + ": cannot create the folder (" + p.string() + " is not a folder)");
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    throw kelle::config_error(option + ": cannot create the folder (" + p.string() + " is not writable)");
  // access() answers yes to root for any folder, /proc included: try it, with a folder of our own
  // that is removed at once, so that the output is known writable before the run spends its time.
  std::string probe = (p / ".kelle-vp-probe-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr)
    throw kelle::config_error(option + ": cannot create the folder (" + p.string() + " is not writable: " +
                              std::strerror(errno) + ")");
  ::rmdir(probe.c_str());
}

// Checks every output option before anything is read or written: a run that is refused touches
// no file.
void check_outputs(run_options& o) {
  std::error_code ec;
  if (o.outdir_given && o.outdir.empty()) throw kelle::config_error("-o: expected a folder, got an empty name");
  if (o.timeline_given && o.timeline.path.empty())
    throw kelle::config_error("--timeline: expected a file name, got an empty one");
  if (!o.timeline_given) {
    if (o.steps_given) throw kelle::config_error("--timeline-steps: needs --timeline FILE (nothing is recorded without it)");
  }
  const auto [a, b] = kelle::parse_step_range(o.timeline_steps);
  o.timeline.first_step = a;
  o.timeline.last_step = b;
  if (o.timeline.max_events == 0)
    throw kelle::config_error("--timeline-max-events 0: expected at least 1 event");
  if (!(o.timeline.gap_ns >= 0) || !std::isfinite(o.timeline.gap_ns))
    throw kelle::config_error("--timeline-gap-ns: expected a gap >= 0 ns");
  if (!o.outdir.empty()) {
    const fs::path dir(o.outdir);
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw kelle::config_error("-o " + o.outdir + ": expected a folder, and this is a file");
    if (!o.force)
      for (const char* f : result_files)
        if (fs::exists(dir / f, ec))
          throw kelle::config_error("-o " + o.outdir + " already holds results (" + f +
                                    "); choose another folder or add --force to overwrite");
    check_creatable(dir, "-o " + o.outdir);
  }
  if (o.timeline.path.empty()) return;
  const fs::path f(o.timeline.path);
  if (fs::is_directory(f, ec)) throw kelle::config_error("--timeline " + o.timeline.path + ": expected a file, and this is a folder");
  if (same_file(f, o.scenario))
    throw kelle::config_error("--timeline " + o.timeline.path + ": this is the scenario file; choose another file");
  if (!o.outdir.empty())
    for (const char* r : result_files)
      if (same_file(f, fs::path(o.outdir) / r))
        throw kelle::config_error("--timeline " + o.timeline.path + ": -o " + o.outdir + " writes " + r +
                                  " there; choose another file");
  if (special_file(f)) return;  // a device or a pipe: written in place, not replaced
  if (fs::exists(f, ec) && !o.force)
    throw kelle::config_error("--timeline " + o.timeline.path + " already exists; choose another file or add --force to overwrite");
  check_creatable(fs::absolute(f, ec).parent_path(), "--timeline " + o.timeline.path);
}

void make_folder(const fs::path& dir, const std::string& option) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw kelle::config_error(option + ": cannot create the folder (" + ec.message() + ")");
}

// Closes the timeline however the run ends (the temporary file is then removed).
struct timeline_guard {
  ~timeline_guard() {
    if (!kelle::timeline::open()) return;
    try {
      kelle::timeline::get().finish();
    } catch (const std::exception&) {
    }
  }
};

std::string one_line(std::string m);

int run(run_options& o) {
  if (!o.check_only) check_outputs(o);
  kelle::config cfg = kelle::config::load(o.scenario, o.overrides, o.overlays);
  const std::string timeline_file = o.timeline.path;
  std::unique_ptr<temp_file> timeline_tmp;
  timeline_guard guard;
  if (!timeline_file.empty() && !o.check_only) {
    // Started before the platform is built (the workload claims the recording window), into a
    // temporary file that becomes the user's file only when the run completes.
    make_folder(fs::path(timeline_file).parent_path(), "--timeline " + timeline_file);
    timeline_tmp = std::make_unique<temp_file>(fs::path(timeline_file), "--timeline");
    o.timeline.path = timeline_tmp->path;
    try {
      kelle::timeline::get().start(o.timeline);
    } catch (const std::system_error& e) {
      throw write_error("--timeline", timeline_file, e.code().value());
    }
  }
  kelle::platform p(cfg);
  if (o.check_only) {
    std::printf("%s: ok (scenario '%s', system %s)\n", o.scenario.c_str(),
                cfg.effective()["name"] ? cfg.effective()["name"].Scalar().c_str() : "",
                cfg.effective()["system"]["name"] ? cfg.effective()["system"]["name"].Scalar().c_str() : "custom");
    return 0;
  }
  p.run();
  if (!p.input_error().empty()) {  // reported without an exception (platform::run)
    std::fprintf(stderr, "kelle-vp: error: %s\n", one_line(p.input_error()).c_str());
    return 2;
  }
  // Every output is written in full before any becomes the user's file: a write that fails
  // leaves the old files (or none) and no temporary file. After the simulation an error is
  // reported without an exception (as platform::run's input errors are).
  auto fail = [](const std::string& option, const fs::path& path, int err) {
    std::fprintf(stderr, "kelle-vp: error: %s\n", one_line(write_error(option, path, err).what()).c_str());
    return 2;
  };
  std::uint64_t events = 0;
  if (kelle::timeline::open()) {
    int err = 0;
    events = kelle::timeline::get().finish(&err);
    if (err) return fail("--timeline", timeline_file, err);
  }
  const std::string report = p.report();
  std::vector<std::unique_ptr<temp_file>> results;
  if (!o.outdir.empty()) {
    make_folder(o.outdir, "-o " + o.outdir);
    auto add = [&](const std::string& name, const std::string& text) {
      results.push_back(std::make_unique<temp_file>(fs::path(o.outdir) / name, "-o"));
      return results.back()->write(text);
    };
    if (const int err = add("results.json", p.results().dump(2) + "\n")) return fail("-o", results.back()->final, err);
    if (const int err = add("report.txt", report)) return fail("-o", results.back()->final, err);
    for (const auto& [name, text] : p.work().extra_files())
      if (const int err = add(name, text)) return fail("-o", results.back()->final, err);
  }
  if (timeline_tmp) {
    std::error_code ec;
    const std::uint64_t bytes = timeline_tmp->in_place ? 0 : fs::file_size(timeline_tmp->path, ec);
    if (const int err = timeline_tmp->commit()) return fail("--timeline", timeline_file, err);
    std::cerr << "Timeline written to " << timeline_file << " (" << events << " events";
    if (bytes) std::cerr << ", " << bytes << " bytes";
    std::cerr << ", passes " << o.timeline.first_step << ".." << o.timeline.last_step << ")\n";
  }
  for (auto& r : results)
    if (const int err = r->commit()) return fail("-o", r->final, err);
  if (!o.quiet)
    if (const int err = print(report)) {
      std::fprintf(stderr, "kelle-vp: error: stdout: cannot write the output (%s)\n", std::strerror(err));
      return 2;
    }
  if (!o.outdir.empty()) std::cerr << "Results written to " << o.outdir << "/\n";
  return 0;
}

// A whole number in [min, max] for an option (CLI11 would wrap "-1" around to 2^64 - 1).
CLI::Validator whole(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        const bool digits = !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE || v < min || v > max)
          return "expected a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "], got '" + s + "'";
        return {};
      },
      "UINT", "whole");
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
  if (const int err = print(o.json ? r["op"].dump(2) + "\n" : p.report())) {
    std::fprintf(stderr, "kelle-vp: error: stdout: cannot write the output (%s)\n", std::strerror(err));
    return 2;
  }
  return r["op"]["status"] == "ok" ? 0 : 1;
}

// What a command printed on stdout (the report, a listing, check's line) is an output too: a write
// that failed (a full disk) is an error with the system's reason.
struct export_options {
  kelle::fn::attention_export_args args;
  std::string out;
  bool force = false;
  // --synthetic: the synthetic source's logits instead (the same statistics measured on both).
  bool synthetic = false;
  unsigned layers = 4, heads = 4;
  std::vector<std::string> params;  // its keys, e.g. head_sharing=0.9
};

// kelle-vp export-attention: the trace is written under a temporary name and renamed when whole;
// an existing file is replaced only with --force.
int export_attention(const export_options& o) {
  const fs::path out(o.out);
  std::error_code ec;
  if (fs::is_directory(out, ec)) throw kelle::config_error("-o " + o.out + ": is a folder; expected a .katt file");
  if (fs::exists(out, ec) && !special_file(out) && !o.force)
    throw kelle::config_error("-o " + o.out + ": exists; give --force to replace it");
  kelle::attention_trace t;
  if (o.synthetic) {
    if (!o.args.model.empty() || !o.args.text.empty() || !o.args.tokenizer.empty())
      throw kelle::config_error("--synthetic: the synthetic source needs no --model, --text or --tokenizer");
    std::vector<std::string> ov;
    for (const std::string& p : o.params) ov.push_back("attention." + p);
    kelle::config cfg = kelle::config::from_string("attention: {type: synthetic}\n", "command line", ov);
    const auto src = kelle::make_attention_source({cfg.root().child("attention"), o.layers, o.heads});
    cfg.check_all_used();
    t = kelle::record_attention_trace(*src, o.args.sequences, o.args.tokens);
  } else {
    for (const auto& [opt, f] : {std::pair<const char*, const std::string*>{"--model", &o.args.model},
                                 {"--text", &o.args.text},
                                 {"--tokenizer", &o.args.tokenizer}}) {
      if (f->empty()) throw kelle::config_error(std::string(opt) + ": required (or --synthetic)");
      if (fs::is_directory(*f, ec))
        throw kelle::config_error(std::string(opt) + " " + *f + ": is a folder; expected a file");
    }
    try {
      t = kelle::fn::export_attention(o.args);
    } catch (const std::runtime_error& e) {  // a bad weights, tokenizer or text file, named
      throw kelle::config_error(e.what());
    }
  }
  temp_file f(out, "-o");
  if (const int err = f.write(t.serialise())) throw write_error("-o", out, err);
  if (const int err = f.commit()) throw write_error("-o", out, err);
  return print(o.out + ": " + std::to_string(t.sequences) + " sequence(s) x " + std::to_string(t.layers) +
               " layers x " + std::to_string(t.heads) + " heads x " + std::to_string(t.tokens) + " tokens\n");
}

// kelle-vp estimate: the first-order model (firmware/llm/estimate.h) of one scenario, or of one
// design per line of --designs (JSON objects of key.path: value overrides, or {"id": ...,
// "overrides": {...}}), printed as JSON lines or CSV. A design the scenario's rules refuse gets
// its error in its line ("error"); a line that is not such an object is an input error.
struct estimate_options {
  std::string scenario;
  std::vector<std::string> overrides;
  std::vector<std::string> overlays;  // --overlay files, merged over the scenario before -p
  std::string designs;  // "" (one design), a file, or "-" (stdin)
  bool json = false, csv = false;
};

// The key paths of a design's overrides (system= selects files and is no key path).
std::vector<std::string> override_keys(const nlohmann::json& ov) {
  std::vector<std::string> keys;
  for (auto it = ov.begin(); it != ov.end(); ++it)
    if (it.key() != "system") keys.push_back(it.key());
  return keys;
}

std::string override_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// The estimate's JSON flattened to dotted columns (CSV).
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

std::string csv_cell(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string estimate_summary(const nlohmann::json& r) {
  char buf[1024];
  const auto& l = r["latency_s"];
  const auto& fit = r["dram_fit"];
  std::snprintf(buf, sizeof buf,
                "First-order estimate (no simulation): system %s, %s, batch %llu, context %llu + decode %llu\n"
                "  latency            prefill %.4g ms, decode %.4g ms (%.4g ms per step), total %.4g ms\n"
                "  roofline           prefill bound %.4g ms (%s), decode bound %.4g ms (%s)\n"
                "  energy             %.4g J in all, %.4g mJ per generated token\n"
                "  area               %.4g mm2 on chip\n"
                "  DRAM               weights %.4g MB + KV %.4g MB of %.4g MB: %s\n",
                r["system"].get<std::string>().c_str(), r["llm"]["model"].get<std::string>().c_str(),
                r["llm"]["batch"].get<unsigned long long>(), r["llm"]["context_len"].get<unsigned long long>(),
                r["llm"]["decode_len"].get<unsigned long long>(), l["prefill"].get<double>() * 1e3,
                l["decode"].get<double>() * 1e3, l["per_decode_step"].get<double>() * 1e3, l["total"].get<double>() * 1e3,
                r["phases"]["prefill"]["bound_s"].get<double>() * 1e3,
                r["phases"]["prefill"]["bottleneck"].get<std::string>().c_str(),
                r["phases"]["decode"]["bound_s"].get<double>() * 1e3,
                r["phases"]["decode"]["bottleneck"].get<std::string>().c_str(), r["energy_J"]["total"].get<double>(),
                r["energy_per_token_J"].get<double>() * 1e3, r["area_mm2"]["total"].get<double>(),
                fit["weights_bytes"].get<double>() / 1e6, fit["kv_bytes"].get<double>() / 1e6,
                fit["capacity_bytes"].get<double>() / 1e6, fit["fits"].get<bool>() ? "fits" : "does not fit");
  std::string out = buf;
  out += "  energy by component\n";
  for (auto it = r["energy_J"].begin(); it != r["energy_J"].end(); ++it)
    if (it.key() != "total") {
      std::snprintf(buf, sizeof buf, "    %-28s %10.4g J\n", it.key().c_str(), it.value().get<double>());
      out += buf;
    }
  return out;
}

int stdout_error(int err) {
  std::fprintf(stderr, "kelle-vp: error: stdout: cannot write the output (%s)\n", std::strerror(err));
  return 2;
}

int estimate(const estimate_options& o) {
  kelle::first_order_estimate est;
  if (o.designs.empty()) {
    if (o.csv) throw kelle::config_error("--csv: needs --designs (one row per design)");
    auto cfg = std::make_shared<kelle::config>(kelle::config::load(o.scenario, o.overrides, o.overlays));
    const auto r = est.evaluate(cfg);
    std::vector<std::string> sys, keys;
    for (const std::string& a : o.overrides) {
      const std::string k = a.substr(0, a.find('='));
      if (k == "system") sys.push_back(a);
      else keys.push_back(k);
    }
    cfg->check_override_paths(kelle::config::load(o.scenario, sys, o.overlays), keys, "command line -p");
    if (const int err = print(o.json ? r.dump(2) + "\n" : estimate_summary(r))) return stdout_error(err);
    return 0;
  }
  if (o.json) throw kelle::config_error("--json: with --designs every design is one JSON line already");
  std::ifstream file;
  if (o.designs != "-") {
    file.open(o.designs);
    if (!file) throw kelle::config_error("--designs " + o.designs + ": cannot read the file (" + std::strerror(errno) + ")");
  }
  std::istream& in = o.designs == "-" ? std::cin : file;
  const std::string where = "--designs " + (o.designs == "-" ? std::string("stdin") : o.designs);
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> columns;
  std::map<std::string, kelle::config> bases;  // the scenario loaded with each system= a design names
  std::string line, out;
  std::uint64_t n = 0, errors = 0, line_no = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json d;
    try {
      d = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw kelle::config_error(where + ":" + std::to_string(line_no) + ": expected a JSON object of key.path: value (" +
                                e.what() + ")");
    }
    if (!d.is_object())
      throw kelle::config_error(where + ":" + std::to_string(line_no) + ": expected a JSON object of key.path: value");
    nlohmann::json id = line_no, ov = d;
    if (d.contains("overrides")) {
      ov = d["overrides"];
      if (d.contains("id")) id = d["id"];
      if (!ov.is_object())
        throw kelle::config_error(where + ":" + std::to_string(line_no) + ": overrides: expected a map of key.path: value");
    }
    std::vector<std::string> p = o.overrides;
    for (auto it = ov.begin(); it != ov.end(); ++it) {
      if (it.value().is_object() || it.value().is_array() || it.value().is_null())
        throw kelle::config_error(where + ":" + std::to_string(line_no) + ": " + it.key() +
                                  ": expected a number, a string or a boolean");
      p.push_back(it.key() + "=" + override_text(it.value()));
    }
    nlohmann::json r;
    std::shared_ptr<kelle::config> cfg;
    const kelle::config* base_cfg = nullptr;
    try {
      // The scenario's files are read once per system a design names (system=NAME selects
      // them); each design is a copy with its overrides.
      std::string sys;
      std::vector<std::string> rest;
      for (const std::string& a : p) {
        if (a.rfind("system=", 0) == 0) sys = a;
        else rest.push_back(a);
      }
      auto base = bases.find(sys);
      if (base == bases.end())
        base = bases.emplace(sys, kelle::config::load(o.scenario,
                                                      sys.empty() ? std::vector<std::string>{} : std::vector<std::string>{sys},
                                                      o.overlays)).first;
      cfg = std::make_shared<kelle::config>(base->second.with_overrides(rest));
      base_cfg = &base->second;
      r = est.evaluate(cfg);
    } catch (const kelle::config_error& e) {
      r = {{"error", one_line(e.what())}};
      ++errors;
      cfg.reset();
    }
    // A misspelt key is an input error, not a design the rules refuse.
    if (cfg) cfg->check_override_paths(*base_cfg, override_keys(ov), where + ":" + std::to_string(line_no));
    r["id"] = id;
    ++n;
    if (o.csv) {
      std::map<std::string, std::string> flat;
      flatten(r, "", flat);
      for (const auto& kv : flat)
        if (std::find(columns.begin(), columns.end(), kv.first) == columns.end()) columns.push_back(kv.first);
      rows.push_back(std::move(flat));
    } else {
      out += r.dump() + "\n";
      if (out.size() > (1u << 16)) {
        if (const int err = print(out)) return stdout_error(err);
        out.clear();
      }
    }
  }
  if (o.csv) {
    std::sort(columns.begin(), columns.end(), [](const std::string& a, const std::string& b) {
      return (a == "id") != (b == "id") ? a == "id" : a < b;
    });
    for (std::size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + csv_cell(columns[i]);
    out += "\n";
    for (const auto& r : rows) {
      for (std::size_t i = 0; i < columns.size(); ++i) {
        const auto it = r.find(columns[i]);
        out += (i ? "," : "") + (it == r.end() ? std::string() : csv_cell(it->second));
      }
      out += "\n";
    }
  }
  if (const int err = print(out)) return stdout_error(err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "estimate: %llu designs (%llu refused) in %.3f s: %.0f designs/s\n",
               static_cast<unsigned long long>(n), static_cast<unsigned long long>(errors), s, s > 0 ? n / s : 0.0);
  return 0;
}

int checked_stdout(int rc) {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    const int err = errno ? errno : EIO;
    std::fprintf(stderr, "kelle-vp: error: stdout: cannot write the output (%s)\n", std::strerror(err));
    return rc ? rc : 2;
  }
  return rc;
}

std::string one_line(std::string m) {
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return m;
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
  const char* overlay_help = "merge a YAML file of keys over the scenario, its system and technology, before -p (repeatable)";
  run_cmd->add_option("--overlay", ro.overlays, overlay_help);
  auto* outdir_opt = run_cmd->add_option("-o,--outdir", ro.outdir, "write results.json and report.txt into this folder");
  run_cmd->add_flag("--force", ro.force, "overwrite results already in the output folder");
  run_cmd->add_flag("-q,--quiet", ro.quiet, "do not print the report");
  auto* timeline_opt = run_cmd->add_option(
      "--timeline", ro.timeline.path, "write a Chrome/Perfetto trace (JSON) of the run to this file (docs/timeline.md)");
  auto* steps_opt = run_cmd->add_option(
      "--timeline-steps", ro.timeline_steps,
      "passes the timeline records, A:B inclusive (0 is the prefill, N decode step N); default 0:2");
  run_cmd->add_option("--timeline-layer", ro.timeline.layer, "layer whose activation lifetimes the timeline draws; default 0")
      ->check(whole(0, 1u << 16));
  run_cmd->add_option("--timeline-max-events", ro.timeline.max_events,
                      "the timeline stops recording after this many events; default 2000000")
      ->check(whole(1, std::uint64_t(1) << 40));
  run_cmd->add_option("--timeline-gap-ns", ro.timeline.gap_ns,
                      "a memory's busy span closes after this idle gap, ns; default 5000");
  std::vector<std::string> plugins;
  const char* plugin_help = "load a plugin (shared library) first (repeatable)";
  run_cmd->add_option("--plugin", plugins, plugin_help);

  run_options co;
  co.check_only = true;
  auto* check_cmd = app.add_subcommand(
      "check", "load, validate and elaborate a scenario without simulating it (exit 0: it would run)");
  check_cmd->add_option("scenario", co.scenario, "scenario file (YAML)")->required();
  check_cmd->add_option("-p,--param", co.overrides, "override a key: key.path=value (repeatable)");
  check_cmd->add_option("--overlay", co.overlays, overlay_help);
  check_cmd->add_option("--plugin", plugins, plugin_help);

  std::string kind;
  auto* list_cmd = app.add_subcommand("list", "print the registered names of a kind");
  list_cmd->add_option("kind", kind, "memories, workloads, ... ('kinds' or nothing: every kind)");
  list_cmd->add_option("--plugin", plugins, plugin_help);

  op_options oo;
  auto* op_cmd = app.add_subcommand("op", "run one command on a compute block and print its cost");
  op_cmd->add_option("name", oo.name, "the command: gemm, gemm_transposed, softmax, ...")->required();
  const std::uint64_t dim_max = std::uint64_t(1) << 24;
  op_cmd->add_option("--m", oo.m, "rows M (tokens)")->check(whole(1, dim_max));
  op_cmd->add_option("--k", oo.k, "reduction length / row length K")->check(whole(1, dim_max));
  op_cmd->add_option("--n", oo.n, "output columns N")->check(whole(1, dim_max));
  op_cmd->add_option("--extra", oo.extra, "stacked recompute rows (gemm)")->check(whole(0, dim_max));
  op_cmd->add_option("--system", oo.system, "built-in system name or system file");
  op_cmd->add_option("-p,--param", oo.overrides, "override a key: key.path=value (repeatable)");
  op_cmd->add_flag("--json", oo.json, "print one JSON object (cycles, utilization, energy_J, ...)");
  op_cmd->add_option("--plugin", plugins, plugin_help);

  export_options eo;
  auto* export_cmd = app.add_subcommand(
      "export-attention", "write a trained model's attention over a text as an attention trace (.katt)");
  export_cmd->add_option("--model", eo.args.model, "weights file (safetensors or llama2.c)");
  export_cmd->add_option("--text", eo.args.text, "the text (the trace's tokens come from it)");
  export_cmd->add_option("--tokenizer", eo.args.tokenizer, "llama2.c tokenizer.bin of the model");
  export_cmd->add_flag("--synthetic", eo.synthetic, "the synthetic attention source instead of a model");
  export_cmd->add_option("--layers", eo.layers, "--synthetic: layers")->check(whole(1, 1024));
  export_cmd->add_option("--heads", eo.heads, "--synthetic: query heads")->check(whole(1, 1024));
  export_cmd->add_option("-p,--param", eo.params, "--synthetic: a key of the source, e.g. head_sharing=0.9");
  export_cmd->add_option("--tokens", eo.args.tokens, "tokens per sequence")->check(whole(1, 1u << 16));
  export_cmd->add_option("--sequences", eo.args.sequences, "sequences: consecutive windows of the text")
      ->check(whole(1, 1024));
  export_cmd->add_option("-o,--out", eo.out, "the trace file to write")->required();
  export_cmd->add_flag("--force", eo.force, "replace the file if it exists");

  estimate_options eso;
  auto* estimate_cmd = app.add_subcommand(
      "estimate", "the first-order model of a scenario's hardware, no simulation (latency, energy, area, DRAM fit)");
  estimate_cmd->add_option("scenario", eso.scenario, "scenario file (YAML)")->required();
  estimate_cmd->add_option("-p,--param", eso.overrides, "override a key: key.path=value (repeatable; every design)");
  estimate_cmd->add_option("--overlay", eso.overlays, overlay_help);
  estimate_cmd->add_flag("--json", eso.json, "print the estimate as JSON");
  estimate_cmd->add_option("--designs", eso.designs,
                           "one design per line, a JSON object of key.path: value overrides ('-': stdin); "
                           "prints one JSON line per design");
  estimate_cmd->add_flag("--csv", eso.csv, "with --designs: one CSV row per design instead");
  estimate_cmd->add_option("--plugin", plugins, plugin_help);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The parser's own message on one line, in the platform's form.
    std::string m = e.what();
    for (char& c : m)
      if (c == '\n') c = ' ';
    while (!m.empty() && m.back() == ' ') m.pop_back();
    std::fprintf(stderr, "kelle-vp: error: command line: %s (kelle-vp --help)\n", m.c_str());
    return 2;
  }
  ro.outdir_given = outdir_opt->count() > 0;
  ro.timeline_given = timeline_opt->count() > 0;
  ro.steps_given = steps_opt->count() > 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_signal);
  try {
    for (const auto& p : plugins) kelle::load_plugin(p, "command line --plugin");
    if (*list_cmd) return checked_stdout(list(kind));
    if (*op_cmd) return checked_stdout(op(oo));
    if (*export_cmd) return checked_stdout(export_attention(eo));
    if (*estimate_cmd) return checked_stdout(estimate(eso));
    if (*check_cmd) return checked_stdout(run(co));
    return checked_stdout(run(ro));
  } catch (const kelle::config_error& e) {
    std::fprintf(stderr, "kelle-vp: error: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const fs::filesystem_error& e) {
    std::fprintf(stderr, "kelle-vp: error: %s: %s\n", e.path1().string().c_str(), e.code().message().c_str());
    return 2;
  } catch (const sc_core::sc_report& e) {
    std::fprintf(stderr, "kelle-vp: error: %s: %s\n", e.get_msg_type(), one_line(e.get_msg()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kelle-vp: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kelle-vp: error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}

int main(int argc, char* argv[]) {
  kelle::setup_systemc_process();
  return sc_core::sc_elab_and_sim(argc, argv);
}
