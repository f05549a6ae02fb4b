// The safetensors format with Hugging Face Llama tensor names: parsing, the shape from the
// tensors and config.json or __metadata__, the weights (RoPE rows reordered), and the writer.
#include "firmware/functional/model_files.h"

#include "firmware/functional/llama_model.h"

#include "models/compute/functional/half.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kelle::fn {

namespace model_files {

namespace {

std::uint64_t le64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

struct st_file {
  nlohmann::json header;
  const char* data = nullptr;
  std::uint64_t data_bytes = 0;
};

st_file parse_st(const std::string& path, const std::string& bytes) {
  st_file s;
  if (bytes.size() < 8) bad(path, "shorter than a safetensors header length (8 bytes)");
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
  std::error_code ec;
  if (std::filesystem::exists(cj, ec)) {
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
  if (!e.is_object() || !e.contains("shape") || !e["shape"].is_array()) bad(path, "tensor '" + name + "' has no shape");
  std::vector<std::uint64_t> shape;
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (1u << 30))
      bad(path, "tensor '" + name + "' has a shape that is not a list of sizes in [0, 2^30]");
    shape.push_back(d.get<std::uint64_t>());
  }
  if (shape.size() > 4) bad(path, "tensor '" + name + "' has " + std::to_string(shape.size()) + " dimensions (expected at most 4)");
  return shape;
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
  std::uint64_t n = 1;  // the shape equals the expected one, whose sizes the header bounds
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n)) bad(path, "tensor '" + name + "' has more elements than 2^64");
  const std::string dt = e.contains("dtype") && e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
  const unsigned eb = dt == "F32" ? 4 : (dt == "F16" || dt == "BF16") ? 2 : 0;
  if (!eb) bad(path, "tensor '" + name + "' has dtype '" + dt + "' (expected F32, F16 or BF16)");
  std::vector<std::uint64_t> off;
  if (e.contains("data_offsets") && e["data_offsets"].is_array())
    for (const auto& o : e["data_offsets"])
      if (o.is_number_unsigned()) off.push_back(o.get<std::uint64_t>());
  std::uint64_t bytes = 0;
  if (off.size() != 2 || off[1] < off[0] || off[1] > s.data_bytes || __builtin_mul_overflow(n, std::uint64_t(eb), &bytes) ||
      off[1] - off[0] != bytes)
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

llama_config header_config(const std::string& path, const st_file& s) {
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
  if (!p.is_object()) bad(path, "the model's parameters (config.json or __metadata__) are not a JSON object");
  auto num = [&](const char* k, double def, double lo, double hi) {
    const double v = p.contains(k) && p[k].is_number() ? p[k].get<double>() : def;
    if (!(v >= lo && v <= hi))
      bad(path, std::string(k) + " is " + std::to_string(v) + " (expected a number in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "])");
    return v;
  };
  const double dim_max = double(1u << 30);
  c.heads = unsigned(num("num_attention_heads", 0, 0, dim_max));
  c.kv_heads = unsigned(num("num_key_value_heads", c.heads, 0, dim_max));
  c.rope_theta = float(num("rope_theta", 10000.0, 1e-30, 1e30));
  c.norm_eps = float(num("rms_norm_eps", 1e-5, 0, 1));
  c.seq_len = unsigned(num("max_position_embeddings", 0, 0, dim_max));
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

}  // namespace

llama_config st_config(const std::string& path, const std::string& bytes) {
  return header_config(path, parse_st(path, bytes));
}

llama_weights load_st(const std::string& path, const std::string& bytes) {
  const st_file s = parse_st(path, bytes);
  llama_weights w;
  w.cfg = header_config(path, s);
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

}  // namespace model_files

using model_files::bad;
using model_files::reorder_rope_rows;

void write_safetensors(const llama_weights& w, const std::string& path, const std::string& dtype, bool config_json) {
  const llama_config& c = w.cfg;
  if (c.latent()) bad(path, "the Llama tensor names have no latent-KV (MLA) tensors");
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

}  // namespace kelle::fn
