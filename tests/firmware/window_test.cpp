// Sliding-window layers in the firmware: the KV a decode step reads, by hand from the models'
// public configurations (Gemma 3 1B, Mistral 7B v0.1), a window's KV that stops growing, the
// banded prefill, the placement of windowed layers on chip first, and the KV policies on a window.
#include <catch2/catch.hpp>

#include "firmware/llm/estimate.h"
#include "firmware/policies/kv/kv_policy.h"
#include "firmware/workload/model_zoo.h"
#include "tests/support/llm_run.h"

#include <sstream>

using namespace kelle;

namespace {

nlohmann::json run(const std::vector<std::string>& overrides) { return test::llm_run(overrides); }

std::vector<double> decode_kv_bytes(const nlohmann::json& r) { return test::decode_column(r, 6); }

}  // namespace

TEST_CASE("windowed layers: the KV bytes a decode step reads, by hand, batch 1 and 16 (Gemma 3 1B)", "[window][slow]") {
  // Decode only, context 1024, one step, full cache: a local layer attends to its window of 512
  // tokens, a global one (layers 5, 11, 17, 23) to all 1025. Per layer whose KV is in DRAM and
  // sequence: the tokens read (K and V), the new token's write and the RoPE of its key in place
  // (K and its table read, K written: 1.5 tokens), at 2 x 1 KV head x 256 x 2 B = 1024 B a token.
  const auto m = models().create("gemma3-1b");
  const double tok = double(m->kv_bytes_per_token_layer());
  REQUIRE(tok == 1024);
  // Batch 1: a local layer's K and V are 512 KiB, so the 4 MiB KV eDRAM holds 8 whole local
  // layers (windowed layers take it first); 14 local and 4 global layers stay in DRAM.
  const auto b1 = run({"workload.model=gemma3-1b", "workload.skip_prefill=true", "workload.context_len=1024",
                       "workload.decode_len=1", "workload.batch=1"});
  CHECK(b1["llm"]["kv_layers_on_chip"] == 8);
  CHECK(b1["traffic_bytes"]["dram_kv"].get<double>() == Approx((14 * (512 + 2.5) + 4 * (1025 + 2.5)) * tok));
  // Batch 16 (first_layers): a local layer's K and V are 16 MiB, none fits: all 26 in DRAM.
  const auto b16 = run({"workload.model=gemma3-1b", "workload.skip_prefill=true", "workload.context_len=1024",
                        "workload.decode_len=1", "workload.batch=16", "workload.placement.kv_placement=first_layers"});
  CHECK(b16["llm"]["kv_layers_on_chip"] == 0);
  CHECK(b16["traffic_bytes"]["dram_kv"].get<double>() == Approx(16 * (22 * (512 + 2.5) + 4 * (1025 + 2.5)) * tok));
  // The window binds: the plain global pattern would read 1025 tokens in every layer.
  CHECK(b16["traffic_bytes"]["dram_kv"].get<double>() < 0.6 * 16 * 26 * (1025 + 2.5) * tok);
}

TEST_CASE("windowed layers: the KV bytes a decode step reads, by hand, batch 1 and 16 (Mistral 7B v0.1)", "[window][slow]") {
  // Context 5000: every layer attends to its 4096-token window, not 5001 tokens; 2 x 8 KV heads x
  // 128 x 2 B = 4096 B a token. No layer's 16 MiB (batch 1) fits the 4 MiB eDRAM (first_layers).
  const auto m = models().create("mistral-7b-v0.1-swa");
  const double tok = double(m->kv_bytes_per_token_layer());
  REQUIRE(tok == 4096);
  for (unsigned batch : {1u, 16u}) {
    INFO("batch " << batch);
    const auto r = run({"workload.model=mistral-7b-v0.1-swa", "workload.skip_prefill=true", "workload.context_len=5000",
                        "workload.decode_len=1", "workload.batch=" + std::to_string(batch),
                        "workload.placement.kv_placement=first_layers"});
    CHECK(r["llm"]["kv_layers_on_chip"] == 0);
    CHECK(r["traffic_bytes"]["dram_kv"].get<double>() == Approx(batch * 32 * (4096 + 2.5) * tok));
    // The cache holds W slots a layer: token 5000 (its K and V written) in slot 5000 mod 4096.
    CHECK(r["llm"]["kv_bytes_written"].get<double>() == Approx(batch * 32 * tok));
  }
}

TEST_CASE("windowed layers: a window's KV stops growing once W tokens have arrived", "[window]") {
  // Two layers of Mistral 7B's width with a window of 1536 tokens (K and V 6 MiB a layer: both in
  // DRAM); context 1530, 12 decode steps: steps 1 to 6 attend to 1531 ... 1536 tokens, then 1536.
  const auto r = run({"workload.model={name: swa, layers: 2, hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128, "
                      "ffn: 1024, vocab: 32000, sliding_window: 1536}",
                      "workload.skip_prefill=true", "workload.context_len=1530", "workload.decode_len=12",
                      "workload.placement.kv_placement=first_layers"});
  const std::vector<double> kv = decode_kv_bytes(r);
  REQUIRE(kv.size() == 12);
  const double tok = 4096;
  for (unsigned s = 0; s < 12; ++s) {
    INFO("decode step " << s + 1);
    const double attended = std::min(1530.0 + s + 1, 1536.0);
    CHECK(kv[s] == Approx(2 * (attended + 2.5) * tok));
  }
  CHECK(kv[11] == kv[6]);
  CHECK(kv[5] > kv[4]);
}

TEST_CASE("windowed layers: the prefill's band attention and the ring of the last W tokens", "[window]") {
  // A context of 2048 through a window of 512 (Gemma 3 1B's local layers): every local layer's K
  // and V of 2048 tokens are computed, its last 512 tokens go to the cache; the global layers keep
  // all 2048. KV bytes written: 22 x 512 + 4 x 2048 tokens, then the decode step's 26.
  const auto r = run({"workload.model=gemma3-1b", "workload.context_len=2048", "workload.decode_len=1"});
  CHECK(r["llm"]["kv_bytes_written"].get<double>() == Approx((22 * 512 + 4 * 2048 + 26) * 1024.0));
  // What the full cache holds at the end: a local layer its last 512 tokens, a global one all 2049.
  CHECK(r["kv"]["tokens_kept"].get<double>() == 22 * 512 + 4 * 2049);
  CHECK(r["kv"]["kv_bytes_stored"].get<double>() == (22 * 512 + 4 * 2049) * 1024.0);
  // The band: a local layer's prefill attention is far cheaper than a global layer's.
  CHECK(r["activation_lifetimes"]["by_kind"].contains("k_band"));
  CHECK(r["llm"]["placement"].get<std::string>().find("per windowed layer, on chip first") != std::string::npos);
}

TEST_CASE("windowed layers: every scheduler runs them, with the same traffic", "[window]") {
  std::vector<nlohmann::json> rs;
  for (const char* s : {"baseline", "kelle", "prefetch"})
    rs.push_back(run({"workload.model=gemma3-1b", "workload.context_len=640", "workload.decode_len=2",
                      std::string("scheduler=") + s}));
  for (const auto& r : rs) {
    CHECK(r["traffic_bytes"]["dram_kv"] == rs[0]["traffic_bytes"]["dram_kv"]);
    CHECK(r["traffic_bytes"]["dram_weights"] == rs[0]["traffic_bytes"]["dram_weights"]);
    CHECK(r["llm"]["kv_bytes_written"] == rs[0]["llm"]["kv_bytes_written"]);
  }
  // Kelle's overlap is faster than the baseline's one-after-another.
  CHECK(rs[1]["latency_s"]["total"].get<double>() < rs[0]["latency_s"]["total"].get<double>());
}

TEST_CASE("windowed layers: sampled decode extrapolates across the window filling, within 1 %", "[window][sampling]") {
  // Context 480, 96 steps: Gemma 3 1B's local layers fill their 512-token window at step 32 (a new
  // regime: their cost stops growing); every 8th step simulated.
  std::vector<std::string> o = {"workload.model=gemma3-1b", "workload.skip_prefill=true", "workload.context_len=480",
                                "workload.decode_len=96"};
  const auto detailed = run(o);
  o.push_back("workload.sample_every=8");
  const auto sampled = run(o);
  CHECK(sampled["llm"]["detailed_decode_steps"].get<unsigned>() < 40);
  for (const char* k : {"decode", "total"})
    CHECK(sampled["latency_s"][k].get<double>() == Approx(detailed["latency_s"][k].get<double>()).epsilon(0.01));
  for (const char* k : {"dram_kv", "dram_weights", "dram_activations"})
    CHECK(sampled["traffic_bytes"][k].get<double>() == Approx(detailed["traffic_bytes"][k].get<double>()).epsilon(0.01));
}

namespace {

// Logits that favour old tokens (a policy left alone would keep the oldest).
class old_first final : public attention_source {
 public:
  unsigned layers() const override { return 1; }
  unsigned heads() const override { return 2; }
  std::uint64_t max_tokens() const override { return 1u << 16; }
  void scores(unsigned, unsigned, unsigned, std::uint64_t, const std::uint32_t* keys, std::size_t n,
              double* out) const override {
    for (std::size_t i = 0; i < n; ++i) out[i] = -0.1 * keys[i];
  }
};

model_shape windowed_tiny(unsigned window) {
  model_shape m;
  m.name = "tiny";
  m.layers = 1;
  m.heads = 2;
  m.kv_heads = 1;
  m.head_dim = 8;
  m.hidden = 16;
  m.sliding_window = window;
  return m;
}

}  // namespace

TEST_CASE("windowed layers: a KV policy acts only when its budget is below the window's content", "[window][kv]") {
  const old_first src;
  for (const char* name : {"aep", "h2o", "streaming", "aerp"}) {
    INFO(name);
    // Budget 16 over a window of 8: the window alone decides; the policy never evicts.
    auto cfg = config::from_string("kv: {kv_budget: 16, sink_tokens: 2, recent_window: 2}\n");
    kv_policy_args a{cfg.root().child("kv"), windowed_tiny(8), 1, &src};
    auto wide = kv_policies().create(name, a);
    wide->prefill(20);
    std::vector<std::uint32_t> last8{12, 13, 14, 15, 16, 17, 18, 19};
    CHECK(wide->kept(0, 0, 0) == last8);  // the sinks are outside the window: gone
    CHECK(wide->report(0, 0).evicted_pairs == 0);
    for (unsigned s = 0; s < 5; ++s) {
      wide->decode();
      CHECK(wide->report(0, 0).evicted_pairs == 0);
      CHECK(wide->kept(0, 0, 0).size() == 8);
      CHECK(wide->kept(0, 0, 0).front() == 13 + s);
    }
    // Budget 4 under the window of 8: the policy chooses 4 of the window's tokens, one eviction a
    // step, and never keeps a token the window has dropped.
    auto cfg2 = config::from_string("kv: {kv_budget: 4, sink_tokens: 0, recent_window: 1}\n");
    kv_policy_args a2{cfg2.root().child("kv"), windowed_tiny(8), 1, &src};
    auto narrow = kv_policies().create(name, a2);
    narrow->prefill(20);
    CHECK(narrow->kept(0, 0, 0).size() == 4);
    CHECK(narrow->report(0, 0).evicted_pairs == 4);  // 8 in the window, 4 kept
    for (unsigned s = 0; s < 12; ++s) {
      narrow->decode();
      const auto kept = narrow->kept(0, 0, 0);
      CHECK(kept.size() == 4);
      CHECK(kept.front() + 8 > 20 + s);  // inside the window (q - W, q]
      CHECK(kept.back() == 20 + s);
    }
  }
}

TEST_CASE("windowed layers: the first-order estimate takes each layer's window", "[window]") {
  // Gemma 3 1B, context 1024, 8 steps, full cache: the estimate beside the simulated run (within
  // 20 %, its usual reach on a batch-1 run: docs/explore.md), and with the window it estimates
  // less decode time than with the window wider than the run (every layer reading all its tokens).
  const std::vector<std::string> o = {"workload.model=gemma3-1b", "workload.context_len=1024", "workload.decode_len=8",
                                      "policy.kv=full", "policy.refresh=none"};
  // Both estimates in one child process, with one estimator (it builds the system's models once).
  const std::string out = test::in_child_process([&] {
    first_order_estimate fo;
    nlohmann::json both;
    for (const std::string& model :
         {std::string("workload.model=gemma3-1b"),
          std::string("workload.model={name: gemma-wide, layers: 26, hidden: 1152, heads: 4, kv_heads: 1, head_dim: 256, "
                      "ffn: 6912, ffn_type: gated_gelu, vocab: 262144, tied_embeddings: true, sliding_window: 4096, "
                      "global_every: 6}")}) {
      std::vector<std::string> e = o;
      e[0] = model;
      auto cfg = std::make_shared<config>(config::from_string("system: kelle_edram\nworkload: {type: llm}\n", "e.yaml", e));
      both.push_back(fo.evaluate(cfg));
    }
    return both.dump();
  });
  const auto both = nlohmann::json::parse(out);
  const auto &est = both[0], &wide = both[1];
  const auto sim = run(o);
  for (const char* phase : {"prefill", "decode"})
    CHECK(est["latency_s"][phase].get<double>() ==
          Approx(sim["latency_s"][phase].get<double>()).epsilon(0.2));
  CHECK(est["latency_s"]["decode"].get<double>() < wide["latency_s"]["decode"].get<double>());
  CHECK(est["latency_s"]["prefill"].get<double>() < wide["latency_s"]["prefill"].get<double>());
}
