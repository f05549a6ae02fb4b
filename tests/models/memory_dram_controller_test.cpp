// The DRAM controller options of the lpddr4 model: FR-FCFS scheduling against FCFS on random
// reads, the read/write turnarounds and write draining of a read/write mix, refresh alignment
// and the lone-read latency against its closed form, strided access (row conflicts).
// The formulas are those of docs/models/memory-lpddr4.md.
#include <catch2/catch.hpp>

#include "models/memory/lpddr4/lpddr4.h"
#include "vp/platform.h"
#include "tests/support/dram_bench.h"
#include "tests/support/test_initiator.h"

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_NS;

namespace {

// The system's DRAM (16 GiB, 8 x16 channels at 4000 MT/s) behind a zero-latency interconnect,
// exercised by the traffic generator: 64 B requests by default.
nlohmann::json traffic_here(const std::vector<std::string>& overrides) {
  return test::run_dram(
      test::dram_scenario("model: lpddr4, capacity_MiB: 16384, data_rate_MTps: 4000, queue_depth: 128",
                          "type: traffic, target: dram, burst_bytes: 64, total_bytes: 2097152, outstanding: 128"),
      overrides);
}

// Each run in a child process: one SystemC kernel per process.
nlohmann::json traffic(const std::vector<std::string>& overrides) {
  return nlohmann::json::parse(test::in_child_process([&] { return traffic_here(overrides).dump(); }));
}

double bw(const nlohmann::json& r) { return r["traffic"]["bandwidth_GBps"].get<double>(); }
const auto stat_of = test::dram_stat;

const std::string bench_yaml =
    test::dram_scenario("model: lpddr4, capacity_MiB: 1024, data_rate_MTps: 4000", "type: test_script");

}  // namespace

TEST_CASE("dram controller: FR-FCFS serves random 64 B reads at least 30 % faster than FCFS",
          "[lpddr4][controller]") {
  const auto fcfs = traffic({"workload.pattern=random"});
  const auto fr = traffic({"workload.pattern=random", "system.memories.dram.scheduling=frfcfs"});
  INFO("fcfs " << bw(fcfs) << " GB/s, frfcfs " << bw(fr) << " GB/s");
  CHECK(bw(fr) >= 1.30 * bw(fcfs));
  CHECK(bw(fr) < 64);
  CHECK(stat_of(fr, "reads") == stat_of(fcfs, "reads"));
}

TEST_CASE("dram controller: FR-FCFS that may bypass no request serves reads as FCFS does",
          "[lpddr4][controller]") {
  const std::vector<std::string> o = {"workload.pattern=random", "workload.total_bytes=262144"};
  auto with = o;
  with.push_back("system.memories.dram.scheduling=frfcfs");
  with.push_back("system.memories.dram.frfcfs_max_bypass=0");
  const auto a = traffic(o), b = traffic(with);
  CHECK(bw(b) == Approx(bw(a)).epsilon(1e-9));
  CHECK(b["traffic"]["latency_avg_ns"].get<double>() == Approx(a["traffic"]["latency_avg_ns"].get<double>()));
  CHECK(stat_of(b, "activations") == stat_of(a, "activations"));
}

TEST_CASE("dram controller: a 2:1 read/write mix loses bandwidth to the bus turnarounds",
          "[lpddr4][controller]") {
  const auto reads = traffic({});
  const auto mix = traffic({"workload.op=mix"});  // read_fraction 2/3
  const auto free_turns = traffic({"workload.op=mix", "system.memories.dram.tWTR_ns=0",
                                   "system.memories.dram.tDQSCK_ns=0", "system.memories.dram.tWPRE_clk=0"});
  INFO("reads " << bw(reads) << ", mix " << bw(mix) << ", mix without tWTR and tRTW " << bw(free_turns));
  CHECK(stat_of(mix, "bus_turnarounds") > 0.5 * stat_of(mix, "writes"));
  CHECK(bw(mix) < 0.85 * bw(reads));
  // Closed form (FCFS, every channel sees read, read, write in turn): per 3 requests of 2 bursts
  // the bus moves 3 x 2 x tBURST and waits tWTR + RL after the write (the RD waits tWTR after
  // the write data) and tRTW before it, all times the refresh efficiency.
  const double eff = 1 - (380 + 18 + 18) / 3904.0, data = 3 * 2 * 4.0;
  CHECK(bw(mix) == Approx(64 * eff * data / (data + 10 + 18 + 4.5)).epsilon(0.03));
  CHECK(bw(free_turns) == Approx(64 * eff * data / (data + 18)).epsilon(0.03));
  CHECK(bw(free_turns) > bw(mix));
  // Write draining (frfcfs) groups the writes: fewer turnarounds, more bandwidth.
  const auto drained = traffic({"workload.op=mix", "system.memories.dram.scheduling=frfcfs"});
  INFO("mix with frfcfs and write draining " << bw(drained));
  CHECK(stat_of(drained, "bus_turnarounds") < 0.5 * stat_of(mix, "bus_turnarounds"));
  CHECK(stat_of(drained, "write_drains") > 0);
  CHECK(bw(drained) > bw(mix));
}

TEST_CASE("dram controller: a write after a read waits the read-to-write turnaround", "[lpddr4][controller]") {
  test::bench b(bench_yaml);
  auto& ti = b.init();
  const auto& t = dynamic_cast<lpddr4&>(*b.p->memory("dram")).timings();
  ti.read(0, 64);                                             // ACT, RD: data [36, 44) ns
  ti.write(8 * 64, std::vector<unsigned char>(64, 1));        // same row: a hit
  b.p->run();
  // tRTW = (RU(3.5 ns / 0.5 ns) + tWPRE 2) clocks = 4.5 ns after the read data ends.
  CHECK(t.tRTW.to_seconds() * 1e9 == Approx(4.5));
  CHECK(ti[1].begin_resp.to_seconds() * 1e9 == Approx(18 + 18 + 2 * 4 + 4.5 + 2 * 4));
  CHECK(stat_of(b.p->results(), "bus_turnarounds") == 1);
}

TEST_CASE("dram controller: with simultaneous refresh a lone read stream meets the closed form",
          "[lpddr4][controller]") {
  // One 64 B request at a time, sequential: row hits, one channel after the other, over ~70
  // refresh intervals.
  const std::vector<std::string> lone = {"workload.outstanding=1", "workload.total_bytes=655360"};
  const auto sim = traffic(lone);
  auto st = lone;
  st.push_back("system.memories.dram.refresh_alignment=staggered");
  const auto stag = traffic(st);
  const double mean = sim["traffic"]["latency_avg_ns"].get<double>();
  const double expected = sim["expected_lone_ns"].get<double>();
  INFO("simultaneous " << mean << " ns, staggered " << stag["traffic"]["latency_avg_ns"].get<double>()
                       << " ns, closed form " << expected << " ns, unloaded " << sim["unloaded_hit_ns"].get<double>());
  // L0 tREFI / (tREFI - tRFC - channels tRCD) = 26 x 3904 / (3904 - 380 - 144) ns
  CHECK(expected == Approx(26.0 * 3904 / (3904 - 380 - 8 * 18)));
  CHECK(mean == Approx(expected).epsilon(0.15));
  CHECK(mean > sim["unloaded_hit_ns"].get<double>());
  // Staggered windows stall a stream that visits every channel eight times per interval.
  CHECK(stag["traffic"]["latency_avg_ns"].get<double>() > mean);
}

TEST_CASE("dram controller: a stride of one bank's rows makes every access a row conflict",
          "[lpddr4][controller]") {
  // 8 channels x 8 banks x 2 KiB: the next row of the same bank of channel 0.
  const auto r = traffic({"workload.pattern=strided", "workload.stride_bytes=131072",
                          "workload.total_bytes=65536", "workload.outstanding=8"});
  CHECK(stat_of(r, "activations") == 1024);
  CHECK(stat_of(r, "row_conflicts") >= 1023 - stat_of(r, "refreshes"));
  const auto seq = traffic({"workload.total_bytes=65536", "workload.outstanding=8"});
  CHECK(bw(r) < 0.5 * bw(seq));
}

TEST_CASE("dram controller: per-bank refresh blocks one bank for tRFCpb, the others go on",
          "[lpddr4][controller]") {
  test::bench b(bench_yaml, {"system.memories.dram.refresh_mode=per_bank"});
  auto& ti = b.init();
  const lpddr4& m = test::dram_of(*b.p);
  const double ph0 = test::ns(m.bank_refresh_phase(0, 0)), ph1 = test::ns(m.bank_refresh_phase(0, 1));
  REQUIRE(ph0 == Approx(3904.0 / 128));       // (0 x 8 + 0 + 1/2) tREFI / (8 banks x 8 channels)
  REQUIRE(ph1 == Approx(3904.0 * 17 / 128));  // the next bank of the channel
  REQUIRE(test::ns(m.bank_refresh_phase(5, 0)) == Approx(ph0));  // simultaneous across channels
  REQUIRE(test::ns(m.timings().tRFCpb) == Approx(190));
  ti.read(8 * 2048, 64, sc_time(50, SC_NS));  // channel 0, bank 1: not refreshing
  ti.read(0, 64, sc_time(50, SC_NS));         // channel 0, bank 0: inside its window
  b.p->run();
  CHECK(test::ns(ti[0].latency()) == Approx(18 + 18 + 2 * 4));
  CHECK(test::ns(ti[1].begin_resp) == Approx(ph0 + 190 + 18 + 18 + 2 * 4));
  const auto r = b.p->results();
  CHECK(stat_of(r, "refresh_stalls") == 1);
  // One window of bank 0 in each of the 8 channels by then (bank 1's start at 518.5 ns).
  CHECK(stat_of(r, "refreshes") == 8);
  CHECK(m.refresh_energy_J() ==
        Approx(r["config"]["tech"]["lpddr4"]["refresh_energy_nJ"].get<double>() * 1e-9 / 8 / 8));
}

TEST_CASE("dram controller: per-bank refresh shortens a lone read stream's stalls",
          "[lpddr4][controller]") {
  const std::vector<std::string> lone = {"workload.outstanding=1", "workload.total_bytes=655360"};
  auto pb = lone;
  pb.push_back("system.memories.dram.refresh_mode=per_bank");
  const auto ab = traffic(lone), perbank = traffic(pb);
  INFO("all-bank " << ab["traffic"]["latency_avg_ns"] << " ns, per-bank " << perbank["traffic"]["latency_avg_ns"] << " ns");
  CHECK(perbank["traffic"]["latency_avg_ns"].get<double>() < ab["traffic"]["latency_avg_ns"].get<double>());
  CHECK(perbank["traffic"]["latency_avg_ns"].get<double>() > ab["unloaded_hit_ns"].get<double>());
  CHECK(stat_of(perbank, "refreshes") > 6 * stat_of(ab, "refreshes"));
}
