// Retention-failure model of an eDRAM cell: the probability that a bit has lost its value a
// given time after it was last written or refreshed. Retention times are log-normal in log10(t)
// (parameters in tech.edram.retention; calibration in docs/models/memory-edram.md), at the
// technology's temperature (tech.temperature_C, 105 C: the anchor). At another temperature T the
// whole distribution moves by the leakage's Arrhenius law, every cell's retention time scaled by
//     f(T) = exp( Ea / k_B x (1 / T - 1 / T_ref) )      (T in kelvin)
// (a shift of log10 f(T) decades; the spread in decades is kept). Optionally a share of the cells
// has a variable retention time (VRT): it toggles between its retention time and a shorter one.
// docs/models/thermal.md gives the sources and the fit.
#pragma once

#include "platform/config/config.h"

namespace kelle {

class retention_model {
 public:
  // Temperature dependence: the anchor (reference_C) and the activation energy (0: none).
  struct temperature_law {
    double reference_C = 105;
    double activation_eV = 0;
  };
  // Variable retention time: a share `fraction` of the cells spends a share `low_share` of the
  // time in a state whose retention is `low_ratio` times its normal one.
  struct vrt {
    double fraction = 0;
    double low_ratio = 1;
    double low_share = 0;
  };
  retention_model(double median_s, double sigma_decades, temperature_law t, vrt v);
  // At the anchor only, without VRT.
  retention_model(double median_s, double sigma_decades);
  // Reads tech.edram.retention.{distribution, median_ms, sigma_decades, activation_energy_eV,
  // vrt_fraction, vrt_low_ratio, vrt_low_share}; the anchor is tech.temperature_C.
  static retention_model from_tech(const config_node& edram_tech, double reference_C);

  // P(retention time < t): the fraction of bits that fail when left t seconds unrefreshed, at
  // the die's true temperature now (the technology's without a thermal model).
  double failure_probability(double t_s) const { return failure_probability_at(t_s, temperature_C()); }
  // The same at temperature T.
  double failure_probability_at(double t_s, double T_C) const;
  // How many times longer a cell retains its charge at T than at the anchor (1 at the anchor).
  double retention_factor(double T_C) const;
  // The die's true temperature now (the anchor without a thermal model), C.
  double temperature_C() const;
  double median_s() const { return m_median_s; }
  double sigma_decades() const { return m_sigma; }
  const temperature_law& law() const { return m_law; }

 private:
  double decades(double T_C) const;  // log10 f(T)
  double lognormal(double log10_t, double log10_median) const;
  double m_median_s;
  double m_sigma;
  temperature_law m_law;
  vrt m_vrt;
  double m_log10_median;
  double m_decades_per_inv_K;  // Ea / (k_B ln 10)
};

}  // namespace kelle
