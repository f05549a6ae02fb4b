// Latent KV (multi-head latent attention, DeepSeek-V2) in the firmware, absorbed: the cache holds
// one latent per token and layer, read as it is, once a step (fused, the default) or twice
// (workload.latent_attention: unfused); the KV bytes and the array's multiply-adds of a decode
// step by hand from DeepSeek-V2-Lite's public configuration, the first-order estimate's KV bytes
// beside the run's; AERP never stores x.
#include <catch2/catch.hpp>

#include "firmware/llm/estimate.h"
#include "firmware/policies/kv/kv_policy.h"
#include "firmware/workload/model_zoo.h"
#include "tests/support/llm_run.h"

#include <map>

using namespace kelle;

namespace {

// DeepSeek-V2-Lite's attention (deepseek-ai/DeepSeek-V2-Lite config.json: 27 layers, hidden
// 2048, 16 heads, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128,
// q_lora_rank null) with every layer's FFN dense (its layer 0's, 10944 wide): the mixture of
// experts is another part of the firmware.
const std::string mla =
    "workload.model={name: mla-lite, layers: 27, hidden: 2048, heads: 16, kv_heads: 16, ffn: 10944, vocab: 102400, "
    "kv_lora_rank: 512, qk_rope_dim: 64, qk_nope_dim: 128, v_head_dim: 128}";

}  // namespace

TEST_CASE("latent attention: one latent of 576 elements per token and layer in the cache", "[latent]") {
  // 64 + 4 tokens, 27 layers: the KV written is 68 x 27 latents of (512 + 64) x 2 B.
  const auto r = test::llm_run({mla, "workload.context_len=64", "workload.decode_len=4"});
  CHECK(r["llm"]["kv_bytes_written"].get<double>() == 68.0 * 27 * 576 * 2);
  CHECK(r["kv"]["format"]["bytes_per_token_layer"].get<double>() == 1152);
  // int8 rows: 576 codes and the format's group scales, the same per token and layer.
  const auto i8 = test::llm_run({mla, "workload.context_len=64", "workload.decode_len=4", "policy.kv_format=int8"});
  const double row = i8["kv"]["format"]["bytes_per_token_layer"].get<double>();
  CHECK(row > 576);
  CHECK(row < 1152);
  CHECK(i8["llm"]["kv_bytes_written"].get<double>() == 68.0 * 27 * row);
}

TEST_CASE("latent attention: the KV bytes and multiply-adds of a decode step, by hand, batch 1 and 16", "[latent][slow]") {
  // Decode only, context 1024, one step, full cache, first_layers. Per layer whose latents are in
  // DRAM and sequence: the scores read all 1025 latents (576 x 2 B), the weighted sum takes their
  // first 512 elements from that read (fused), the new latent is written (1152 B) and the RoPE of
  // its key in place (64 elements read, its table read, written: 3 x 128 B). Batch 1: a layer's
  // latents are 1025 x 1152 B (two halves of 590,400 B, each aligned to 4 KiB), so the 4 MiB eDRAM
  // holds 3 layers; batch 16: none.
  for (unsigned batch : {1u, 16u}) {
    INFO("batch " << batch);
    const auto r = test::llm_run({mla, "workload.skip_prefill=true", "workload.context_len=1024",
                                  "workload.decode_len=1", "workload.batch=" + std::to_string(batch),
                                  "workload.placement.kv_placement=first_layers"});
    const double on_chip = batch == 1 ? 3 : 0;
    CHECK(r["llm"]["kv_layers_on_chip"].get<double>() == on_chip);
    CHECK(r["traffic_bytes"]["dram_kv"].get<double>() == batch * (27 - on_chip) * (1025 * 1152 + 1152 + 384.0));
    CHECK(r["llm"]["kv_bytes_written"].get<double>() == batch * 27 * 1152.0);
    // Every weight once: W_q, W_kv_a, W_kv_b (its key half for the queries, its value half for
    // the outputs), W_o, the FFN, the LM head; and the new tokens' embedding rows.
    const auto m = models().create("deepseek-v2-lite");
    CHECK(r["traffic_bytes"]["dram_weights"].get<double>() ==
          double(r["llm"]["weight_bytes_per_pass"].get<double>() + batch * 2048.0));
    // Multiply-adds per layer and sequence: W_q 2048 x 16 x 192, W_kv_a 2048 x 576, the queries
    // into latent space 16 x 128 x 512, the scores 16 x 576 x 1025, the weighted latents 16 x 1025
    // x 512, W_uv 16 x 512 x 128, W_o 16 x 128 x 2048, the FFN 3 x 2048 x 10944; the LM head.
    const double per_layer = 2048.0 * 16 * 192 + 2048 * 576 + 16 * 128 * 512 + 16 * 576 * 1025 + 16 * 1025 * 512 +
                             16 * 512 * 128 + 16 * 128 * 2048 + 3 * 2048 * 10944;
    CHECK(r["stats"]["rsa"]["macs"]["value"].get<double>() == batch * (27 * per_layer + 2048.0 * 102400));
    // The attention's weights are DeepSeek-V2-Lite's (the zoo's sizes).
    CHECK(m->attn_params() == 2048ull * 16 * 192 + 2048 * 576 + 512ull * 16 * 256 + 16 * 128 * 2048);
  }
}

TEST_CASE("latent attention: every scheduler runs it, with the same traffic", "[latent]") {
  std::vector<nlohmann::json> rs;
  for (const char* s : {"baseline", "kelle", "prefetch"})
    rs.push_back(test::llm_run({mla, "workload.context_len=64", "workload.decode_len=2", std::string("scheduler=") + s}));
  for (const auto& r : rs) {
    CHECK(r["traffic_bytes"]["dram_weights"] == rs[0]["traffic_bytes"]["dram_weights"]);
    CHECK(r["llm"]["kv_bytes_written"] == rs[0]["llm"]["kv_bytes_written"]);
    CHECK(r["stats"]["rsa"]["macs"]["value"] == rs[0]["stats"]["rsa"]["macs"]["value"]);
  }
  CHECK(rs[1]["latency_s"]["total"].get<double>() < rs[0]["latency_s"]["total"].get<double>());
}

TEST_CASE("latent attention: AERP never stores x on latent layers (the latent is smaller)", "[latent][kv]") {
  // Evicting (N' 64 of 256 + 8) with every popular token allowed to convert, whatever the sizes:
  // still no x token, nothing recomputed; the evictor picks one victim per sequence (one cache head).
  const auto r = test::llm_run({mla, "workload.context_len=256", "workload.decode_len=8", "policy.kv=aerp",
                                "policy.kv_budget=64", "policy.recent_window=16", "policy.x_only_if_smaller=false",
                                "policy.recompute=all"});
  CHECK(r["kv"]["tokens_as_x"].get<double>() == 0);
  CHECK(r["kv"]["recompute_macs"].get<double>() == 0);
  CHECK(r["kv"]["tokens_kept"].get<double>() == 64.0 * 27);  // one cache head a layer
  // The policy itself: with latent KV it can never store x.
  model_shape m = *models().create("deepseek-v2-lite");
  m.kv_heads = m.cache_heads();
  auto cfg = config::from_string("kv: {kv_budget: 64, recent_window: 16, x_only_if_smaller: false}\nattention: {}\n");
  const auto src = make_attention_source({cfg.root().child("attention"), m.layers, m.heads});
  auto aerp = kv_policies().create("aerp", kv_policy_args{cfg.root().child("kv"), m, 1, src.get()});
  CHECK(aerp->recomputes());
  CHECK_FALSE(aerp->can_store_x());
}

TEST_CASE("latent attention: DeepSeek-V2-Lite reads each cached latent once a step fused, twice unfused, the estimate's KV bytes the run's",
          "[latent][slow]") {
  // DeepSeek-V2-Lite as the zoo has it (deepseek-ai/DeepSeek-V2-Lite config.json: kv_lora_rank 512,
  // qk_rope_head_dim 64, 27 layers): a cached latent is (512 + 64) x 2 B = 1152 B in binary16.
  // Decode only, context 1024, two steps, first_layers: step s attends N = 1025 + s latents. Per
  // layer in DRAM, fused (the default), a step reads N x 1152 B (the scores' read, which the
  // weighted sum reuses) and writes the new latent (1152 B) and its key's RoPE (3 x 128 B);
  // unfused (workload.latent_attention: unfused) the weighted sum reads the latents' first 512
  // elements again: N x (1152 + 1024) B.
  const auto m = models().create("deepseek-v2-lite");
  const double row = (m->kv_lora_rank + m->qk_rope_dim) * 2.0;
  REQUIRE(m->layers == 27);
  CHECK(row == 1152);
  CHECK(m->kv_bytes_per_token_layer() == 1152);
  const std::vector<std::string> o = {"workload.model=deepseek-v2-lite", "workload.skip_prefill=true",
                                      "workload.context_len=1024", "workload.decode_len=2",
                                      "workload.placement.kv_placement=first_layers"};
  std::map<std::string, nlohmann::json> runs;
  for (const char* k : {"fused", "unfused"}) {
    std::vector<std::string> ok = o;
    if (k == std::string("unfused")) ok.push_back("workload.latent_attention=unfused");
    runs[k] = test::llm_run(ok);
  }
  const double in_dram = 27 - runs["fused"]["llm"]["kv_layers_on_chip"].get<double>();
  REQUIRE(in_dram > 0);
  REQUIRE(in_dram < 27);  // both kinds of layer: the eDRAM's latents read once too (no DRAM bytes)
  for (const auto& [k, r] : runs) {
    INFO(k);
    const double per_token = k == "fused" ? row : row + m->kv_lora_rank * 2.0;
    CHECK(per_token == (k == "fused" ? 1152 : 2176));
    const auto steps = test::decode_column(r, 6);  // steps.csv: dram_kv_bytes, 6 digits
    REQUIRE(steps.size() == 2);
    double total = 0;
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const double want = in_dram * ((1025.0 + s) * per_token + 1152 + 384);
      CHECK(steps[s] == Approx(want).epsilon(1e-5));
      total += want;
    }
    CHECK(r["traffic_bytes"]["dram_kv"].get<double>() == total);
    CHECK(r["stats"]["rsa"]["macs"]["value"] == runs["fused"]["stats"]["rsa"]["macs"]["value"]);  // the same math
  }
  // The first-order estimate issues the same commands: its DRAM KV bytes are the run's, fused and
  // unfused (its models in a process of their own: they are not bound into a platform).
  for (const char* k : {"fused", "unfused"}) {
    INFO(k);
    std::vector<std::string> ok = o;
    ok.insert(ok.end(), {"policy.kv=full", "policy.refresh=none", "workload.progress=false",
                         std::string("workload.latent_attention=") + k});
    const std::string out = test::in_child_process([&] {
      auto cfg = std::make_shared<config>(config::from_string("system: kelle_edram\nworkload: {type: llm}\n", "e.yaml", ok));
      return first_order_estimate().evaluate(cfg).dump();
    });
    INFO(out.substr(0, 300));
    REQUIRE(out.rfind("error: ", 0) != 0);
    const auto est = nlohmann::json::parse(out);
    CHECK(est["placement"]["kv_layers_on_chip"].get<double>() == 27 - in_dram);
    CHECK(est["phases"]["decode"]["dram_kv_bytes"].get<double>() == runs[k]["traffic_bytes"]["dram_kv"].get<double>());
    CHECK(est["phases"]["prefill"]["dram_kv_bytes"].get<double>() == 0);  // skipped
  }
}

TEST_CASE("latent attention: a bad latent_attention value is one error line naming the key", "[latent]") {
  try {
    test::llm_run({mla, "workload.latent_attention=twice"});
    FAIL("accepted");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("latent_attention") != std::string::npos);
    CHECK(what.find("fused") != std::string::npos);
    CHECK(what.find("unfused") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
}
