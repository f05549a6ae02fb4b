// The model object: its shape, loading (the format readers are in llama2c_file.cpp and
// safetensors_file.cpp), seeded weights, int8 quantisation and the llama2.c tokenizer.
#include "firmware/functional/llama_model.h"

#include "firmware/functional/model_files.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <queue>
#include <random>
#include <sstream>

namespace kelle::fn {

namespace model_files {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw model_file_error(path + ": " + what);
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) bad(path, "is a folder, expected a file");
  if (!std::filesystem::is_regular_file(path, ec)) bad(path, "cannot open the file (not a regular file)");
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > (std::uint64_t(4) << 30)) bad(path, std::to_string(size) + " bytes; a model file may have at most 4 GiB");
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot open the file");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool is_safetensors(const std::string& bytes) {
  // An 8-byte little-endian header length, then a JSON object.
  return bytes.size() >= 10 && bytes[8] == '{';
}

void check_config(const std::string& path, const llama_config& c) {
  if (!c.dim || !c.ffn || !c.layers || !c.heads || !c.kv_heads || !c.vocab)
    bad(path, "every dimension must be at least 1 (dim " + std::to_string(c.dim) + ", hidden_dim " +
                  std::to_string(c.ffn) + ", layers " + std::to_string(c.layers) + ", heads " +
                  std::to_string(c.heads) + ", kv_heads " + std::to_string(c.kv_heads) + ", vocab " +
                  std::to_string(c.vocab) + ")");
  if (c.latent()) {
    if (!c.qk_rope_dim || !c.qk_nope_dim || !c.v_head_dim || c.qk_rope_dim % 2 || (c.kv_lora_rank + c.qk_rope_dim) % 2)
      bad(path, "latent KV needs qk_nope_dim and v_head_dim of at least 1 and an even qk_rope_dim and kv_lora_rank + "
                "qk_rope_dim");
    return;
  }
  if (c.dim % c.heads) bad(path, "dim " + std::to_string(c.dim) + " is not a multiple of heads " + std::to_string(c.heads));
  if (c.heads % c.kv_heads)
    bad(path, "heads " + std::to_string(c.heads) + " is not a multiple of kv_heads " + std::to_string(c.kv_heads));
  if (c.head_dim() % 2) bad(path, "the head dimension " + std::to_string(c.head_dim()) + " is odd (RoPE needs pairs)");
}

}  // namespace model_files

using model_files::bad;
using model_files::check_config;
using model_files::is_safetensors;
using model_files::llama2c_config;
using model_files::llama2c_floats;
using model_files::load_llama2c;
using model_files::load_st;
using model_files::read_file;
using model_files::st_config;

llama_config config_from_shape(const model_shape& m) {
  llama_config c;
  c.name = m.name;
  c.dim = m.hidden, c.ffn = m.ffn, c.layers = m.layers, c.heads = m.heads, c.kv_heads = m.kv_heads, c.vocab = m.vocab;
  c.tied = m.tied_embeddings;
  c.sliding_window = m.sliding_window, c.global_every = m.global_every;
  c.kv_lora_rank = m.kv_lora_rank, c.qk_rope_dim = m.qk_rope_dim, c.qk_nope_dim = m.qk_nope_dim;
  c.v_head_dim = m.v_head_dim;
  return c;
}

bool looks_like_weights_file(const std::string& s) {
  auto ends = [&](const char* e) {
    const std::string x = e;
    return s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (ends(".safetensors") || ends(".bin")) return true;
  std::error_code ec;
  return s.find('/') != std::string::npos && std::filesystem::is_regular_file(s, ec);
}

llama_config read_weights_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    bad(path, "not a regular file, expected a model file");
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot open the file");
  char head[28] = {};
  f.read(head, sizeof head);
  const std::string h(head, static_cast<std::size_t>(f.gcount()));
  if (is_safetensors(h)) {
    const std::string bytes = read_file(path);  // the header may be long; the file is small here
    return st_config(path, bytes);
  }
  f.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(f.tellg());
  const llama_config c = llama2c_config(path, h);
  if (size != 28 + 4 * llama2c_floats(c))
    bad(path, "llama2.c checkpoint of " + std::to_string(size) + " bytes, expected " +
                  std::to_string(28 + 4 * llama2c_floats(c)) + " for its header (and not a safetensors file)");
  return c;
}

namespace {

// A NaN or an infinity in the weights would run through every block and be reported as numbers.
void check_finite(const std::string& path, const char* what, const std::vector<float>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      bad(path, std::string("weight ") + std::to_string(i) + " of " + what + " is " + (std::isnan(v[i]) ? "NaN" : "infinite") +
                    " (expected finite weights)");
}

}  // namespace

llama_weights load_weights(const std::string& path) {
  const std::string bytes = read_file(path);
  llama_weights w = is_safetensors(bytes) ? load_st(path, bytes) : load_llama2c(path, bytes);
  check_finite(path, "the embedding", w.embed);
  for (const auto& l : w.layers)
    for (const auto* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.gate, &l.down, &l.up})
      check_finite(path, "a layer", *v);
  check_finite(path, "the final norm", w.final_norm);
  check_finite(path, "the classifier", w.classifier);
  return w;
}

llama_weights random_weights(const llama_config& c, std::uint64_t seed) {
  check_config("(seeded model)", c);
  llama_weights w;
  w.cfg = c;
  std::mt19937_64 rng(seed);
  auto normal = [&](std::uint64_t n, double stdev) {
    std::normal_distribution<float> d(0.0f, float(stdev));
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  auto norm = [&](std::uint64_t n) {
    std::uniform_real_distribution<float> d(0.8f, 1.2f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  const std::uint64_t d = c.dim, f = c.ffn, kv = c.kv_dim();
  w.embed = normal(std::uint64_t(c.vocab) * d, 1.0);
  w.layers.resize(c.layers);
  const std::uint64_t q = std::uint64_t(c.heads) * c.head_dim(), o = c.latent() ? std::uint64_t(c.heads) * c.v_head_dim : q;
  for (auto& l : w.layers) {
    l.attn_norm = norm(d);
    l.wq = normal(q * d, 1.0 / std::sqrt(double(d)));
    l.wk = normal(kv * d, 1.0 / std::sqrt(double(d)));
    l.wv = normal(kv * d, 1.0 / std::sqrt(double(d)));
    if (c.latent())  // W_kv_b: latent -> every head's key (non-RoPE part) and value
      l.wkv_b = normal(std::uint64_t(c.heads) * (c.qk_nope_dim + c.v_head_dim) * c.kv_lora_rank,
                       1.0 / std::sqrt(double(c.kv_lora_rank)));
    l.wo = normal(d * o, 0.5 / std::sqrt(double(o)));
    l.ffn_norm = norm(d);
    l.gate = normal(f * d, 1.0 / std::sqrt(double(d)));
    l.up = normal(f * d, 1.0 / std::sqrt(double(d)));
    l.down = normal(d * f, 0.5 / std::sqrt(double(f)));
  }
  w.final_norm = norm(d);
  if (!c.tied) w.classifier = normal(std::uint64_t(c.vocab) * d, 1.0 / std::sqrt(double(d)));
  return w;
}

qmatrix quantise(const std::vector<float>& w, unsigned out, unsigned in) {
  qmatrix m;
  m.out = out, m.in = in;
  m.q.resize(std::size_t(out) * in);
  m.scale.resize(out);
  for (unsigned o = 0; o < out; ++o) {
    float mx = 0;
    for (unsigned i = 0; i < in; ++i) mx = std::max(mx, std::fabs(w[std::size_t(o) * in + i]));
    const float s = mx > 0 ? mx / 127.0f : 1.0f;
    m.scale[o] = s;
    for (unsigned i = 0; i < in; ++i) {
      const float v = std::nearbyint(w[std::size_t(o) * in + i] / s);
      m.q[std::size_t(o) * in + i] = static_cast<std::int8_t>(std::max(-127.0f, std::min(127.0f, v)));
    }
  }
  return m;
}

quantised_model quantise(const llama_weights& w) {
  quantised_model m;
  const llama_config& c = w.cfg;
  m.cfg = c;
  const unsigned d = c.dim, f = c.ffn, kv = c.kv_dim(), q = c.heads * c.head_dim();
  const unsigned att = c.latent() ? c.heads * c.v_head_dim : q;  // W_o's input width
  m.embed = quantise(w.embed, c.vocab, d);
  for (const auto& l : w.layers) {
    quantised_model::layer o;
    o.attn_norm = l.attn_norm;
    o.ffn_norm = l.ffn_norm;
    o.wq = quantise(l.wq, q, d);
    o.wk = quantise(l.wk, kv, d);
    o.wv = quantise(l.wv, kv, d);
    o.wo = quantise(l.wo, d, att);
    if (c.latent()) {
      const unsigned r = c.kv_lora_rank, dn = c.qk_nope_dim, dv = c.v_head_dim;
      for (unsigned h = 0; h < c.heads; ++h) {
        const float* b = &l.wkv_b[std::size_t(h) * (dn + dv) * r];
        std::vector<float> uk(std::size_t(r) * dn);  // W_uk_h^T
        for (unsigned i = 0; i < dn; ++i)
          for (unsigned j = 0; j < r; ++j) uk[std::size_t(j) * dn + i] = b[std::size_t(i) * r + j];
        o.uk.push_back(quantise(uk, r, dn));
        o.uv.push_back(quantise(std::vector<float>(b + std::size_t(dn) * r, b + std::size_t(dn + dv) * r), dv, r));
      }
    }
    o.gate = quantise(l.gate, f, d);
    o.up = quantise(l.up, f, d);
    o.down = quantise(l.down, d, f);
    m.layers.push_back(std::move(o));
  }
  m.final_norm = w.final_norm;
  m.classifier = c.tied ? m.embed : quantise(w.classifier, c.vocab, d);
  return m;
}

// ---- tokenizer --------------------------------------------------------------------------------

tokenizer::tokenizer(const std::string& path, unsigned vocab) {
  const std::string b = read_file(path);
  std::size_t p = 4;
  if (b.size() < 4) bad(path, "shorter than the tokenizer header (int32 max_token_length)");
  for (unsigned i = 0; i < vocab; ++i) {
    if (p + 8 > b.size())
      bad(path, "ends after " + std::to_string(i) + " tokens; the model's vocabulary has " + std::to_string(vocab));
    float score;
    std::int32_t len;
    std::memcpy(&score, b.data() + p, 4);
    std::memcpy(&len, b.data() + p + 4, 4);
    p += 8;
    if (len < 0 || p + std::size_t(len) > b.size())
      bad(path, "token " + std::to_string(i) + " has a bad length " + std::to_string(len));
    m_vocab.emplace_back(b.data() + p, std::size_t(len));
    m_scores.push_back(score);
    m_ids.emplace(m_vocab.back(), int(i));
    p += std::size_t(len);
  }
}

void tokenizer::write(const std::string& path, const std::vector<std::string>& vocab, const std::vector<float>& scores) {
  std::ofstream o(path, std::ios::binary);
  std::int32_t mx = 0;
  for (const auto& s : vocab) mx = std::max(mx, std::int32_t(s.size()));
  o.write(reinterpret_cast<const char*>(&mx), 4);
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    const std::int32_t len = std::int32_t(vocab[i].size());
    o.write(reinterpret_cast<const char*>(&scores[i]), 4);
    o.write(reinterpret_cast<const char*>(&len), 4);
    o.write(vocab[i].data(), len);
  }
}

std::vector<int> tokenizer::encode(const std::string& text, bool bos, bool eos) const {
  std::vector<int> t;
  if (bos) t.push_back(1);
  auto lookup = [&](const std::string& s) {
    auto it = m_ids.find(s);
    return it == m_ids.end() ? -1 : it->second;
  };
  if (!text.empty()) {
    const int sp = lookup(" ");
    if (sp >= 0) t.push_back(sp);
  }
  std::string cp;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) cp.clear();  // not a continuation byte: a new code point
    cp += static_cast<char>(c);
    const bool next_cont = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (next_cont && cp.size() < 4) continue;
    const int id = lookup(cp);
    if (id >= 0) {
      t.push_back(id);
    } else {
      for (unsigned char b : cp)  // byte fallback: <0x00> is id 3 (<unk> if the vocabulary has no byte tokens)
        t.push_back(std::size_t(b) + 3 < m_vocab.size() ? int(b) + 3 : 0);
    }
    cp.clear();
  }
  // run.c's merge loop: merge the adjacent pair whose joined piece is in the vocabulary with the
  // best score, the leftmost on a tie, until none is left. Run on a linked list with a heap of the
  // candidate pairs (best score, then leftmost first), in O(n log n) rather than run.c's O(n^2):
  // a popped pair is merged only if its two tokens are still neighbours and unchanged, and then it
  // is the pair run.c's scan would pick, since every current candidate is in the heap.
  struct cand {
    float score;
    std::size_t left, right;
    int left_id, right_id, merged;
    bool operator<(const cand& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  const std::size_t n = t.size();
  std::vector<std::size_t> prev(n), next(n);
  for (std::size_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1;  // n: none (prev[0] wraps)
  std::priority_queue<cand> heap;
  auto offer = [&](std::size_t l, std::size_t r) {
    if (l >= n || r >= n) return;
    const int id = lookup(piece(t[l]) + piece(t[r]));
    if (id >= 0 && m_scores[std::size_t(id)] > -1e10f)  // run.c's floor (also keeps NaN out)
      heap.push({m_scores[std::size_t(id)], l, r, t[l], t[r], id});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) offer(i, i + 1);
  std::vector<bool> gone(n, false);
  while (!heap.empty()) {
    const cand c = heap.top();
    heap.pop();
    if (gone[c.left] || gone[c.right] || next[c.left] != c.right || t[c.left] != c.left_id || t[c.right] != c.right_id)
      continue;
    t[c.left] = c.merged;
    gone[c.right] = true;
    next[c.left] = next[c.right];
    if (next[c.right] < n) prev[next[c.right]] = c.left;
    offer(prev[c.left], c.left);
    offer(c.left, next[c.left]);
  }
  std::vector<int> merged;
  merged.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (!gone[i]) merged.push_back(t[i]);
  t = std::move(merged);
  if (eos) t.push_back(2);
  return t;
}

}  // namespace kelle::fn
