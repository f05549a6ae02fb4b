#include "models/memory/edram/retention.h"

#include "models/thermal/die_temperature.h"

#include <cmath>

namespace kelle {

namespace {
constexpr double boltzmann_eV_per_K = 8.617333262e-5;
constexpr double zero_C_in_K = 273.15;
}  // namespace

retention_model::retention_model(double median_s, double sigma_decades, temperature_law t, vrt v)
    : m_median_s(median_s),
      m_sigma(sigma_decades),
      m_law(t),
      m_vrt(v),
      m_log10_median(std::log10(median_s)),
      m_decades_per_inv_K(t.activation_eV / (boltzmann_eV_per_K * std::log(10.0))) {}

retention_model::retention_model(double median_s, double sigma_decades)
    : retention_model(median_s, sigma_decades, temperature_law(), vrt()) {}

retention_model retention_model::from_tech(const config_node& edram_tech, double reference_C) {
  const config_node r = edram_tech.child("retention");
  r.require_choice("distribution", {"lognormal"});
  const double median_ms = r.require_double("median_ms", "median retention time in ms", 1e-9);
  const double sigma = r.require_double("sigma_decades", "standard deviation of log10(retention)", 1e-6);
  temperature_law law;
  law.reference_C = reference_C;
  law.activation_eV = r.get_double("activation_energy_eV", 0.0,
                                   "activation energy of the cells' leakage (retention's Arrhenius law), eV", 0, 3);
  // The range the law is validated over (the thermal model refuses temperatures outside it).
  const double lo = r.get_double("validated_min_C", -40, "lowest temperature the retention law is validated at, C", -40, 150);
  r.get_double("validated_max_C", reference_C, "highest temperature the retention law is validated at, C", lo, 150);
  vrt v;
  v.fraction = r.get_double("vrt_fraction", 0.0, "share of the cells with a variable retention time", 0, 1);
  if (v.fraction > 0) {
    v.low_ratio = r.require_double("vrt_low_ratio", "a VRT cell's short retention / its long one", 1e-6, 1);
    v.low_share = r.get_double("vrt_low_share", 0.5, "share of the time a VRT cell spends in its short state", 0, 1);
  }
  return retention_model(median_ms * 1e-3, sigma, law, v);
}

double retention_model::temperature_C() const {
  die_temperature* d = die_temperature::current();
  return d ? d->true_C() : m_law.reference_C;
}

double retention_model::decades(double T_C) const {
  if (T_C == m_law.reference_C) return 0.0;  // the anchor: exactly the calibrated distribution
  return m_decades_per_inv_K * (1.0 / (T_C + zero_C_in_K) - 1.0 / (m_law.reference_C + zero_C_in_K));
}

double retention_model::retention_factor(double T_C) const { return std::pow(10.0, decades(T_C)); }

double retention_model::lognormal(double log10_t, double log10_median) const {
  const double z = (log10_t - log10_median) / m_sigma;
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double retention_model::failure_probability_at(double t_s, double T_C) const {
  if (t_s <= 0) return 0.0;
  const double m = m_log10_median + decades(T_C);
  const double lt = std::log10(t_s);
  const double p = lognormal(lt, m);
  if (m_vrt.fraction <= 0) return p;
  // A VRT cell in its short state fails when t exceeds low_ratio x its retention time.
  const double w = m_vrt.fraction * m_vrt.low_share;
  return (1 - w) * p + w * lognormal(lt - std::log10(m_vrt.low_ratio), m);
}

}  // namespace kelle
