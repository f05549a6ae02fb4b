// Functional mode end to end (docs/functional.md): the platform computes a small Llama-style
// model's logits through the firmware, the schedulers, the policies and the blocks, and they
// match the reference model; faults corrupt the bits the eDRAM stores.
#include <catch2/catch.hpp>

#include "firmware/functional/llama_model.h"
#include "firmware/functional/reference.h"
#include "firmware/schedulers/layer_ops.h"
#include "firmware/schedulers/scheduler.h"
#include "models/compute/functional/engine.h"
#include "models/compute/functional/half.h"
#include "platform/config/config.h"
#include "tests/support/test_initiator.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <unistd.h>
#include <map>
#include <random>

using namespace kelle;

namespace {

// The tolerance docs/functional.md derives for binary16 activations on int8 weights.
constexpr double logit_tol = 0.01;  // x max(1, max |reference logit|)
constexpr double kl_tol = 1e-4;

const char* const tiny_yaml =
    "system: kelle_edram\n"
    "mode: functional\n"
    "policy: {kv: full, refresh: none}\n"
    "workload:\n"
    "  type: llm\n"
    "  model: {name: tiny, layers: 2, hidden: 64, heads: 4, kv_heads: 2, ffn: 128, vocab: 256}\n"
    "  context_len: 16\n"
    "  decode_len: 6\n"
    "  progress: false\n";

// Runs the configuration `make` returns in a child process; its results.json.
nlohmann::json run_config(const std::function<config()>& make) { return test::results_in_child(make); }

nlohmann::json run(std::vector<std::string> o, const std::string& yaml = tiny_yaml) {
  return run_config([&] { return config::from_string(yaml, "functional.yaml", o); });
}

void matches_reference(const nlohmann::json& r) {
  const auto& q = r["quality"];
  INFO(q.dump());
  REQUIRE(q["rows"].get<double>() > 0);
  const double scale = std::max(1.0, q["max_abs_reference_logit"].get<double>());
  CHECK(q["max_abs_logit_error"].get<double>() <= logit_tol * scale);
  CHECK(q["kl_divergence"].get<double>() <= kl_tol);
  CHECK(q["top1_agreement"].get<double>() == 1.0);
  CHECK(q["nonfinite_logits"].get<double>() == 0);
}

// The small model with AERP storing tokens as x: budget 10, 2 sinks, a window of 4. In the
// grouped-query model x (hidden x 2 B) is never smaller than the K and V it replaces, so the size
// rule is off; `extra` adds overrides.
nlohmann::json run_aerp(std::vector<std::string> extra) {
  std::vector<std::string> o = {"policy.kv=aerp", "policy.kv_budget=10", "policy.sink_tokens=2",
                                "policy.recent_window=4", "policy.x_only_if_smaller=false",
                                "policy.recompute=all"};
  o.insert(o.end(), extra.begin(), extra.end());
  return run(o);
}

// AERP's recomputation ran and every recomputed K and V row equals its cached copy bit for bit.
void recomputed_bit_for_bit(const nlohmann::json& r) {
  INFO(r["kv"].dump() << r["functional"]["recompute_check"].dump());
  REQUIRE(r["kv"]["tokens_as_x"].get<double>() > 0);
  const double macs = r["kv"]["recompute_macs"].get<double>();
  CHECK(macs > 0);
  CHECK(r["stats"]["rsa"]["recompute_macs"]["value"].get<double>() == macs);  // the stacked rows were issued
  const auto& c = r["functional"]["recompute_check"];
  CHECK(c["rows"].get<double>() > 0);
  CHECK(c["bit_equal"] == c["rows"]);
}

// A memory of bytes for the engine alone (unwritten bytes read as 0).
struct byte_memory : fn::memory_port {
  std::map<std::uint64_t, unsigned char> b;
  void read(std::uint64_t a, void* d, std::uint64_t n) override {
    for (std::uint64_t i = 0; i < n; ++i) static_cast<unsigned char*>(d)[i] = b.count(a + i) ? b[a + i] : 0;
  }
  void write(std::uint64_t a, const void* s, std::uint64_t n) override {
    for (std::uint64_t i = 0; i < n; ++i) b[a + i] = static_cast<const unsigned char*>(s)[i];
  }
  void put(std::uint64_t a, float v) {
    const std::uint16_t h = fn::to_half(v);
    write(a, &h, 2);
  }
  float get(std::uint64_t a) {
    std::uint16_t h;
    read(a, &h, 2);
    return fn::from_half(h);
  }
};

double flips(const nlohmann::json& r) {
  double f = 0;
  for (const auto& [k, v] : r["quality"]["flipped_bits"].items()) f += v.get<double>();
  return f;
}

// The kelle order with the k RoPE's dependency on MM_k dropped: the SFU may rotate K before the
// RSA has written it.
class broken_scheduler : public scheduler {
 public:
  void layer(scheduler_ops& ops, const pass_info& p, unsigned l, tensor& x) override {
    const model_shape& m = ops.model();
    const layer_weights& w = ops.weights(l);
    const auto [rows, C, Q, KV] = ops.dims(p);
    layer_scope scope(ops, x);
    tensor xn = ops.produce("xn", rows * C * 2);
    ops.produced(xn, ops.sfu(ops.norm(), x, rows, C, xn.where));
    ops.append_kv(xn, l, false, p);
    ops.append_kv(xn, l, true, p);
    // No producer: nothing waits for MM_k (where the new K is: beyond a scheduler's view).
    tensor k_new{dynamic_cast<layer_ops&>(ops).kv_slot(l, false, p), {}, -1, "k"};
    const ticket rk = ops.sfu(opcode::rope, k_new, rows * m.kv_heads, m.head_dim, k_new.where);
    tensor q = ops.produce("q", rows * Q * 2);
    ops.produced(q, ops.project(xn, w.q, C, Q, q.where, rows));
    q.producer = ops.sfu(opcode::rope, q, rows * m.heads, m.head_dim, q.where);
    ops.wait(rk);
    tensor attn = ops.produce("attn", rows * Q * 2);
    ops.produced(attn, ops.attention(q, p, l, attn.where));
    tensor o = ops.produce("o", rows * C * 2);
    ops.produced(o, ops.project(attn, w.o, Q, C, o.where, rows));
    x.producer = ops.sfu(opcode::add, x, rows, C, x.where, &o);
    ops.ffn(x, l, rows, true);
  }
};
KELLE_REGISTER(schedulers(), "test_broken", "test: the k RoPE does not wait for MM_k",
               [] { return std::make_unique<broken_scheduler>(); });

}  // namespace

TEST_CASE("functional: logits match the reference for every scheduler (full policy, no faults)", "[functional]") {
  for (const char* s : {"baseline", "kelle", "prefetch"}) {
    INFO(s);
    const auto r = run({std::string("scheduler=") + s});
    matches_reference(r);
    CHECK(r["functional"]["tokens"][0].size() == 16 + 6 + 1);
  }
}

TEST_CASE("functional: batch 2 with grouped-query attention matches the reference", "[functional]") {
  matches_reference(run({"workload.batch=2", "scheduler=kelle"}));
}

TEST_CASE("functional: a scheduler that breaks a data dependency computes on stale data", "[functional]") {
  const auto r = run({"scheduler=test_broken"});
  CHECK(r["quality"]["max_abs_logit_error"].get<double>() > 10 * logit_tol);
}

TEST_CASE("functional: timing is the same as in timing mode", "[functional]") {
  const auto f = run({"scheduler=kelle"});
  auto yaml = std::string(tiny_yaml);
  yaml.replace(yaml.find("mode: functional"), 16, "mode: timing");
  const auto t = run({"scheduler=kelle"}, yaml);
  CHECK(f["latency_s"]["total"] == t["latency_s"]["total"]);
  CHECK(f["traffic_bytes"] == t["traffic_bytes"]);
  CHECK(!t.contains("quality"));
}

TEST_CASE("functional: aep and aerp attend over the kept tokens, ranked by the platform's own scores", "[functional]") {
  for (const char* kv : {"aep", "aerp"}) {
    INFO(kv);
    const auto r = run({std::string("policy.kv=") + kv, "policy.kv_budget=10", "policy.sink_tokens=2",
                        "policy.recent_window=4", "scheduler=kelle"});
    matches_reference(r);  // the reference attends over the same kept tokens
    CHECK(r["kv"]["tokens_kept"].get<double>() < 2.0 * 2 * 23);  // tokens were evicted
  }
}

TEST_CASE("functional: the full-cache reference measures what the eviction costs", "[functional]") {
  // Full policy: the kept-set reference is the full-cache one, bit for bit.
  const auto f = run({"policy.kv=full"});
  const auto& ff = f["quality"]["full_cache"];
  INFO(ff.dump());
  CHECK(ff["eviction_kl_divergence"].get<double>() == 0.0);
  CHECK(ff["eviction_top1_agreement"].get<double>() == 1.0);
  CHECK(ff["kl_divergence"].get<double>() == f["quality"]["kl_divergence"].get<double>());
  // AEP at a budget of 10 of 22 tokens: the platform still matches the reference on the same kept
  // tokens, but both have moved away from the full cache, and by about as much.
  const auto r = run({"policy.kv=aep", "policy.kv_budget=10", "policy.sink_tokens=2", "policy.recent_window=4"});
  matches_reference(r);
  const auto& q = r["quality"];
  const auto& e = q["full_cache"];
  INFO(e.dump());
  const double ev = e["eviction_kl_divergence"].get<double>();
  CHECK(ev > 100 * q["kl_divergence"].get<double>());
  CHECK(std::abs(e["kl_divergence"].get<double>() / ev - 1) < 0.1);
}

TEST_CASE("functional: a weights file (llama2.c) runs on the platform", "[functional]") {
  const auto dir = std::filesystem::temp_directory_path() / ("kelle_fn_run_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  fn::llama_config c;
  c.dim = 32, c.ffn = 64, c.layers = 2, c.heads = 4, c.kv_heads = 4, c.vocab = 64, c.seq_len = 64;
  fn::write_llama2c(fn::random_weights(c, 9), (dir / "m.bin").string());
  const auto r = run({"workload.model=" + (dir / "m.bin").string()},
                     "system: kelle_edram\nmode: functional\npolicy: {kv: full, refresh: none}\nworkload: {type: llm, model: x, context_len: 8, "
                     "decode_len: 4, progress: false}\n");
  matches_reference(r);
  CHECK(r["llm"]["model"] == "m");
  std::filesystem::remove_all(dir);
}

TEST_CASE("functional: perplexity of a text through a llama2.c model and its tokenizer", "[functional]") {
  const auto dir = std::filesystem::temp_directory_path() / ("kelle_fn_ppl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::string> vocab = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab.push_back(buf);
  }
  for (const char* p : {" ", "e", "l", "o", "h", "he", "ll", "hell", "hello", " hello", "w", "r", "d", " w", "or"})
    vocab.push_back(p);
  std::vector<float> scores(vocab.size());
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = -float(i % 50);
  fn::tokenizer::write((dir / "tokenizer.bin").string(), vocab, scores);
  std::ofstream((dir / "text.txt").string()) << "hello world, hello there; hello hello world. well, hello.";
  fn::llama_config c;
  c.dim = 32, c.ffn = 64, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.vocab = unsigned(vocab.size()), c.seq_len = 64;
  fn::write_llama2c(fn::random_weights(c, 4), (dir / "m.bin").string());
  const auto r = run({"workload.model=" + (dir / "m.bin").string(), "functional.text=" + (dir / "text.txt").string(),
                      "functional.tokenizer=" + (dir / "tokenizer.bin").string()},
                     "system: kelle_edram\nmode: functional\npolicy: {kv: full, refresh: none}\nworkload: {type: llm, model: x, context_len: 8, "
                     "decode_len: 8, progress: false}\n");
  const auto& q = r["quality"];
  CHECK(q["perplexity_tokens"] == 9);
  CHECK(q["perplexity"].get<double>() == Approx(q["reference_perplexity"].get<double>()).epsilon(0.01));
  CHECK(q["perplexity"].get<double>() > 1);
  std::filesystem::remove_all(dir);
}

namespace {
// scenarios/functional/trained.yaml (with `overlay`, another trained model in its place) on the
// files scripts/train-model wrote into `folder`, and its record of them.
void check_trained_model(const std::string& folder, const std::vector<std::string>& overlays) {
  const std::string dir = scenarios_dir() + "/functional";
  std::ifstream in(dir + "/" + folder + "/training.json");
  REQUIRE(in);
  const auto rec = nlohmann::json::parse(in);
  const auto& chk = rec["functional_check"];
  std::vector<std::string> ov;
  for (const auto& o : overlays) ov.push_back(dir + "/" + o);
  const auto r = run_config([&] { return config::load(dir + "/trained.yaml", {"workload.progress=false"}, ov); });
  matches_reference(r);
  const auto& q = r["quality"];
  INFO(q.dump() << "\n" << chk.dump());
  // The platform's encoder gives the script's tokens: the tokenizer file is the one it trained with.
  CHECK(r["functional"]["tokens"][0] == chk["tokens"]);
  CHECK(q["perplexity_tokens"] == chk["decode_len"].get<int>() + 1);
  // The reference (fp32 on the int8 weights) agrees with PyTorch's figure on the same int8 weights:
  // the export's tensor names, RoPE row order and head grouping are what the platform reads.
  CHECK(q["reference_perplexity"].get<double>() == Approx(chk["perplexity_int8"].get<double>()).epsilon(1e-3));
  CHECK(q["perplexity"].get<double>() == Approx(q["reference_perplexity"].get<double>()).epsilon(0.01));
  // A language model: its perplexity a small fraction of a unigram model's on the same tokens, in
  // this window as over the whole held-out text.
  constexpr double far_below = 0.25;
  CHECK(q["perplexity"].get<double>() < far_below * chk["unigram_perplexity"].get<double>());
  const auto& h = rec["held_out"];
  CHECK(h["perplexity_int8"].get<double>() < far_below * h["unigram_perplexity"].get<double>());
}
}  // namespace

TEST_CASE("functional: the trained model matches the reference on held-out text, far below a unigram model",
          "[functional]") {
  check_trained_model("trained", {});
}

TEST_CASE("functional: the sink model matches the reference on held-out text, far below a unigram model",
          "[functional]") {
  // The second trained model (docs/trained-model.md, "The sink model") through its overlay.
  check_trained_model("trained-sinks", {"sink-model.yaml"});
}

TEST_CASE("functional: no bit flips with a uniform 45 us refresh", "[functional]") {
  const auto r = run({"policy.refresh=uniform", "functional.faults.mode=retention"});
  REQUIRE(r["llm"]["kv_layers_on_chip"].get<double>() > 0);
  CHECK(flips(r) == 0);
  CHECK(r["quality"]["bits_read"]["lst_lsb"].get<double>() > 0);
  matches_reference(r);
}

TEST_CASE("functional: cells whose retention time is shorter than their exposure leak", "[functional]") {
  // A retention distribution shortened to a 20 us median: some cells fail within the run.
  const auto r = run({"functional.faults.mode=retention", "tech.edram.retention.median_ms=0.02"});
  CHECK(flips(r) > 0);
  for (const char* g : {"hst_msb", "hst_lsb", "lst_msb", "lst_lsb"})
    CHECK(r["quality"]["flip_rate"][g].get<double>() < 0.6);  // only stored ones can leak
}

TEST_CASE("functional: a fixed bit-error rate hits only the chosen group, at about that rate", "[functional]") {
  for (const char* g : {"lst_lsb", "hst_msb"}) {
    INFO(g);
    const auto r = run({"functional.faults.mode=ber", "functional.faults.ber=0.02", std::string("functional.faults.group=") + g});
    const auto& q = r["quality"];
    for (const auto& [k, v] : q["flipped_bits"].items()) {
      if (k == g) {
        CHECK(v.get<double>() > 100);
        CHECK(q["flip_rate"][k].get<double>() == Approx(0.02).epsilon(0.2));
      } else {
        CHECK(v.get<double>() == 0);
      }
    }
  }
}

TEST_CASE("functional: recomputed K and V from stacked rows equal the stored ones bit for bit", "[functional]") {
  // The RSA's gemm with `extra` stacked rows (AERP's recomputation) computes each stacked row
  // with the same arithmetic as a regular row: the same bits.
  byte_memory m;
  fn::engine e(m);
  const unsigned K = 48, N = 24, M = 3;
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  for (unsigned i = 0; i < M * K; ++i) {
    const std::uint16_t h = fn::to_half(d(rng));
    m.write(0x1000 + 2 * i, &h, 2);
    m.write(0x9000 + 2 * i, &h, 2);  // the same rows again: the stored x of M tokens
  }
  for (unsigned i = 0; i < K * N; ++i) {
    const std::int8_t w = static_cast<std::int8_t>(int(rng() % 255) - 127);
    m.write(0x5000 + i, &w, 1);
  }
  command c;
  c.op = opcode::gemm;
  c.id = 1;
  c.m = M, c.k = K, c.n = N, c.extra = M;
  c.addr_a = 0x1000, c.addr_b = 0x5000, c.addr_c = 0x20000, c.addr_d = 0x9000;
  e.run(c);
  std::vector<unsigned char> a(M * N * 2), b(M * N * 2);
  m.read(0x20000, a.data(), a.size());
  m.read(0x20000 + M * N * 2, b.data(), b.size());
  CHECK(a == b);
}

TEST_CASE("functional: an attention in parts adds up, a gemm keeps its input rows, a described copy moves its ranges",
          "[functional]") {
  byte_memory m;
  fn::engine e(m);
  // A . V over 3 keys in two parts (columns 0..1, then 2): the second adds to the first's result.
  const float p[3] = {0.5f, 0.25f, 0.25f}, v[3][2] = {{1, 2}, {4, 8}, {-2, 6}};
  for (int j = 0; j < 3; ++j) {
    m.put(0x100 + 2 * j, p[j]);
    for (int n = 0; n < 2; ++n) m.put(0x200 + 4 * j + 2 * n, v[j][n]);
  }
  command c;
  c.op = opcode::gemm;
  c.flags = flag_b_16bit;
  c.m = 1, c.k = 2, c.n = 2;
  c.addr_a = 0x100, c.addr_b = 0x200, c.addr_c = 0x300;
  c.id = 1;
  e.run(c);
  auto d = std::make_shared<fn::desc>();
  d->accumulate = true;
  c.k = 1, c.addr_a = 0x104, c.addr_b = 0x208, c.id = 2;
  e.attach(2, d);
  e.run(c);
  CHECK(m.get(0x300) == 0.5f * 1 + 0.25f * 4 - 0.25f * 2);
  CHECK(m.get(0x302) == 0.5f * 2 + 0.25f * 8 + 0.25f * 6);
  // An int8 gemm writes its two input rows to the addresses the description gives (AERP's x store).
  for (int i = 0; i < 8; ++i) m.put(0x400 + 2 * i, 0.125f * float(i + 1));
  command g;
  g.op = opcode::gemm;
  g.m = 2, g.k = 4, g.n = 1;
  g.addr_a = 0x400, g.addr_b = 0x500, g.addr_c = 0x600, g.id = 3;
  auto k = std::make_shared<fn::desc>();
  k->keep_a = {{{0, 0, 4, 0x900}, {1, 0, 4, 0x800}}};
  e.attach(3, k);
  e.run(g);
  for (int i = 0; i < 4; ++i) {
    CHECK(m.get(0x900 + 2 * i) == m.get(0x400 + 2 * i));
    CHECK(m.get(0x800 + 2 * i) == m.get(0x408 + 2 * i));
  }
  // A DMA copy with a description moves its ranges only (none: nothing).
  command cp;
  cp.op = opcode::copy;
  cp.m = 1, cp.k = 8, cp.addr_a = 0x400, cp.addr_c = 0xa00, cp.id = 4;
  auto mv = std::make_shared<fn::desc>();
  mv->moves = {{0x402, 0xb00, 2}};
  e.attach(4, mv);
  e.run(cp);
  CHECK(m.get(0xb00) == m.get(0x402));
  CHECK(m.get(0xa00) == 0.0f);
  cp.id = 5;
  e.attach(5, std::make_shared<fn::desc>());
  e.run(cp);
  CHECK(m.get(0xa00) == 0.0f);
}

TEST_CASE("functional: AERP recomputes its x tokens' K and V from their stored x, bit for bit the cached ones",
          "[functional]") {
  // Every token's xn is kept as MM_k reads it; in each decode step MM_k and MM_v recompute the x
  // tokens' K and V as stacked rows, RoPE rotates the keys at their positions, and the attention
  // reads them from the staging buffer. Against the same run reading the x tokens' K and V from
  // their cache slots (the same commands): the same logits, bit for bit.
  for (const char* s : {"kelle", "baseline"}) {
    INFO(s);
    const auto r = run_aerp({std::string("scheduler=") + s});
    recomputed_bit_for_bit(r);
    matches_reference(r);
    const auto c = run_aerp({std::string("scheduler=") + s, "functional.x_tokens=cache"});
    CHECK(c["functional"]["logits_digest"] == r["functional"]["logits_digest"]);
    CHECK(c["functional"]["tokens"] == r["functional"]["tokens"]);
    CHECK(c["quality"] == r["quality"]);
  }
}

TEST_CASE("functional: AERP on a multi-head model, batch 2, attends over the same kept tokens as AEP", "[functional]") {
  // With one KV head per query head x is smaller than the K and V of the heads that keep it, so
  // AERP with recompute: all stores tokens as x under the popularity rule (auto would store none
  // on this hardware: docs/policies/aerp.md); AEP keeps the same tokens as K and V.
  const std::vector<std::string> o = {
      "workload.model={name: mha, layers: 2, hidden: 64, heads: 4, kv_heads: 4, ffn: 128, vocab: 256}",
      "workload.batch=2", "policy.kv_budget=10", "policy.sink_tokens=2", "policy.recent_window=4"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), o.begin(), o.end());
    return run(extra);
  };
  const auto aerp = with({"policy.kv=aerp", "policy.recompute=all"}), aep = with({"policy.kv=aep"});
  recomputed_bit_for_bit(aerp);
  matches_reference(aerp);
  matches_reference(aep);
  CHECK(aerp["kv"]["tokens_kept"] == aep["kv"]["tokens_kept"]);
  CHECK(aerp["functional"]["tokens"] == aep["functional"]["tokens"]);
  // (Not bit for bit AEP's logits: the attention of a staged layer is read in parts, cache then
  // staging, so A . V adds two rounded partial sums where AEP's one command rounds once.)
  const auto cache = with({"policy.kv=aerp", "policy.recompute=all", "functional.x_tokens=cache"});
  CHECK(cache["functional"]["logits_digest"] == aerp["functional"]["logits_digest"]);
}

TEST_CASE("functional: x_tokens=cache needs a policy that stores tokens as x", "[functional]") {
  CHECK_THROWS_WITH(run({"policy.kv=aep", "functional.x_tokens=cache"}), Catch::Contains("functional.x_tokens"));
  CHECK_THROWS_WITH(run({"functional.x_tokens=sometimes"}), Catch::Contains("x_tokens"));
}

namespace {

// Sliding-window layers: 3 layers, window 8, every third layer global (layers 0, 1 local, 2
// global); a context of 16 > W runs the banded prefill, 10 decode steps wrap the local layers'
// ring of 8 slots.
const char* const swa_yaml =
    "system: kelle_edram\n"
    "mode: functional\n"
    "policy: {kv: full, refresh: none}\n"
    "workload:\n"
    "  type: llm\n"
    "  model: {name: swa, layers: 3, hidden: 64, heads: 4, kv_heads: 2, ffn: 128, vocab: 256, sliding_window: 8,\n"
    "          global_every: 3}\n"
    "  context_len: 16\n"
    "  decode_len: 10\n"
    "  progress: false\n";

// The reference's logits over a run's rows (each pass's last token: the prefill's, then every
// decode step's), from the seeded model the runs above build (functional.seed: the scenario's
// seed, 1) on the run's tokens, with or without the window.
std::vector<std::vector<float>> reference_rows(const nlohmann::json& r, bool windowed) {
  model_shape s;
  s.name = "swa", s.layers = 3, s.hidden = 64, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.ffn = 128, s.vocab = 256;
  s.sliding_window = 8, s.global_every = 3;
  fn::llama_config c = fn::config_from_shape(s);
  if (!windowed) c.sliding_window = 0;
  const fn::quantised_model q = fn::quantise(fn::random_weights(c, 1));
  fn::reference_model ref(q);
  const auto& tokens = r["functional"]["tokens"][0];
  std::vector<std::vector<float>> rows;
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
    std::vector<float> lg = ref.step(tokens[i].get<int>());
    if (i + 1 >= 16) rows.push_back(std::move(lg));
  }
  return rows;
}

}  // namespace

TEST_CASE("functional: sliding-window layers (banded prefill, the ring wrapping) match the reference", "[functional][window]") {
  for (const char* s : {"kelle", "baseline", "prefetch"}) {
    INFO(s);
    const auto r = run({std::string("scheduler=") + s}, swa_yaml);
    matches_reference(r);
    CHECK(r["functional"]["tokens"][0].size() == 16 + 10 + 1);
    CHECK(r["activation_lifetimes"]["by_kind"].contains("k_band"));  // the banded prefill ran
    // K and V written (128 B a token and layer): the prefill's last 8 tokens into each local
    // layer's ring, all 16 into the global layer's cache, then each decode step's token in 3 layers.
    CHECK(r["llm"]["kv_bytes_written"].get<double>() == (2 * 8 + 16 + 3 * 10) * 128.0);
  }
  matches_reference(run({"workload.batch=2", "scheduler=kelle"}, swa_yaml));
  // A context shorter than the window (no band): the ring fills during the decode, then wraps.
  matches_reference(run({"workload.context_len=5", "workload.decode_len=12"}, swa_yaml));
}

TEST_CASE("functional: the run's reference attends within the window, and the window changes the logits",
          "[functional][window]") {
  // The reference's logits over the run's rows, recomputed here from the same seeded model and
  // tokens: with the window their largest magnitude is the run's (the run's reference applied the
  // window); without it they move far beyond the tolerance the platform meets.
  const auto r = run({}, swa_yaml);
  matches_reference(r);
  const double ref = r["quality"]["max_abs_reference_logit"].get<double>();
  const auto w = reference_rows(r, true), g = reference_rows(r, false);
  REQUIRE(w.size() == 11);
  REQUIRE(g.size() == w.size());
  double mx = 0, diff = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    for (std::size_t v = 0; v < w[i].size(); ++v) {
      mx = std::max(mx, double(std::fabs(w[i][v])));
      diff = std::max(diff, double(std::fabs(w[i][v] - g[i][v])));
    }
  CHECK(mx == ref);
  INFO("max |logit difference| with and without the window: " << diff);
  CHECK(diff > 10 * logit_tol * std::max(1.0, ref));
}

TEST_CASE("functional: evicting KV policies on sliding-window layers match the reference", "[functional][window]") {
  // A budget of 6 below the window of 8: the policy evicts inside the local layers' windows and
  // in the global layer; the reference attends over the same kept tokens.
  for (const char* kv : {"streaming", "aerp"}) {
    INFO(kv);
    std::vector<std::string> o = {std::string("policy.kv=") + kv, "policy.kv_budget=6", "policy.sink_tokens=2",
                                  "scheduler=kelle"};
    if (kv == std::string("aerp")) o.push_back("policy.recent_window=2");
    const auto r = run(o, swa_yaml);
    matches_reference(r);
    CHECK(r["kv"]["tokens_kept"].get<double>() == 3 * 6);  // every layer's heads at their budget
    CHECK(r["quality"]["full_cache"]["eviction_kl_divergence"].get<double>() > 1e-3);  // the eviction changed them
  }
}

TEST_CASE("functional: AERP's x tokens on sliding-window layers, recomputed bit for bit", "[functional][window]") {
  // Multi-head (4 KV heads), budget 12 above the window of 8: the global layer evicts, and tokens
  // stored as x in every layer are recomputed each step from the x store.
  const auto r = run({"workload.model.kv_heads=4", "policy.kv=aerp", "policy.kv_budget=12", "policy.sink_tokens=2",
                      "policy.recent_window=4", "policy.x_only_if_smaller=false", "policy.recompute=all"},
                     swa_yaml);
  matches_reference(r);
  recomputed_bit_for_bit(r);
}

namespace {

// Latent KV (multi-head latent attention): 2 layers, 4 heads, a latent of 32 and a RoPE key of 8
// per token (the cache row, one cache head), queries and keys of 16 + 8, values of 16.
const char* const mla_yaml =
    "system: kelle_edram\n"
    "mode: functional\n"
    "policy: {kv: full, refresh: none}\n"
    "workload:\n"
    "  type: llm\n"
    "  model: {name: mla, layers: 2, hidden: 64, heads: 4, ffn: 128, vocab: 256, kv_lora_rank: 32, qk_rope_dim: 8,\n"
    "          qk_nope_dim: 16, v_head_dim: 16}\n"
    "  context_len: 16\n"
    "  decode_len: 6\n"
    "  progress: false\n";

}  // namespace

TEST_CASE("functional: latent KV run absorbed matches the plain (expanded) MLA reference", "[functional][latent]") {
  // The platform scores each head's query, taken into latent space by W_uk, against the cached
  // latents and RoPE keys and applies W_uv to the weighted latent; the reference expands every
  // cached latent into each head's key and value: they agree only if the absorption is exact.
  for (const char* s : {"baseline", "kelle", "prefetch"}) {
    INFO(s);
    const auto r = run({std::string("scheduler=") + s}, mla_yaml);
    matches_reference(r);
    CHECK(r["functional"]["tokens"][0].size() == 16 + 6 + 1);
  }
  matches_reference(run({"workload.batch=2", "scheduler=kelle"}, mla_yaml));
}

TEST_CASE("functional: latent KV fused (one read of each latent) or unfused computes the same numbers",
          "[functional][latent]") {
  // Fused, the weighted sum takes its values from the latents the scores read (held in the array's
  // operand buffer); unfused it reads them again. What is read changes, not the arithmetic: the
  // same tokens, logits and quality figures, bit for bit; the fused run moves fewer KV bytes.
  const auto f = run({"scheduler=kelle"}, mla_yaml);
  const auto u = run({"scheduler=kelle", "workload.latent_attention=unfused"}, mla_yaml);
  matches_reference(f);
  matches_reference(u);
  CHECK(f["functional"]["tokens"] == u["functional"]["tokens"]);
  CHECK(f["functional"]["logits_digest"] == u["functional"]["logits_digest"]);
  CHECK(f["quality"] == u["quality"]);
  // The small model's cache is in the KV eDRAM: the fused run reads it once a step.
  CHECK(f["stats"]["kv_edram"]["bytes_read"]["value"].get<double>() <
        u["stats"]["kv_edram"]["bytes_read"]["value"].get<double>());
}

TEST_CASE("functional: evicting KV policies on latent KV match the reference", "[functional][latent]") {
  // One cache head a layer: the policy keeps the same latent rows for every head.
  for (const char* kv : {"streaming", "aep"}) {
    INFO(kv);
    std::vector<std::string> o = {std::string("policy.kv=") + kv, "policy.kv_budget=8", "policy.sink_tokens=2",
                                  "scheduler=kelle"};
    if (kv == std::string("aep")) o.push_back("policy.recent_window=4");
    const auto r = run(o, mla_yaml);
    matches_reference(r);
    CHECK(r["kv"]["tokens_kept"].get<double>() == 2 * 8);  // every layer at its budget
    CHECK(r["quality"]["full_cache"]["eviction_kl_divergence"].get<double>() > 1e-3);
  }
}

TEST_CASE("functional: windowed and latent shapes keep timing mode's timing", "[functional][window][latent]") {
  for (const char* yaml : {swa_yaml, mla_yaml}) {
    const auto f = run({"scheduler=kelle"}, yaml);
    auto timing = std::string(yaml);
    timing.replace(timing.find("mode: functional"), 16, "mode: timing");
    const auto t = run({"scheduler=kelle"}, timing);
    CHECK(f["latency_s"]["total"] == t["latency_s"]["total"]);
    CHECK(f["traffic_bytes"] == t["traffic_bytes"]);
  }
}

TEST_CASE("functional: a softmax masked from both sides (a window), a RoPE of a row's last columns", "[functional]") {
  byte_memory m;
  fn::engine e(m);
  // One row of 5 scores; the window keeps columns [1, 4): the others become 0, the kept ones sum to 1.
  const float x[5] = {3.0f, 0.5f, -1.0f, 2.0f, 9.0f};
  for (int i = 0; i < 5; ++i) m.put(0x100 + 2 * i, x[i]);
  command s;
  s.op = opcode::softmax;
  s.m = 1, s.k = 5, s.addr_a = 0x100, s.addr_b = 0x100, s.addr_c = 0x200, s.id = 1;
  auto d = std::make_shared<fn::desc>();
  d->valid = {4};
  d->first = {1};
  e.attach(1, d);
  e.run(s);
  const double z = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0);
  CHECK(m.get(0x200) == 0.0f);
  CHECK(m.get(0x208) == 0.0f);
  for (int i = 1; i < 4; ++i) CHECK(m.get(0x200 + 2 * i) == Approx(std::exp(double(x[i])) / z).epsilon(1e-3));
  // RoPE from column 2 of a 6-column row at position 3: columns 0 and 1 pass, the pairs (2, 3)
  // and (4, 5) turn as a 4-dimensional RoPE's pairs 0 and 1 (angles 3 x theta^(-0/4), theta^(-2/4)).
  const float v[6] = {1.5f, -2.0f, 1.0f, 0.0f, 0.0f, 1.0f};
  for (int i = 0; i < 6; ++i) m.put(0x300 + 2 * i, v[i]);
  command r;
  r.op = opcode::rope;
  r.m = 1, r.k = 6, r.addr_a = 0x300, r.addr_b = 0x300, r.addr_c = 0x400, r.id = 2;
  auto rd = std::make_shared<fn::desc>();
  rd->positions = {3};
  rd->theta = 10000.0f;
  rd->rope_from = 2;
  e.attach(2, rd);
  e.run(r);
  CHECK(m.get(0x400) == 1.5f);
  CHECK(m.get(0x402) == -2.0f);
  const double a0 = 3.0, a1 = 3.0 * std::pow(10000.0, -0.5);
  CHECK(m.get(0x404) == Approx(std::cos(a0)).margin(1e-3));
  CHECK(m.get(0x406) == Approx(std::sin(a0)).margin(1e-3));
  CHECK(m.get(0x408) == Approx(-std::sin(a1)).margin(1e-3));
  CHECK(m.get(0x40a) == Approx(std::cos(a1)).margin(1e-3));
}
