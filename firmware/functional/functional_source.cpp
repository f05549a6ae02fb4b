// The `functional` attention source: the attention probabilities the platform's SFU computed,
// as the run recorded them.
#include "firmware/functional/functional_run.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kelle {

namespace {

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

// `functional`: the attention probabilities the platform computed (functional mode only; the
// llm workload builds it itself, with the run that records them).
KELLE_REGISTER(attention_sources(), "functional",
               "the attention probabilities the platform's SFU computed (mode: functional)",
               [](const attention_source_args& a) -> std::unique_ptr<attention_source> {
                 a.cfg.fail("type", "the functional attention source needs the top-level mode: functional");
               });

}  // namespace kelle
