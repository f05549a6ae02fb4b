// The building blocks schedulers compose (scheduler_ops, firmware/schedulers/scheduler.h): a
// decoder layer's operations as commands to the accelerator's blocks through the driver, with the
// weight streaming, the operand placement and traffic classes, the data dependencies between
// blocks and the activation lifetimes taken care of. A scheduler decides only the order and the
// overlap (docs/firmware.md); the workload, sampled decode and functional mode use the rest.
// layer_ops.cpp holds the weights, the SFU and the FFN; layer_kv.cpp the KV slots, the cache's
// writes and AERP's x store; layer_lifetimes.cpp the activation buffers and their lifetimes;
// layer_arena.cpp the arena recorder; layer_attention.cpp the attention and victim selection;
// layer_latent.cpp latent attention; layer_moe.cpp a mixture-of-experts FFN.
#pragma once

#include "firmware/functional/hooks.h"
#include "firmware/schedulers/scheduler.h"
#include "platform/stats/stats.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace kelle {

class refresh_control;
class lifetime_rule;
class expert_routing;

// One activation buffer's life (the timeline draws those of one layer: record_lifetimes()).
struct lifetime_record {
  std::string kind;
  sc_core::sc_time start, end;
  bool open = true;
};

// The activation buffers' lifetimes by kind, counted as each buffer closes: its count and total
// time as counters of the workload's statistics (`lifetime_<kind>_count`, `lifetime_<kind>_s`,
// which sampled decode extrapolates), the longest as a figure of the simulated buffers.
struct lifetime_kind {
  std::string name;
  stat* count;
  stat* total_s;
  double max_s = 0;
};

class layer_ops final : public scheduler_ops {
 public:
  // Counters go into `stats` (the workload's statistics).
  layer_ops(driver& drv, memory_plan& plan, const model_shape& m, platform_view& p, stat_group& stats);

  // --- what a scheduler calls (scheduler_ops) --------------------------------------------------
  const model_shape& model() const override { return m_model; }
  const layer_weights& weights(unsigned layer) const override { return m_plan.weights(layer); }
  layer_dims dims(const pass_info& p) const override {
    return {std::uint64_t(p.batch) * p.rows, m_model.hidden, std::uint64_t(m_model.heads) * m_model.head_dim,
            m_model.kv_half_width()};
  }
  opcode norm() const override { return m_model.norm == norm_kind::rmsnorm ? opcode::rmsnorm : opcode::layernorm; }
  tensor produce(const std::string& kind, std::uint64_t bytes) override;
  void produced(tensor& t, const ticket& producer) override;
  void last_use(tensor& t, const ticket& consumer) override;
  void wait(const ticket& t) override { m_drv.wait(t); }
  tile_load prefetch(std::uint64_t w, std::uint64_t k, std::uint64_t n) override;
  ticket project(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                 std::uint64_t rows, tile_load first = {}) override;
  ticket sfu(opcode op, const tensor& in, std::uint64_t rows, std::uint64_t len, const region& out,
             const tensor* second = nullptr) override {
    return sfu_as(traffic_class::activations, op, in, rows, len, out, second);
  }
  // MM_k or MM_v: projects xn with W_K or W_V straight into the cache slots of the new tokens.
  // With AERP (pass.recompute_rows(layer) > 0, a decode step) the x vectors of the layer's x tokens
  // are stacked under xn (command.extra rows, read from where x is stored), the results go to a
  // staging buffer (new rows, then recomputed rows) that the attention reads, and the new rows
  // are copied into the cache slots once the attention has been issued.
  ticket append_kv(const tensor& xn, unsigned layer, bool v, const pass_info& pass, tile_load first = {}) override;
  // RoPE of the new tokens' K where MM_k put it, and of the recomputed keys at their positions.
  ticket rope_k(unsigned layer, const pass_info& pass, const ticket& k) override;
  // Scores, softmax and A . V for every sequence and head, in groups of KV heads whose scores
  // fit the activation arena. `q` is (batch x rows) x (heads x head_dim); the result goes to `out`.
  ticket attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out) override;
  tile_load prefetch_ffn(unsigned layer) override;
  void ffn(tensor& x, unsigned layer, std::uint64_t rows, bool overlap, tile_load first = {}) override;

  // --- what the workload and its parts use ------------------------------------------------------
  // An SFU operation whose `in` and `out` are traffic of class `kind` (RoPE of the keys in the
  // cache: kv) and `second` activations. Without `second` the SFU reads its b operand (RoPE's
  // sin/cos table, the norm's weights) from where `in` is: traffic of class `kind` there.
  ticket sfu_as(traffic_class kind, opcode op, const tensor& in, std::uint64_t rows, std::uint64_t len,
                const region& out, const tensor* second = nullptr);
  // Columns per weight tile of a k x n projection (weights stored tile-major in DRAM).
  std::uint64_t tile_cols(std::uint64_t k, std::uint64_t n) const;
  // The rule: as many whole column folds of an array of `cols` columns as fit a tile buffer of
  // `buffer` bytes (at least one column), at most n. Also the first-order estimate's.
  static std::uint64_t tile_cols(std::uint64_t buffer, unsigned cols, std::uint64_t k, std::uint64_t n);
  // The attention's two products as the array sees them (no addresses): q . K^T of `heads`
  // (sequence, KV head) pairs, `rows` query rows each against `tokens` keys of `head_dim`; A . V
  // of those scores with `tokens` values. Also the first-order estimate's.
  static command qk_shape(std::uint64_t head_dim, std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens);
  static command av_shape(std::uint64_t head_dim, std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens);
  // Latent attention's weighted sum: `seqs` products of `rows` score rows times n latents' first
  // kv_lora_rank elements (operand b the cache, in its format). Fused (model_shape::latent_fused,
  // the default) the latents are those the scores just read, held in the array's operand buffer
  // (flag_b_held): it moves no KV bytes. The first-order estimate issues the same command.
  static command latent_av_command(const model_shape& m, std::uint64_t seqs, std::uint64_t rows, std::uint64_t n);
  // The rule of score_heads(): KV heads per group of the attention so that the group's two
  // score buffers of `bytes_per_head` each fit `arena_free` bytes, down to one head.
  static std::uint64_t score_heads(std::uint64_t kv_heads, std::uint64_t bytes_per_head, std::uint64_t arena_free);
  // Where the new tokens' K or V go in the cache.
  region kv_slot(unsigned layer, bool v, const pass_info& pass) const;
  // Issues what the pass's layers left pending (AERP: the copies of the new rows into the cache).
  // The workload calls it once the pass's last layer has been issued.
  void finish_pass();
  // AERP: where the layer's x vectors are stored (`rows` of them, hidden x 2 B each): in the slots
  // of the layer's cache (its DRAM part for a partly placed layer).
  region x_store(unsigned layer, std::uint64_t rows) const;
  // Whether `rows` x vectors fit the layer's K and V allocation (else x_store is in DRAM).
  bool x_store_in_slots(unsigned layer, std::uint64_t rows) const;
  // Whether `layer` keeps some token slots on chip (placement `fill`).
  bool chip_slots(unsigned layer) const;
  // The refresh policy's lifetime rule for the activation buffers (null: the array's own interval).
  void set_transient_refresh(lifetime_rule* r) { m_transient = r; }
  // Mixture of experts: which experts each pass's tokens route to (set for a MoE model).
  void set_routing(expert_routing* r) { m_routing = r; }
  // Sampled decode: told when a decode layer's routed experts but the first (which makes the
  // layer's output buffer) begin to stream (how many) and when the last has been issued, so the
  // sampler can fit what an expert costs and extrapolate layers and steps that route to more or
  // fewer (docs/firmware.md, "Sampled decode").
  struct expert_probe {
    virtual void routed_begin(std::size_t experts) = 0;
    virtual void routed_end() = 0;

   protected:
    ~expert_probe() = default;
  };
  void set_expert_probe(expert_probe* p) { m_probe = p; }
  // The pass whose layers are issued next (its routing: ffn() of a MoE layer asks for its experts).
  void begin_pass(const pass_info& pass) { m_pass_index = pass.prefill ? 0 : pass.step; m_pass_prefill = pass.prefill; }
  // Distinct routed experts streamed per MoE layer pass, on average (decode steps, or the
  // prefill); 0 when none ran.
  double experts_per_layer_pass(bool prefill) const {
    const int i = prefill ? 1 : 0;
    return m_moe_layers[i] && m_moe_layers[i]->value() > 0 ? m_moe_experts[i]->value() / m_moe_layers[i]->value() : 0.0;
  }
  // Functional mode: told about every command before it is submitted (nullptr: timing only).
  void set_functional(functional_hooks* f) { m_fn = f; }
  memory_plan& plan() { return m_plan; }
  // KV bytes the projections wrote into the cache (wherever it lives).
  double kv_bytes_written() const { return m_kv_written.value(); }
  // The lifetimes by kind, in order of first appearance.
  const std::vector<lifetime_kind>& lifetimes() const { return m_life_kinds; }
  // The buffers alive now (their lifetime slots), and how many of those are still alive, by kind
  // (as lifetimes()): the buffers alive across a stretch of the run.
  using alive_set = std::vector<std::pair<std::size_t, std::uint32_t>>;
  void alive(alive_set& out) const;
  void still_alive(const alive_set& then, std::vector<unsigned>& by_kind) const;
  // While `to` is set, each buffer produced is also recorded there (its record closed when the
  // buffer dies): the timeline's lifetimes of one layer. nullptr: none recorded.
  void record_lifetimes(std::vector<lifetime_record>* to) { m_records = to; }

  // --- where a decode pass's buffers land (sampled decode's regimes) --------------------------
  // The workload brackets each layer of a pass when it samples decode: a decode layer's arena
  // events are recorded.
  void begin_layer(const pass_info& pass, unsigned layer);
  void end_layer();
  // Where a decode pass's activation buffers would land at `layer`, as a hash: the layer's
  // arena events of its last decode pass replayed with the sizes `pass` requests (the score
  // buffers grow with the tokens attended and the KV heads per group follow the arena; AERP's
  // staging grows with the recomputed rows and exists only while the layer recomputes, the
  // victims' slot indices only while it evicts; the log holds their places either way): which
  // buffers fit the arena, which spill to DRAM, and the attention's heads per group. 0: the layer
  // has not run a decode pass yet (a layer that sampled layers skip keeps the log of its last
  // simulated pass).
  std::uint64_t placement(const pass_info& pass, unsigned layer) const;
  // Whether the replay of the layer's log with the pass it was recorded in gives every buffer the
  // size and the place it got (true when the log is of another pass): a check of placement().
  bool replays_as_run(const pass_info& pass, unsigned layer) const;

 private:
  void open_layer_buffers() override { m_scope_marks.push_back(m_plan.mark()); }
  void close_layer_buffers() override {
    m_plan.release(m_scope_marks.back());
    m_scope_marks.pop_back();
  }
  std::vector<memory_plan::arena_mark> m_scope_marks;  // the open layer scopes' arena marks
  // Waits for `t`'s producer unless it runs on `block` (blocks keep their commands in order).
  void depend(const tensor& t, const compute_block* block);
  // KV heads per group of the attention: the group's two score buffers (ping-pong) must fit the
  // arena's `arena_free` bytes, down to one head (a buffer that does not fit is in DRAM).
  std::uint64_t score_heads(const pass_info& pass, unsigned layer, std::uint64_t arena_free) const;
  // Bytes of one score buffer of a group of `heads` KV heads (every sequence, query row and key).
  // With latent KV the groups are of sequences, each with every head (they share its latents,
  // read once a group): `heads` counts sequences.
  std::uint64_t score_bytes(const pass_info& pass, unsigned layer, std::uint64_t heads) const {
    if (m_model.latent_kv()) return heads * m_model.heads * pass.rows * pass.attended(layer) * model_shape::act_bytes;
    return std::uint64_t(pass.batch) * heads * (m_model.heads / m_model.kv_heads) * pass.rows * pass.attended(layer) *
           model_shape::act_bytes;
  }
  // Bytes of the victims' slot indices of an evicting layer: one 32-bit index per cache head.
  std::uint64_t victims_bytes(const pass_info& pass) const { return std::uint64_t(pass.batch) * m_model.cache_heads() * 4; }
  // Bytes of one of AERP's staging buffers (K or V of the new rows, then the recomputed ones).
  std::uint64_t staging_bytes(const pass_info& pass, unsigned layer) const {
    return (std::uint64_t(pass.batch) * pass.rows + (pass.prefill ? 0 : pass.recompute_rows(layer))) *
           m_model.kv_heads * m_model.head_dim * model_shape::act_bytes;
  }
  tile_load load_tile(std::uint64_t src, std::uint64_t bytes);
  ticket project_rows(const tensor& x, std::uint64_t w, std::uint64_t k, std::uint64_t n, const region& y,
                      std::uint64_t rows, tile_load first, traffic_class y_kind, std::uint64_t extra,
                      const region& stacked);
  // A part of the tokens a head attends to, read by its own q . K^T and A . V commands.
  struct kv_part {
    region k, v;               // where the part's keys and values are
    std::uint64_t first, n;    // its first token (column of the score rows) and token count
    std::uint64_t offset;      // bytes before the part's first token in the region
    std::uint64_t head_bytes;  // bytes of K (or V) between consecutive KV heads' data
    std::uint64_t row;         // bytes of one token's K (or V) of one head (the KV format's in the cache)
    traffic_class kind;        // its traffic class
  };
  // The prefill's band attention of a windowed layer whose context is longer than its window
  // (pass_info::banded): in blocks of W query rows, each against the 2W - 1 keys its rows' windows
  // span, from the staging buffer append_kv filled.
  ticket banded_attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out);
  // Latent KV (multi-head latent attention), absorbed: each head's query taken into latent space
  // (q_nope x W_uk), scores over the cached latents and RoPE keys, softmax, the weighted sum of
  // the latents, each head's W_uv; the heads share the cache (groups of heads whose scores fit).
  ticket latent_attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out);
  // With latent KV, W_O's rows are heads x v_head_dim, not the query width a scheduler passes as
  // its k: the rows of the projection whose weights are at `w` (`k` unless `w` is a layer's W_O).
  std::uint64_t rows_of(std::uint64_t w, std::uint64_t k) const;
  std::vector<std::uint64_t> m_o_weights;  // latent KV: every layer's W_O address, ascending
  ticket m_latent_v;                        // latent KV: the last MM_v (the RoPE key's producer)
  void parts_attention(const tensor& q, const pass_info& pass, unsigned layer, const region& out, tensor& s,
                       std::uint64_t h0, std::uint64_t h, const std::vector<kv_part>& parts, bool select);
  // A mixture-of-experts FFN (ffn() of a MoE layer): the router's logits, softmax and top-k
  // search on the SFU, then each expert the routing gives (the shared ones on every row, the
  // routed ones on their tokens) streamed once and run as a dense FFN on its rows, its output
  // weighted and added into the layer's output; the next expert's first tile loads while the
  // current one computes (with `overlap`).
  void moe_ffn(tensor& x, unsigned layer, std::uint64_t rows, bool overlap, tile_load first);
  expert_routing* m_routing = nullptr;
  expert_probe* m_probe = nullptr;
  unsigned m_pass_index = 0;
  bool m_pass_prefill = false;
  stat* m_moe_experts[2] = {nullptr, nullptr};  // distinct routed experts streamed: decode, prefill
  stat* m_moe_layers[2] = {nullptr, nullptr};   // MoE layer passes they were counted over
  // KV streaming: a part in DRAM is read through the two KV stream buffers on the KV memory
  // (memory_plan::kv_stream_buffer), in chunks of (sequence, head) pairs x tokens that fit one
  // buffer; the DMA copies chunk i + 1 while the RSA works on chunk i, as the weight tiles stream.
  struct stream_job {
    std::uint64_t src;              // the part's data of the group's first pair (DRAM address)
    std::uint64_t limit;            // end of the region (chunks are clamped into it)
    std::uint64_t pairs, tokens;    // (sequence, KV head) pairs, tokens per pair
    traffic_class kind;
  };
  struct stream_chunk {
    std::uint64_t p0, np, t0, nt;  // pairs [p0, p0 + np), tokens [t0, t0 + nt) of the part
    std::uint64_t addr;            // where the chunk is in the stream buffer
  };
  struct stream_load {
    ticket dma;
    unsigned buffer = 0;
    std::uint64_t src = 0;  // the job it belongs to (a prefetched first chunk)
  };
  bool streamed(const region& r) const { return !m_fn && !r.on_chip && m_plan.kv_stream_bytes() > 0; }
  // Issues `issue(chunk)` for every chunk of `job`, each once its data is in a stream buffer;
  // with `next`, the first chunk of that job is requested after this one's last. Returns the
  // last command's ticket.
  template <typename Issue>
  ticket stream(const stream_job& job, Issue issue, const stream_job* next = nullptr);
  // The attention's two products (layer_attention.cpp): q . K^T of `heads` (sequence, KV head)
  // pairs, `rows` query rows each against `tokens` keys, into score rows; A . V of those scores
  // with `tokens` values. Addresses are the operands' (a, b, c).
  // K and V are of traffic class `kv` (the cache's, or activations for AERP's staging).
  command qk_command(std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens, std::uint64_t q, std::uint64_t k,
                     std::uint64_t scores, traffic_class kv) const;
  command av_command(std::uint64_t heads, std::uint64_t rows, std::uint64_t tokens, std::uint64_t scores,
                     std::uint64_t v, std::uint64_t out, traffic_class kv) const;
  stream_load load_chunk(const stream_job& job, const stream_chunk& c);
  stream_chunk chunk_at(const stream_job& job, std::uint64_t i) const;
  std::uint64_t chunk_count(const stream_job& job) const;
  unsigned m_next_stream = 0;
  std::array<ticket, 2> m_stream_user;  // the last command that read each stream buffer
  stream_load m_stream_ahead;           // a job's first chunk, requested ahead
  refresh_control* m_stream_edram = nullptr;  // the stream buffers' refresh, if their memory has one
  std::uint64_t m_stream_local[2] = {0, 0};  // their addresses local to it
  // Issues the AERP staging's pending copies of the new rows into the cache (after the attention).
  void copy_new_rows();

  driver& m_drv;
  memory_plan& m_plan;
  const model_shape& m_model;
  platform_view& m_platform;
  unsigned m_next_buffer = 0;
  std::array<ticket, 2> m_buffer_user;  // the last GEMM that read each tile buffer
  // Latent KV: the attention's own W_kv_b projections run between a scheduler's prefetch of W_O's
  // first tile and MM_O. A buffer holding a prefetched tile not yet consumed is pending: loads
  // take the other buffer while it is (one buffer, no overlap, rather than fetching the tile twice).
  // m_buffer_src: the DRAM address of the tile each buffer was last loaded with; a prefetched
  // first tile overwritten all the same (both pending) is loaded again.
  std::array<bool, 2> m_buffer_pending{{false, false}};
  std::array<std::uint64_t, 2> m_buffer_src{{~std::uint64_t(0), ~std::uint64_t(0)}};
  // How an activation buffer's size depends on the pass (placement() recomputes it).
  enum class size_rule : std::uint8_t { fixed, scores_first, scores_second, staging, victims };
  tensor produce(const std::string& kind, std::uint64_t bytes, size_rule rule);
  // Records, in a decode layer's arena log, a buffer of `rule` that this pass does not allocate
  // (AERP's staging of a layer that does not recompute, the victims of one that does not evict):
  // the replay of a pass that does allocate it puts it there.
  void absent(size_rule rule);
  // The size a buffer of `rule` would have in `pass` (`logged`: its size in the recorded pass;
  // `arena_free`: the arena's free bytes where it is asked for; `heads`: the attention's KV heads
  // per group, set by the first score buffer).
  std::uint64_t size_in(size_rule rule, std::uint64_t logged, const pass_info& pass, unsigned layer,
                        std::uint64_t arena_free, std::uint64_t& heads) const;
  // placement()'s prediction; clears `*as_run` where a buffer's size or place differs from the log's.
  std::uint64_t predict(const pass_info& pass, unsigned layer, bool* as_run) const;
  // Per layer: the arena's log of its last decode pass (placement()), the size rule of each of its
  // allocations in order, and that pass's step.
  std::vector<activation_arena::log> m_arena_log;
  std::vector<std::vector<size_rule>> m_arena_rules;
  std::vector<unsigned> m_arena_log_step;
  unsigned m_recording = ~0u;  // the layer whose arena log is being recorded
  // Lifetimes: counters by kind, and the buffers whose lifetime is open (slots reused).
  stat_group& m_stats;
  stat& m_kv_written;
  std::vector<lifetime_kind> m_life_kinds;
  struct open_life {
    unsigned kind = 0;
    sc_core::sc_time start;
    int record = -1;        // index in *m_records, or -1
    std::uint32_t gen = 0;  // bumped when the slot is taken and when it dies: a stale close is ignored
  };
  std::vector<open_life> m_open;  // a slot's buffer is alive while its gen is odd
  std::vector<int> m_free_open;
  std::vector<lifetime_record>* m_records = nullptr;
  unsigned kind_index(const std::string& kind);
  lifetime_rule* m_transient = nullptr;
  functional_hooks* m_fn = nullptr;
  driver::target* m_rsa = nullptr;      // the blocks, resolved once
  driver::target* m_sfu = nullptr;
  driver::target* m_evictor = nullptr;  // the systolic evictor, if the system has one
  tensor m_victims;                    // the layer's victim slot indices
  // Victim selection of an evicting layer after its attention's commands (see pass_info::victims).
  void select_victims(const pass_info& pass, std::uint64_t n);
  void search_min(const tensor& scores, const pass_info& pass, std::uint64_t h0, std::uint64_t h, std::uint64_t n);
  // AERP staging of the layer being computed: K and V of the new tokens then the recomputed ones.
  struct staging {
    unsigned layer = ~0u;
    std::uint64_t rows = 0, stacked = 0;  // new rows (batch x tokens), recomputed rows
    tensor buf[2];                        // K, V
    region slot[2];                       // the new rows' cache slots
    std::uint64_t from[2] = {0, 0};       // bytes of the buffer before the rows copied there
    ticket ready[2];                      // K after its RoPE, V after MM_v
    bool copy_pending[2] = {false, false};
  } m_stage;
};

}  // namespace kelle
