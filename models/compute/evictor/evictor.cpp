#include "models/compute/evictor/evictor.h"

#include "platform/system/workload.h"

#include <limits>

namespace kelle {

namespace {

constexpr std::uint64_t index_bytes = 4;  // one 32-bit victim slot index per head

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

score_board_config board_config(const config_node& p) {
  score_board_config c;
  c.score_bits = static_cast<unsigned>(
      p.get_uint("score_bits", 4, "bits of an importance-score register (paper: 4)", 1, 16));
  c.scale = p.get_double("score_scale", 0.25,
                         "q.k units per quantisation level of a score contribution", 1e-12, 1e12);
  c.sink_tokens = p.get_uint("sink_tokens", 10, "first tokens never evicted (paper: 10)");
  c.recent_window = p.get_uint("recent_window", 64, "most recent tokens never evicted");
  return c;
}

}  // namespace

evictor::evictor(const sc_core::sc_module_name& name, const compute_args& a)
    : compute_block(name, a),
      m_rsa_name(a.params.get_string("rsa", "rsa", "the RSA whose score rows the evictor consumes")),
      m_board(board_config(a.params)),
      m_max_heads(a.params.get_uint("max_heads", 64, "heads (score columns) the evictor serves", 1,
                                    1u << 16)),
      m_max_slots(a.params.get_uint("max_slots", 65536, "KV slots per head (score registers)", 1,
                                    std::numeric_limits<std::uint32_t>::max() - 1)),
      m_select_cycles(a.params.get_uint("select_cycles", 1,
                                        "cycles of an evict_select before its result is written", 0,
                                        1u << 20)),
      m_score_rows(m_stats.counter("score_rows", "count", "score rows streamed in from the RSA")),
      m_scores(m_stats.counter("scores", "count", "scores accumulated into importance registers")),
      m_score_cycles(m_stats.counter("score_cycles", "cycles",
                                     "cycles accumulating score rows (one row segment per cycle)")),
      m_active_cycles(m_stats.counter("active_cycles", "cycles",
                                      "cycles the evictor works: score cycles + selection cycles")),
      m_selections(m_stats.counter("selections", "count", "evict_select commands completed")),
      m_victims(m_stats.counter("victims", "count", "victims chosen, all heads together")),
      m_protected_heads(m_stats.counter("protected_heads", "count",
                                        "heads of an evict_select whose every valid slot is protected")) {
  const config_node t = a.tech.child("evictor");
  m_power_W = t.require_double("power_W", "power of the evictor while it works, W", 0);
  m_area_mm2 = t.require_double("area_mm2", "area of the evictor, mm2", 0);
  m_stats.formula("area", "mm2", "evictor area (tech.evictor.area_mm2)", [this] { return m_area_mm2; });
  m_stats.energy(energy_kind::compute, "active", "active cycles x power / clock",
                 [this] { return m_active_cycles.value() / clock_Hz() * m_power_W; });
}

void evictor::connect(platform_view& platform) {
  compute_block* b = platform.block(m_rsa_name);
  if (!b)
    params().fail("rsa", "the systolic evictor sits beside an RSA, but this system has no compute block '" +
                             m_rsa_name + "' (it has: " + platform.block_names() + ")");
  m_rsa = dynamic_cast<rsa*>(b);
  if (!m_rsa) params().fail("rsa", "compute block '" + m_rsa_name + "' is not an RSA (model rsa)");
  m_rsa->set_score_listener(this);
}

void evictor::on_scores(const command& c, const sc_core::sc_time& /*first_row*/,
                        const sc_core::sc_time& last_row) {
  // A row of c.n scores leaves the array as ceil(n / cols) segments, one per output-column fold,
  // each in one cycle; the evictor updates that segment's registers and folds it into the
  // running minimum in the same cycle, so it keeps pace and the RSA never waits for it.
  const std::uint64_t rows = std::uint64_t(c.m) + c.extra;
  const std::uint64_t segments = rows * ceil_div(c.n, m_rsa ? m_rsa->cols() : c.n);
  m_score_rows += static_cast<double>(rows);
  m_scores += static_cast<double>(rows * c.n);
  m_score_cycles += static_cast<double>(segments);
  m_active_cycles += static_cast<double>(segments);
  if (last_row > m_scores_ready) m_scores_ready = last_row;
}

std::array<std::uint64_t, 4> evictor::operand_bytes(const command& c) const {
  if (c.op != opcode::evict_select) return {0, 0, 0, 0};
  return {0, 0, std::uint64_t(c.m) * index_bytes, 0};
}

cmd_status evictor::validate(const command& c) const {
  if (c.op != opcode::evict_select) return cmd_status::bad_opcode;
  if (c.m == 0 || c.k == 0 || c.m > m_max_heads || c.k > m_max_slots || c.k > c.n)
    return cmd_status::bad_shape;
  if (c.addr_c % index_bytes) return cmd_status::misaligned;
  if (c.addr_c > std::numeric_limits<std::uint64_t>::max() - std::uint64_t(c.m) * index_bytes)
    return cmd_status::bad_address;  // the result wraps around the address space
  return cmd_status::ok;
}

std::string evictor::design_limit(const command& c) const {
  return c.m > m_max_heads || c.k > m_max_slots ? refusal(c) : std::string();
}

std::string evictor::refusal(const command&) const {
  return "at most " + std::to_string(m_max_slots) + " slots a head (k) and " + std::to_string(m_max_heads) +
         " heads (m)";
}

cmd_status evictor::execute(const command& c) {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  // Score rows announced by the RSA that have not all left the array yet: the minima are final
  // when the last one has.
  if (m_scores_ready > start) sc_core::wait(m_scores_ready - start);
  sc_core::wait(cycles(static_cast<double>(m_select_cycles)));
  m_active_cycles += static_cast<double>(m_select_cycles);

  std::vector<std::uint32_t>& victims = m_last.victims;
  victims.assign(c.m, 0);
  unsigned protected_heads = 0;
  for (unsigned h = 0; h < c.m; ++h) {
    const std::uint32_t v = m_board.victim(h, c.k, c.n);
    victims[h] = v;
    if (v == score_board::no_victim) {
      ++protected_heads;
      continue;
    }
    ++m_victims;
    if (m_sink) m_sink->evict(h, v);
    m_board.replace(h, v, c.n);
  }
  m_protected_heads += protected_heads;
  const cmd_status st = transfer(operand_class(c, operand_c), tlm::TLM_WRITE_COMMAND, c.addr_c, std::uint64_t(c.m) * index_bytes);
  if (st == cmd_status::ok) ++m_selections;
  m_last.valid = true;
  m_last.protected_heads = protected_heads;
  m_last.select_cycles = m_select_cycles;
  m_last.energy_J = static_cast<double>(m_select_cycles) / clock_Hz() * m_power_W;
  return st;
}

nlohmann::json evictor::last_command_report() const {
  if (!m_last.valid) return nlohmann::json::object();
  return {{"victims", m_last.victims},
          {"protected_heads", m_last.protected_heads},
          {"select_cycles", m_last.select_cycles},
          {"energy_J", m_last.energy_J}};
}

KELLE_REGISTER(compute_blocks(), "evictor",
               "systolic evictor: importance scores and min-score victims beside the RSA",
               [](const compute_args& a) -> std::unique_ptr<compute_block> {
                 return std::make_unique<evictor>(a.name.c_str(), a);
               });

}  // namespace kelle
