// The activation arena: the on-chip region the firmware's activation buffers take, as a stack
// (mark, release). A buffer that does not fit goes elsewhere (the plan spills it to DRAM). One
// rule, place(), decides where a buffer lands; it serves the allocation of the buffers a pass
// asks for and the prediction of where another pass's buffers would land: on request the arena
// records what a pass asked of it (a log), and predict() replays that log with the sizes another
// pass would ask for (sampled decode's regimes: docs/firmware.md, "Sampled decode").
#pragma once

#include "firmware/workload/region.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace kelle {

class activation_arena {
 public:
  activation_arena() = default;
  explicit activation_arena(region r) : m_region(std::move(r)) {}

  const region& where() const { return m_region; }
  std::uint64_t free() const { return m_used < m_region.bytes ? m_region.bytes - m_used : 0; }

  // The rule: a buffer of `bytes` takes the arena if it fits beside `used` bytes (buffers start
  // on 64-byte boundaries); returns whether it does and updates `used`.
  static bool place(std::uint64_t& used, std::uint64_t capacity, std::uint64_t bytes) {
    if (used + bytes > capacity) return false;
    used += (bytes + 63) / 64 * 64;
    return true;
  }
  // A buffer of `bytes` from the arena if it fits (its region in `out`), else false.
  bool alloc(std::uint64_t bytes, region& out);

  struct mark_t {
    std::uint64_t used = 0;
    std::uint32_t event = ~0u;  // the mark's index in the log being recorded, if any
    std::uint32_t log = 0;      // which recording the index is of
  };
  mark_t mark() const;
  void release(const mark_t& m);

  // What a pass asked of the arena: `begin` (bytes: the arena's use when recording started),
  // `alloc` (bytes asked for; whether the arena took them), `mark` (bytes: the use), `release`
  // (ref: the mark's event, or none for a mark made before the recording; bytes: the use it
  // restores).
  struct event {
    enum class kind : std::uint8_t { begin, alloc, mark, release } what;
    bool in_arena = false;
    std::uint32_t ref = ~0u;
    std::uint64_t bytes = 0;
  };
  using log = std::vector<event>;
  // Records into `l` (cleared first) until record(nullptr).
  void record(log* l);
  bool recording() const { return m_log != nullptr; }

  // Replays `l` with the sizes another pass asks for: `size(k, logged, free)` is the k-th
  // allocation's size (`logged`: what the log's pass asked; `free`: the arena's free bytes at that
  // point); `placed(k, bytes, in_arena, logged)` is told where it lands, beside what the log
  // recorded.
  using size_fn = std::function<std::uint64_t(std::size_t, const event&, std::uint64_t)>;
  using placed_fn = std::function<void(std::size_t, std::uint64_t, bool, const event&)>;
  void predict(const log& l, const size_fn& size, const placed_fn& placed) const;

 private:
  region m_region;
  std::uint64_t m_used = 0;
  log* m_log = nullptr;        // being recorded
  std::uint32_t m_logs = 0;    // recordings started, for mark_t::log
  mutable std::vector<std::uint64_t> m_replay_use;  // predict()'s scratch: the use at each mark
};

}  // namespace kelle
