// A small Llama-style decoder for functional mode (docs/functional.md): its shape, its weights
// (fp32, from a file or seeded), their int8 quantisation, and the llama2.c tokenizer.
//
// Weight files (the format is told by the content, not the name):
//   - safetensors with Hugging Face Llama tensor names (model.embed_tokens.weight,
//     model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
//     mlp.{gate,up,down}_proj}.weight, model.norm.weight, lm_head.weight, absent when tied), dtypes
//     F32, F16, BF16. Heads, KV heads, rope_theta, rms_norm_eps and tie_word_embeddings come from
//     a config.json beside the file (the Hugging Face convention) or from the file's
//     __metadata__ (same keys). q_proj and k_proj rows are permuted back from Hugging Face's
//     half-split RoPE order to the interleaved (even, odd) pairs the SFU rotates, as llama2.c's
//     export does.
//   - llama2.c checkpoints (run.c's format): 7 int32 (dim, hidden_dim, n_layers, n_heads,
//     n_kv_heads, vocab_size, seq_len; vocab_size < 0: unshared classifier), then float32 tensors:
//     token_embedding_table, rms_att_weight, wq, wk, wv, wo, rms_ffn_weight, w1, w2, w3,
//     rms_final_weight, freq_cis_real, freq_cis_imag (skipped), wcls if unshared.
// Matrices are kept as PyTorch Linear weights: out x in, row-major.
#pragma once

#include "firmware/workload/model_zoo.h"

#include <cstdint>
#include <map>
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

// The shape only (reads the header, or the safetensors header and config).
llama_config read_weights_config(const std::string& path);
llama_weights load_weights(const std::string& path);
// Whether `s` names a weights file (an existing file, or a name ending .safetensors / .bin).
bool looks_like_weights_file(const std::string& s);
// Seeded normal weights (std 1/sqrt(fan_in), norms around 1): a model for tests and studies
// that need no trained weights.
llama_weights random_weights(const llama_config& cfg, std::uint64_t seed);
llama_config config_from_shape(const model_shape& m);

// Writers, for tests and tools: llama2.c; safetensors with dtype "F32", "F16" or "BF16" and the
// model's config in __metadata__ (and `config_json` also written beside it when true).
void write_llama2c(const llama_weights& w, const std::string& path);
void write_safetensors(const llama_weights& w, const std::string& path, const std::string& dtype,
                       bool config_json = false);

// Symmetric int8 per output channel: w[o][i] ~ q[o][i] x scale[o], scale = max_i |w[o][i]| / 127.
struct qmatrix {
  unsigned out = 0, in = 0;
  std::vector<std::int8_t> q;
  std::vector<float> scale;
  float at(unsigned o, unsigned i) const { return float(q[std::size_t(o) * in + i]) * scale[o]; }
};
qmatrix quantise(const std::vector<float>& w, unsigned out, unsigned in);

struct quantised_model {
  llama_config cfg;
  qmatrix embed;  // vocab x dim: row t is token t's embedding
  struct layer {
    std::vector<float> attn_norm, ffn_norm;
    qmatrix wq, wk, wv, wo, gate, up, down;
    // Latent KV: W_kv_b per head, as the absorbed attention applies it (memory_plan's kv_b block):
    // uk[h] = W_uk_h^T (kv_lora_rank x qk_nope_dim: a query's non-RoPE part into latent space,
    // scaled per latent channel), uv[h] = W_uv_h (v_head_dim x kv_lora_rank).
    std::vector<qmatrix> uk, uv;
  };
  std::vector<layer> layers;
  std::vector<float> final_norm;
  qmatrix classifier;  // a copy of embed when tied
};
quantised_model quantise(const llama_weights& w);

// llama2.c's tokenizer.bin: int32 max_token_length, then per token: float32 score, int32
// length, bytes. encode() is run.c's BPE: optional BOS (1), a dummy-prefix space, UTF-8 code
// points (unknown ones as byte tokens, id = byte + 3), then merges of the best-scoring pair.
class tokenizer {
 public:
  tokenizer(const std::string& path, unsigned vocab);
  std::vector<int> encode(const std::string& text, bool bos, bool eos) const;
  const std::string& piece(int id) const { return m_vocab.at(static_cast<std::size_t>(id)); }
  unsigned size() const { return static_cast<unsigned>(m_vocab.size()); }
  // Writes a tokenizer.bin (tests).
  static void write(const std::string& path, const std::vector<std::string>& vocab,
                    const std::vector<float>& scores);

 private:
  std::vector<std::string> m_vocab;
  std::vector<float> m_scores;
  std::map<std::string, int> m_ids;
};

}  // namespace kelle::fn
