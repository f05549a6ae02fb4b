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

#include "firmware/functional/llama_weights.h"
#include "firmware/workload/model_shape.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace kelle::fn {

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
