// A KV format that quantises in functional mode (policy.kv_format int8, int4, ...;
// docs/policies/kv-format.md): the values the attention reads from the cache are the format's
// codes of the values written, decoded (kv_format::quantise, dequantise), and the faults flip bits
// of the stored codes. A grouped format's scales are KIVI's (keys per channel over groups of G
// consecutive positions, values per token over groups of G channels; binary16 scale and zero
// point from the group's minimum and maximum); a format without groups has one fixed scale.
//
// How: the engine writes K and V in binary16 into a region of its own (the plan's KV regions are
// sized in the format's bytes, for the timing); every read of it returns code x scale + zero of
// each element, its group's scale and zero point computed from the group's written values. A key
// group's scales are those of the positions it holds now (kept by the head): a group that is not
// full yet, or whose tokens a policy evicted, is quantised over the tokens it has, as KIVI
// quantises a full group at once (KIVI keeps the newest tokens in full precision until their
// group is full; here they are quantised already). The prefill attends to the K and V it computed
// (as KIVI's prefill does): its reads are not quantised. The reference model quantises the kept
// keys and values of each decode step the same way (reference_model::set_kv_format).
#include "firmware/functional/functional_run.h"

#include "models/compute/functional/half.h"

#include <algorithm>
#include <cstring>

namespace kelle {

void functional_run::connect_quantised(memory_plan& plan) {
  m_kv_data.assign(m_shape.layers, {});
  for (unsigned l = 0; l < m_shape.layers; ++l) m_kv_data[l] = {plan.kv(l).k, plan.kv(l).v};
  if (!m_kv_fmt.quantises()) return;
  // One binary16 value per element in the functional layout: [slot][sequence][KV head][head_dim].
  const std::uint64_t bytes = plan.kv_token_slots() * m_batch * m_kvh * m_hd * 2;
  try {
    for (unsigned l = 0; l < m_shape.layers; ++l)
      for (region& r : m_kv_data[l]) {
        r = plan.dram_spare();
        r.addr = plan.reserve_top(align(bytes));
        r.bytes = bytes;
        r.on_chip = false;
      }
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("functional mode: the DRAM has no room for the values of the " + m_kv_fmt.name() +
                             " KV cache above its weights and KV: " + std::string(e.what()));
  }
  m_kv_epoch.assign(m_shape.layers, 0);
  const unsigned G = m_kv_fmt.group();  // 0: one fixed scale (no groups)
  m_key_group_count = G ? (m_context + m_decode + G - 1) / G : 0;
  m_key_groups.assign(std::size_t(m_shape.layers) * m_batch * m_kvh * m_key_group_count, key_group_cache{});
  m_q_row.assign(std::max<std::size_t>(m_hd, G), 0);
  m_q_cache.assign(m_shape.layers, {});
  for (auto& lv : m_q_cache)
    for (auto& c : lv) c.assign(bytes / 2, quantised_element{});
  m_q_lo.assign(m_hd, 0.0f);
  m_q_hi.assign(m_hd, 0.0f);
}

const std::vector<kv_format::group_params>& functional_run::key_group(unsigned l, unsigned b, unsigned kvh,
                                                                     std::uint64_t j) {
  key_group_cache& c = m_key_groups[((std::size_t(l) * m_batch + b) * m_kvh + kvh) * m_key_group_count + j];
  if (c.epoch == m_kv_epoch[l]) return c.ch;
  c.epoch = m_kv_epoch[l];
  // Minimum and maximum of each channel over the positions of [jG, jG + G) the head keeps.
  const std::uint32_t G = m_kv_fmt.group();
  const head_slots& h = hs(l, b, kvh);
  const auto first = std::lower_bound(h.kept.begin(), h.kept.end(), std::uint32_t(j * G));
  const auto last = std::lower_bound(first, h.kept.end(), std::uint32_t((j + 1) * G));
  std::vector<float>&lo = m_q_lo, &hi = m_q_hi;
  std::vector<std::uint16_t>& row = m_q_row;
  for (auto it = first; it != last; ++it) {
    debug(tlm::TLM_READ_COMMAND, kv_addr(l, false, h.pos_slot.at(*it), b, kvh),
          reinterpret_cast<unsigned char*>(row.data()), m_hd * 2);
    for (unsigned ch = 0; ch < m_hd; ++ch) {
      const float x = fn::from_half(row[ch]);
      lo[ch] = it == first ? x : std::min(lo[ch], x);
      hi[ch] = it == first ? x : std::max(hi[ch], x);
    }
  }
  c.ch.resize(m_hd);  // once per group: later recomputations reuse it
  for (unsigned ch = 0; ch < m_hd; ++ch) c.ch[ch] = m_kv_fmt.params(lo[ch], hi[ch]);
  return c.ch;
}

void functional_run::read_quantised(std::uint64_t addr, unsigned char* data, std::uint64_t len) {
  if (m_pass.prefill) return;  // the prefill attends to the K and V it computed
  const double now = sc_core::sc_time_stamp().to_seconds();
  const bool faults = m_fault != fault_mode::none;
  const unsigned G = m_kv_fmt.group(), bits = m_kv_fmt.bits();
  const std::uint32_t lsb = (1u << bits / 2) - 1, msb = ((1u << bits) - 1) & ~lsb;  // the LSB and MSB banks' bits
  const kv_format::group_params fixed = m_kv_fmt.params(0.0f, 0.0f);  // a format without groups: its one scale
  const divider by_group(G ? G : 1);
  std::uint16_t* vals = m_q_row.data();  // a value group read back (G elements)
  for (unsigned l = 0; l < m_shape.layers; ++l)
    for (int v = 0; v < 2; ++v) {
      const region& r = kv_region(l, v);
      const std::uint64_t b = std::max(addr, r.addr), e = std::min(addr + len, r.addr + r.bytes);
      kv_format::group_params vp;
      std::uint64_t vp_group = ~0ull;  // the value group vp is of (element index / G)
      for (std::uint64_t a = b; a + 2 <= e;) {
        // A row of the layout at a time: (slot, sequence, KV head), head_dim elements.
        const kv_row row = row_at(r, a);
        const std::uint64_t row_end = row.end, slot = row.slot;
        const unsigned kvh = row.kvh, sq = row.seq;
        const head_slots& h = hs(l, sq, kvh);
        if (slot >= h.slot_pos.size() || h.slot_pos[slot] < 0) {  // not a stored token
          a += (row_end - a + 1) / 2 * 2;
          continue;
        }
        const std::uint32_t pos = std::uint32_t(h.slot_pos[slot]);
        const std::vector<kv_format::group_params>* kg = v || !G ? nullptr : &key_group(l, sq, kvh, pos / G);
        const bool flips = faults && l < m_kv_on_chip;
        const bool high = flips && pos < h.score.size() && h.score[pos] > h.threshold;
        const bool ber = flips && m_fault == fault_mode::ber;
        const int gm = high ? 0 : 2;
        const std::uint32_t hit = (m_ber_groups[gm] ? msb : 0u) | (m_ber_groups[gm + 1] ? lsb : 0u);
        const std::uint16_t* mask = ber ? m_ber_mask[l][v].data() : nullptr;
        quantised_element* cache = m_q_cache[l][v].data();
        double ber_read = 0;
        for (; a + 2 <= e && a < row_end; a += 2) {
          const std::uint64_t elem = (a - r.addr) / 2;
          kv_format::group_params p;
          if (!G) {
            p = fixed;
          } else if (!v) {
            p = (*kg)[m_hd_div.mod(elem)];
          } else {
            if (by_group.div(elem) != vp_group) {  // the value row's group of G channels, from its written values
              vp_group = by_group.div(elem);
              const std::uint64_t g0 = r.addr + vp_group * G * 2;
              if (g0 >= addr && g0 + G * 2 <= addr + len)  // in this read, not yet rewritten (rows in order)
                std::memcpy(vals, data + (g0 - addr), G * 2);
              else
                debug(tlm::TLM_READ_COMMAND, g0, reinterpret_cast<unsigned char*>(vals), G * 2);
              float lo = fn::from_half(vals[0]), up = lo;
              for (unsigned i = 1; i < G; ++i) {
                lo = std::min(lo, fn::from_half(vals[i]));
                up = std::max(up, fn::from_half(vals[i]));
              }
              vp = m_kv_fmt.params(lo, up);
            }
            p = vp;
          }
          const std::uint16_t stored = std::uint16_t(data[a - addr] | (data[a - addr + 1] << 8));
          // The code and its decoded value of this value at this scale: as last read, or anew.
          quantised_element& q = cache[elem];
          std::uint32_t sb, zb;
          std::memcpy(&sb, &p.scale, 4);
          std::memcpy(&zb, &p.zero, 4);
          if (q.stored != stored || q.scale_bits != sb || q.zero_bits != zb) {
            q.stored = stored;
            q.scale_bits = sb;
            q.zero_bits = zb;
            q.code = m_kv_fmt.quantise(fn::from_half(stored), p);
            q.decoded = fn::to_half(m_kv_fmt.dequantise(q.code, p));
          }
          std::uint32_t code = q.code;
          bool flipped = false;
          if (ber) {  // flip_ber inline: the row's bits read counted once, a code's flips where its mask has any
            ++ber_read;
            if (const std::uint32_t f = mask[elem] & hit) {
              m_flipped[gm] += __builtin_popcount(f & msb);
              m_flipped[gm + 1] += __builtin_popcount(f & lsb);
              code ^= f;
              flipped = true;
            }
          } else if (flips) {
            code = flip(code, bits, l, v, elem, high, now);
            flipped = code != q.code;
          }
          const std::uint16_t out = flipped ? fn::to_half(m_kv_fmt.dequantise(code, p)) : q.decoded;
          data[a - addr] = static_cast<unsigned char>(out & 0xff);
          data[a - addr + 1] = static_cast<unsigned char>(out >> 8);
        }
        m_bits_read[gm] += (bits - bits / 2) * ber_read;
        m_bits_read[gm + 1] += bits / 2 * ber_read;
      }
    }
}

}  // namespace kelle
