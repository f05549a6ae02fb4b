// The timeline trace (docs/timeline.md): the file is trace-event JSON with the expected tracks,
// the step range bounds it, the event cap holds, and the two schedulers' overlap of weight
// fetch (DMA) and compute (RSA) can be read from it.
#include <catch2/catch.hpp>

#include "platform/trace/timeline.h"
#include "tests/support/test_initiator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace kelle;

namespace {

// Runs a small llm scenario with the timeline on in a child process; returns the trace file.
nlohmann::json traced(const std::vector<std::string>& overrides, const std::string& steps,
                      std::uint64_t max_events = 2000000, unsigned layer = 0) {
  const std::string path = "timeline_test_" + std::to_string(getpid()) + ".json";
  const std::string out = test::in_child_process([&] {
    std::vector<std::string> o = {"system.compute.rsa.chunk_bytes=262144",
                                  "system.compute.rsa.weight_buffer_bytes=1048576",
                                  "system.compute.dma.chunk_bytes=1048576",
                                  "workload.progress=false",
                                  "workload.model=llama3.2-3b",
                                  "workload.context_len=16",
                                  "workload.decode_len=3"};
    o.insert(o.end(), overrides.begin(), overrides.end());
    timeline_options t;
    t.path = path;
    std::tie(t.first_step, t.last_step) = parse_step_range(steps);
    t.max_events = max_events;
    t.layer = layer;
    timeline::get().start(t);
    auto cfg = config::from_string("system: kelle_edram\nworkload: {type: llm}\n", "llm.yaml", o);
    platform p(cfg);
    p.run();
    timeline::get().finish();
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    std::remove(path.c_str());
    return s.str();
  });
  if (out.rfind("error: ", 0) == 0) throw std::runtime_error(out);
  return nlohmann::json::parse(out);
}

struct interval {
  double b, e;
};

// Track names: pid -> process name, (pid, tid) -> thread name.
struct tracks {
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  explicit tracks(const nlohmann::json& trace) {
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] != "M") continue;
      if (e["name"] == "process_name") process[e["pid"].get<int>()] = e["args"]["name"];
      if (e["name"] == "thread_name") thread[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
  }
  // The spans of thread `name` of the process whose name starts with `proc`.
  std::vector<interval> spans(const nlohmann::json& trace, const std::string& proc, const std::string& name) const {
    std::vector<interval> v;
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      const int pid = e["pid"], tid = e["tid"];
      if (process.at(pid).rfind(proc, 0) != 0 || thread.at({pid, tid}) != name) continue;
      const double ts = e["ts"];
      v.push_back({ts, ts + e["dur"].get<double>()});
    }
    return v;
  }
};

// Total length of the union of intervals, and of the intersection of two unions.
std::vector<interval> merged(std::vector<interval> v) {
  std::sort(v.begin(), v.end(), [](const interval& a, const interval& b) { return a.b < b.b; });
  std::vector<interval> m;
  for (const auto& i : v)
    if (!m.empty() && i.b <= m.back().e)
      m.back().e = std::max(m.back().e, i.e);
    else
      m.push_back(i);
  return m;
}
double length(const std::vector<interval>& v) {
  double s = 0;
  for (const auto& i : merged(v)) s += i.e - i.b;
  return s;
}
double overlap(const std::vector<interval>& a, const std::vector<interval>& b) {
  const auto ma = merged(a), mb = merged(b);
  double s = 0;
  for (std::size_t i = 0, j = 0; i < ma.size() && j < mb.size();) {
    s += std::max(0.0, std::min(ma[i].e, mb[j].e) - std::max(ma[i].b, mb[j].b));
    if (ma[i].e < mb[j].e)
      ++i;
    else
      ++j;
  }
  return s;
}

std::set<std::string> x_names(const nlohmann::json& trace, const tracks& t, const std::string& proc,
                              const std::string& thread) {
  std::set<std::string> s;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && t.process.at(e["pid"]).rfind(proc, 0) == 0 &&
        t.thread.at({e["pid"].get<int>(), e["tid"].get<int>()}) == thread)
      s.insert(e["name"].get<std::string>());
  return s;
}

}  // namespace

TEST_CASE("timeline: the file is trace-event JSON with a named track per module", "[timeline]") {
  const auto trace = traced({}, "0:2");
  REQUIRE(trace.contains("traceEvents"));
  CHECK(trace["displayTimeUnit"] == "ns");
  const tracks t(trace);
  std::map<std::pair<int, int>, std::vector<interval>> by_track;
  std::size_t x = 0, c = 0;
  for (const auto& e : trace["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("ts"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e.contains("tid"));
    REQUIRE(e.contains("name"));
    const std::string ph = e["ph"];
    REQUIRE((ph == "X" || ph == "M" || ph == "C"));
    if (ph == "X") {
      ++x;
      REQUIRE(e["dur"].get<double>() >= 0);
      REQUIRE(e["ts"].get<double>() >= 0);
      // Every track an event is on has a name (and its process too).
      REQUIRE(t.thread.count({e["pid"].get<int>(), e["tid"].get<int>()}) == 1);
      REQUIRE(t.process.count(e["pid"].get<int>()) == 1);
      const double ts = e["ts"];
      by_track[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + e["dur"].get<double>()});
    } else if (ph == "C") {
      ++c;
      REQUIRE(e["args"].size() == 1);
      REQUIRE(e["args"].begin()->is_number());
      REQUIRE(t.process.count(e["pid"].get<int>()) == 1);
    } else {
      REQUIRE(e["args"].is_object());
    }
  }
  CHECK(x > 100);
  CHECK(c > 0);
  // Spans of one track never partly overlap (a viewer would drop them): disjoint or nested.
  for (auto& [k, v] : by_track) {
    INFO(t.process.at(k.first) << " / " << t.thread.at(k));
    std::sort(v.begin(), v.end(), [](const interval& a, const interval& b) { return a.b < b.b || (a.b == b.b && a.e > b.e); });
    std::vector<double> open;  // ends of the enclosing spans
    for (const auto& i : v) {
      while (!open.empty() && open.back() <= i.b + 1e-6) open.pop_back();  // ts are printed to the ps
      if (!open.empty()) REQUIRE(i.e <= open.back() + 1e-6);
      open.push_back(i.e);
    }
  }
  std::set<std::string> names;
  for (const auto& [k, n] : t.thread) names.insert(t.process.at(k.first) + "/" + n);
  for (const char* n : {"compute/rsa", "compute/sfu", "compute/dma", "memory/dram", "memory/weight_sram",
                        "memory/kv_edram", "memory/act_edram", "refresh/kv_edram", "firmware/passes",
                        "firmware/layers", "lifetimes (layer 0)/q", "lifetimes (layer 0)/xn",
                        "lifetimes (layer 0)/scores", "lifetimes (layer 0)/attn", "lifetimes (layer 0)/ffn"}) {
    INFO(n);
    CHECK(names.count(n) == 1);
  }
  // The evictor has a track only when it is given commands: no layer evicts in this run.
  CHECK(names.count("compute/evictor") == 0);
  // The passes of the range, and nothing else.
  CHECK(x_names(trace, t, "firmware", "passes") ==
        std::set<std::string>{"prefill", "decode step 1", "decode step 2"});
  // Commands are named by opcode; layers by number.
  const auto rsa = x_names(trace, t, "compute", "rsa");
  CHECK(rsa.count("gemm") == 1);
  CHECK(rsa.count("gemm_transposed") == 1);
  CHECK(x_names(trace, t, "compute", "dma") == std::set<std::string>{"copy"});
  CHECK(x_names(trace, t, "firmware", "layers").count("layer 27") == 1);
  // Refresh: the KV eDRAM's live bytes and refresh power as counters.
  std::set<std::string> counters;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C") counters.insert(e["name"].get<std::string>());
  CHECK(counters.count("kv_edram live") == 1);
  CHECK(counters.count("kv_edram refresh power") == 1);
}

TEST_CASE("timeline: the step range bounds the recording", "[timeline]") {
  const auto wide = traced({}, "0:3");
  const auto narrow = traced({}, "2:2");
  CHECK(narrow["traceEvents"].size() < wide["traceEvents"].size() / 2);
  // Decode step 2's window, from the wide trace (same simulation).
  const tracks tw(wide), tn(narrow);
  double b = -1, e = -1;
  for (const auto& ev : wide["traceEvents"])
    if (ev["ph"] == "X" && ev["name"] == "decode step 2") {
      b = ev["ts"];
      e = b + ev["dur"].get<double>();
    }
  REQUIRE(b > 0);
  CHECK(x_names(narrow, tn, "firmware", "passes") == std::set<std::string>{"decode step 2"});
  std::size_t inside = 0;
  for (const auto& ev : narrow["traceEvents"]) {
    if (ev["ph"] == "M") continue;
    const double ts = ev["ts"], end = ts + ev.value("dur", 0.0);
    INFO(ev.dump());
    CHECK(ts >= b - 1e-6);
    CHECK(end <= e + 1e-6);
    ++inside;
  }
  CHECK(inside > 50);
}

TEST_CASE("timeline: the event cap stops recording and keeps the file valid", "[timeline]") {
  const auto trace = traced({}, "0:3", 500);
  std::size_t events = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] != "M") ++events;
  CHECK(events == 500);
}

TEST_CASE("timeline: a layer the model does not have is an input error", "[timeline]") {
  CHECK_THROWS_WITH(traced({}, "0:0", 1000, 28), Catch::Contains("--timeline-layer 28: expected a layer in [0, 27]"));
  CHECK_THROWS_WITH(parse_step_range("2:1"), Catch::Contains("expected A:B"));
  CHECK_THROWS_WITH(parse_step_range("x"), Catch::Contains("expected A:B"));
  CHECK(parse_step_range("3") == std::make_pair(3u, 3u));
  CHECK(parse_step_range("0:4") == std::make_pair(0u, 4u));
}

TEST_CASE("timeline: the kelle scheduler overlaps weight fetch and compute, the baseline much less", "[timeline]") {
  // One decode step (weight-bound), read from the two traces: the DMA track is the weight
  // stream, the RSA track the compute. Inside a projection both schedulers double-buffer the
  // tiles; across operations only kelle fetches the next weights while the array computes, so
  // the baseline leaves more compute exposed (RSA busy, DMA idle) and more DMA stalls.
  struct figures {
    double overlap_share, exposed_compute, dma_idle, q_life;
  };
  auto read = [](const nlohmann::json& trace) {
    const tracks t(trace);
    const auto dma = t.spans(trace, "compute", "dma"), rsa = t.spans(trace, "compute", "rsa");
    const auto pass = t.spans(trace, "firmware", "passes");
    const auto q = t.spans(trace, "lifetimes", "q");
    REQUIRE(pass.size() == 1);
    REQUIRE(q.size() == 1);
    const double both = overlap(dma, rsa);
    return figures{both / length(dma), length(rsa) - both, (pass[0].e - pass[0].b) - length(dma), q[0].e - q[0].b};
  };
  const figures k = read(traced({"scheduler=kelle"}, "1:1"));
  const figures b = read(traced({"scheduler=baseline"}, "1:1"));
  INFO("DMA time overlapping the RSA: kelle " << k.overlap_share << ", baseline " << b.overlap_share);
  INFO("RSA time with the DMA idle (us): kelle " << k.exposed_compute << ", baseline " << b.exposed_compute);
  INFO("DMA idle in the step (us): kelle " << k.dma_idle << ", baseline " << b.dma_idle);
  INFO("q lifetime in layer 0 (us): kelle " << k.q_life << ", baseline " << b.q_life);
  CHECK(k.overlap_share > b.overlap_share);
  CHECK(b.exposed_compute > 1.5 * k.exposed_compute);
  CHECK(b.dma_idle > 1.5 * k.dma_idle);
  CHECK(b.q_life > 10 * k.q_life);
}
