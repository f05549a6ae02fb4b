// Which experts the tokens of a pass route to at each mixture-of-experts layer
// (docs/models/model-zoo.md, "Mixture of experts"): the firmware streams the weights of exactly
// the experts a pass's tokens use, each once, and runs each on the tokens routed to it.
//
// Two sources (workload.routing):
// - `uniform` (the default): each token picks experts_per_token distinct experts of `experts`,
//   uniformly and independently of the other tokens, layers and passes, from a seed. This is the
//   assumption behind model_shape::expected_experts (E (1 - (1 - k/E)^tokens) distinct experts);
//   trained routers are not uniform (some experts are popular), which makes fewer distinct experts
//   per batch: uniform routing is the pessimistic case for a batch's weight stream.
// - `trace`: a CSV file `pass,layer,expert,tokens` (pass 0: the prefill, s: decode step s) with the
//   tokens each expert takes in each pass and MoE layer, e.g. recorded from a real router; every
//   pass and MoE layer of the run is in it, and each pass's tokens add up to its tokens x k.
#pragma once

#include "firmware/workload/model_zoo.h"
#include "platform/config/config.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kelle {

class expert_routing {
 public:
  struct load {
    unsigned expert;       // routed expert index, 0 .. experts - 1
    std::uint32_t tokens;  // tokens of the pass routed to it
  };
  // `routing` is workload.routing; the run has `batch` sequences, a prefill of `context` tokens
  // each (unless `prefill` is false) and `decode` steps. Input errors throw config_error.
  expert_routing(const model_shape& m, const config_node& routing, std::uint64_t default_seed, unsigned batch,
                 std::uint64_t context, std::uint64_t decode, bool prefill);

  // The experts pass `pass`'s `tokens` tokens use at MoE layer `layer`, ascending, with the tokens
  // each takes (the same answer whenever it is asked).
  const std::vector<load>& route(unsigned pass, unsigned layer, std::uint64_t tokens);
  // What the routing is, for the results ("uniform top-8 of 64, seed 1" or the trace's path).
  const std::string& describe() const { return m_describe; }

 private:
  const model_shape& m_model;
  std::uint64_t m_seed = 0;
  std::string m_describe;
  bool m_trace = false;
  std::unordered_map<std::uint64_t, std::vector<load>> m_recorded;  // trace: by (pass, layer)
  std::vector<std::uint32_t> m_count;  // scratch: tokens per expert
  std::vector<unsigned> m_order;       // scratch: a partial shuffle of the experts
  std::vector<load> m_out;
  static std::uint64_t key(unsigned pass, unsigned layer) { return std::uint64_t(pass) << 32 | layer; }
  void read_trace(const config_node& routing, const std::string& file, unsigned batch, std::uint64_t context,
                  std::uint64_t decode, bool prefill);
};

}  // namespace kelle
