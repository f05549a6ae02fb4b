// The KV cache's number format (docs/policies/kv-format.md): sizes worked out by hand against the
// platform's placement, traffic and refresh figures in timing mode; KIVI's group quantisation in
// functional mode against the reference, and what it costs against full precision.
#include <catch2/catch.hpp>

#include "firmware/policies/kv/kv_policy.h"
#include "firmware/workload/attention/attention_source.h"
#include "firmware/workload/model_zoo.h"
#include "models/compute/command.h"
#include "models/compute/kv_format/kv_format.h"
#include "platform/config/config.h"
#include "tests/support/test_initiator.h"

#include <functional>

using namespace kelle;

namespace {

nlohmann::json run(const std::string& yaml, const std::vector<std::string>& o) {
  return test::results_in_child([&] { return config::from_string(yaml, "kv_format.yaml", o); });
}

// Llama2-7B on Kelle+eDRAM, one sequence, decode only: 511 context tokens in the cache, one
// decode step (512 token slots), a full cache and a uniform refresh of the on-chip KV.
nlohmann::json llama_point(const std::string& format) {
  return run("system: kelle_edram\nworkload: {type: llm}\n",
             {"policy.kv=full", "policy.refresh=uniform", "policy.kv_format=" + format, "workload.model=llama2-7b",
              "workload.skip_prefill=true", "workload.context_len=511", "workload.decode_len=1", "workload.batch=1",
              "workload.progress=false", "system.compute.rsa.chunk_bytes=262144",
              "system.compute.rsa.weight_buffer_bytes=1048576", "system.compute.dma.chunk_bytes=1048576"});
}

// scenarios/functional/tiny.yaml (2 layers, hidden 64, 4 heads / 2 KV heads: head_dim 16, so
// KIVI's groups of 8), a full cache, 16 + 8 tokens; `o` adds overrides.
nlohmann::json tiny(std::vector<std::string> o) {
  o.insert(o.begin(), {"workload.progress=false", "policy.kv_group_size=8"});
  return test::results_in_child([&] { return config::load(scenarios_dir() + "/functional/tiny.yaml", o); });
}

// The platform against the reference that quantises the same way (docs/policies/kv-format.md):
// functional_test.cpp's KL and top-1 tolerances; the logit error's is 5 x its 0.01 x max(1, max
// |reference logit|): a value within a binary16 rounding of a code boundary takes the
// neighbouring code on one side, one step of its group (1/15 of the group's range in int4), where
// a 16-bit cache differs by a rounding.
void within_tolerance(const nlohmann::json& q) {
  const double scale = std::max(1.0, q["max_abs_reference_logit"].get<double>());
  CHECK(q["max_abs_logit_error"].get<double>() <= 0.05 * scale);
  CHECK(q["kl_divergence"].get<double>() <= 1e-4);
  CHECK(q["top1_agreement"].get<double>() == 1.0);
  CHECK(q["nonfinite_logits"].get<double>() == 0);
}

// tiny() with KV format `f`, which quantises: within tolerance of the reference that quantises
// the same way, with a full-precision reference beside it. Returns the run's quality.
nlohmann::json quantised_run(const std::string& f) {
  INFO(f);
  const auto r = tiny({"policy.kv_format=" + f});
  const auto& q = r["quality"];
  INFO(q.dump());
  CHECK(r["functional"]["kv_format"] == f);
  within_tolerance(q);
  REQUIRE(q.contains("full_precision"));
  return q;
}

}  // namespace

TEST_CASE("kv_format: rows, scales and codes of int8 and int4 by hand", "[kv_format]") {
  // A Llama head: 128 channels. int4: 128 x 4 bits = 64 B of codes; KIVI's groups of 32: a value
  // row has 128 / 32 = 4 groups, a key group of 32 tokens 128 (scale, zero) pairs = 4 per token;
  // 4 pairs x 2 x 2 B = 16 B of scales per token. 80 B in all; int8 128 + 16 = 144 B; binary16 256 B.
  const kv_format b16, i8 = kv_format::named("int8"), i4 = kv_format::named("int4");  // G 32 by default
  CHECK(b16.row_bytes(128) == 256);
  CHECK(i8.row_bytes(128) == 144);
  CHECK(i4.row_bytes(128) == 80);
  CHECK(i4.scale_bytes(128) == 16);
  CHECK(kv_format(i4.type(), kv_format_params{128, 1.0f}).row_bytes(128) == 64 + 4);
  // The command encodes it; 16-bit formats leave a command's flags as they were.
  CHECK(b16.command_bits() == 0);
  CHECK(kv_format::named("bfloat16").command_bits() == 0);
  CHECK(kv_format::named("fixed16").command_bits() == 0);
  CHECK(i8.command_bits() == (3u << flag_kv_format_shift | 5u << flag_kv_group_shift));  // as before the registry
  const kv_format back = kv_format::from_command(i4.command_bits() | flag_b_16bit);
  CHECK(back.name() == "int4");
  CHECK(back.group() == 32);
  // KIVI's asymmetric quantiser: a group spanning [-1, 2] in int4 has zero -1 and scale 3 / 15 =
  // 0.2, 0.19995117 in binary16; 0.5 is (0.5 + 1) / 0.19995 = 7.5 -> code 8 -> 8 x 0.19995 - 1 =
  // 0.59961; the ends are exact codes 0 and 15 (2 reads back as 1.9993).
  const kv_format::group_params p = i4.params(-1.0f, 2.0f);
  CHECK(p.zero == -1.0f);
  CHECK(p.scale == Approx(0.19995117).epsilon(1e-7));
  CHECK(i4.quantise(0.5f, p) == 8);
  CHECK(i4.dequantise(8, p) == Approx(0.59961).epsilon(1e-4));
  CHECK(i4.quantise(-1.0f, p) == 0);
  CHECK(i4.quantise(2.0f, p) == 15);
  CHECK(i4.quantise(9.0f, p) == 15);  // clamped
  CHECK(i8.quantise(2.0f, i8.params(-1.0f, 2.0f)) == 255);
  CHECK(i4.quantise(3.0f, i4.params(3.0f, 3.0f)) == 0);  // one value: zero scale, the zero point
  CHECK(i4.dequantise(0, i4.params(3.0f, 3.0f)) == 3.0f);
}

TEST_CASE("kv_format: Llama2-7B's KV bytes, eDRAM tokens and refresh bits at int4 and int8, by hand",
          "[kv_format][slow]") {
  // Per token and layer, K and V of 32 KV heads: binary16 2 x 32 x 256 = 16384 B, int8 2 x 32 x 144
  // = 9216 B, int4 2 x 32 x 80 = 5120 B. One sequence, 512 token slots: K (or V) of a layer is
  // 512 x 32 x row bytes. The KV eDRAM holds 4 MiB = 4194304 B; whole layers first, then the first
  // slots of the next layer (placement `fill`: K and V each aligned to 4 KiB pages).
  //   binary16: a layer 2 x 4 MiB: 0 layers; 4194304 / (2 x 8192) = 256 slots (2 x 2 MiB, aligned).
  //   int8:     a layer 2 x 2359296 B: 0 layers; 4194304 / (2 x 4608) = 455.1 -> 455 slots
  //             (455 x 4608 = 2096640 B, 512 pages = 2097152 B each half: 4194304 B, fits).
  //   int4:     a layer 2 x 1310720 B (320 pages each): 1 layer; 4194304 - 2621440 = 1572864 B
  //             left: 1572864 / (2 x 2560) = 307.2 -> 307 slots (785920 B, 192 pages each: fits).
  // The decode step writes one token's K and V in every layer: 32 x the bytes per token and layer.
  // The refresh keeps the on-chip KV's bits: 2DRP's and uniform's field map splits each region's
  // bytes into its MSB and LSB banks, half and half (an int4 code's bits 3-2 and 1-0, an int8
  // code's 7-4 and 3-0, a binary16 scale's 15-8 and 7-0).
  struct point {
    const char* format;
    double per_token_layer, layers_on_chip, chip_tokens, chip_bytes;
  };
  const point points[] = {
      {"binary16", 16384, 0, 256, 2.0 * 256 * 8192},
      {"int8", 9216, 0, 455, 2.0 * 455 * 4608},
      {"int4", 5120, 1, 307, 2.0 * 512 * 2560 + 2.0 * 307 * 2560},
  };
  double bits_b16 = 0;
  for (const point& pt : points) {
    INFO(pt.format);
    const auto r = llama_point(pt.format);
    const auto& f = r["kv"]["format"];
    CHECK(f["name"] == pt.format);
    CHECK(f["bytes_per_token_layer"].get<double>() == pt.per_token_layer);
    CHECK(f["tokens_per_MiB"].get<double>() == Approx(1048576.0 / (32 * pt.per_token_layer)));
    CHECK(r["llm"]["kv_layers_on_chip"].get<double>() == pt.layers_on_chip);
    CHECK(r["llm"]["kv_chip_tokens"].get<double>() == pt.chip_tokens);
    CHECK(r["llm"]["kv_bytes_written"].get<double>() == 32 * pt.per_token_layer);
    // The refresh's stored bits: MSB and LSB halves of the on-chip KV bytes, each failing with the
    // same probability under one uniform interval, so their expected failed bits are equal and
    // in proportion to the on-chip bytes.
    const auto& by = r["refresh"]["expected_failed_bits_by_field"];
    const double msb = by["msb"].get<double>(), lsb = by["lsb"].get<double>();
    CHECK(msb == Approx(lsb));
    const double bits = msb + lsb;
    REQUIRE(bits > 0);
    if (bits_b16 == 0) bits_b16 = bits / (8 * pt.chip_bytes);  // expected failures per stored bit
    CHECK(bits == Approx(bits_b16 * 8 * pt.chip_bytes).epsilon(1e-9));
    // The eDRAM refreshes exactly those bytes at the end of the run.
    CHECK(r["stats"]["kv_edram"]["live_bytes"]["value"].get<double>() == pt.chip_bytes);
  }
}

TEST_CASE("kv_format: an int4 KV reads fewer DRAM bytes than binary16, in proportion to its rows", "[kv_format]") {
  // A small model whose cache is all in DRAM (kv_memory: dram): the decode step reads every
  // stored token's K and V once per layer; 8 KV heads of 64 channels, G = 32:
  // binary16 rows 128 B, int4 32 + 8 = 40 B.
  const std::string yaml = "system: kelle_edram\nworkload: {type: llm, placement: {kv_memory: dram}}\n";
  std::vector<std::string> o = {"policy.kv=full", "policy.refresh=none", "workload.skip_prefill=true",
                                "workload.context_len=255", "workload.decode_len=1", "workload.progress=false",
                                "workload.model={layers: 2, hidden: 512, heads: 8, ffn: 1024, vocab: 1000}"};
  auto b16 = run(yaml, o);
  o.push_back("policy.kv_format=int4");
  auto i4 = run(yaml, o);
  // K and V of 256 tokens (the new one included), 8 heads, 2 layers.
  const double rows = 2.0 * 256 * 8 * 2;
  CHECK(b16["traffic_bytes"]["dram_kv"].get<double>() >= rows * 128);
  const double kv16 = b16["traffic_bytes"]["dram_kv"].get<double>(), kv4 = i4["traffic_bytes"]["dram_kv"].get<double>();
  INFO(kv16 << " " << kv4);
  // Reads and the new token's writes all scale by 40 / 128 (the RoPE of the new keys stays 16-bit).
  CHECK(kv4 < 0.33 * kv16);
  CHECK(kv4 > 0.30 * kv16);
}

TEST_CASE("kv_format: AERP compares x with the format's K and V bytes", "[kv_format]") {
  // Llama2-7B: x is 4096 x 2 B = 8192 B; K and V of a token in one KV head: binary16 512 B, int4
  // 160 B. A token stored as x must be kept by more than 8192 / 512 = 16 heads in binary16, by
  // more than 8192 / 160 = 51.2 heads (of 32: never) in int4: with int4 AERP stores no x.
  const auto m = models().create("llama2-7b");
  model_shape s = *m;
  CHECK(double(s.x_bytes_per_token()) / (2.0 * s.kv_row_bytes()) == 16);
  s.kv = kv_format::named("int4");
  CHECK(double(s.x_bytes_per_token()) / (2.0 * s.kv_row_bytes()) == Approx(51.2));
  // The policy itself: AERP can store x in binary16 (all 32 heads' K and V outweigh x), never in int4.
  auto cfg = config::from_string("attention: {seed: 1}\nkv: {kv_budget: 128}\n");
  for (const bool int4 : {false, true}) {
    model_shape ms = *m;
    if (int4) ms.kv = kv_format::named("int4");
    auto src = make_attention_source({cfg.root().child_or_empty("attention"), ms.layers, ms.heads});
    auto p = kv_policies().create("aerp", kv_policy_args{cfg.root().child("kv"), ms, 1, src.get()});
    INFO("int4: " << int4);
    CHECK(p->recomputes());
    CHECK(p->can_store_x() == !int4);
  }
}

TEST_CASE("functional: int8 and int4 KV match the reference that quantises the same way", "[functional][kv_format]") {
  for (const char* f : {"int8", "int4"}) {
    const auto q = quantised_run(f);
    // Against full precision the format costs something, int4 more than int8.
    CHECK(q["full_precision"]["kl_divergence"].get<double>() > q["kl_divergence"].get<double>());
  }
  const auto r8 = tiny({"policy.kv_format=int8"});
  const auto r4 = tiny({"policy.kv_format=int4"});
  CHECK(r4["quality"]["full_precision"]["kl_divergence"].get<double>() >
        r8["quality"]["full_precision"]["kl_divergence"].get<double>());
}

TEST_CASE("functional: an int4 KV with AEP eviction matches the reference over the kept tokens", "[functional][kv_format]") {
  const auto r = tiny({"policy.kv_format=int4", "policy.kv=aep",
                                 "policy.kv_budget=10", "policy.sink_tokens=2", "policy.recent_window=4"});
  const auto& q = r["quality"];
  INFO(q.dump());
  within_tolerance(q);
  CHECK(r["kv"]["tokens_kept"].get<double>() < 2 * 24);  // it evicted
}

TEST_CASE("functional: bit errors hit the int4 codes' MSB or LSB half", "[functional][kv_format]") {
  // Every stored bit of the group at rate 0.02: an int4 code has 4 bits, 2 in each half.
  for (const char* g : {"lst_lsb", "hst_msb"}) {
    INFO(g);
    const auto r = tiny({"policy.kv_format=int4", "policy.kv=aep",
                                   "policy.kv_budget=64", "policy.sink_tokens=2", "policy.recent_window=4",
                                   "functional.faults.mode=ber", "functional.faults.ber=0.02",
                                   std::string("functional.faults.group=") + g});
    const auto& q = r["quality"];
    for (const auto& [k, v] : q["flipped_bits"].items()) {
      if (k == g) {
        CHECK(v.get<double>() > 20);
        CHECK(q["flip_rate"][k].get<double>() == Approx(0.02).epsilon(0.35));
      } else {
        CHECK(v.get<double>() == 0);
      }
    }
  }
}

TEST_CASE("functional: an int4 run's timing and traffic are the timing mode's at int4", "[functional][kv_format]") {
  const auto f = tiny({"policy.kv_format=int4"});
  const auto t = tiny({"policy.kv_format=int4", "mode=timing"});
  CHECK(f["latency_s"]["total"] == t["latency_s"]["total"]);
  CHECK(f["traffic_bytes"] == t["traffic_bytes"]);
  CHECK(!t.contains("quality"));
  // And the int4 cache moves fewer KV bytes than the binary16 one of the same run.
  const auto b = tiny({"mode=timing"});
  CHECK(t["llm"]["kv_bytes_written"].get<double>() < b["llm"]["kv_bytes_written"].get<double>());
}

// The OCP FP8 formats (models/compute/kv_format/fp8.cpp; their codes by hand: kv_format_fp8_test.cpp).
TEST_CASE("functional: fp8 KV matches the reference that quantises the same way", "[functional][kv_format][fp8]") {
  // Against full precision both cost something, E5M2's 2 mantissa bits more than E4M3's 3.
  const double e4m3 = quantised_run("fp8_e4m3")["full_precision"]["kl_divergence"].get<double>();
  const double e5m2 = quantised_run("fp8_e5m2")["full_precision"]["kl_divergence"].get<double>();
  CHECK(e4m3 > 0);
  CHECK(e5m2 > e4m3);
}

TEST_CASE("functional: bit errors hit the fp8 codes' MSB or LSB half, and its timing is the timing mode's",
          "[functional][kv_format][fp8]") {
  for (const char* g : {"lst_lsb", "hst_msb"}) {
    INFO(g);
    const auto r = tiny({"policy.kv_format=fp8_e4m3", "policy.kv=aep", "policy.kv_budget=64", "policy.sink_tokens=2",
                         "policy.recent_window=4", "functional.faults.mode=ber", "functional.faults.ber=0.02",
                         std::string("functional.faults.group=") + g});
    for (const auto& [k, v] : r["quality"]["flipped_bits"].items()) CHECK((v.get<double>() > 20) == (k == g));
  }
  const auto f = tiny({"policy.kv_format=fp8_e5m2"});
  const auto t = tiny({"policy.kv_format=fp8_e5m2", "mode=timing"});
  CHECK(f["latency_s"]["total"] == t["latency_s"]["total"]);
  CHECK(f["traffic_bytes"] == t["traffic_bytes"]);
  const auto b = tiny({"mode=timing"});
  CHECK(t["llm"]["kv_bytes_written"].get<double>() < b["llm"]["kv_bytes_written"].get<double>());
}
