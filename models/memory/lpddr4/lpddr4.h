// `lpddr4`: LPDDR4 SDRAM main memory. Channels of x16 devices, banks per channel, one row buffer
// per bank kept open after an access (open-page policy), JEDEC timings (tRCD, RL, WL, tRP, tRAS,
// tRTP, tWR, tWTR, tRRD, tFAW, burst time = tCCD) and all-bank refresh (tRFCab every tREFI).
//
// Built for large transfers: a request is split per channel and per row it touches, and each
// row segment (up to a row of bursts) is timed in closed form with one loop iteration, never
// one step per burst. Per channel the controller serves requests in arrival order (FCFS): the
// PRE/ACT of a request overlap earlier data transfers of other banks, the data bursts of a
// channel are serialised on its bus. Refresh is lazy: channel c refreshes in the windows
// [phase_c + k tREFI, + tRFC); a transfer that would overlap a window stops at its start and
// resumes after it with every row closed. No SystemC event is used for refresh.
//
// Address mapping (low to high bits): column-low (channel_interleave_bytes) : channel :
// column-high : bank : row, i.e. row:bank:column:channel:column-low, so a sequential stream
// spreads over all channels every channels x channel_interleave_bytes and moves to the next bank
// after a full row of every channel. See docs/models/memory-lpddr4.md.
#pragma once

#include "models/memory/memory_target.h"
#include "models/thermal/die_temperature.h"
#include "platform/support/divider.h"

#include <vector>

namespace kelle {

class lpddr4 : public memory_target {
 public:
  using tick = std::uint64_t;  // a time in units of the SystemC time resolution

  struct location {
    unsigned channel;
    unsigned bank;
    std::uint64_t row;
    std::uint64_t column;  // byte within the row
  };
  enum class row_state { closed, hit, conflict };

  struct timing_set {
    sc_core::sc_time tCK, tBURST, tRCD, tRP, tRAS, tCL, tCWL, tRTP, tWR, tWTR, tRRD, tFAW, tRFC,
        tREFI, tRTW, tCCD_L, tRFCpb;
  };
  enum class scheduling { fcfs, frfcfs };
  enum class refresh_alignment { staggered, simultaneous };

  // What distinguishes the DRAM standards built on this model: the memspec used when the
  // instance names none, and the section of the technology description with its energies.
  struct device_kind {
    const char* default_memspec;  // scenarios/memspec/<name>.yaml
    const char* tech_section;     // tech.<section>
  };

  // `name`: the factory's sc_module_name (see memory_target).
  lpddr4(const sc_core::sc_module_name& name, const memory_args& args, const device_kind& kind);

  // data rate x channel width x channels.
  double peak_bandwidth_Bps() const override { return m_peak_Bps; }
  double sustainable_bandwidth_Bps() const override { return expected_stream_bandwidth_Bps(tlm::TLM_READ_COMMAND); }
  double read_energy_J_per_byte() const override { return m_read_J_per_bit * 8.0; }
  // Background and refresh power; a sequential stream opens a row of a bank per row of bytes.
  first_order_figures first_order() const override;

  location decode(std::uint64_t addr) const;
  unsigned channels() const { return m_channels; }
  unsigned banks_per_channel() const { return m_banks; }
  std::uint64_t row_bytes() const { return m_row_bytes; }
  std::uint64_t burst_bytes() const { return m_burst_bytes; }
  std::uint64_t interleave_bytes() const { return m_interleave; }
  bool refresh_enabled() const { return m_refresh; }
  scheduling policy() const { return m_policy; }
  refresh_alignment alignment() const { return m_alignment; }
  unsigned bank_groups() const { return m_groups; }
  const timing_set& timings() const { return m_t; }

  // The documented formulas (docs/models/memory-lpddr4.md).
  // Latency of a lone access of `bursts` bursts on one channel that finds its bank `state`,
  // long after any earlier activity and outside refresh windows.
  sc_core::sc_time unloaded_latency(tlm::tlm_command cmd, std::uint64_t bursts, row_state state) const;
  // Share of a channel's time left by refresh for a continuous stream: 1 - (tRFC + tRCD +
  // RL or WL) / tREFI (each window costs tRFC plus re-opening a row and its first latency).
  double refresh_efficiency(tlm::tlm_command cmd) const;
  // Share left by row activations of a sequential stream: min(1, t_row / t_act) where t_row is
  // the time to stream one row and t_act = max(tRRD, tFAW / 4, tRC / banks) the activation rate
  // bound of a channel.
  double row_switch_efficiency() const;
  // peak x refresh efficiency x row-switch efficiency.
  double expected_stream_bandwidth_Bps(tlm::tlm_command cmd) const;
  // All-bank refreshes (windows started) in every channel over [0, t].
  std::uint64_t refreshes_until(const sc_core::sc_time& t) const;
  // Start of channel c's first refresh window.
  sc_core::sc_time refresh_phase(unsigned channel) const;
  // refresh_mode per_bank: start of the first REFpb window of bank b of channel c, at
  // (b x channels + c' + 1/2) tREFI / (banks x channels), c' = c when staggered, else 0.
  sc_core::sc_time bank_refresh_phase(unsigned channel, unsigned bank) const;
  bool per_bank_refresh() const { return m_per_bank; }
  // Start of channel c's first all-bank refresh window not yet applied (windows are applied
  // lazily, at the channel's next access).
  sc_core::sc_time next_refresh(unsigned channel) const { return sc_core::sc_time::from_value(m_ch[channel].next_refresh); }
  // Mean latency of a lone stream of requests (one in flight) of `bursts` bursts each on one
  // channel that find their rows open, `channels` channels visited in turn, with refresh:
  // L0 tREFI / (tREFI - tRFC - channels x tRCD) for simultaneous windows (docs, "Validation").
  sc_core::sc_time lone_stream_latency(tlm::tlm_command cmd, std::uint64_t bursts) const;
  // Energy of one refresh command of this instance, J: a REFab of one channel, or with per-bank
  // refresh a REFpb (the REFab's energy / banks).
  double refresh_energy_J() const { return m_refresh_J; }
  // Background power of the whole instance, W.
  double background_power_W() const { return m_background_W; }
  // Temperature derating (thermal.dram_derating, JESD209-4 MR4): the refresh rate now, as a
  // multiple of the <= 85 C rate (1, 2 or 4), and whether the DRAM reads its temperature at all.
  unsigned refresh_rate() const { return m_rate; }
  bool derating() const { return m_temperature != nullptr; }

 protected:
  sc_core::sc_time service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len,
                           const sc_core::sc_time& start) override;

 private:
  static constexpr std::uint64_t no_row = ~std::uint64_t{0};
  struct bank_state {
    std::uint64_t open_row = no_row;
    tick col_ok = 0;  // earliest column command (ACT + tRCD)
    tick pre_ok = 0;  // earliest precharge (ACT + tRAS, last RD + tRTP, last write data + tWR)
    tick act_ok = 0;  // earliest activate (PRE + tRP, end of a refresh window)
    tick next_refresh = 0;  // refresh_mode per_bank: the first REFpb window not yet applied
  };
  struct channel_state {
    tick bus_free = 0;        // the data bus is free from
    tick last_write_end = 0;  // end of the last write data (tWTR)
    bool wrote = false;       // whether last_write_end is set
    bool last_was_read = false;  // direction of the last burst on the bus (turnarounds)
    unsigned last_group = ~0u;   // bank group of the last burst (tCCD_L)
    tick last_burst_start = 0;   // start of the last burst on the bus
    tick faw[4] = {0, 0, 0, 0};  // the last four ACT times (ring, oldest at faw_pos)
    unsigned faw_pos = 0;
    unsigned acts = 0;           // ACTs issued, saturating at 4
    tick last_act = 0;
    tick next_refresh = 0;    // start of the first refresh window not yet applied
  };

  // A row segment waiting in a channel's queue (scheduling frfcfs).
  struct pending {
    tick arrival;
    std::uint64_t row, bursts;
    unsigned bank, slot, bypassed;
    bool write;
  };
  // A request whose segments are queued: its id in the base, segments not yet scheduled, and
  // the end of the last scheduled one.
  struct request_slot {
    std::uint64_t id = 0;
    std::uint64_t left = 0;
    tick done = 0;
  };
  struct channel_queue {
    std::vector<pending> q;     // arrival order
    unsigned reads = 0, writes = 0;
    bool draining = false;      // serving writes (write queue above its high watermark)
    tick decide_at = 0;         // the next scheduling decision (bus free - RL)
  };

  tick serve_channel(unsigned c, bool write, std::uint64_t la0, std::uint64_t la1, tick t);
  // Calls f(bank, row, bursts) for each row segment of [la0, la1) in the channel's space.
  template <class F>
  void for_each_segment(std::uint64_t la0, std::uint64_t la1, F&& f) const;
  // frfcfs: queue a request's segments, schedule, and wake up for later decisions.
  void enqueue(bool write, std::uint64_t addr, std::uint64_t len, tick t);
  void decide(unsigned c, tick now);
  std::size_t pick(unsigned c, channel_queue& cq) const;
  void scheduler_process();
  void wake(tick now);
  tick serve_segment(unsigned c, unsigned b, std::uint64_t row, std::uint64_t bursts, bool write,
                     tick t);
  // The tentative schedule of a segment arriving at t: PRE/ACT as early as the bank and the ACT
  // limits allow, its first burst once the bus is free (turnaround and tCCD_L included).
  struct plan {
    bool hit, conflict;
    tick act, data_start;
  };
  plan plan_segment(unsigned c, unsigned b, std::uint64_t row, bool write, tick t) const;
  // Calls f(channel, la0, la1) for each channel's contiguous part of [addr, addr + len).
  template <class F>
  void for_each_channel_part(std::uint64_t addr, std::uint64_t len, F&& f) const;
  void apply_refresh(channel_state& ch, unsigned c, std::uint64_t windows);
  void apply_bank_refresh(bank_state& bk, std::uint64_t windows);
  // Reads the DRAM's temperature (MR4) at t and, when its range changed, moves every channel's
  // (or bank's) refresh grid to the new tREFI from its next window on.
  void poll_mr4(tick t);
  static tick ticks(const sc_core::sc_time& t) { return t.value(); }

  // Organisation
  unsigned m_channels, m_banks;
  std::uint64_t m_width_bits, m_burst_length, m_burst_bytes, m_row_bytes, m_interleave;
  double m_data_rate_MTps, m_peak_Bps;
  bool m_refresh;
  bool m_per_bank;            // refresh_mode per_bank (REFpb) instead of all_bank (REFab)
  scheduling m_policy;
  refresh_alignment m_alignment;
  unsigned m_groups;          // bank groups (1: none)
  // Division by the organisation's sizes on the hot path (shifts for powers of two).
  divider m_row_div, m_bank_div, m_burst_div, m_interleave_div, m_channel_div, m_group_div;
  unsigned m_max_bypass;      // frfcfs: younger segments served before an old one, at most
  unsigned m_wq_high, m_wq_low;  // frfcfs: write-queue watermarks per channel (segments)
  timing_set m_t;
  // The same timings in ticks, for the hot path.
  tick m_tB, m_tRCD, m_tRP, m_tRAS, m_tCL, m_tCWL, m_tRTP, m_tWR, m_tWTR, m_tRRD, m_tFAW, m_tRFC,
      m_tREFI, m_tRTW, m_tCCD_L, m_tRFCpb;

  // Energy figures (tech.lpddr4, scaled to this instance)
  double m_read_J_per_bit, m_write_J_per_bit, m_act_J, m_background_W, m_refresh_J;

  // Refresh derating with temperature (JESD209-4 MR4; null: the <= 85 C rate all run long).
  die_temperature* m_temperature = nullptr;
  double m_derate_2x_C = 85, m_derate_4x_C = 105;  // above: tREFI / 2, tREFI / 4
  tick m_mr4_period = 0, m_next_mr4 = 0;           // the controller's MR4 reads
  tick m_tREFI_1x = 0;                             // tREFI at <= 85 C
  unsigned m_rate = 1;                             // m_tREFI = m_tREFI_1x / m_rate
  // The refresh grid of each channel (all_bank) or bank (per_bank, channel-major): the first
  // window at the current rate, and the windows of earlier rates.
  std::vector<tick> m_epoch_phase;
  std::vector<std::uint64_t> m_epoch_done;

  std::vector<channel_state> m_ch;
  std::vector<bank_state> m_bank;  // channel-major
  std::vector<channel_queue> m_queue;   // frfcfs
  std::vector<request_slot> m_slots;    // frfcfs, reused through m_free_slots
  std::vector<unsigned> m_free_slots;
  sc_core::sc_event m_wake;

  stat& m_activations;
  stat& m_precharges;
  stat& m_row_hits;
  stat& m_row_misses;
  stat& m_row_conflicts;
  stat& m_read_bursts;
  stat& m_write_bursts;
  stat& m_refresh_stalls;
  stat& m_turnarounds;
  stat& m_write_drains;
  stat* m_rate_changes = nullptr;  // only with derating
};

}  // namespace kelle
