// Attention-score sources for the KV-cache policies (plain C++, no SystemC). See docs/policies.md.
//
// A source yields, for (sequence, layer, query head, query position), the PRE-SOFTMAX attention
// logits q.k / sqrt(D_h) of that query against any set of key positions (each <= the query's).
// Pre-softmax values, not probabilities, because:
//   - a logit does not depend on which other tokens are kept, so a score file recorded with the
//     full cache replays correctly under any eviction policy (probabilities would not: the
//     softmax is over the kept set, which the policy decides);
//   - it is what the systolic evictor accumulates in hardware (models/compute/evictor).
// The policy applies the softmax over its own kept set (or the evictor's quantisation).
//
// Positions count from 0 for every sequence: the context is 0 .. context_len - 1, decode step t
// (t >= 1) produces the token at position context_len + t - 1, which attends to itself.
//
// A source is a pure function of its arguments: the same arguments give the same values,
// whatever was asked before (the policies ask in any order and the subset mode skips queries).
#pragma once

#include "platform/config/config.h"
#include "platform/registry/registry.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kelle {

class attention_source {
 public:
  virtual ~attention_source() = default;
  virtual unsigned layers() const = 0;
  // Query heads (the model's `heads`; a grouped-query policy sums a group's probabilities).
  virtual unsigned heads() const = 0;
  // Largest query position + 1 the source can answer (a trace is finite; synthetic: unlimited).
  virtual std::uint64_t max_tokens() const = 0;

  // out[i] = q.k / sqrt(D_h) of query `query` against key position keys[i], i < n.
  // Requires layer < layers(), head < heads(), keys[i] <= query < max_tokens().
  virtual void scores(unsigned sequence, unsigned layer, unsigned head, std::uint64_t query,
                      const std::uint32_t* keys, std::size_t n, double* out) const = 0;
};

// What a source is built from: its configuration section and the model it stands for.
struct attention_source_args {
  config_node cfg;     // e.g. `workload.attention` (keys documented per source)
  unsigned layers = 0; // the model's decoder layers
  unsigned heads = 0;  // the model's query heads
};

using attention_source_registry = registry<attention_source, const attention_source_args&>;
// `synthetic`, `trace`.
attention_source_registry& attention_sources();

// Builds the source named by `args.cfg`'s `type` key (default `synthetic`).
std::unique_ptr<attention_source> make_attention_source(const attention_source_args& args);

}  // namespace kelle
