// The LPDDR4 DRAM model: address mapping, unloaded latencies (closed row, row hit, row conflict,
// writes), bank conflicts, outstanding requests, refresh, streaming bandwidth against the
// analytical expectation, convergence across transaction sizes, and energy accounting.
// The formulas are those of docs/models/memory-lpddr4.md.
#include <catch2/catch.hpp>

#include "models/memory/lpddr4/lpddr4.h"
#include "vp/platform.h"
#include "tests/support/dram_bench.h"
#include "tests/support/test_initiator.h"

#include <algorithm>

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_NS;
using sc_core::SC_US;

namespace {

// 1 GiB of LPDDR4 at 4000 MT/s (tCK 0.5 ns: every timing is a whole number of ps), 8 x16
// channels, 8 banks, 2 KiB rows, 64 B channel interleave, behind a zero-latency unlimited
// router, so the times below are the memory's alone. All other timings are the defaults:
// tRCD 18, tRP 18, tRAS 42, RL 36 clk = 18, WL 18 clk = 9, tRTP 7.5, tWR 18, tWTR 10, tRRD 10,
// tFAW 40, tRFC 380, tREFI 3904 ns; a BL16 burst of 32 B takes 4 ns.
const std::string yaml =
    test::dram_scenario("model: lpddr4, capacity_MiB: 1024, data_rate_MTps: 4000", "type: test_script");

constexpr double tB = 4, tRCD = 18, tRP = 18, tRAS = 42, RL = 18, WL = 9, tWTR = 10, tRRD = 10,
                 tRFC = 380;
constexpr std::uint64_t stripe = 8 * 64;         // one 64 B chunk in each channel
constexpr std::uint64_t next_bank = 8 * 2048;    // same channel and row index, next bank
constexpr std::uint64_t next_row = 8 * 8 * 2048;  // same channel and bank, next row

using test::ns;
const auto stat_of = test::dram_stat;
lpddr4& dram(test::bench& b) { return test::dram_of(*b.p); }

}  // namespace

TEST_CASE("lpddr4: peak bandwidth and the row:bank:column:channel address mapping", "[lpddr4]") {
  test::bench b(yaml);
  const lpddr4& m = dram(b);
  CHECK(m.peak_bandwidth_Bps() == Approx(4000e6 * 2 * 8));  // data rate x 16 bit x 8 channels
  CHECK(m.burst_bytes() == 32);
  auto at = [&](std::uint64_t a) {
    const auto l = m.decode(a);
    return std::vector<std::uint64_t>{l.channel, l.bank, l.row, l.column};
  };
  CHECK(at(0) == std::vector<std::uint64_t>{0, 0, 0, 0});
  CHECK(at(64) == std::vector<std::uint64_t>{1, 0, 0, 0});         // next channel
  CHECK(at(7 * 64 + 5) == std::vector<std::uint64_t>{7, 0, 0, 5});
  CHECK(at(stripe) == std::vector<std::uint64_t>{0, 0, 0, 64});    // back to channel 0
  CHECK(at(next_bank) == std::vector<std::uint64_t>{0, 1, 0, 0});  // a full row of every channel
  CHECK(at(next_row) == std::vector<std::uint64_t>{0, 0, 1, 0});
  CHECK(at(next_row + next_bank + 3 * 64) == std::vector<std::uint64_t>{3, 1, 1, 0});
}

TEST_CASE("lpddr4: idle reads take tRCD + RL + bursts x tBURST, RL + bursts x tBURST on a hit",
          "[lpddr4]") {
  test::bench b(yaml);
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  ti.read(0, 64);                                // closed row: ACT, RD
  ti.read(stripe, 64, sc_time(100, SC_NS));      // same row of channel 0: a hit
  ti.read(next_row, 64, sc_time(150, SC_NS));    // another row of the same bank: PRE, ACT, RD
  ti.read(64, 32, sc_time(160, SC_NS));          // one burst, closed row of channel 1
  b.p->run();
  using rs = lpddr4::row_state;
  CHECK(ti[0].latency() == m.unloaded_latency(tlm::TLM_READ_COMMAND, 2, rs::closed));
  CHECK(ti[1].latency() == m.unloaded_latency(tlm::TLM_READ_COMMAND, 2, rs::hit));
  CHECK(ti[2].latency() == m.unloaded_latency(tlm::TLM_READ_COMMAND, 2, rs::conflict));
  CHECK(ti[3].latency() == m.unloaded_latency(tlm::TLM_READ_COMMAND, 1, rs::closed));
  CHECK(ns(ti[0].latency()) == Approx(tRCD + RL + 2 * tB));  // 44 ns
  CHECK(ns(ti[1].latency()) == Approx(RL + 2 * tB));         // 26 ns
  CHECK(ns(ti[2].latency()) == Approx(tRP + tRCD + RL + 2 * tB));
  CHECK(ns(ti[3].latency()) == Approx(tRCD + RL + tB));
  const auto r = b.p->results();
  CHECK(stat_of(r, "activations") == 3);
  CHECK(stat_of(r, "row_misses") == 3);
  CHECK(stat_of(r, "row_conflicts") == 1);
  CHECK(stat_of(r, "precharges") == 1);
  CHECK(stat_of(r, "row_hits") == 1 + 2 + 1);  // per burst: the bursts after each ACT, and the hit
  CHECK(stat_of(r, "row_hit_rate") == Approx(4.0 / 7.0));
  CHECK(stat_of(r, "read_bursts") == 7);
}

TEST_CASE("lpddr4: a request spread over all channels takes the time of its largest share",
          "[lpddr4]") {
  test::bench b(yaml, {"system.memories.dram.refresh=false"});  // no window in the way
  auto& ti = b.init();
  ti.read(0, 4096);                          // 512 B = 16 bursts in each channel
  ti.read(next_bank, 4096, sc_time(1, SC_US));            // bank 1
  ti.read(2 * next_bank + 32, 4096, sc_time(2, SC_US));   // bank 2, unaligned: same shares
  b.p->run();
  CHECK(ns(ti[0].latency()) == Approx(tRCD + RL + 16 * tB));
  CHECK(ns(ti[1].latency()) == Approx(tRCD + RL + 16 * tB));
  // Channel 0 gets 32 + 7 x 64 + 32 B at channel addresses [32, 544): bursts 1..16 = 16 bursts.
  CHECK(ns(ti[2].latency()) == Approx(tRCD + RL + 16 * tB));
}

TEST_CASE("lpddr4: two requests to one bank's rows take longer than to two banks", "[lpddr4]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(0, 64);                    // channel 0, bank 0, row 0
  ti.read(next_row, 64);             // channel 0, bank 0, row 1: waits tRAS, then PRE + ACT
  ti.read(64, 64);                   // channel 1, bank 0, row 0
  ti.read(64 + next_bank, 64);       // channel 1, bank 1, row 0: ACT tRRD after the first
  b.p->run();
  CHECK(ns(ti[0].latency()) == Approx(tRCD + RL + 2 * tB));
  CHECK(ns(ti[1].latency()) == Approx(tRAS + tRP + tRCD + RL + 2 * tB));  // 104 ns
  CHECK(ns(ti[2].latency()) == Approx(tRCD + RL + 2 * tB));
  CHECK(ns(ti[3].latency()) == Approx(tRRD + tRCD + RL + 2 * tB));        // 54 ns
  CHECK(ti[1].latency() > ti[3].latency());
  const auto r = b.p->results();
  CHECK(stat_of(r, "row_conflicts") == 1);
  CHECK(stat_of(r, "activations") == 4);
}

TEST_CASE("lpddr4: outstanding requests overlap across channels and share a channel's bus",
          "[lpddr4]") {
  test::bench b(yaml);
  auto& ti = b.init();
  for (unsigned c = 0; c < 8; ++c) ti.read(c * 64, 64);       // one per channel
  for (unsigned k = 1; k <= 3; ++k) ti.read(k * stripe, 64);  // channel 0, same row: hits
  b.p->run();
  for (unsigned c = 0; c < 8; ++c) CHECK(ns(ti[c].latency()) == Approx(tRCD + RL + 2 * tB));
  // In order behind the first: bursts back to back on channel 0's bus.
  for (unsigned k = 1; k <= 3; ++k) CHECK(ns(ti[7 + k].latency()) == Approx(tRCD + RL + (k + 1) * 2 * tB));
  const auto r = b.p->results();
  CHECK(stat_of(r, "activations") == 8);
  CHECK(stat_of(r, "row_hits") == 8 + 6);
}

TEST_CASE("lpddr4: activations of a channel respect tRRD and tFAW", "[lpddr4]") {
  test::bench b(yaml, {"system.memories.dram.tFAW_ns=80"});
  auto& ti = b.init();
  for (unsigned k = 0; k < 5; ++k) ti.read(k * next_bank, 64);  // banks 0..4 of channel 0
  b.p->run();
  // ACTs at 0, 10, 20, 30 (tRRD), the fifth at 0 + tFAW = 80; data on one bus.
  CHECK(ns(ti[0].begin_resp) == Approx(tRCD + RL + 2 * tB));
  CHECK(ns(ti[1].begin_resp) == Approx(tRRD + tRCD + RL + 2 * tB));
  CHECK(ns(ti[3].begin_resp) == Approx(3 * tRRD + tRCD + RL + 2 * tB));
  CHECK(ns(ti[4].begin_resp) == Approx(80 + tRCD + RL + 2 * tB));
}

TEST_CASE("lpddr4: an idle write takes tRCD + WL + bursts and a read after it waits tWTR", "[lpddr4]") {
  test::bench b(yaml);
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  ti.write(0, std::vector<unsigned char>(64, 0xab));
  ti.read(stripe, 64);  // same row: a hit, but its RD waits tWTR after the write data
  b.p->run();
  CHECK(ti[0].latency() == m.unloaded_latency(tlm::TLM_WRITE_COMMAND, 2, lpddr4::row_state::closed));
  CHECK(ns(ti[0].latency()) == Approx(tRCD + WL + 2 * tB));               // 35 ns
  CHECK(ns(ti[1].latency()) == Approx(tRCD + WL + 2 * tB + tWTR + RL + 2 * tB));
  const auto r = b.p->results();
  CHECK(stat_of(r, "write_bursts") == 2);
  CHECK(stat_of(r, "read_bursts") == 2);
}

TEST_CASE("lpddr4: refresh blocks a channel for tRFC and closes its rows", "[lpddr4]") {
  test::bench b(yaml, {"system.memories.dram.refresh_alignment=staggered"});
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  const double ph0 = ns(m.refresh_phase(0)), ph1 = ns(m.refresh_phase(1));
  REQUIRE(ph0 == Approx(3904.0 / 16));      // staggered: (c + 1/2) tREFI / channels
  REQUIRE(ph1 == Approx(3 * 3904.0 / 16));
  ti.read(0, 64);                                         // opens row 0 of channel 0
  ti.read(stripe, 64, sc_time(ph0 + tRFC + 100, SC_NS));  // after channel 0's window: closed again
  ti.read(64, 64, sc_time(ph1 + 50, SC_NS));              // inside channel 1's window: waits
  b.p->run();
  CHECK(ns(ti[1].latency()) == Approx(tRCD + RL + 2 * tB));  // not the 26 ns of a hit
  CHECK(ns(ti[2].begin_resp) == Approx(ph1 + tRFC + tRCD + RL + 2 * tB));
  const auto r = b.p->results();
  CHECK(stat_of(r, "precharges") == 1);      // channel 0's open row, closed for its refresh
  CHECK(stat_of(r, "refresh_stalls") == 1);  // only the request that met a window
  const double end_ns = r["sim_time_s"].get<double>() * 1e9;
  double expected = 0;
  for (unsigned c = 0; c < 8; ++c) {
    const double p = ns(m.refresh_phase(c));
    if (end_ns >= p) expected += std::floor((end_ns - p) / 3904) + 1;
  }
  CHECK(stat_of(r, "refreshes") == expected);
  CHECK(expected == 2);  // channels 0 and 1 have started one window by then
}

namespace {

// A sequential stream through the traffic generator on the system's DRAM configuration.
nlohmann::json stream(const std::vector<std::string>& overrides) {
  return test::run_dram(
      test::dram_scenario("model: lpddr4, capacity_MiB: 16384, data_rate_MTps: 4000",
                          "type: traffic, target: dram, burst_bytes: 4096, total_bytes: 16777216, outstanding: 16"),
      overrides);
}

}  // namespace

TEST_CASE("lpddr4: a stream of 4 KiB reads reaches peak x refresh efficiency", "[lpddr4]") {
  const auto r = stream({});
  const double got = r["traffic"]["bandwidth_GBps"].get<double>();
  const double expected = r["expected_read_GBps"].get<double>();
  // peak 64 GB/s x (1 - (tRFC + tRCD + RL) / tREFI) x 1 (row switches hidden by bank interleaving)
  CHECK(expected == Approx(64 * (1 - (380 + 18 + 18) / 3904.0)));
  CHECK(got == Approx(expected).epsilon(0.05));
  CHECK(got < 64);
  CHECK(stat_of(r, "row_hit_rate") > 0.95);
}

TEST_CASE("lpddr4: a stream of 1 MiB reads reaches the same bandwidth", "[lpddr4]") {
  const auto r = stream({"workload.burst_bytes=1048576", "workload.outstanding=4"});
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() ==
        Approx(r["expected_read_GBps"].get<double>()).epsilon(0.05));
}

TEST_CASE("lpddr4: a stream of writes reaches peak x its refresh efficiency", "[lpddr4]") {
  const auto r = stream({"workload.op=write"});
  const double expected = r["expected_write_GBps"].get<double>();
  CHECK(expected == Approx(64 * (1 - (380 + 18 + 9) / 3904.0)));
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() == Approx(expected).epsilon(0.05));
}

TEST_CASE("lpddr4: without refresh a stream reaches the peak", "[lpddr4]") {
  const auto r = stream({"system.memories.dram.refresh=false"});
  CHECK(r["expected_read_GBps"].get<double>() == Approx(64));
  CHECK(r["traffic"]["bandwidth_GBps"].get<double>() == Approx(64).epsilon(0.01));
  CHECK(stat_of(r, "refreshes") == 0);
}

TEST_CASE("lpddr4: the same bytes in 64 B, 4 KiB and 1 MiB requests give the same bandwidth",
          "[lpddr4]") {
  // Three phases, 100 us apart, each streaming the same 2 MiB with up to 256 requests in flight.
  test::bench b(yaml, {"system.memories.dram.queue_depth=256"});
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  const std::uint64_t total = 2 << 20;
  const std::uint64_t sizes[] = {64, 4096, 1 << 20};
  std::vector<std::pair<std::size_t, std::size_t>> phase;
  for (unsigned i = 0; i < 3; ++i) {
    const std::size_t first = ti.size();
    const sc_time at(100.0 * i, SC_US);
    const std::uint64_t base = i * (std::uint64_t{16} << 20);  // fresh rows for each phase
    for (std::uint64_t a = 0; a < total; a += sizes[i]) ti.read(base + a, static_cast<unsigned>(sizes[i]), at);
    phase.emplace_back(first, ti.size());
  }
  b.p->run();
  std::vector<double> bw;
  for (unsigned i = 0; i < 3; ++i) {
    sc_time last = sc_core::SC_ZERO_TIME;
    for (std::size_t k = phase[i].first; k < phase[i].second; ++k) {
      REQUIRE(ti[k].status == tlm::TLM_OK_RESPONSE);
      last = std::max(last, ti[k].begin_resp);
    }
    const double t = last.to_seconds() - 100e-6 * i;
    REQUIRE(t < 100e-6);  // the phases did not overlap
    bw.push_back(static_cast<double>(total) / t / 1e9);
  }
  const double expected = m.expected_stream_bandwidth_Bps(tlm::TLM_READ_COMMAND) / 1e9;
  INFO("64 B: " << bw[0] << " GB/s, 4 KiB: " << bw[1] << " GB/s, 1 MiB: " << bw[2]
                << " GB/s, expected " << expected << " GB/s");
  CHECK(bw[0] == Approx(bw[2]).epsilon(0.03));
  CHECK(bw[1] == Approx(bw[2]).epsilon(0.03));
  CHECK(bw[0] == Approx(bw[1]).epsilon(0.03));
  for (double x : bw) CHECK(x == Approx(expected).epsilon(0.05));
}

TEST_CASE("lpddr4: energy parts are counts x figures and add up to the total", "[lpddr4]") {
  test::bench b(yaml);
  auto& ti = b.init();
  const lpddr4& m = dram(b);
  ti.read(0, 65536);
  ti.write(1 << 20, std::vector<unsigned char>(65536, 1));
  ti.read(4 << 20, 64, sc_time(20, SC_US));  // long enough for refreshes in every channel
  b.p->run();
  const auto r = b.p->results();
  const auto& tech = r["config"]["tech"]["lpddr4"];
  const auto& e = r["energy_J"]["by_component"];
  const double T = r["sim_time_s"].get<double>();
  const double gib = 1024.0 * 1024 * 1024;
  const double capacity = 1024.0 * 1024 * 1024;  // 1 GiB instance

  CHECK(e["dram.access"].get<double>() ==
        Approx(256 * (stat_of(r, "read_bursts") * tech["read_energy_pJ_per_bit"].get<double>() +
                      stat_of(r, "write_bursts") * tech["write_energy_pJ_per_bit"].get<double>()) *
               1e-12));
  CHECK(stat_of(r, "read_bursts") == (65536 + 64) / 32);
  CHECK(stat_of(r, "write_bursts") == 65536 / 32);
  CHECK(e["dram.activate"].get<double>() ==
        Approx(stat_of(r, "activations") * tech["activate_energy_nJ"].get<double>() * 1e-9));
  // Background = power x simulated time, the power scaled by capacity from the reference device.
  const double P = tech["background_power_mW"].get<double>() * 1e-3 * capacity /
                   (tech["reference_capacity_MiB"].get<double>() * 1024 * 1024);
  CHECK(m.background_power_W() == Approx(P));
  CHECK(e["dram.background"].get<double>() == Approx(P * T));
  CHECK(T > 20e-6);
  // Refresh = refreshes x energy of one REFab of a channel (capacity / channels).
  CHECK(stat_of(r, "refreshes") >= 8 * 5);
  CHECK(m.refresh_energy_J() ==
        Approx(tech["refresh_energy_nJ"].get<double>() * 1e-9 * (capacity / 8) / gib));
  CHECK(e["dram.refresh"].get<double>() == Approx(stat_of(r, "refreshes") * m.refresh_energy_J()));
  const double sum = e["dram.access"].get<double>() + e["dram.activate"].get<double>() +
                     e["dram.background"].get<double>() + e["dram.refresh"].get<double>();
  CHECK(r["energy_J"]["total"].get<double>() == Approx(sum));
  CHECK(e.size() == 4);
}

TEST_CASE("lpddr4: an interleave that does not divide the row is a configuration error", "[lpddr4]") {
  CHECK_THROWS_WITH(test::bench(yaml, {"system.memories.dram.channel_interleave_bytes=96"}),
                    Catch::Matchers::Contains("channel_interleave_bytes"));
}

TEST_CASE("lpddr4: a refresh interval too short for a burst is a configuration error", "[lpddr4]") {
  CHECK_THROWS_WITH(test::bench(yaml, {"system.memories.dram.tREFI_ns=400"}),
                    Catch::Matchers::Contains("tREFI_ns"));
}
