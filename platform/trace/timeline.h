// The timeline recorder: a Chrome/Perfetto trace (JSON trace-event format) of a run, one track
// per module (docs/timeline.md). One process-wide recorder; modules call it only when
// timeline::on() (one predictable branch when no timeline was asked for).
//
// Recording is bounded twice: a workload that has passes (the llm workload) claims the window
// and switches recording on only while it is inside the requested step range; and a cap on
// the number of events stops recording with a warning. Events go straight to the file; the
// metadata naming the tracks is written when the recorder is closed.
#pragma once

#include <systemc>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kelle {

struct timeline_options {
  std::string path;                     // the JSON file
  unsigned first_step = 0;              // passes recorded: first_step..last_step inclusive,
  unsigned last_step = 2;               //   0 is the prefill, N decode step N
  std::uint64_t max_events = 2000000;   // recording stops (with a warning) after this many
  unsigned layer = 0;                   // the layer whose activation lifetimes are drawn
  double gap_ns = 5000;                 // memory spans close after this idle gap; counters are
                                        //   sampled at most once per 10 gaps
};

// "A:B" (decode steps, 0 = the prefill, A <= B) or "A" (one pass); throws config_error otherwise.
std::pair<unsigned, unsigned> parse_step_range(const std::string& text);

class timeline {
 public:
  using track = int;

  static timeline& get();
  // Events are being written (a file is open, the window is active and the cap not reached).
  static bool on() { return s_on; }
  // A file is open: modules with slowly changing state (eDRAM live bytes) keep the recorder
  // informed even outside the window, so values are right when it opens.
  static bool open() { return s_open; }

  // Opens (truncates) the file; throws std::system_error (the system's reason) if it cannot.
  void start(const timeline_options& o);
  // Closes open spans at the current simulated time, writes the track names and the footer.
  // Returns the number of events written (metadata included). No-op when nothing is open.
  // Throws std::system_error with the reason of the first write, flush or close that failed (a
  // full disk: recording stops at that write); with `err`, sets *err to that errno (0: none)
  // instead (after the simulation the caller reports it without an exception).
  std::uint64_t finish(int* err = nullptr);
  const timeline_options& options() const { return m_opt; }
  std::uint64_t events() const { return m_events; }

  // --- the window (a workload with passes) ------------------------------------------------
  // The workload has passes: recording waits for set_window_active(true).
  void claim_window();
  // Whether pass `step` (0: the prefill) is inside the requested range.
  bool wants_pass(unsigned step) const { return s_open && step >= m_opt.first_step && step <= m_opt.last_step; }
  void set_window_active(bool active);

  // --- tracks and events ------------------------------------------------------------------
  // The track (thread) `thread` of process `process`, created on first use.
  track thread(const std::string& process, const std::string& thread);
  // The same, cached per owner (a module) and process, for hot paths.
  track thread_of(const void* owner, const char* process, const char* thread);
  // A complete ("X") event; `args` is a JSON object's body without braces ("\"m\":1,\"k\":2") or empty.
  void complete(track t, const std::string& name, const sc_core::sc_time& start, const sc_core::sc_time& end,
                const std::string& args = {});
  // A memory access [start, end): merged with the track's open span unless it starts more than
  // gap_ns after the span's end.
  void busy(track t, const sc_core::sc_time& start, const sc_core::sc_time& end, std::uint64_t bytes, bool write);
  // A state track: a span named `state` is open while `state` is non-empty (kept across windows).
  void state(track t, const sc_core::sc_time& at, const std::string& state);
  // A counter ("C" event) `name` of process `process` with one series `unit`; its value holds
  // until the next sample. Changes within 10 x gap_ns of a sample are folded into it (its time,
  // the last value).
  void counter(const std::string& process, const std::string& name, const std::string& unit,
               const sc_core::sc_time& at, double value);
  // A track of process `process` for a span [start, end): `thread`, or `thread 2`, `thread 3`, ...
  // when the earlier ones are busy at `start` (spans on one track must not overlap).
  track lane(const std::string& process, const std::string& thread, const sc_core::sc_time& start,
             const sc_core::sc_time& end);

 private:
  struct span {
    bool open = false;
    sc_core::sc_time start, end;
    std::uint64_t read = 0, written = 0, accesses = 0;
  };
  struct state_track {
    std::string state;
    sc_core::sc_time since;
  };
  struct counter_track {
    int pid = 0;
    std::string name, unit;
    double value = 0;
    bool pending = false;
    sc_core::sc_time pending_at;
    double pending_value = 0;
    bool emitted = false;
    double emitted_value = 0;
  };
  struct track_info {
    int pid, tid;
    std::string thread;
  };

  int pid_of(const std::string& process);
  void flush_span(track t);
  void flush_counter(counter_track& c);
  void close_state(track t, const sc_core::sc_time& at);
  // Counts an event; false (and recording stops) when the cap is reached.
  bool admit();
  void write_event(const char* ph, int pid, int tid, const std::string& name, const sc_core::sc_time& ts,
                   const sc_core::sc_time* dur, const std::string& args);
  void update_on();
  // Records the reason of the first failed write (errno) once the file's error flag is set.
  void note_write_error();

  static inline bool s_on = false;
  static inline bool s_open = false;

  timeline_options m_opt;
  std::FILE* m_file = nullptr;
  std::vector<char> m_buffer;
  bool m_windowed = false;
  bool m_window = false;
  bool m_capped = false;
  int m_write_errno = 0;  // the first failed write's errno (0: none)
  std::uint64_t m_events = 0;
  bool m_first = true;
  std::map<std::string, int> m_pids;
  std::map<std::pair<std::string, std::string>, track> m_track_ids;
  std::map<std::pair<const void*, std::string>, track> m_owner_tracks;
  std::vector<track_info> m_tracks;
  std::map<track, span> m_spans;
  std::map<track, state_track> m_states;
  std::map<std::pair<std::string, std::string>, counter_track> m_counters;
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<track, sc_core::sc_time>>> m_lanes;
};

}  // namespace kelle
