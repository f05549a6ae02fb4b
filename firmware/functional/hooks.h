// What layer_ops tells functional mode about the commands it issues (docs/functional.md): each
// call comes just before the command is submitted, so functional mode can attach the command's
// operand description (layout, weight scales, positions, mask). Timing mode has no hooks.
#pragma once

#include "models/compute/command.h"

#include <cstdint>

namespace kelle {

struct region;

class functional_hooks {
 public:
  virtual ~functional_hooks() = default;
  // A projection's GEMM on the weight tile of columns [col0, col0 + g.n) of the matrix at `w`.
  virtual void gemm(const command& g, std::uint64_t w, std::uint64_t col0) = 0;
  // An SFU command whose first operand is `in`.
  virtual void sfu(const command& c, const region& in) = 0;
  // q . K^T and A . V of KV heads [h0, h0 + batch / sequences) of `layer`; `q` and `out` are
  // the (sequences x tokens) x (heads x head_dim) query and result tensors. The command covers
  // the key columns [first, first + its n (q . K^T) or k (A . V)) of score rows `total` keys
  // long: the attention is read in parts (AERP's staging), an A . V after the first part adds
  // to the result.
  virtual void scores(const command& qk, unsigned layer, std::uint64_t h0, std::uint64_t q, std::uint64_t first,
                      std::uint64_t total) = 0;
  virtual void context(const command& av, unsigned layer, std::uint64_t h0, std::uint64_t out, std::uint64_t first,
                       std::uint64_t total) = 0;
  // The prefill's band attention of a windowed layer (layer_ops::banded_attention): q . K^T
  // (av false) or A . V of KV heads [h0, h0 + batch / sequences), the query rows of tokens
  // [r0, r0 + rows per head) against the keys of tokens [k0, k0 + n) in the staged K and V.
  virtual void band(const command& c, unsigned layer, std::uint64_t h0, std::uint64_t q, std::uint64_t r0,
                    std::uint64_t k0, bool av) = 0;
  // Latent KV (layer_ops::latent_attention): q . K^T (av false) of sequences [s0, s0 + c.batch),
  // every head, over the cached latent rows (latent and RoPE key), the queries in latent space at
  // `ql` beside q's RoPE part at `q`; or A . V, the weighted latents into `ql` (o_latent).
  virtual void latent(const command& c, unsigned layer, std::uint64_t s0, std::uint64_t q, std::uint64_t ql,
                      bool av) = 0;
  // AERP, or a banded prefill: the next DMA copies the staged new rows of K (v false) or V of
  // `layer` into their cache slots (a banded prefill: the rows of the tokens the ring keeps).
  virtual void copy_new_rows(unsigned layer, bool v) = 0;
};

}  // namespace kelle
