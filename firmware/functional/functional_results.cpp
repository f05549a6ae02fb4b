// What functional mode reports: results.json's `quality` and `functional` sections and the
// summary line.
#include "firmware/functional/functional_run.h"

#include <cmath>
#include <cstdio>

namespace kelle {

void functional_run::add_results(nlohmann::json& r) const {
  nlohmann::json flipped = nlohmann::json::object(), read = nlohmann::json::object(), rate = nlohmann::json::object();
  for (int g = 0; g < 4; ++g) {
    flipped[group_names[g]] = m_flipped[g];
    read[group_names[g]] = m_bits_read[g];
    rate[group_names[g]] = m_bits_read[g] > 0 ? m_flipped[g] / m_bits_read[g] : 0.0;
  }
  const auto& q = m_quality;
  // Without reference rows (functional.reference: false) there is nothing to compare with.
  auto vs_reference = [&q](double v) { return q.rows ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json quality = {{"reference", m_check_reference},
                            {"rows", q.rows},
                            {"max_abs_logit_error", vs_reference(q.max_abs_logit_error)},
                            {"max_abs_reference_logit", vs_reference(q.max_abs_logit)},
                            {"kl_divergence", vs_reference(q.kl_divergence())},
                            {"top1_agreement", vs_reference(q.top1_agreement())},
                            {"nonfinite_logits", q.nonfinite},
                            {"flipped_bits", flipped},
                            {"bits_read", read},
                            {"flip_rate", rate}};
  if (m_act_edram) {  // retention faults in the activation eDRAM (the refresh policy's lifetime rule)
    nlohmann::json act = nlohmann::json::object();
    for (std::size_t i = 0; i < m_act_flipped.size(); ++i) act[m_act_rule->fields().fields()[i].name] = m_act_flipped[i];
    quality["flipped_bits_activations"] = act;
  }
  if (q.nll_count) {
    quality["perplexity"] = std::exp(q.nll / q.nll_count);
    quality["reference_perplexity"] = std::exp(q.ref_nll / q.nll_count);
    quality["perplexity_tokens"] = q.nll_count;
  } else {
    quality["perplexity"] = nullptr;
  }
  // An integer KV format: the platform against the full-precision reference (what the format costs).
  if (m_quality_fp.rows) {
    const auto& f = m_quality_fp;
    quality["full_precision"] = {{"kl_divergence", f.kl_divergence()},
                                 {"top1_agreement", f.top1_agreement()},
                                 {"max_abs_logit_error", f.max_abs_logit_error},
                                 {"reference_perplexity", f.nll_count ? nlohmann::json(std::exp(f.ref_nll / f.nll_count))
                                                                      : nlohmann::json(nullptr)}};
  }
  // Against the full-cache, fault-free reference (every position attended): the quality loss of
  // the KV policy's eviction with the platform's rounding and faults (`kl_divergence`,
  // `top1_agreement`), and of the eviction alone (`eviction_*`: the kept-set reference against it).
  const auto& f = m_quality_full;
  const auto& e = m_quality_evict;
  nlohmann::json full = {{"kl_divergence", vs_reference(f.kl_divergence())},
                         {"top1_agreement", vs_reference(f.top1_agreement())},
                         {"eviction_kl_divergence", vs_reference(e.kl_divergence())},
                         {"eviction_top1_agreement", vs_reference(e.top1_agreement())}};
  full["perplexity"] = f.nll_count ? nlohmann::json(std::exp(f.ref_nll / f.nll_count)) : nlohmann::json(nullptr);
  quality["full_cache"] = full;
  r["quality"] = quality;
  char digest[20];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(m_logits_digest));
  nlohmann::json toks = nlohmann::json::array();
  for (const auto& t : m_tokens) toks.push_back(t);
  r["functional"] = {{"model", m_q.cfg.name},
                     {"parameters", m_shape.weight_bytes_stored()},
                     {"activation_format", "binary16"},
                     {"kv_format", m_kv_format.name()},
                     {"kv_group_size", m_kv_fmt.group()},
                     {"kv_fixed_scale", m_kv_scale},
                     {"act_format", m_act_format.name()},
                     {"act_fixed_scale", m_act_scale},
                     {"tokens", toks},
                     {"commands_computed", m_engine->commands()},
                     {"faults", m_fault == fault_mode::none ? "none" : m_fault == fault_mode::ber ? "ber" : "retention"},
                     {"logits_digest", digest},
                     {"x_tokens", m_x_from_cache ? "cache" : "recompute"},
                     {"x_store_bytes", m_xstore ? m_const - m_xstore : 0},
                     {"recompute_check", {{"rows", m_recomputed_rows}, {"bit_equal", m_recomputed_equal}}},
                     {"ber", m_ber},
                     {"setup_wall_s", m_wall_s}};
}

std::string functional_run::report() const {
  char buf[768];
  const auto& q = m_quality;
  if (!q.rows) {
    std::snprintf(buf, sizeof buf,
                  "  functional         %s: no reference comparison (functional.reference: false); flipped bits "
                  "HST-MSB %.0f HST-LSB %.0f LST-MSB %.0f LST-LSB %.0f\n",
                  m_q.cfg.name.c_str(), m_flipped[0], m_flipped[1], m_flipped[2], m_flipped[3]);
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "  functional         %s: max |logit error| %.3g (logits up to %.3g), KL %.3g, top-1 agreement %.3g "
                "over %u rows; flipped bits HST-MSB %.0f HST-LSB %.0f LST-MSB %.0f LST-LSB %.0f\n"
                "  vs full cache      KL %.3g, top-1 agreement %.3g (the eviction alone: KL %.3g, top-1 %.3g)\n",
                m_q.cfg.name.c_str(), q.max_abs_logit_error, q.max_abs_logit, q.kl_divergence(), q.top1_agreement(),
                q.rows, m_flipped[0], m_flipped[1], m_flipped[2], m_flipped[3], m_quality_full.kl_divergence(),
                m_quality_full.top1_agreement(), m_quality_evict.kl_divergence(), m_quality_evict.top1_agreement());
  return buf;
}

}  // namespace kelle
