// The model zoo: shapes, and sizes that follow from them.
#include <catch2/catch.hpp>

#include "firmware/workload/model_zoo.h"

#include <cmath>

using namespace kelle;

TEST_CASE("models: stored weights match the published parameter counts within 1 %", "[models]") {
  // Parameter counts from the model cards (norm weights and biases are not modelled: < 1 %).
  const std::vector<std::pair<std::string, double>> published = {
      {"llama2-7b", 6.74e9},  {"llama2-13b", 13.02e9}, {"llama3-8b", 8.03e9},  {"llama3.2-3b", 3.21e9},
      {"mistral-7b", 7.24e9}, {"qwen2-7b", 7.62e9},    {"opt-6.7b", 6.66e9}};
  REQUIRE(models().name_list().size() == published.size());
  for (const auto& [name, params] : published) {
    INFO(name);
    const auto m = models().create(name);
    CHECK(static_cast<double>(m->weight_bytes_stored()) == Approx(params).epsilon(0.01));
  }
}

TEST_CASE("models: Llama2-7B sizes by hand", "[models]") {
  const auto m = models().create("llama2-7b");
  const std::uint64_t layer = 4ull * 4096 * 4096 + 3ull * 4096 * 11008;
  CHECK(m->layer_params() == layer);
  CHECK(m->weight_bytes_per_pass() == 32 * layer + 32000ull * 4096);
  CHECK(m->kv_bytes_per_token_layer() == 2 * 4096 * 2);  // 16 KiB per token per layer
  // The paper: an FP16 KV cache of 8192 tokens is 4 GB.
  CHECK(double(m->kv_bytes_per_token_layer() * 32 * 8192) == Approx(4.0 * (1ull << 30)));
}

TEST_CASE("models: grouped-query attention shrinks the KV", "[models]") {
  const auto l3 = models().create("llama3-8b"), q2 = models().create("qwen2-7b");
  CHECK(l3->kv_bytes_per_token_layer() == 2 * 8 * 128 * 2);
  CHECK(q2->kv_bytes_per_token_layer() == 2 * 4 * 128 * 2);
  CHECK(l3->heads / l3->kv_heads == 4);
}

TEST_CASE("models: a custom shape from the scenario, with errors for bad ones", "[models]") {
  auto cfg = config::from_string(
      "workload:\n  model: {name: tiny, layers: 2, hidden: 256, heads: 4, kv_heads: 2, ffn: 512, vocab: 1000}\n");
  const auto s = model_from_config(cfg.root().child("workload"));
  CHECK(s.head_dim == 64);
  CHECK(s.kv_heads == 2);
  CHECK(s.layer_params() == 2ull * 256 * 256 + 2ull * 256 * 128 + 3ull * 256 * 512);
  auto bad = config::from_string("workload:\n  model: {layers: 2, hidden: 256, heads: 4, kv_heads: 3, ffn: 512, vocab: 10}\n", "m.yaml");
  CHECK_THROWS_WITH(model_from_config(bad.root().child("workload")),
                    Catch::Matchers::Contains("multiple of kv_heads"));
  auto unknown = config::from_string("workload: {model: llama9}\n", "u.yaml");
  CHECK_THROWS_WITH(model_from_config(unknown.root().child("workload")),
                    Catch::Matchers::Contains("workload.model: expected one of: llama2-13b, llama2-7b"));
}
