#include "firmware/workload/attention/trace_source.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kelle {
namespace {

constexpr char magic[8] = {'K', 'E', 'L', 'L', 'E', 'A', 'T', 'T'};
constexpr std::uint32_t version = 1;

std::uint32_t get_u32(const unsigned char* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}
void put_u32(std::ostream& o, std::uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 24)};
  o.write(reinterpret_cast<const char*>(b), 4);
}
float get_f32(const unsigned char* p) {
  const std::uint32_t u = get_u32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

attention_trace attention_trace::read(const std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw std::runtime_error(file + ": is a folder, expected an attention trace file (.katt)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file + ": cannot open the attention trace");
  unsigned char head[28];
  if (!in.read(reinterpret_cast<char*>(head), sizeof head))
    throw std::runtime_error(file + ": too short for an attention trace header (28 bytes)");
  if (std::memcmp(head, magic, 8) != 0)
    throw std::runtime_error(file + ": not an attention trace (magic KELLEATT missing)");
  if (get_u32(head + 8) != version)
    throw std::runtime_error(file + ": attention trace version " + std::to_string(get_u32(head + 8)) +
                             ", expected 1");
  attention_trace t;
  t.sequences = get_u32(head + 12);
  t.layers = get_u32(head + 16);
  t.heads = get_u32(head + 20);
  t.tokens = get_u32(head + 24);
  if (!t.sequences || !t.layers || !t.heads || !t.tokens)
    throw std::runtime_error(file + ": attention trace with a zero dimension");
  // Overflow-safe: each factor is below 2^32, the product is checked step by step.
  std::uint64_t n = 0;
  const bool wraps = __builtin_mul_overflow(std::uint64_t(t.sequences), std::uint64_t(t.layers), &n) ||
                     __builtin_mul_overflow(n, std::uint64_t(t.heads), &n) ||
                     __builtin_mul_overflow(n, triangle(t.tokens), &n);
  if (wraps || n > (std::uint64_t(1) << 32))
    throw std::runtime_error(file + ": attention trace too large to load (more than 2^32 values)");
  // The size the header promises, against the file's, before any memory is spent on it.
  in.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(in.tellg());
  if (size != 28 + 4 * n)
    throw std::runtime_error(file + ": attention trace of " + std::to_string(size) + " bytes; its header (" +
                             std::to_string(t.sequences) + " sequences, " + std::to_string(t.layers) + " layers, " +
                             std::to_string(t.heads) + " heads, " + std::to_string(t.tokens) + " tokens) needs " +
                             std::to_string(28 + 4 * n));
  in.seekg(28);
  std::vector<unsigned char> raw(n * 4);
  if (!in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
    throw std::runtime_error(file + ": attention trace truncated: expected " + std::to_string(n) +
                             " float32 values after the header");
  if (in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(file + ": attention trace has bytes after the last value");
  t.logits.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    t.logits[i] = get_f32(raw.data() + 4 * i);
    if (!std::isfinite(t.logits[i]))
      throw std::runtime_error(file + ": attention trace value " + std::to_string(i) + " is " +
                               (std::isnan(t.logits[i]) ? "NaN" : "infinite") + " (expected finite logits)");
  }
  return t;
}

std::string attention_trace::serialise() const {
  if (logits.size() != std::uint64_t(sequences) * layers * heads * triangle(tokens))
    throw std::logic_error("attention_trace::serialise: logits do not match the dimensions");
  std::ostringstream o(std::ios::binary);
  o.write(magic, 8);
  for (std::uint32_t v : {version, sequences, layers, heads, tokens}) put_u32(o, v);
  for (float f : logits) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    put_u32(o, u);
  }
  return o.str();
}

void attention_trace::write(const std::string& file) const {
  const std::string bytes = serialise();
  std::ofstream o(file, std::ios::binary);
  if (!o) throw std::runtime_error(file + ": cannot write the attention trace");
  o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  o.close();
  if (!o) throw std::runtime_error(file + ": error writing the attention trace");
}

attention_trace record_attention_trace(const attention_source& src, unsigned sequences,
                                       std::uint32_t tokens) {
  attention_trace t;
  t.sequences = sequences;
  t.layers = src.layers();
  t.heads = src.heads();
  t.tokens = tokens;
  t.logits.reserve(std::uint64_t(sequences) * t.layers * t.heads * attention_trace::triangle(tokens));
  std::vector<std::uint32_t> keys(tokens);
  std::vector<double> out(tokens);
  for (std::uint32_t k = 0; k < tokens; ++k) keys[k] = k;
  for (unsigned s = 0; s < sequences; ++s)
    for (unsigned l = 0; l < t.layers; ++l)
      for (unsigned h = 0; h < t.heads; ++h)
        for (std::uint32_t q = 0; q < tokens; ++q) {
          src.scores(s, l, h, q, keys.data(), q + 1, out.data());
          for (std::uint32_t k = 0; k <= q; ++k) t.logits.push_back(static_cast<float>(out[k]));
        }
  return t;
}

namespace {

class trace_source final : public attention_source {
 public:
  explicit trace_source(const attention_source_args& a) : m_layers(a.layers) {
    // Relative to the scenario's folder (as include), else to the built-in scenarios folder.
    const std::string name = a.cfg.require_string("file", "the path of a .katt attention trace");
    std::string file = a.cfg.require_path("file", "the path of a .katt attention trace");
    std::error_code ec;
    if (!std::filesystem::exists(file, ec) && name[0] != '/') {
      const std::string alt = scenarios_dir() + "/" + name;  // e.g. traces/example.katt
      if (std::filesystem::exists(alt, ec)) file = alt;
    }
    m_wrap = a.cfg.get_bool("wrap_layers", true,
                            "a model deeper than the trace reads layer l mod the trace's layers");
    try {
      m_trace = attention_trace::read(file);
    } catch (const std::runtime_error& e) {
      a.cfg.fail("file", e.what());
    }
    if (m_trace.heads != a.heads)
      a.cfg.fail("file", "the trace has " + std::to_string(m_trace.heads) +
                             " heads, the model " + std::to_string(a.heads));
    if (!m_wrap && m_trace.layers < a.layers)
      a.cfg.fail("wrap_layers", "the trace has " + std::to_string(m_trace.layers) +
                                    " layers, the model " + std::to_string(a.layers));
  }

  unsigned layers() const override { return m_layers; }
  unsigned heads() const override { return m_trace.heads; }
  std::uint64_t max_tokens() const override { return m_trace.tokens; }

  void scores(unsigned sequence, unsigned layer, unsigned head, std::uint64_t query,
              const std::uint32_t* keys, std::size_t n, double* out) const override {
    if (query >= m_trace.tokens)
      throw std::out_of_range("trace attention source: query position " + std::to_string(query) +
                              " beyond the trace's " + std::to_string(m_trace.tokens) + " tokens");
    const std::uint64_t base =
        m_trace.index(sequence % m_trace.sequences, layer % m_trace.layers, head, query, 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (keys[i] > query) throw std::out_of_range("trace attention source: key after the query");
      out[i] = m_trace.logits[base + keys[i]];
    }
  }

 private:
  unsigned m_layers;
  bool m_wrap = true;
  attention_trace m_trace;
};

}  // namespace

KELLE_REGISTER(attention_sources(), "trace", "replay of recorded pre-softmax logits (.katt file)",
               [](const attention_source_args& a) -> std::unique_ptr<attention_source> {
                 return std::make_unique<trace_source>(a);
               });

}  // namespace kelle
