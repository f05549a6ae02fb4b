#include "firmware/llm/roofline.h"

#include "models/compute/compute_block.h"
#include "models/memory/memory_target.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kelle {

roofline::roofline(platform_view& p, std::string dram) : m_dram(std::move(dram)) {
  for (memory_target* m : p.memory_targets()) {
    resource r;
    r.name = m->basename();
    r.mem = m;
    r.rate = m->sustainable_bandwidth_Bps();
    if (std::isfinite(r.rate) && r.rate > 0) m_res.push_back(r);  // an ideal memory costs no time
  }
  for (compute_block* b : p.blocks()) {
    resource r;
    r.name = b->basename();
    r.block = b;
    r.rate = b->clock_Hz();
    m_res.push_back(r);
  }
}

double roofline::counter(const resource& r) const {
  return r.mem ? r.mem->bytes_moved() : r.block->work_cycles_at_peak();
}

void roofline::begin() {
  for (resource& r : m_res) r.start = counter(r);
}

void roofline::end(double simulated_s, std::uint64_t passes) {
  m_simulated_s = simulated_s;
  m_passes = passes;
  m_bound_s = m_no_overlap_s = 0;
  for (resource& r : m_res) {
    r.amount = counter(r) - r.start;
    const double d = r.demand_s();
    if (d > m_bound_s) {
      m_bound_s = d;
      m_bottleneck = r.name;
    }
    if (r.block || r.name == m_dram) m_no_overlap_s += d;
  }
  m_ended = true;
}

nlohmann::json roofline::results() const {
  if (!m_ended) return nullptr;
  nlohmann::json res = nlohmann::json::object();
  for (const resource& r : m_res) {
    nlohmann::json e = {{"demand_s", r.demand_s()},
                        {"share_of_simulated", m_simulated_s > 0 ? r.demand_s() / m_simulated_s : 0.0}};
    if (r.mem) {
      e["bytes"] = r.amount;
      e["sustainable_GBps"] = r.rate / 1e9;
      e["achieved_GBps"] = m_simulated_s > 0 ? r.amount / m_simulated_s / 1e9 : 0.0;
    } else {
      e["work_cycles_at_peak"] = r.amount;
      e["clock_GHz"] = r.rate / 1e9;
    }
    res[r.name] = e;
  }
  const double per = m_passes ? 1.0 / double(m_passes) : 0.0;
  return {{"passes", m_passes},
          {"simulated_s", m_simulated_s},
          {"bound_s", m_bound_s},
          {"no_overlap_s", m_no_overlap_s},
          {"simulated_per_pass_s", m_simulated_s * per},
          {"bound_per_pass_s", m_bound_s * per},
          {"simulated_over_bound", m_bound_s > 0 ? m_simulated_s / m_bound_s : 0.0},
          {"bottleneck", m_bottleneck},
          {"resources", res}};
}

std::string roofline::summary(const std::string& phase) const {
  if (!m_ended || m_bound_s <= 0) return {};
  const double per = 1e3 / double(std::max<std::uint64_t>(m_passes, 1));
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%-18s per pass: first-order bound %.4g ms (%s), no overlap %.4g ms; simulated %.4g ms = %.3g x "
                "the bound",
                ("roofline " + phase).c_str(), m_bound_s * per, m_bottleneck.c_str(), m_no_overlap_s * per,
                m_simulated_s * per, m_simulated_s / m_bound_s);
  return buf;
}

}  // namespace kelle
