#include "firmware/workload/expert_routing.h"

#include "platform/support/hash.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace kelle {

expert_routing::expert_routing(const model_shape& m, const config_node& r, std::uint64_t default_seed, unsigned batch,
                               std::uint64_t context, std::uint64_t decode, bool prefill)
    : m_model(m), m_count(m.experts, 0), m_order(m.experts, 0) {
  const std::string type = r.get_choice("type", "uniform", {"uniform", "trace"});
  m_trace = type == "trace";
  if (m_trace) {
    if (r.has("seed")) r.fail("seed", "a routing trace has no seed (seed is for type uniform)");
    const std::string file = r.get_path("file", "", "the routing trace (CSV: pass,layer,expert,tokens)");
    if (file.empty()) r.missing("file", "a routing trace file (CSV: pass,layer,expert,tokens) for type trace");
    read_trace(r, file, batch, context, decode, prefill);
    m_describe = "trace " + file;
  } else {
    if (r.has("file")) r.fail("file", "a routing trace is read with type: trace (this routing is uniform)");
    m_seed = r.get_uint("seed", default_seed, "seed of the uniform top-k routing (default: the platform's seed)");
    m_describe = "uniform top-" + std::to_string(m.experts_per_token) + " of " + std::to_string(m.experts) + ", seed " +
                 std::to_string(m_seed);
  }
}

const std::vector<expert_routing::load>& expert_routing::route(unsigned pass, unsigned layer, std::uint64_t tokens) {
  if (m_trace) return m_recorded.at(key(pass, layer));  // complete: read_trace checked every pass and layer
  // Each token draws experts_per_token distinct experts by a partial Fisher-Yates shuffle from a
  // generator seeded by (seed, pass, layer): the answer does not depend on what was asked before.
  const unsigned E = m_model.experts, k = m_model.experts_per_token;
  std::fill(m_count.begin(), m_count.end(), 0u);
  for (unsigned e = 0; e < E; ++e) m_order[e] = e;
  std::uint64_t state = splitmix64(splitmix64(m_seed ^ 0x6d6f65ull) ^ key(pass, layer));
  for (std::uint64_t t = 0; t < tokens; ++t)
    for (unsigned j = 0; j < k; ++j) {
      state = splitmix64(state);
      const unsigned pick = j + static_cast<unsigned>(state % (E - j));
      std::swap(m_order[j], m_order[pick]);
      ++m_count[m_order[j]];
    }
  m_out.clear();
  for (unsigned e = 0; e < E; ++e)
    if (m_count[e]) m_out.push_back(load{e, m_count[e]});
  return m_out;
}

void expert_routing::read_trace(const config_node& r, const std::string& file, unsigned batch, std::uint64_t context,
                                std::uint64_t decode, bool prefill) {
  std::ifstream in(file);
  if (!in) r.fail("file", "cannot open the routing trace " + file);
  const unsigned E = m_model.experts, k = m_model.experts_per_token;
  std::string line;
  unsigned n = 0;
  auto bad = [&](const std::string& what) {
    r.fail("file", file + ":" + std::to_string(n) + ": " + what);
  };
  if (!std::getline(in, line)) r.fail("file", file + " is empty; expected the header pass,layer,expert,tokens");
  ++n;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != "pass,layer,expert,tokens") bad("expected the header pass,layer,expert,tokens, got '" + line + "'");
  std::map<std::uint64_t, std::uint64_t> sums;  // tokens x k routed, by (pass, layer)
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::uint64_t v[4];
    std::size_t pos = 0;
    for (int i = 0; i < 4; ++i) {
      const std::size_t end = line.find(',', pos);
      const std::string field = line.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      if (field.empty() || field.find_first_not_of("0123456789") != std::string::npos || field.size() > 12)
        bad("expected four whole numbers pass,layer,expert,tokens, got '" + line + "'");
      v[i] = std::stoull(field);
      if ((i < 3) != (end != std::string::npos)) bad("expected four fields pass,layer,expert,tokens, got '" + line + "'");
      pos = end + 1;
    }
    const std::uint64_t pass = v[0], layer = v[1], expert = v[2], tokens = v[3];
    const std::uint64_t first = prefill ? 0 : 1;
    if (pass < first || pass > decode)
      bad("pass " + std::to_string(pass) + " is not in the run (passes " + std::to_string(first) + " to " +
          std::to_string(decode) + ": 0 the prefill, s decode step s)");
    if (layer >= m_model.layers || !m_model.moe_layer(static_cast<unsigned>(layer)))
      bad("layer " + std::to_string(layer) + " is not a mixture-of-experts layer of " + m_model.name + " (layers " +
          std::to_string(m_model.first_dense_layers) + " to " + std::to_string(m_model.layers - 1) + ")");
    if (expert >= E) bad("expert " + std::to_string(expert) + " is not one of the " + std::to_string(E) + " routed experts");
    const std::uint64_t pass_tokens = pass == 0 ? std::uint64_t(batch) * context : batch;
    if (tokens == 0 || tokens > pass_tokens)
      bad("tokens " + std::to_string(tokens) + ": expected 1 to the pass's " + std::to_string(pass_tokens) + " tokens");
    auto& list = m_recorded[key(static_cast<unsigned>(pass), static_cast<unsigned>(layer))];
    for (const load& l : list)
      if (l.expert == expert) bad("expert " + std::to_string(expert) + " given twice for pass " + std::to_string(pass) +
                                  " layer " + std::to_string(layer));
    list.push_back(load{static_cast<unsigned>(expert), static_cast<std::uint32_t>(tokens)});
    sums[key(static_cast<unsigned>(pass), static_cast<unsigned>(layer))] += tokens;
  }
  for (unsigned pass = prefill ? 0 : 1; pass <= decode; ++pass)
    for (unsigned l = m_model.first_dense_layers; l < m_model.layers; ++l) {
      const std::uint64_t want = (pass == 0 ? std::uint64_t(batch) * context : batch) * k;
      const auto it = sums.find(key(pass, l));
      if (it == sums.end())
        r.fail("file", file + " has no routing for pass " + std::to_string(pass) + " layer " + std::to_string(l) +
                           " (every pass and mixture-of-experts layer of the run needs one)");
      if (it->second != want)
        r.fail("file", file + ": pass " + std::to_string(pass) + " layer " + std::to_string(l) + " routes " +
                           std::to_string(it->second) + " token-experts; its tokens x experts_per_token are " +
                           std::to_string(want));
    }
  for (auto& [_, list] : m_recorded)
    std::sort(list.begin(), list.end(), [](const load& a, const load& b) { return a.expert < b.expert; });
}

}  // namespace kelle
