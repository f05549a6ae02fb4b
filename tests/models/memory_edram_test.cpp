// The eDRAM array: lazy refresh accounting, refresh occupancy, the retention model.
#include <catch2/catch.hpp>

#include "tests/support/edram_bench.h"

#include <cmath>

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_US;

namespace {

const char* const yaml = test::edram_bench_yaml;

// tech.edram: 1.14 mJ per pass over a 4 MiB array.
const double J_per_bit = 1.14e-3 / (4.0 * 1048576 * 8);

edram& kv(test::bench& b) { return test::kv_edram(b); }

double stat_of(test::bench& b, const char* name) {
  return b.p->results()["stats"]["kv"][name]["value"].get<double>();
}

}  // namespace

TEST_CASE("edram: refresh energy = stored bits x refreshes x energy per refreshed bit", "[edram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(65536, 1));  // written at t = 0
  ti.read(0, 64, sc_time(1000, SC_US));                // the run ends just after 1 ms
  b.p->run();
  CHECK(kv(b).refresh_energy_per_bit_J() == Approx(J_per_bit));
  // Refresh ticks at k x 45 us in (0, 1 ms]: 22 of them.
  const double refreshes = std::floor(1000.0 / 45.0);
  CHECK(refreshes == 22);
  CHECK(stat_of(b, "refreshed_bytes") == Approx(65536 * refreshes));
  CHECK(b.p->results()["energy_J"]["by_component"]["kv.refresh"].get<double>() ==
        Approx(65536 * 8 * refreshes * J_per_bit));
}

TEST_CASE("edram: released data is no longer refreshed and rewriting does not double count", "[edram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(4096, 1));
  ti.write(2048, std::vector<unsigned char>(4096, 2), sc_time(10, SC_US));  // overlaps 2 KiB
  ti.read(0, 64, sc_time(1000, SC_US));
  sc_core::sc_spawn([&b] {
    sc_core::wait(sc_time(500, SC_US));
    kv(b).release(0, 6144);  // everything dead at 500 us
  });
  b.p->run();
  // 6 KiB live from ~0 (4 KiB) and 10 us (2 more KiB) until 500 us: ticks at 45..495 us = 11.
  CHECK(stat_of(b, "refreshed_bytes") == Approx(6144.0 * 11));
  CHECK(kv(b).live_bytes() == 0);
}

TEST_CASE("edram: each region is refreshed at its own interval", "[edram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(1024, 1));
  ti.write(8192, std::vector<unsigned char>(1024, 1));
  ti.read(0, 64, sc_time(3600, SC_US));
  kv(b).set_refresh_interval(8192, 1024, sc_time(360, SC_US));  // before the run: from t = 0
  b.p->run();
  const double ticks45 = std::floor(3600.0 / 45.0), ticks360 = std::floor(3600.0 / 360.0);
  CHECK(stat_of(b, "refreshed_bytes") == Approx(1024 * ticks45 + 1024 * ticks360));
  // The failure rate averages P(45 us) and P(360 us), weighted by stored bit-time.
  const auto& r = kv(b).retention();
  CHECK(stat_of(b, "retention_failure_rate") ==
        Approx((r.failure_probability(45e-6) + r.failure_probability(360e-6)) / 2).epsilon(0.01));
}

TEST_CASE("edram: refresh_scope all refreshes the whole array", "[edram]") {
  test::bench b(yaml, {"system.memories.kv.refresh_scope=all"});
  b.init().read(0, 64, sc_time(450, SC_US));
  b.p->run();
  CHECK(stat_of(b, "refresh_passes") == Approx(10));
  CHECK(b.p->results()["energy_J"]["by_component"]["kv.refresh"].get<double>() == Approx(10 * 1.14e-3));
}

TEST_CASE("edram: refresh occupies the banks and lowers the streaming bandwidth as computed", "[edram]") {
  // The whole 4 MiB refreshed every 10 us: per bank, (4 MiB / 256 B rows / 32 banks) rows every
  // 10 us at 3.8 ns each leaves 1 - 512e6 x 3.8e-9 / 10 of the time for accesses.
  auto cfg = config::from_string(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    kv: {model: edram, base_addr: 0, capacity_MiB: 4, bandwidth_GBps: 256, banks: 32,
         refresh_scope: all, refresh_interval_us: 10}
workload: {type: traffic, target: kv, burst_bytes: 65536, total_bytes: 4194304, outstanding: 4}
)");
  platform p(cfg);
  p.run();
  const double rows_per_bank_per_s = 4.0 * 1048576 / 256 / 32 / 10e-6;
  const double share = 1 - rows_per_bank_per_s * 3.8e-9;
  CHECK(share == Approx(0.8054).epsilon(0.001));
  const double L = 4194304, bw = 256e9 * share;
  const double expected = L / (L / bw + 1.9e-9) / 1e9;
  CHECK(p.results()["traffic"]["bandwidth_GBps"].get<double>() == Approx(expected).epsilon(0.01));
}

TEST_CASE("edram: retention model gives no failures at 45 us and the paper's 2DRP average", "[edram]") {
  test::bench b(yaml);
  const auto& r = kv(b).retention();
  CHECK(r.failure_probability(45e-6) < 1e-8);
  CHECK(r.failure_probability(0) == 0);
  // Monotonic in the time since refresh.
  double last = 0;
  for (double t : {45e-6, 180e-6, 360e-6, 1.44e-3, 5.4e-3, 7.2e-3, 1e-1}) {
    const double p = r.failure_probability(t);
    CHECK(p > last);
    last = p;
  }
  // 2DRP's four intervals (0.36, 5.4, 1.44, 7.2 ms) average about 2e-3 (the paper).
  const double avg = (r.failure_probability(0.36e-3) + r.failure_probability(5.4e-3) +
                      r.failure_probability(1.44e-3) + r.failure_probability(7.2e-3)) / 4;
  CHECK(avg == Approx(2e-3).epsilon(0.05));
}

TEST_CASE("edram: reads of live data count expected bit errors from the time since refresh", "[edram]") {
  test::bench b(yaml, {"system.memories.kv.refresh_interval_us=10000"});
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(1000, 1));
  ti.read(0, 1000, sc_time(5000, SC_US));  // 5 ms after the last tick (t = 0)
  ti.read(4096, 100, sc_time(5001, SC_US));  // never written: not live, no errors
  b.p->run();
  const double p = kv(b).retention().failure_probability(5e-3);
  CHECK(stat_of(b, "expected_bit_errors_read") == Approx(8000 * p).epsilon(1e-6));
  CHECK(stat_of(b, "live_bits_read") == 8000);
}

namespace {

// 64 KiB live from t = 0 whose interval follows a linear temperature ramp from 45 to 95 C over
// 10 ms in 100 steps, 45 us scaled by the retention factor at T + guard (temperature-aware
// refresh's rule) at every step. Returns the refreshed bytes, their integral (bytes x dt /
// interval, summed over the steps) and the interval classes ever made and active at the end.
nlohmann::json ramp(double guard_C, bool continuous) {
  const std::string out = test::in_child_process([=] {
    test::bench b(yaml);
    auto& ti = b.init();
    constexpr int steps = 100;
    const sc_time dt(100, SC_US);
    ti.write(0, std::vector<unsigned char>(65536, 1));
    ti.read(0, 64, dt * steps);
    double integral = 0;
    sc_core::sc_spawn([&] {
      edram& e = kv(b);
      if (continuous) e.use_continuous_refresh();
      for (int k = 0; k < steps; ++k) {
        const double T = 45 + 50.0 * k / steps;
        const sc_time p(45 * e.retention().retention_factor(T + guard_C), SC_US);
        e.set_refresh_interval(0, 65536, p);
        integral += 65536.0 * (dt / p);
        sc_core::wait(dt);
      }
    });
    b.p->run();
    nlohmann::json j = {{"refreshed", stat_of(b, "refreshed_bytes")},
                        {"integral", integral},
                        {"classes", kv(b).interval_classes()},
                        {"active", kv(b).active_interval_classes()}};
    return j.dump();
  });
  REQUIRE(out.rfind("error: ", 0) != 0);
  return nlohmann::json::parse(out);
}

}  // namespace

TEST_CASE("edram: refresh under moving intervals is the integral of bytes x dt / interval (continuous)",
          "[edram][refresh]") {
  double last = 0;
  for (double g : {0.0, 2.0, 5.0, 10.0}) {
    INFO("guard band " << g << " C");
    const nlohmann::json r = ramp(g, true);
    const double refreshed = r["refreshed"].get<double>(), integral = r["integral"].get<double>();
    CHECK(integral > 65536.0 * 10);  // tens of passes over the ramp
    // Within one pass of the integral (the read that ends the run lands a little after 10 ms).
    CHECK(std::abs(refreshed - integral) <= 65536.0);
    CHECK(refreshed > last);  // a wider guard band: shorter intervals, more refresh
    last = refreshed;
    // Every step made its own interval class; the per-access loops visit the one with live bytes.
    CHECK(r["classes"].get<std::size_t>() == 101);
    CHECK(r["active"].get<std::size_t>() == 1);
  }
  // The grid of ticks from time 0 (the default accounting) loses each interval's phase at every
  // move: far from the integral here.
  const nlohmann::json grid = ramp(5, false);
  CHECK(std::abs(grid["refreshed"].get<double>() - grid["integral"].get<double>()) > 65536.0);
}
