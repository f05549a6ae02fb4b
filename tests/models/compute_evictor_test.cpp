// The systolic evictor: the score board (quantisation, saturation, protection, ties, per-head
// victims), the block as an RSA score listener (no added latency, active cycles and energy) and
// the evict_select command (victims, the eviction sink, timing, error statuses).
#include <catch2/catch.hpp>

#include "models/compute/evictor/evictor.h"
#include "models/compute/evictor/score_board.h"
#include "tests/support/test_initiator.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

using namespace kelle;
using sc_core::SC_NS;
using sc_core::sc_time;

namespace {

// An RSA and an evictor; operands in a zero-latency ideal memory behind a zero-latency
// unlimited interconnect, so command times are the blocks' own.
const char* const yaml = R"(
include: tech/65nm.yaml
system:
  clock_GHz: 1
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: ideal, base_addr: 0x1000000, capacity_MiB: 4, latency_ns: 0, queue_depth: 64}
  compute:
    rsa: {model: rsa, base_addr: 0x500000000, rows: 32, cols: 32}
    evictor: {model: evictor, base_addr: 0x500001000}
workload: {type: test_script}
)";
// The same without the evictor.
const char* const yaml_no_evictor = R"(
include: tech/65nm.yaml
system:
  clock_GHz: 1
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: ideal, base_addr: 0x1000000, capacity_MiB: 4, latency_ns: 0, queue_depth: 64}
  compute:
    rsa: {model: rsa, base_addr: 0x500000000, rows: 32, cols: 32}
workload: {type: test_script}
)";
constexpr std::uint64_t mem = 0x1000000;
constexpr std::uint64_t rsa_port = 0x500000000;
constexpr std::uint64_t evictor_port = 0x500001000;
constexpr double power_W = 0.028;  // tech.evictor.power_W

std::vector<unsigned char> bytes(const command& c) {
  std::vector<unsigned char> v(sizeof c);
  std::memcpy(v.data(), &c, sizeof c);
  return v;
}

command select_cmd(std::uint32_t id, std::uint32_t heads, std::uint32_t valid, std::uint32_t newest,
                   std::uint64_t addr_c = mem + 0x10000) {
  command c;
  c.id = id;
  c.op = opcode::evict_select;
  c.m = heads;
  c.k = valid;
  c.n = newest;
  c.addr_c = addr_c;
  return c;
}

command scores_cmd(std::uint32_t id, std::uint32_t m, std::uint32_t extra, std::uint32_t k,
                   std::uint32_t n, std::uint32_t flags) {
  command c;
  c.id = id;
  c.op = opcode::gemm_transposed;
  c.flags = flags;
  c.m = m;
  c.k = k;
  c.n = n;
  c.extra = extra;
  c.addr_a = mem;
  c.addr_b = mem + 0x100000;
  c.addr_c = mem + 0x200000;
  c.addr_d = mem + 0x300000;
  return c;
}

std::vector<completion> completions(compute_block& b) {
  std::vector<completion> v;
  completion c;
  while (b.pop_completion(c)) v.push_back(c);
  return v;
}

evictor& the_evictor(test::bench& b) { return dynamic_cast<evictor&>(*b.p->block("evictor")); }

double ns(const sc_time& t) { return t.to_seconds() * 1e9; }

struct recording_sink : eviction_sink {
  std::vector<std::pair<unsigned, std::uint32_t>> calls;
  void evict(unsigned head, std::uint32_t slot) override { calls.emplace_back(head, slot); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The score board

TEST_CASE("evictor: quantisation and 4-bit saturation give the documented values", "[evictor]") {
  score_board sb;  // defaults: 4 bits, scale 0.25
  REQUIRE(sb.max_score() == 15);
  // c = max(0, 15 - floor((max - x) / 0.25)) with max = 2.0
  CHECK(sb.quantise(2.0, 2.0) == 15);    // the row's maximum
  CHECK(sb.quantise(1.9, 2.0) == 15);    // 0.4 levels below: still the top level
  CHECK(sb.quantise(1.75, 2.0) == 14);   // exactly one level below
  CHECK(sb.quantise(1.0, 2.0) == 11);    // 4 levels
  CHECK(sb.quantise(-1.5, 2.0) == 1);    // 14 levels
  CHECK(sb.quantise(-1.6, 2.0) == 1);    // 14.4 levels
  CHECK(sb.quantise(-1.75, 2.0) == 0);   // 15 levels = Q x scale below the maximum: nothing
  CHECK(sb.quantise(-100.0, 2.0) == 0);
  CHECK(sb.quantise(std::nan(""), 2.0) == 0);

  // Accumulation with saturation at 15.
  sb.accumulate(0, {2.0, 1.0, -1.5, -9.0});  // contributions 15, 11, 1, 0
  CHECK(sb.score(0, 0) == 15);
  CHECK(sb.score(0, 1) == 11);
  CHECK(sb.score(0, 2) == 1);
  CHECK(sb.score(0, 3) == 0);
  sb.accumulate(0, {2.0, 1.0, -1.5, -9.0});
  CHECK(sb.score(0, 0) == 15);  // 15 + 15 saturates
  CHECK(sb.score(0, 1) == 15);  // 11 + 11 = 22 saturates
  CHECK(sb.score(0, 2) == 2);
  CHECK(sb.score(0, 3) == 0);
  // The reference is each row's own maximum: a shifted row contributes the same.
  sb.accumulate(1, {102.0, 101.0, 98.5, 93.0});
  CHECK(sb.score(1, 0) == 15);
  CHECK(sb.score(1, 1) == 11);
  CHECK(sb.score(1, 2) == 1);
  CHECK(sb.score(1, 3) == 0);
  // Values that are not finite add nothing and do not set the maximum.
  sb.accumulate(2, {std::numeric_limits<double>::infinity(), 0.0, std::nan(""), -0.25});
  CHECK(sb.score(2, 0) == 0);
  CHECK(sb.score(2, 1) == 15);
  CHECK(sb.score(2, 2) == 0);
  CHECK(sb.score(2, 3) == 14);

  // Another width and scale: 2 bits (Q = 3), one q.k unit per level.
  score_board_config cfg;
  cfg.score_bits = 2;
  cfg.scale = 1.0;
  score_board two(cfg);
  REQUIRE(two.max_score() == 3);
  two.accumulate(0, {3.0, 2.5, 1.0, 0.0});
  CHECK(two.score(0, 0) == 3);
  CHECK(two.score(0, 1) == 3);
  CHECK(two.score(0, 2) == 1);
  CHECK(two.score(0, 3) == 0);
  two.set(0, 3, 99, 3);  // preloads clamp to Q
  CHECK(two.score(0, 3) == 3);
}

TEST_CASE("evictor: on hand-made scores each head picks its own documented victim", "[evictor]") {
  score_board_config cfg;
  cfg.scale = 1.0;
  cfg.sink_tokens = 2;
  cfg.recent_window = 2;
  score_board sb(cfg);
  // 8 slots holding tokens 0..7; the newcomer is token 8. Protected: 0, 1 (sinks), 6, 7 (recent).
  // Head 0: max 9 -> contributions 15 - (9 - x): {6, 6, 11, 7, 15, 8, 6, 6}.
  sb.accumulate(0, {0, 0, 5, 1, 9, 2, 0, 0});
  // Head 1: {15, 15, 7, 15, 15, 15, 0, 0}.
  sb.accumulate(1, {9, 9, 1, 9, 9, 9, -20, -20});
  // Head 2, two rows: {8, 15, 15, 15, 9, 14, 9, 9} + {15, 10, 10, 9, 15, 14, 15, 15}.
  sb.accumulate(2, {2, 9, 9, 9, 3, 8, 3, 3});
  sb.accumulate(2, {9, 4, 4, 3, 9, 8, 9, 9});
  CHECK(sb.score(2, 3) == 15);  // 15 + 9 saturates
  CHECK(sb.score(2, 5) == 15);  // 14 + 14 saturates
  CHECK(sb.score(2, 4) == 15);  // 9 + 15 saturates
  CHECK(sb.score(2, 2) == 15);  // 15 + 10

  CHECK(sb.victim(0, 8, 8) == 3);  // candidates 2..5 score 11, 7, 15, 8
  CHECK(sb.victim(1, 8, 8) == 2);  // 7, 15, 15, 15; slots 6, 7 score 0 but are recent
  CHECK(sb.victim(2, 8, 8) == 2);  // all four saturated: the tie goes to the lowest slot
  CHECK(sb.victim(3, 8, 8) == 2);  // a head with no scores yet: all 0, lowest unprotected slot

  // The newcomer takes head 0's victim slot; one token later the window has moved on.
  sb.replace(0, 3, 8);
  CHECK(sb.score(0, 3) == 0);
  CHECK(sb.position(0, 3) == 8);
  CHECK(sb.victim(0, 8, 9) == 6);  // slot 3 (token 8) is recent now; token 6 (score 6) is not
}

TEST_CASE("evictor: a protected sink or recent token is never chosen even with the lowest score", "[evictor]") {
  score_board_config cfg;
  cfg.sink_tokens = 3;
  cfg.recent_window = 4;
  score_board sb(cfg);
  // 12 slots, tokens 0..11, newcomer 12: sinks 0..2, recent 8..11 score 0, the rest above.
  for (std::uint32_t s = 0; s < 12; ++s) {
    const bool guarded = s < 3 || s >= 8;
    sb.set(0, s, guarded ? 0 : 5 + s, s);
  }
  for (std::uint32_t s = 0; s < 12; ++s) CHECK(sb.is_protected(0, s, 12) == (s < 3 || s >= 8));
  CHECK(sb.victim(0, 12, 12) == 3);  // the lowest unprotected score (8), not a 0
  // Every valid slot protected: no victim.
  CHECK(sb.victim(0, 3, 12) == score_board::no_victim);
  CHECK(sb.victim(5, 7, 7) == score_board::no_victim);  // unwritten: tokens 0..2 sinks, 3..6 recent
  CHECK(sb.victim(5, 7, 8) == 3);                       // token 3 leaves the window

  // Protection follows the token's position, not its slot (slots are reused by newcomers).
  score_board moved(cfg);
  moved.set(0, 0, 0, 40);  // token 40 in slot 0
  moved.set(0, 1, 0, 2);   // token 2 (a sink) in slot 1
  moved.set(0, 2, 5, 20);
  moved.set(0, 3, 0, 43);
  CHECK(moved.victim(0, 4, 44) == 2);  // 44 - 40 = 4 <= recent_window: token 40 is protected
  CHECK(moved.victim(0, 4, 45) == 0);  // 45 - 40 = 5: evictable, and it scores 0
}

TEST_CASE("evictor: ties go to the lowest slot index, unwritten slots read as zero", "[evictor]") {
  score_board sb;  // sinks 10, recent 64
  // A timing-only board (never written): the first slot past the sinks and before the window.
  CHECK(sb.victim(0, 200, 200) == 10);
  CHECK(sb.victim(0, 74, 74) == score_board::no_victim);  // tokens 10..73 all recent
  CHECK(sb.victim(0, 75, 75) == 10);
  // Written slots with equal scores: the lowest index.
  for (std::uint32_t s = 0; s < 100; ++s) sb.set(0, s, 7, s);
  CHECK(sb.victim(0, 200, 200) == 100);  // unwritten slot 100 scores 0 < 7
  CHECK(sb.victim(0, 100, 200) == 10);   // only the written ones: all 7, lowest index
  sb.set(0, 50, 3, 50);
  sb.set(0, 60, 3, 60);
  CHECK(sb.victim(0, 100, 200) == 50);
}

// ---------------------------------------------------------------------------------------------
// The block as the RSA's score listener

TEST_CASE("evictor: streaming scores to the evictor adds no time to the RSA command", "[evictor]") {
  // One gemm_transposed (16 query rows + 4 stacked rows, K = 64, N = 32) run three ways in
  // fresh simulations: in a system without an evictor, with the evictor but without the flag,
  // and with flag_scores_to_evictor.
  auto run = [](const char* y, std::uint32_t flags) {
    return test::in_child_process([&] {
      test::bench b(y);
      b.init().write(rsa_port, bytes(scores_cmd(1, 16, 4, 64, 32, flags)));
      b.p->run();
      const auto cs = completions(*b.p->block("rsa"));
      if (cs.size() != 1 || cs[0].status != cmd_status::ok) return std::string("error: rsa failed");
      std::ostringstream o;
      o.precision(17);
      o << cs[0].cycles << ' ' << ns(cs[0].finished);
      if (b.p->block("evictor")) {
        const auto r = b.p->results();
        o << ' ' << r["stats"]["evictor"]["active_cycles"]["value"].get<double>() << ' '
          << r["stats"]["evictor"]["score_rows"]["value"].get<double>() << ' '
          << r["stats"]["evictor"]["scores"]["value"].get<double>() << ' '
          << r["energy_J"]["by_component"]["evictor.active"].get<double>();
      }
      return o.str();
    });
  };
  const std::string none = run(yaml_no_evictor, 0);
  const std::string off = run(yaml, 0);
  const std::string on = run(yaml, flag_scores_to_evictor);
  INFO(none << " | " << off << " | " << on);
  std::istringstream a(none), b(off), c(on);
  double cyc_none, fin_none, cyc_off, fin_off, cyc_on, fin_on;
  double act_off, rows_off, scores_off, e_off, act_on, rows_on, scores_on, e_on;
  a >> cyc_none >> fin_none;
  b >> cyc_off >> fin_off >> act_off >> rows_off >> scores_off >> e_off;
  c >> cyc_on >> fin_on >> act_on >> rows_on >> scores_on >> e_on;
  REQUIRE(c);
  CHECK(cyc_on > 0);
  CHECK(cyc_on == cyc_none);
  CHECK(cyc_on == cyc_off);
  CHECK(fin_on == fin_none);
  CHECK(fin_on == fin_off);
  // Without the flag the evictor sees nothing.
  CHECK(act_off == 0);
  CHECK(rows_off == 0);
  CHECK(e_off == 0);
  // With it: 20 rows of 32 scores, one row (32 <= cols) per cycle, power x active time.
  CHECK(rows_on == 20);
  CHECK(scores_on == 20 * 32);
  CHECK(act_on == 20);
  CHECK(e_on == Approx(power_W * 20 * 1e-9));
}

TEST_CASE("evictor: a score row wider than the array takes one cycle per column fold", "[evictor]") {
  test::bench b(yaml);
  b.init().write(rsa_port, bytes(scores_cmd(1, 10, 0, 128, 80, flag_scores_to_evictor)));
  b.p->run();
  const auto r = b.p->results();
  const auto& s = r["stats"]["evictor"];
  CHECK(s["score_rows"]["value"].get<double>() == 10);
  CHECK(s["scores"]["value"].get<double>() == 800);
  CHECK(s["score_cycles"]["value"].get<double>() == 10 * 3);  // ceil(80 / 32) = 3 segments a row
  CHECK(s["active_cycles"]["value"].get<double>() == 30);
  CHECK(r["energy_J"]["by_component"]["evictor.active"].get<double>() == Approx(power_W * 30e-9));
  CHECK(s["area"]["value"].get<double>() == Approx(0.06));
  const auto cs = completions(*b.p->block("rsa"));
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].status == cmd_status::ok);
}

// ---------------------------------------------------------------------------------------------
// evict_select

TEST_CASE("evictor: evict_select hands each head's victim to the sink and takes select_cycles", "[evictor]") {
  test::bench b(yaml, {"system.compute.evictor.sink_tokens=2", "system.compute.evictor.recent_window=2",
                       "system.compute.evictor.score_scale=1", "system.compute.evictor.select_cycles=3"});
  evictor& ev = the_evictor(b);
  recording_sink sink;
  ev.set_eviction_sink(&sink);
  // The hand-made scores of the score-board test (a functional run feeds the board this way).
  ev.board().accumulate(0, {0, 0, 5, 1, 9, 2, 0, 0});
  ev.board().accumulate(1, {9, 9, 1, 9, 9, 9, -20, -20});
  auto& ti = b.init();
  ti.write(evictor_port, bytes(select_cmd(1, 3, 8, 8)));
  ti.write(evictor_port, bytes(select_cmd(2, 3, 8, 9)), sc_time(100, SC_NS));
  b.p->run();
  const auto cs = completions(ev);
  REQUIRE(cs.size() == 2);
  for (const auto& c : cs) {
    CHECK(c.status == cmd_status::ok);
    CHECK(c.cycles == 3);  // the result write to the zero-latency memory takes no time
  }
  CHECK(ev.last_command_report()["victims"] == nlohmann::json({6, 6, 3}));
  // First selection: 3 (head 0), 2 (head 1), 2 (head 2, no scores: lowest unprotected slot).
  // Second, with token 8 in those slots and token 6 out of the recent window: 6, 6, 3.
  const std::vector<std::pair<unsigned, std::uint32_t>> expected = {{0, 3}, {1, 2}, {2, 2},
                                                                    {0, 6}, {1, 6}, {2, 3}};
  CHECK(sink.calls == expected);
  CHECK(ev.board().position(0, 3) == 8);
  CHECK(ev.board().position(0, 6) == 9);
  const auto r = b.p->results();
  const auto& s = r["stats"]["evictor"];
  CHECK(s["selections"]["value"].get<double>() == 2);
  CHECK(s["victims"]["value"].get<double>() == 6);
  CHECK(s["active_cycles"]["value"].get<double>() == 6);
  CHECK(s["bytes_written"]["value"].get<double>() == 24);
  CHECK(r["energy_J"]["by_component"]["evictor.active"].get<double>() == Approx(power_W * 6e-9));
}

TEST_CASE("evictor: without values the victims follow the tie rule and rotate through the slots", "[evictor]") {
  test::bench b(yaml);  // sinks 10, recent window 64
  evictor& ev = the_evictor(b);
  auto& ti = b.init();
  ti.write(evictor_port, bytes(select_cmd(1, 2, 100, 100)));
  ti.write(evictor_port, bytes(select_cmd(2, 2, 100, 101)), sc_time(50, SC_NS));
  ti.write(evictor_port, bytes(select_cmd(3, 2, 74, 74)), sc_time(100, SC_NS));
  b.p->run();
  const auto cs = completions(ev);
  REQUIRE(cs.size() == 3);
  for (const auto& c : cs) CHECK(c.status == cmd_status::ok);
  CHECK(ev.last_command_report()["victims"] ==
        nlohmann::json({score_board::no_victim, score_board::no_victim}));
  CHECK(ev.last_command_report()["protected_heads"] == 2);
  CHECK(ev.board().position(0, 10) == 100);  // first selection
  CHECK(ev.board().position(1, 11) == 101);  // second: slot 10 holds a recent token now
  const auto r = b.p->results();
  CHECK(r["stats"]["evictor"]["victims"]["value"].get<double>() == 4);
  CHECK(r["stats"]["evictor"]["protected_heads"]["value"].get<double>() == 2);
}

TEST_CASE("evictor: evict_select waits until the last score row has left the array", "[evictor]") {
  test::bench b(yaml);
  auto& ti = b.init();
  // 256 rows stream out of the array for about 256 cycles after the weights arrive.
  ti.write(rsa_port, bytes(scores_cmd(1, 256, 0, 32, 32, flag_scores_to_evictor)));
  ti.write(evictor_port, bytes(select_cmd(2, 4, 20, 20)), sc_time(50, SC_NS));
  b.p->run();
  const auto rc = completions(*b.p->block("rsa"));
  const auto ec = completions(the_evictor(b));
  REQUIRE(rc.size() == 1);
  REQUIRE(ec.size() == 1);
  const double last_row = ns(rc[0].started) + b.p->block("rsa")->last_command_report()["array_cycles"].get<double>();
  REQUIRE(last_row > 300);
  CHECK(ns(ec[0].started) == Approx(50 + 1));  // queued one cycle after the write
  CHECK(ns(ec[0].finished) == Approx(last_row + 1));  // then select_cycles = 1
}

TEST_CASE("evictor: a malformed evict_select completes with the right error status", "[evictor]") {
  test::bench b(yaml);
  auto& ti = b.init();
  command wrong = select_cmd(1, 1, 1, 1);
  wrong.op = opcode::gemm;
  ti.write(evictor_port, bytes(wrong));                                   // bad_opcode
  ti.write(evictor_port, bytes(select_cmd(2, 0, 10, 10)));                // no heads
  ti.write(evictor_port, bytes(select_cmd(3, 4, 0, 10)));                 // no valid tokens
  ti.write(evictor_port, bytes(select_cmd(4, 65, 10, 10)));               // heads > max_heads 64
  ti.write(evictor_port, bytes(select_cmd(5, 4, 11, 10)));                // more tokens than positions
  ti.write(evictor_port, bytes(select_cmd(6, 4, 10, 10, mem + 0x10002))); // misaligned result
  ti.write(evictor_port, bytes(select_cmd(7, 4, 10, 10, 0x10)));          // unmapped result
  ti.write(evictor_port, bytes(select_cmd(8, 64, 10, 10)));               // fine, at the limits
  b.p->run();
  const auto cs = completions(the_evictor(b));
  REQUIRE(cs.size() == 8);
  const cmd_status expected[] = {cmd_status::bad_opcode, cmd_status::bad_shape, cmd_status::bad_shape,
                                 cmd_status::bad_shape,  cmd_status::bad_shape, cmd_status::misaligned,
                                 cmd_status::bad_address, cmd_status::ok};
  for (std::size_t i = 0; i < cs.size(); ++i) {
    INFO("command " << cs[i].id);
    CHECK(cs[i].id == i + 1);
    CHECK(cs[i].status == expected[i]);
  }
  const auto r = b.p->results();
  CHECK(r["stats"]["evictor"]["command_errors"]["value"].get<double>() == 7);
  CHECK(r["stats"]["evictor"]["selections"]["value"].get<double>() == 1);
}

TEST_CASE("evictor: a system whose evictor has no RSA beside it is a configuration error", "[evictor]") {
  const char* const no_rsa = R"(
include: tech/65nm.yaml
system:
  memories:
    mem: {model: ideal, base_addr: 0x1000000, capacity_MiB: 1}
  compute:
    evictor: {model: evictor, base_addr: 0x500001000}
workload: {type: test_script}
)";
  const std::string missing = test::in_child_process([&] {
    test::bench b(no_rsa);
    return std::string("built");
  });
  CHECK_THAT(missing, Catch::StartsWith("error: ") && Catch::Contains("system.compute.evictor.rsa") &&
                          Catch::Contains("no compute block 'rsa'"));
  // Naming a block that exists but is not an RSA is one too.
  const std::string wrong = test::in_child_process([&] {
    test::bench b(yaml, {"system.compute.evictor.rsa=evictor"});
    return std::string("built");
  });
  CHECK_THAT(wrong, Catch::StartsWith("error: ") && Catch::Contains("is not an RSA"));
}

TEST_CASE("evictor and rsa: their limits, score registers and section through the block base", "[evictor]") {
  test::bench b(yaml);
  compute_block& e = *b.p->block("evictor");
  const compute_block& r = *b.p->block("rsa");
  CHECK(e.victim_select_heads() == 64);
  CHECK(e.victim_select_slots() == 65536);
  CHECK(e.victim_scores() == &the_evictor(b).board());
  CHECK(e.params().path() == "system.compute.evictor");
  CHECK(r.victim_select_slots() == 0);
  CHECK(b.p->block("rsa")->victim_scores() == nullptr);
  command c;
  c.op = opcode::evict_select;
  c.m = 4, c.k = 8, c.n = 8;
  CHECK(e.design_limit(c).empty());
  CHECK(e.refusal(c) == "at most 65536 slots a head (k) and 64 heads (m)");
  c.m = 65;
  CHECK(e.design_limit(c) == "at most 65536 slots a head (k) and 64 heads (m)");
  c.op = opcode::gemm;
  c.m = 4, c.k = 4, c.n = 4;
  CHECK(r.design_limit(c).empty());
  CHECK(r.refusal(c) == "m, k, n and batch at most 16777216 each");
  c.batch = (1u << 24) + 1;
  CHECK(r.design_limit(c) == "m, k, n and batch at most 16777216 each");
}
