// Mixture of experts in the firmware: a decode step streams the router, the shared experts and the
// routed experts its batch uses, each once; the bytes by hand from the public configurations of
// OLMoE-1B-7B (allenai/OLMoE-1B-7B-0924 config.json: 16 layers, hidden 2048, 64 experts, top-8,
// expert width 1024) and DeepSeek-V2-Lite (27 layers, its layer 0 dense, 64 routed experts, top-6,
// 2 shared, expert width 1408, latent KV); a routing trace decides the experts when given.
#include <catch2/catch.hpp>

#include "firmware/llm/estimate.h"
#include "firmware/workload/model_zoo.h"
#include "tests/support/llm_run.h"

#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace kelle;

namespace {

std::vector<double> decode_weight_bytes(const nlohmann::json& r) { return test::decode_column(r, 5); }

}  // namespace

TEST_CASE("moe: OLMoE-1B-7B's decode step at batch 1 streams 8 of 64 experts a layer, by hand", "[moe][slow]") {
  // A layer: attention 4 x 2048^2 = 16,777,216 B, router 2048 x 64 = 131,072 B, an expert 3 x 2048
  // x 1024 = 6,291,456 B; the LM head 50304 x 2048 = 103,022,592 B. One token routes to 8 distinct
  // experts: 16 x (16,777,216 + 131,072 + 8 x 6,291,456) + 103,022,592 = 1,178,861,568 B, and the
  // token's embedding row (2048 B).
  const auto r = test::llm_run({"workload.model=olmoe-1b-7b", "workload.skip_prefill=true", "workload.context_len=16",
                                "workload.decode_len=3"});
  for (double w : decode_weight_bytes(r)) CHECK(w == Approx(1178861568.0 + 2048).epsilon(1e-5));  // steps.csv: 6 digits
  CHECK(r["traffic_bytes"]["dram_weights"].get<double>() == 3 * (1178861568.0 + 2048));
  CHECK(r["llm"]["moe"]["decode"]["experts_per_layer"].get<double>() == 8.0);
  CHECK(r["llm"]["moe"]["decode"]["expected_uniform"].get<double>() == Approx(8.0));
  CHECK(r["llm"]["moe"]["routing"].get<std::string>() == "uniform top-8 of 64, seed 1");
}

TEST_CASE("moe: at batch 16 a step streams the distinct experts its tokens route to, near E(1 - (1 - k/E)^B)", "[moe][slow]") {
  // Uniform top-8 routing of 16 tokens: 64 x (1 - (56/64)^16) = 56.44 distinct experts a layer
  // expected. Each step streams exactly the experts its routing gives: the dense part (attention,
  // routers, LM head: 6,816,006,144 - 16 x 64 x 6,291,456 = 373,555,200 B), the experts used x
  // 6,291,456 B, and 16 embedding rows.
  const auto r = test::llm_run({"workload.model=olmoe-1b-7b", "workload.skip_prefill=true", "workload.context_len=16",
                                "workload.decode_len=8", "workload.batch=16"});
  const double per_layer = r["llm"]["moe"]["decode"]["experts_per_layer"].get<double>();
  const double total = r["traffic_bytes"]["dram_weights"].get<double>();
  CHECK(total == 8 * (373555200.0 + 16 * 2048) + 8 * 16 * per_layer * 6291456.0);
  // 128 layer passes: the mean within 2 % of the expectation (its standard error is about 0.2).
  CHECK(per_layer == Approx(56.443706).epsilon(0.02));
  CHECK(per_layer < 64);
  // Steps differ by their routing; the mean step within 2 % of decode_weight_bytes(16).
  const double expected = r["llm"]["moe"]["decode_weight_bytes_expected"].get<double>() + 16 * 2048;
  CHECK(total / 8 == Approx(expected).epsilon(0.02));
  // Another seed routes otherwise.
  const auto other = test::llm_run({"workload.model=olmoe-1b-7b", "workload.skip_prefill=true", "workload.context_len=16",
                                    "workload.decode_len=8", "workload.batch=16", "workload.routing.seed=7"});
  CHECK(other["traffic_bytes"]["dram_weights"].get<double>() != total);
}

TEST_CASE("moe: DeepSeek-V2-Lite (latent KV, a dense first layer, 2 shared experts) at batch 1, by hand", "[moe][latent][slow]") {
  // Per pass 15,496,642,560 B if every expert were read; a token routes to 6 of 64: 26 MoE layers
  // x 58 experts x 8,650,752 B are not read: 2,451,308,544 B, and the embedding row (2048 B).
  const auto r = test::llm_run({"workload.model=deepseek-v2-lite", "workload.skip_prefill=true",
                                "workload.context_len=16", "workload.decode_len=2"});
  for (double w : decode_weight_bytes(r)) CHECK(w == Approx(2451308544.0 + 2048).epsilon(1e-5));  // steps.csv: 6 digits
  CHECK(r["traffic_bytes"]["dram_weights"].get<double>() == 2 * (2451308544.0 + 2048));
  CHECK(r["llm"]["moe"]["decode"]["experts_per_layer"].get<double>() == 6.0);
  CHECK(r["llm"]["moe"]["moe_layers"].get<unsigned>() == 26);
}

TEST_CASE("moe: every scheduler streams the same experts and Kelle's overlap is faster than the baseline's", "[moe][slow]") {
  std::map<std::string, nlohmann::json> runs;
  for (const char* s : {"kelle", "baseline", "prefetch"})
    runs[s] = test::llm_run({"workload.model=olmoe-1b-7b", std::string("scheduler=") + s, "workload.context_len=32",
                             "workload.decode_len=2", "workload.batch=4"});
  const double w = runs["kelle"]["traffic_bytes"]["dram_weights"].get<double>();
  for (const auto& [name, r] : runs) {
    INFO(name);
    CHECK(r["traffic_bytes"]["dram_weights"].get<double>() == w);
    CHECK(r["llm"]["moe"]["prefill"]["experts_per_layer"].get<double>() == 64.0);  // 128 tokens x 8: all
  }
  CHECK(runs["kelle"]["latency_s"]["total"].get<double>() < runs["baseline"]["latency_s"]["total"].get<double>());
}

TEST_CASE("moe: a routing trace decides which experts each pass streams", "[moe]") {
  // A small MoE shape (2 layers, 4 experts of width 32, top-2; hidden 64): every token of every pass
  // routed to experts 1 and 3. A decode step then streams 2 experts a layer: attention 4 x 64 x 64
  // (heads x head_dim = 64; kv_heads 2: W_k, W_v 64 x 32) = 2 x 4096 + 2 x 2048, router 64 x 4,
  // two experts 3 x 64 x 32 each; the LM head 256 x 64; the token's embedding row.
  char dir[] = "/tmp/kelle_moe_XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string file = std::string(dir) + "/routing.csv";
  {
    std::ofstream o(file);
    o << "pass,layer,expert,tokens\n";
    for (unsigned pass = 0; pass <= 3; ++pass)
      for (unsigned layer = 0; layer < 2; ++layer)
        for (unsigned e : {1u, 3u}) o << pass << ',' << layer << ',' << e << ',' << (pass == 0 ? 8 : 1) << '\n';
  }
  const std::string model =
      "workload.model={name: tiny-moe, layers: 2, hidden: 64, heads: 4, kv_heads: 2, ffn: 128, vocab: 256, experts: 4, "
      "experts_per_token: 2, expert_ffn: 32}";
  const auto r = test::llm_run({model, "workload.context_len=8", "workload.decode_len=3", "workload.routing.type=trace",
                                "workload.routing.file=" + file});
  const double step = 2 * (2 * 4096 + 2 * 2048 + 64 * 4 + 2 * 3 * 64 * 32) + 256 * 64 + 64;
  for (double w : decode_weight_bytes(r)) CHECK(w == Approx(step).epsilon(1e-5));
  CHECK(decode_weight_bytes(r).size() == 3);
  CHECK(r["llm"]["moe"]["decode"]["experts_per_layer"].get<double>() == 2.0);
  CHECK(r["llm"]["moe"]["prefill"]["experts_per_layer"].get<double>() == 2.0);
  // Uniform routing of the prefill's 8 tokens uses more experts (top-2 of 4: 3.6 expected).
  const auto u = test::llm_run({model, "workload.context_len=8", "workload.decode_len=3"});
  CHECK(u["llm"]["moe"]["prefill"]["experts_per_layer"].get<double>() > 2.0);
  std::remove(file.c_str());
  rmdir(dir);
}

TEST_CASE("moe: the first-order estimate takes the expected experts (and latent attention), beside the simulated run",
          "[moe][latent][slow]") {
  // OLMoE-1B-7B and DeepSeek-V2-Lite (latent attention, shared experts) at batch 1 and 16, context
  // 64, 4 steps: the estimate's decode step and prefill within 10 % of the simulated ones (its
  // reach on the eDRAM systems, docs/explore.md).
  for (const std::string model : {"olmoe-1b-7b", "deepseek-v2-lite"})
  for (unsigned batch : {1u, 16u}) {
    INFO(model << ", batch " << batch);
    const std::vector<std::string> o = {"workload.model=" + model, "workload.context_len=64",
                                        "workload.decode_len=4", "workload.batch=" + std::to_string(batch),
                                        "policy.kv=full", "policy.refresh=none"};
    // The system as it is (llm_run's larger transactions keep the totals, not the timing); the
    // estimate in a process of its own (its models are not bound into a platform).
    std::vector<std::string> run = o;
    run.push_back("workload.progress=false");
    auto in_child = [&](bool estimate) {
      const std::string out = test::in_child_process([&] {
        auto cfg = std::make_shared<config>(config::from_string("system: kelle_edram\nworkload: {type: llm}\n", "e.yaml", run));
        if (estimate) return first_order_estimate().evaluate(cfg).dump();
        platform p(*cfg);
        p.run();
        return p.results().dump();
      });
      INFO(out.substr(0, 300));
      REQUIRE(out.rfind("error: ", 0) != 0);
      return nlohmann::json::parse(out);
    };
    const auto est = in_child(true), sim = in_child(false);
    const double s = sim["latency_s"]["decode_per_step"].get<double>();
    const double e = est["latency_s"]["per_decode_step"].get<double>();
    CHECK(e == Approx(s).epsilon(0.10));
    CHECK(est["latency_s"]["prefill"].get<double>() == Approx(sim["latency_s"]["prefill"].get<double>()).epsilon(0.10));
  }
}
