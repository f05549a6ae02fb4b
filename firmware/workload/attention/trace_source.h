// The `trace` attention source: replays pre-softmax attention logits recorded from a model
// (scripts/export_attention_trace.py). See docs/policies.md.
//
// File format (version 1, little-endian, extension .katt):
//
//   offset  size  field
//   0       8     magic "KELLEATT"
//   8       4     u32 version = 1
//   12      4     u32 sequences S
//   16      4     u32 layers L
//   20      4     u32 heads H   (query heads)
//   24      4     u32 tokens T  (context + decode positions recorded per sequence)
//   28      ...   f32 logits, for s < S, l < L, h < H, query t < T, key k <= t (causal lower
//                 triangle including the diagonal): T (T + 1) / 2 values per (s, l, h)
//
// The value is q_t . k_k / sqrt(D_h) of head h in layer l (what the softmax sees, before the
// causal mask). Replay: sequence s reads the trace's sequence s mod S; layer l reads layer
// l mod L when `wrap_layers` is true (a short trace can drive a deeper model), else l < L is
// required; the model's heads must equal H; a query at or beyond T is an error.
#pragma once

#include "firmware/workload/attention/attention_source.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kelle {

struct attention_trace {
  std::uint32_t sequences = 0, layers = 0, heads = 0, tokens = 0;
  std::vector<float> logits;  // the triangle of every (s, l, h), in file order

  static std::uint64_t triangle(std::uint64_t tokens) { return tokens * (tokens + 1) / 2; }
  std::uint64_t index(unsigned s, unsigned l, unsigned h, std::uint64_t query,
                      std::uint64_t key) const {
    return ((std::uint64_t(s) * layers + l) * heads + h) * triangle(tokens) +
           triangle(query) + key;
  }
  // Throws std::runtime_error naming the file for I/O and format errors.
  static attention_trace read(const std::string& file);
  void write(const std::string& file) const;
  std::string serialise() const;  // the file's bytes
};

// Records `src` for positions 0 .. tokens - 1 of `sequences` sequences (tests, conversions).
attention_trace record_attention_trace(const attention_source& src, unsigned sequences,
                                       std::uint32_t tokens);

}  // namespace kelle
