#include "platform/trace/timeline.h"

#include "platform/config/config.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace kelle {

namespace {

// Processes in the order a viewer shows them; others follow in the order they appear.
const char* const known_processes[] = {"firmware", "lifetimes", "compute", "memory", "refresh"};

std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}

// Microseconds, the unit of the format, to the picosecond.
double us(const sc_core::sc_time& t) { return t.to_seconds() * 1e6; }

bool parse_uint(const std::string& s, unsigned& v) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  v = static_cast<unsigned>(std::stoul(s));
  return true;
}

}  // namespace

std::pair<unsigned, unsigned> parse_step_range(const std::string& text) {
  const auto colon = text.find(':');
  unsigned a = 0, b = 0;
  const bool ok = colon == std::string::npos
                      ? parse_uint(text, a) && parse_uint(text, b)
                      : parse_uint(text.substr(0, colon), a) && parse_uint(text.substr(colon + 1), b);
  if (!ok || a > b)
    throw config_error("--timeline-steps '" + text +
                       "': expected A:B with whole numbers A <= B (decode steps, 0 is the prefill), e.g. 0:2");
  return {a, b};
}

timeline& timeline::get() {
  static timeline t;
  return t;
}

void timeline::start(const timeline_options& o) {
  if (m_file) finish();
  *this = timeline();
  m_opt = o;
  m_file = std::fopen(o.path.c_str(), "w");
  if (!m_file) throw std::system_error(errno, std::generic_category(), o.path + ": cannot write the timeline");
  m_buffer.resize(1 << 20);
  std::setvbuf(m_file, m_buffer.data(), _IOFBF, m_buffer.size());
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", m_file);
  s_open = true;
  update_on();
}

void timeline::update_on() { s_on = s_open && !m_capped && !m_write_errno && (!m_windowed || m_window); }

void timeline::note_write_error() {
  // The first failed write's reason (a full disk): recording stops, finish() reports it.
  if (m_write_errno || !m_file || !std::ferror(m_file)) return;
  m_write_errno = errno ? errno : EIO;
  update_on();
}

void timeline::claim_window() {
  m_windowed = true;
  m_window = false;
  update_on();
}

void timeline::set_window_active(bool active) {
  if (!s_open || active == m_window) return;
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (active) {
    m_window = true;
    update_on();
    for (auto& [t, s] : m_states)
      if (!s.state.empty()) s.since = now;
    for (auto& [k, c] : m_counters) {
      c.pending = true;
      c.pending_at = now;
      c.pending_value = c.value;
      c.emitted = false;
    }
  } else {
    for (auto& [t, s] : m_spans) flush_span(t);
    for (auto& [t, s] : m_states) close_state(t, now);
    for (auto& [k, c] : m_counters) flush_counter(c);
    m_window = false;
    update_on();
  }
}

int timeline::pid_of(const std::string& process) {
  auto it = m_pids.find(process);
  if (it != m_pids.end()) return it->second;
  int pid = 0;
  for (int i = 0; i < static_cast<int>(std::size(known_processes)); ++i)
    if (process.rfind(known_processes[i], 0) == 0) pid = i + 1;
  if (pid == 0) pid = 100 + static_cast<int>(m_pids.size());
  m_pids.emplace(process, pid);
  return pid;
}

timeline::track timeline::thread(const std::string& process, const std::string& thread) {
  const auto key = std::make_pair(process, thread);
  auto it = m_track_ids.find(key);
  if (it != m_track_ids.end()) return it->second;
  const track t = static_cast<track>(m_tracks.size());
  m_tracks.push_back(track_info{pid_of(process), t + 1, thread});
  m_track_ids.emplace(key, t);
  return t;
}

timeline::track timeline::thread_of(const void* owner, const char* process, const char* name) {
  auto key = std::make_pair(owner, std::string(process));
  auto it = m_owner_tracks.find(key);
  if (it != m_owner_tracks.end()) return it->second;
  const track t = thread(process, name);
  m_owner_tracks.emplace(std::move(key), t);
  return t;
}

bool timeline::admit() {
  if (!s_on) return false;
  if (m_events >= m_opt.max_events) {
    m_capped = true;
    update_on();
    spdlog::warn("timeline: reached --timeline-max-events = {} at {}; later events are not recorded",
                 m_opt.max_events, sc_core::sc_time_stamp().to_string());
    return false;
  }
  ++m_events;
  return true;
}

void timeline::write_event(const char* ph, int pid, int tid, const std::string& name, const sc_core::sc_time& ts,
                           const sc_core::sc_time* dur, const std::string& args) {
  std::fprintf(m_file, "%s{\"ph\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.6f", m_first ? "" : ",\n", ph,
               json_escape(name).c_str(), pid, tid, us(ts));
  m_first = false;
  if (dur) std::fprintf(m_file, ",\"dur\":%.6f", us(*dur));
  if (!args.empty()) std::fprintf(m_file, ",\"args\":{%s}", args.c_str());
  std::fputc('}', m_file);
  if (std::ferror(m_file)) note_write_error();
}

void timeline::complete(track t, const std::string& name, const sc_core::sc_time& start, const sc_core::sc_time& end,
                        const std::string& args) {
  if (!admit()) return;
  const track_info& ti = m_tracks[t];
  const sc_core::sc_time dur = end > start ? end - start : sc_core::SC_ZERO_TIME;
  write_event("X", ti.pid, ti.tid, name, start, &dur, args);
}

void timeline::busy(track t, const sc_core::sc_time& start, const sc_core::sc_time& end, std::uint64_t bytes,
                    bool write) {
  if (!s_on) return;
  span& s = m_spans[t];
  if (s.open && start > s.end + sc_core::sc_time(m_opt.gap_ns, sc_core::SC_NS)) flush_span(t);
  if (!s.open) {
    s = span{};
    s.open = true;
    s.start = start;
    s.end = end;
  }
  if (end > s.end) s.end = end;
  (write ? s.written : s.read) += bytes;
  ++s.accesses;
}

void timeline::flush_span(track t) {
  span& s = m_spans[t];
  if (!s.open) return;
  s.open = false;
  const double secs = (s.end - s.start).to_seconds();
  char args[200];
  std::snprintf(args, sizeof args, "\"bytes_read\":%llu,\"bytes_written\":%llu,\"accesses\":%llu,\"GBps\":%.4g",
                static_cast<unsigned long long>(s.read), static_cast<unsigned long long>(s.written),
                static_cast<unsigned long long>(s.accesses), secs > 0 ? double(s.read + s.written) / secs / 1e9 : 0.0);
  complete(t, "busy", s.start, s.end, args);
}

void timeline::state(track t, const sc_core::sc_time& at, const std::string& st) {
  if (!s_open) return;
  state_track& s = m_states[t];
  if (s.state == st) return;
  close_state(t, at);
  s.state = st;
  s.since = at;
}

void timeline::close_state(track t, const sc_core::sc_time& at) {
  state_track& s = m_states[t];
  if (!s.state.empty() && s_on) complete(t, s.state, s.since, at);
  s.since = at;
}

void timeline::counter(const std::string& process, const std::string& name, const std::string& unit,
                       const sc_core::sc_time& at, double value) {
  if (!s_open) return;
  auto [it, fresh] = m_counters.try_emplace(std::make_pair(process, name));
  counter_track& c = it->second;
  if (fresh) {
    c.pid = pid_of(process);
    c.name = name;
    c.unit = unit;
  }
  c.value = value;
  if (!s_on) return;
  if (c.pending && at < c.pending_at + sc_core::sc_time(10 * m_opt.gap_ns, sc_core::SC_NS)) {
    c.pending_value = value;  // several changes within one gap: the last one stands for them
    return;
  }
  flush_counter(c);
  c.pending = true;
  c.pending_at = at;
  c.pending_value = value;
}

void timeline::flush_counter(counter_track& c) {
  if (!c.pending) return;
  c.pending = false;
  if (c.emitted && c.emitted_value == c.pending_value) return;
  if (!admit()) return;
  char args[64];
  std::snprintf(args, sizeof args, "%.9g", c.pending_value);
  write_event("C", c.pid, 0, c.name, c.pending_at, nullptr, "\"" + json_escape(c.unit) + "\":" + args);
  c.emitted = true;
  c.emitted_value = c.pending_value;
}

timeline::track timeline::lane(const std::string& process, const std::string& name, const sc_core::sc_time& start,
                               const sc_core::sc_time& end) {
  auto& lanes = m_lanes[std::make_pair(process, name)];
  for (auto& [t, busy_until] : lanes)
    if (busy_until <= start) {
      if (end > busy_until) busy_until = end;
      return t;
    }
  const std::string n = lanes.empty() ? name : name + " " + std::to_string(lanes.size() + 1);
  lanes.emplace_back(thread(process, n), end);
  return lanes.back().first;
}

std::uint64_t timeline::finish(int* err) {
  if (err) *err = 0;
  if (!m_file) return 0;
  if (s_on) {  // a run without a window (or one that ended inside it)
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    for (auto& [t, s] : m_spans) flush_span(t);
    for (auto& [t, s] : m_states) close_state(t, now);
    for (auto& [k, c] : m_counters) flush_counter(c);
  }
  // Track names and order (metadata: not counted against the cap).
  std::uint64_t meta = 0;
  auto m = [&](const char* what, int pid, int tid, const std::string& args) {
    write_event("M", pid, tid, what, sc_core::SC_ZERO_TIME, nullptr, args);
    ++meta;
  };
  for (const auto& [name, pid] : m_pids) {
    m("process_name", pid, 0, "\"name\":\"" + json_escape(name) + "\"");
    m("process_sort_index", pid, 0, "\"sort_index\":" + std::to_string(pid));
  }
  for (const auto& t : m_tracks) {
    m("thread_name", t.pid, t.tid, "\"name\":\"" + json_escape(t.thread) + "\"");
    m("thread_sort_index", t.pid, t.tid, "\"sort_index\":" + std::to_string(t.tid));
  }
  std::fputs("\n]}\n", m_file);
  note_write_error();
  if (std::fflush(m_file) != 0 && !m_write_errno) m_write_errno = errno ? errno : EIO;
  note_write_error();
  if (std::fclose(m_file) != 0 && !m_write_errno) m_write_errno = errno ? errno : EIO;
  m_file = nullptr;
  s_open = false;
  update_on();
  if (m_write_errno && err) {
    *err = m_write_errno;
    return m_events;
  }
  if (m_write_errno) throw std::system_error(m_write_errno, std::generic_category(), m_opt.path + ": cannot write the timeline");
  if (m_capped)
    spdlog::warn("timeline: {} holds the first {} events only (--timeline-max-events); narrow --timeline-steps",
                 m_opt.path, m_opt.max_events);
  return m_events + meta;
}

}  // namespace kelle
