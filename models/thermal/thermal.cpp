#include "models/thermal/thermal.h"

#include "platform/stats/stats.h"
#include "platform/trace/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

namespace kelle {

namespace {
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// A trace's field: a number with nothing but blanks after it. `starts`: whether it begins with one
// (a field that does not is a header's name).
bool field_number(const std::string& s, double& v, bool& starts) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  starts = end != s.c_str();
  while (*end == ' ' || *end == '\t' || *end == '\r') ++end;
  return starts && *end == '\0';
}
}  // namespace

void thermal_model::check_given(double C, const std::function<void(const std::string&)>& fail) {
  if (C < floor_C) fail(num(C) + " C is below " + num(floor_C) + " C, the lowest temperature the models know");
  if (C > ceiling_C) fail(num(C) + " C is above " + num(ceiling_C) + " C, the highest temperature the models know");
  if (C < m_valid_min_C || C > m_valid_max_C) {
    if (!m_extrapolate)
      fail(num(C) + " C is outside the retention law's validated range " + num(m_valid_min_C) + " to " +
           num(m_valid_max_C) + " C (tech.edram.retention.validated_min_C, validated_max_C); set thermal.extrapolate: "
           "true to run beyond it");
    m_beyond = true;
  }
}

thermal_model::thermal_model(const config_node& th, const config_node& tech) {
  const double anchor = tech.get_double("temperature_C", 105, "temperature the figures are given for, C");
  const config_node ret = tech.child_or_empty("edram").child_or_empty("retention");
  m_valid_min_C = ret.get_double("validated_min_C", floor_C, "lowest temperature the retention law is validated at, C",
                                 floor_C, ceiling_C);
  m_valid_max_C = ret.get_double("validated_max_C", anchor, "highest temperature the retention law is validated at, C",
                                 m_valid_min_C, ceiling_C);
  m_extrapolate = th.get_bool("extrapolate", false,
                              "allow temperatures outside the retention law's validated range (results say so)");
  const std::string model = th.get_choice("model", "constant", {"constant", "trace", "rc"});
  m_kind = model == "trace" ? kind::trace : model == "rc" ? kind::rc : kind::constant;
  auto key_fail = [&th](const std::string& key) {
    return [&th, key](const std::string& m) { th.fail(key, m); };
  };
  if (m_kind != kind::trace) {
    m_ambient_C = th.get_double("ambient_C", anchor, "ambient temperature (constant: the die's), C");
    check_given(m_ambient_C, key_fail("ambient_C"));
  }
  if (m_kind == kind::trace) read_trace(th);
  if (m_kind == kind::rc) {
    const double R = th.require_double("resistance_K_per_W", "junction-to-ambient thermal resistance, K/W");
    if (R < 0) th.fail("resistance_K_per_W", "a thermal resistance is not negative (got " + num(R) + " K/W)");
    m_R = R;
    const double tau = th.require_double("time_constant_s", "thermal time constant R x C, s");
    if (tau <= 0) th.fail("time_constant_s", "a time constant is positive (got " + num(tau) + " s)");
    m_tau = tau;
    m_T = th.get_double("initial_C", m_ambient_C, "the die's temperature at time 0, C (default: ambient_C)");
    check_given(m_T, key_fail("initial_C"));
  }
  m_step_s = th.get_double("step_us", 1000, "the model's update period, us", 1, 1e9) * 1e-6;
  const config_node s = th.child_or_empty("sensor");
  m_sensor_period_s = s.get_double("period_us", 1000, "the on-die sensor's update period, us", 1e-3, 1e9) * 1e-6;
  m_resolution_C = s.get_double("resolution_C", 1.0, "the sensor's resolution (0: exact), C", 0, 50);
  m_offset_C = s.get_double("offset_C", 0.0, "the sensor's offset error (reading - true), C", -50, 50);
  // The DRAM's refresh derating (JEDEC MR4) follows the DRAM die: opt-in, so a run with a thermal
  // model and no `dram_derating` keeps the DRAM's <= 85 C refresh (today's figures).
  m_dram_derating = th.get_bool("dram_derating", false,
                                "the LPDDR4/LPDDR5 refresh derates with the DRAM's temperature (JEDEC MR4)");
  m_dram_offset_C = th.get_double("dram_offset_C", 0.0,
                                  "the DRAM die's temperature minus the accelerator die's, C (0: one package)", -100, 100);
  if (m_kind == kind::constant) m_T = m_ambient_C;
  if (m_kind == kind::trace) m_T = m_C.front();
  m_min_C = m_max_C = m_T;
}

void thermal_model::read_trace(const config_node& th) {
  const bool inline_trace = th.has("trace");
  const bool file_trace = th.has("trace_file");
  if (inline_trace == file_trace)
    th.fail(inline_trace ? "trace_file" : "trace",
            "a trace model takes one of trace (\"t_s:C, t_s:C, ...\") or trace_file (a CSV of time_s,temperature_C)");
  // One point: checked in order, with the error naming where it is.
  auto point = [this](double t, double C, const std::function<void(const std::string&)>& fail) {
    if (!std::isfinite(t) || !std::isfinite(C)) fail("expected finite numbers");
    if (t < 0) fail("time " + num(t) + " s is negative (a trace starts at 0 s or later)");
    if (!m_t.empty() && t <= m_t.back())
      fail("time " + num(t) + " s is not after the previous point's " + num(m_t.back()) +
           " s (a trace is in time order, each time once)");
    check_given(C, fail);
    m_t.push_back(t);
    m_C.push_back(C);
  };
  if (inline_trace) {
    const std::string text = th.require_string("trace", "points \"t_s:C, t_s:C, ...\"");
    std::istringstream in(text);
    std::string item;
    unsigned i = 0;
    while (std::getline(in, item, ',')) {
      ++i;
      const auto fail = [&th, i, &item](const std::string& m) {
        th.fail("trace", "point " + std::to_string(i) + " ('" + item + "'): " + m);
      };
      const auto colon = item.find(':');
      if (colon == std::string::npos) fail("expected t_s:C");
      double t, C;
      bool s1, s2;
      if (!field_number(item.substr(0, colon), t, s1) || !field_number(item.substr(colon + 1), C, s2))
        fail("expected t_s:C, two numbers");
      point(t, C, fail);
    }
  } else {
    const std::string path = th.require_path("trace_file", "a CSV file of time_s,temperature_C lines");
    std::ifstream f(path);
    if (!f) th.fail("trace_file", "cannot read '" + path + "'");
    std::string line;
    unsigned n = 0;
    bool content = false;  // a line other than blanks and comments read: a header only before it
    while (std::getline(f, line)) {
      ++n;
      const auto fail = [&th, &path, n](const std::string& m) {
        throw config_error(path + ":" + std::to_string(n) + ": " + th.key_path("trace_file") + ": " + m);
      };
      const auto hash = line.find('#');
      if (hash != std::string::npos) line.erase(hash);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const auto comma = line.find(',');
      if (comma == std::string::npos) fail("expected time_s,temperature_C");
      double t, C;
      bool s1, s2;
      const bool ok1 = field_number(line.substr(0, comma), t, s1), ok2 = field_number(line.substr(comma + 1), C, s2);
      const bool first = !content;
      content = true;
      // The first line with content may be a header: neither of its fields begins with a number.
      if (first && !s1 && !s2) continue;
      if (!ok1 || !ok2) fail("expected time_s,temperature_C, two numbers");
      point(t, C, fail);
    }
  }
  if (m_t.empty()) th.fail(inline_trace ? "trace" : "trace_file", "the trace has no points");
}

double thermal_model::total_energy_J() {
  if (!m_collected) {
    for (const stat_group* g : collect_stat_groups())
      for (const stat& s : g->all())
        if (s.energy_part()) m_energy.push_back(&s);
    m_collected = true;
  }
  double e = 0;
  for (const stat* s : m_energy) e += s->value();
  return e;
}

void thermal_model::update(double now, bool force) {
  // Reading the energy reads the eDRAM's refresh, which asks the temperature again: not re-entered.
  if (m_updating || (!force && now - m_last_s < m_step_s * (1 - 1e-9))) return;
  const double dt = now - m_last_s;
  if (dt <= 0) return;
  m_updating = true;
  const bool rc = m_kind == kind::rc;
  double power = 0;
  if (rc || timeline::open() || force) {
    const double E = total_energy_J();
    power = (E - m_last_E) / dt;
    m_heat_J += E - m_last_E;
    m_last_E = E;
  }
  if (rc) {
    // Exact for a power held over the interval: T -> T_ss + (T - T_ss) exp(-dt / tau).
    const double ss = m_ambient_C + m_R * power;
    m_T = ss + (m_T - ss) * std::exp(-dt / m_tau);
  } else if (m_kind == kind::trace) {
    while (m_cursor + 1 < m_t.size() && m_t[m_cursor + 1] <= now) ++m_cursor;
    if (now <= m_t.front())
      m_T = m_C.front();
    else if (m_cursor + 1 >= m_t.size())
      m_T = m_C.back();
    else {
      const double a = m_t[m_cursor], b = m_t[m_cursor + 1];
      m_T = m_C[m_cursor] + (m_C[m_cursor + 1] - m_C[m_cursor]) * (now - a) / (b - a);
    }
  }
  m_T_time += m_T * dt;
  m_time += dt;
  if (m_T > m_max_C) {
    m_max_C = m_T;
    m_max_at_s = now;
  }
  m_min_C = std::min(m_min_C, m_T);
  check_running(m_T, now);
  m_last_s = now;
  if (timeline::open()) trace_point(now, power);
  m_updating = false;
}

void thermal_model::check_running(double T, double now) {
  if (T >= m_valid_min_C && T <= m_valid_max_C) return;
  m_beyond = true;
  if (m_range_error.empty() && (!m_extrapolate || T < floor_C || T > ceiling_C))
    m_range_error = "thermal: the die reached " + num(T) + " C at " + num(now) + " s, outside " +
                    (m_extrapolate ? "the models' " + num(floor_C) + " to " + num(ceiling_C) + " C"
                                   : "the retention law's validated range " + num(m_valid_min_C) + " to " +
                                         num(m_valid_max_C) + " C; set thermal.extrapolate: true to run beyond it");
}

void thermal_model::trace_point(double now, double power) {
  timeline& tl = timeline::get();
  const sc_core::sc_time at(now, sc_core::SC_SEC);
  tl.counter("thermal", "die temperature", "C", at, m_T);
  tl.counter("thermal", "platform power", "W", at, power);
}

double thermal_model::true_C() {
  if (m_kind != kind::constant || timeline::open()) update(now_s(), false);
  return m_T;
}

double thermal_model::sensed_C() {
  const double now = now_s();
  if (now >= m_next_sample_s) {
    const double T = true_C() + m_offset_C;
    m_reading = m_resolution_C > 0 ? std::round(T / m_resolution_C) * m_resolution_C : T;
    m_next_sample_s = (std::floor(now / m_sensor_period_s) + 1) * m_sensor_period_s;
  }
  return m_reading;
}

nlohmann::json thermal_model::results() {
  update(now_s(), true);
  const char* names[] = {"constant", "trace", "rc"};
  nlohmann::json j = {{"model", names[static_cast<int>(m_kind)]},
                      {"final_C", m_T},
                      {"min_C", m_min_C},
                      {"max_C", m_max_C},
                      {"max_at_s", m_max_at_s},
                      {"mean_C", m_time > 0 ? m_T_time / m_time : m_T},
                      {"heat_J", m_heat_J},
                      {"validated_C", {m_valid_min_C, m_valid_max_C}},
                      {"extrapolated", m_beyond},
                      {"sensor", {{"period_us", m_sensor_period_s * 1e6},
                                  {"resolution_C", m_resolution_C},
                                  {"offset_C", m_offset_C},
                                  {"last_reading_C", m_reading}}}};
  if (m_kind != kind::trace) j["ambient_C"] = m_ambient_C;
  if (m_dram_derating) j["dram"] = {{"derating", true}, {"offset_C", m_dram_offset_C}};
  if (m_kind == kind::rc) {
    j["resistance_K_per_W"] = m_R;
    j["time_constant_s"] = m_tau;
  }
  return j;
}

}  // namespace kelle
