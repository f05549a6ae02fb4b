// The KV slots of every (layer, sequence, KV head): which positions the head keeps and in which
// cache slot, updated before each pass from the policy; the cache addresses of the slots.
#include "firmware/functional/functional_run.h"

#include <algorithm>
#include <iterator>

namespace kelle {

// Of the plan's KV regions: the addresses the firmware's commands carry.
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
  const region& r = kv_region(l, v);
  return r.addr + ((slot * m_batch + b) * m_kvh + kvh) * m_hd * 2;
}

void functional_run::update_kept(const pass_info& p) {
  for (unsigned l = 0; l < m_shape.layers; ++l) {
    const std::uint64_t slots = m_plan->kv_token_slots(l);
    // A windowed layer keeps the last W tokens in a ring of W slots, token t in slot t mod W
    // (layer_ops::kv_slot); a banded prefill's earlier tokens never reach the cache.
    const std::uint64_t W = m_shape.window(l);
    for (unsigned b = 0; b < m_batch; ++b)
      for (unsigned kvh = 0; kvh < m_kvh; ++kvh) {
        head_slots& h = hs(l, b, kvh);
        if (p.prefill) {
          const std::uint64_t lo = W && p.rows > W ? p.rows - W : 0;
          if (p.rows - lo > slots) throw std::logic_error("functional: the context does not fit the KV slots");
          h.kept.clear();
          for (std::uint32_t t = std::uint32_t(lo); t < p.rows; ++t) {
            const std::uint32_t s = std::uint32_t(t % slots);
            h.slot_pos[s] = t;
            h.pos_slot[t] = s;
            h.kept.push_back(t);
          }
          h.next_slot = std::uint32_t(std::min<std::uint64_t>(p.rows, slots));
          continue;
        }
        const std::uint32_t pos = std::uint32_t(p.kv_offset);
        std::vector<std::uint32_t> now;
        if (m_policy) {
          now = m_policy->kept(b, l, kvh);  // the policy drops the token that left a window
        } else {
          now = h.kept;
          if (W && !now.empty() && now.front() + W <= pos) now.erase(now.begin());  // left the window
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
          // The oldest position's slot: in a window that the full ring frees, pos - W's, slot pos mod W.
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
        h.threshold = sc.empty() ? 0.0 : score_median(sc);
      }
  }
}

}  // namespace kelle
