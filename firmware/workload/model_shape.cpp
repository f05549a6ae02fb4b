// model_shape's sizes (parameters, weight and KV bytes), its checks and the names of its kinds.
#include "firmware/workload/model_shape.h"

#include <cmath>

namespace kelle {

std::string to_string(ffn_kind k) {
  switch (k) {
    case ffn_kind::gated_silu: return "gated_silu";
    case ffn_kind::relu: return "relu";
    case ffn_kind::gelu: return "gelu";
    case ffn_kind::gated_gelu: return "gated_gelu";
  }
  return "?";
}

std::string to_string(norm_kind k) { return k == norm_kind::rmsnorm ? "rmsnorm" : "layernorm"; }

std::uint64_t model_shape::attn_params() const {
  const std::uint64_t c = hidden, h = heads;
  if (latent_kv()) {
    // Queries: C -> H x (nope + rope), directly or through a rank-q_lora_rank bottleneck.
    const std::uint64_t q_out = h * (qk_nope_dim + qk_rope_dim);
    const std::uint64_t wq = q_lora_rank ? c * q_lora_rank + std::uint64_t(q_lora_rank) * q_out : c * q_out;
    const std::uint64_t kv_a = c * (kv_lora_rank + qk_rope_dim);                  // C -> latent + RoPE key
    const std::uint64_t kv_b = std::uint64_t(kv_lora_rank) * h * (qk_nope_dim + v_head_dim);  // latent -> K, V
    const std::uint64_t wo = h * v_head_dim * c;
    return wq + kv_a + kv_b + wo;
  }
  const std::uint64_t q = h * head_dim, kv = std::uint64_t(kv_heads) * head_dim;
  return c * q + 2 * c * kv + q * c;
}

std::uint64_t model_shape::ffn_params(unsigned width) const {
  return (gated_ffn() ? 3 : 2) * std::uint64_t(hidden) * width;
}

std::uint64_t model_shape::ffn_layer_params(unsigned layer) const {
  if (!moe_layer(layer)) return ffn_params(ffn);
  // Router C -> E, the routed experts and the shared ones.
  return std::uint64_t(hidden) * experts + std::uint64_t(experts + shared_experts) * ffn_params(expert_ffn);
}

std::uint64_t model_shape::layer_params(unsigned layer) const { return attn_params() + ffn_layer_params(layer); }

std::uint64_t model_shape::all_layer_params() const {
  std::uint64_t n = 0;
  for (unsigned l = 0; l < layers; ++l) n += layer_params(l);
  return n;
}

std::uint64_t model_shape::weight_bytes_per_pass() const {
  return (all_layer_params() + std::uint64_t(vocab) * hidden) * weight_bytes_per_param;
}

std::uint64_t model_shape::weight_bytes_stored() const {
  const std::uint64_t embed = std::uint64_t(vocab) * hidden;
  return (all_layer_params() + embed + (tied_embeddings ? 0 : embed)) * weight_bytes_per_param;
}

double model_shape::expected_experts(std::uint64_t tokens) const {
  if (!moe()) return 0;
  // Each token picks experts_per_token distinct experts uniformly: a given expert is missed by one
  // token with probability 1 - k/E, by all `tokens` independently with (1 - k/E)^tokens.
  const double e = experts, k = experts_per_token;
  return e * (1 - std::pow(1 - k / e, double(tokens)));
}

double model_shape::decode_weight_bytes(std::uint64_t batch) const {
  double bytes = double(weight_bytes_per_pass());
  if (!moe()) return bytes;
  const unsigned moe_layers = layers - first_dense_layers;
  const double unused = double(experts) - expected_experts(batch);
  return bytes - double(moe_layers) * unused * double(ffn_params(expert_ffn) * weight_bytes_per_param);
}

std::uint64_t model_shape::kv_bytes_held(std::uint64_t tokens) const {
  std::uint64_t held = 0;
  for (unsigned l = 0; l < layers; ++l) held += kv_slots(l, tokens) * kv_bytes_per_token_layer();
  return held;
}

std::string model_shape::not_yet_run() const {
  std::string what;
  auto add = [&](const std::string& s) { what += (what.empty() ? "" : ", ") + s; };
  if (latent_kv() && q_lora_rank)  // DeepSeek-V2-Lite has none
    add("latent KV with a query bottleneck (q_lora_rank " + std::to_string(q_lora_rank) + ")");
  if (latent_kv() && sliding_window) add("latent KV with a sliding window (sliding_window " + std::to_string(sliding_window) + ")");
  if (latent_kv() && (kv_lora_rank + qk_rope_dim) % 2)
    add("latent KV of an odd width (kv_lora_rank + qk_rope_dim " + std::to_string(kv_lora_rank + qk_rope_dim) + ")");
  return what;
}

void model_shape::validate(const config_node& w, const std::string& key) const {
  if (!layers || !hidden || !heads || !kv_heads || !head_dim || !ffn || !vocab)
    w.fail(key, "every dimension of the model must be at least 1");
  if (heads % kv_heads)
    w.fail(key, "heads (" + std::to_string(heads) + ") must be a multiple of kv_heads (" +
                    std::to_string(kv_heads) + ")");
}

}  // namespace kelle
