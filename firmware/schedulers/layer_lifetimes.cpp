// layer_ops' activation buffers: produce() places them in the arena, produced() and last_use()
// time their lifetimes (the lifetime_<kind> statistics, the pass trace's records, the lifetime
// rule's transient refresh) and release their eDRAM when they die; alive() and still_alive() say
// which buffers span a stretch of the pass (sampled decode's routed experts).
#include "firmware/schedulers/layer_ops.h"

#include "firmware/policies/refresh/lifetime_rule.h"
#include "models/memory/refresh_control.h"

#include <algorithm>

namespace kelle {

tensor layer_ops::produce(const std::string& kind, std::uint64_t bytes) {
  return produce(kind, bytes, size_rule::fixed);
}

tensor layer_ops::produce(const std::string& kind, std::uint64_t bytes, size_rule rule) {
  tensor t;
  if (m_recording != ~0u) m_arena_rules[m_recording].push_back(rule);
  t.where = m_plan.alloc(bytes);
  t.kind = kind;
  if (m_transient) {  // its fields' refresh, before it is written
    std::uint64_t local = 0;
    if (refresh_control* e = refresh_of(t.where, local)) m_transient->placed(*e, local, bytes);
  }
  return t;
}

unsigned layer_ops::kind_index(const std::string& kind) {
  for (unsigned i = 0; i < m_life_kinds.size(); ++i)
    if (m_life_kinds[i].name == kind) return i;
  m_life_kinds.push_back(lifetime_kind{
      kind, &m_stats.counter("lifetime_" + kind + "_count", "count", "activation buffers of kind " + kind + " that died"),
      &m_stats.counter("lifetime_" + kind + "_s", "s", "their lifetimes, summed (producer done to last consumer done)")});
  return static_cast<unsigned>(m_life_kinds.size() - 1);
}

void layer_ops::produced(tensor& t, const ticket& producer) {
  t.producer = producer;
  int i;
  if (m_free_open.empty()) {
    i = static_cast<int>(m_open.size());
    m_open.emplace_back();
  } else {
    i = m_free_open.back();
    m_free_open.pop_back();
  }
  t.lifetime = i;
  open_life& o = m_open[static_cast<std::size_t>(i)];
  o.kind = kind_index(t.kind);
  o.start = sc_core::SC_ZERO_TIME;
  o.record = -1;
  const std::uint32_t gen = ++o.gen;
  if (m_records) {
    o.record = static_cast<int>(m_records->size());
    m_records->push_back(lifetime_record{t.kind, sc_core::SC_ZERO_TIME, sc_core::SC_ZERO_TIME, true});
  }
  m_drv.after(producer, [this, i, gen] {
    open_life& s = m_open[static_cast<std::size_t>(i)];
    if (s.gen == gen) s.start = sc_core::sc_time_stamp();
  });
}

void layer_ops::alive(alive_set& out) const {
  out.clear();
  for (std::size_t i = 0; i < m_open.size(); ++i)
    if (m_open[i].gen & 1u) out.emplace_back(i, m_open[i].gen);
}

void layer_ops::still_alive(const alive_set& then, std::vector<unsigned>& by_kind) const {
  by_kind.assign(m_life_kinds.size(), 0);
  for (const auto& [i, gen] : then)
    if (m_open[i].gen == gen) ++by_kind[m_open[i].kind];
}

void layer_ops::last_use(tensor& t, const ticket& consumer) {
  const int i = t.lifetime;
  const std::uint32_t gen = i >= 0 ? m_open[static_cast<std::size_t>(i)].gen : 0;
  std::uint64_t local = 0;
  refresh_control* e = refresh_of(t.where, local);
  const std::uint64_t bytes = t.where.bytes;
  std::vector<lifetime_record>* records = m_records;
  m_drv.after(consumer, [this, i, gen, e, local, bytes, records] {
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (i >= 0 && m_open[static_cast<std::size_t>(i)].gen == gen) {
      open_life& slot = m_open[static_cast<std::size_t>(i)];
      const open_life o = slot;
      ++slot.gen;  // closed: a second last_use of a copy of the tensor is ignored
      m_free_open.push_back(i);
      const double life = (now - o.start).to_seconds();
      lifetime_kind& k = m_life_kinds[o.kind];
      *k.count += 1;
      *k.total_s += life;
      k.max_s = std::max(k.max_s, life);
      if (records && o.record >= 0) {
        lifetime_record& r = (*records)[static_cast<std::size_t>(o.record)];
        r.start = o.start;
        r.end = now;
        r.open = false;
      }
      if (m_transient && e)  // the lifetime rule: its unrefreshed fields' refresh or failures
        m_transient->released(*e, bytes, life);
    }
    if (e) e->release(local, bytes);  // dead data is no longer refreshed
  });
}

void layer_ops::depend(const tensor& t, const compute_block* block) {
  if (t.producer.valid() && t.producer.block != block) m_drv.wait(t.producer);
}

void layer_ops::absent(size_rule rule) {
  if (m_recording != ~0u) m_arena_rules[m_recording].push_back(rule);
  m_plan.alloc(0);  // no bytes: in the arena, taking nothing
}

}  // namespace kelle
