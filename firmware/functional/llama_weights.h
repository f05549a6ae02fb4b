// The functional model's types (docs/functional.md): its shape as a weights file gives it
// (llama_config, and the model_shape it is), its fp32 weights (llama_weights) and the error a
// bad file raises. Below llama_model.h (loading, quantisation, the tokenizer) and the file
// readers (model_files.h), which share them; model_zoo.cpp reads a weights file's shape through
// llama_model.h.
#pragma once

#include "firmware/workload/model_shape.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace kelle::fn {

// A bad weights or tokenizer file: the message starts with the file's name.
class model_file_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct llama_config {
  std::string name = "llama";
  unsigned dim = 0, ffn = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, seq_len = 0;
  float rope_theta = 10000.0f;  // llama2.c run.c and Llama 2's config.json
  float norm_eps = 1e-5f;       // llama2.c run.c's rmsnorm epsilon; Llama 2's rms_norm_eps
  bool tied = false;            // the classifier is the embedding table
  // Sliding-window layers (model_shape::window): a query of a windowed layer at position p sees
  // the keys at positions max(0, p - W + 1) .. p; 0: every layer global.
  unsigned sliding_window = 0, global_every = 0;
  unsigned window(unsigned layer) const {
    return sliding_window && !(global_every && (layer + 1) % global_every == 0) ? sliding_window : 0;
  }
  // Latent KV (multi-head latent attention, model_shape's keys): kv_lora_rank > 0 caches per token
  // a latent of kv_lora_rank values and a decoupled RoPE key of qk_rope_dim values; a head's query
  // and key have qk_nope_dim + qk_rope_dim values, its value v_head_dim.
  unsigned kv_lora_rank = 0, qk_rope_dim = 0, qk_nope_dim = 0, v_head_dim = 0;
  bool latent() const { return kv_lora_rank > 0; }
  unsigned head_dim() const { return latent() ? qk_nope_dim + qk_rope_dim : dim / heads; }
  // Elements of a token's K (or V) in a layer; latent: half of the latent and RoPE key (W_kv_a's
  // output is written as two halves, model_shape::kv_half_width).
  unsigned kv_dim() const { return latent() ? (kv_lora_rank + qk_rope_dim) / 2 : kv_heads * head_dim(); }
  model_shape shape() const;
};

struct llama_weights {
  llama_config cfg;
  std::vector<float> embed;  // vocab x dim
  struct layer {
    std::vector<float> attn_norm, ffn_norm;  // dim
    std::vector<float> wq, wk, wv, wo;       // (heads x hd) x dim, kv_dim x dim (twice), dim x dim
    // Latent KV: wk and wv are W_kv_a's two halves of rows (latent, then RoPE key), wo is
    // dim x (heads x v_head_dim), and W_kv_b is (heads x (qk_nope_dim + v_head_dim)) x kv_lora_rank:
    // per head, the rows of its keys' non-RoPE part, then of its values (DeepSeek-V2's kv_b_proj).
    std::vector<float> wkv_b;
    std::vector<float> gate, up, down;       // ffn x dim, ffn x dim, dim x ffn
  };
  std::vector<layer> layers;
  std::vector<float> final_norm;  // dim
  std::vector<float> classifier;  // vocab x dim; empty when tied
};

}  // namespace kelle::fn
