// `thermal`: the die's temperature over a run (docs/models/thermal.md). Three models:
//   constant  the die at `ambient_C` all run long
//   trace     a temperature trace (time s, C), inline or from a CSV file, linearly interpolated
//   rc        a lumped RC model driven by the platform's own power: the die follows
//             dT/dt = (ambient + R P(t) - T) / tau, P the energy the run's statistics report per
//             update interval (every energy part of every module), integrated exactly for a power
//             held over each interval
// and an on-die sensor (update period, resolution, offset error) that the refresh policies read.
// The model is lazy: it advances when it is asked (the eDRAM's reads, the policies' passes, the
// results) and at most once per `step_us`, so it adds no SystemC event; an eDRAM read asks it
// through one virtual call and, between updates, a comparison.
#pragma once

#include "models/thermal/die_temperature.h"
#include "platform/config/config.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kelle {

class stat;

class thermal_model : public die_temperature {
 public:
  // `thermal` is the scenario's section, `tech` the technology (its temperature_C is the anchor;
  // tech.edram.retention.validated_{min,max}_C the range the retention law is validated over).
  thermal_model(const config_node& thermal, const config_node& tech);

  double true_C() override;
  double sensed_C() override;
  bool dram_derating() const override { return m_dram_derating; }
  double dram_C() override { return true_C() + m_dram_offset_C; }

  // The model's figures for results.json (`thermal`): brings the model up to the end of the run.
  nlohmann::json results();
  // "" or why the run went beyond the validated range without `extrapolate` (an input error).
  std::string range_error() const override { return m_range_error; }
  // Heat into the die so far, J (rc: the energy the statistics reported, update by update).
  double heat_J() const { return m_heat_J; }

  // The hard floor of every temperature, C (below it no model is defined).
  static constexpr double floor_C = -40.0;
  // The hard ceiling, C (beyond it no extrapolation is allowed either).
  static constexpr double ceiling_C = 150.0;

 private:
  enum class kind { constant, trace, rc } m_kind = kind::constant;
  void update(double now_s, bool force);
  double total_energy_J();
  void check_running(double T, double now_s);
  void trace_point(double now_s, double power_W);
  void read_trace(const config_node& t);
  // A temperature the scenario gives: within the hard limits always, within the retention law's
  // validated range unless `extrapolate` (then marks the run extrapolated); else fail(why).
  void check_given(double C, const std::function<void(const std::string&)>& fail);

  double m_ambient_C = 105;
  bool m_extrapolate = false;
  double m_valid_min_C = -40, m_valid_max_C = 105;
  // trace
  std::vector<double> m_t, m_C;
  std::size_t m_cursor = 0;
  // rc
  double m_R = 0, m_tau = 0, m_step_s = 1e-3;
  double m_T = 105;
  double m_last_s = 0, m_last_E = 0, m_heat_J = 0;
  std::vector<const stat*> m_energy;
  bool m_collected = false;
  bool m_updating = false;
  // figures
  double m_min_C = 1e300, m_max_C = -1e300, m_T_time = 0, m_time = 0, m_max_at_s = 0;
  bool m_beyond = false;
  std::string m_range_error;
  // sensor
  double m_sensor_period_s = 1e-3, m_resolution_C = 0, m_offset_C = 0;
  double m_reading = 0, m_next_sample_s = -1;
  // the DRAM die (LPDDR4/LPDDR5 refresh derating)
  bool m_dram_derating = false;
  double m_dram_offset_C = 0;  // DRAM die temperature - accelerator die temperature
};

}  // namespace kelle
