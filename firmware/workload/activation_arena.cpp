#include "firmware/workload/activation_arena.h"

namespace kelle {

bool activation_arena::alloc(std::uint64_t bytes, region& out) {
  const std::uint64_t at = m_used;
  const bool fits = place(m_used, m_region.bytes, bytes);
  if (m_log) m_log->push_back({event::kind::alloc, fits, ~0u, bytes});
  if (!fits) return false;
  out = m_region;
  out.addr = m_region.addr + at;
  out.bytes = bytes;
  return true;
}

activation_arena::mark_t activation_arena::mark() const {
  mark_t m{m_used};
  if (m_log) {
    m.event = static_cast<std::uint32_t>(m_log->size());
    m.log = m_logs;
    m_log->push_back({event::kind::mark, false, ~0u, m_used});
  }
  return m;
}

void activation_arena::release(const mark_t& m) {
  if (m_log) {
    const bool ours = m.event != ~0u && m.log == m_logs;
    m_log->push_back({event::kind::release, false, ours ? m.event : ~0u, m.used});
  }
  m_used = m.used;
}

void activation_arena::record(log* l) {
  m_log = l;
  if (!l) return;
  ++m_logs;
  l->clear();
  l->push_back({event::kind::begin, false, ~0u, m_used});
}

void activation_arena::predict(const log& l, const size_fn& size, const placed_fn& placed) const {
  m_replay_use.assign(l.size(), 0);
  std::uint64_t used = 0;
  std::size_t k = 0;  // allocations so far
  for (std::size_t i = 0; i < l.size(); ++i) {
    const event& e = l[i];
    switch (e.what) {
      case event::kind::begin:
        used = e.bytes;
        break;
      case event::kind::mark:
        m_replay_use[i] = used;
        break;
      case event::kind::release:
        used = e.ref == ~0u ? e.bytes : m_replay_use[e.ref];
        break;
      case event::kind::alloc: {  // alloc()'s rule
        const std::uint64_t bytes = size(k, e, used < m_region.bytes ? m_region.bytes - used : 0);
        const bool fits = place(used, m_region.bytes, bytes);
        placed(k++, bytes, fits, e);
        break;
      }
    }
  }
}

}  // namespace kelle
