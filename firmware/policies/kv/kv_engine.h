// Internal to firmware/policies/kv/: the bookkeeping engine every registered policy is an
// instance of: its parameters (kv_engine_params), the keys every policy shares
// (read_common_params), make_kv_engine and the engine itself. kv_engine.cpp: setup, queries and the prefill and decode passes;
// kv_engine_groups.cpp: the stored sizes and the 2DRP high/low-score groups after a pass.
#pragma once

#include "firmware/policies/kv/kv_policy.h"
#include "models/compute/evictor/score_board.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kelle {

struct kv_engine_params {
  enum class victim_rule { min_score, oldest };  // which unprotected token a full head evicts
  enum class score_model { softmax, evictor };   // how a row of logits adds to the scores

  std::string name;
  std::uint64_t kv_budget = 0;      // N' tokens per KV head (0 = unlimited)
  // Defaults: the evictor's (score_board_config), the one source of the paper's settings.
  std::uint64_t sink_tokens = score_board_config{}.sink_tokens;      // positions < sink_tokens are never evicted
  std::uint64_t recent_window = score_board_config{}.recent_window;  // the recent_window tokens before the newest
  victim_rule victim = victim_rule::min_score;
  score_model scores = score_model::softmax;
  unsigned score_bits = score_board_config{}.score_bits;  // evictor model: register width
  double score_scale = score_board_config{}.scale;        // evictor model: logit units per level
  std::uint64_t prefill_queries = 0;  // prefill importance from the last queries only (0 = all)
  // AERP
  bool recompute = false;
  double popularity_threshold = 0.5;
  bool x_only_if_smaller = true;    // convert only if x is smaller than the K, V it replaces
  bool decide_when_full = false;    // tokens leaving the window while heads are below budget stay KV
  std::uint64_t decide_after = 0;   // eviction rounds a token faces before its popularity is judged
  kv_policy::recompute_request budget;  // policy.recompute
  // Subset mode (0 = all: exhaustive)
  unsigned exact_sequences = 0;
  unsigned exact_layers = 0;
  unsigned exact_heads = 0;
};

// Reads the keys every policy shares (kv_budget, sink_tokens, recent_window, score model, subset
// mode) into `p`, whose fields hold the policy's defaults.
// The score model's width and scale are the system's evictor's when it has one (args.evictor).
void read_common_params(const kv_policy_args& args, kv_engine_params& p, bool has_budget,
                        bool has_window);
std::unique_ptr<kv_policy> make_kv_engine(const kv_policy_args& args, const kv_engine_params& p);


class kv_engine final : public kv_policy {
  using u32 = std::uint32_t;
  using u64 = std::uint64_t;

 public:
  kv_engine(const kv_policy_args& a, const kv_engine_params& p);

  std::string name() const override { return m_p.name; }
  std::uint64_t budget() const override { return m_p.kv_budget; }
  bool recomputes() const override { return m_p.recompute; }
  bool can_store_x() const override;
  recompute_request recompute_budget() const override { return m_p.budget; }
  protection protected_tokens() const override;
  void set_recompute_limits(const recompute_limits& l) override;
  u64 tokens() const override { return m_tokens; }
  unsigned batch() const override { return m_batch; }
  unsigned layers() const override { return m_model.layers; }

  void groups_each_pass(const std::vector<bool>& layers) override;
  void update_groups() override;
  const kv_layer_report& report(unsigned s, unsigned l) const override {
    return m_state.at(s % m_exact_seq).at(m_layer_rep.at(l)).rep;
  }
  bool tracked(unsigned s, unsigned h) const override {
    return s < m_exact_seq && h < m_head_tracked.size() && m_head_tracked[h] >= 0;
  }
  std::vector<std::uint32_t> kept(unsigned s, unsigned l, unsigned h) const override;
  double score(unsigned s, unsigned l, unsigned h, u32 position) const override;
  bool stored_as_x(unsigned s, unsigned l, u32 position) const override;

  void prefill(u64 context_len) override;
  void decode() override;
  void observe() override;

 private:
  struct head_state {
    std::vector<u32> pos;       // slot -> token position (slots reused in place)
    std::vector<double> score;  // slot -> accumulated score
    median_guess median;        // where the 2DRP threshold was last (groups)
  };
  struct layer_state {
    std::vector<head_state> heads;    // tracked KV heads
    std::vector<std::uint16_t> count; // position -> tracked heads keeping it
    std::vector<std::uint8_t> x;      // position -> stored as x
    u64 x_tokens = 0;
    bool full = false;  // every head was at its budget in the last decode step
    kv_layer_report rep;
    bool groups_each_pass = true;  // compute the 2DRP groups in every pass (else when asked)
    bool groups_stale = false;     // the last pass's groups are not in rep yet
    u64 groups_n = 0;              // positions seen at the last pass
  };

  const head_state& head(unsigned s, unsigned l, unsigned h) const {
    if (!tracked(s, h)) throw std::out_of_range("kv policy: sequence/head not tracked");
    return state(s, l).heads[static_cast<unsigned>(m_head_tracked[h])];
  }
  const layer_state& state(unsigned s, unsigned l) const {
    if (l >= m_layer_tracked.size() || m_layer_tracked[l] < 0)
      throw std::out_of_range("kv policy: layer not tracked");
    return m_state.at(s).at(static_cast<unsigned>(m_layer_tracked[l]));
  }
  void check_tokens(u64 n) const;
  bool is_protected(u64 p, u64 newest) const {
    return p < m_p.sink_tokens || p + m_p.recent_window >= newest;
  }

  // Adds the attention of query `q` (every query head of KV head `kv`'s group) to acc[0..n).
  void attend(unsigned s, unsigned l, unsigned kv, u64 q, const u32* keys, std::size_t n,
              double* acc);
  // The largest finite value of x[0..n) (-infinity if none).
  static double finite_max(const double* x, std::size_t n);
  // acc[i] += x[i] / d for i < n.
  static void add_quotients(double* acc, const double* x, std::size_t n, double d);

  bool bytes_favour_x(std::uint16_t count, double min_saved) const;
  // K and V of one token in one KV head, in the KV cache's format (with its group scales); with
  // latent KV the token's latent (one cache head).
  double pair_bytes() const { return double(m_model.kv_bytes_per_token_layer()) / m_model.kv_heads; }
  bool popular(std::uint16_t count) const {
    return double(count) / double(m_heads.size()) > m_p.popularity_threshold;
  }
  void grow(layer_state& ls, u64 n) {
    if (ls.count.size() < n) {
      ls.count.resize(n, 0);
      ls.x.resize(n, 0);
    }
  }
  void maybe_convert(std::size_t li, layer_state& ls, u32 p);

  void prefill_layer(unsigned s, unsigned li, u64 T);
  void decode_layer(unsigned s, unsigned li, u32 p);
  // The second half of a decode step: the new query's scores, AERP's decision, the report.
  void score_layer(unsigned s, unsigned li, u32 p);
  // The unprotected slot to overwrite, or pos.size() when every slot is protected.
  std::size_t victim(const head_state& hs, u64 newest) const;

  // The stored state after a pass: sizes and bytes, and the 2DRP groups (now, or when asked).
  void finish(layer_state& ls, u64 n, bool);
  // The high/low-score groups of the last pass: a pair is high-score when its score is above
  // its head's median; an x token when it is high in most of the heads keeping it.
  void groups(layer_state& ls);

  kv_engine_params m_p;
  model_shape m_model;
  unsigned m_batch;
  const attention_source* m_src;
  unsigned m_group = 1, m_exact_seq = 1;
  std::vector<unsigned> m_heads;     // tracked KV heads
  std::vector<int> m_head_tracked;   // KV head -> index in m_heads or -1
  std::vector<unsigned> m_layers;    // tracked layers
  std::vector<int> m_layer_tracked;  // layer -> index in m_layers or -1
  std::vector<unsigned> m_layer_rep; // layer -> index of the tracked layer that reports for it
  double m_head_scale = 1;
  score_board m_board;
  std::vector<std::vector<layer_state>> m_state;  // [exact sequence][tracked layer]
  u64 m_tokens = 0;
  u64 m_context = 0;  // the prefill's tokens
  bool m_deferred = false;
  std::vector<u64> m_x_cap;          // tracked layer -> x tokens a sequence may hold (empty: no limit)
  std::vector<double> m_x_min_saved; // tracked layer -> K, V bytes an x token must save (empty: 0)
  std::vector<double> m_row, m_tmp;
  std::vector<std::uint16_t> m_high;
  std::vector<std::uint8_t> m_seen;
};

}  // namespace kelle
