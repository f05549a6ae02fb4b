#include "firmware/functional/llama_model.h"

#include "models/compute/functional/half.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace kelle::fn {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw model_file_error(path + ": " + what);
}

std::string read_file(const std::string& path) {
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

std::uint64_t le64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void check_config(const std::string& path, const llama_config& c) {
  if (!c.dim || !c.ffn || !c.layers || !c.heads || !c.kv_heads || !c.vocab)
    bad(path, "every dimension must be at least 1 (dim " + std::to_string(c.dim) + ", hidden_dim " +
                  std::to_string(c.ffn) + ", layers " + std::to_string(c.layers) + ", heads " +
                  std::to_string(c.heads) + ", kv_heads " + std::to_string(c.kv_heads) + ", vocab " +
                  std::to_string(c.vocab) + ")");
  if (c.dim % c.heads) bad(path, "dim " + std::to_string(c.dim) + " is not a multiple of heads " + std::to_string(c.heads));
  if (c.heads % c.kv_heads)
    bad(path, "heads " + std::to_string(c.heads) + " is not a multiple of kv_heads " + std::to_string(c.kv_heads));
  if (c.head_dim() % 2) bad(path, "the head dimension " + std::to_string(c.head_dim()) + " is odd (RoPE needs pairs)");
}

// ---- llama2.c ---------------------------------------------------------------------------------

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
  const std::uint64_t d = c.dim, f = c.ffn, L = c.layers, kv = c.kv_dim(), hd = c.head_dim();
  std::uint64_t n = std::uint64_t(c.vocab) * d + L * d + L * d * d + 2 * L * d * kv + L * d * d + L * d +
                    3 * L * d * f + d + 2 * std::uint64_t(c.seq_len) * hd / 2;
  if (!c.tied) n += std::uint64_t(c.vocab) * d;
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

// ---- safetensors ------------------------------------------------------------------------------

struct st_file {
  nlohmann::json header;
  const char* data = nullptr;
  std::uint64_t data_bytes = 0;
};

st_file parse_st(const std::string& path, const std::string& bytes) {
  st_file s;
  const std::uint64_t n = le64(bytes.data());
  if (n > bytes.size() - 8) bad(path, "safetensors header length " + std::to_string(n) + " exceeds the file");
  try {
    s.header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const std::exception& e) {
    bad(path, std::string("safetensors header is not valid JSON (") + e.what() + ")");
  }
  if (!s.header.is_object()) bad(path, "safetensors header is not a JSON object");
  s.data = bytes.data() + 8 + n;
  s.data_bytes = bytes.size() - 8 - n;
  return s;
}

// The model's hyper-parameters: config.json beside the file, else __metadata__.
nlohmann::json st_params(const std::string& path, const st_file& s) {
  const auto cj = std::filesystem::path(path).parent_path() / "config.json";
  if (std::filesystem::exists(cj)) {
    try {
      return nlohmann::json::parse(read_file(cj.string()));
    } catch (const model_file_error&) {
      throw;
    } catch (const std::exception& e) {
      bad(cj.string(), std::string("not valid JSON (") + e.what() + ")");
    }
  }
  nlohmann::json m = nlohmann::json::object();
  if (s.header.contains("__metadata__"))
    for (const auto& [k, v] : s.header["__metadata__"].items()) {
      if (!v.is_string()) continue;
      const std::string t = v.get<std::string>();
      if (t == "true" || t == "false") m[k] = t == "true";
      else
        try {
          m[k] = std::stod(t);
        } catch (...) {
          m[k] = t;
        }
    }
  return m;
}

const nlohmann::json& st_entry(const std::string& path, const st_file& s, const std::string& name) {
  if (!s.header.contains(name)) bad(path, "no tensor '" + name + "'");
  return s.header[name];
}

std::vector<std::uint64_t> st_shape(const std::string& path, const st_file& s, const std::string& name) {
  const auto& e = st_entry(path, s, name);
  if (!e.contains("shape") || !e["shape"].is_array()) bad(path, "tensor '" + name + "' has no shape");
  return e["shape"].get<std::vector<std::uint64_t>>();
}

std::vector<float> st_tensor(const std::string& path, const st_file& s, const std::string& name,
                             const std::vector<std::uint64_t>& expect) {
  const auto& e = st_entry(path, s, name);
  const auto shape = st_shape(path, s, name);
  auto str = [](const std::vector<std::uint64_t>& v) {
    std::string o = "[";
    for (std::size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + std::to_string(v[i]);
    return o + "]";
  };
  if (shape != expect) bad(path, "tensor '" + name + "' has shape " + str(shape) + ", expected " + str(expect));
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  const std::string dt = e.value("dtype", "");
  const unsigned eb = dt == "F32" ? 4 : (dt == "F16" || dt == "BF16") ? 2 : 0;
  if (!eb) bad(path, "tensor '" + name + "' has dtype '" + dt + "' (expected F32, F16 or BF16)");
  const auto off = e.value("data_offsets", std::vector<std::uint64_t>{});
  if (off.size() != 2 || off[1] < off[0] || off[1] > s.data_bytes || off[1] - off[0] != n * eb)
    bad(path, "tensor '" + name + "' has data_offsets that do not match its shape and dtype or the file");
  std::vector<float> v(n);
  const char* p = s.data + off[0];
  for (std::uint64_t i = 0; i < n; ++i) {
    if (eb == 4) {
      std::memcpy(&v[i], p + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      if (dt == "F16") {
        v[i] = from_half(h);
      } else {
        const std::uint32_t x = std::uint32_t(h) << 16;
        std::memcpy(&v[i], &x, 4);
      }
    }
  }
  return v;
}

llama_config st_config(const std::string& path, const st_file& s) {
  const nlohmann::json p = st_params(path, s);
  llama_config c;
  c.name = std::filesystem::path(path).stem().string();
  const auto emb = st_shape(path, s, "model.embed_tokens.weight");
  if (emb.size() != 2) bad(path, "tensor 'model.embed_tokens.weight' is not a matrix");
  c.vocab = unsigned(emb[0]), c.dim = unsigned(emb[1]);
  while (s.header.contains("model.layers." + std::to_string(c.layers) + ".self_attn.q_proj.weight")) ++c.layers;
  if (c.layers == 0) bad(path, "no tensor 'model.layers.0.self_attn.q_proj.weight'");
  const auto gate = st_shape(path, s, "model.layers.0.mlp.gate_proj.weight");
  c.ffn = gate.empty() ? 0 : unsigned(gate[0]);
  if (!p.contains("num_attention_heads"))
    bad(path, "the number of heads is not in the tensors: put a config.json (num_attention_heads, "
              "num_key_value_heads) beside the file or in __metadata__");
  auto num = [&](const char* k, double def) { return p.contains(k) && p[k].is_number() ? p[k].get<double>() : def; };
  c.heads = unsigned(num("num_attention_heads", 0));
  c.kv_heads = unsigned(num("num_key_value_heads", c.heads));
  c.rope_theta = float(num("rope_theta", 10000.0));
  c.norm_eps = float(num("rms_norm_eps", 1e-5));
  c.seq_len = unsigned(num("max_position_embeddings", 0));
  c.tied = !s.header.contains("lm_head.weight");
  if (p.contains("tie_word_embeddings") && p["tie_word_embeddings"].is_boolean() &&
      !p["tie_word_embeddings"].get<bool>() && c.tied)
    bad(path, "tie_word_embeddings is false but there is no tensor 'lm_head.weight'");
  check_config(path, c);
  return c;
}

// Hugging Face stores q_proj / k_proj rows of each head as [first halves of the pairs; second
// halves]; the interleaved order puts pair i's two rows at 2i, 2i+1. `to_hf` goes the other way.
std::vector<float> reorder_rope_rows(const std::vector<float>& w, unsigned heads, unsigned hd, unsigned in, bool to_hf) {
  std::vector<float> o(w.size());
  for (unsigned h = 0; h < heads; ++h)
    for (unsigned j = 0; j < 2; ++j)
      for (unsigned i = 0; i < hd / 2; ++i) {
        const std::size_t inter = std::size_t(h) * hd + 2 * i + j, half = std::size_t(h) * hd + j * hd / 2 + i;
        std::memcpy(&o[(to_hf ? half : inter) * in], &w[(to_hf ? inter : half) * in], in * sizeof(float));
      }
  return o;
}

llama_weights load_st(const std::string& path, const std::string& bytes) {
  const st_file s = parse_st(path, bytes);
  llama_weights w;
  w.cfg = st_config(path, s);
  const llama_config& c = w.cfg;
  const std::uint64_t d = c.dim, f = c.ffn, kv = c.kv_dim(), q = std::uint64_t(c.heads) * c.head_dim();
  w.embed = st_tensor(path, s, "model.embed_tokens.weight", {c.vocab, d});
  w.layers.resize(c.layers);
  for (unsigned i = 0; i < c.layers; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    auto& l = w.layers[i];
    l.attn_norm = st_tensor(path, s, pre + "input_layernorm.weight", {d});
    l.wq = reorder_rope_rows(st_tensor(path, s, pre + "self_attn.q_proj.weight", {q, d}), c.heads, c.head_dim(), c.dim, false);
    l.wk = reorder_rope_rows(st_tensor(path, s, pre + "self_attn.k_proj.weight", {kv, d}), c.kv_heads, c.head_dim(), c.dim, false);
    l.wv = st_tensor(path, s, pre + "self_attn.v_proj.weight", {kv, d});
    l.wo = st_tensor(path, s, pre + "self_attn.o_proj.weight", {d, q});
    l.ffn_norm = st_tensor(path, s, pre + "post_attention_layernorm.weight", {d});
    l.gate = st_tensor(path, s, pre + "mlp.gate_proj.weight", {f, d});
    l.up = st_tensor(path, s, pre + "mlp.up_proj.weight", {f, d});
    l.down = st_tensor(path, s, pre + "mlp.down_proj.weight", {d, f});
  }
  w.final_norm = st_tensor(path, s, "model.norm.weight", {d});
  if (!c.tied) w.classifier = st_tensor(path, s, "lm_head.weight", {c.vocab, d});
  return w;
}

}  // namespace

model_shape llama_config::shape() const {
  model_shape m;
  m.name = name;
  m.layers = layers, m.hidden = dim, m.heads = heads, m.kv_heads = kv_heads, m.head_dim = head_dim(), m.ffn = ffn;
  m.ffn_type = ffn_kind::gated_silu;
  m.norm = norm_kind::rmsnorm;
  m.vocab = vocab;
  m.tied_embeddings = tied;
  return m;
}

llama_config config_from_shape(const model_shape& m) {
  llama_config c;
  c.name = m.name;
  c.dim = m.hidden, c.ffn = m.ffn, c.layers = m.layers, c.heads = m.heads, c.kv_heads = m.kv_heads, c.vocab = m.vocab;
  c.tied = m.tied_embeddings;
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
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot open the file");
  char head[28] = {};
  f.read(head, sizeof head);
  const std::string h(head, static_cast<std::size_t>(f.gcount()));
  if (is_safetensors(h)) {
    const std::string bytes = read_file(path);  // the header may be long; the file is small here
    return st_config(path, parse_st(path, bytes));
  }
  f.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(f.tellg());
  const llama_config c = llama2c_config(path, h);
  if (size != 28 + 4 * llama2c_floats(c))
    bad(path, "llama2.c checkpoint of " + std::to_string(size) + " bytes, expected " +
                  std::to_string(28 + 4 * llama2c_floats(c)) + " for its header (and not a safetensors file)");
  return c;
}

llama_weights load_weights(const std::string& path) {
  const std::string bytes = read_file(path);
  if (is_safetensors(bytes)) return load_st(path, bytes);
  return load_llama2c(path, bytes);
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
  for (auto& l : w.layers) {
    l.attn_norm = norm(d);
    l.wq = normal(d * d, 1.0 / std::sqrt(double(d)));
    l.wk = normal(kv * d, 1.0 / std::sqrt(double(d)));
    l.wv = normal(kv * d, 1.0 / std::sqrt(double(d)));
    l.wo = normal(d * d, 0.5 / std::sqrt(double(d)));
    l.ffn_norm = norm(d);
    l.gate = normal(f * d, 1.0 / std::sqrt(double(d)));
    l.up = normal(f * d, 1.0 / std::sqrt(double(d)));
    l.down = normal(d * f, 0.5 / std::sqrt(double(f)));
  }
  w.final_norm = norm(d);
  if (!c.tied) w.classifier = normal(std::uint64_t(c.vocab) * d, 1.0 / std::sqrt(double(d)));
  return w;
}

void write_llama2c(const llama_weights& w, const std::string& path) {
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

void write_safetensors(const llama_weights& w, const std::string& path, const std::string& dtype, bool config_json) {
  const llama_config& c = w.cfg;
  const unsigned eb = dtype == "F32" ? 4 : 2;
  std::vector<std::pair<std::string, std::pair<std::vector<std::uint64_t>, const std::vector<float>*>>> t;
  std::vector<std::vector<float>> permuted;  // keeps the permuted q/k alive
  permuted.reserve(2 * c.layers);
  const std::uint64_t d = c.dim, f = c.ffn, kv = c.kv_dim(), q = std::uint64_t(c.heads) * c.head_dim();
  t.push_back({"model.embed_tokens.weight", {{c.vocab, d}, &w.embed}});
  for (unsigned i = 0; i < c.layers; ++i) {
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    const auto& l = w.layers[i];
    permuted.push_back(reorder_rope_rows(l.wq, c.heads, c.head_dim(), c.dim, true));
    t.push_back({pre + "self_attn.q_proj.weight", {{q, d}, &permuted.back()}});
    permuted.push_back(reorder_rope_rows(l.wk, c.kv_heads, c.head_dim(), c.dim, true));
    t.push_back({pre + "self_attn.k_proj.weight", {{kv, d}, &permuted.back()}});
    t.push_back({pre + "input_layernorm.weight", {{d}, &l.attn_norm}});
    t.push_back({pre + "self_attn.v_proj.weight", {{kv, d}, &l.wv}});
    t.push_back({pre + "self_attn.o_proj.weight", {{d, q}, &l.wo}});
    t.push_back({pre + "post_attention_layernorm.weight", {{d}, &l.ffn_norm}});
    t.push_back({pre + "mlp.gate_proj.weight", {{f, d}, &l.gate}});
    t.push_back({pre + "mlp.up_proj.weight", {{f, d}, &l.up}});
    t.push_back({pre + "mlp.down_proj.weight", {{d, f}, &l.down}});
  }
  t.push_back({"model.norm.weight", {{d}, &w.final_norm}});
  if (!c.tied) t.push_back({"lm_head.weight", {{c.vocab, d}, &w.classifier}});
  nlohmann::json h = nlohmann::json::object();
  nlohmann::json params = {{"num_attention_heads", c.heads},  {"num_key_value_heads", c.kv_heads},
                           {"rope_theta", c.rope_theta},       {"rms_norm_eps", c.norm_eps},
                           {"tie_word_embeddings", c.tied},    {"max_position_embeddings", c.seq_len}};
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : params.items()) meta[k] = v.is_boolean() ? (v.get<bool>() ? "true" : "false") : v.dump();
  h["__metadata__"] = meta;
  std::string data;
  for (const auto& [name, sv] : t) {
    const auto& v = *sv.second;
    const std::uint64_t b = data.size();
    for (float x : v) {
      if (eb == 4) {
        data.append(reinterpret_cast<const char*>(&x), 4);
      } else {
        std::uint16_t hv;
        if (dtype == "F16") {
          hv = to_half(x);
        } else {
          std::uint32_t u;
          std::memcpy(&u, &x, 4);
          u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
          hv = static_cast<std::uint16_t>(u >> 16);
        }
        data.append(reinterpret_cast<const char*>(&hv), 2);
      }
    }
    h[name] = {{"dtype", dtype}, {"shape", sv.first}, {"data_offsets", {b, std::uint64_t(data.size())}}};
  }
  const std::string hs = h.dump();
  std::ofstream o(path, std::ios::binary);
  if (!o) bad(path, "cannot write the file");
  const std::uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) o.put(static_cast<char>((n >> (8 * i)) & 0xff));
  o << hs << data;
  if (config_json) {
    std::ofstream cj((std::filesystem::path(path).parent_path() / "config.json").string());
    cj << params.dump(2);
  }
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
  m.embed = quantise(w.embed, c.vocab, d);
  for (const auto& l : w.layers) {
    quantised_model::layer o;
    o.attn_norm = l.attn_norm;
    o.ffn_norm = l.ffn_norm;
    o.wq = quantise(l.wq, q, d);
    o.wk = quantise(l.wk, kv, d);
    o.wv = quantise(l.wv, kv, d);
    o.wo = quantise(l.wo, d, q);
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
  for (;;) {
    float best = -1e10f;
    int best_id = -1;
    std::size_t best_i = 0;
    for (std::size_t i = 0; i + 1 < t.size(); ++i) {
      const int id = lookup(piece(t[i]) + piece(t[i + 1]));
      if (id >= 0 && m_scores[std::size_t(id)] > best) {
        best = m_scores[std::size_t(id)];
        best_id = id;
        best_i = i;
      }
    }
    if (best_id < 0) break;
    t[best_i] = best_id;
    t.erase(t.begin() + static_cast<std::ptrdiff_t>(best_i) + 1);
  }
  if (eos) t.push_back(2);
  return t;
}

}  // namespace kelle::fn
