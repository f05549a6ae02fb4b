// functional_run's orchestration: the configuration (model, tokens), the wiring into the
// platform and the firmware, and the pass hooks (the next tokens, the reference comparison).
#include "firmware/functional/functional_run.h"

#include "models/compute/functional/half.h"
#include "models/interconnect/router.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

namespace kelle {

functional_run::functional_run(const config_node& root, const config_node& wl, const model_shape& shape,
                               unsigned batch, std::uint64_t context, std::uint64_t decode, std::uint64_t seed,
                               platform_view& p)
    : m_platform(p),
      m_shape(shape),
      m_batch(batch),
      m_kvh(shape.cache_heads()),
      m_heads(shape.heads),
      m_hd(shape.latent_kv() ? unsigned(shape.kv_half_width()) : shape.head_dim),
      m_batch_div(m_batch),
      m_kvh_div(m_kvh),
      m_hd_div(m_hd),
      m_context(context),
      m_decode(decode),
      m_port("functional_port", [](tlm::tlm_generic_payload&, const sc_core::sc_time&) {}) {
  const auto wall0 = std::chrono::steady_clock::now();
  const config_node f = root.child_or_empty("functional");
  m_seed = f.get_uint("seed", seed, "seed of the seeded model's weights and of the random prompt (default: seed)");
  m_check_reference = f.get_bool("reference", true, "run the reference model and report quality");
  // AERP's x tokens: attended from the K and V the RSA recomputed (the default), or, as a check,
  // from the copies their cache slots still hold (the same commands).
  m_policy_cfg = std::make_unique<config_node>(root.child_or_empty("policy"));
  m_x_from_cache = f.get_choice("x_tokens", "recompute", {"recompute", "cache"}) == "cache";
  // The model: the weights file `workload.model` names, or seeded weights of its shape.
  const std::string file = weights_file_of(wl);
  if (shape.ffn_type != ffn_kind::gated_silu || shape.norm != norm_kind::rmsnorm)
    wl.fail("model", "functional mode runs Llama-style models (gated SiLU FFN, RMSNorm); " + shape.name + " is not");
  if (shape.moe())
    wl.fail("model", "functional mode does not run mixture-of-experts FFNs yet (" + shape.name + " has experts " +
                         std::to_string(shape.experts) + "); run it in timing mode");
  if (!shape.latent_kv() && shape.head_dim * shape.heads != shape.hidden)
    wl.fail("model", "functional mode needs head_dim x heads = hidden");
  const double params = double(shape.weight_bytes_stored());
  const double limit = f.get_double("max_parameters", 2e8,
                                    "largest model functional mode accepts (its weights live in host memory too)", 1);
  if (params > limit)
    wl.fail("model", shape.name + " has " + std::to_string(params / 1e6) +
                         " M parameters; functional mode is for small models (functional.max_parameters = " +
                         std::to_string(limit / 1e6) + " M)");
  try {
    fn::llama_weights w = file.empty() ? fn::random_weights(fn::config_from_shape(shape), m_seed) : fn::load_weights(file);
    if (file.empty()) w.cfg.name = shape.name;
    m_q = fn::quantise(w);
  } catch (const fn::model_file_error& e) {
    wl.fail("model", e.what());
  }
  if (m_q.cfg.seq_len && context + decode > m_q.cfg.seq_len && !file.empty())
    wl.fail("context_len", "context_len + decode_len = " + std::to_string(context + decode) + " exceeds the model's " +
                               std::to_string(m_q.cfg.seq_len) + " positions (" + file + ")");
  m_q.cfg.rope_theta = float(f.get_double("rope_theta", m_q.cfg.rope_theta, "RoPE base (default: the model's)", 1));

  // Tokens: a text (teacher-forced, with perplexity) or a seeded random prompt.
  m_tokens.assign(batch, {});
  const std::string text = f.get_path("text", "", "a text file: the prompt and the forced continuation (perplexity)");
  const std::string tok = f.get_path("tokenizer", "", "llama2.c tokenizer.bin for `text`");
  if (!text.empty()) {
    if (tok.empty()) f.fail("tokenizer", "functional.text needs a tokenizer (llama2.c tokenizer.bin)");
    std::ifstream in(text);
    if (!in) f.fail("text", "cannot open " + text);
    std::ostringstream s;
    s << in.rdbuf();
    try {
      m_text = fn::tokenizer(tok, m_q.cfg.vocab).encode(s.str(), true, false);
    } catch (const fn::model_file_error& e) {
      f.fail("tokenizer", e.what());
    }
    const std::uint64_t need = std::uint64_t(batch) * (context + decode) + 1;
    if (m_text.size() < need)
      f.fail("text", text + " has " + std::to_string(m_text.size()) + " tokens; batch x (context_len + decode_len) + 1 = " +
                         std::to_string(need) + " are needed");
    for (unsigned b = 0; b < batch; ++b)
      m_tokens[b].assign(m_text.begin() + std::ptrdiff_t(b * (context + decode)),
                         m_text.begin() + std::ptrdiff_t(b * (context + decode) + context));
  } else {
    std::mt19937_64 rng(m_seed ^ 0x70ull);
    std::uniform_int_distribution<int> d(0, int(m_q.cfg.vocab) - 1);
    for (auto& t : m_tokens)
      for (std::uint64_t i = 0; i < context; ++i) t.push_back(d(rng));
  }

  configure_faults(f);
  if (shape.latent_kv() && m_kv_fmt.quantises())
    root.child_or_empty("policy").fail("kv_format", "functional mode runs latent KV with a 16-bit KV format; " +
                                                        m_kv_fmt.name() + " is not modelled for the latent rows");

  p.interconnect().add_initiator("functional_port");
  m_port.socket.bind(p.interconnect().target_socket);
  m_engine = std::make_unique<fn::engine>(*this);
  for (compute_block* b : p.blocks()) b->set_functional(m_engine.get());
  const auto packed = fn::pack(m_q);  // the weights as the references read them, once for all of them
  for (unsigned b = 0; b < batch; ++b) {
    m_ref.push_back(std::make_unique<fn::reference_model>(m_q, packed));
    m_ref.back()->set_kv_format(m_kv_fmt);  // the reference quantises the kept KV as the cache does
    // An integer KV format: a second, full-precision reference measures what the format costs.
    if (m_kv_fmt.quantises() && m_check_reference) m_ref_fp.push_back(std::make_unique<fn::reference_model>(m_q, packed));
    m_ref_full.push_back(std::make_unique<fn::reference_model>(m_q, packed));  // every position, full precision
  }
  m_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
}

functional_run::~functional_run() = default;

void functional_run::connect(driver& d, memory_plan& plan, layer_ops& ops, kv_policy* policy,
                             const refresh_policy* refresh) {
  m_drv = &d;
  m_plan = &plan;
  m_ops = &ops;
  m_policy = policy;
  if (!policy) m_ref_full.clear();  // every position is kept: the references above attend them all
  m_refresh = refresh;
  ops.set_functional(this);
  if (policy)
    for (unsigned b = 0; b < m_batch; ++b)
      for (unsigned h = 0; h < m_kvh; ++h)
        if (!policy->tracked(b, h))
          throw config_error("policy: functional mode needs the policy's exact bookkeeping of every sequence and head "
                             "(leave policy.exact_sequences, exact_layers and exact_heads at 0)");
  // Real data must not share bytes: the plan carves a KV memory from its start, so a KV cache
  // placed in the DRAM itself (placement.kv_memory) would lie over the weights.
  const std::uint64_t w0 = plan.weights(0).q, w1 = plan.lm_head() + 2 * align(std::uint64_t(m_shape.vocab) * m_shape.hidden);
  for (unsigned l = 0; l < m_shape.layers; ++l)
    for (const region* r : {&plan.kv(l).k, &plan.kv(l).v})
      if (r->addr < w1 && r->addr + r->bytes > w0)
        throw config_error("workload.placement.kv_memory: functional mode needs the KV cache apart from the weights; "
                           "in " + r->memory + " the plan puts it over them (use an on-chip KV memory)");
  if (m_kv_fmt.quantises() && policy && policy->can_store_x())  // functional_operands.cpp says why
    m_policy_cfg->fail("kv_format", "functional mode cannot run AERP's x tokens with a quantising KV format (" +
                       m_kv_fmt.name() + "): their recomputed K and V would be read unquantised from the staging "
                       "buffer, which the reference does not model; use policy.kv: aep, or policy.x_only_if_smaller: true "
                       "with a model whose x is not smaller than its K and V");
  if (m_x_from_cache && !(policy && policy->recomputes()))
    throw config_error("functional.x_tokens: 'cache' reads AERP's x tokens from the cache; it needs a policy that "
                       "stores tokens as x (policy.kv: aerp)");
  m_slots.assign(std::size_t(m_shape.layers) * m_batch * m_kvh, head_slots{});
  for (unsigned l = 0; l < m_shape.layers; ++l)  // a windowed layer's ring: at most W slots
    for (unsigned b = 0; b < m_batch; ++b)
      for (unsigned kvh = 0; kvh < m_kvh; ++kvh) hs(l, b, kvh).slot_pos.assign(plan.kv_token_slots(l), -1);
  connect_quantised(plan);
  connect_faults(plan);
}

void functional_run::begin_pass(const pass_info& p, const tensor& x) {
  if (!m_loaded) load();
  m_pass = p;
  m_norms = 0;
  m_probs.clear();  // the previous pass's: its policy step is done
  update_kept(p);
  for (auto& e : m_kv_epoch) ++e;  // the kept sets changed: the key groups' scales are recomputed
  // AERP: the tokens stored as x now, whose K and V MM_k and MM_v recompute as stacked rows
  // (sequence-major, ascending positions).
  m_stage = stage{};
  m_x.assign(m_shape.layers, {});
  if (m_xstore && !p.prefill)
    for (unsigned l = 0; l < m_shape.layers; ++l)
      for (unsigned b = 0; b < m_batch; ++b)
        for (std::uint32_t pos = 0; pos < p.kv_offset; ++pos)
          if (m_policy->stored_as_x(b, l, pos)) m_x[l].emplace_back(b, pos);
  const std::uint64_t addr = x.where.addr;
  const pass_info copy = p;
  m_drv->after(x.producer, [this, copy, addr] { embed(copy, addr); });
}

void functional_run::end_pass(const pass_info& p, std::uint64_t logits_addr) {
  const unsigned V = m_q.cfg.vocab;
  std::vector<std::uint16_t> h(std::size_t(m_batch) * V);
  read(logits_addr, h.data(), h.size() * 2);
  for (std::uint16_t v : h)
    for (int i = 0; i < 2; ++i) m_logits_digest = (m_logits_digest ^ ((v >> (8 * i)) & 0xffu)) * 0x100000001b3ull;
  for (unsigned b = 0; b < m_batch; ++b) {
    std::vector<float> lg(V);
    for (unsigned i = 0; i < V; ++i) lg[i] = fn::from_half(h[std::size_t(b) * V + i]);
    const std::uint64_t next_pos = p.kv_offset + p.rows;  // the position the next token takes
    int next;
    if (!m_text.empty())
      next = m_text.at(b * (m_context + m_decode) + next_pos);
    else
      next = fn::argmax(lg);
    if (m_check_reference) {
      fn::reference_model& ref = *m_ref[b];
      std::vector<float> rl, fl, full;
      auto kept = [this, b](unsigned l, unsigned kvh) { return &hs(l, b, kvh).kept; };
      for (std::uint64_t t = 0; t < p.rows; ++t) {
        const int tok = m_tokens[b].at(p.kv_offset + t);
        rl = p.prefill ? ref.step(tok) : ref.step(tok, kept);
        if (!m_ref_fp.empty()) fl = p.prefill ? m_ref_fp[b]->step(tok) : m_ref_fp[b]->step(tok, kept);
        if (!m_ref_full.empty()) full = m_ref_full[b]->step(tok);
      }
      // Without a KV policy the kept-set reference attends every position: it is the full-cache one.
      if (m_ref_full.empty()) full = m_ref_fp.empty() ? rl : fl;
      const int forced = m_text.empty() ? -1 : next;
      m_quality.add(lg, rl, forced);
      if (!m_ref_fp.empty()) m_quality_fp.add(lg, fl, forced);
      m_quality_full.add(lg, full, forced);
      // The eviction alone: the kept-set reference in full precision against the full cache.
      m_quality_evict.add(m_ref_fp.empty() ? rl : fl, full, forced);
    }
    if (m_tokens[b].size() == next_pos) m_tokens[b].push_back(next);
  }
  // Thresholds of the 2DRP groups after this pass's scores.
  for (auto& hh : m_slots) {
    std::vector<double> sc;
    for (std::uint32_t k : hh.kept) sc.push_back(k < hh.score.size() ? hh.score[k] : 0.0);
    if (sc.empty()) continue;
    hh.threshold = score_median(sc);
  }
}

}  // namespace kelle
