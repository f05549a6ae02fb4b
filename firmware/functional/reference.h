// The golden model of functional mode: the same Llama-style decoder in plain C++, no platform,
// no faults, fp32 arithmetic on the same int8-quantised weights (dequantised: q x scale), one
// token at a time with a full KV cache, or attending only to the tokens a caller says a head
// keeps (to compare with a KV policy that evicts). A sliding-window layer attends only to the
// last W positions (llama_config::window). Latent KV (MLA) is computed the plain way: every
// key's latent expanded into each head's key and value (the platform runs it absorbed).
// docs/functional.md.
#pragma once

#include "firmware/functional/llama_model.h"
#include "models/compute/kv_format/kv_format.h"

#include <functional>
#include <memory>
#include <vector>

namespace kelle::fn {

// An out x in int8 matrix as the reference multiplies it: the weights as floats (exact), blocks
// of `block` output rows interleaved by input (row o0 + j's weight of input i at
// w[o0 * in + i * block + j], the last block padded with zero rows), so that matvec reads each
// block's weights contiguously and keeps one accumulator per output row.
struct packed_matrix {
  static constexpr unsigned block = 16;
  unsigned out = 0, in = 0;
  std::vector<float> w, scale;
};
packed_matrix pack(const qmatrix& m);
// The model's matrices packed (built once per model; the references of a run share it).
struct packed_model {
  struct layer {
    packed_matrix wq, wk, wv, wo, gate, up, down;
  };
  std::vector<layer> layers;
  packed_matrix classifier;
};
std::shared_ptr<const packed_model> pack(const quantised_model& m);

// x . W^T for an out x in int8 matrix: y[o] = scale[o] x sum_i q[o][i] x[i] (fp32, summed in
// the order of i).
void matvec(const packed_matrix& w, const float* x, float* y);
void rmsnorm(const float* x, const std::vector<float>& gamma, float eps, unsigned n, float* out);
// Rotates the (even, odd) pairs of one head vector of `hd` elements to position `pos`.
void rope(float* v, unsigned hd, std::uint64_t pos, float theta);

class reference_model {
 public:
  explicit reference_model(const quantised_model& m);
  // With the model's packed matrices (pack(m)), shared by the references of a run.
  reference_model(const quantised_model& m, std::shared_ptr<const packed_model> packed);

  // The positions head (layer, kv_head) attends to for the token now at `pos` (ascending, all
  // <= pos), or nullptr for every position so far.
  using kept_fn = std::function<const std::vector<std::uint32_t>*(unsigned layer, unsigned kv_head)>;

  // Sees each query head's pre-softmax attention logits (q . k / sqrt(head_dim)) of the token
  // now at `pos`, over the positions it attends (`keys`, ascending), as step() computes them.
  using logit_observer = std::function<void(unsigned layer, unsigned head, std::uint64_t pos,
                                            const std::vector<std::uint32_t>& keys, const float* logits)>;
  void observe_logits(logit_observer f) { m_observer = std::move(f); }

  // Feeds `token` at the next position; returns its logits (vocab).
  std::vector<float> step(int token, const kept_fn& kept = {});
  // A KV format that quantises (int8, int4, ...): a step given a kept set (a decode step) attends
  // to the kept keys and values as the platform's cache stores them: rounded to binary16,
  // quantised (a grouped format with KIVI's groups over the kept positions: keys per channel, G
  // consecutive positions; values per token, G consecutive channels) and dequantised. Steps
  // without a kept set (the prefill, which attends to the K and V it computed, as KIVI's) use
  // them as computed. Other formats: unquantised.
  void set_kv_format(const kv_format& f) { m_fmt = f; }
  std::uint64_t position() const { return m_pos; }
  // The cached K or V of (layer, kv head, position), after RoPE (K): head_dim values.
  const float* k(unsigned layer, unsigned kvh, std::uint64_t pos) const;
  const float* v(unsigned layer, unsigned kvh, std::uint64_t pos) const;

 private:
  const quantised_model& m_m;
  std::shared_ptr<const packed_model> m_p;
  std::uint64_t m_pos = 0;
  std::vector<std::vector<float>> m_k, m_v;  // per layer: position x kv_dim
  kv_format m_fmt;
  std::vector<float> m_kq, m_vq;  // the kept keys' and values' dequantised rows (formats that quantise)
  std::vector<const float*> m_krows, m_vrows;  // scratch: the rows a head's attention reads
  // quantise_kept's results, per (layer, kv head): each key group's dequantised rows for the
  // kept positions `keys` it last had; each position's dequantised value row (keys[pos] != 0: done)
  // and, for a format without groups, its key row too.
  struct quantised_group {
    std::vector<std::uint32_t> keys;
    std::vector<float> rows;
  };
  std::vector<std::vector<quantised_group>> m_kgroups;
  std::vector<quantised_group> m_vrow, m_krow;
  // Fills m_kq and m_vq with the dequantised K and V rows of `keys` in (layer, kv head).
  void quantise_kept(unsigned layer, unsigned kvh, const std::vector<std::uint32_t>& keys);
  // Latent KV: layer `layer`'s attention of the token at `pos` (normed input xn) into att
  // (heads x v_head_dim); caches the token's latent row (latent, RoPE key) in m_k.
  void latent_attention(unsigned layer, std::uint64_t pos, const float* xn, float* att, const kept_fn& kept);
  logit_observer m_observer;
};

// Quality of the platform's logits against the reference (docs/functional.md, "Metrics").
struct quality_metrics {
  double max_abs_logit_error = 0;
  double sum_kl = 0;           // KL(reference || platform) of the softmax distributions, summed
  unsigned rows = 0, top1_agree = 0;
  double max_abs_logit = 0;    // of the reference, for scale
  unsigned nonfinite = 0;      // platform logits that are NaN or inf
  double nll = 0;              // teacher-forced: -log p_platform(next token), summed
  double ref_nll = 0;
  unsigned nll_count = 0;

  // Adds one row of logits; `next` >= 0 is the token that follows (for perplexity).
  void add(const std::vector<float>& platform, const std::vector<float>& reference, int next = -1);
  double kl_divergence() const { return rows ? sum_kl / rows : 0.0; }
  double top1_agreement() const { return rows ? double(top1_agree) / rows : 1.0; }
};

// log-softmax of a row; NaN counts as -inf; a row of only non-finite values is uniform.
std::vector<double> log_softmax(const std::vector<float>& logits);
// The index of the largest finite value (the greedy choice); NaN never wins.
int argmax(const std::vector<float>& logits);

}  // namespace kelle::fn
