// `lpddr4`: LPDDR4 SDRAM main memory; see lpddr4.h and docs/models/memory-lpddr4.md.
#include "models/memory/lpddr4/lpddr4.h"

#include <algorithm>

namespace kelle {

namespace {

sc_core::sc_time ns_time(double ns) { return sc_core::sc_time(ns, sc_core::SC_NS); }

}  // namespace

lpddr4::lpddr4(const sc_core::sc_module_name& name, const memory_args& a)
    : memory_target(name, a),
      m_activations(m_stats.counter("activations", "count", "row activations (ACT)")),
      m_precharges(m_stats.counter(
          "precharges", "count",
          "rows closed: precharges before an ACT to another row, and open rows closed by refresh")),
      m_row_hits(m_stats.counter("row_hits", "count",
                                 "bursts (column commands) that found their row open")),
      m_row_misses(m_stats.counter("row_misses", "count",
                                   "bursts that needed an activation first (closed or other row)")),
      m_row_conflicts(m_stats.counter("row_conflicts", "count",
                                      "row misses whose bank had another row open (PRE + ACT)")),
      m_read_bursts(m_stats.counter("read_bursts", "count", "read bursts on the data buses")),
      m_write_bursts(m_stats.counter("write_bursts", "count", "write bursts on the data buses")),
      m_refresh_stalls(m_stats.counter(
          "refresh_stalls", "count",
          "refresh windows that interrupted or delayed a pending transfer")) {
  const config_node& p = a.params;

  // Organisation.
  m_channels = static_cast<unsigned>(p.get_uint("channels", 8, "number of independent channels", 1, 1024));
  m_banks = static_cast<unsigned>(p.get_uint("banks_per_channel", 8, "banks per channel", 1, 1024));
  m_width_bits = p.get_uint("channel_width_bits", 16, "data bus width of one channel in bits", 8, 1024);
  if (m_width_bits % 8 != 0) p.fail("channel_width_bits", "must be a multiple of 8");
  m_burst_length = p.get_uint("burst_length", 16, "data beats per burst (LPDDR4: 16 or 32)", 1, 1024);
  m_burst_bytes = m_burst_length * m_width_bits / 8;
  m_row_bytes = p.get_uint("row_bytes", 2048, "row (page) size of one bank of one channel in bytes",
                           1, std::uint64_t{1} << 24);
  m_interleave = p.get_uint("channel_interleave_bytes", 64,
                            "consecutive bytes mapped to one channel before the next channel", 1,
                            std::uint64_t{1} << 24);
  if (m_row_bytes % m_burst_bytes != 0)
    p.fail("row_bytes", "must be a multiple of the burst size (burst_length x channel_width_bits / 8 = " +
                            std::to_string(m_burst_bytes) + " B)");
  if (m_interleave % m_burst_bytes != 0 || m_row_bytes % m_interleave != 0)
    p.fail("channel_interleave_bytes", "must be a multiple of the burst size (" +
                                           std::to_string(m_burst_bytes) + " B) and divide row_bytes (" +
                                           std::to_string(m_row_bytes) + " B)");
  m_data_rate_MTps = p.get_double("data_rate_MTps", 4266, "data rate of a pin in MT/s", 1.0, 1e5);
  m_peak_Bps = m_data_rate_MTps * 1e6 * static_cast<double>(m_width_bits) / 8 * m_channels;

  // Timing: JESD209-4 LPDDR4-4266 (DRAMSys memspec JEDEC_1Gbx16_LPDDR4-4266), see the doc page.
  const double tCK_ns = 2000.0 / m_data_rate_MTps;  // two transfers per clock
  m_t.tCK = ns_time(tCK_ns);
  m_t.tBURST = ns_time(static_cast<double>(m_burst_length) * 1000.0 / m_data_rate_MTps);
  m_t.tRCD = ns_time(p.get_double("tRCD_ns", 18, "ACT to RD/WR delay in ns", 0, 1e6));
  m_t.tRP = ns_time(p.get_double("tRP_ns", 18, "precharge time (per bank) in ns", 0, 1e6));
  m_t.tRAS = ns_time(p.get_double("tRAS_ns", 42, "ACT to PRE minimum in ns", 0, 1e6));
  m_t.tCL = ns_time(tCK_ns * static_cast<double>(p.get_uint(
                                 "tCL_clk", 36, "read latency RL (RD to first data) in clock cycles", 0, 1000)));
  m_t.tCWL = ns_time(tCK_ns * static_cast<double>(p.get_uint(
                                  "tCWL_clk", 18, "write latency WL (WR to first data) in clock cycles", 0, 1000)));
  m_t.tRTP = ns_time(p.get_double("tRTP_ns", 7.5, "RD to PRE delay in ns", 0, 1e6));
  m_t.tWR = ns_time(p.get_double("tWR_ns", 18, "write recovery (end of write data to PRE) in ns", 0, 1e6));
  m_t.tWTR = ns_time(p.get_double("tWTR_ns", 10, "end of write data to RD command in ns", 0, 1e6));
  m_t.tRRD = ns_time(p.get_double("tRRD_ns", 10, "ACT to ACT delay (different banks) in ns", 0, 1e6));
  m_t.tFAW = ns_time(p.get_double("tFAW_ns", 40, "four-activate window in ns", 0, 1e6));
  m_t.tRFC = ns_time(p.get_double("tRFC_ns", 380, "all-bank refresh cycle time tRFCab in ns", 0, 1e6));
  m_t.tREFI = ns_time(p.get_double("tREFI_ns", 3904, "average refresh interval in ns", 1, 1e9));
  m_refresh = p.get_bool("refresh", true, "model all-bank refresh (false: a what-if without refresh)");

  m_tB = ticks(m_t.tBURST);
  m_tRCD = ticks(m_t.tRCD);
  m_tRP = ticks(m_t.tRP);
  m_tRAS = ticks(m_t.tRAS);
  m_tCL = ticks(m_t.tCL);
  m_tCWL = ticks(m_t.tCWL);
  m_tRTP = ticks(m_t.tRTP);
  m_tWR = ticks(m_t.tWR);
  m_tWTR = ticks(m_t.tWTR);
  m_tRRD = ticks(m_t.tRRD);
  m_tFAW = ticks(m_t.tFAW);
  m_tRFC = ticks(m_t.tRFC);
  m_tREFI = ticks(m_t.tREFI);
  if (m_tB == 0) p.fail("data_rate_MTps", "too high for the time resolution (a burst takes no time)");
  // A burst must fit between two refresh windows, or a transfer would never complete.
  const tick gap = m_tRFC + m_tFAW + m_tRRD + m_tRCD + std::max(m_tCL, m_tCWL) + m_tWTR + m_tB;
  if (m_refresh && m_tREFI <= gap)
    p.fail("tREFI_ns", "must exceed tRFC + tFAW + tRRD + tRCD + max(RL, WL) + tWTR + burst time (" +
                           format_number(sc_core::sc_time::from_value(gap).to_seconds() * 1e9) + " ns)");

  // Energy figures of the technology description, tech.lpddr4.
  const config_node tech = a.tech.child("lpddr4");
  const double ref_B = tech.require_double("reference_capacity_MiB",
                                           "capacity of the device the figures are given for, MiB", 1e-9) *
                       1024 * 1024;
  const double cap = static_cast<double>(capacity_bytes());
  m_read_J_per_bit = tech.require_double("read_energy_pJ_per_bit",
                                         "energy per bit read (core + I/O), pJ", 0) * 1e-12;
  m_write_J_per_bit = tech.require_double("write_energy_pJ_per_bit",
                                          "energy per bit written (core + I/O), pJ", 0) * 1e-12;
  m_act_J = tech.require_double("activate_energy_nJ", "energy of one ACT and its PRE, nJ", 0) * 1e-9;
  m_background_W = tech.require_double("background_power_mW",
                                       "standby power of the reference device, mW", 0) * 1e-3 * cap / ref_B;
  m_refresh_J = tech.require_double("refresh_energy_nJ",
                                    "energy of one all-bank refresh of the reference device, nJ", 0) *
                1e-9 * (cap / m_channels) / ref_B;

  m_ch.assign(m_channels, channel_state{});
  for (unsigned c = 0; c < m_channels; ++c) m_ch[c].next_refresh = ticks(refresh_phase(c));
  m_bank.assign(static_cast<std::size_t>(m_channels) * m_banks, bank_state{});

  m_stats.formula("peak_bandwidth", "GB/s", "data rate x channel width x channels",
                  [this] { return m_peak_Bps / 1e9; });
  m_stats.formula("stream_bandwidth_expected", "GB/s",
                  "analytical sequential read stream: peak x refresh eff. x row-switch eff.",
                  [this] { return expected_stream_bandwidth_Bps(tlm::TLM_READ_COMMAND) / 1e9; });
  m_stats.formula("row_hit_rate", "fraction", "row hits / (row hits + row misses), per burst", [this] {
    const double n = m_row_hits.value() + m_row_misses.value();
    return n > 0 ? m_row_hits.value() / n : 0.0;
  });
  m_stats.formula("refreshes", "count", "all-bank refreshes of all channels so far (every tREFI)",
                  [this] { return static_cast<double>(refreshes_until(sc_core::sc_time_stamp())); });
  m_stats.formula("rows_per_bank", "count", "capacity / (channels x banks x row bytes)", [this] {
    return static_cast<double>(capacity_bytes()) /
           (static_cast<double>(m_channels) * m_banks * static_cast<double>(m_row_bytes));
  });

  const double burst_bits = static_cast<double>(m_burst_bytes) * 8;
  m_stats.energy("access", "bursts x burst bits x read or write energy per bit", [this, burst_bits] {
    return burst_bits * (m_read_bursts.value() * m_read_J_per_bit +
                         m_write_bursts.value() * m_write_J_per_bit);
  });
  m_stats.energy("activate", "activations x energy per ACT/PRE pair",
                 [this] { return m_activations.value() * m_act_J; });
  m_stats.energy("background", "background power x simulated time",
                 [this] { return m_background_W * now_s(); });
  m_stats.energy("refresh", "refreshes x energy per all-bank refresh of a channel", [this] {
    return static_cast<double>(refreshes_until(sc_core::sc_time_stamp())) * m_refresh_J;
  });
}

lpddr4::location lpddr4::decode(std::uint64_t addr) const {
  const std::uint64_t chunk = addr / m_interleave;
  const std::uint64_t local = (chunk / m_channels) * m_interleave + addr % m_interleave;
  const std::uint64_t seg = local / m_row_bytes;
  return location{static_cast<unsigned>(chunk % m_channels), static_cast<unsigned>(seg % m_banks),
                  seg / m_banks, local % m_row_bytes};
}

sc_core::sc_time lpddr4::refresh_phase(unsigned channel) const {
  // Channels refresh staggered by tREFI / channels, the first half a step after time 0.
  return sc_core::sc_time::from_value(m_tREFI * (2 * std::uint64_t{channel} + 1) / (2 * std::uint64_t{m_channels}));
}

std::uint64_t lpddr4::refreshes_until(const sc_core::sc_time& t) const {
  if (!m_refresh) return 0;
  const tick now = ticks(t);
  std::uint64_t n = 0;
  for (unsigned c = 0; c < m_channels; ++c) {
    const tick ph = ticks(refresh_phase(c));
    if (now >= ph) n += (now - ph) / m_tREFI + 1;
  }
  return n;
}

sc_core::sc_time lpddr4::unloaded_latency(tlm::tlm_command cmd, std::uint64_t bursts,
                                          row_state state) const {
  tick t = (cmd == tlm::TLM_WRITE_COMMAND ? m_tCWL : m_tCL) + bursts * m_tB;
  if (state != row_state::hit) t += m_tRCD;
  if (state == row_state::conflict) t += m_tRP;
  return sc_core::sc_time::from_value(t);
}

double lpddr4::refresh_efficiency(tlm::tlm_command cmd) const {
  if (!m_refresh) return 1.0;
  const tick lat = cmd == tlm::TLM_WRITE_COMMAND ? m_tCWL : m_tCL;
  return 1.0 - static_cast<double>(m_tRFC + m_tRCD + lat) / static_cast<double>(m_tREFI);
}

double lpddr4::row_switch_efficiency() const {
  const double t_row = static_cast<double>(m_row_bytes / m_burst_bytes * m_tB);
  const double t_act = std::max({static_cast<double>(m_tRRD), static_cast<double>(m_tFAW) / 4,
                                 static_cast<double>(m_tRAS + m_tRP) / m_banks});
  return std::min(1.0, t_row / t_act);
}

double lpddr4::expected_stream_bandwidth_Bps(tlm::tlm_command cmd) const {
  return m_peak_Bps * refresh_efficiency(cmd) * row_switch_efficiency();
}

void lpddr4::apply_refresh(channel_state& ch, unsigned c, std::uint64_t windows) {
  const tick end = ch.next_refresh + (windows - 1) * m_tREFI + m_tRFC;
  bank_state* b = &m_bank[static_cast<std::size_t>(c) * m_banks];
  for (unsigned i = 0; i < m_banks; ++i) {
    if (b[i].open_row != no_row) {
      ++m_precharges;  // the precharge-all that precedes REFab
      b[i].open_row = no_row;
    }
    b[i].act_ok = std::max(b[i].act_ok, end);
  }
  ch.bus_free = std::max(ch.bus_free, end);
  ch.next_refresh += windows * m_tREFI;
}

lpddr4::tick lpddr4::serve_segment(unsigned c, unsigned b, std::uint64_t row, std::uint64_t n,
                                   bool write, tick t) {
  channel_state& ch = m_ch[c];
  bank_state& bk = m_bank[static_cast<std::size_t>(c) * m_banks + b];
  const tick lat = write ? m_tCWL : m_tCL;
  for (;;) {
    // Tentative schedule: PRE/ACT as early as the bank and the ACT limits allow, then the bursts
    // back to back once the bus is free.
    const bool hit = bk.open_row == row;
    const bool conflict = !hit && bk.open_row != no_row;
    tick act = 0, col;
    if (hit) {
      col = std::max(t, bk.col_ok);
    } else {
      act = std::max(t, bk.act_ok);
      if (conflict) act = std::max(act, std::max(t, bk.pre_ok) + m_tRP);
      if (ch.acts >= 1) act = std::max(act, ch.last_act + m_tRRD);
      if (ch.acts >= 4) act = std::max(act, ch.faw[ch.faw_pos] + m_tFAW);
      col = act + m_tRCD;
    }
    if (!write && ch.wrote) col = std::max(col, ch.last_write_end + m_tWTR);
    const tick data_start = std::max(col + lat, ch.bus_free);
    tick data_end = data_start + n * m_tB;

    std::uint64_t now_bursts = n;
    const bool refresh_due = m_refresh && ch.next_refresh < data_end;
    if (refresh_due) {
      // The bursts that complete before the window goes ahead; the rest waits for it.
      const tick ws = ch.next_refresh;
      now_bursts = data_start < ws ? std::min(n, (ws - data_start) / m_tB) : 0;
      data_end = data_start + now_bursts * m_tB;
    }
    if (now_bursts > 0) {
      if (hit) {
        m_row_hits += static_cast<double>(now_bursts);
      } else {
        ++m_activations;
        ++m_row_misses;
        m_row_hits += static_cast<double>(now_bursts - 1);
        if (conflict) {
          ++m_precharges;
          ++m_row_conflicts;
        }
        bk.open_row = row;
        bk.col_ok = act + m_tRCD;
        bk.pre_ok = act + m_tRAS;
        ch.last_act = act;
        ch.faw[ch.faw_pos] = act;
        ch.faw_pos = (ch.faw_pos + 1) % 4;
        if (ch.acts < 4) ++ch.acts;
      }
      if (write) {
        bk.pre_ok = std::max(bk.pre_ok, data_end + m_tWR);
        ch.last_write_end = data_end;
        ch.wrote = true;
        m_write_bursts += static_cast<double>(now_bursts);
      } else {
        // The last RD command issued RL before its burst.
        bk.pre_ok = std::max(bk.pre_ok, data_end - m_tB - m_tCL + m_tRTP);
        m_read_bursts += static_cast<double>(now_bursts);
      }
      ch.bus_free = data_end;
      n -= now_bursts;
    }
    if (!refresh_due) return data_end;

    const tick ws = ch.next_refresh;
    std::uint64_t windows = 1;  // windows wholly before `t` passed while the channel was idle
    if (ws + m_tRFC <= t) windows = (t - ws - m_tRFC) / m_tREFI + 1;
    else ++m_refresh_stalls;
    apply_refresh(ch, c, windows);
    if (n == 0) return data_end;
  }
}

lpddr4::tick lpddr4::serve_channel(unsigned c, bool write, std::uint64_t la0, std::uint64_t la1,
                                   tick t) {
  // [la0, la1) is contiguous in the channel's own address space: row segments of row_bytes
  // each, banks cycling fastest.
  const std::uint64_t R = m_row_bytes, bb = m_burst_bytes;
  const std::uint64_t s0 = la0 / R, s1 = (la1 - 1) / R;
  tick end = t;
  for (std::uint64_t s = s0; s <= s1; ++s) {
    const std::uint64_t lo = s == s0 ? la0 - s * R : 0;
    const std::uint64_t hi = s == s1 ? la1 - s * R : R;
    const std::uint64_t bursts = (hi + bb - 1) / bb - lo / bb;
    end = serve_segment(c, static_cast<unsigned>(s % m_banks), s / m_banks, bursts, write, t);
  }
  return end;
}

sc_core::sc_time lpddr4::service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                                 const sc_core::sc_time& start) {
  if (len == 0) return start;
  const tick t = ticks(start);
  const bool write = cmd == tlm::TLM_WRITE_COMMAND;
  const std::uint64_t G = m_interleave, C = m_channels;
  const std::uint64_t k0 = addr / G, k1 = (addr + len - 1) / G;  // first and last chunk
  const std::uint64_t head = addr % G, tail = (addr + len - 1) % G + 1;
  const std::uint64_t nch = std::min<std::uint64_t>(C, k1 - k0 + 1);
  tick done = t;
  for (std::uint64_t i = 0; i < nch; ++i) {
    // The chunks of channel kf % C are kf, kf + C, ..., kl; in the channel's own address space
    // they are contiguous, chunk k at (k / C) x G.
    const std::uint64_t kf = k0 + i;
    const std::uint64_t kl = k1 - (k1 - kf) % C;
    const std::uint64_t la0 = (kf / C) * G + (kf == k0 ? head : 0);
    const std::uint64_t la1 = (kl / C) * G + (kl == k1 ? tail : G);
    done = std::max(done, serve_channel(static_cast<unsigned>(kf % C), write, la0, la1, t));
  }
  return sc_core::sc_time::from_value(done);
}

KELLE_REGISTER(memories(), "lpddr4",
               "LPDDR4 DRAM: channels, banks, open-page rows, JEDEC timings, refresh, IDD-based energy",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<lpddr4>(a.name.c_str(), a);
               });

}  // namespace kelle
