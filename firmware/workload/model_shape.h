// The shape of an LLM (model_shape): its dimensions, attention pattern, latent KV and
// mixture-of-experts fields, and the sizes that follow from them (parameters, weight and KV bytes)
// in the KV cache's number format. The zoo of named shapes and the scenario's reading of
// workload.model are in model_zoo.h, above this; the functional model's weights files give a
// shape too (firmware/functional/llama_weights.h), so the shape sits below both.
#pragma once

#include "models/compute/kv_format/kv_format.h"
#include "platform/config/config.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kelle {

enum class ffn_kind { gated_silu, relu, gelu, gated_gelu };
enum class norm_kind { rmsnorm, layernorm };

struct model_shape {
  std::string name;
  unsigned layers = 0;
  unsigned hidden = 0;     // model width C
  unsigned heads = 0;      // query heads H
  unsigned kv_heads = 0;   // key/value heads (grouped-query attention when < heads)
  unsigned head_dim = 0;   // D_h
  unsigned ffn = 0;        // FFN inner width
  ffn_kind ffn_type = ffn_kind::gated_silu;
  norm_kind norm = norm_kind::rmsnorm;
  unsigned vocab = 0;
  bool tied_embeddings = false;  // the LM head shares the embedding matrix

  // The KV cache's number format (policy.kv_format, set by the run; docs/policies/kv-format.md).
  kv_format kv;

  // Attention pattern: sliding_window W > 0 makes layers local (a query sees the last W tokens);
  // global_every N > 0 makes every N-th layer global (layers N-1, 2N-1, ...: Gemma 3's five local
  // then one global is N = 6); N = 0 with W > 0 windows every layer (Mistral 7B v0.1).
  unsigned sliding_window = 0;
  unsigned global_every = 0;
  // Latent KV (multi-head latent attention, DeepSeek-V2): kv_lora_rank > 0 caches one latent of
  // kv_lora_rank values plus qk_rope_dim decoupled RoPE key values per token per layer; queries and
  // keys have qk_nope_dim + qk_rope_dim per head, values v_head_dim; q_lora_rank > 0 compresses the
  // query through a rank-q_lora_rank projection (0: a full W_q).
  unsigned kv_lora_rank = 0;
  unsigned qk_rope_dim = 0;
  unsigned qk_nope_dim = 0;
  unsigned v_head_dim = 0;
  unsigned q_lora_rank = 0;
  // Latent attention's kernel (workload.latent_attention, set by the run): fused, the weighted
  // sum takes the latents the scores just read from the array's operand buffer, one read of each
  // cached latent a step (FlashMLA's); else the scores and the weighted sum each read them.
  bool latent_fused = true;
  // Mixture of experts: experts > 0 routes each token to experts_per_token of `experts` routed
  // experts of inner width expert_ffn (same FFN kind as ffn_type), plus shared_experts always-on
  // experts of the same width; the first first_dense_layers layers keep a dense FFN of width ffn.
  unsigned experts = 0;
  unsigned experts_per_token = 0;
  unsigned shared_experts = 0;
  unsigned expert_ffn = 0;
  unsigned first_dense_layers = 0;

  static constexpr std::uint64_t weight_bytes_per_param = 1;  // int8
  static constexpr std::uint64_t act_bytes = 2;               // 16-bit activations (and x vectors)

  bool latent_kv() const { return kv_lora_rank > 0; }
  bool moe() const { return experts > 0; }
  bool gated_ffn() const { return ffn_type == ffn_kind::gated_silu || ffn_type == ffn_kind::gated_gelu; }
  // Whether layer `layer` has a mixture-of-experts FFN (else a dense one of width ffn).
  bool moe_layer(unsigned layer) const { return moe() && layer >= first_dense_layers; }
  // Tokens a query of layer `layer` sees: the window W, or 0 for a global layer (every token).
  unsigned window(unsigned layer) const {
    return sliding_window && !(global_every && (layer + 1) % global_every == 0) ? sliding_window : 0;
  }

  // Token slots per sequence layer `layer`'s cache has when a sequence holds at most `tokens`
  // tokens: a windowed layer's at most W (its slots reused as a ring, token t in slot t mod W).
  std::uint64_t kv_slots(unsigned layer, std::uint64_t tokens) const {
    const unsigned w = window(layer);
    return w ? std::min<std::uint64_t>(tokens, w) : tokens;
  }

  // Parameters of one decoder layer's attention matrices (MHA/GQA: W_q, W_k, W_v, W_o; MLA: the
  // query projection(s), W_kv_a, W_kv_b and W_o).
  std::uint64_t attn_params() const;
  // Parameters of one FFN of inner width `width` (3 matrices when gated, else 2).
  std::uint64_t ffn_params(unsigned width) const;
  // Parameters of a layer's FFN: dense, or router + routed experts + shared experts.
  std::uint64_t ffn_layer_params(unsigned layer) const;
  // Parameters of one decoder layer's matrices: attention and FFN (layer 0 unless given).
  std::uint64_t layer_params(unsigned layer = 0) const;
  // Parameters of every decoder layer.
  std::uint64_t all_layer_params() const;
  // Bytes of weights read per forward pass: every layer plus the LM head (the embedding table
  // is looked up, one row per token, not streamed). With MoE: every expert (a pass whose tokens
  // route to every expert); decode_weight_bytes gives the expected figure of a batch.
  std::uint64_t weight_bytes_per_pass() const;
  // Bytes of all weights stored in DRAM (layers, LM head and embeddings, counted once if tied).
  std::uint64_t weight_bytes_stored() const;
  // Expected number of distinct routed experts a layer's step of `tokens` tokens uses, under
  // uniform top-k routing independent per token: E * (1 - (1 - k/E)^tokens).
  double expected_experts(std::uint64_t tokens) const;
  // Expected bytes of weights a decode step at batch B streams: as weight_bytes_per_pass, with
  // each MoE layer's routed experts counted expected_experts(B) times instead of E (dense: exact).
  double decode_weight_bytes(std::uint64_t batch) const;
  // Bytes of one token's K (or V) of one KV head in the cache: head_dim elements in the KV format,
  // with its group scales (2 x head_dim for the 16-bit formats).
  std::uint64_t kv_row_bytes() const { return kv.row_bytes(head_dim); }
  // KV bytes of one token in one layer: K and V of every KV head; with latent KV one latent of
  // kv_lora_rank + qk_rope_dim elements in the KV format. A windowed layer holds the same bytes
  // per token, for at most W tokens.
  std::uint64_t kv_bytes_per_token_layer() const {
    return latent_kv() ? kv.row_bytes(kv_lora_rank + qk_rope_dim) : 2ull * kv_heads * kv_row_bytes();
  }
  // The heads that cache their own tokens: kv_heads, or one for latent KV (the latent is shared
  // by every head, as one KV head of multi-query attention; KV policies keep tokens per cache head).
  unsigned cache_heads() const { return latent_kv() ? 1 : kv_heads; }
  // Elements a projection writes into each of a token's two cache halves in a layer: K (or V) of
  // every KV head; with latent KV half of the latent and RoPE key (kv_lora_rank + qk_rope_dim,
  // the down-projection W_kv_a run as two GEMMs of half its columns each, MM_k and MM_v).
  std::uint64_t kv_half_width() const {
    return latent_kv() ? (std::uint64_t(kv_lora_rank) + qk_rope_dim) / 2 : std::uint64_t(kv_heads) * head_dim;
  }
  // KV bytes a sequence of `tokens` tokens holds across every layer (windowed layers hold
  // min(tokens, W) tokens).
  std::uint64_t kv_bytes_held(std::uint64_t tokens) const;
  // What of this shape the firmware does not run yet ("" when it runs it), e.g. "latent KV with a
  // query bottleneck (q_lora_rank 1536)".
  std::string not_yet_run() const;
  // Bytes of the input vector x_n of one token (AERP stores it instead of K and V).
  std::uint64_t x_bytes_per_token() const { return std::uint64_t(hidden) * act_bytes; }

  // Checks the shape is consistent; throws config_error through `where`.
  void validate(const config_node& where, const std::string& key) const;
};

std::string to_string(ffn_kind k);
std::string to_string(norm_kind k);

}  // namespace kelle
