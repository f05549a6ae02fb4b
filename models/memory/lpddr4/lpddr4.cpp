// `lpddr4`: LPDDR4 SDRAM main memory; see lpddr4.h and docs/models/memory-lpddr4.md.
#include "models/memory/lpddr4/lpddr4.h"

#include "models/memory/lpddr4/memspec_file.h"
#include "platform/trace/timeline.h"

#include <algorithm>
#include <cmath>

namespace kelle {

namespace {

sc_core::sc_time ns_time(double ns) { return sc_core::sc_time(ns, sc_core::SC_NS); }

}  // namespace

lpddr4::lpddr4(const sc_core::sc_module_name& name, const memory_args& a, const device_kind& kind)
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
          "refresh windows that interrupted or delayed a pending transfer")),
      m_turnarounds(m_stats.counter("bus_turnarounds", "count",
                                    "changes of a data bus between reading and writing")),
      m_write_drains(m_stats.counter("write_drains", "count",
                                     "frfcfs: times a channel switched to draining its writes")) {
  const config_node& p = a.params;
  // The device's organisation and timings come from a memspec file (memspec_file.h); instance
  // keys of the same names override them.
  const memspec_file spec(p, std::string(kind.default_memspec));

  // Organisation.
  m_channels = static_cast<unsigned>(p.get_uint("channels", 8, "number of independent channels", 1, 1024));
  m_banks = static_cast<unsigned>(p.get_uint("banks_per_channel", spec.uint("banks_per_channel"), "banks per channel", 1, 1024));
  m_width_bits = p.get_uint("channel_width_bits", spec.uint("channel_width_bits"), "data bus width of one channel in bits", 8, 1024);
  if (m_width_bits % 8 != 0) p.fail("channel_width_bits", "must be a multiple of 8");
  m_burst_length = p.get_uint("burst_length", spec.uint("burst_length"), "data beats per burst (16 or 32)", 1, 1024);
  m_burst_bytes = m_burst_length * m_width_bits / 8;
  m_row_bytes = p.get_uint("row_bytes", spec.uint("row_bytes"), "row (page) size of one bank of one channel in bytes",
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
  m_data_rate_MTps = p.get_double("data_rate_MTps", spec.num("data_rate_MTps"), "data rate of a pin in MT/s", 1.0, 1e5);
  m_peak_Bps = m_data_rate_MTps * 1e6 * static_cast<double>(m_width_bits) / 8 * m_channels;

  // Timing: the memspec's (scenarios/memspec/), each overridable by an instance key.
  // Two transfers per clock of the data strobe; LPDDR5's command clock CK runs at 1 / wck_to_ck of
  // the data clock WCK (4:1 above 3200 MT/s), and RL, WL and tWPRE count CK clocks.
  const std::uint64_t wck = p.get_uint("wck_to_ck", spec.uint("wck_to_ck"),
                                       "data clock (WCK) to command clock (CK) ratio (1: none, LPDDR4)", 1, 16);
  const double tCK_ns = 2000.0 * static_cast<double>(wck) / m_data_rate_MTps;
  m_t.tCK = ns_time(tCK_ns);
  m_t.tBURST = ns_time(static_cast<double>(m_burst_length) * 1000.0 / m_data_rate_MTps);
  m_t.tRCD = ns_time(p.get_double("tRCD_ns", spec.num("tRCD_ns"), "ACT to RD/WR delay in ns", 0, 1e6));
  m_t.tRP = ns_time(p.get_double("tRP_ns", spec.num("tRP_ns"), "precharge time (per bank) in ns", 0, 1e6));
  m_t.tRAS = ns_time(p.get_double("tRAS_ns", spec.num("tRAS_ns"), "ACT to PRE minimum in ns", 0, 1e6));
  m_t.tCL = ns_time(tCK_ns * static_cast<double>(p.get_uint(
                                 "tCL_clk", spec.uint("tCL_clk"), "read latency RL (RD to first data) in clock cycles", 0, 1000)));
  m_t.tCWL = ns_time(tCK_ns * static_cast<double>(p.get_uint(
                                  "tCWL_clk", spec.uint("tCWL_clk"), "write latency WL (WR to first data) in clock cycles", 0, 1000)));
  m_t.tRTP = ns_time(p.get_double("tRTP_ns", spec.num("tRTP_ns"), "RD to PRE delay in ns", 0, 1e6));
  m_t.tWR = ns_time(p.get_double("tWR_ns", spec.num("tWR_ns"), "write recovery (end of write data to PRE) in ns", 0, 1e6));
  m_t.tWTR = ns_time(p.get_double("tWTR_ns", spec.num("tWTR_ns"), "end of write data to RD command in ns", 0, 1e6));
  m_t.tRRD = ns_time(p.get_double("tRRD_ns", spec.num("tRRD_ns"), "ACT to ACT delay (different banks) in ns", 0, 1e6));
  m_t.tFAW = ns_time(p.get_double("tFAW_ns", spec.num("tFAW_ns"), "four-activate window in ns", 0, 1e6));
  m_t.tRFC = ns_time(p.get_double("tRFC_ns", spec.num("tRFC_ns"), "all-bank refresh cycle time tRFCab in ns", 0, 1e6));
  m_t.tREFI = ns_time(p.get_double("tREFI_ns", spec.num("tREFI_ns"), "average refresh interval in ns", 1, 1e9));
  m_refresh = p.get_bool("refresh", true, "model all-bank refresh (false: a what-if without refresh)");
  m_per_bank = p.get_choice("refresh_mode", "all_bank", {"all_bank", "per_bank"}) == "per_bank";
  m_t.tRFCpb = ns_time(p.get_double("tRFCpb_ns", spec.num("tRFCpb_ns"), "per-bank refresh cycle time tRFCpb in ns", 0, 1e6));
  m_alignment = p.get_choice("refresh_alignment", "simultaneous", {"staggered", "simultaneous"}) == "staggered"
                    ? refresh_alignment::staggered
                    : refresh_alignment::simultaneous;
  // Read-to-write turnaround on the data bus: the write data may start RU(tDQSCKmax / tCK) + tWPRE
  // clocks after the end of the read data (JESD209-4 RD-to-WR: RL + RU(tDQSCKmax/tCK) + BL/2
  // - WL + tWPRE + RD(tRPST) between the commands). Write-to-read is tWTR (above).
  const double tDQSCK_ns = p.get_double("tDQSCK_ns", spec.num("tDQSCK_ns"), "read data strobe delay tDQSCK(max) in ns", 0, 1e3);
  const double tWPRE_clk = static_cast<double>(
      p.get_uint("tWPRE_clk", spec.uint("tWPRE_clk"), "write preamble in clock cycles", 0, 100));
  m_t.tRTW = ns_time(tCK_ns * (std::ceil(tDQSCK_ns / tCK_ns - 1e-9) + tWPRE_clk));
  m_groups = static_cast<unsigned>(p.get_uint("bank_groups", spec.uint("bank_groups"), "bank groups per channel (1: none)", 1, 64));
  if (m_banks % m_groups != 0) p.fail("bank_groups", "must divide banks_per_channel (" + std::to_string(m_banks) + ")");
  m_row_div = divider(m_row_bytes);
  m_bank_div = divider(m_banks);
  m_burst_div = divider(m_burst_bytes);
  m_interleave_div = divider(m_interleave);
  m_channel_div = divider(m_channels);
  m_group_div = divider(m_groups);
  m_t.tCCD_L = ns_time(p.get_double("tCCD_L_ns", spec.num("tCCD_L_ns"),
                                    "column-to-column delay within a bank group in ns (0: the burst time)", 0, 1e3));
  m_policy = p.get_choice("scheduling", "fcfs", {"fcfs", "frfcfs"}) == "frfcfs" ? scheduling::frfcfs
                                                                                : scheduling::fcfs;
  m_max_bypass = static_cast<unsigned>(p.get_uint(
      "frfcfs_max_bypass", 16, "frfcfs: younger requests served before an older one, at most", 0, 1u << 20));
  m_wq_high = static_cast<unsigned>(p.get_uint(
      "write_queue_high", 8, "frfcfs: queued writes of a channel that start a write drain", 1, 1u << 20));
  m_wq_low = static_cast<unsigned>(p.get_uint(
      "write_queue_low", 2, "frfcfs: queued writes of a channel at which a drain stops", 0, 1u << 20));
  if (m_wq_low >= m_wq_high) p.fail("write_queue_low", "must be below write_queue_high (" + std::to_string(m_wq_high) + ")");

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
  m_tRFCpb = ticks(m_t.tRFCpb);
  m_tREFI = ticks(m_t.tREFI);
  m_tRTW = ticks(m_t.tRTW);
  m_tCCD_L = std::max(ticks(m_t.tCCD_L), m_tB);
  if (m_tB == 0) p.fail("data_rate_MTps", "too high for the time resolution (a burst takes no time)");
  // A burst must fit between two refresh windows, or a transfer would never complete.
  const tick gap = m_tRFC + m_tFAW + m_tRRD + m_tRCD + std::max(m_tCL, m_tCWL) + m_tWTR + m_tB;
  if (m_refresh && m_tREFI <= gap)
    p.fail("tREFI_ns", "must exceed tRFC + tFAW + tRRD + tRCD + max(RL, WL) + tWTR + burst time (" +
                           format_number(sc_core::sc_time::from_value(gap).to_seconds() * 1e9) + " ns)");

  // Energy figures of the technology description, tech.lpddr4.
  const config_node tech = a.tech.child(kind.tech_section);
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
  if (m_per_bank) m_refresh_J /= m_banks;  // a REFpb refreshes one bank's share of the rows

  m_ch.assign(m_channels, channel_state{});
  for (unsigned c = 0; c < m_channels; ++c) m_ch[c].next_refresh = ticks(refresh_phase(c));
  m_bank.assign(static_cast<std::size_t>(m_channels) * m_banks, bank_state{});
  for (unsigned c = 0; c < m_channels; ++c)
    for (unsigned b = 0; b < m_banks; ++b)
      m_bank[static_cast<std::size_t>(c) * m_banks + b].next_refresh = ticks(bank_refresh_phase(c, b));
  if (m_per_bank)
    for (const bank_state& bk : m_bank) m_epoch_phase.push_back(bk.next_refresh);
  else
    for (const channel_state& ch : m_ch) m_epoch_phase.push_back(ch.next_refresh);
  m_epoch_done.assign(m_epoch_phase.size(), 0);

  // Refresh derating with temperature. JESD209-4 (LPDDR4, 2014) MR4 OP[2:0] tells the controller
  // the refresh rate the device needs: 011b 1x tREFI (the memspec's, case temperature <= 85 C),
  // 100b 0.5x, 101b/110b 0.25x (110b with the AC timings derated), 111b above the operating
  // limit; JESD209-5 (LPDDR5) MR4 has the same 1x / 0.5x / 0.25x steps (and 0.125x, beyond
  // them; a controller that supports "1x, 0.5x, 0.25x and 0.125x" and reads MR4 to set them: AMD
  // PG456, integrated DDR5/LPDDR5 memory controller, "Refresh"). At which temperature the device
  // reports each code is the vendor's; the standard fixes only 1x up to 85 C. The thresholds are
  // the memspec's (refresh_2x_above_C 85 from the standard, refresh_4x_above_C an assumption of
  // the memspec files; both optional in a memspec: 85 and 105 C when absent, so memspec files
  // written before derating existed still load). Opt-in with thermal.dram_derating
  // (docs/models/thermal.md, "The DRAM").
  m_tREFI_1x = m_tREFI;
  m_derate_2x_C = p.get_double("refresh_2x_above_C", spec.num_or("refresh_2x_above_C", 85),
                               "DRAM temperature above which MR4 asks for 0.5x tREFI, C", -40, 200);
  m_derate_4x_C = p.get_double("refresh_4x_above_C", spec.num_or("refresh_4x_above_C", 105),
                               "DRAM temperature above which MR4 asks for 0.25x tREFI, C", m_derate_2x_C, 200);
  // How often the controller reads MR4 (an assumption: the thermal model's default step; JESD209-4
  // leaves the polling interval to the system, bounded by the temperature gradient it must track).
  const double poll_us = p.get_double("mr4_poll_us", 1000, "interval of the controller's MR4 reads, us", 0.001, 1e9);
  die_temperature* die = die_temperature::current();
  if (m_refresh && die && die->dram_derating()) {
    m_temperature = die;
    m_mr4_period = std::max<tick>(1, ticks(sc_core::sc_time(poll_us, sc_core::SC_US)));
    if (m_tREFI_1x / 4 <= gap)
      p.fail("tREFI_ns", "a quarter of it (the 0.25x refresh rate of thermal.dram_derating) must exceed tRFC + tFAW + "
                         "tRRD + tRCD + max(RL, WL) + tWTR + burst time (" +
                             format_number(sc_core::sc_time::from_value(gap).to_seconds() * 1e9) + " ns)");
  }
  spec.check_all_used();
  if (m_policy == scheduling::frfcfs) {
    m_queue.assign(m_channels, channel_queue{});
    for (auto& cq : m_queue) cq.q.reserve(64);
    SC_HAS_PROCESS(lpddr4);
    SC_METHOD(scheduler_process);
    sensitive << m_wake;
    dont_initialize();
  }

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
  if (m_temperature) {  // only with derating, so a run without it has today's statistics
    m_stats.formula("refresh_rate", "x", "refresh rate now, as a multiple of the <= 85 C rate (MR4: 1, 2 or 4)",
                    [this] { return static_cast<double>(m_rate); });
    m_rate_changes = &m_stats.counter("refresh_rate_changes", "count",
                                      "changes of the refresh rate after an MR4 read (thermal.dram_derating)");
  }
  m_stats.formula("rows_per_bank", "count", "capacity / (channels x banks x row bytes)", [this] {
    return static_cast<double>(capacity_bytes()) /
           (static_cast<double>(m_channels) * m_banks * static_cast<double>(m_row_bytes));
  });

  const double burst_bits = static_cast<double>(m_burst_bytes) * 8;
  m_stats.energy(energy_kind::access, "access", "bursts x burst bits x read or write energy per bit", [this, burst_bits] {
    return burst_bits * (m_read_bursts.value() * m_read_J_per_bit +
                         m_write_bursts.value() * m_write_J_per_bit);
  });
  m_stats.energy(energy_kind::activate, "activate", "activations x energy per ACT/PRE pair",
                 [this] { return m_activations.value() * m_act_J; });
  m_stats.energy(energy_kind::background, "background", "background power x simulated time",
                 [this] { return m_background_W * now_s(); });
  m_stats.energy(energy_kind::refresh, "refresh", "refreshes x energy per all-bank refresh of a channel", [this] {
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
  // Staggered: channels refresh tREFI / channels apart, the first half a step after time 0.
  // Simultaneous: every channel at tREFI / 2.
  if (m_alignment == refresh_alignment::simultaneous) return sc_core::sc_time::from_value(m_tREFI / 2);
  return sc_core::sc_time::from_value(m_tREFI * (2 * std::uint64_t{channel} + 1) / (2 * std::uint64_t{m_channels}));
}

sc_core::sc_time lpddr4::bank_refresh_phase(unsigned channel, unsigned bank) const {
  const std::uint64_t B = m_banks, C = m_channels;
  const std::uint64_t c = m_alignment == refresh_alignment::staggered ? channel : 0;
  return sc_core::sc_time::from_value(m_tREFI * (2 * (std::uint64_t{bank} * C + c) + 1) / (2 * B * C));
}

std::uint64_t lpddr4::refreshes_until(const sc_core::sc_time& t) const {
  if (!m_refresh) return 0;
  const tick now = ticks(t);
  std::uint64_t n = 0;
  // Each grid's windows at earlier rates, then its windows at the current rate up to `now`.
  for (std::size_t i = 0; i < m_epoch_phase.size(); ++i) {
    n += m_epoch_done[i];
    if (now >= m_epoch_phase[i]) n += (now - m_epoch_phase[i]) / m_tREFI + 1;
  }
  return n;
}

void lpddr4::poll_mr4(tick t) {
  m_next_mr4 = (t / m_mr4_period + 1) * m_mr4_period;
  const double T = m_temperature->dram_C();
  const unsigned rate = T > m_derate_4x_C ? 4u : T > m_derate_2x_C ? 2u : 1u;
  if (rate == m_rate) return;
  const tick old = m_tREFI, next_T = m_tREFI_1x / rate;
  // Each grid: windows that started before t are applied at the old rate (they may still hold the
  // channel or bank beyond t); windows already applied beyond t (transfers scheduled ahead) stay
  // as they were. The new grid keeps the old one's phase: it runs on from the last window
  // (next - old, before time 0 when none has come yet) in steps of the new interval, the first at
  // or after t (and after that last window). Each grid keeps its own phase, so staggered channels
  // (banks) stay staggered: moving every grid to max(t, last + new interval) put every window that
  // fell before t at t, all channels' refreshes at once.
  auto rebase = [&](std::size_t i, tick& next) {
    m_epoch_done[i] += (next - m_epoch_phase[i]) / old;
    using stick = std::int64_t;
    const stick last = static_cast<stick>(next) - static_cast<stick>(old), T = static_cast<stick>(next_T);
    const stick from = std::max(static_cast<stick>(t), last + 1);
    next = static_cast<tick>(last + (from - last + T - 1) / T * T);
    m_epoch_phase[i] = next;
  };
  if (m_per_bank) {
    for (std::size_t i = 0; i < m_bank.size(); ++i) {
      bank_state& bk = m_bank[i];
      if (bk.next_refresh < t) apply_bank_refresh(bk, (t - bk.next_refresh - 1) / old + 1);
      rebase(i, bk.next_refresh);
    }
  } else {
    for (unsigned c = 0; c < m_channels; ++c) {
      channel_state& ch = m_ch[c];
      if (ch.next_refresh < t) apply_refresh(ch, c, (t - ch.next_refresh - 1) / old + 1);
      rebase(c, ch.next_refresh);
    }
  }
  m_rate = rate;
  m_tREFI = next_T;
  ++*m_rate_changes;
  if (timeline::open())
    timeline::get().counter("thermal", "DRAM refresh rate", "x", sc_core::sc_time::from_value(t), rate);
}

sc_core::sc_time lpddr4::unloaded_latency(tlm::tlm_command cmd, std::uint64_t bursts,
                                          row_state state) const {
  tick t = (cmd == tlm::TLM_WRITE_COMMAND ? m_tCWL : m_tCL) + bursts * m_tB;
  if (state != row_state::hit) t += m_tRCD;
  if (state == row_state::conflict) t += m_tRP;
  return sc_core::sc_time::from_value(t);
}

sc_core::sc_time lpddr4::lone_stream_latency(tlm::tlm_command cmd, std::uint64_t bursts) const {
  const double L0 = unloaded_latency(cmd, bursts, row_state::hit).to_seconds();
  if (!m_refresh) return sc_core::sc_time(L0, sc_core::SC_SEC);
  // Per tREFI the stream loses the window and one re-opening ACT per channel.
  const double T = m_t.tREFI.to_seconds();
  const double lost = m_t.tRFC.to_seconds() + m_channels * m_t.tRCD.to_seconds();
  return sc_core::sc_time(L0 * T / (T - lost), sc_core::SC_SEC);
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

memory_target::first_order_figures lpddr4::first_order() const {
  first_order_figures f;
  f.read_J_per_B = m_read_J_per_bit * 8.0;
  f.write_J_per_B = m_write_J_per_bit * 8.0;
  f.activate_J_per_B = m_act_J / static_cast<double>(m_row_bytes);
  f.static_W = m_background_W;
  // Every channel refreshes all its rows once per tREFI (REFab), or each bank once per tREFI
  // with a bank's share of the energy (REFpb): the same power either way.
  const double trefi_s = static_cast<double>(m_tREFI) * sc_core::sc_get_time_resolution().to_seconds();
  if (m_refresh && trefi_s > 0)
    f.refresh_W = m_channels * m_refresh_J * (m_per_bank ? m_banks : 1) / trefi_s;
  return f;
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

void lpddr4::apply_bank_refresh(bank_state& bk, std::uint64_t windows) {
  // Only this bank: its row closed, no ACT before the window ends; the bus stays available.
  const tick end = bk.next_refresh + (windows - 1) * m_tREFI + m_tRFCpb;
  if (bk.open_row != no_row) {
    ++m_precharges;
    bk.open_row = no_row;
  }
  bk.act_ok = std::max(bk.act_ok, end);
  bk.next_refresh += windows * m_tREFI;
}

lpddr4::plan lpddr4::plan_segment(unsigned c, unsigned b, std::uint64_t row, bool write,
                                  tick t) const {
  const channel_state& ch = m_ch[c];
  const bank_state& bk = m_bank[static_cast<std::size_t>(c) * m_banks + b];
  plan p{bk.open_row == row, false, 0, 0};
  p.conflict = !p.hit && bk.open_row != no_row;
  tick col;
  if (p.hit) {
    col = std::max(t, bk.col_ok);
  } else {
    tick act = std::max(t, bk.act_ok);
    if (p.conflict) act = std::max(act, std::max(t, bk.pre_ok) + m_tRP);
    if (ch.acts >= 1) act = std::max(act, ch.last_act + m_tRRD);
    if (ch.acts >= 4) act = std::max(act, ch.faw[ch.faw_pos] + m_tFAW);
    p.act = act;
    col = act + m_tRCD;
  }
  if (!write && ch.wrote) col = std::max(col, ch.last_write_end + m_tWTR);
  tick ds = std::max(col + (write ? m_tCWL : m_tCL), ch.bus_free);
  if (write && ch.last_was_read) ds = std::max(ds, ch.bus_free + m_tRTW);
  if (m_groups > 1 && m_group_div.mod(b) == ch.last_group) ds = std::max(ds, ch.last_burst_start + m_tCCD_L);
  p.data_start = ds;
  return p;
}

lpddr4::tick lpddr4::serve_segment(unsigned c, unsigned b, std::uint64_t row, std::uint64_t n,
                                   bool write, tick t) {
  channel_state& ch = m_ch[c];
  bank_state& bk = m_bank[static_cast<std::size_t>(c) * m_banks + b];
  // Bursts of one segment are in one bank, so in one bank group: tCCD_L apart.
  const tick step = m_groups > 1 ? m_tCCD_L : m_tB;
  for (;;) {
    const plan pl = plan_segment(c, b, row, write, t);
    const tick act = pl.act, data_start = pl.data_start;
    tick data_end = data_start + (n - 1) * step + m_tB;

    std::uint64_t now_bursts = n;
    // The next window in the way: the channel's REFab, or the bank's own REFpb.
    const tick next_window = m_per_bank ? bk.next_refresh : ch.next_refresh;
    const bool refresh_due = m_refresh && next_window < data_end;
    if (refresh_due) {
      // The bursts that complete before the window goes ahead; the rest waits for it.
      const tick ws = next_window;
      now_bursts = data_start + m_tB <= ws ? std::min(n, (ws - data_start - m_tB) / step + 1) : 0;
      data_end = data_start + (now_bursts > 0 ? (now_bursts - 1) * step + m_tB : 0);
    }
    if (now_bursts > 0) {
      if (pl.hit) {
        m_row_hits += static_cast<double>(now_bursts);
      } else {
        ++m_activations;
        ++m_row_misses;
        m_row_hits += static_cast<double>(now_bursts - 1);
        if (pl.conflict) {
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
      if (ch.last_group != ~0u && ch.last_was_read == write) ++m_turnarounds;
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
      ch.last_was_read = !write;
      ch.last_group = static_cast<unsigned>(m_group_div.mod(b));
      ch.last_burst_start = data_end - m_tB;
      n -= now_bursts;
    }
    if (!refresh_due) return data_end;

    const tick ws = next_window, rfc = m_per_bank ? m_tRFCpb : m_tRFC;
    std::uint64_t windows = 1;  // windows wholly before `t` passed while the channel was idle
    if (ws + rfc <= t) windows = (t - ws - rfc) / m_tREFI + 1;
    else ++m_refresh_stalls;
    if (m_per_bank) apply_bank_refresh(bk, windows);
    else apply_refresh(ch, c, windows);
    if (n == 0) return data_end;
  }
}

template <class F>
void lpddr4::for_each_segment(std::uint64_t la0, std::uint64_t la1, F&& f) const {
  // [la0, la1) is contiguous in the channel's own address space: row segments of row_bytes
  // each, banks cycling fastest.
  const std::uint64_t R = m_row_bytes, bb = m_burst_bytes;
  const std::uint64_t s0 = m_row_div.div(la0), s1 = m_row_div.div(la1 - 1);
  for (std::uint64_t s = s0; s <= s1; ++s) {
    const std::uint64_t lo = s == s0 ? la0 - s * R : 0;
    const std::uint64_t hi = s == s1 ? la1 - s * R : R;
    f(static_cast<unsigned>(m_bank_div.mod(s)), m_bank_div.div(s),
      m_burst_div.div(hi + bb - 1) - m_burst_div.div(lo));
  }
}

template <class F>
void lpddr4::for_each_channel_part(std::uint64_t addr, std::uint64_t len, F&& f) const {
  const std::uint64_t G = m_interleave, C = m_channels;
  const divider& g = m_interleave_div;
  const divider& c = m_channel_div;
  const std::uint64_t k0 = g.div(addr), k1 = g.div(addr + len - 1);  // first and last chunk
  const std::uint64_t head = g.mod(addr), tail = g.mod(addr + len - 1) + 1;
  const std::uint64_t nch = std::min<std::uint64_t>(C, k1 - k0 + 1);
  for (std::uint64_t i = 0; i < nch; ++i) {
    // The chunks of channel kf % C are kf, kf + C, ..., kl; in the channel's own address space
    // they are contiguous, chunk k at (k / C) x G.
    const std::uint64_t kf = k0 + i;
    const std::uint64_t kl = k1 - c.mod(k1 - kf);
    const std::uint64_t la0 = c.div(kf) * G + (kf == k0 ? head : 0);
    const std::uint64_t la1 = c.div(kl) * G + (kl == k1 ? tail : G);
    f(static_cast<unsigned>(c.mod(kf)), la0, la1);
  }
}

lpddr4::tick lpddr4::serve_channel(unsigned c, bool write, std::uint64_t la0, std::uint64_t la1,
                                   tick t) {
  tick end = t;
  for_each_segment(la0, la1, [&](unsigned b, std::uint64_t row, std::uint64_t bursts) {
    end = serve_segment(c, b, row, bursts, write, t);
  });
  return end;
}

sc_core::sc_time lpddr4::service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                                 const sc_core::sc_time& start) {
  if (len == 0) return start;
  const tick t = ticks(start);
  if (m_temperature && t >= m_next_mr4) poll_mr4(t);
  const bool write = cmd == tlm::TLM_WRITE_COMMAND;
  if (m_policy == scheduling::frfcfs) {
    enqueue(write, addr, len, t);
    return deferred();
  }
  // fcfs: every segment is scheduled now, in arrival order.
  tick done = t;
  for_each_channel_part(addr, len, [&](unsigned c, std::uint64_t la0, std::uint64_t la1) {
    done = std::max(done, serve_channel(c, write, la0, la1, t));
  });
  return sc_core::sc_time::from_value(done);
}

void lpddr4::enqueue(bool write, std::uint64_t addr, std::uint64_t len, tick t) {
  unsigned slot;
  if (m_free_slots.empty()) {
    slot = static_cast<unsigned>(m_slots.size());
    m_slots.emplace_back();
  } else {
    slot = m_free_slots.back();
    m_free_slots.pop_back();
  }
  request_slot& rs = m_slots[slot];
  rs.id = current_request();
  rs.left = 0;
  rs.done = t;
  for_each_channel_part(addr, len, [&](unsigned c, std::uint64_t la0, std::uint64_t la1) {
    channel_queue& cq = m_queue[c];
    for_each_segment(la0, la1, [&](unsigned b, std::uint64_t row, std::uint64_t bursts) {
      cq.q.push_back(pending{t, row, bursts, b, slot, 0, write});
      ++(write ? cq.writes : cq.reads);
      ++rs.left;
    });
  });
  // Decisions are taken in the scheduler process (complete() must follow this service() call).
  m_wake.notify(sc_core::SC_ZERO_TIME);
}

std::size_t lpddr4::pick(unsigned c, channel_queue& cq) const {
  // The oldest segment of the class being served (writes while draining, else reads) unless a
  // younger one of the class can move data earlier (first ready: row hits, idle banks); the
  // oldest is taken once it has been bypassed frfcfs_max_bypass times.
  const bool want_write = cq.draining;
  std::size_t first = 0;
  while (first < cq.q.size() && cq.q[first].write != want_write) ++first;
  if (cq.q[first].bypassed >= m_max_bypass) return first;
  std::size_t best = first;
  tick best_t = plan_segment(c, cq.q[first].bank, cq.q[first].row, want_write, cq.q[first].arrival).data_start;
  for (std::size_t i = first + 1; i < cq.q.size(); ++i) {
    const pending& s = cq.q[i];
    if (s.write != want_write) continue;
    const tick e = plan_segment(c, s.bank, s.row, want_write, s.arrival).data_start;
    if (e < best_t) {
      best = i;
      best_t = e;
    }
  }
  return best;
}

void lpddr4::decide(unsigned c, tick now) {
  channel_queue& cq = m_queue[c];
  while (!cq.q.empty() && cq.decide_at <= now) {
    // Write draining between the watermarks; reads otherwise.
    if (!cq.draining && (cq.writes >= m_wq_high || cq.reads == 0)) {
      cq.draining = true;
      ++m_write_drains;
    } else if (cq.draining && (cq.writes == 0 || (cq.writes <= m_wq_low && cq.reads > 0))) {
      cq.draining = false;
    }
    const std::size_t k = pick(c, cq);
    const pending s = cq.q[k];
    for (std::size_t i = 0; i < k; ++i)
      if (cq.q[i].write == s.write) ++cq.q[i].bypassed;
    cq.q.erase(cq.q.begin() + static_cast<std::ptrdiff_t>(k));
    --(s.write ? cq.writes : cq.reads);
    const tick end = serve_segment(c, s.bank, s.row, s.bursts, s.write, s.arrival);
    request_slot& rs = m_slots[s.slot];
    rs.done = std::max(rs.done, end);
    if (--rs.left == 0) {
      complete(rs.id, sc_core::sc_time::from_value(std::max(rs.done, now)));
      m_free_slots.push_back(s.slot);
    }
    // The next column command is chosen RL before the bus is free.
    const tick bf = m_ch[c].bus_free;
    cq.decide_at = bf > m_tCL ? bf - m_tCL : 0;
  }
}

void lpddr4::scheduler_process() {
  const tick now = ticks(sc_core::sc_time_stamp());
  for (unsigned c = 0; c < m_channels; ++c)
    if (!m_queue[c].q.empty()) decide(c, now);
  wake(now);
}

void lpddr4::wake(tick now) {
  tick next = ~tick{0};
  for (const auto& cq : m_queue)
    if (!cq.q.empty()) next = std::min(next, std::max(cq.decide_at, now + 1));
  if (next != ~tick{0}) m_wake.notify(sc_core::sc_time::from_value(next - now));
}

KELLE_REGISTER(memories(), "lpddr4",
               "LPDDR4 DRAM: channels, banks, open-page rows, JEDEC timings, refresh, IDD-based energy",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<lpddr4>(a.name.c_str(), a, lpddr4::device_kind{"JEDEC_LPDDR4-4266_x16", "lpddr4"});
               });

KELLE_REGISTER(memories(), "lpddr5",
               "LPDDR5 DRAM: 16 banks in 4 bank groups, WCK clocking, JEDEC timings, refresh, IDD-based energy",
               [](const memory_args& a) -> std::unique_ptr<memory_target> {
                 return std::make_unique<lpddr4>(a.name.c_str(), a, lpddr4::device_kind{"JEDEC_LPDDR5-6400_x16", "lpddr5"});
               });

}  // namespace kelle
