// functional_run as the engine's memory port (debug transport through the interconnect), and the
// model in memory: the weights, scales, norms and embedding table written before the run, and
// the host's embedding lookup of each pass.
#include "firmware/functional/functional_run.h"

#include "models/compute/functional/half.h"

#include <algorithm>
#include <sstream>

namespace kelle {

void functional_run::debug(tlm::tlm_command cmd, std::uint64_t addr, unsigned char* p, std::uint64_t len) {
  for (std::uint64_t off = 0; off < len;) {
    const std::uint64_t n = std::min<std::uint64_t>(len - off, 1u << 30);
    tlm::tlm_generic_payload& t = m_dbg;  // one payload for every debug access (its construction allocates)
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
  if (m_kv_fmt.quantises()) read_quantised(addr, p, len);  // the codes' faults too
  else if (m_fault != fault_mode::none && m_kv_on_chip) inject(addr, p, len);
  if (m_act_edram) inject_activations(addr, p, len);
}

void functional_run::write(std::uint64_t addr, const void* src, std::uint64_t len) {
  // The debug payload's data pointer is not const; a write only reads through it.
  debug(tlm::TLM_WRITE_COMMAND, addr, const_cast<unsigned char*>(static_cast<const unsigned char*>(src)), len);
  if ((m_fault != fault_mode::none && m_kv_on_chip) || m_act_edram) note_write(addr, len);  // what inject() reads
  if (m_kv_fmt.quantises())  // a layer's keys changed: its key groups' scales are recomputed at the next read
    for (unsigned l = 0; l < m_shape.layers; ++l) {
      const region& r = kv_region(l, false);
      if (addr < r.addr + r.bytes && addr + len > r.addr) ++m_kv_epoch[l];
    }
}

void functional_run::write_matrix(std::uint64_t addr, const fn::qmatrix& m, std::uint64_t scales, int layer, char kind,
                                  unsigned head) {
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
  m_weights[addr] = weight_info{scales, layer, kind, head};
}

void functional_run::load() {
  m_loaded = true;
  const fn::llama_config& c = m_q.cfg;
  // Constants (scales, norm weights, embedding scales) at the top of DRAM, reserved from the
  // plan's spare DRAM so that activation spills cannot reach them.
  std::uint64_t need = 0;
  for (const auto& l : m_q.layers) {
    for (const fn::qmatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) need += align(m->out * 4, 64);
    for (const auto* ms : {&l.uk, &l.uv})
      for (const fn::qmatrix& m : *ms) need += align(m.out * 4, 64);
  }
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
    // Latent KV: W_kv_b as the absorbed attention reads it (memory_plan::layer_layout): every
    // head's W_uk (qk_nope_dim x kv_lora_rank int8), then every head's W_uv (kv_lora_rank x v_head_dim).
    std::uint64_t kvb = w.kv_b;
    for (unsigned h = 0; h < L.uk.size(); ++h) {
      write_matrix(kvb, L.uk[h], take(L.uk[h].out * 4), li, 'K', h);
      kvb += std::uint64_t(L.uk[h].in) * L.uk[h].out;
    }
    for (unsigned h = 0; h < L.uv.size(); ++h) {
      write_matrix(kvb, L.uv[h], take(L.uv[h].out * 4), li, 'U', h);
      kvb += std::uint64_t(L.uv[h].in) * L.uv[h].out;
    }
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

}  // namespace kelle
