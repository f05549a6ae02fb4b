// `hbm2`: an HBM2 stack as a Kelle VP memory model, built outside the platform's tree and loaded
// as a plugin (docs/write-a-memory-model.md walks through this file).
//
// Timing: independent channels (a 128-bit bus each), banks per channel with one row buffer each
// (open-page policy), JEDEC-style core timings (tRCD, CL/CWL, tRP, tRAS, tWR) and all-bank
// refresh windows. A request is split into `interleave_bytes` chunks spread over the channels;
// per chunk the bank finds its row open (hit: column command at once), closed (miss: ACT, then
// tRCD) or another row open (conflict: PRE no earlier than tRAS after that row's ACT, tRP, ACT,
// tRCD). Data then waits CL (read) or CWL (write) and for the channel's data bus, and takes
// BL/2 clock cycles per burst (double data rate). Every tREFI a channel refreshes for tRFC: a
// command or data transfer that meets the window waits for its end, and every row is closed by
// it (the next access to a bank re-activates its row).
//
// Energy: counts x energy per action, with DRAMsim3's power equations (Config::InitPowerParams:
// E = VDD x current x time) applied to the IDD currents of the same configuration file:
//   read burst        VDD (IDD4R - IDD3N) BL/2 tCK          (0.804 nJ per 64 B burst)
//   write burst       VDD (IDD4W - IDD3N) BL/2 tCK          (1.068 nJ)
//   activate (+PRE)   VDD [IDD0 tRC - (IDD3N tRAS + IDD2N tRP)]   (0.828 nJ)
//   refresh (REFab)   VDD (IDD5AB - IDD3N) tRFC per channel (60.8 nJ)
//   background        VDD IDD3N per channel (rows stay open: active standby, 66 mW)
// DRAMsim3 counts one device per 128-bit HBM channel (device_width = bus_width), so each figure
// is per channel.
//
// Every default is from DRAMsim3's configs/HBM2_8Gb_x128.ini (umd-memsys/DRAMsim3, commit
// 0eb63609): 8 channels x 128 bit, 4 bank groups x 4 banks, 32768 rows x 64 columns of 128 bit
// (1 KiB rows), BL 4, tCK 1 ns (2 Gb/s per pin, 256 GB/s per stack), CL 14, CWL 4, tRCD 14,
// tRP 14, tRAS 34, tWR 16, tRFC 260, tREFI 3900 cycles; VDD 1.2 V, IDD0 65, IDD2N 40, IDD3N 55,
// IDD4R 390, IDD4W 500, IDD5AB 250 mA. The channel interleave (256 B) is an assumption.
#include "models/memory/memory_target.h"
#include "platform/plugin/plugin.h"

#include <algorithm>
#include <cmath>
#include <vector>

KELLE_PLUGIN("hbm2")

namespace hbm2_plugin {

using kelle::config_node;
using kelle::memory_args;
using sc_core::SC_NS;
using sc_core::sc_time;

class hbm2 : public kelle::memory_target {
 public:
  hbm2(const sc_core::sc_module_name& n, const memory_args& a) : memory_target(n, a) {
    const config_node& p = a.params;
    // Organisation (DRAMsim3 HBM2_8Gb_x128.ini [dram_structure] and [system]).
    m_channels = static_cast<unsigned>(p.get_uint("channels", 8, "independent channels", 1, 64));
    m_width_bits = static_cast<unsigned>(
        p.get_uint("channel_width_bits", 128, "data bus width of a channel in bits", 8, 1024));
    m_banks = static_cast<unsigned>(p.get_uint("banks", 16, "banks per channel", 1, 256));
    m_row_bytes = p.get_uint("row_bytes", 1024, "bytes per row of a bank (page size)", 64, 1 << 20);
    const std::uint64_t bl = p.get_uint("burst_length", 4, "beats per burst (BL)", 1, 64);
    m_interleave = p.get_uint("interleave_bytes", 256,
                              "bytes mapped to one channel before the next (assumption)", 1, 1 << 20);
    // Timings in clock cycles of tCK (DRAMsim3 HBM2_8Gb_x128.ini [timing]).
    const double tck = p.get_double("tCK_ns", 1.0, "clock period in ns (data at twice the clock)", 1e-3);
    auto cycles = [&](const char* key, double def, const char* what) {
      return sc_time(p.get_double(key, def, what, 0.0) * tck, SC_NS);
    };
    m_tCL = cycles("tCL_cycles", 14, "read latency CL in cycles");
    m_tCWL = cycles("tCWL_cycles", 4, "write latency CWL in cycles");
    m_tRCD = cycles("tRCD_cycles", 14, "ACT to column command in cycles");
    m_tRP = cycles("tRP_cycles", 14, "precharge time in cycles");
    m_tRAS = cycles("tRAS_cycles", 34, "ACT to PRE at least, in cycles");
    m_tWR = cycles("tWR_cycles", 16, "write recovery before PRE in cycles");
    m_tRFC = cycles("tRFC_cycles", 260, "all-bank refresh time in cycles");
    m_tREFI = cycles("tREFI_cycles", 3900, "refresh interval in cycles");
    m_refresh = p.get_bool("refresh", true, "model refresh windows and their energy");
    if (m_refresh && m_tREFI <= m_tRFC) p.fail("tREFI_cycles", "must exceed tRFC_cycles");
    m_burst_bytes = m_width_bits / 8 * bl;
    m_tBURST = sc_time(double(bl) / 2 * tck, SC_NS);
    if (m_row_bytes % m_burst_bytes) p.fail("row_bytes", "must be a multiple of a burst (" +
                                                             std::to_string(m_burst_bytes) + " B)");
    m_peak_Bps = m_channels * (m_width_bits / 8.0) * 2.0 / (tck * 1e-9);

    // Currents (DRAMsim3 HBM2_8Gb_x128.ini [power]) and DRAMsim3's energy equations.
    const double vdd = p.get_double("vdd_V", 1.2, "supply voltage in V", 0.0);
    auto mA = [&](const char* key, double def, const char* what) {
      return p.get_double(key, def, what, 0.0) * 1e-3;
    };
    const double idd0 = mA("idd0_mA", 65, "IDD0, one-bank ACT-PRE current in mA");
    const double idd2n = mA("idd2n_mA", 40, "IDD2N, precharge standby current in mA");
    const double idd3n = mA("idd3n_mA", 55, "IDD3N, active standby current in mA");
    const double idd4r = mA("idd4r_mA", 390, "IDD4R, burst read current in mA");
    const double idd4w = mA("idd4w_mA", 500, "IDD4W, burst write current in mA");
    const double idd5 = mA("idd5ab_mA", 250, "IDD5AB, all-bank refresh current in mA");
    const double s = 1e-9 * tck;  // one cycle in seconds
    const double burst_cycles = double(bl) / 2, tras = m_tRAS.to_seconds(), trp = m_tRP.to_seconds();
    m_read_J = vdd * (idd4r - idd3n) * burst_cycles * s;
    m_write_J = vdd * (idd4w - idd3n) * burst_cycles * s;
    m_act_J = vdd * (idd0 * (tras + trp) - (idd3n * tras + idd2n * trp));
    m_refresh_J = vdd * (idd5 - idd3n) * m_tRFC.to_seconds();
    m_background_W = vdd * idd3n * m_channels;

    m_state.assign(m_channels, channel{});
    for (auto& c : m_state) c.banks.assign(m_banks, bank{});

    // The model's own statistics (results.json stats.<instance>.*), beside the base class's
    // reads, writes, bytes and bandwidth_achieved.
    m_stats.formula("row_hits", "count", "bursts (column commands) that found their row open",
                    [this] { return double(m_hits); });
    m_stats.formula("row_misses", "count", "bursts that found their bank closed (ACT first)",
                    [this] { return double(m_misses); });
    m_stats.formula("row_conflicts", "count", "bursts that found another row open (PRE + ACT first)",
                    [this] { return double(m_conflicts); });
    m_stats.formula("row_hit_rate", "ratio", "row_hits / (row_hits + row_misses + row_conflicts)", [this] {
      const double n = double(m_hits + m_misses + m_conflicts);
      return n > 0 ? double(m_hits) / n : 0.0;
    });
    m_stats.formula("bursts", "count", "data bursts on the channels", [this] { return double(m_rd + m_wr); });
    m_stats.formula("refresh_waits", "count", "accesses delayed by a refresh window",
                    [this] { return double(m_refresh_waits); });
    m_stats.formula("bus_utilisation", "ratio", "data-bus busy time / (channels x simulated time)", [this] {
      const double t = kelle::now_s();
      return t > 0 ? m_bus_busy_s / (t * m_channels) : 0.0;
    });
    m_stats.formula("peak_bandwidth", "GB/s", "channels x channel width x 2 / tCK",
                    [this] { return m_peak_Bps / 1e9; });
    m_stats.energy(kelle::energy_kind::access, "access", "read and write bursts x energy per burst",
                   [this] { return double(m_rd) * m_read_J + double(m_wr) * m_write_J; });
    m_stats.energy(kelle::energy_kind::activate, "activate", "activations x energy per ACT-PRE pair",
                   [this] { return double(m_misses + m_conflicts + m_reactivations) * m_act_J; });
    m_stats.energy(kelle::energy_kind::refresh, "refresh", "all-bank refreshes x energy per refresh", [this] {
      return m_refresh ? std::floor(kelle::now_s() / m_tREFI.to_seconds()) * m_channels * m_refresh_J : 0.0;
    });
    m_stats.energy(kelle::energy_kind::background, "background", "active-standby power x simulated time",
                   [this] { return m_background_W * kelle::now_s(); });
  }

  double peak_bandwidth_Bps() const override { return m_peak_Bps; }

 protected:
  sc_time service(tlm::tlm_command cmd, std::uint64_t addr, std::uint64_t len, const sc_time& start) override {
    const bool write = cmd == tlm::TLM_WRITE_COMMAND;
    sc_time done = start;
    for (std::uint64_t a = addr, end = addr + len; a < end;) {
      const std::uint64_t chunk = std::min(end, (a / m_interleave + 1) * m_interleave) - a;
      done = std::max(done, access(a, chunk, write, start));
      a += chunk;
    }
    return done;
  }

 private:
  struct bank {
    bool open = false;
    std::uint64_t row = 0;
    sc_time ready;       // earliest next column command
    sc_time pre_ready;   // earliest precharge (tRAS, write recovery)
  };
  struct channel {
    std::vector<bank> banks;
    sc_time bus_free;
    std::uint64_t refresh_epoch = 0;  // refresh windows already applied (rows closed)
  };

  // Moves `t` out of a refresh window of channel `c` and closes its rows after each window.
  sc_time refresh(channel& c, sc_time t) {
    if (!m_refresh) return t;
    const auto k = static_cast<std::uint64_t>(t / m_tREFI);  // windows started by t (window k at k tREFI)
    if (k > c.refresh_epoch) {
      for (auto& b : c.banks) b.open = false;
      c.refresh_epoch = k;
    }
    const sc_time window_end = m_tREFI * double(k) + m_tRFC;
    if (k > 0 && t < window_end) {
      ++m_refresh_waits;
      return window_end;
    }
    return t;
  }

  // One chunk inside one channel and one row: returns when its last burst has been transferred.
  sc_time access(std::uint64_t addr, std::uint64_t len, bool write, const sc_time& start) {
    const std::uint64_t unit = addr / m_interleave;
    channel& c = m_state[unit % m_channels];
    const std::uint64_t local = (unit / m_channels) * m_interleave + addr % m_interleave;
    const std::uint64_t page = local / m_row_bytes;  // row:bank:column mapping
    bank& b = c.banks[page % m_banks];
    const std::uint64_t row = page / m_banks;

    const std::uint64_t bursts = (len + m_burst_bytes - 1) / m_burst_bytes;
    sc_time t = refresh(c, std::max(start, b.ready));
    std::uint64_t hits = bursts;
    if (!b.open || b.row != row) {
      hits = bursts - 1;  // the chunk's later bursts find the row it opened
      if (b.open) {
        ++m_conflicts;
        t = std::max(t, b.pre_ready) + m_tRP;  // PRE, then ACT
      } else {
        ++m_misses;
      }
      b.open = true;
      b.row = row;
      b.pre_ready = t + m_tRAS;
      t += m_tRCD;
    }
    const sc_time latency = write ? m_tCWL : m_tCL;
    sc_time data = std::max(t + latency, c.bus_free);
    if (m_refresh) {
      // A refresh window that starts after the column command, or holds the data slot, comes
      // first (the bus queue ran into it): the row is closed by it and re-opened after it.
      const auto k = static_cast<std::uint64_t>(data / m_tREFI);
      const sc_time window = m_tREFI * double(k);
      if (k > 0 && (window > t || data < window + m_tRFC)) {
        data = std::max(data, window + m_tRFC + m_tRCD + latency);
        ++m_refresh_waits;
        if (hits == bursts) {  // the re-activation makes the first burst a miss
          --hits;
          ++m_misses;
        } else {  // the row this chunk opened is opened again
          ++m_reactivations;
        }
        for (auto& other : c.banks) other.open = false;
        c.refresh_epoch = std::max(c.refresh_epoch, k);
        b.open = true;
        b.row = row;
        b.pre_ready = data - latency + m_tRAS - m_tRCD;
      }
    }
    const sc_time finish = data + m_tBURST * double(bursts);
    c.bus_free = finish;
    m_hits += hits;
    b.ready = t + m_tBURST * double(bursts);  // column commands of this bank back to back
    if (write) b.pre_ready = std::max(b.pre_ready, finish + m_tWR);
    (write ? m_wr : m_rd) += bursts;
    m_bus_busy_s += (m_tBURST * double(bursts)).to_seconds();
    return finish;
  }

  unsigned m_channels = 0, m_width_bits = 0, m_banks = 0;
  std::uint64_t m_row_bytes = 0, m_interleave = 0, m_burst_bytes = 0;
  sc_time m_tCL, m_tCWL, m_tRCD, m_tRP, m_tRAS, m_tWR, m_tRFC, m_tREFI, m_tBURST;
  bool m_refresh = true;
  double m_peak_Bps = 0;
  double m_read_J = 0, m_write_J = 0, m_act_J = 0, m_refresh_J = 0, m_background_W = 0;
  std::vector<channel> m_state;
  std::uint64_t m_hits = 0, m_misses = 0, m_conflicts = 0, m_rd = 0, m_wr = 0, m_refresh_waits = 0;
  std::uint64_t m_reactivations = 0;  // rows opened again after a refresh closed them (energy only)
  double m_bus_busy_s = 0;
};

KELLE_REGISTER(kelle::memories(), "hbm2", "HBM2 stack: channels, banks, row buffers, refresh (plugin example)",
               [](const memory_args& a) -> std::unique_ptr<kelle::memory_target> {
                 return std::make_unique<hbm2>(a.name.c_str(), a);
               });

}  // namespace hbm2_plugin
