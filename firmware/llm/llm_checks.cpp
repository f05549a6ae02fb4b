// The llm workload's checks before its run: every command the run will issue, at its largest
// sizes, is asked of the block that runs it (check_commands, check_sfu_rows), and the
// activations a pass needs at once must fit their arena; a refusal is an input error naming the
// keys the size comes from and the block's own words for its limit (compute_block::refusal).
#include "firmware/llm/llm_workload.h"

#include "models/compute/compute_block.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kelle {

// The SFU's row commands must fit its buffer: a norm over a hidden vector and a softmax over a
// row of scores (every key a query attends to). A system whose SFU would refuse them is an
// input error now, not a failed command in the middle of the run.
void llm_workload::check_sfu_rows(const workload_args& a, std::uint64_t keys) const {
  compute_block* block = a.platform.block("sfu");
  if (!block) return;
  const opcode norm = m_model.norm == norm_kind::rmsnorm ? opcode::rmsnorm : opcode::layernorm;
  const std::pair<opcode, std::uint64_t> rows[] = {{norm, m_model.hidden}, {opcode::softmax, keys}};
  for (const auto& [op, k] : rows) {
    command c;
    c.op = op;
    c.m = 1;
    c.k = static_cast<std::uint32_t>(std::min<std::uint64_t>(k, 0xffffffffu));
    c.n = 1;
    c.batch = 1;
    // A row beyond what the SFU's design takes is not the buffer's doing (check_commands names it).
    if (!block->design_limit(c).empty()) continue;
    const cmd_status st = block->check(c);
    if (st != cmd_status::ok)
      a.root->child_or_empty("system").child_or_empty("compute").child_or_empty("sfu").fail(
          "buffer_KiB", "the SFU refuses " + to_string(op) + " over a row of " + std::to_string(k) + " elements (" +
                            to_string(st) + "), which this run needs (" +
                            (op == opcode::softmax ? "the keys a query attends to" : "the model's hidden size") +
                            "); raise system.compute.sfu.buffer_KiB or shorten the run");
  }
}

namespace {

// A command's sizes, wider than its 32-bit fields (a size that does not fit one is refused).
struct shape {
  opcode op;
  std::uint64_t m, k, n = 1, batch = 1;
  std::uint32_t flags = 0;
};

std::string describe(const shape& s) {
  std::string t = to_string(s.op) + " m " + std::to_string(s.m) + ", k " + std::to_string(s.k);
  if (s.op == opcode::gemm || s.op == opcode::gemm_transposed || s.op == opcode::evict_select)
    t += ", n " + std::to_string(s.n);
  if (s.batch > 1) t += ", batch " + std::to_string(s.batch);
  return t;
}

bool fits_fields(const shape& s) {
  const std::uint64_t field = 0xffffffffu;
  return s.m <= field && s.k <= field && s.n <= field && s.batch <= field;
}

// The command of a shape whose sizes fit its fields.
command command_of(const shape& s) {
  command c;
  c.op = s.op;
  c.m = static_cast<std::uint32_t>(s.m);
  c.k = static_cast<std::uint32_t>(s.k);
  c.n = static_cast<std::uint32_t>(s.n);
  c.batch = static_cast<std::uint32_t>(s.batch);
  c.flags = s.flags;
  return c;
}

// Why a block refuses a shape (what its docs page gives as the limit), or "".
std::string limit_of(const compute_block* b, const shape& s) {
  if (!fits_fields(s)) return "a size beyond a command's 32-bit field";
  return b->refusal(command_of(s));
}

}  // namespace

void llm_workload::check_commands(const workload_args& a, std::uint64_t kv_tokens) const {
  const config_node& p = a.params;
  const config_node root = *a.root;
  const config_node pol = root.child_or_empty("policy");
  const config_node blocks = root.child_or_empty("system").child_or_empty("compute");
  compute_block* rsa_block = a.platform.block("rsa");
  compute_block* sfu_block = a.platform.block("sfu");
  compute_block* evictor = nullptr;
  for (compute_block* b : a.platform.blocks())
    if (b->victim_select_heads()) evictor = b;
  const std::uint64_t B = m_batch, C = m_model.hidden, D = m_model.head_dim, H = m_model.heads,
                      KVH = m_model.kv_heads, g = H / KVH, F = m_model.ffn, V = m_model.vocab, ab = model_shape::act_bytes;
  const std::uint64_t Q = H * D, KV = KVH * D;
  const opcode norm = m_model.norm == norm_kind::rmsnorm ? opcode::rmsnorm : opcode::layernorm;
  const bool evicts = m_policy && m_policy->budget() > 0 && m_decode > 0 && m_context + m_decode > m_policy->budget();

  // A key a size comes from: (its map, its name, its value as shown).
  struct key {
    const config_node* node;
    std::string name, value;
  };
  const key batch{&p, "batch", std::to_string(m_batch)}, context{&p, "context_len", std::to_string(m_context)},
      decode{&p, "decode_len", std::to_string(m_decode)}, model{&p, "model", m_model.name},
      budget{&pol, "kv_budget", m_policy ? std::to_string(m_policy->budget()) : "0"};
  const config_node placement = p.child_or_empty("placement");
  const key arena_kib{&placement, "act_arena_KiB", std::to_string(m_plan->arena().bytes >> 10)};
  const config_node evictor_cfg = evictor ? blocks.child_or_empty(evictor->basename()) : blocks;
  const std::uint64_t evictor_slots = evictor ? evictor->victim_select_slots() : 0;
  const key slots{&evictor_cfg, "max_slots", evictor_slots ? std::to_string(evictor_slots) : ""};

  // The error names every key the size comes from; it is blamed on the first the user set (the
  // command line first), so that its file and line lead to it.
  auto refuse = [&](const std::string& what, compute_block* b, const shape& s, cmd_status st, const std::vector<key>& keys) {
    const key* blame = nullptr;
    for (const key& k : keys)  // the command line's first, then a file's
      if (!blame && k.node->origin(k.name).rfind("command line", 0) == 0) blame = &k;
    for (const key& k : keys)
      if (!blame && k.node->origin(k.name) != "default") blame = &k;
    if (!blame) blame = &keys.front();
    std::string from;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const key& k = keys[i];
      from += std::string(i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + k.node->key_path(k.name) +
              (k.value.empty() ? "" : k.name == "model" ? " (" + k.value + ")" : " " + k.value);
    }
    const std::string why = limit_of(b, s);
    blame->node->fail(blame->name, what + " is " + b->basename() + " " + describe(s) + ", which " + b->basename() +
                                       " refuses (" + to_string(st) + (why.empty() ? "" : ": " + why) +
                                       "); it follows from " + from);
  };
  auto need = [&](const std::string& what, compute_block* b, const shape& s, const std::vector<key>& keys) {
    if (!b) return;
    const cmd_status st = fits_fields(s) ? b->check(command_of(s)) : cmd_status::bad_shape;
    if (st != cmd_status::ok) refuse(what, b, s, st, keys);
  };

  // The model alone: RoPE rotates pairs of a head's elements.
  need("the RoPE of the queries (head_dim " + std::to_string(D) + ")", sfu_block, {opcode::rope, H, D}, {model});

  // The prefill (every context token, attending to the context) and the last decode step (one
  // token per sequence, attending to the most tokens a head keeps: every token, or with a KV
  // policy at most its budget once the prefill is done), at their sizes.
  struct pass_size {
    const char* name;
    std::uint64_t T, N;
    std::vector<key> keys;
  };
  std::vector<pass_size> passes;
  if (!m_skip_prefill) passes.push_back({"the prefill", m_context, m_context, {batch, context, model}});
  if (m_decode > 0) {
    std::vector<key> k{batch, context, decode};
    if (m_policy && m_policy->budget() > 0) k.push_back(budget);
    k.push_back(model);
    const bool budget_set = m_policy && m_policy->budget() > 0;
    const std::uint64_t attended = budget_set ? std::min(m_context + m_decode, m_policy->budget()) : m_context + m_decode;
    passes.push_back({"the last decode step", 1, std::min(attended, kv_tokens), k});
  }
  std::uint64_t live = 0, largest = 0;
  std::string live_what;
  const auto a64 = [](std::uint64_t b) { return (b + 63) / 64 * 64; };
  for (const pass_size& ps : passes) {
    const std::uint64_t R = B * ps.T, T = ps.T, N = ps.N;
    const std::string of = std::string(" of ") + ps.name;
    const auto cols = [&](std::uint64_t k, std::uint64_t n) { return m_ops->tile_cols(k, n); };
    need("the norm" + of, sfu_block, {norm, R, C}, ps.keys);
    need("MM_q" + of, rsa_block, {opcode::gemm, R, C, cols(C, Q)}, ps.keys);
    need("MM_k and MM_v" + of, rsa_block, {opcode::gemm, R, C, cols(C, KV)}, ps.keys);
    need("the RoPE of the queries" + of, sfu_block, {opcode::rope, R * H, D}, ps.keys);
    need("the RoPE of the keys" + of, sfu_block, {opcode::rope, R * KVH, D}, ps.keys);
    // The attention, in groups of KV heads whose scores fit the arena: one head at least, at most
    // as many as the arena holds the two score buffers of.
    const std::uint64_t per_head = B * g * T * N * ab;
    const std::uint64_t fit = per_head ? m_plan->arena().bytes / (2 * per_head) : KVH;
    const std::uint64_t most = std::max<std::uint64_t>(1, std::min<std::uint64_t>(KVH, fit));
    for (const std::uint64_t h : {std::uint64_t(1), most}) {
      std::vector<key> k = ps.keys;
      std::string heads = h == 1 ? "" : " (" + std::to_string(h) + " KV heads a group, as the arena holds their scores)";
      if (h > 1) k.push_back(arena_kib);
      need("q . K^T" + of + heads, rsa_block, {opcode::gemm_transposed, g * T, D, N, B * h}, k);
      need("the softmax" + of + heads, sfu_block, {opcode::softmax, B * h * g * T, N}, k);
      if (evicts && !evictor && !m_fn && T == 1) need("the minimum search" + of + heads, sfu_block, {opcode::min_search, B * h, N}, k);
      need("A . V" + of + heads, rsa_block, {opcode::gemm, g * T, N, D, B * h, flag_b_16bit}, k);
      if (h == most) break;
    }
    need("MM_o" + of, rsa_block, {opcode::gemm, R, Q, cols(Q, C)}, ps.keys);
    need("the residual add" + of, sfu_block, {opcode::add, R, C}, ps.keys);
    need("the FFN's up projection" + of, rsa_block, {opcode::gemm, R, C, cols(C, F)}, ps.keys);
    need("the FFN's activation" + of, sfu_block, {m_model.ffn_type == ffn_kind::gated_silu ? opcode::silu : opcode::gelu, R, F},
         ps.keys);
    if (m_model.gated_ffn()) need("the FFN's gate" + of, sfu_block, {opcode::mul, R, F}, ps.keys);
    need("the FFN's down projection" + of, rsa_block, {opcode::gemm, R, F, cols(F, C)}, ps.keys);
    // What a pass must hold at once, whatever the scheduler, by the data's own lifetimes: x (the
    // residual stream) beside the attention's q, its output and the scores of one KV head; beside
    // the FFN's input and the two projections the gate multiplies (or its hidden vector and its
    // output); beside the LM head's input and its logits.
    const std::uint64_t x = a64(R * C * ab), q = a64(R * Q * ab), xn = a64(R * C * ab), out = xn, h = a64(R * F * ab);
    const bool gated = m_model.gated_ffn();
    const std::uint64_t lm_in = a64(B * C * ab), logits = a64(B * V * ab);
    const std::tuple<std::uint64_t, std::uint64_t, const char*> at_once[] = {
        {x + 2 * q + a64(per_head), std::max({x, q, a64(per_head)}), "x, q, the attention's output and one head's scores"},
        {x + std::max(xn + h + (gated ? h : 0), h + out), std::max(x, h), "x and the FFN's input, hidden vectors and output"},
        {x + lm_in + logits, std::max(x, logits), "x, the LM head's input and the logits"}};
    for (const auto& [bytes, big, what] : at_once)
      if (bytes > live) {
        live = bytes;
        largest = big;
        live_what = std::string(ps.name) + " holds " + what;
      }
  }
  if (!passes.empty()) {  // the LM head, on the last token of each sequence
    need("the final norm", sfu_block, {norm, B, C}, {batch, model});
    need("the LM head", rsa_block, {opcode::gemm, B, C, m_ops->tile_cols(C, V)}, {batch, model});
  }
  if (evicts && evictor && !m_fn) {  // the victim of each KV head among the tokens it attends to
    const std::uint64_t offset = m_context + m_decode - 1;
    const std::uint64_t k = std::max<std::uint64_t>(1, std::min(passes.back().N, offset));
    std::vector<key> keys{context, decode, budget, slots};
    need("the victim selection of the last decode step", evictor,
         {opcode::evict_select, std::min<std::uint64_t>(evictor->victim_select_heads(), B * KVH), k, offset}, keys);
  }
  if (const std::string e = m_plan->activations_error(live, largest, live_what); !e.empty()) throw config_error(e);
}

}  // namespace kelle
