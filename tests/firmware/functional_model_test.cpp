// Functional mode, without the platform: binary16, the weight-file loaders (files the tests
// write themselves), the seeded model, the int8 quantisation, the reference model, the
// tokenizer, the quality metrics.
#include <catch2/catch.hpp>

#include "firmware/functional/llama_model.h"
#include "firmware/functional/reference.h"
#include "firmware/workload/model_zoo.h"
#include "models/compute/functional/half.h"
#include "platform/config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <random>

using namespace kelle;
using namespace kelle::fn;

namespace {

llama_config tiny(bool tied = false) {
  llama_config c;
  c.name = "tiny";
  c.dim = 32, c.ffn = 48, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.vocab = 40, c.seq_len = 64;
  c.tied = tied;
  return c;
}

std::string temp_dir(const std::string& tag) {
  const auto d = std::filesystem::temp_directory_path() / ("kelle_fn_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

void same(const std::vector<float>& a, const std::vector<float>& b, double tol = 0) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(std::fabs(a[i] - b[i]) <= tol * (std::fabs(b[i]) + 1e-3));
}

void same_weights(const llama_weights& a, const llama_weights& b, double tol = 0) {
  same(a.embed, b.embed, tol);
  for (unsigned l = 0; l < a.layers.size(); ++l)
    for (auto m : {&llama_weights::layer::attn_norm, &llama_weights::layer::wq, &llama_weights::layer::wk,
                   &llama_weights::layer::wv, &llama_weights::layer::wo, &llama_weights::layer::ffn_norm,
                   &llama_weights::layer::gate, &llama_weights::layer::up, &llama_weights::layer::down})
      same(a.layers[l].*m, b.layers[l].*m, tol);
  same(a.final_norm, b.final_norm, tol);
  same(a.classifier, b.classifier, tol);
}

}  // namespace

TEST_CASE("functional: binary16 conversion is exact for every 16-bit pattern and rounds to nearest even", "[functional]") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = from_half(std::uint16_t(h));
    if (std::isnan(f)) continue;
    REQUIRE(to_half(f) == h);
  }
  CHECK(from_half(to_half(1.0f + 1.0f / 2048)) == 1.0f);  // a tie (half an ulp) goes to the even value
  CHECK(from_half(to_half(1.0f + 3.0f / 2048)) == 1.0f + 2.0f / 1024);  // a tie above an odd value: up
  CHECK(from_half(to_half(1.0f + 1.0f / 4096)) == 1.0f);               // a quarter ulp: down
  CHECK(from_half(to_half(1.0f + 3.0f / 4096)) == 1.0f + 1.0f / 1024);  // 0.75 ulp: up
  CHECK(std::isinf(from_half(to_half(70000.0f))));
  CHECK(from_half(to_half(1e-7f)) == Approx(1.19209e-7).epsilon(1e-3));  // subnormal
}

TEST_CASE("functional: llama2.c checkpoints load back exactly, shared and unshared classifier", "[functional]") {
  const std::string dir = temp_dir("l2c");
  for (bool tied : {true, false}) {
    const llama_weights w = random_weights(tiny(tied), 7);
    const std::string f = dir + (tied ? "/shared.bin" : "/unshared.bin");
    write_llama2c(w, f);
    const llama_weights r = load_weights(f);
    CHECK(r.cfg.dim == 32);
    CHECK(r.cfg.kv_heads == 2);
    CHECK(r.cfg.tied == tied);
    CHECK(r.cfg.vocab == 40);
    same_weights(r, w);
    const llama_config c = read_weights_config(f);
    CHECK(c.layers == 2);
    CHECK(c.ffn == 48);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("functional: safetensors load in F32 exactly and in F16 and BF16 within their rounding", "[functional]") {
  const std::string dir = temp_dir("st");
  const llama_weights w = random_weights(tiny(false), 11);
  write_safetensors(w, dir + "/f32.safetensors", "F32");
  same_weights(load_weights(dir + "/f32.safetensors"), w);  // q/k permuted there and back
  write_safetensors(w, dir + "/f16.safetensors", "F16");
  same_weights(load_weights(dir + "/f16.safetensors"), w, 1.0 / 2048);
  write_safetensors(w, dir + "/bf16.safetensors", "BF16");
  same_weights(load_weights(dir + "/bf16.safetensors"), w, 1.0 / 256);
  // Hyper-parameters from a config.json beside the file win over __metadata__.
  const std::string d2 = dir + "/hf";
  std::filesystem::create_directories(d2);
  write_safetensors(w, d2 + "/model.safetensors", "F32", true);
  const llama_config c = read_weights_config(d2 + "/model.safetensors");
  CHECK(c.heads == 4);
  CHECK(c.kv_heads == 2);
  CHECK(!c.tied);
  std::filesystem::remove_all(dir);
}

TEST_CASE("functional: a bad weights file is a one-line error naming the file and what is wrong", "[functional]") {
  const std::string dir = temp_dir("bad");
  const llama_weights w = random_weights(tiny(false), 3);
  const std::string f = dir + "/cut.bin";
  write_llama2c(w, f);
  std::filesystem::resize_file(f, std::filesystem::file_size(f) - 4);
  auto one_line = [](const std::string& m) { return m.find('\n') == std::string::npos; };
  try {
    load_weights(f);
    FAIL("no error");
  } catch (const model_file_error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith(f + ": llama2.c checkpoint of"));
    CHECK(one_line(e.what()));
  }
  // A safetensors file without one of the tensors.
  llama_weights w2 = w;
  write_safetensors(w2, dir + "/x.safetensors", "F32");
  {
    std::ifstream in(dir + "/x.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const auto at = bytes.find("model.norm.weight");
    REQUIRE(at != std::string::npos);
    bytes[at + 6] = 'X';  // model.Xorm.weight
    std::ofstream(dir + "/y.safetensors", std::ios::binary) << bytes;
  }
  CHECK_THROWS_WITH(load_weights(dir + "/y.safetensors"),
                    dir + "/y.safetensors: no tensor 'model.norm.weight'");
  // Through the scenario: the key path and the file.
  auto cfg = config::from_string("workload: {model: " + f + "}\n", "s.yaml");
  try {
    model_from_config(cfg.root().child("workload"));
    FAIL("no error");
  } catch (const config_error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Matchers::Contains("workload.model: " + f + ": llama2.c checkpoint of"));
    CHECK(one_line(m));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("functional: workload.model may name a weights file and the shape comes from it", "[functional]") {
  const std::string dir = temp_dir("shape");
  write_llama2c(random_weights(tiny(false), 5), dir + "/m.bin");
  auto cfg = config::from_string("workload: {model: " + dir + "/m.bin}\n", "s.yaml");
  const model_shape s = model_from_config(cfg.root().child("workload"));
  CHECK(s.hidden == 32);
  CHECK(s.heads == 4);
  CHECK(s.kv_heads == 2);
  CHECK(s.head_dim == 8);
  CHECK(s.vocab == 40);
  CHECK(!s.tied_embeddings);
  auto cfg2 = config::from_string("workload: {model: llama2-7b}\n", "s.yaml");
  CHECK(model_from_config(cfg2.root().child("workload")).layers == 32);  // names keep working
  std::filesystem::remove_all(dir);
}

TEST_CASE("functional: int8 per-channel quantisation error is within half a step", "[functional]") {
  const llama_weights w = random_weights(tiny(), 1);
  const qmatrix q = quantise(w.layers[0].wq, 32, 32);
  for (unsigned o = 0; o < 32; ++o)
    for (unsigned i = 0; i < 32; ++i)
      REQUIRE(std::fabs(q.at(o, i) - w.layers[0].wq[o * 32 + i]) <= q.scale[o] * 0.5f + 1e-7f);
}

TEST_CASE("functional: the reference model is causal, deterministic and honours kept sets", "[functional]") {
  const quantised_model m = quantise(random_weights(tiny(), 2));
  reference_model a(m), b(m);
  std::vector<float> la, lb;
  for (int t : {3, 9, 1, 30, 7}) {
    la = a.step(t);
    lb = b.step(t, [](unsigned, unsigned) { return nullptr; });
    REQUIRE(la == lb);
  }
  for (float v : la) REQUIRE(std::isfinite(v));
  // Attending to every position explicitly is the same as the full cache.
  reference_model c(m);
  std::vector<float> lc;
  std::vector<std::uint32_t> keys;
  for (int t : {3, 9, 1, 30, 7}) {
    keys.push_back(std::uint32_t(keys.size()));
    lc = c.step(t, [&](unsigned, unsigned) { return &keys; });
  }
  CHECK(lc == la);
  // Dropping a token changes the result.
  reference_model d(m);
  std::vector<float> ld;
  keys.clear();
  for (int t : {3, 9, 1, 30, 7}) {
    keys.push_back(std::uint32_t(d.position()));
    std::vector<std::uint32_t> k2 = keys;
    if (k2.size() > 3) k2.erase(k2.begin() + 1);
    ld = d.step(t, [&](unsigned, unsigned) { return &k2; });
  }
  CHECK(ld != la);
}

TEST_CASE("functional: llama2.c BPE encode with merges, dummy prefix and byte fallback", "[functional]") {
  const std::string dir = temp_dir("tok");
  std::vector<std::string> v = {"<unk>", "<s>", "</s>"};
  std::vector<float> s = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.push_back(buf);
    s.push_back(0);
  }
  for (auto [p, sc] : std::vector<std::pair<std::string, float>>{{" ", -1}, {"a", -2}, {"b", -3}, {"ab", -4}, {" ab", -5}, {"c", -6}})
    v.push_back(p), s.push_back(sc);
  tokenizer::write(dir + "/tok.bin", v, s);
  const tokenizer t(dir + "/tok.bin", unsigned(v.size()));
  const int sp = 259, a = 260, b = 261, ab = 262, sab = 263, c = 264;
  CHECK(t.encode("ab", true, false) == std::vector<int>{1, sab});         // " " + "a" + "b" -> " ab"
  CHECK(t.encode("abc", false, true) == std::vector<int>{sab, c, 2});
  CHECK(t.encode("ba", false, false) == std::vector<int>{sp, b, a});
  CHECK(t.encode("a\xc3\xa9", false, false) == std::vector<int>{sp, a, 0xc3 + 3, 0xa9 + 3});  // é by bytes
  CHECK(t.encode("", true, false) == std::vector<int>{1});
  (void)ab;
  CHECK_THROWS_WITH(tokenizer(dir + "/tok.bin", unsigned(v.size()) + 5),
                    Catch::Matchers::StartsWith(dir + "/tok.bin: ends after 265 tokens"));
  std::filesystem::remove_all(dir);
}

// run.c's merge loop as run.c writes it: scan every pair, merge the best-scoring (the leftmost on
// a tie), again until no pair joins into a piece.
std::vector<int> runc_merges(std::vector<int> t, const std::vector<std::string>& v, const std::vector<float>& s) {
  for (;;) {
    float best = -1e10f;
    int best_id = -1;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < t.size(); ++i) {
      const auto it = std::find(v.begin(), v.end(), v[std::size_t(t[i])] + v[std::size_t(t[i + 1])]);
      const int id = it == v.end() ? -1 : int(it - v.begin());
      if (id >= 0 && s[std::size_t(id)] > best) best = s[std::size_t(id)], best_id = id, at = i;
    }
    if (best_id < 0) return t;
    t[at] = best_id;
    t.erase(t.begin() + std::ptrdiff_t(at) + 1);
  }
}

TEST_CASE("functional: the BPE encoder merges as run.c's scan does, ties included", "[functional]") {
  // Pieces over a four-letter alphabet with few distinct scores (many ties, several splits of one
  // piece), random texts; the encoder's pieces before merging are its single characters.
  const std::string dir = temp_dir("bpe");
  std::mt19937 rng(7);
  std::vector<std::string> v = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  std::vector<float> s(v.size(), 0.0f);
  const std::string abc = "ab c";
  while (v.size() < 259 + 60) {
    std::string p;
    for (std::size_t n = 2 + rng() % 4; p.size() < n;) p += abc[rng() % abc.size()];
    if (std::find(v.begin(), v.end(), p) != v.end()) continue;
    v.push_back(p);
    s.push_back(-float(rng() % 8));
  }
  tokenizer::write(dir + "/tok.bin", v, s);
  const tokenizer t(dir + "/tok.bin", unsigned(v.size()));
  for (int k = 0; k < 200; ++k) {
    std::string text;
    for (std::size_t n = rng() % 40; text.size() < n;) text += abc[rng() % abc.size()];
    std::vector<int> chars = {1};
    if (!text.empty()) chars.push_back(' ' + 3);
    for (char c : text) chars.push_back(int(static_cast<unsigned char>(c)) + 3);
    INFO(text);
    CHECK(t.encode(text, true, false) == runc_merges(chars, v, s));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("functional: quality metrics", "[functional]") {
  quality_metrics q;
  q.add({1, 2, 3}, {1, 2, 3}, 2);
  CHECK(q.max_abs_logit_error == 0);
  CHECK(q.kl_divergence() == Approx(0).margin(1e-12));
  CHECK(q.top1_agreement() == 1);
  q.add({3, 2, 1}, {1, 2, 3});
  CHECK(q.max_abs_logit_error == 2);
  CHECK(q.top1_agreement() == 0.5);
  CHECK(q.kl_divergence() > 0);
  quality_metrics n;
  n.add({NAN, 0, 1}, {0, 0, 1});
  CHECK(n.nonfinite == 1);
  CHECK(argmax({NAN, 0, 1}) == 2);
}
