// The llama2.c checkpoint format (run.c's): reading the header and the weights, and the writer.
#include "firmware/functional/model_files.h"

#include "firmware/functional/llama_model.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>

namespace kelle::fn {

namespace model_files {

llama_config llama2c_config(const std::string& path, const std::string& bytes) {
  if (bytes.size() < 28) bad(path, "shorter than the llama2.c header (7 int32 fields)");
  std::int32_t h[7];
  std::memcpy(h, bytes.data(), sizeof h);
  for (int i = 0; i < 7; ++i)
    if (i != 5 && h[i] <= 0)
      bad(path, "llama2.c header field " + std::to_string(i) + " is " + std::to_string(h[i]) + " (expected > 0)");
  if (h[5] == 0 || h[5] == INT32_MIN) bad(path, "llama2.c header: vocab_size is " + std::to_string(h[5]));
  llama_config c;
  c.name = std::filesystem::path(path).stem().string();
  c.dim = unsigned(h[0]), c.ffn = unsigned(h[1]), c.layers = unsigned(h[2]), c.heads = unsigned(h[3]),
  c.kv_heads = unsigned(h[4]), c.seq_len = unsigned(h[6]);
  c.tied = h[5] > 0;
  c.vocab = unsigned(std::abs(h[5]));
  check_config(path, c);
  return c;
}

std::uint64_t llama2c_floats(const llama_config& c) {
  // Every product and sum checked: a header's fields (up to 2^31 each) can make the count wrap
  // around 2^64 to a small number that a short file then matches. A count that wraps is
  // reported as the largest value (no file has that size).
  const std::uint64_t d = c.dim, f = c.ffn, L = c.layers, kv = c.kv_dim(), hd = c.head_dim();
  std::uint64_t n = 0;
  bool wraps = false;
  auto add = [&](std::initializer_list<std::uint64_t> factors) {
    std::uint64_t p = 1;
    for (std::uint64_t x : factors) wraps |= __builtin_mul_overflow(p, x, &p);
    wraps |= __builtin_add_overflow(n, p, &n);
  };
  add({c.vocab, d});
  add({L, d});
  add({L, d, d});
  add({2, L, d, kv});
  add({L, d, d});
  add({L, d});
  add({3, L, d, f});
  add({d});
  add({2, c.seq_len, hd / 2});
  if (!c.tied) add({c.vocab, d});
  // the file's bytes: 28 + 4 n must fit too
  if (wraps || n > (std::numeric_limits<std::uint64_t>::max() - 28) / 4) return std::numeric_limits<std::uint64_t>::max() / 8;
  return n;
}

llama_weights load_llama2c(const std::string& path, const std::string& bytes) {
  llama_weights w;
  w.cfg = llama2c_config(path, bytes);
  const llama_config& c = w.cfg;
  const std::uint64_t need = 28 + 4 * llama2c_floats(c);
  if (bytes.size() != need)
    bad(path, "llama2.c checkpoint of " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(need) +
                  " for its header (dim " + std::to_string(c.dim) + ", hidden_dim " + std::to_string(c.ffn) +
                  ", layers " + std::to_string(c.layers) + ", vocab " + std::to_string(c.vocab) +
                  (c.tied ? ", shared classifier)" : ", unshared classifier)"));
  const char* p = bytes.data() + 28;
  auto take = [&](std::uint64_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), p, n * 4);
    p += n * 4;
    return v;
  };
  const std::uint64_t d = c.dim, f = c.ffn, kv = c.kv_dim(), L = c.layers;
  w.embed = take(std::uint64_t(c.vocab) * d);
  w.layers.resize(L);
  // Each tensor holds every layer back to back.
  auto per_layer = [&](std::vector<float> llama_weights::layer::*m, std::uint64_t n) {
    for (auto& l : w.layers) l.*m = take(n);
  };
  per_layer(&llama_weights::layer::attn_norm, d);
  per_layer(&llama_weights::layer::wq, d * d);
  per_layer(&llama_weights::layer::wk, kv * d);
  per_layer(&llama_weights::layer::wv, kv * d);
  per_layer(&llama_weights::layer::wo, d * d);
  per_layer(&llama_weights::layer::ffn_norm, d);
  per_layer(&llama_weights::layer::gate, f * d);  // w1
  per_layer(&llama_weights::layer::down, d * f);  // w2
  per_layer(&llama_weights::layer::up, f * d);    // w3
  w.final_norm = take(d);
  p += 4 * 2 * (std::uint64_t(c.seq_len) * c.head_dim() / 2);  // freq_cis_real, freq_cis_imag
  if (!c.tied) w.classifier = take(std::uint64_t(c.vocab) * d);
  return w;
}

}  // namespace model_files

using model_files::bad;

void write_llama2c(const llama_weights& w, const std::string& path) {
  if (w.cfg.latent()) bad(path, "a llama2.c checkpoint has no latent-KV (MLA) tensors");
  std::ofstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot write the file");
  const llama_config& c = w.cfg;
  const std::int32_t h[7] = {std::int32_t(c.dim),      std::int32_t(c.ffn),
                             std::int32_t(c.layers),   std::int32_t(c.heads),
                             std::int32_t(c.kv_heads), c.tied ? std::int32_t(c.vocab) : -std::int32_t(c.vocab),
                             std::int32_t(std::max(1u, c.seq_len))};
  f.write(reinterpret_cast<const char*>(h), sizeof h);
  auto put = [&](const std::vector<float>& v) { f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4)); };
  put(w.embed);
  for (auto m : {&llama_weights::layer::attn_norm, &llama_weights::layer::wq, &llama_weights::layer::wk,
                 &llama_weights::layer::wv, &llama_weights::layer::wo, &llama_weights::layer::ffn_norm,
                 &llama_weights::layer::gate, &llama_weights::layer::down, &llama_weights::layer::up})
    for (const auto& l : w.layers) put(l.*m);
  put(w.final_norm);
  put(std::vector<float>(2 * (std::uint64_t(std::max(1u, c.seq_len)) * c.head_dim() / 2), 0.0f));
  if (!c.tied) put(w.classifier);
}

}  // namespace kelle::fn
