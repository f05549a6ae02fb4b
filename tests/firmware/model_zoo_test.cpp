// The model zoo: shapes, and sizes that follow from them.
#include <catch2/catch.hpp>

#include "firmware/workload/model_zoo.h"

#include <cmath>

using namespace kelle;

TEST_CASE("models: stored weights match the published parameter counts within 1 %", "[models]") {
  // Parameter counts from the model cards (norm weights and biases are not modelled: < 1 %).
  // Gemma 3 1B: 302M embedding + 698M non-embedding (Gemma 3 technical report, table 1);
  // DeepSeek-V2-Lite 15.7B, OLMoE-1B-7B 6.92B, Qwen3-30B-A3B 30.5B (their model cards).
  const std::vector<std::pair<std::string, double>> published = {
      {"llama2-7b", 6.74e9},  {"llama2-13b", 13.02e9}, {"llama3-8b", 8.03e9},  {"llama3.2-3b", 3.21e9},
      {"mistral-7b", 7.24e9}, {"qwen2-7b", 7.62e9},    {"opt-6.7b", 6.66e9},   {"gemma3-1b", 1.000e9},
      {"mistral-7b-v0.1-swa", 7.24e9}, {"deepseek-v2-lite", 15.7e9}, {"olmoe-1b-7b", 6.92e9},
      {"qwen3-30b-a3b", 30.5e9}};
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
                    Catch::Matchers::Contains("workload.model: expected one of: deepseek-v2-lite, gemma3-1b, llama2-13b, llama2-7b"));
}

// Today's edge models (docs/models/model-zoo.md): each size worked out by hand from the model's
// public config.json, in the binary16 KV format (2 bytes per element), int8 weights (1 byte each).

TEST_CASE("models: Gemma 3 1B sizes by hand (sliding window, one global layer in six)", "[models]") {
  const auto m = models().create("gemma3-1b");
  // Attention: W_q 1152 x (4 x 256) = 1,179,648; W_k, W_v 2 x 1152 x 256 = 589,824; W_o 1,179,648.
  CHECK(m->attn_params() == 2949120);
  // GeGLU FFN: 3 x 1152 x 6912 = 23,887,872; a layer 26,836,992; 26 layers 697,761,792.
  CHECK(m->layer_params(0) == 26836992);
  CHECK(m->all_layer_params() == 697761792);
  // Tied embeddings 262144 x 1152 = 301,989,888, stored once and streamed as the LM head.
  CHECK(m->weight_bytes_stored() == 697761792ull + 301989888);
  CHECK(m->weight_bytes_per_pass() == 697761792ull + 301989888);
  // Dense: a decode step streams every weight at any batch.
  CHECK(m->decode_weight_bytes(1) == 999751680.0);
  CHECK(m->decode_weight_bytes(16) == 999751680.0);
  // KV per token per layer: K and V of 1 KV head of 256 elements: 2 x 1 x 256 x 2 B = 1024 B.
  CHECK(m->kv_bytes_per_token_layer() == 1024);
  // Layers 5, 11, 17, 23 are global ((l + 1) % 6 == 0), the other 22 see 512 tokens.
  unsigned global = 0;
  for (unsigned l = 0; l < m->layers; ++l) {
    CHECK((m->window(l) == 0 || m->window(l) == 512));
    global += m->window(l) == 0;
  }
  CHECK(global == 4);
  CHECK(m->window(5) == 0);
  CHECK(m->window(6) == 512);
  // 8192 tokens: 4 x 8192 x 1024 + 22 x 512 x 1024 = 33,554,432 + 11,534,336 B.
  CHECK(m->kv_bytes_held(8192) == 45088768);
  // Below the window every layer holds every token: 26 x 100 x 1024.
  CHECK(m->kv_bytes_held(100) == 2662400);
  CHECK(m->not_yet_run().empty());  // the firmware runs windowed layers and the gated GeLU FFN
}

TEST_CASE("models: Mistral 7B v0.1 with its sliding window by hand", "[models]") {
  const auto m = models().create("mistral-7b-v0.1-swa"), plain = models().create("mistral-7b");
  // A layer: 2 x 4096^2 (W_q, W_o) + 2 x 4096 x 1024 (W_k, W_v) + 3 x 4096 x 14336 = 218,103,808.
  CHECK(m->layer_params() == 218103808);
  // 32 layers 6,979,321,856 + LM head 32000 x 4096 = 131,072,000 (+ the same again stored).
  CHECK(m->weight_bytes_per_pass() == 7110393856ull);
  CHECK(m->weight_bytes_stored() == 7241465856ull);
  CHECK(m->decode_weight_bytes(1) == 7110393856.0);
  CHECK(m->decode_weight_bytes(16) == 7110393856.0);
  CHECK(m->weight_bytes_stored() == plain->weight_bytes_stored());  // the window changes no weight
  // KV: 2 x 8 KV heads x 128 x 2 B = 4096 B per token per layer, as without the window.
  CHECK(m->kv_bytes_per_token_layer() == 4096);
  CHECK(m->kv_bytes_per_token_layer() == plain->kv_bytes_per_token_layer());
  // Every layer windowed at 4096: 8192 tokens hold 32 x 4096 x 4096 B, half of the plain model's.
  for (unsigned l = 0; l < m->layers; ++l) CHECK(m->window(l) == 4096);
  CHECK(m->kv_bytes_held(8192) == 536870912ull);
  CHECK(plain->kv_bytes_held(8192) == 1073741824ull);
  CHECK(plain->not_yet_run().empty());
  CHECK(m->not_yet_run().empty());
}

TEST_CASE("models: DeepSeek-V2-Lite sizes by hand (latent KV, shared and routed experts)", "[models]") {
  const auto m = models().create("deepseek-v2-lite");
  // MLA: W_q 2048 x 16 x (128 + 64) = 6,291,456 (no q_lora); W_kv_a 2048 x (512 + 64) = 1,179,648;
  // W_kv_b 512 x 16 x (128 + 128) = 2,097,152; W_o 16 x 128 x 2048 = 4,194,304: 13,762,560.
  CHECK(m->attn_params() == 13762560);
  // Layer 0 dense: 3 x 2048 x 10944 = 67,239,936. MoE layers: router 2048 x 64 = 131,072 and
  // (64 + 2) experts x 3 x 2048 x 1408 (8,650,752 each) = 570,949,632: 571,080,704.
  CHECK(m->ffn_layer_params(0) == 67239936);
  CHECK(m->ffn_layer_params(1) == 571080704);
  // Layers: 27 x 13,762,560 + 67,239,936 + 26 x 571,080,704 = 15,286,927,360.
  CHECK(m->all_layer_params() == 15286927360ull);
  // Untied 102400 x 2048 = 209,715,200 embedding and LM head each.
  CHECK(m->weight_bytes_stored() == 15286927360ull + 2 * 209715200ull);
  CHECK(m->weight_bytes_per_pass() == 15286927360ull + 209715200ull);
  // KV: one latent of 512 + 64 elements x 2 B = 1152 B per token per layer (Llama2-7B: 16384).
  CHECK(m->kv_bytes_per_token_layer() == 1152);
  CHECK(m->kv_bytes_held(1000) == 27ull * 1000 * 1152);
  // Decode at batch 1: 6 routed experts of 64, so 26 layers x 58 experts x 8,650,752 B are not read:
  // 15,496,642,560 - 13,045,334,016 = 2,451,308,544 B.
  CHECK(m->expected_experts(1) == Approx(6.0));
  CHECK(m->decode_weight_bytes(1) == Approx(2451308544.0).epsilon(1e-12));
  // Batch 16: E[distinct] = 64 x (1 - (58/64)^16) = 64 x (1 - 0.2069990) = 50.75206;
  // 15,496,642,560 - 26 x (64 - 50.75206) x 8,650,752 = 12,516,922,278 B.
  CHECK(m->expected_experts(16) == Approx(50.752062).epsilon(1e-7));
  CHECK(m->decode_weight_bytes(16) == Approx(12516922278.0).epsilon(1e-9));
}

TEST_CASE("models: OLMoE-1B-7B sizes by hand (64 experts, top-8)", "[models]") {
  const auto m = models().create("olmoe-1b-7b");
  // Attention 4 x 2048^2 = 16,777,216; router 2048 x 64 = 131,072; experts 64 x 3 x 2048 x 1024
  // (6,291,456 each) = 402,653,184: a layer 419,561,472; 16 layers 6,712,983,552.
  CHECK(m->layer_params(0) == 419561472);
  CHECK(m->all_layer_params() == 6712983552ull);
  // Untied 50304 x 2048 = 103,022,592 each.
  CHECK(m->weight_bytes_stored() == 6712983552ull + 2 * 103022592ull);
  CHECK(m->weight_bytes_per_pass() == 6816006144ull);
  // KV: 2 x 16 heads x 128 x 2 B = 8192 B.
  CHECK(m->kv_bytes_per_token_layer() == 8192);
  // Batch 1: 8 of 64 experts: 6,816,006,144 - 16 x 56 x 6,291,456 = 1,178,861,568 B.
  CHECK(m->decode_weight_bytes(1) == Approx(1178861568.0).epsilon(1e-12));
  // Batch 16: 64 x (1 - (56/64)^16) = 64 x (1 - 0.1180671) = 56.44371 experts;
  // 6,816,006,144 - 16 x (64 - 56.44371) x 6,291,456 = 6,055,364,728 B.
  CHECK(m->expected_experts(16) == Approx(56.443706).epsilon(1e-7));
  CHECK(m->decode_weight_bytes(16) == Approx(6055364727.8).epsilon(1e-9));
}

TEST_CASE("models: Qwen3-30B-A3B sizes by hand (128 experts, top-8, GQA)", "[models]") {
  const auto m = models().create("qwen3-30b-a3b");
  // Attention: W_q 2048 x 4096 = 8,388,608; W_k, W_v 2 x 2048 x 512 = 2,097,152; W_o 8,388,608:
  // 18,874,368. Router 2048 x 128 = 262,144; experts 128 x 3 x 2048 x 768 (4,718,592 each) =
  // 603,979,776. A layer 623,116,288; 48 layers 29,909,581,824.
  CHECK(m->attn_params() == 18874368);
  CHECK(m->layer_params(0) == 623116288);
  CHECK(m->all_layer_params() == 29909581824ull);
  // Untied 151936 x 2048 = 311,164,928 each.
  CHECK(m->weight_bytes_stored() == 29909581824ull + 2 * 311164928ull);
  CHECK(m->weight_bytes_per_pass() == 30220746752ull);
  // KV: 2 x 4 KV heads x 128 x 2 B = 2048 B.
  CHECK(m->kv_bytes_per_token_layer() == 2048);
  // Batch 1: 30,220,746,752 - 48 x 120 x 4,718,592 = 3,041,656,832 B.
  CHECK(m->decode_weight_bytes(1) == Approx(3041656832.0).epsilon(1e-12));
  // Batch 16: 128 x (1 - (120/128)^16) = 128 x (1 - 0.3560741) = 82.42251 experts;
  // 30,220,746,752 - 48 x (128 - 82.42251) x 4,718,592 = 19,897,791,222 B.
  CHECK(m->expected_experts(16) == Approx(82.422511).epsilon(1e-7));
  CHECK(m->decode_weight_bytes(16) == Approx(19897791221.6).epsilon(1e-9));
  // The more tokens, the more experts, never more than all of them.
  CHECK(m->expected_experts(1024) <= 128.0);
  CHECK(m->expected_experts(1024) > m->expected_experts(16));
}

TEST_CASE("models: the KV format sizes the latent like any row", "[models]") {
  auto m = *models().create("deepseek-v2-lite");
  auto cfg = config::from_string("policy: {kv_format: int8, kv_group_size: 64}\n");
  m.kv = kv_format::from_config(cfg.root().child("policy"), m.head_dim);
  // int8: 576 codes + 576 / 64 = 9 groups' scales.
  CHECK(m.kv_bytes_per_token_layer() == m.kv.row_bytes(576));
  CHECK(m.kv_bytes_per_token_layer() == 576 + 9 * m.kv.scale_bytes(64));
  CHECK(m.kv_bytes_per_token_layer() == 612);  // a group's binary16 scale and zero point: 4 B
}

TEST_CASE("models: custom windowed, latent and MoE shapes, with errors for bad ones", "[models]") {
  auto cfg = config::from_string(
      "workload:\n  model: {name: edge, layers: 4, hidden: 256, heads: 4, kv_heads: 2, ffn: 512, vocab: 1000,\n"
      "          sliding_window: 64, global_every: 2, experts: 8, experts_per_token: 2, shared_experts: 1,\n"
      "          expert_ffn: 128, first_dense_layers: 1}\n");
  const auto s = model_from_config(cfg.root().child("workload"));
  CHECK(s.window(0) == 64);
  CHECK(s.window(1) == 0);
  CHECK(s.ffn_layer_params(0) == 3ull * 256 * 512);
  CHECK(s.ffn_layer_params(1) == 256ull * 8 + 9ull * 3 * 256 * 128);
  auto latent = config::from_string(
      "workload:\n  model: {layers: 2, hidden: 256, heads: 4, ffn: 512, vocab: 1000, kv_lora_rank: 32,\n"
      "          qk_rope_dim: 16, qk_nope_dim: 32, v_head_dim: 32, q_lora_rank: 64}\n");
  const auto l = model_from_config(latent.root().child("workload"));
  CHECK(l.head_dim == 48);
  CHECK(l.kv_bytes_per_token_layer() == (32 + 16) * 2);
  // W_q through rank 64: 256 x 64 + 64 x 4 x 48; W_kv_a 256 x 48; W_kv_b 32 x 4 x 64; W_o 128 x 256.
  CHECK(l.attn_params() == 256ull * 64 + 64ull * 4 * 48 + 256ull * 48 + 32ull * 4 * 64 + 128ull * 256);
  const std::pair<const char*, const char*> bad[] = {
      {"global_every: 6", "workload.model.global_every: global_every 6 needs sliding_window"},
      {"experts: 8, experts_per_token: 9, expert_ffn: 4", "workload.model.experts_per_token: expected a whole number in [1, 8]"},
      {"experts: 8, experts_per_token: 2", "workload.model.expert_ffn: a mixture of experts needs expert_ffn"},
      {"experts: 8, experts_per_token: 2, expert_ffn: 4, first_dense_layers: 2", "workload.model.first_dense_layers: expected fewer than layers (2)"},
      {"experts_per_token: 2", "workload.model.experts_per_token: experts_per_token is a mixture-of-experts key; give experts too"},
      {"qk_rope_dim: 16", "workload.model.qk_rope_dim: qk_rope_dim is a latent-KV key; give kv_lora_rank too"},
      {"kv_lora_rank: 32, qk_rope_dim: 16, v_head_dim: 8", "workload.model.qk_nope_dim: latent KV (kv_lora_rank 32) needs qk_nope_dim"},
      {"kv_lora_rank: 32, qk_rope_dim: 16, qk_nope_dim: 16, v_head_dim: 8, head_dim: 64", "workload.model.head_dim: with latent KV head_dim must be qk_nope_dim + qk_rope_dim (32), got 64"}};
  for (const auto& [keys, msg] : bad) {
    INFO(keys);
    auto c = config::from_string(std::string("workload:\n  model: {layers: 2, hidden: 64, heads: 4, ffn: 8, vocab: 16, ") +
                                     keys + "}\n", "m.yaml");
    CHECK_THROWS_WITH(model_from_config(c.root().child("workload")), Catch::Matchers::Contains(msg));
  }
  // A run or the estimate refuses what the firmware does not run yet, naming what.
  auto run = config::from_string(
      "workload:\n  model: {name: bottleneck, layers: 2, hidden: 256, heads: 4, ffn: 512, vocab: 1000, kv_lora_rank: 32,\n"
      "          qk_rope_dim: 16, qk_nope_dim: 32, v_head_dim: 32, q_lora_rank: 64}\n",
      "r.yaml");
  CHECK_THROWS_WITH(runnable_model_from_config(run.root().child("workload")),
                    Catch::Matchers::Contains("workload.model: model bottleneck has latent KV with a query bottleneck (q_lora_rank 64)"));
  auto moe = config::from_string("workload: {model: olmoe-1b-7b}\n", "m.yaml");
  CHECK(runnable_model_from_config(moe.root().child("workload")).name == "olmoe-1b-7b");
  auto dense = config::from_string("workload: {model: llama2-7b}\n", "d.yaml");
  CHECK(runnable_model_from_config(dense.root().child("workload")).name == "llama2-7b");
}
