#include "firmware/workload/model_zoo.h"

#include "firmware/functional/llama_model.h"

namespace kelle {

model_registry& models() {
  static model_registry r("models", "LLM shapes (workload.model)");
  return r;
}

std::string to_string(ffn_kind k) {
  switch (k) {
    case ffn_kind::gated_silu: return "gated_silu";
    case ffn_kind::relu: return "relu";
    case ffn_kind::gelu: return "gelu";
  }
  return "?";
}

std::string to_string(norm_kind k) { return k == norm_kind::rmsnorm ? "rmsnorm" : "layernorm"; }

std::uint64_t model_shape::layer_params() const {
  const std::uint64_t c = hidden, q = std::uint64_t(heads) * head_dim, kv = std::uint64_t(kv_heads) * head_dim;
  const std::uint64_t attn = c * q + 2 * c * kv + q * c;
  const std::uint64_t mlp = (ffn_type == ffn_kind::gated_silu ? 3 : 2) * c * ffn;
  return attn + mlp;
}

std::uint64_t model_shape::weight_bytes_per_pass() const {
  return (layers * layer_params() + std::uint64_t(vocab) * hidden) * weight_bytes_per_param;
}

std::uint64_t model_shape::weight_bytes_stored() const {
  const std::uint64_t embed = std::uint64_t(vocab) * hidden;
  return (layers * layer_params() + embed + (tied_embeddings ? 0 : embed)) * weight_bytes_per_param;
}

void model_shape::validate(const config_node& w, const std::string& key) const {
  if (!layers || !hidden || !heads || !kv_heads || !head_dim || !ffn || !vocab)
    w.fail(key, "every dimension of the model must be at least 1");
  if (heads % kv_heads)
    w.fail(key, "heads (" + std::to_string(heads) + ") must be a multiple of kv_heads (" +
                    std::to_string(kv_heads) + ")");
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
  if (!m.has("head_dim") && s.hidden % s.heads)
    m.fail("hidden", "hidden " + std::to_string(s.hidden) + " is not a multiple of heads " + std::to_string(s.heads) +
                         "; give head_dim or a hidden size that heads divide");
  s.head_dim = static_cast<unsigned>(m.get_uint("head_dim", s.hidden / s.heads, "head dimension", 1, 1 << 16));
  s.ffn = static_cast<unsigned>(m.require_uint("ffn", "FFN inner width", 1, 1 << 22));
  const std::string ft = m.get_choice("ffn_type", "gated_silu", {"gated_silu", "relu", "gelu"});
  s.ffn_type = ft == "gated_silu" ? ffn_kind::gated_silu : ft == "relu" ? ffn_kind::relu : ffn_kind::gelu;
  s.norm = m.get_choice("norm", "rmsnorm", {"rmsnorm", "layernorm"}) == "rmsnorm" ? norm_kind::rmsnorm
                                                                                  : norm_kind::layernorm;
  s.vocab = static_cast<unsigned>(m.require_uint("vocab", "vocabulary size", 1, 1 << 24));
  s.tied_embeddings = m.get_bool("tied_embeddings", false, "the LM head shares the embedding matrix");
  s.validate(w, "model");
  return s;
}

namespace {

void add(const char* name, const char* desc, unsigned layers, unsigned hidden, unsigned heads,
         unsigned kv_heads, unsigned head_dim, unsigned ffn, ffn_kind ft, norm_kind nk, unsigned vocab,
         bool tied) {
  models().add(name, desc, [=] {
    auto s = std::make_unique<model_shape>();
    *s = model_shape{name, layers, hidden, heads, kv_heads, head_dim, ffn, ft, nk, vocab, tied, kv_format{}};
    return s;
  });
}

// Public configurations (each model's config.json on its model card; spec section 6).
const bool registered = [] {
  using F = ffn_kind;
  using N = norm_kind;
  add("llama2-7b", "Llama 2 7B: 32 x 4096, 32 heads, FFN 11008 gated SiLU", 32, 4096, 32, 32, 128, 11008, F::gated_silu, N::rmsnorm, 32000, false);
  add("llama2-13b", "Llama 2 13B: 40 x 5120, 40 heads, FFN 13824 gated SiLU", 40, 5120, 40, 40, 128, 13824, F::gated_silu, N::rmsnorm, 32000, false);
  add("llama3-8b", "Llama 3 8B: 32 x 4096, 32 heads / 8 KV heads (GQA), FFN 14336", 32, 4096, 32, 8, 128, 14336, F::gated_silu, N::rmsnorm, 128256, false);
  add("llama3.2-3b", "Llama 3.2 3B: 28 x 3072, 24 heads / 8 KV heads, FFN 8192, tied embeddings", 28, 3072, 24, 8, 128, 8192, F::gated_silu, N::rmsnorm, 128256, true);
  add("mistral-7b", "Mistral 7B: 32 x 4096, 32 heads / 8 KV heads, FFN 14336", 32, 4096, 32, 8, 128, 14336, F::gated_silu, N::rmsnorm, 32000, false);
  add("qwen2-7b", "Qwen2 7B: 28 x 3584, 28 heads / 4 KV heads, FFN 18944", 28, 3584, 28, 4, 128, 18944, F::gated_silu, N::rmsnorm, 152064, false);
  add("opt-6.7b", "OPT 6.7B: 32 x 4096, 32 heads, FFN 16384 ReLU, LayerNorm, tied embeddings", 32, 4096, 32, 32, 128, 16384, F::relu, N::layernorm, 50272, true);
  return true;
}();

}  // namespace
}  // namespace kelle
