// llama_config's model_shape.
#include "firmware/functional/llama_weights.h"

namespace kelle::fn {

model_shape llama_config::shape() const {
  model_shape m;
  m.name = name;
  m.layers = layers, m.hidden = dim, m.heads = heads, m.kv_heads = kv_heads, m.head_dim = head_dim(), m.ffn = ffn;
  m.ffn_type = ffn_kind::gated_silu;
  m.norm = norm_kind::rmsnorm;
  m.vocab = vocab;
  m.tied_embeddings = tied;
  m.sliding_window = sliding_window, m.global_every = global_every;
  m.kv_lora_rank = kv_lora_rank, m.qk_rope_dim = qk_rope_dim, m.qk_nope_dim = qk_nope_dim, m.v_head_dim = v_head_dim;
  return m;
}

}  // namespace kelle::fn
