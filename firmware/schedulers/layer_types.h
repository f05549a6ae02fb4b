// The types a scheduler and the layer operations share: one pass over the model (pass_info), an
// activation buffer (tensor), a weight tile being loaded (tile_load), a layer's sizes (layer_dims).
#pragma once

#include "firmware/driver/driver.h"
#include "firmware/workload/memory_plan.h"
#include "firmware/workload/model_zoo.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

using layer_weights = memory_plan::layer_weights;

// One pass over the model: the prefill of the context or one decode step, for every sequence.
struct pass_info {
  bool prefill = false;
  unsigned batch = 1;
  std::uint64_t rows = 1;       // new tokens per sequence in this pass (context length or 1)
  std::uint64_t kv_tokens = 1;  // tokens each new token attends to (past and new)
  std::uint64_t kv_offset = 0;  // where the new tokens' K and V go in the cache (token index)
  unsigned step = 0;            // decode step (0 for the prefill)
  // With a KV policy: per layer, the tokens a head attends to (its kept set, per sequence).
  // Empty: every token.
  std::vector<std::uint64_t> kept_tokens;
  // AERP, per layer (empty: none): the batch's tokens stored as x, whose K and V MM_k and MM_v
  // recompute as rows stacked with the new tokens' (x_rows), and how many of the tokens a head
  // attends to (per sequence) are such tokens (x_attended, at most attended()).
  std::vector<std::uint64_t> x_rows, x_attended;
  // Per layer (empty: none): (token, KV head) pairs the pass evicts in the batch. A layer that
  // evicts chooses its victims in the attention: on the systolic evictor (score rows streamed to
  // it, then evict_select) when the system has one, else by an SFU min_search over the scores.
  std::vector<std::uint64_t> victims;
  // Per layer (empty: every layer global): a sliding-window layer's window W, 0 for a global
  // layer. A windowed layer's query sees at most W tokens (the prefill's band, decode's window).
  std::vector<std::uint64_t> window;
  bool evicts(unsigned layer) const { return !victims.empty() && victims[layer] > 0; }
  std::uint64_t attended(unsigned layer) const {
    const std::uint64_t n = kept_tokens.empty() ? kv_tokens : kept_tokens[layer];
    return window.empty() || window[layer] == 0 ? n : std::min<std::uint64_t>(n, window[layer]);
  }
  // Whether the prefill of a windowed layer has more new tokens than the layer's cache slots
  // (its band attention reads the context's K and V from a staging buffer: layer_ops).
  bool banded(unsigned layer) const { return prefill && !window.empty() && window[layer] && rows > window[layer]; }
  std::uint64_t recompute_rows(unsigned layer) const { return x_rows.empty() ? 0 : x_rows[layer]; }
  std::uint64_t attended_x(unsigned layer) const { return x_attended.empty() ? 0 : x_attended[layer]; }
};

// An activation buffer: where it is, and the command that produced it.
struct tensor {
  region where;
  ticket producer;
  int lifetime = -1;  // its open lifetime (layer_ops), -1: none
  std::string kind;
};

// A weight tile being loaded into one of the two tile buffers.
struct tile_load {
  ticket dma;
  unsigned buffer = 0;
  bool valid() const { return dma.valid(); }
};

// The sizes a layer's operations use: rows (batch x new tokens), hidden, query width
// (heads x head_dim) and KV width (kv_heads x head_dim).
struct layer_dims {
  std::uint64_t rows, hidden, q, kv;
};

}  // namespace kelle
