// The first-order estimate (estimate.h): the design resolved from its scenario (the memories and
// blocks built once and kept, the workload, the placement, the refresh rates), the phases
// integrated from passes (the prefill, decode's steps by Simpson's rule), the results' JSON.
// estimate_pass.cpp prices a pass, command by command.
#include "firmware/llm/estimate.h"

#include "firmware/llm/estimate_pass.h"

#include "firmware/llm/run_config.h"
#include "firmware/policies/kv/kv_policy.h"
#include "firmware/policies/refresh/refresh_policy.h"
#include "firmware/schedulers/layer_ops.h"
#include "firmware/workload/activation_arena.h"
#include "firmware/workload/memory_plan.h"
#include "firmware/workload/model_zoo.h"
#include "models/compute/command.h"
#include "models/compute/compute_block.h"
#include "models/memory/memory_target.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace kelle {

using estimate_model::align;
using estimate_model::block_info;
using estimate_model::design;
using estimate_model::ledger;
using estimate_model::max_res;
using estimate_model::mem_info;
using estimate_model::none;
using estimate_model::pass;

namespace {

// The text of a subtree as a cache key: every key and scalar in order (no emitter: it is the
// estimate's hot path).
void key_of(const YAML::Node& n, std::string& out) {
  if (n.IsMap()) {
    out += '{';
    for (const auto& kv : n) {
      out += kv.first.Scalar();
      out += ':';
      key_of(kv.second, out);
      out += ',';
    }
    out += '}';
  } else if (n.IsSequence()) {
    out += '[';
    for (const auto& e : n) {
      key_of(e, out);
      out += ',';
    }
    out += ']';
  } else if (n.IsScalar()) {
    out += n.Scalar();
  }
}

std::string dump(const YAML::Node& n) {
  std::string out;
  key_of(n, out);
  return out;
}

// A scenario's memory or block, keyed by everything its constructor reads.
template <class T>
struct instance {
  std::shared_ptr<config> cfg;  // the scenario it was built from (its sections stay readable)
  std::unique_ptr<T> model;
};

int index_of(const std::vector<mem_info>& v, const std::string& name) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return static_cast<int>(i);
  return none;
}

}  // namespace

struct first_order_estimate::cache {
  std::map<std::string, instance<memory_target>> mems;
  std::map<std::string, instance<compute_block>> blocks;
  unsigned built = 0;
};

first_order_estimate::first_order_estimate() : m_cache(std::make_unique<cache>()) {}
first_order_estimate::~first_order_estimate() = default;

nlohmann::json first_order_estimate::evaluate(const std::shared_ptr<config>& cfg_ptr) {
  config& cfg = *cfg_ptr;
  const config_node root = cfg.root();
  if (!root.has("tech")) root.missing("tech", "a map (name a system, system: kelle_edram, or include a technology file)");
  const config_node tech = root.child("tech");
  const config_node sys = root.child("system");
  const std::string tech_key = dump(cfg.effective()["tech"]);
  const double clock_GHz = sys.get_double("clock_GHz", 1.0, "accelerator clock in GHz", 1e-3, 1e3);
  design d;

  // The hardware: each memory and block the model a run builds, from the same sections.
  const config_node mems = sys.child("memories");
  for (const std::string& n : mems.keys()) {
    const config_node mn = mems.child(n);
    const std::string model = mn.require_choice("model", memories().name_list());
    const std::string key = model + "\n" + dump(cfg.effective()["system"]["memories"][n]) + tech_key;
    auto it = m_cache->mems.find(key);
    if (it == m_cache->mems.end()) {
      instance<memory_target> inst{cfg_ptr, memories().create(model, memory_args{
          "estimate" + std::to_string(m_cache->built++) + "_" + n, mn, tech})};
      it = m_cache->mems.emplace(key, std::move(inst)).first;
    }
    const memory_target* mt = it->second.model.get();
    if (d.mems.size() == max_res) sys.fail("memories", "more than " + std::to_string(max_res) + " memories");
    d.mems.push_back({n, mt, mt->sustainable_bandwidth_Bps(), mt->first_order(), mt->capacity_bytes()});
  }
  const config_node comp = sys.child_or_empty("compute");
  for (const std::string& n : comp.keys()) {
    const config_node cn = comp.child(n);
    if (!cn.get_bool("enabled", true, "instantiate the block (false: the system without it)")) continue;
    const std::string model = cn.require_choice("model", compute_blocks().name_list());
    const std::string key = model + "\n" + dump(cfg.effective()["system"]["compute"][n]) + tech_key +
                            std::to_string(clock_GHz);
    auto it = m_cache->blocks.find(key);
    if (it == m_cache->blocks.end()) {
      instance<compute_block> inst{cfg_ptr, compute_blocks().create(model, compute_args{
          "estimate" + std::to_string(m_cache->built++) + "_" + n, cn, tech, clock_GHz})};
      it = m_cache->blocks.emplace(key, std::move(inst)).first;
    }
    if (d.blocks.size() == max_res) sys.fail("compute", "more than " + std::to_string(max_res) + " blocks");
    const int i = static_cast<int>(d.blocks.size());
    const compute_block* b = it->second.model.get();
    d.blocks.push_back({n, b});
    d.clock_Hz.push_back(b->clock_Hz());
    if (b->systolic_array() && d.rsa == none) {
      d.rsa = i;
      d.rsa_cols = b->systolic_array()->cols;
    } else if (model == "sfu" && d.sfu == none) {
      d.sfu = i;
    } else if (model == "evictor" && d.evictor == none) {
      d.evictor = i;
    }
  }
  if (d.rsa == none || d.sfu == none)
    sys.fail("compute", "the estimate needs a systolic array (model rsa) and an SFU (model sfu)");

  // The workload and the firmware's choices, read as the run reads them.
  const config_node wl = root.child("workload");
  const std::string type = wl.get_string("type", "llm", "workload type");
  if (type != "llm") wl.fail("type", "the estimate models LLM inference (type: llm), got '" + type + "'");
  d.m = runnable_model_from_config(wl);
  d.m.kv = kv_format::from_config(root.child_or_empty("policy"), d.m.head_dim);  // as the run sets it
  const run_lengths len = run_lengths::read(wl);
  d.batch = len.batch;
  d.context = len.context;
  d.decode = len.decode;
  d.skip_prefill = wl.get_bool("skip_prefill", false, "assume the context already in the cache; decode only");
  const run_config rc = run_config::resolve(root);
  const config_node pol = root.child_or_empty("policy");
  d.kv_slots = d.context + d.decode;
  if (rc.kv_policy.name != "full") {
    d.budget = pol.get_uint("kv_budget", len.budget_default(default_kv_budget), "tokens kept per KV head (N')", 1,
                            1u << 30);
    d.kv_slots = std::min(d.kv_slots, std::max(d.budget, d.context));
  }

  // Placement: memory_plan's own sizes.
  const config_node pl = wl.child_or_empty("placement");
  std::string names;
  for (const auto& mi : d.mems) names += (names.empty() ? "" : ", ") + mi.name;
  const memory_plan::sizes z = memory_plan::size(
      d.m, d.batch, d.kv_slots, pl,
      [&d](const std::string& n) {
        const int i = index_of(d.mems, n);
        return i == none ? ~std::uint64_t(0) : d.mems[static_cast<std::size_t>(i)].capacity;
      },
      names);
  d.dram = index_of(d.mems, z.dram);
  d.wmem = index_of(d.mems, z.weight_mem);
  d.kvmem = index_of(d.mems, z.kv_mem);
  d.amem = index_of(d.mems, z.act_mem);
  d.tile_buffer = z.tile_buffer;
  d.arena = z.arena;
  d.kv_on_chip = z.kv_on_chip;
  d.chip_tokens = z.chip_tokens;
  d.chip_order = z.chip_order;
  const bool allow = pl.get_bool("allow_dram_overflow", false, "let weights and KV exceed the DRAM's capacity");

  // Refresh rates: the KV at the refresh policy's intervals (high- and low-score groups taken
  // half and half, each bit half at its own), the activations at the array's own.
  const auto& kvfig = d.mems[static_cast<std::size_t>(d.kvmem)].fig;
  const auto refresh = refresh_policies().create(rc.refresh_policy.name, pol);
  // As the run does (llm_workload): a refresh policy that cannot lay out the format's fields refuses.
  if (const std::string refusal = refresh->set_kv_format(d.m.kv); !refusal.empty()) pol.fail("kv_format", refusal);
  if (kvfig.refresh_J_per_bit > 0) {
    double rate = 0;
    for (bool high : {true, false})
      for (bool msb : {true, false}) {
        const double i = refresh->interval_s(high, msb);
        const double iv = i > 0 ? i : kvfig.refresh_interval_s;
        rate += iv > 0 ? 0.25 / iv : 0.0;
      }
    d.kv_refresh_rate = rate;
  }
  const auto& afig = d.mems[static_cast<std::size_t>(d.amem)].fig;
  d.act_refresh_rate = afig.refresh_interval_s > 0 ? 1.0 / afig.refresh_interval_s : 0.0;

  // DRAM fit: weights (memory_plan's layout) and the KV not on chip.
  const std::uint64_t weights = z.weight_bytes;
  std::uint64_t kv_dram = 0;
  for (unsigned i = d.kv_on_chip; i < d.m.layers; ++i) kv_dram += 2 * align(z.half_of(d.m, z.chip_order[i], d.kv_slots));
  const std::uint64_t dram_cap = d.mems[static_cast<std::size_t>(d.dram)].capacity;
  const bool fits = weights + kv_dram < dram_cap;

  // The phases.
  ledger prefill, decode;
  if (!d.skip_prefill) prefill = pass(d, d.context, d.context, d.context / 2, true, false);
  const std::uint64_t cap = d.budget ? d.budget : ~std::uint64_t(0);
  const std::uint64_t grow = d.budget ? std::min(d.decode, d.budget > d.context ? d.budget - d.context : 0) : d.decode;
  auto step = [&](std::uint64_t s) {
    const std::uint64_t n = std::min(d.context + s + 1, cap);
    return pass(d, 1, n, n, false, d.budget && d.context + s + 1 > d.budget);
  };
  if (grow >= 3) {  // Simpson's rule over the steps where the cache grows
    const double g = static_cast<double>(grow);
    decode.add(step(0), g / 6);
    decode.add(step((grow - 1) / 2), 4 * g / 6);
    decode.add(step(grow - 1), g / 6);
  } else {
    for (std::uint64_t s = 0; s < grow; ++s) decode.add(step(s), 1);
  }
  if (d.decode > grow) decode.add(step(grow), static_cast<double>(d.decode - grow));

  // Results.
  auto phase_json = [&](const ledger& l) {
    double bound = 0, no_overlap = 0;
    std::string bottleneck;
    nlohmann::json res = nlohmann::json::object();
    for (std::size_t i = 0; i < d.mems.size(); ++i) {
      const double dem = std::isfinite(d.mems[i].bw_Bps) && d.mems[i].bw_Bps > 0 ? (l.rd[i] + l.wr[i]) / d.mems[i].bw_Bps : 0;
      res[d.mems[i].name] = {{"bytes_read", l.rd[i]}, {"bytes_written", l.wr[i]}, {"demand_s", dem}};
      if (dem > bound) bound = dem, bottleneck = d.mems[i].name;
      if (static_cast<int>(i) == d.dram) no_overlap += dem;
    }
    for (std::size_t i = 0; i < d.blocks.size(); ++i) {
      const double dem = l.cyc[i] / d.clock_Hz[i];
      res[d.blocks[i].name] = {{"cycles", l.cyc[i]}, {"demand_s", dem}};
      if (dem > bound) bound = dem, bottleneck = d.blocks[i].name;
      no_overlap += dem;
    }
    return nlohmann::json{{"latency_s", l.time_s},     {"bound_s", bound},
                          {"no_overlap_s", no_overlap}, {"bottleneck", bottleneck},
                          {"dram_kv_bytes", l.dram_kv}, {"resources", res}};
  };
  ledger all;
  all.add(prefill, 1);
  all.add(decode, 1);
  const double T = all.time_s;
  nlohmann::json energy = nlohmann::json::object();
  double etotal = 0;
  auto put = [&](const std::string& k, double j) {
    if (j == 0) return;
    energy[k] = j;
    etotal += j;
  };
  nlohmann::json area = nlohmann::json::object();
  double atotal = 0;
  for (std::size_t i = 0; i < d.mems.size(); ++i) {
    const mem_info& mi = d.mems[i];
    const auto& f = mi.fig;
    const bool on_chip = mi.model->area_mm2() > 0;
    put(mi.name + ".access", all.rd[i] * f.read_J_per_B + all.wr[i] * f.write_J_per_B);
    put(mi.name + ".activate", (all.rd[i] + all.wr[i]) * f.activate_J_per_B);
    put(mi.name + (on_chip ? ".leakage" : ".background"), f.static_W * T);
    double refresh = f.refresh_W * T;
    if (static_cast<int>(i) == d.kvmem) refresh += all.kv_live_bit_s * d.kv_refresh_rate * f.refresh_J_per_bit;
    if (static_cast<int>(i) == d.amem) refresh += all.act_live_bit_s * d.act_refresh_rate * f.refresh_J_per_bit;
    put(mi.name + ".refresh", refresh);
    if (on_chip) {
      area[mi.name] = mi.model->area_mm2();
      atotal += mi.model->area_mm2();
    }
  }
  for (std::size_t i = 0; i < d.blocks.size(); ++i) {
    put(d.blocks[i].name + ".compute", all.J[i]);
    if (d.blocks[i].model->area_mm2() > 0) {
      area[d.blocks[i].name] = d.blocks[i].model->area_mm2();
      atotal += d.blocks[i].model->area_mm2();
    }
  }
  energy["total"] = etotal;
  area["total"] = atotal;
  const double tokens = static_cast<double>(d.batch) * static_cast<double>(d.decode);
  const std::string sys_name = cfg.effective()["system"]["name"] ? cfg.effective()["system"]["name"].Scalar() : "custom";
  nlohmann::json r;
  r["system"] = sys_name;
  r["llm"] = {{"model", d.m.name},   {"batch", d.batch},         {"context_len", d.context},
              {"decode_len", d.decode}, {"task", len.task_name}, {"kv_budget", d.budget},
              {"firmware", rc.to_json()}};
  r["latency_s"] = {{"prefill", prefill.time_s}, {"decode", decode.time_s}, {"total", T},
                    {"per_decode_step", d.decode ? decode.time_s / static_cast<double>(d.decode) : 0.0}};
  r["throughput"] = {{"tokens_per_s", T > 0 ? tokens / T : 0.0}};
  r["energy_J"] = energy;
  r["energy_per_token_J"] = tokens > 0 ? etotal / tokens : 0.0;
  r["area_mm2"] = area;
  r["placement"] = {{"kv_layers_on_chip", d.kv_on_chip}, {"kv_chip_tokens_partial_layer", d.chip_tokens},
                    {"kv_token_slots", d.kv_slots}, {"tile_buffer_bytes", d.tile_buffer}, {"act_arena_bytes", d.arena}};
  r["dram_fit"] = {{"capacity_bytes", dram_cap}, {"weights_bytes", weights}, {"kv_bytes", kv_dram},
                   {"fits", fits}, {"overflow_allowed", allow}};
  r["phases"] = {{"prefill", phase_json(prefill)}, {"decode", phase_json(decode)}};
  return r;
}

}  // namespace kelle
