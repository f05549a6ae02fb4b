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

TEST_CASE("refresh field maps: named maps and bit ranges, the bytes of each field by hand", "[refresh]") {
  const field_map kelle = field_map::parse("msb_lsb");
  REQUIRE(kelle.size() == 2);
  CHECK(kelle.fields()[0].name == "msb");
  CHECK(kelle.begin(8192, 1) == 4096);  // 2DRP's halves
  CHECK(kelle.begin(8192, 2) == 8192);
  CHECK(kelle.field_of(8) == 0);
  CHECK(kelle.field_of(7) == 1);
  const field_map bf = field_map::parse("bfloat16");  // sign + 8 exponent bits | 7 mantissa bits
  CHECK(bf.fields()[0].bits() == 9);
  CHECK(bf.begin(8192, 1) == 4608);  // 8192 x 9 / 16
  CHECK(bf.field_of(7) == 0);
  CHECK(bf.field_of(6) == 1);
  const field_map h = field_map::parse("binary16");  // sign + 5 exponent bits | 10 mantissa bits
  CHECK(h.begin(1600, 1) == 600);
  CHECK(h.field_of(10) == 0);
  CHECK(h.field_of(9) == 1);
  const field_map three = field_map::parse("15-12,11-4,3-0");
  REQUIRE(three.size() == 3);
  CHECK(three.begin(1600, 1) == 400);
  CHECK(three.begin(1600, 2) == 1200);
  CHECK(three.fields()[1].name == "bits_11_4");
  CHECK(three.field_of(0) == 2);
  for (const char* bad : {"15-8,6-0", "16-0", "15-8", "8-15,7-0", "msb", "15-8,7-0,", "15-x"})
    CHECK_THROWS_AS(field_map::parse(bad), std::invalid_argument);
  config cfg = config::from_string("policy: {fields: '15-9,7-0'}\n");
  CHECK_THROWS_WITH(refresh_policies().create("shield", cfg.root().child("policy")),
                    Catch::Contains("policy.fields") && Catch::Contains("expected"));
}

TEST_CASE("refresh shield: sign+exponent banks at 45 us, KV mantissa banks at 1.2 ms, by hand", "[refresh]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(0, std::vector<unsigned char>(8192, 1));
  ti.read(0, 64, sc_time(7300, SC_US));
  auto p = make("shield");
  CHECK_FALSE(p->needs_groups());
  p->apply(kv(b), 0, 8192, nullptr);
  b.p->run();
  // bfloat16: 9 of 16 bits (4608 B) in the sign+exponent banks, 3584 B in the mantissa banks.
  // Ticks in (0, 7.3 ms]: 162 at 45 us, 6 at 1.2 ms.
  CHECK(b.p->results()["stats"]["kv"]["refreshed_bytes"]["value"].get<double>() == Approx(4608.0 * 162 + 3584.0 * 6));
  const retention_model& m = kv(b).retention();
  const auto by = p->expected_failed_bits_by_field(m);
  REQUIRE(by.size() == 2);
  CHECK(by[0] == Approx(4608 * 8 * m.failure_probability(45e-6)));
  CHECK(by[1] == Approx(3584 * 8 * m.failure_probability(1.2e-3)));
  CHECK(p->expected_failed_bits(m) == Approx(by[0] + by[1]));
  CHECK(p->bit_interval_s(false, 7) == Approx(45e-6));   // the exponent's lowest bit
  CHECK(p->bit_interval_s(false, 6) == Approx(1.2e-3));  // the mantissa's highest
  // 2DRP through the same field map: by byte, the four intervals by hand.
  auto d = make("2drp");
  CHECK(d->bit_interval_s(true, 8) == Approx(360e-6));
  CHECK(d->bit_interval_s(true, 7) == Approx(5400e-6));
  CHECK(d->kv_fields().text() == "msb_lsb");
}

namespace {

// Two 4096-byte activation buffers, at 0 under `a`'s lifetime rule and at 65536 under `b`'s:
// placed, written at `written_us` (a, b), their last consumers completing at `end_us`. Returns
// the array's refreshed bytes; `m` gets its retention model.
double transient_buffers(refresh_policy& a, refresh_policy& b, double written_a_us, double written_b_us,
                         double end_us, retention_model& m) {
  test::bench bench(yaml);
  auto& ti = bench.init();
  REQUIRE(a.transient());
  REQUIRE(b.transient());
  a.transient()->placed(kv(bench), 0, 4096);
  b.transient()->placed(kv(bench), 65536, 4096);
  ti.write(0, std::vector<unsigned char>(4096, 1), sc_time(written_a_us, SC_US));
  ti.write(65536, std::vector<unsigned char>(4096, 1), sc_time(written_b_us, SC_US));
  ti.read(8192, 64, sc_time(end_us, SC_US));  // the simulation runs until the consumers are done
  bench.p->run();
  CHECK(sc_core::sc_time_stamp().to_seconds() == Approx(end_us * 1e-6).epsilon(1e-3));
  a.transient()->released(kv(bench), 4096, (end_us - written_a_us) * 1e-6);
  b.transient()->released(kv(bench), 4096, (end_us - written_b_us) * 1e-6);
  kv(bench).release(0, 4096);
  kv(bench).release(65536, 4096);
  m = kv(bench).retention();
  return kv(bench).refreshed_bytes();
}

}  // namespace

TEST_CASE("refresh lifetime rule: a buffer consumed before its retention budget gets no refresh and no failures",
          "[refresh]") {
  // 2DRP with the lifetime rule on the activations, budgets of 45 us on both bytes: a buffer that
  // lives 30 us is never refreshed, and P(fail | 30 us) leaves no expected failed bit. SHIELD, a
  // buffer living 1 ms: its sign+exponent banks are refreshed normally (2304 B, 22 ticks of 45 us),
  // its mantissa banks (1792 B) not at all within the 1.5 ms budget; their failures are those of
  // the 1 ms lived.
  auto d = make("2drp", "activation_lifetime: true, act_msb_budget_us: 45, act_lsb_budget_us: 45");
  auto s = make("shield");
  retention_model m(1, 1);
  CHECK(transient_buffers(*s, *d, 0, 970, 1000, m) == Approx(2304.0 * 22));
  const auto& f = d->transient()->totals();
  CHECK(f.within_budget == 1);
  CHECK(f.outlived == 0);
  CHECK(f.bits[0] == 2048 * 8);
  CHECK(f.expected_failed_bits[0] + f.expected_failed_bits[1] < 1e-4);
  CHECK(f.refreshed_bytes[0] + f.refreshed_bytes[1] == 0);
  const auto& g = s->transient()->totals();
  CHECK(g.within_budget == 1);
  CHECK(g.refreshed_bytes[1] == 0);
  CHECK(g.expected_failed_bits[0] == 0);  // refreshed normally, not under the rule
  CHECK(g.expected_failed_bits[1] == Approx(1792 * 8 * m.failure_probability(1e-3)));
}

TEST_CASE("refresh lifetime rule: a buffer kept alive past its budget (a stall) is refreshed or its failures counted",
          "[refresh]") {
  // 5 ms against SHIELD's 1.5 ms mantissa budget: `refresh` refreshes the 1792 mantissa bytes at
  // every budget outlived (3 times), the bits exposed at most 1.5 ms; `count` leaves them and
  // counts the failures of 5 ms. Both buffers' sign+exponent banks: 111 ticks of 45 us.
  auto r = make("shield");
  auto c = make("shield", "act_stall: count");
  retention_model m(1, 1);
  CHECK(transient_buffers(*r, *c, 0, 0, 5000, m) == Approx(2 * 2304.0 * 111 + 1792.0 * 3));
  const auto& fr = r->transient()->totals();
  const auto& fc = c->transient()->totals();
  CHECK(fr.outlived == 1);
  CHECK(fc.outlived == 1);
  CHECK(fr.refreshed_bytes[1] == Approx(1792.0 * 3));
  CHECK(fc.refreshed_bytes[1] == 0);
  CHECK(fr.expected_failed_bits[1] == Approx(1792 * 8 * m.failure_probability(1.5e-3)));
  CHECK(fc.expected_failed_bits[1] == Approx(1792 * 8 * m.failure_probability(5e-3)));
  CHECK(fc.expected_failed_bits[1] > 10 * fr.expected_failed_bits[1]);
}
