// Where the firmware puts weights, KV cache and activations (docs/firmware.md, "Placement").
//
// - Weights: all of them in DRAM, each layer's matrices back to back, stored tile-major so a
//   tile is contiguous; the LM head after the last layer.
// - Weight staging: two tile buffers (double buffering) that split the weight SRAM (`sram` on
//   the SRAM baselines: its weight share, `placement.weight_buffer_KiB`).
// - KV cache: per layer, batch x slots x kv_bytes_per_token_layer (in the KV format), slots = max_tokens,
//   or at most W for a sliding-window layer (its slots reused as a ring). Policy `first_layers`:
//   the KV memory holds the KV of as many whole layers as fit, in chip order (windowed layers
//   first, then layers 0, 1, ... in order: docs/firmware.md, "Placement"); the
//   other layers' KV lives in DRAM and the attention reads it from there, or (opt-in,
//   `placement.kv_stream_KiB`) streams it through two KV stream buffers on the KV memory, as the
//   weights stream through their tile buffers.
// - Activations: an arena in the activation memory; a buffer that does not fit spills to DRAM.
#pragma once

#include "firmware/workload/activation_arena.h"
#include "firmware/workload/model_zoo.h"
#include "firmware/workload/region.h"
#include "platform/system/workload.h"

#include <functional>
#include <string>
#include <vector>

namespace kelle {


class refresh_control;
// The refresh control of the memory holding `r` (nullptr: its cells need none, e.g. SRAM, DRAM
// as modelled) and r's address local to it. No look-up: the region carries its memory.
refresh_control* refresh_of(const region& r, std::uint64_t& local);

class memory_plan {
 public:
  // `placement` is workload.placement; `kv_tokens` is what the KV cache holds per sequence (all
  // tokens, or a KV policy's budget); `functional`: the run carries data (no folded addresses).
  // Throws config_error when the model does not fit (and placement.allow_dram_overflow is off).
  memory_plan(const model_shape& m, unsigned batch, std::uint64_t kv_tokens, platform_view& p,
              const config_node& placement, bool functional = false);

  // The sizes the plan carves out, from the placement keys and the memories' capacities: the
  // constructor places its regions by them, and the first-order estimate (firmware/llm/estimate.cpp)
  // takes them, so the two cannot differ. `capacity(name)` is a memory's capacity in bytes, or
  // ~0 when the system has no memory of that name (`names` lists those it has, for the error).
  struct sizes {
    std::string dram, weight_mem, kv_mem, act_mem;
    std::uint64_t tile_buffer = 0;  // each of the two weight tile buffers
    std::uint64_t arena = 0;        // the activation arena
    std::uint64_t stream = 0;       // each of the two KV stream buffers (0: none)
    std::uint64_t kv_half = 0;      // K (or V) of one global layer: batch x kv_tokens slots
    std::uint64_t kv_slot = 0;      // one token slot of every sequence, K or V
    bool fill = true;               // placement `fill` (else `first_layers`)
    // The order layers take the KV memory in: the windowed layers (fewest slots) first, then the
    // others, each kind by index (the identity when no layer is windowed).
    std::vector<unsigned> chip_order;
    unsigned kv_on_chip = 0;        // whole layers whose KV is on chip: chip_order's first ones
    std::uint64_t chip_tokens = 0;  // `fill`: the next layer's token slots on chip
    // K (or V) bytes of layer l (batch x its slots x kv_slot / batch).
    std::uint64_t half_of(const model_shape& m, unsigned l, std::uint64_t max_tokens) const {
      return m.kv_slots(l, max_tokens) * kv_slot;
    }
    std::uint64_t weight_bytes = 0; // the weights' DRAM layout (layers, LM head, embeddings)
  };
  static sizes size(const model_shape& m, unsigned batch, std::uint64_t kv_tokens, const config_node& placement,
                    const std::function<std::uint64_t(const std::string&)>& capacity, const std::string& names);

  // By how many bytes weights, KV and activation spills exceed the DRAM (placement.
  // allow_dram_overflow; 0: they fit).
  std::uint64_t dram_overflow_bytes() const { return m_overflow_bytes; }

  struct layer_weights {
    std::uint64_t q, k, v, o, gate, up, down;  // DRAM addresses (gate unused without gating)
    // Latent KV: W_kv_b, the latent's up-projection, applied absorbed: per head its key half
    // W_uk (qk_nope_dim x kv_lora_rank, to take a query into latent space) then, after every
    // head's, its value half W_uv (kv_lora_rank x v_head_dim); k and v are W_kv_a's two halves of
    // columns. 0 without latent KV.
    std::uint64_t kv_b = 0;
    // A mixture-of-experts layer (gate, up and down 0): the router (hidden x experts), then every
    // expert's gate (if gated), up and down matrices of expert_matrix bytes each (aligned), expert
    // e's at experts + e x expert_stride: the routed experts 0 .. E-1, then the shared ones.
    std::uint64_t router = 0, experts = 0, expert_stride = 0, expert_matrix = 0;
    bool gated_experts = false;
    std::uint64_t expert_gate(unsigned e) const { return experts + e * expert_stride; }
    std::uint64_t expert_up(unsigned e) const { return expert_gate(e) + (gated_experts ? expert_matrix : 0); }
    std::uint64_t expert_down(unsigned e) const { return expert_up(e) + expert_matrix; }
  };
  // Layer `layer`'s matrices from DRAM address `base`, back to back, each aligned; `end` gets the
  // address after them.
  static layer_weights layer_layout(const model_shape& m, unsigned layer, std::uint64_t base, std::uint64_t& end);
  const layer_weights& weights(unsigned layer) const { return m_weights[layer]; }
  std::uint64_t lm_head() const { return m_lm_head; }
  const region& weight_buffer(unsigned i) const { return m_weight_buf[i]; }
  std::uint64_t weight_buffer_bytes() const { return m_weight_buf[0].bytes; }

  struct kv_layer {
    region k, v;  // K then V of every sequence: batch x max_tokens x kv_heads x head_dim
    // Placement `fill`: the layer after the whole on-chip layers keeps its first chip_tokens
    // token slots (of every sequence and head) on chip, in k_chip and v_chip; the rest of its
    // slots are in k and v (DRAM).
    std::uint64_t chip_tokens = 0;
    region k_chip, v_chip;
    std::uint64_t slots = 0;  // token slots per sequence (a windowed layer's ring: at most W)
    bool on_chip = false;     // the whole layer's K and V are in the KV memory (k, v)
  };
  const kv_layer& kv(unsigned layer) const { return m_kv[layer]; }
  // The two buffers on the KV memory through which the attention reads KV that is in DRAM
  // (placement.kv_stream_KiB; zero bytes: none, the array reads DRAM directly).
  const region& kv_stream_buffer(unsigned i) const { return m_kv_stream[i]; }
  std::uint64_t kv_stream_bytes() const { return m_kv_stream[0].bytes; }
  // How many layers' whole KV is on chip (which: kv_on_chip(l); the first ones unless layers are
  // windowed).
  unsigned kv_layers_on_chip() const { return m_kv_on_chip; }
  // How many layers have any KV on chip: the whole ones and, with `fill`, the partly placed one.
  unsigned kv_layers_touching_chip() const { return m_kv_on_chip + (m_partial < m_kv.size() ? 1 : 0); }
  bool kv_on_chip(unsigned layer) const { return m_kv[layer].on_chip; }
  // Whether layer `layer` has KV on chip (whole, or its first slots: the partly placed layer).
  bool kv_touches_chip(unsigned layer) const { return m_kv[layer].on_chip || layer == m_partial; }
  // The partly placed layer (placement `fill`), or the number of layers when there is none.
  unsigned kv_partial_layer() const { return m_partial; }
  // The first KV on chip (chip order's first layer: whole, or its first token slots), K half;
  // only when kv_layers_touching_chip() > 0.
  const region& first_chip_kv() const {
    for (const kv_layer& k : m_kv)
      if (k.on_chip) return k.k;
    return m_kv[m_partial < m_kv.size() ? m_partial : 0].k_chip;
  }
  // Token slots per sequence in the largest layer's cache (new tokens reuse evicted slots).
  std::uint64_t kv_token_slots() const { return m_kv_tokens; }
  // Token slots per sequence of layer `layer` (a windowed layer's ring: at most its window).
  std::uint64_t kv_token_slots(unsigned layer) const { return m_kv[layer].slots; }
  // The rules that place the KV cache (also the first-order estimate's, firmware/llm/estimate.h):
  // the whole layers whose K and V halves of `half` bytes each fit `kv_capacity` bytes, and with
  // placement `fill`, the token slots (of `token_bytes` each, K or V) of the next layer that fit
  // the `left` bytes after them, fewer than `max_tokens`.
  static unsigned kv_layers_fitting(unsigned layers, std::uint64_t kv_capacity, std::uint64_t half);
  static std::uint64_t kv_chip_tokens(std::uint64_t left, std::uint64_t token_bytes, std::uint64_t max_tokens);

  // Activation buffers: `alloc` takes from the activation arena (or DRAM when it is full);
  // `release` frees everything allocated after `mark()`.
  struct arena_mark {
    activation_arena::mark_t arena;
    std::uint64_t spill;
  };
  region alloc(std::uint64_t bytes);
  arena_mark mark() const { return {m_act.mark(), m_spill_used}; }
  void release(const arena_mark& m) {
    m_act.release(m.arena);
    m_spill_used = m.spill;
  }
  std::uint64_t arena_free() const { return m_act.free(); }
  const region& arena() const { return m_act.where(); }
  // Whether activation buffers of `live` bytes together, the largest `largest`, can never be
  // placed at once: the error alloc() would record when they are (more than the arena and the
  // spare DRAM hold; with the overflow allowed, a buffer larger than both the arena and the DRAM
  // after the weights), else "". `what` says which buffers (in the error).
  std::string activations_error(std::uint64_t live, std::uint64_t largest, const std::string& what) const;
  // The arena itself: what sampled decode records and asks where another pass's buffers land.
  activation_arena& act() { return m_act; }
  const activation_arena& act() const { return m_act; }
  const std::string& dram() const { return m_dram; }
  // DRAM left after weights and KV (activation spills grow from its start).
  const region& dram_spare() const { return m_spill; }
  // Takes `bytes` off the top of the spare DRAM for data the plan does not place itself (the
  // functional run's constants); returns its address. Throws std::runtime_error when it does not
  // fit beside the activations spilled so far.
  std::uint64_t reserve_top(std::uint64_t bytes);
  std::string describe() const;

 private:
  std::string m_dram;
  std::vector<layer_weights> m_weights;
  std::uint64_t m_lm_head = 0;
  region m_weight_buf[2];
  region m_kv_stream[2];
  std::vector<kv_layer> m_kv;
  unsigned m_kv_on_chip = 0;
  unsigned m_partial = 0;  // the partly placed layer, or the number of layers
  std::uint64_t m_kv_tokens = 0;
  activation_arena m_act;
  region m_spill;                 // DRAM area for activations that do not fit on chip
  std::uint64_t m_spill_used = 0;
  std::uint64_t m_dram_used = 0;
  std::uint64_t m_overflow_bytes = 0;
  bool m_allow_overflow = false;
  // The input error of activations that do not fit (alloc, during the run), named at its key.
  std::string m_spill_error;
  std::uint64_t m_fold_base = 0, m_fold_bytes = 0;  // the DRAM after the weights
  std::uint64_t m_spill_overflow = 0;               // the most the spills exceeded their area by
  std::string m_kv_format;  // the KV format, for describe() (empty: binary16)
};

}  // namespace kelle
