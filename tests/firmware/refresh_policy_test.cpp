// The refresh policies on an eDRAM array, by hand: which bytes get which interval, how often each
// group is refreshed, the energy and the expected failed bits.
#include <catch2/catch.hpp>

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/refresh_policy.h"
#include "tests/support/edram_bench.h"

#include <cmath>

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_US;

namespace {

const char* const yaml = test::edram_bench_yaml;
edram& kv(test::bench& b) { return test::kv_edram(b); }

// The policies read their keys when they are made.
std::unique_ptr<refresh_policy> make(const std::string& name, const std::string& keys = "") {
  config cfg = config::from_string("policy: {" + keys + "}\n");
  return refresh_policies().create(name, cfg.root().child_or_empty("policy"));
}

}  // namespace

TEST_CASE("refresh 2drp: group x bit position intervals, refresh counts and energy by hand", "[refresh]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(8192, 1));  // one layer's K, written at t = 0
  ti.read(0, 64, sc_time(7300, SC_US));               // the run ends just after 7.3 ms
  // The KV policy's report: 3/4 of the stored bytes are high-score (HST).
  kv_layer_report r;
  r.high_bytes = 3000;
  r.low_bytes = 1000;
  auto p = make("2drp");
  CHECK(p->needs_groups());
  p->apply(kv(b), 0, 8192, &r);  // before the run: the intervals hold from t = 0
  b.p->run();
  // MSB half (4096 B): HST 3072 B at 360 us, LST 1024 B at 1440 us; LSB half: HST 3072 B at
  // 5400 us, LST 1024 B at 7200 us. Ticks in (0, 7.3 ms]: 20, 5, 1, 1.
  const double bytes = 3072.0 * 20 + 1024.0 * 5 + 3072.0 * 1 + 1024.0 * 1;
  const auto res = b.p->results();
  CHECK(res["stats"]["kv"]["refreshed_bytes"]["value"].get<double>() == Approx(bytes));
  CHECK(res["energy_J"]["by_component"]["kv.refresh"].get<double>() ==
        Approx(bytes * 8 * kv(b).refresh_energy_per_bit_J()));
  // Expected failed bits: each group's bits x P(fail | its interval).
  const retention_model& m = kv(b).retention();
  const double expected = 3072 * 8 * (m.failure_probability(360e-6) + m.failure_probability(5400e-6)) +
                          1024 * 8 * (m.failure_probability(1440e-6) + m.failure_probability(7200e-6));
  CHECK(p->expected_failed_bits(m) == Approx(expected));
  CHECK(p->interval_s(true, true) == Approx(360e-6));
  CHECK(p->interval_s(false, false) == Approx(7200e-6));
}

TEST_CASE("refresh uniform: 45 us gives no expected failures, 360 us refreshes 8 times less", "[refresh]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(4096, 1));
  ti.write(65536, std::vector<unsigned char>(4096, 1));
  ti.read(0, 64, sc_time(3600, SC_US));
  auto org = make("uniform"), uni = make("uniform", "refresh_interval_us: 360");
  org->apply(kv(b), 0, 4096, nullptr);
  uni->apply(kv(b), 65536, 4096, nullptr);
  b.p->run();
  CHECK(b.p->results()["stats"]["kv"]["refreshed_bytes"]["value"].get<double>() == Approx(4096.0 * 80 + 4096.0 * 10));
  // 32768 bits at 45 us: far below one expected failure (the retention model: P < 1e-8 a bit).
  CHECK(org->expected_failed_bits(kv(b).retention()) ==
        Approx(4096 * 8 * kv(b).retention().failure_probability(45e-6)));
  CHECK(org->expected_failed_bits(kv(b).retention()) < 1e-3);
  CHECK(uni->expected_failed_bits(kv(b).retention()) > org->expected_failed_bits(kv(b).retention()));
  CHECK_FALSE(org->needs_groups());
}
