#include "firmware/functional/attention_export.h"

#include "firmware/functional/llama_model.h"
#include "firmware/functional/reference.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kelle::fn {

attention_trace export_attention(const attention_export_args& a) {
  const quantised_model q = quantise(load_weights(a.model));
  if (q.cfg.seq_len && a.tokens > q.cfg.seq_len)
    throw std::runtime_error(a.model + ": the model has " + std::to_string(q.cfg.seq_len) + " positions; " +
                             std::to_string(a.tokens) + " tokens asked");
  std::ifstream in(a.text);
  if (!in) throw std::runtime_error(a.text + ": cannot open the text");
  std::ostringstream s;
  s << in.rdbuf();
  const std::vector<int> text = tokenizer(a.tokenizer, q.cfg.vocab).encode(s.str(), true, false);
  const std::uint64_t need = std::uint64_t(a.sequences) * a.tokens;
  if (text.size() < need)
    throw std::runtime_error(a.text + ": " + std::to_string(text.size()) + " tokens; sequences x tokens = " +
                             std::to_string(need) + " are needed");
  attention_trace t;
  t.sequences = a.sequences;
  t.layers = q.cfg.layers;
  t.heads = q.cfg.heads;
  t.tokens = a.tokens;
  t.logits.assign(need / a.tokens * t.layers * t.heads * attention_trace::triangle(a.tokens), 0.0f);
  for (unsigned seq = 0; seq < a.sequences; ++seq) {
    reference_model ref(q);
    ref.observe_logits([&](unsigned l, unsigned h, std::uint64_t pos, const std::vector<std::uint32_t>& keys,
                           const float* logits) {
      // The reference attends to every position so far (no kept set given): keys = 0 .. pos.
      float* row = &t.logits[t.index(seq, l, h, pos, 0)];
      for (std::size_t j = 0; j < keys.size(); ++j) row[keys[j]] = logits[j];
    });
    for (std::uint32_t i = 0; i < a.tokens; ++i) ref.step(text[std::size_t(seq) * a.tokens + i]);
  }
  return t;
}

}  // namespace kelle::fn
