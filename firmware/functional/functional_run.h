// Functional mode of the llm workload (`mode: functional`, docs/functional.md): the platform
// carries real data. This object
//   - holds the model (a weights file, or seeded weights of the workload's shape), writes its
//     int8 weights, their scales, the norm weights and the embedding table into DRAM before the
//     run (debug transport);
//   - is the compute blocks' functional unit (through the engine) and the memory port the engine
//     reads and writes through (the interconnect's debug transport), where retention faults or a
//     fixed bit-error rate corrupt KV data read from the eDRAM;
//   - describes each command's operands as layer_ops issues it (functional_hooks);
//   - writes each pass's token embeddings, reads the logits, picks the next tokens (greedy, or
//     the text's tokens), runs the reference model on the same tokens and kept sets and keeps the
//     quality metrics;
//   - records the attention probabilities the SFU computed: the `functional` attention source;
//   - with AERP, keeps every token's normed input x (captured as MM_k reads it) and describes the
//     recomputation of the x tokens' K and V (stacked rows), their RoPE and their attention from
//     the staging buffers, and checks the recomputed rows against the cache bit for bit.
// Its member functions by concern: functional_run.cpp (configuration, wiring, passes),
// functional_memory.cpp (memory port, the model in memory), functional_faults.cpp,
// functional_slots.cpp, functional_operands.cpp, functional_aerp.cpp, functional_results.cpp,
// functional_source.cpp (the attention source).
#pragma once

#include "firmware/driver/driver.h"
#include "firmware/functional/hooks.h"
#include "firmware/functional/llama_model.h"
#include "firmware/functional/reference.h"
#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/refresh_policy.h"
#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/memory_plan.h"
#include "models/compute/functional/engine.h"
#include "platform/support/divider.h"
#include "platform/tlm/at_initiator.h"

#include <nlohmann/json.hpp>

#include <array>
#include <memory>
#include <unordered_map>

namespace kelle {

class refresh_control;

class functional_run : public functional_hooks, public fn::memory_port {
 public:
  // `root` is the scenario's top level (the `functional` section), `wl` the workload section.
  functional_run(const config_node& root, const config_node& wl, const model_shape& shape, unsigned batch,
                 std::uint64_t context, std::uint64_t decode, std::uint64_t seed, platform_view& p);
  ~functional_run() override;

  // Set once the rest of the firmware exists (before the simulation starts).
  void connect(driver& d, memory_plan& plan, layer_ops& ops, kv_policy* policy, const refresh_policy* refresh);
  // The `functional` attention source (the SFU's probabilities); owned by the caller. From then
  // on each pass records its probabilities (only the last pass's are kept: the policy reads
  // them once the pass is done).
  std::unique_ptr<attention_source> make_source();

  // Pass hooks (llm_workload): after the embedding DMA is issued into `x`; after the pass.
  void begin_pass(const pass_info& p, const tensor& x);
  void end_pass(const pass_info& p, std::uint64_t logits_addr);
  void add_results(nlohmann::json& r) const;
  std::string report() const;

  // functional_hooks
  void gemm(const command& g, std::uint64_t w, std::uint64_t col0) override;
  void sfu(const command& c, const region& in) override;
  void scores(const command& qk, unsigned layer, std::uint64_t h0, std::uint64_t q, std::uint64_t first,
              std::uint64_t total) override;
  void context(const command& av, unsigned layer, std::uint64_t h0, std::uint64_t out, std::uint64_t first,
               std::uint64_t total) override;
  void band(const command& c, unsigned layer, std::uint64_t h0, std::uint64_t q, std::uint64_t r0, std::uint64_t k0,
            bool av) override;
  void copy_new_rows(unsigned layer, bool v) override;
  void latent(const command& c, unsigned layer, std::uint64_t s0, std::uint64_t q, std::uint64_t ql, bool av) override;
  // memory_port
  void read(std::uint64_t addr, void* dst, std::uint64_t len) override;
  void write(std::uint64_t addr, const void* src, std::uint64_t len) override;

  const fn::quantised_model& model() const { return m_q; }
  const std::vector<std::vector<int>>& tokens() const { return m_tokens; }
  // Probabilities the platform computed for query `query` of (sequence, layer, query head):
  // (key position, probability), ascending positions; nullptr if none.
  const std::vector<std::pair<std::uint32_t, float>>* probabilities(unsigned seq, unsigned layer, unsigned head,
                                                                   std::uint64_t query) const;

 private:
  struct weight_info {
    std::uint64_t scales;  // DRAM address of the fp32 scales
    int layer;             // -1: LM head
    char kind;             // q k v o g u d h; latent KV: K (W_uk of a head), U (W_uv of a head)
    unsigned head = 0;     // K, U: the head
  };
  struct head_slots {
    std::vector<std::int64_t> slot_pos;   // slot -> position (-1: free)
    std::vector<std::uint32_t> kept;      // positions attended now, ascending
    std::unordered_map<std::uint32_t, std::uint32_t> pos_slot;
    std::uint32_t next_slot = 0;
    std::vector<double> score;            // position -> accumulated probability (2DRP groups)
    double threshold = 0;                 // high-score group: score > threshold (the median)
  };
  struct kv_elem {
    double written = 0;
    std::uint32_t generation = 0;
  };
  struct attn_ctx {
    unsigned layer = 0;
    std::uint64_t h0 = 0;
    // A banded prefill's block (band()): query tokens [r0, r0 + rows), keys from token k0.
    bool band = false;
    std::uint64_t r0 = 0, k0 = 0, rows = 0;
    // Latent KV (latent()): sequences from s0, every head.
    bool latent = false;
    std::uint64_t s0 = 0;
  };

  static std::uint64_t align(std::uint64_t v, std::uint64_t a = 4096) { return (v + a - 1) / a * a; }
  static constexpr const char* group_names[4] = {"hst_msb", "hst_lsb", "lst_msb", "lst_lsb"};

  void configure_faults(const config_node& f);  // functional.faults (construction)
  std::unique_ptr<config_node> m_policy_cfg;     // the scenario's policy section (errors found at connect)
  void connect_faults(const memory_plan& plan);  // the on-chip KV layers the faults corrupt
  void load();  // writes the model into memory (first pass)
  void debug(tlm::tlm_command cmd, std::uint64_t addr, unsigned char* p, std::uint64_t len);
  void write_matrix(std::uint64_t addr, const fn::qmatrix& m, std::uint64_t scales_addr, int layer, char kind,
                    unsigned head = 0);
  head_slots& hs(unsigned l, unsigned b, unsigned kvh) { return m_slots[(std::size_t(l) * m_batch + b) * m_kvh + kvh]; }
  const head_slots& hs(unsigned l, unsigned b, unsigned kvh) const {
    return m_slots[(std::size_t(l) * m_batch + b) * m_kvh + kvh];
  }
  std::uint64_t kv_addr(unsigned l, bool v, std::uint64_t slot, unsigned b, unsigned kvh) const;
  // Where functional mode keeps layer l's K (or V) values: the plan's region, or with a KV format
  // that quantises (whose region is sized in the format's bytes) a region of binary16 values in DRAM
  // that the reads quantise (functional_quantised.cpp).
  const region& kv_region(unsigned l, bool v) const { return v ? m_kv_data[l][1] : m_kv_data[l][0]; }
  // The row of a K or V region's layout ([slot][sequence][KV head][head_dim] elements) that byte
  // address `a` falls in, and the address where that row ends.
  struct kv_row {
    std::uint64_t slot, end;
    unsigned seq, kvh;
  };
  kv_row row_at(const region& r, std::uint64_t a) const {
    const std::uint64_t row = m_hd_div.div((a - r.addr) / 2), head_row = m_kvh_div.div(row);
    return {m_batch_div.div(head_row), r.addr + (row + 1) * m_hd * 2, unsigned(m_batch_div.mod(head_row)),
            unsigned(m_kvh_div.mod(row))};
  }
  void connect_quantised(memory_plan& plan);
  // A KV format that quantises (int8, int4, FP8): the KV values read in [addr, addr + len) as
  // the cache stores them (the format's codes, dequantised), with the faults in the stored codes.
  void read_quantised(std::uint64_t addr, unsigned char* data, std::uint64_t len);
  // The scale and zero point of each channel of key group j (positions [jG, jG + G)) of a head.
  const std::vector<kv_format::group_params>& key_group(unsigned l, unsigned b, unsigned kvh, std::uint64_t j);
  // flip()'s last (exposure, failure probability) per (high-score group, bit); zero-initialised,
  // which is right as it stands: no cell has failed after no exposure.
  std::array<std::array<std::pair<double, double>, 16>, 2> m_fail_cache{};
  double m_fail_cache_C = -1e300;  // the temperature m_fail_cache holds probabilities for
  // Flips the faulty bits of a stored word of `bits` bits (a 16-bit format's word or an integer
  // code) of element `elem` of on-chip layer l's K (v = 0) or V; counts them by group.
  std::uint32_t flip(std::uint32_t word, unsigned bits, unsigned l, int v, std::uint64_t elem, bool high,
                     double now);
  // flip() with a fixed bit-error rate: each bit's draw is made once per write of its word.
  std::uint32_t flip_ber(std::uint32_t word, unsigned bits, unsigned l, int v, std::uint64_t elem, bool high);
  // The bits of the element's stored word whose draw for its write `generation` is below the
  // bit-error rate (of the halves the faults' groups can select); ber_flips: of the present
  // write's (m_ber_mask), the bits the faults' groups hit now (counted as flipped, not as read).
  std::uint16_t ber_draw(unsigned l, int v, std::uint64_t elem, std::uint32_t generation) const;
  std::uint32_t ber_flips(unsigned bits, unsigned l, int v, std::uint64_t elem, bool high);
  // A cell's uniform draw (its retention time's quantile, or the seed of its bit errors), a pure
  // function of the fault seed and the cell's place in its array: which KV layer and half and
  // which element (or the activation arena's byte offset), and the bit. Not of the system's
  // address map: moving a memory in the address map leaves its cells' draws as they are.
  std::uint64_t kv_cell(unsigned l, int v, std::uint64_t elem, unsigned bit) const;
  std::uint64_t act_cell(std::uint64_t offset, unsigned bit) const;
  void update_kept(const pass_info& p);
  // The softmax of a banded prefill's block (m_attn): its rows' window masks, the probabilities.
  void band_softmax(fn::desc& d);
  // The softmax of a latent attention's group of sequences (m_attn): causal masks, probabilities.
  void latent_softmax(const command& c, fn::desc& d);
  // Latent KV: the operands of a head's W_uk (q's non-RoPE part into the latent query) or W_uv
  // (the weighted latent into the head's columns of the attention's output).
  void latent_gemm(fn::desc& d, const command& g, const weight_info& wi, std::uint64_t col0);
  // Where the latent attention keeps a head's latent query (or weighted latent) of a row.
  std::uint64_t latent_row(std::uint64_t base, unsigned head, std::uint64_t row, std::uint64_t width) const {
    return base + ((std::uint64_t(head) * m_pass.rows * m_batch + row) * width) * 2;
  }
  void attach(std::shared_ptr<fn::desc> d);
  // Product p's query (or result) rows, the keys of columns [first, first + n) of its score rows
  // (the head's kept tokens, ascending), and, for a part of score rows `total` long, where the
  // part's columns are in the score buffer at `scores`.
  void attention_maps(const command& c, unsigned l, std::uint64_t h0, std::uint64_t rows_addr, bool v,
                      std::uint64_t first, std::uint64_t total, std::uint64_t scores, fn::operand_map& rows,
                      fn::operand_map& keys, fn::operand_map& score_cols);
  // Where the attention reads K (or V) of `pos` in (layer, sequence, KV head): its cache slot, or
  // with AERP's staging the staged row of a new token or of an x token.
  std::uint64_t key_addr(unsigned l, bool v, unsigned b, unsigned kvh, std::uint32_t pos) const;
  // AERP: the x store (every token's xn row per layer and sequence), the staged rows.
  std::uint64_t x_addr(unsigned l, unsigned b, std::uint64_t pos) const;
  struct stage;
  bool staged(unsigned l) const;
  std::uint64_t staged_row(const stage& st, bool v, std::uint64_t row, unsigned kvh) const;
  int stacked_index(unsigned l, unsigned b, std::uint32_t pos) const;
  void check_recomputed(unsigned l, const stage& st);
  void embed(const pass_info& p, std::uint64_t x_addr);
  int kv_layer_of(std::uint64_t addr, bool& is_v) const;
  void inject(std::uint64_t addr, unsigned char* data, std::uint64_t len);
  // Retention faults in the activation eDRAM's arena, under the refresh policy's lifetime rule.
  void inject_activations(std::uint64_t addr, unsigned char* data, std::uint64_t len);
  // The longest time a cell written at tw and refreshed at every multiple of I went unrefreshed by now.
  static double exposure(double tw, double now, double I);
  void note_write(std::uint64_t addr, std::uint64_t len);

  platform_view& m_platform;
  fn::quantised_model m_q;
  model_shape m_shape;
  unsigned m_batch, m_kvh, m_heads, m_hd;
  divider m_batch_div, m_kvh_div, m_hd_div;  // by them, for the KV layout's rows (row_at)
  std::uint64_t m_context, m_decode, m_seed;
  at_initiator m_port;
  tlm::tlm_generic_payload m_dbg;  // the payload of debug()
  std::unique_ptr<fn::engine> m_engine;
  driver* m_drv = nullptr;
  memory_plan* m_plan = nullptr;
  const layer_ops* m_ops = nullptr;
  kv_policy* m_policy = nullptr;
  const refresh_policy* m_refresh = nullptr;
  bool m_loaded = false;
  std::uint64_t m_const = 0;                      // constants area in DRAM (reserved from the plan)
  std::uint64_t m_embed_addr = 0, m_embed_scales = 0;
  std::unordered_map<std::uint64_t, weight_info> m_weights;
  std::vector<std::uint64_t> m_norm_addr;          // 2 per layer, then the final norm
  std::uint64_t m_lm_addr = 0;
  unsigned m_norms = 0;                            // norms issued in this pass
  pass_info m_pass;
  std::vector<head_slots> m_slots;                 // [layer][sequence][kv head]
  attn_ctx m_attn;
  // Tokens: every sequence's tokens so far (prompt, then generated or forced).
  std::vector<std::vector<int>> m_tokens;
  std::vector<int> m_text;                         // teacher-forced text (empty: greedy)
  std::vector<std::unique_ptr<fn::reference_model>> m_ref;
  // The full-cache reference (every position, no eviction): the baseline of an eviction
  // policy's quality loss. m_quality_full: the platform against it; m_quality_evict: the
  // kept-set reference against it (the eviction alone, without rounding or faults).
  std::vector<std::unique_ptr<fn::reference_model>> m_ref_full;
  bool m_check_reference = true;
  fn::quality_metrics m_quality, m_quality_full, m_quality_evict;
  // A KV format that quantises (int8, int4, ...: the run's policy.kv_format; binary16 otherwise)
  // and what it needs: the values' regions, the key groups' scales of a grouped format
  // (recomputed when a layer's keys or the kept sets change), the full-precision reference and
  // its comparison.
  kv_format m_kv_fmt;
  std::vector<std::array<region, 2>> m_kv_data;  // per layer: where K and V values are
  std::vector<std::uint64_t> m_kv_epoch;         // per layer: bumped at each write of its keys
  struct key_group_cache {
    std::uint64_t epoch = ~0ull;
    std::vector<kv_format::group_params> ch;
  };
  std::vector<key_group_cache> m_key_groups;  // [layer][sequence][kv head][group]
  std::uint64_t m_key_group_count = 0;        // groups per head
  std::vector<std::uint16_t> m_q_row;         // scratch: a key row or a value group read back
  // Per stored element of each layer's K and V values (read_quantised): the binary16 value and the
  // group's scale and zero point it was last read with, its code and the code decoded. The same
  // value at the same scale gives the same code: only a changed value or scale is quantised again.
  struct quantised_element {
    std::uint16_t stored = 0, decoded = 0;
    std::uint32_t code = 0;
    std::uint32_t scale_bits = 0x7fc00000u, zero_bits = 0x7fc00000u;  // NaN: never matches
  };
  std::vector<std::array<std::vector<quantised_element>, 2>> m_q_cache;
  std::vector<float> m_q_lo, m_q_hi;          // scratch: a key group's per-channel extremes
  std::vector<std::unique_ptr<fn::reference_model>> m_ref_fp;
  fn::quality_metrics m_quality_fp;
  bool m_record_probs = false;                    // a functional attention source reads them
  std::unordered_map<std::uint64_t, std::vector<std::pair<std::uint32_t, float>>> m_probs;
  // Faults.
  enum class fault_mode { none, retention, ber } m_fault = fault_mode::none;
  // The 16-bit word formats of the KV's and the activations' stored values (to_word, from_word).
  kv_format m_kv_format, m_act_format;
  double m_kv_scale = 1.0 / 1024, m_act_scale = 1.0 / 1024;  // fixed16: the value of one LSB
  const lifetime_rule* m_act_rule = nullptr;  // activation faults: the policy's lifetime rule
  refresh_control* m_act_edram = nullptr;
  std::vector<double> m_act_written;           // per 16-bit element of the arena: last write
  std::vector<double> m_act_flipped;           // by field of the rule's map
  double m_ber = 0;
  std::array<bool, 4> m_ber_groups{};               // hst_msb, hst_lsb, lst_msb, lst_lsb
  std::uint64_t m_fault_seed = 1;
  bool m_exposure_interval = false;  // faults.exposure: interval
  refresh_control* m_kv_edram = nullptr;
  unsigned m_kv_on_chip = 0;
  std::vector<std::array<std::vector<kv_elem>, 2>> m_written;  // on-chip layers: K, V elements
  // A fixed bit-error rate: per on-chip layer, K and V element, ber_draw() of its present write,
  // drawn when it is written (the draws are a function of the cell and the write, so every read
  // of that write flips the same bits), 2 bytes per element for the reads to look up.
  std::vector<std::array<std::vector<std::uint16_t>, 2>> m_ber_mask;
  unsigned m_ber_bits = 16;  // the stored word's bits: 16, or the code of a format that quantises
  std::array<double, 4> m_bits_read{}, m_flipped{};
  double m_wall_s = 0;
  std::uint64_t m_logits_digest = 0xcbf29ce484222325ull;  // FNV-1a of every logit's bits
  // AERP.
  std::uint64_t m_xstore = 0;      // DRAM address of the x store (0: none)
  bool m_x_from_cache = false;     // functional.x_tokens: cache
  std::vector<std::vector<std::pair<unsigned, std::uint32_t>>> m_x;  // per layer: (sequence, position) stacked
  // AERP's staging buffers, or a banded prefill's (every context token's K and V; no stacked rows).
  struct stage {
    int layer = -1;
    std::uint64_t addr[2] = {0, 0};  // K, V: (new rows, then recomputed rows) x kv_heads x head_dim
    std::uint64_t rows = 0;          // new rows
  } m_stage;
  double m_recomputed_rows = 0, m_recomputed_equal = 0;  // (x token, KV head) K and V rows checked
};

}  // namespace kelle
