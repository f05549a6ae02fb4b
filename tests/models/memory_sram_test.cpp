// The banked SRAM array (and the memory base it shares with every model): idle latency, banks,
// streaming bandwidth, back-pressure, data, errors and energy.
#include <catch2/catch.hpp>

#include "tests/support/test_initiator.h"

using namespace kelle;
using sc_core::sc_time;
using sc_core::SC_NS;

namespace {

// One 1 MiB SRAM, 16 banks x 8 GB/s, 64 B interleave, behind a zero-latency unlimited router, so
// the times below are the array's alone.
const char* const yaml = R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: sram, base_addr: 0x1000000, capacity_MiB: 1, bandwidth_GBps: 128, banks: 16}
workload: {type: test_script}
)";
constexpr std::uint64_t base = 0x1000000;
const double bank_ns_per_B = 1.0 / 8.0;  // 8 GB/s per bank
const double latency_ns = 2.6;           // tech.sram.access_latency_ns

double ns(const sc_time& t) { return t.to_seconds() * 1e9; }

}  // namespace

TEST_CASE("sram: an idle read takes its bank time plus the access latency", "[sram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(base, 64);
  b.p->run();
  CHECK(ti[0].status == tlm::TLM_OK_RESPONSE);
  CHECK(ns(ti[0].latency()) == Approx(64 * bank_ns_per_B + latency_ns));
}

TEST_CASE("sram: requests to one bank serialise, to different banks overlap", "[sram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(base, 64);              // bank 0
  ti.read(base + 16 * 64, 64);    // bank 0 again (16 banks x 64 B interleave)
  ti.read(base + 64, 64);         // bank 1
  b.p->run();
  const double one = 64 * bank_ns_per_B;
  CHECK(ns(ti[0].begin_resp) == Approx(one + latency_ns));
  CHECK(ns(ti[1].begin_resp) == Approx(2 * one + latency_ns));  // waited for bank 0
  CHECK(ns(ti[2].begin_resp) == Approx(one + latency_ns));      // in parallel
  CHECK(b.p->results()["stats"]["mem"]["bank_wait_time"]["value"].get<double>() == Approx(one * 1e-9));
}

TEST_CASE("sram: a burst spread over all banks moves at the full bandwidth", "[sram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(base + 32, 4096);  // unaligned: 65 chunks, bank 0 gets 32 + 4 x 64 + ... bytes
  b.p->run();
  // Chunks 0..64 from bank 0: bank 0 holds chunks 0, 16, 32, 48, 64 -> 32 + 3 x 64 + 32 bytes.
  CHECK(ns(ti[0].latency()) == Approx(256 * bank_ns_per_B + latency_ns));
}

TEST_CASE("sram: streaming bandwidth matches bandwidth x N L / (N L + latency x bandwidth)", "[sram]") {
  auto cfg = config::from_string(R"(
include: tech/65nm.yaml
system:
  interconnect: {latency_ns: 0, bandwidth_GBps: .inf}
  memories:
    mem: {model: sram, base_addr: 0, capacity_MiB: 4, bandwidth_GBps: 128, banks: 16}
workload: {type: traffic, target: mem, burst_bytes: 65536, total_bytes: 4194304, outstanding: 4}
)");
  platform p(cfg);
  p.run();
  const double L = 4194304, bw = 128e9;
  // The array is never idle once started; the last response pays one access latency.
  const double expected = L / (L / bw + latency_ns * 1e-9) / 1e9;
  const double got = p.results()["traffic"]["bandwidth_GBps"].get<double>();
  CHECK(got == Approx(expected).epsilon(0.05));
  CHECK(got == Approx(expected).epsilon(0.001));  // in fact exact, up to time resolution
}

namespace {
std::size_t read_from(test::test_initiator& ti, unsigned port, std::uint64_t addr, unsigned len,
                      sc_time at = sc_core::SC_ZERO_TIME) {
  test::request r;
  r.port = port;
  r.addr = addr;
  r.len = len;
  r.issue_at = at;
  return ti.add(r);
}
}  // namespace

TEST_CASE("sram round_robin: two requesters share a bank, one requester's accesses keep their order", "[sram]") {
  test::bench b(yaml, {"system.memories.mem.bank_arbitration=round_robin", "workload.ports=2"});
  auto& ti = b.init();
  read_from(ti, 0, base, 64);            // bank 0, requester 0
  read_from(ti, 1, base + 16 * 64, 64);  // bank 0 again, requester 1
  read_from(ti, 0, base + 32 * 64, 64);  // bank 0, requester 0 again: after its first
  read_from(ti, 1, base + 64, 64);       // bank 1, requester 1
  b.p->run();
  const double one = 64 * bank_ns_per_B;
  // Bank 0 alternates between the two requesters: their first reads move at half its bandwidth
  // and end together; requester 0's second read then has the bank alone.
  CHECK(ns(ti[0].begin_resp) == Approx(2 * one + latency_ns));
  CHECK(ns(ti[1].begin_resp) == Approx(2 * one + latency_ns));
  CHECK(ns(ti[2].begin_resp) == Approx(3 * one + latency_ns));
  // Requester 1's bank-1 read was sent after its first was accepted, at once: bank 1 is free.
  CHECK(ns(ti[3].begin_resp) == Approx(one + latency_ns));
}

namespace {
// 64 KiB over 16 banks (4 KiB each, 512 ns alone), then 100 ns later a 64 B read of bank 0 from
// another requester.
void long_then_short(test::bench& b) {
  auto& ti = b.init();
  ti.write(base, std::vector<unsigned char>(65536, 1));
  read_from(ti, 1, base, 64, sc_time(100, SC_NS));
  b.p->run();
}
const double alone_ns = 4096 * bank_ns_per_B, one_ns = 64 * bank_ns_per_B;
}  // namespace

TEST_CASE("sram: with fcfs a short access waits for a long one's bytes in its bank", "[sram]") {
  test::bench b(yaml, {"workload.ports=2"});
  long_then_short(b);
  CHECK(ns(b.init()[0].begin_resp) == Approx(alone_ns + latency_ns));
  CHECK(ns(b.init()[1].begin_resp) == Approx(alone_ns + one_ns + latency_ns));
}

TEST_CASE("sram round_robin: a short access is not held behind another requester's long one", "[sram]") {
  test::bench b(yaml, {"system.memories.mem.bank_arbitration=round_robin", "workload.ports=2"});
  long_then_short(b);
  // Bank 0 is shared from 100 ns on: the read's 64 B take 2 x 8 ns; the write ends 8 ns late.
  CHECK(ns(b.init()[1].begin_resp) == Approx(100 + 2 * one_ns + latency_ns));
  CHECK(ns(b.init()[0].begin_resp) == Approx(alone_ns + one_ns + latency_ns));
}

TEST_CASE("sram: a full request queue withholds END_REQ (back-pressure)", "[sram]") {
  // The interconnect buffers one request per initiator, so the fourth request is the first
  // whose END_REQ waits for the memory to accept the third.
  test::bench b(yaml, {"system.memories.mem.queue_depth=2", "system.interconnect.buffer_depth=1"});
  auto& ti = b.init();
  for (int i = 0; i < 4; ++i) ti.read(base + 64 * i, 64);  // four different banks
  b.p->run();
  const double one = 64 * bank_ns_per_B + latency_ns;
  CHECK(ns(ti[0].end_req) == Approx(0));
  CHECK(ns(ti[1].end_req) == Approx(0));
  CHECK(ns(ti[2].end_req) == Approx(0));
  CHECK(ns(ti[3].end_req) == Approx(one));  // the memory accepted the third after one response
  CHECK(ns(ti[3].begin_resp) == Approx(2 * one));
  CHECK(b.p->results()["stats"]["mem"]["requests_held"]["value"].get<double>() >= 1);
}

TEST_CASE("sram: written data reads back, transport_dbg preloads", "[sram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(base + 100, {1, 2, 3, 4, 5});
  ti.read(base + 98, 9, sc_time(100, SC_NS));
  test::request dbg;
  dbg.cmd = tlm::TLM_WRITE_COMMAND;
  dbg.debug = true;
  dbg.addr = base + 200000;
  dbg.len = 4;
  dbg.data = {9, 8, 7, 6};
  dbg.issue_at = sc_time(150, SC_NS);
  const auto d = ti.add(dbg);
  ti.read(base + 200000, 4, sc_time(200, SC_NS));
  b.p->run();
  CHECK(ti[1].data == std::vector<unsigned char>{0, 0, 1, 2, 3, 4, 5, 0, 0});
  CHECK(ti[d].debug_bytes == 4);
  CHECK(ti[3].data == std::vector<unsigned char>{9, 8, 7, 6});
}

TEST_CASE("sram: bad accesses get the documented error responses", "[sram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.read(base + 1048576 - 32, 64);  // runs past the end of the array
  unsigned char be[8] = {0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0};
  test::request r;
  r.addr = base;
  r.len = 8;
  r.byte_enable = be;
  ti.add(r);
  test::request s;
  s.addr = base;
  s.len = 64;
  s.streaming_width = 4;
  ti.add(s);
  ti.read(0x10, 64);  // unmapped
  b.p->run();
  CHECK(ti[0].status == tlm::TLM_ADDRESS_ERROR_RESPONSE);
  CHECK(ti[1].status == tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
  CHECK(ti[2].status == tlm::TLM_BURST_ERROR_RESPONSE);
  CHECK(ti[3].status == tlm::TLM_ADDRESS_ERROR_RESPONSE);
  CHECK(b.p->results()["stats"]["mem"]["reads"]["value"].get<double>() == 0);
}

TEST_CASE("sram: energy is bytes x energy per byte plus leakage x time, and parts add up", "[sram]") {
  test::bench b(yaml);
  auto& ti = b.init();
  ti.write(base, std::vector<unsigned char>(1000, 7));
  ti.read(base, 500, sc_time(1, sc_core::SC_US));
  b.p->run();
  const auto r = b.p->results();
  const double t = r["sim_time_s"].get<double>();
  const auto& by = r["energy_J"]["by_component"];
  // 1 MiB of a 4 MiB figure: access energy per byte x (1/4)^0.5, leakage and area x 1/4.
  CHECK(by["mem.access"].get<double>() == Approx(1500 * 185.9e-12 * 0.5));
  CHECK(r["stats"]["mem"]["access_energy_per_byte"]["value"].get<double>() == Approx(92.95));
  CHECK(by["mem.leakage"].get<double>() == Approx(0.415 / 4 * t));  // 1 MiB of a 4 MiB figure
  double sum = 0;
  for (const auto& [k, v] : by.items()) sum += v.get<double>();
  CHECK(r["energy_J"]["total"].get<double>() == Approx(sum));
  CHECK(r["stats"]["mem"]["area"]["value"].get<double>() == Approx(7.3 / 4));
}

TEST_CASE("sram: bandwidth converges as the burst size shrinks, given enough requests in flight", "[sram]") {
  // 4 MiB streamed in 1 MiB, 4 KiB and 64 B bursts: each run reaches the array's 128 GB/s
  // within a few percent (a 64 B burst keeps one bank busy 8 ns, so 16 banks need >= 16 in
  // flight, plus the access latency and interconnect crossings).
  auto bw = [](const char* burst, const char* outstanding) {
    return std::stod(test::in_child_process([&] {
      auto cfg = config::from_string(R"(
include: tech/65nm.yaml
system:
  memories:
    mem: {model: sram, base_addr: 0, capacity_MiB: 4, bandwidth_GBps: 128, banks: 16, queue_depth: 64}
workload: {type: traffic, target: mem, total_bytes: 4194304}
)", "conv.yaml", {std::string("workload.burst_bytes=") + burst,
                  std::string("workload.outstanding=") + outstanding});
      platform p(cfg);
      p.run();
      return std::to_string(p.results()["traffic"]["bandwidth_GBps"].get<double>());
    }));
  };
  const double big = bw("1048576", "2"), mid = bw("4096", "8"), small = bw("64", "48");
  CHECK(big == Approx(128).epsilon(0.02));
  CHECK(mid == Approx(big).epsilon(0.03));
  CHECK(small == Approx(big).epsilon(0.05));
}
