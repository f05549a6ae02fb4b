#include "firmware/workload/model_zoo.h"

#include "firmware/functional/llama_model.h"

#include <algorithm>
#include <cmath>

namespace kelle {

model_registry& models() {
  static model_registry r("models", "LLM shapes (workload.model)");
  return r;
}

model_shape runnable_model_from_config(const config_node& w) {
  model_shape s = model_from_config(w);
  // Read whatever the model (a shape without latent KV ignores it), as the policy keys are.
  s.latent_fused = w.get_choice("latent_attention", "fused", {"fused", "unfused"}) == "fused";
  const std::string what = s.not_yet_run();
  if (!what.empty())
    w.fail("model", "model " + s.name + " has " + what +
                        ", which the firmware does not run yet (its sizes are modelled: docs/models/model-zoo.md)");
  return s;
}

std::string weights_file_of(const config_node& w) {
  if (!w.has("model") || w.is_map("model")) return {};
  const std::string name = w.require_string("model", "a model name or a weights file");
  if (models().has(name)) return {};
  const std::string file = w.get_path("model", "", "a model name or a weights file");
  return fn::looks_like_weights_file(name) || fn::looks_like_weights_file(file) ? file : std::string();
}

model_shape model_from_config(const config_node& w) {
  if (!w.has("model") || !w.is_map("model")) {
    if (w.has("model")) {  // a weights file: the shape comes from the file (docs/functional.md)
      const std::string file = weights_file_of(w);
      if (!file.empty()) {
        try {
          return fn::read_weights_config(file).shape();
        } catch (const fn::model_file_error& e) {
          w.fail("model", e.what());
        }
      }
    }
    const std::string name = w.require_choice("model", models().name_list());
    return *models().create(name);
  }
  const config_node m = w.child("model");
  model_shape s;
  s.name = m.get_string("name", "custom", "a name for the model");
  s.layers = static_cast<unsigned>(m.require_uint("layers", "decoder layers", 1, 1 << 12));
  s.hidden = static_cast<unsigned>(m.require_uint("hidden", "model width", 1, 1 << 20));
  s.heads = static_cast<unsigned>(m.require_uint("heads", "query heads", 1, 1 << 12));
  s.kv_heads = static_cast<unsigned>(m.get_uint("kv_heads", s.heads, "key/value heads", 1, 1 << 12));
  if (!m.has("head_dim") && !m.has("kv_lora_rank") && s.hidden % s.heads)
    m.fail("hidden", "hidden " + std::to_string(s.hidden) + " is not a multiple of heads " + std::to_string(s.heads) +
                         "; give head_dim or a hidden size that heads divide");
  auto dim = [&](const char* key, const char* what) {
    return static_cast<unsigned>(m.get_uint(key, 0, what, 0, 1 << 20));
  };
  // Latent KV (MLA): read first, since a latent shape's head_dim is qk_nope_dim + qk_rope_dim.
  s.kv_lora_rank = dim("kv_lora_rank", "the latent KV's rank (0: no latent KV)");
  s.qk_rope_dim = dim("qk_rope_dim", "decoupled RoPE dimensions per head");
  s.qk_nope_dim = dim("qk_nope_dim", "query/key dimensions per head without RoPE");
  s.v_head_dim = dim("v_head_dim", "value dimensions per head");
  s.q_lora_rank = dim("q_lora_rank", "the query's low rank (0: a full W_q)");
  const char* latent_keys[] = {"qk_rope_dim", "qk_nope_dim", "v_head_dim", "q_lora_rank"};
  const unsigned latent_vals[] = {s.qk_rope_dim, s.qk_nope_dim, s.v_head_dim, s.q_lora_rank};
  for (std::size_t i = 0; i < 4; ++i) {
    if (!s.kv_lora_rank && latent_vals[i])
      m.fail(latent_keys[i], std::string(latent_keys[i]) + " is a latent-KV key; give kv_lora_rank too");
    if (s.kv_lora_rank && i < 3 && !latent_vals[i])
      m.fail(latent_keys[i], "latent KV (kv_lora_rank " + std::to_string(s.kv_lora_rank) + ") needs " +
                                 latent_keys[i] + " of at least 1");
  }
  const unsigned head_default = s.kv_lora_rank ? s.qk_nope_dim + s.qk_rope_dim : s.hidden / s.heads;
  s.head_dim = static_cast<unsigned>(m.get_uint("head_dim", head_default, "head dimension", 1, 1 << 16));
  if (s.kv_lora_rank && s.head_dim != s.qk_nope_dim + s.qk_rope_dim)
    m.fail("head_dim", "with latent KV head_dim must be qk_nope_dim + qk_rope_dim (" +
                           std::to_string(s.qk_nope_dim + s.qk_rope_dim) + "), got " + std::to_string(s.head_dim));
  s.ffn = static_cast<unsigned>(m.require_uint("ffn", "FFN inner width", 1, 1 << 22));
  const std::string ft = m.get_choice("ffn_type", "gated_silu", {"gated_silu", "relu", "gelu", "gated_gelu"});
  s.ffn_type = ft == "gated_silu" ? ffn_kind::gated_silu
               : ft == "relu"     ? ffn_kind::relu
               : ft == "gelu"     ? ffn_kind::gelu
                                  : ffn_kind::gated_gelu;
  s.norm = m.get_choice("norm", "rmsnorm", {"rmsnorm", "layernorm"}) == "rmsnorm" ? norm_kind::rmsnorm
                                                                                  : norm_kind::layernorm;
  s.vocab = static_cast<unsigned>(m.require_uint("vocab", "vocabulary size", 1, 1 << 24));
  s.tied_embeddings = m.get_bool("tied_embeddings", false, "the LM head shares the embedding matrix");
  // Attention pattern.
  s.sliding_window = dim("sliding_window", "tokens a local layer's query sees (0: every layer global)");
  s.global_every = dim("global_every", "every N-th layer global (0: every layer windowed)");
  if (s.global_every && !s.sliding_window)
    m.fail("global_every", "global_every " + std::to_string(s.global_every) + " needs sliding_window of at least 1");
  // Mixture of experts.
  s.experts = dim("experts", "routed experts per MoE layer (0: dense FFNs)");
  s.experts_per_token = dim("experts_per_token", "routed experts per token");
  s.shared_experts = dim("shared_experts", "experts every token uses");
  s.expert_ffn = dim("expert_ffn", "an expert's FFN inner width");
  s.first_dense_layers = dim("first_dense_layers", "leading layers with a dense FFN");
  if (s.experts) {
    if (!s.experts_per_token || s.experts_per_token > s.experts)
      m.fail("experts_per_token", "expected a whole number in [1, " + std::to_string(s.experts) + "] (experts), got " +
                                      std::to_string(s.experts_per_token));
    if (!s.expert_ffn) m.fail("expert_ffn", "a mixture of experts needs expert_ffn of at least 1");
    if (s.first_dense_layers >= s.layers)
      m.fail("first_dense_layers", "expected fewer than layers (" + std::to_string(s.layers) + "), got " +
                                       std::to_string(s.first_dense_layers));
  } else {
    const char* moe_keys[] = {"experts_per_token", "shared_experts", "expert_ffn", "first_dense_layers"};
    const unsigned moe_vals[] = {s.experts_per_token, s.shared_experts, s.expert_ffn, s.first_dense_layers};
    for (std::size_t i = 0; i < 4; ++i)
      if (moe_vals[i]) m.fail(moe_keys[i], std::string(moe_keys[i]) + " is a mixture-of-experts key; give experts too");
  }
  s.validate(w, "model");
  return s;
}

namespace {

model_shape dense(unsigned layers, unsigned hidden, unsigned heads, unsigned kv_heads, unsigned head_dim,
                  unsigned ffn, ffn_kind ft, norm_kind nk, unsigned vocab, bool tied) {
  model_shape s;
  s.layers = layers;
  s.hidden = hidden;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.ffn = ffn;
  s.ffn_type = ft;
  s.norm = nk;
  s.vocab = vocab;
  s.tied_embeddings = tied;
  return s;
}

void add(const char* name, const char* desc, model_shape s) {
  s.name = name;
  models().add(name, desc, [s] { return std::make_unique<model_shape>(s); });
}

model_shape with_window(model_shape s, unsigned window, unsigned global_every) {
  s.sliding_window = window;
  s.global_every = global_every;
  return s;
}

model_shape with_experts(model_shape s, unsigned experts, unsigned per_token, unsigned shared, unsigned expert_ffn,
                         unsigned first_dense) {
  s.experts = experts;
  s.experts_per_token = per_token;
  s.shared_experts = shared;
  s.expert_ffn = expert_ffn;
  s.first_dense_layers = first_dense;
  return s;
}

// Public configurations (each model's config.json on its model card; spec section 6; the later
// ones: docs/models/model-zoo.md).
const bool registered = [] {
  using F = ffn_kind;
  using N = norm_kind;
  add("llama2-7b", "Llama 2 7B: 32 x 4096, 32 heads, FFN 11008 gated SiLU", dense(32, 4096, 32, 32, 128, 11008, F::gated_silu, N::rmsnorm, 32000, false));
  add("llama2-13b", "Llama 2 13B: 40 x 5120, 40 heads, FFN 13824 gated SiLU", dense(40, 5120, 40, 40, 128, 13824, F::gated_silu, N::rmsnorm, 32000, false));
  add("llama3-8b", "Llama 3 8B: 32 x 4096, 32 heads / 8 KV heads (GQA), FFN 14336", dense(32, 4096, 32, 8, 128, 14336, F::gated_silu, N::rmsnorm, 128256, false));
  add("llama3.2-3b", "Llama 3.2 3B: 28 x 3072, 24 heads / 8 KV heads, FFN 8192, tied embeddings", dense(28, 3072, 24, 8, 128, 8192, F::gated_silu, N::rmsnorm, 128256, true));
  add("mistral-7b", "Mistral 7B: 32 x 4096, 32 heads / 8 KV heads, FFN 14336", dense(32, 4096, 32, 8, 128, 14336, F::gated_silu, N::rmsnorm, 32000, false));
  add("qwen2-7b", "Qwen2 7B: 28 x 3584, 28 heads / 4 KV heads, FFN 18944", dense(28, 3584, 28, 4, 128, 18944, F::gated_silu, N::rmsnorm, 152064, false));
  add("opt-6.7b", "OPT 6.7B: 32 x 4096, 32 heads, FFN 16384 ReLU, LayerNorm, tied embeddings", dense(32, 4096, 32, 32, 128, 16384, F::relu, N::layernorm, 50272, true));
  // Today's edge models (not run by the firmware yet: model_shape::not_yet_run).
  // google/gemma-3-1b-pt config.json: 26 layers, hidden 1152, 4 heads / 1 KV head, head_dim 256,
  // intermediate 6912 (GeGLU, gelu_pytorch_tanh), vocab 262144, tied, sliding_window 512,
  // sliding_window_pattern 6 (five local layers, then one global).
  add("gemma3-1b", "Gemma 3 1B: 26 x 1152, 4 heads / 1 KV head, FFN 6912 GeGLU, 512-token window, 1 global layer in 6",
      with_window(dense(26, 1152, 4, 1, 256, 6912, F::gated_gelu, N::rmsnorm, 262144, true), 512, 6));
  // mistralai/Mistral-7B-v0.1 config.json: as mistral-7b, with sliding_window 4096 on every layer.
  add("mistral-7b-v0.1-swa", "Mistral 7B v0.1 with its 4096-token sliding window on every layer",
      with_window(dense(32, 4096, 32, 8, 128, 14336, F::gated_silu, N::rmsnorm, 32000, false), 4096, 0));
  {
    // deepseek-ai/DeepSeek-V2-Lite config.json: 27 layers, hidden 2048, 16 heads, kv_lora_rank 512,
    // qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, q_lora_rank null, 64 routed experts
    // (num_experts_per_tok 6), 2 shared, moe_intermediate_size 1408, first_k_dense_replace 1 with
    // intermediate_size 10944, vocab 102400, untied.
    model_shape d = with_experts(dense(27, 2048, 16, 16, 192, 10944, F::gated_silu, N::rmsnorm, 102400, false), 64, 6,
                                 2, 1408, 1);
    d.kv_lora_rank = 512;
    d.qk_rope_dim = 64;
    d.qk_nope_dim = 128;
    d.v_head_dim = 128;
    add("deepseek-v2-lite", "DeepSeek-V2-Lite: 27 x 2048, 16 heads, latent KV 512 + 64, 64 experts top-6 + 2 shared (1408)", d);
  }
  // allenai/OLMoE-1B-7B-0924 config.json: 16 layers, hidden 2048, 16 heads, 64 experts top-8,
  // intermediate_size 1024 (each expert), vocab 50304, untied.
  add("olmoe-1b-7b", "OLMoE-1B-7B: 16 x 2048, 16 heads, 64 experts top-8 (1024)",
      with_experts(dense(16, 2048, 16, 16, 128, 1024, F::gated_silu, N::rmsnorm, 50304, false), 64, 8, 0, 1024, 0));
  // Qwen/Qwen3-30B-A3B config.json: 48 layers, hidden 2048, 32 heads / 4 KV heads, head_dim 128,
  // 128 experts top-8, moe_intermediate_size 768 (intermediate_size 6144 unused: every layer is MoE),
  // vocab 151936, untied.
  add("qwen3-30b-a3b", "Qwen3-30B-A3B: 48 x 2048, 32 heads / 4 KV heads, 128 experts top-8 (768)",
      with_experts(dense(48, 2048, 32, 4, 128, 6144, F::gated_silu, N::rmsnorm, 151936, false), 128, 8, 0, 768, 0));
  return true;
}();

}  // namespace
}  // namespace kelle
