// A scheduler decides in which order, and with how much overlap, the firmware issues one decoder
// layer's commands. It sees the layer's operations through `scheduler_ops` (the narrow interface
// below: about fifteen calls) and opens a `layer_scope` for the layer's buffers; adding one is one
// file with a KELLE_REGISTER(schedulers(), ...) line (docs/write-a-scheduler.md).
#pragma once

#include "firmware/schedulers/layer_types.h"
#include "platform/registry/registry.h"

#include <exception>
#include <string>

namespace kelle {

// The operations of a decoder layer as a scheduler issues them (layer_ops implements them: the
// weight streaming, the operand placement, the data dependencies between blocks and the
// activation lifetimes are taken care of). Every call returns once its commands are submitted;
// only wait() waits.
class scheduler_ops {
 public:
  virtual ~scheduler_ops() = default;

  // --- the layer's shape --------------------------------------------------------------------
  virtual const model_shape& model() const = 0;
  // Where layer `layer`'s weights are in DRAM (q, k, v, o, gate, up, down).
  virtual const layer_weights& weights(unsigned layer) const = 0;
  // Rows (batch x new tokens), hidden, query width (heads x head_dim) and KV width of a pass.
  virtual layer_dims dims(const pass_info& pass) const = 0;
  // The model's normalisation as an SFU opcode.
  virtual opcode norm() const = 0;

  // --- activation buffers and their lifetimes ---------------------------------------------------
  // A buffer of `bytes` from the activation arena (DRAM if it does not fit) of kind `kind` (the
  // results' lifetimes are by kind); call produced() once its producer is issued.
  virtual tensor produce(const std::string& kind, std::uint64_t bytes) = 0;
  // `t` is written by `producer`: its lifetime opens when the producer completes.
  virtual void produced(tensor& t, const ticket& producer) = 0;
  // `consumer` is `t`'s last reader: its lifetime closes (and the memory stops refreshing it) when
  // the consumer completes.
  virtual void last_use(tensor& t, const ticket& consumer) = 0;
  // Waits until the command has completed.
  virtual void wait(const ticket& t) = 0;

  // --- operations -------------------------------------------------------------------------------
  // Requests the DMA of a projection's first weight tile now (k x n weights at `w`).
  virtual tile_load prefetch(std::uint64_t w, std::uint64_t k, std::uint64_t n) = 0;
  // y = x . W, W (k x n, int8) at `w` streamed through the tile buffers (the next tile loads while
  // the array works on the current one; `first`: a tile already requested). The last GEMM's ticket.
  virtual ticket project(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                         std::uint64_t rows, tile_load first = {}) = 0;
  // An SFU operation over `rows` rows of `len` elements of `in` into `out` (`second`: the second
  // operand of add and mul).
  virtual ticket sfu(opcode op, const tensor& in, std::uint64_t rows, std::uint64_t len, const region& out,
                     const tensor* second = nullptr) = 0;
  // MM_k (v false) or MM_v: the new tokens' K or V straight into the cache (AERP: with the x
  // tokens' rows stacked). `first`: W_K's or W_V's first tile, already requested.
  virtual ticket append_kv(const tensor& xn, unsigned layer, bool v, const pass_info& pass, tile_load first = {}) = 0;
  // RoPE of the new keys (and AERP's recomputed ones); `k` is append_kv's ticket for K.
  virtual ticket rope_k(unsigned layer, const pass_info& pass, const ticket& k) = 0;
  // Scores, softmax and A . V of every head over the tokens the KV policy keeps, into `out`.
  virtual ticket attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out) = 0;
  // The first FFN projection's first tile (what a scheduler prefetches before calling ffn()).
  virtual tile_load prefetch_ffn(unsigned layer) = 0;
  // x += FFN(norm(x)); with `overlap` each next projection's first tile is requested while the
  // current one computes and nothing waits but data dependencies, else one after another.
  virtual void ffn(tensor& x, unsigned layer, std::uint64_t rows, bool overlap, tile_load first = {}) = 0;

 protected:
  friend class layer_scope;
  // The layer's buffers: opened by a layer_scope, freed when it closes.
  virtual void open_layer_buffers() = 0;
  virtual void close_layer_buffers() = 0;
};

// The prologue and epilogue every layer shares: the buffers produce() gives from here on are the
// layer's; when the scope ends, the firmware waits for the last writer of the residual stream `x`
// and frees them (the next layer reuses the arena).
class layer_scope {
 public:
  layer_scope(scheduler_ops& ops, const tensor& x) : m_ops(ops), m_x(x) { m_ops.open_layer_buffers(); }
  ~layer_scope() {
    if (std::uncaught_exceptions() == 0) m_ops.wait(m_x.producer);  // not while an error unwinds
    m_ops.close_layer_buffers();
  }
  layer_scope(const layer_scope&) = delete;
  layer_scope& operator=(const layer_scope&) = delete;

 private:
  scheduler_ops& m_ops;
  const tensor& m_x;
};

class scheduler {
 public:
  virtual ~scheduler() = default;
  // Issues decoder layer `layer` of `pass`. `x` is the residual stream (batch x rows x hidden),
  // updated in place: on return x.producer is the command that last wrote it.
  virtual void layer(scheduler_ops& ops, const pass_info& pass, unsigned layer, tensor& x) = 0;
};

using scheduler_registry = registry<scheduler>;
scheduler_registry& schedulers();

}  // namespace kelle
