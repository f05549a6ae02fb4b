// The shapes of the LLMs the firmware runs: the public configurations of the models the paper
// evaluates (spec section 6), chosen by name (`kelle-vp list models`), or a custom shape given
// in the scenario. Sizes follow from the shape and the KV cache's number format: weights are
// int8, activations 16-bit, the KV cache in `kv` (policy.kv_format: binary16 unless a run sets it).
#pragma once

#include "models/compute/kv_format.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <cstdint>
#include <string>

namespace kelle {

enum class ffn_kind { gated_silu, relu, gelu };
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

  static constexpr std::uint64_t weight_bytes_per_param = 1;  // int8
  static constexpr std::uint64_t act_bytes = 2;               // 16-bit activations (and x vectors)

  // Parameters of one decoder layer's matrices: W_q, W_k, W_v, W_o and the FFN.
  std::uint64_t layer_params() const;
  // Bytes of weights read per forward pass: every layer plus the LM head (the embedding table
  // is looked up, one row per token, not streamed).
  std::uint64_t weight_bytes_per_pass() const;
  // Bytes of all weights stored in DRAM (layers, LM head and embeddings, counted once if tied).
  std::uint64_t weight_bytes_stored() const;
  // Bytes of one token's K (or V) of one KV head in the cache: head_dim elements in the KV format,
  // with its group scales (2 x head_dim for the 16-bit formats).
  std::uint64_t kv_row_bytes() const { return kv.row_bytes(head_dim); }
  // KV bytes of one token in one layer: K and V of every KV head.
  std::uint64_t kv_bytes_per_token_layer() const { return 2ull * kv_heads * kv_row_bytes(); }
  // Bytes of the input vector x_n of one token (AERP stores it instead of K and V).
  std::uint64_t x_bytes_per_token() const { return std::uint64_t(hidden) * act_bytes; }

  // Checks the shape is consistent; throws config_error through `where`.
  void validate(const config_node& where, const std::string& key) const;
};

using model_registry = registry<model_shape>;
model_registry& models();

// `workload.model`: a built-in name, or a map with every field of a custom shape.
model_shape model_from_config(const config_node& workload);
// The weights file `workload.model` names (resolved against the folder of the file that set it,
// as include is), or "" when it names a model of the zoo or a shape.
std::string weights_file_of(const config_node& workload);

std::string to_string(ffn_kind k);
std::string to_string(norm_kind k);

}  // namespace kelle
