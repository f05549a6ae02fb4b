#include "firmware/functional/functional_run.h"

#include "models/compute/functional/half.h"
#include "models/interconnect/router.h"
#include "models/memory/refresh_control.h"
#include "models/memory/memory_target.h"
#include "models/memory/memory_target.h"
#include "platform/support/hash.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

namespace kelle {

namespace {

std::uint64_t align(std::uint64_t v, std::uint64_t a = 4096) { return (v + a - 1) / a * a; }


const char* const group_names[4] = {"hst_msb", "hst_lsb", "lst_msb", "lst_lsb"};

class functional_source final : public attention_source {
 public:
  functional_source(const functional_run& r, unsigned layers, unsigned heads, std::uint64_t tokens)
      : m_run(r), m_layers(layers), m_heads(heads), m_tokens(tokens) {}
  unsigned layers() const override { return m_layers; }
  unsigned heads() const override { return m_heads; }
  std::uint64_t max_tokens() const override { return m_tokens; }
  void scores(unsigned s, unsigned l, unsigned h, std::uint64_t q, const std::uint32_t* keys, std::size_t n,
              double* out) const override {
    const auto* row = m_run.probabilities(s, l, h, q);
    if (!row)
      throw std::logic_error("functional attention source: the platform has not computed query " + std::to_string(q) +
                             " of sequence " + std::to_string(s) + ", layer " + std::to_string(l) + ", head " +
                             std::to_string(h));
    for (std::size_t i = 0; i < n; ++i) {
      auto it = std::lower_bound(row->begin(), row->end(), std::make_pair(keys[i], -1.0f));
      const bool hit = it != row->end() && it->first == keys[i] && it->second > 0;
      // log p: the policy's softmax over the same keys gives p back.
      out[i] = hit ? std::log(double(it->second)) : -std::numeric_limits<double>::infinity();
    }
  }

 private:
  const functional_run& m_run;
  unsigned m_layers, m_heads;
  std::uint64_t m_tokens;
};

}  // namespace

functional_run::functional_run(const config_node& root, const config_node& wl, const model_shape& shape,
                               unsigned batch, std::uint64_t context, std::uint64_t decode, std::uint64_t seed,
                               platform_view& p)
    : m_platform(p),
      m_shape(shape),
      m_batch(batch),
      m_kvh(shape.kv_heads),
      m_heads(shape.heads),
      m_hd(shape.head_dim),
      m_context(context),
      m_decode(decode),
      m_port("functional_port", [](tlm::tlm_generic_payload&, const sc_core::sc_time&) {}) {
  const auto wall0 = std::chrono::steady_clock::now();
  const config_node f = root.child_or_empty("functional");
  m_seed = f.get_uint("seed", seed, "seed of the seeded model's weights and of the random prompt (default: seed)");
  m_check_reference = f.get_bool("reference", true, "run the reference model and report quality");
  // AERP's x tokens: attended from the K and V the RSA recomputed (the default), or, as a check,
  // from the copies their cache slots still hold (the same commands).
  m_x_from_cache = f.get_choice("x_tokens", "recompute", {"recompute", "cache"}) == "cache";
  // The model: the weights file `workload.model` names, or seeded weights of its shape.
  std::string file;
  if (wl.has("model") && !wl.is_map("model")) {
    const std::string s = wl.require_string("model", "a model name or a weights file");
    if (!models().has(s) && fn::looks_like_weights_file(s)) file = s;
  }
  if (shape.ffn_type != ffn_kind::gated_silu || shape.norm != norm_kind::rmsnorm)
    wl.fail("model", "functional mode runs Llama-style models (gated SiLU FFN, RMSNorm); " + shape.name + " is not");
  if (shape.head_dim * shape.heads != shape.hidden)
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
  const std::string text = f.get_string("text", "", "a text file: the prompt and the forced continuation (perplexity)");
  const std::string tok = f.get_string("tokenizer", "", "llama2.c tokenizer.bin for `text`");
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

  // Faults in KV data read from the eDRAM.
  const config_node fl = f.child_or_empty("faults");
  const std::string mode = fl.get_choice("mode", "none", {"none", "retention", "ber"});
  m_fault = mode == "retention" ? fault_mode::retention : mode == "ber" ? fault_mode::ber : fault_mode::none;
  m_fault_seed = fl.get_uint("seed", m_seed, "seed of the cells' retention times and of the bit errors");
  if (m_fault == fault_mode::ber) {
    m_ber = fl.require_double("ber", "bit-error rate of each stored bit of the chosen group", 0, 1);
    const std::string g = fl.get_choice("group", "all",
                                        {"all", "msb", "lsb", "hst", "lst", "hst_msb", "hst_lsb", "lst_msb", "lst_lsb"});
    for (int i = 0; i < 4; ++i) {
      const bool hst = i < 2, msb = i % 2 == 0;
      m_ber_groups[i] = g == "all" || (g == "msb" && msb) || (g == "lsb" && !msb) || (g == "hst" && hst) ||
                        (g == "lst" && !hst) || g == group_names[i];
    }
  }

  p.interconnect().add_initiator("functional_port");
  m_port.socket.bind(p.interconnect().target_socket);
  m_engine = std::make_unique<fn::engine>(*this);
  for (compute_block* b : p.blocks()) b->set_functional(m_engine.get());
  for (unsigned b = 0; b < batch; ++b) m_ref.push_back(std::make_unique<fn::reference_model>(m_q));
  m_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
}

functional_run::~functional_run() = default;

void functional_run::connect(driver& d, memory_plan& plan, layer_ops& ops, kv_policy* policy,
                             const refresh_policy* refresh) {
  m_drv = &d;
  m_plan = &plan;
  m_ops = &ops;
  m_policy = policy;
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
  if (m_x_from_cache && !(policy && policy->recomputes()))
    throw config_error("functional.x_tokens: 'cache' reads AERP's x tokens from the cache; it needs a policy that "
                       "stores tokens as x (policy.kv: aerp)");
  m_slots.assign(std::size_t(m_shape.layers) * m_batch * m_kvh, head_slots{});
  for (auto& h : m_slots) h.slot_pos.assign(plan.kv_token_slots(), -1);
  m_kv_on_chip = plan.kv_layers_on_chip();
  if (m_kv_on_chip && plan.kv(0).k.target) m_kv_edram = plan.kv(0).k.target->refresh();
  if (!m_kv_edram) m_kv_on_chip = 0;  // faults model eDRAM cells only
  if (m_fault != fault_mode::none) m_written.resize(m_kv_on_chip);  // only the fault model reads it
  for (unsigned l = 0; l < m_written.size(); ++l)
    for (int v = 0; v < 2; ++v) m_written[l][v].assign((v ? plan.kv(l).v : plan.kv(l).k).bytes / 2, kv_elem{});
}

std::unique_ptr<attention_source> functional_run::make_source() {
  m_record_probs = true;
  return std::make_unique<functional_source>(*this, m_shape.layers, m_heads, m_context + m_decode);
}

const std::vector<std::pair<std::uint32_t, float>>* functional_run::probabilities(unsigned s, unsigned l, unsigned h,
                                                                                 std::uint64_t q) const {
  const std::uint64_t key = ((std::uint64_t(s) * m_shape.layers + l) * m_heads + h) << 32 | q;
  auto it = m_probs.find(key);
  return it == m_probs.end() ? nullptr : &it->second;
}

// ---- memory ------------------------------------------------------------------------------------

void functional_run::debug(tlm::tlm_command cmd, std::uint64_t addr, unsigned char* p, std::uint64_t len) {
  for (std::uint64_t off = 0; off < len;) {
    const std::uint64_t n = std::min<std::uint64_t>(len - off, 1u << 30);
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr + off);
    t.set_data_ptr(p + off);
    t.set_data_length(static_cast<unsigned>(n));
    t.set_streaming_width(static_cast<unsigned>(n));
    if (m_port.socket->transport_dbg(t) != n) {
      std::ostringstream o;
      o << "functional mode: the debug " << (cmd == tlm::TLM_READ_COMMAND ? "read" : "write") << " of " << n
        << " bytes at 0x" << std::hex << addr + off << " was not served (unmapped, or a memory with store_data: false)";
      throw std::runtime_error(o.str());
    }
    off += n;
  }
}

void functional_run::read(std::uint64_t addr, void* dst, std::uint64_t len) {
  auto* p = static_cast<unsigned char*>(dst);
  debug(tlm::TLM_READ_COMMAND, addr, p, len);
  if (m_fault != fault_mode::none && m_kv_on_chip) inject(addr, p, len);
}

void functional_run::write(std::uint64_t addr, const void* src, std::uint64_t len) {
  // The debug payload's data pointer is not const; a write only reads through it.
  debug(tlm::TLM_WRITE_COMMAND, addr, const_cast<unsigned char*>(static_cast<const unsigned char*>(src)), len);
  if (m_fault != fault_mode::none && m_kv_on_chip) note_write(addr, len);  // what inject() reads
}

int functional_run::kv_layer_of(std::uint64_t addr, bool& is_v) const {
  for (unsigned l = 0; l < m_shape.layers; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = v ? m_plan->kv(l).v : m_plan->kv(l).k;
      if (addr >= r.addr && addr < r.addr + r.bytes) {
        is_v = v;
        return int(l);
      }
    }
  return -1;
}

std::uint64_t functional_run::kv_addr(unsigned l, bool v, std::uint64_t slot, unsigned b, unsigned kvh) const {
  const region& r = v ? m_plan->kv(l).v : m_plan->kv(l).k;
  return r.addr + ((slot * m_batch + b) * m_kvh + kvh) * m_hd * 2;
}

void functional_run::note_write(std::uint64_t addr, std::uint64_t len) {
  const double now = sc_core::sc_time_stamp().to_seconds();
  for (unsigned l = 0; l < m_kv_on_chip; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = v ? m_plan->kv(l).v : m_plan->kv(l).k;
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      for (std::uint64_t a = b & ~1ull; a < e; a += 2) {
        kv_elem& el = m_written[l][v][(a - r.addr) / 2];
        el.written = now;
        ++el.generation;
      }
    }
}

void functional_run::inject(std::uint64_t addr, unsigned char* data, std::uint64_t len) {
  const double now = sc_core::sc_time_stamp().to_seconds();
  const retention_model& ret = m_kv_edram->retention();
  const double own = m_kv_edram->default_refresh_interval().to_seconds();
  for (unsigned l = 0; l < m_kv_on_chip; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = v ? m_plan->kv(l).v : m_plan->kv(l).k;
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      for (std::uint64_t a = b; a + 2 <= e; a += 2) {
        const std::uint64_t elem = (a - r.addr) / 2;
        const std::uint64_t hi = elem / m_hd;  // (slot, sequence, kv head)
        const unsigned kvh = unsigned(hi % m_kvh), sq = unsigned(hi / m_kvh % m_batch);
        const std::uint64_t slot = hi / m_kvh / m_batch;
        head_slots& h = hs(l, sq, kvh);
        if (slot >= h.slot_pos.size() || h.slot_pos[slot] < 0) continue;  // not a stored token
        const std::uint32_t pos = std::uint32_t(h.slot_pos[slot]);
        const bool high = pos < h.score.size() && h.score[pos] > h.threshold;
        const kv_elem& el = m_written[l][v][elem];
        std::uint16_t val = std::uint16_t(data[a - addr] | (data[a - addr + 1] << 8));
        for (unsigned bit = 0; bit < 16; ++bit) {
          const bool msb = bit >= 8;
          const int g = (high ? 0 : 2) + (msb ? 0 : 1);
          m_bits_read[g] += 1;
          const std::uint64_t cell = splitmix64(m_fault_seed ^ splitmix64((a << 4) | bit));
          if (m_fault == fault_mode::ber) {
            if (m_ber_groups[g] && unit_interval(splitmix64(cell ^ el.generation)) < m_ber) {
              val ^= std::uint16_t(1u << bit);
              m_flipped[g] += 1;
            }
            continue;
          }
          if (!(val >> bit & 1u)) continue;  // a discharged cell (0) has nothing to lose
          // Exposure: the longest time the cell went without a write or refresh since its write.
          double I = m_refresh ? m_refresh->interval_s(high, msb) : 0.0;
          if (I <= 0) I = own;
          const double tw = el.written;
          const double kw = std::floor(tw / I), kn = std::floor(now / I);
          double exposure = now - tw;
          if (kn > kw)
            exposure = std::max({(kw + 1) * I - tw, kn - kw >= 2 ? I : 0.0, now - kn * I});
          // The cell's retention time is F^-1(u) for its uniform draw u: it has failed iff u < F(exposure).
          if (unit_interval(cell) < ret.failure_probability(exposure)) {
            val = std::uint16_t(val & ~(1u << bit));  // a charged cell leaks to 0
            m_flipped[g] += 1;
          }
        }
        data[a - addr] = static_cast<unsigned char>(val & 0xff);
        data[a - addr + 1] = static_cast<unsigned char>(val >> 8);
      }
    }
}

// ---- the model in memory -------------------------------------------------------------------------

void functional_run::write_matrix(std::uint64_t addr, const fn::qmatrix& m, std::uint64_t scales, int layer, char kind) {
  // y = x . W with W = m^T (k = in, n = out), stored tile-major: tile i (columns i tn ..) is a
  // row-major k x n_i block.
  const std::uint64_t k = m.in, n = m.out, tn = m_ops->tile_cols(k, n);
  std::vector<std::int8_t> img(k * n);
  for (std::uint64_t c0 = 0; c0 < n; c0 += tn) {
    const std::uint64_t ni = std::min(tn, n - c0);
    std::int8_t* t = &img[c0 * k];
    for (std::uint64_t r = 0; r < k; ++r)
      for (std::uint64_t c = 0; c < ni; ++c) t[r * ni + c] = m.q[(c0 + c) * k + r];
  }
  write(addr, img.data(), img.size());
  write(scales, m.scale.data(), n * 4);
  m_weights[addr] = weight_info{scales, layer, kind};
}

void functional_run::load() {
  m_loaded = true;
  const fn::llama_config& c = m_q.cfg;
  // Constants (scales, norm weights, embedding scales) at the top of DRAM, reserved from the
  // plan's spare DRAM so that activation spills cannot reach them.
  std::uint64_t need = 0;
  for (const auto& l : m_q.layers)
    for (const fn::qmatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) need += align(m->out * 4, 64);
  need += 2 * align(std::uint64_t(c.vocab) * 4, 64) + (2 * c.layers + 1) * align(std::uint64_t(c.dim) * 2, 64);
  // AERP: the x store below the constants, one xn row per (layer, sequence, position).
  const std::uint64_t xbytes = m_policy && m_policy->recomputes()
                                   ? std::uint64_t(c.layers) * m_batch * (m_context + m_decode) * c.dim * 2
                                   : 0;
  try {
    m_const = m_plan->reserve_top(align(need));
    m_xstore = xbytes ? m_plan->reserve_top(align(xbytes)) : 0;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("functional mode: the DRAM has no room for the model's constants") +
                             (xbytes ? " and AERP's x store" : "") + " above its weights and KV: " + e.what());
  }

  std::uint64_t at = m_const;
  auto take = [&](std::uint64_t bytes) {
    const std::uint64_t a = at;
    at += align(bytes, 64);
    return a;
  };
  for (unsigned l = 0; l < c.layers; ++l) {
    const auto& w = m_plan->weights(l);
    const auto& L = m_q.layers[l];
    const int li = int(l);
    write_matrix(w.q, L.wq, take(L.wq.out * 4), li, 'q');
    write_matrix(w.k, L.wk, take(L.wk.out * 4), li, 'k');
    write_matrix(w.v, L.wv, take(L.wv.out * 4), li, 'v');
    write_matrix(w.o, L.wo, take(L.wo.out * 4), li, 'o');
    write_matrix(w.gate, L.gate, take(L.gate.out * 4), li, 'g');
    write_matrix(w.up, L.up, take(L.up.out * 4), li, 'u');
    write_matrix(w.down, L.down, take(L.down.out * 4), li, 'd');
  }
  m_lm_addr = m_plan->lm_head();
  write_matrix(m_lm_addr, m_q.classifier, take(std::uint64_t(c.vocab) * 4), -1, 'h');
  auto put_norm = [&](const std::vector<float>& g) {
    std::vector<std::uint16_t> h(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) h[i] = fn::to_half(g[i]);
    const std::uint64_t a = take(h.size() * 2);
    write(a, h.data(), h.size() * 2);
    m_norm_addr.push_back(a);
  };
  for (const auto& L : m_q.layers) {
    put_norm(L.attn_norm);
    put_norm(L.ffn_norm);
  }
  put_norm(m_q.final_norm);
  // The embedding table: int8 rows after the LM head (or the LM head itself when tied).
  if (!c.tied) {
    m_embed_addr = m_plan->lm_head() + align(std::uint64_t(c.vocab) * c.dim);
    write(m_embed_addr, m_q.embed.q.data(), m_q.embed.q.size());
    m_embed_scales = take(std::uint64_t(c.vocab) * 4);
    write(m_embed_scales, m_q.embed.scale.data(), std::uint64_t(c.vocab) * 4);
  } else {
    m_embed_addr = m_lm_addr;
    m_embed_scales = m_weights[m_lm_addr].scales;
  }
}

void functional_run::embed(const pass_info& p, std::uint64_t x) {
  // The host's embedding lookup: each new token's int8 row and scale from the table in DRAM,
  // written as 16-bit activations into x (rows: token-major, then sequence).
  const unsigned C = m_q.cfg.dim;
  const std::uint64_t tn = m_q.cfg.tied ? m_ops->tile_cols(C, m_q.cfg.vocab) : 0;
  std::vector<std::uint16_t> rows(std::size_t(p.rows) * p.batch * C);
  for (std::uint64_t t = 0; t < p.rows; ++t)
    for (unsigned b = 0; b < p.batch; ++b) {
      const std::uint64_t tok = std::uint64_t(m_tokens[b].at(p.kv_offset + t));
      std::vector<std::int8_t> q(C);
      if (!m_q.cfg.tied) {
        read(m_embed_addr + tok * C, q.data(), C);
      } else {  // column `tok` of the tile-major LM head
        const std::uint64_t c0 = tok / tn * tn, ni = std::min<std::uint64_t>(tn, m_q.cfg.vocab - c0);
        for (unsigned i = 0; i < C; ++i) read(m_lm_addr + c0 * C + i * ni + (tok - c0), &q[i], 1);
      }
      float s;
      read(m_embed_scales + tok * 4, &s, 4);
      for (unsigned i = 0; i < C; ++i) rows[(t * p.batch + b) * C + i] = fn::to_half(float(q[i]) * s);
    }
  write(x, rows.data(), rows.size() * 2);
}

// ---- passes ------------------------------------------------------------------------------------

void functional_run::update_kept(const pass_info& p) {
  const std::uint64_t slots = m_plan->kv_token_slots();
  for (unsigned l = 0; l < m_shape.layers; ++l)
    for (unsigned b = 0; b < m_batch; ++b)
      for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
        head_slots& h = hs(l, b, kvh);
        if (p.prefill) {
          if (p.rows > slots) throw std::logic_error("functional: the context does not fit the KV slots");
          h.kept.clear();
          for (std::uint32_t t = 0; t < p.rows; ++t) {
            h.slot_pos[t] = t;
            h.pos_slot[t] = t;
            h.kept.push_back(t);
          }
          h.next_slot = std::uint32_t(p.rows);
          continue;
        }
        const std::uint32_t pos = std::uint32_t(p.kv_offset);
        std::vector<std::uint32_t> now;
        if (m_policy) {
          now = m_policy->kept(b, l, kvh);
        } else {
          now = h.kept;
          now.push_back(pos);
        }
        std::vector<std::uint32_t> freed;
        std::set_difference(h.kept.begin(), h.kept.end(), now.begin(), now.end(), std::back_inserter(freed));
        std::vector<std::uint32_t> free_slots;
        for (std::uint32_t f : freed) {
          const std::uint32_t s = h.pos_slot.at(f);
          h.slot_pos[s] = -1;
          h.pos_slot.erase(f);
          free_slots.push_back(s);
        }
        std::uint32_t slot;
        if (!free_slots.empty()) {
          slot = free_slots.front();
        } else {
          if (h.next_slot >= slots) throw std::logic_error("functional: no free KV slot for the new token");
          slot = h.next_slot++;
        }
        h.slot_pos[slot] = pos;
        h.pos_slot[pos] = slot;
        h.kept = std::move(now);
        // 2DRP groups: high-score tokens score above the median of the head's stored tokens.
        std::vector<double> sc;
        for (std::uint32_t k : h.kept) sc.push_back(k < h.score.size() ? h.score[k] : 0.0);
        std::nth_element(sc.begin(), sc.begin() + std::ptrdiff_t(sc.size() / 2), sc.end());
        h.threshold = sc.empty() ? 0.0 : sc[sc.size() / 2];
      }
}

void functional_run::begin_pass(const pass_info& p, const tensor& x) {
  if (!m_loaded) load();
  m_pass = p;
  m_norms = 0;
  m_probs.clear();  // the previous pass's: its policy step is done
  update_kept(p);
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
      std::vector<float> rl;
      for (std::uint64_t t = 0; t < p.rows; ++t) {
        const int tok = m_tokens[b].at(p.kv_offset + t);
        if (p.prefill)
          rl = ref.step(tok);
        else
          rl = ref.step(tok, [this, b](unsigned l, unsigned kvh) { return &hs(l, b, kvh).kept; });
      }
      m_quality.add(lg, rl, m_text.empty() ? -1 : next);
    }
    if (m_tokens[b].size() == next_pos) m_tokens[b].push_back(next);
  }
  // Thresholds of the 2DRP groups after this pass's scores.
  for (auto& hh : m_slots) {
    std::vector<double> sc;
    for (std::uint32_t k : hh.kept) sc.push_back(k < hh.score.size() ? hh.score[k] : 0.0);
    if (sc.empty()) continue;
    std::nth_element(sc.begin(), sc.begin() + std::ptrdiff_t(sc.size() / 2), sc.end());
    hh.threshold = sc[sc.size() / 2];
  }
}

void functional_run::attach(std::shared_ptr<fn::desc> d) {
  // The driver numbers commands 1, 2, ... in submission order: the next one gets this id.
  m_engine->attach(static_cast<std::uint32_t>(m_drv->commands_submitted() + 1), std::move(d));
}

void functional_run::gemm(const command& g, std::uint64_t w, std::uint64_t col0) {
  auto it = m_weights.find(w);
  if (it == m_weights.end()) throw std::logic_error("functional: a projection with weights the model did not write");
  const weight_info& wi = it->second;
  auto d = std::make_shared<fn::desc>();
  d->scales = wi.scales + col0 * 4;
  // The full output row: project() writes tile i's columns at y + rows x col0 (tile-major);
  // functionally the output is the row-major rows x n matrix the next command reads.
  const fn::qmatrix* m = nullptr;
  if (wi.layer < 0) {
    m = &m_q.classifier;
  } else {
    const auto& L = m_q.layers[std::size_t(wi.layer)];
    m = wi.kind == 'q' ? &L.wq : wi.kind == 'k' ? &L.wk : wi.kind == 'v' ? &L.wv : wi.kind == 'o' ? &L.wo
        : wi.kind == 'g' ? &L.gate : wi.kind == 'u' ? &L.up : &L.down;
  }
  const std::uint64_t N = m->out, rows = g.m, S = g.extra, K = g.k;
  // project() writes tile i's columns of the m + extra rows at y + (m + extra) x col0 (tile-major);
  // functionally the output is the row-major (m + extra) x n matrix the next command reads.
  const std::uint64_t y = g.addr_c - (rows + S) * col0 * 2;
  d->c.resize(1);
  auto& pcs = d->c[0];
  const bool kv = wi.kind == 'k' || wi.kind == 'v';
  if (kv && !S) {  // into each head's slot for the token (the KV cache)
    const unsigned l = unsigned(wi.layer);
    for (std::uint32_t r = 0; r < rows; ++r) {
      const unsigned b = r % m_batch;
      const std::uint64_t pos = m_pass.kv_offset + r / m_batch;
      for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
        const std::uint64_t h0 = std::uint64_t(kvh) * m_hd, h1 = h0 + m_hd;
        const std::uint64_t c0 = std::max(h0, col0), c1 = std::min(h1, col0 + g.n);
        if (c0 >= c1) continue;
        const std::uint64_t slot = hs(l, b, kvh).pos_slot.at(std::uint32_t(pos));
        pcs.push_back({r, std::uint32_t(c0 - col0), std::uint32_t(c1 - c0),
                       kv_addr(l, wi.kind == 'v', slot, b, kvh) + (c0 - h0) * 2});
      }
    }
  }
  // The row-major output; with stacked rows (command.extra) they follow the m rows: AERP's MM_k
  // and MM_v write the staging buffer so (new rows, then recomputed rows).
  if (!kv || S)
    for (std::uint32_t r = 0; r < rows + S; ++r) pcs.push_back({r, 0, g.n, y + (r * N + col0) * 2});
  if (kv && S) {  // AERP: the stacked rows are the x tokens' stored x
    const unsigned l = unsigned(wi.layer);
    const auto& xs = m_x[l];
    if (S != xs.size() || !m_xstore)
      throw std::logic_error("functional: MM_" + std::string(1, wi.kind) + " of layer " + std::to_string(l) + " stacks " +
                             std::to_string(S) + " rows, the policy stores " + std::to_string(xs.size()) +
                             " tokens as x");
    if (m_stage.layer != int(l)) m_stage = stage{int(l), {0, 0}, rows};
    m_stage.addr[wi.kind == 'v'] = y;
    d->a.resize(1);
    for (std::uint32_t r = 0; r < rows; ++r) d->a[0].push_back({r, 0, g.k, g.addr_a + r * K * 2});
    for (std::uint32_t s = 0; s < S; ++s)
      d->a[0].push_back({std::uint32_t(rows + s), 0, g.k, x_addr(l, xs[s].first, xs[s].second)});
  }
  if (wi.kind == 'k' && col0 == 0 && m_xstore) {  // AERP: each new row's x kept as the array reads it
    d->keep_a.resize(1);
    for (std::uint32_t r = 0; r < rows; ++r)
      d->keep_a[0].push_back({r, 0, g.k, x_addr(unsigned(wi.layer), r % m_batch, m_pass.kv_offset + r / m_batch)});
  }
  attach(std::move(d));
}

void functional_run::sfu(const command& c, const region& in) {
  const fn::llama_config& cf = m_q.cfg;
  auto d = std::make_shared<fn::desc>();
  if (c.op == opcode::rmsnorm) {
    const unsigned i = m_norms++;
    if (i >= m_norm_addr.size()) throw std::logic_error("functional: more norms in a pass than the model has");
    d->gamma = m_norm_addr[i];
    d->eps = cf.norm_eps;
  } else if (c.op == opcode::rope) {
    d->theta = cf.rope_theta;
    bool v = false;
    const int l = kv_layer_of(in.addr, v);
    if (m_stage.layer >= 0 && in.addr == m_stage.addr[0]) {
      // AERP's staged keys: rows (new row or stacked row, kv head), dense in place, each at its
      // token's position.
      const unsigned sl = unsigned(m_stage.layer);
      const auto& xs = m_x[sl];
      if (c.m != (m_stage.rows + xs.size()) * m_kvh)
        throw std::logic_error("functional: the staged keys' RoPE has " + std::to_string(c.m) + " rows, expected " +
                               std::to_string((m_stage.rows + xs.size()) * m_kvh));
      for (std::uint32_t r = 0; r < c.m; ++r) {
        const std::uint64_t row = r / m_kvh;
        d->positions.push_back(row < m_stage.rows ? m_pass.kv_offset + row / m_batch : xs[row - m_stage.rows].second);
      }
    } else if (l >= 0) {  // k: rows (token, sequence, kv head), each in its head's slot
      d->a.resize(1);
      for (std::uint32_t r = 0; r < c.m; ++r) {
        const unsigned kvh = r % m_kvh, b = r / m_kvh % m_batch;
        const std::uint64_t pos = m_pass.kv_offset + r / m_kvh / m_batch;
        d->positions.push_back(pos);
        const std::uint64_t slot = hs(unsigned(l), b, kvh).pos_slot.at(std::uint32_t(pos));
        d->a[0].push_back({r, 0, c.k, kv_addr(unsigned(l), false, slot, b, kvh)});
      }
      d->c = d->a;
    } else {  // q: rows (token, sequence, head)
      for (std::uint32_t r = 0; r < c.m; ++r) d->positions.push_back(m_pass.kv_offset + r / m_heads / m_batch);
    }
  } else if (c.op == opcode::softmax) {
    const unsigned G = m_heads / m_kvh, l = m_attn.layer;
    const std::uint64_t T = m_pass.rows, per = G * T;
    d->scale = 1.0f / std::sqrt(float(m_hd));
    for (std::uint64_t R = 0; R < c.m; ++R) {
      const std::uint64_t pr = R / per, r = R % per;
      const unsigned kvh = unsigned(m_attn.h0 + pr / m_batch), b = unsigned(pr % m_batch);
      const auto& keys = hs(l, b, kvh).kept;
      const std::uint64_t qpos = m_pass.kv_offset + r % T;
      d->valid.push_back(std::uint32_t(std::upper_bound(keys.begin(), keys.end(), std::uint32_t(qpos)) - keys.begin()));
    }
    const std::uint64_t h0 = m_attn.h0, off = m_pass.kv_offset;
    d->on_row = [this, l, h0, per, T, G, off](std::uint64_t R, const float* pr, std::uint32_t n) {
      const std::uint64_t prod = R / per, r = R % per;
      const unsigned kvh = unsigned(h0 + prod / m_batch), b = unsigned(prod % m_batch);
      const unsigned head = kvh * G + unsigned(r / T);
      const std::uint64_t qpos = off + r % T;
      head_slots& h = hs(l, b, kvh);
      auto* row = m_record_probs ? &m_probs[((std::uint64_t(b) * m_shape.layers + l) * m_heads + head) << 32 | qpos]
                                 : nullptr;
      if (row) row->clear();
      if (h.score.size() < qpos + 1) h.score.resize(qpos + 1, 0.0);
      for (std::uint32_t j = 0; j < n; ++j) {
        if (row) row->emplace_back(h.kept[j], pr[j]);
        h.score[h.kept[j]] += pr[j];
      }
    };
  } else {
    return;
  }
  attach(std::move(d));
}

void functional_run::attention_maps(const command& c, unsigned l, std::uint64_t h0, std::uint64_t rows_addr, bool v,
                                    std::uint64_t first, std::uint64_t total, std::uint64_t scores,
                                    fn::operand_map& rows, fn::operand_map& keys, fn::operand_map& score_cols) {
  // Product p: KV head h0 + p / batch of sequence p mod batch. Its rows (query head of the
  // group, token) live in q's (or the result's) [token][sequence][head][head_dim]; its keys are
  // the head's kept tokens, in their slots (or staged). A part covers the columns [first,
  // first + N) of score rows `total` long.
  const unsigned G = m_heads / m_kvh;
  const std::uint64_t T = m_pass.rows, P = c.batch ? c.batch : 1, N = v ? c.k : c.n, M = c.m;
  rows.assign(P, {});
  keys.assign(P, {});
  if (N != total) score_cols.assign(P, {});
  for (std::uint64_t p = 0; p < P; ++p) {
    const unsigned kvh = unsigned(h0 + p / m_batch), b = unsigned(p % m_batch);
    for (std::uint32_t r = 0; r < G * T; ++r) {
      const std::uint64_t t = r % T, head = kvh * G + r / T;
      rows[p].push_back({r, 0, m_hd, rows_addr + ((t * m_batch + b) * m_heads + head) * m_hd * 2});
    }
    const head_slots& h = hs(l, b, kvh);
    if (h.kept.size() > total)
      throw std::logic_error("functional: a head keeps " + std::to_string(h.kept.size()) +
                             " tokens, more than the attention's " + std::to_string(total));
    for (std::uint64_t j = first; j < std::min<std::uint64_t>(h.kept.size(), first + N); ++j)
      keys[p].push_back({std::uint32_t(j - first), 0, m_hd, key_addr(l, v, b, kvh, h.kept[j])});
    if (N != total)
      for (std::uint32_t r = 0; r < M; ++r)
        score_cols[p].push_back({r, 0, std::uint32_t(N), scores + ((p * M + r) * total + first) * 2});
  }
}

bool functional_run::staged(unsigned l) const {
  return m_stage.layer == int(l) && m_stage.addr[0] && m_stage.addr[1];
}

std::uint64_t functional_run::staged_row(const stage& st, bool v, std::uint64_t row, unsigned kvh) const {
  return st.addr[v] + (row * m_kvh + kvh) * m_hd * 2;
}

int functional_run::stacked_index(unsigned l, unsigned b, std::uint32_t pos) const {
  const auto& xs = m_x[l];
  const auto it = std::lower_bound(xs.begin(), xs.end(), std::make_pair(b, pos));
  return it != xs.end() && *it == std::make_pair(b, pos) ? int(it - xs.begin()) : -1;
}

std::uint64_t functional_run::x_addr(unsigned l, unsigned b, std::uint64_t pos) const {
  return m_xstore + ((std::uint64_t(l) * m_batch + b) * (m_context + m_decode) + pos) * m_q.cfg.dim * 2;
}

std::uint64_t functional_run::key_addr(unsigned l, bool v, unsigned b, unsigned kvh, std::uint32_t pos) const {
  if (staged(l)) {  // AERP: the new token and the x tokens from the staging buffer
    if (pos >= m_pass.kv_offset) return staged_row(m_stage, v, (pos - m_pass.kv_offset) * m_batch + b, kvh);
    const int i = m_x_from_cache ? -1 : stacked_index(l, b, pos);
    if (i >= 0) return staged_row(m_stage, v, m_stage.rows + std::uint64_t(i), kvh);
  }
  return kv_addr(l, v, hs(l, b, kvh).pos_slot.at(pos), b, kvh);
}

void functional_run::check_recomputed(unsigned l, const stage& st) {
  // Each x token's recomputed K (after RoPE) and V against what its cache slot holds since the
  // token was projected, in every KV head that keeps it: the bytes as written (no fault).
  std::vector<unsigned char> a(m_hd * 2), c(m_hd * 2);
  const auto& xs = m_x[l];
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
      const auto& slots = hs(l, xs[i].first, kvh).pos_slot;
      const auto it = slots.find(xs[i].second);
      if (it == slots.end()) continue;  // this head has evicted the token
      for (bool v : {false, true}) {
        debug(tlm::TLM_READ_COMMAND, staged_row(st, v, st.rows + i, kvh), a.data(), a.size());
        debug(tlm::TLM_READ_COMMAND, kv_addr(l, v, it->second, xs[i].first, kvh), c.data(), c.size());
        m_recomputed_rows += 1;
        if (a == c) m_recomputed_equal += 1;
      }
    }
}

void functional_run::scores(const command& qk, unsigned l, std::uint64_t h0, std::uint64_t q, std::uint64_t first,
                            std::uint64_t total) {
  m_attn = attn_ctx{l, h0};
  auto d = std::make_shared<fn::desc>();
  attention_maps(qk, l, h0, q, false, first, total, qk.addr_c - first * 2, d->a, d->b, d->c);
  // The staged rows are complete when the layer's first q . K^T starts (the RSA ran MM_v before
  // it, the firmware waited for the keys' RoPE).
  if (staged(l) && h0 == 0 && first == 0) d->on_start = [this, l, st = m_stage] { check_recomputed(l, st); };
  attach(std::move(d));
}

void functional_run::context(const command& av, unsigned l, std::uint64_t h0, std::uint64_t out, std::uint64_t first,
                             std::uint64_t total) {
  auto d = std::make_shared<fn::desc>();
  attention_maps(av, l, h0, out, true, first, total, av.addr_a - first * 2, d->c, d->b, d->a);
  d->accumulate = first > 0;  // a later part adds to the earlier parts' result
  attach(std::move(d));
}

void functional_run::copy_new_rows(unsigned l, bool v) {
  // The staged new rows (K after its RoPE) into each head's slot for the token.
  if (!staged(l)) throw std::logic_error("functional: a copy of staged rows of layer " + std::to_string(l) + ", not staged");
  auto d = std::make_shared<fn::desc>();
  for (std::uint64_t row = 0; row < m_stage.rows; ++row) {
    const unsigned b = unsigned(row % m_batch);
    const std::uint32_t pos = std::uint32_t(m_pass.kv_offset + row / m_batch);
    for (unsigned kvh = 0; kvh < m_kvh; ++kvh)
      d->moves.push_back({staged_row(m_stage, v, row, kvh), kv_addr(l, v, hs(l, b, kvh).pos_slot.at(pos), b, kvh),
                          std::uint64_t(m_hd) * 2});
  }
  attach(std::move(d));
}

// ---- results -----------------------------------------------------------------------------------

void functional_run::add_results(nlohmann::json& r) const {
  nlohmann::json flipped = nlohmann::json::object(), read = nlohmann::json::object(), rate = nlohmann::json::object();
  for (int g = 0; g < 4; ++g) {
    flipped[group_names[g]] = m_flipped[g];
    read[group_names[g]] = m_bits_read[g];
    rate[group_names[g]] = m_bits_read[g] > 0 ? m_flipped[g] / m_bits_read[g] : 0.0;
  }
  const auto& q = m_quality;
  // Without reference rows (functional.reference: false) there is nothing to compare with.
  auto vs_reference = [&q](double v) { return q.rows ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json quality = {{"reference", m_check_reference},
                            {"rows", q.rows},
                            {"max_abs_logit_error", vs_reference(q.max_abs_logit_error)},
                            {"max_abs_reference_logit", vs_reference(q.max_abs_logit)},
                            {"kl_divergence", vs_reference(q.kl_divergence())},
                            {"top1_agreement", vs_reference(q.top1_agreement())},
                            {"nonfinite_logits", q.nonfinite},
                            {"flipped_bits", flipped},
                            {"bits_read", read},
                            {"flip_rate", rate}};
  if (q.nll_count) {
    quality["perplexity"] = std::exp(q.nll / q.nll_count);
    quality["reference_perplexity"] = std::exp(q.ref_nll / q.nll_count);
    quality["perplexity_tokens"] = q.nll_count;
  } else {
    quality["perplexity"] = nullptr;
  }
  r["quality"] = quality;
  char digest[20];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(m_logits_digest));
  nlohmann::json toks = nlohmann::json::array();
  for (const auto& t : m_tokens) toks.push_back(t);
  r["functional"] = {{"model", m_q.cfg.name},
                     {"parameters", m_shape.weight_bytes_stored()},
                     {"activation_format", "binary16"},
                     {"tokens", toks},
                     {"commands_computed", m_engine->commands()},
                     {"faults", m_fault == fault_mode::none ? "none" : m_fault == fault_mode::ber ? "ber" : "retention"},
                     {"logits_digest", digest},
                     {"x_tokens", m_x_from_cache ? "cache" : "recompute"},
                     {"x_store_bytes", m_xstore ? m_const - m_xstore : 0},
                     {"recompute_check", {{"rows", m_recomputed_rows}, {"bit_equal", m_recomputed_equal}}},
                     {"ber", m_ber},
                     {"setup_wall_s", m_wall_s}};
}

std::string functional_run::report() const {
  char buf[512];
  const auto& q = m_quality;
  if (!q.rows) {
    std::snprintf(buf, sizeof buf,
                  "  functional         %s: no reference comparison (functional.reference: false); flipped bits "
                  "HST-MSB %.0f HST-LSB %.0f LST-MSB %.0f LST-LSB %.0f\n",
                  m_q.cfg.name.c_str(), m_flipped[0], m_flipped[1], m_flipped[2], m_flipped[3]);
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "  functional         %s: max |logit error| %.3g (logits up to %.3g), KL %.3g, top-1 agreement %.3g "
                "over %u rows; flipped bits HST-MSB %.0f HST-LSB %.0f LST-MSB %.0f LST-LSB %.0f\n",
                m_q.cfg.name.c_str(), q.max_abs_logit_error, q.max_abs_logit, q.kl_divergence(), q.top1_agreement(),
                q.rows, m_flipped[0], m_flipped[1], m_flipped[2], m_flipped[3]);
  return buf;
}

}  // namespace kelle

namespace kelle {
// `functional`: the attention probabilities the platform computed (functional mode only; the
// llm workload builds it itself, with the run that records them).
KELLE_REGISTER(attention_sources(), "functional",
               "the attention probabilities the platform's SFU computed (mode: functional)",
               [](const attention_source_args& a) -> std::unique_ptr<attention_source> {
                 a.cfg.fail("type", "the functional attention source needs the top-level mode: functional");
               });
}  // namespace kelle
