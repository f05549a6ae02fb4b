// `sfu`: the special-function unit. See sfu.h and docs/models/compute-sfu.md.
//
// Timing, per tile (the part of a command that fits the local buffer):
//   1. the tile's input operands are read over the interconnect (transfer(), one stream after
//      the other); the front pass consumes a beat (up to `elements_per_cycle` elements of one
//      row, or of the flat operand) per cycle as soon as the chunks holding it have arrived;
//   2. two-pass operations (softmax, RMSNorm, LayerNorm) run a back pass over the row kept in
//      the buffer, one beat per cycle, starting when the row's front pass is done and the
//      previous row's back pass has finished (front and back units work concurrently);
//   3. results are written out (transfer()), each write chunk requested once its last element
//      has left the pipeline (`pipeline_latency_cycles` after its beat).
// Tiles run one after the other: the base's operand engine moves one transfer at a time, so the
// write of a tile finishes before the read of the next one starts.
#include "models/compute/sfu/sfu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace kelle {
namespace {

constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// Indexed by opcode - opcode::softmax.
//                                      inputs rows   2-pass holds  weights
const sfu::op_info ops[sfu::op_count] = {{"softmax", 1, true, true, true, 0},
                                         {"exp", 1, false, false, false, 0},
                                         {"gelu", 1, false, false, false, 0},
                                         {"silu", 1, false, false, false, 0},
                                         {"rmsnorm", 1, true, true, true, 1},
                                         {"layernorm", 1, true, true, true, 2},
                                         {"rope", 2, false, false, false, 0},
                                         {"add", 2, false, false, false, 0},
                                         {"mul", 2, false, false, false, 0},
                                         {"min_search", 1, true, false, false, 0}};

std::size_t index_of(opcode op) { return static_cast<std::uint32_t>(op) - sfu::first_op; }

constexpr std::uint64_t element_bytes = 2;  // every operand element is 16-bit
constexpr std::uint64_t index_bytes = 4;    // min_search writes one 32-bit index per row

}  // namespace

const sfu::op_info* sfu::info(opcode op) {
  const auto v = static_cast<std::uint32_t>(op);
  if (v < first_op || v >= first_op + op_count) return nullptr;
  return &ops[v - first_op];
}

sfu::sfu(const sc_core::sc_module_name& n, const compute_args& a)
    : compute_block(n, a),
      m_lanes(a.params.get_uint("elements_per_cycle", 32,
                                "16-bit elements the datapath takes per cycle (lanes)", 1, 1 << 16)),
      m_min_lanes(a.params.get_uint("min_search_elements_per_cycle", 1,
                                    "scores the minimum search compares per cycle", 1, 1 << 16)),
      m_latency_cycles(a.params.get_uint("pipeline_latency_cycles", 8,
                                         "cycles from a beat entering the datapath to its results "
                                         "leaving it",
                                         0, 1 << 20)),
      m_buffer_elements(a.params.get_uint("buffer_KiB", 32, "local operand buffer in KiB", 1, 1 << 20) *
                        1024 / element_bytes),
      m_beats(m_stats.counter("beats", "count",
                              "datapath beats (up to elements_per_cycle elements through one pass "
                              "in one cycle), front and back passes")),
      m_operand_wait(m_stats.counter("operand_wait_cycles", "cycles",
                                     "cycles the front pass waited for operands from memory")),
      m_tiles(m_stats.counter("tiles", "count", "buffer-sized tiles processed")) {
  const config_node tech = a.tech.child("sfu");
  const config_node energy = tech.child("energy_pJ_per_element");
  for (std::size_t i = 0; i < op_count; ++i) {
    const std::string op = ops[i].name;
    m_energy_J_per_element[i] =
        energy.require_double(op, "energy per element of a " + op + " command in pJ", 0.0) * 1e-12;
    m_op_commands[i] = &m_stats.counter("commands_" + op, "count", op + " commands executed");
    m_op_elements[i] = &m_stats.counter("elements_" + op, "count",
                                        "elements processed by " + op + " commands (m x k each)");
  }
  for (std::size_t i = 0; i < op_count; ++i)
    m_stats.formula(std::string("energy_") + ops[i].name, "J",
                    std::string("energy of ") + ops[i].name + " commands (part of 'compute')",
                    [this, i] { return m_op_elements[i]->value() * m_energy_J_per_element[i]; });
  m_stats.energy(energy_kind::compute, "compute", "elements of each operation x its energy per element (tech.sfu)", [this] {
    double j = 0;
    for (std::size_t i = 0; i < op_count; ++i) j += m_op_elements[i]->value() * m_energy_J_per_element[i];
    return j;
  });
  m_stats.formula("utilization", "fraction",
                  "elements processed / (elements_per_cycle x busy cycles of every command)", [this] {
                    double e = 0;
                    for (const stat* s : m_op_elements) e += s->value();
                    const double lane_cycles = m_busy_cycles.value() * static_cast<double>(m_lanes);
                    return lane_cycles > 0 ? e / lane_cycles : 0.0;
                  });
  m_area_mm2 = tech.require_double("area_mm2", "area of the SFU in mm2", 0.0);
  m_stats.formula("area", "mm2", "SFU area (tech.sfu.area_mm2)", [this] { return m_area_mm2; });
}

compute_block::first_order_cost sfu::first_order(const command& c) const {
  const op_info* oi = info(c.op);
  if (!oi) return {};
  const std::uint64_t lanes = c.op == opcode::min_search ? m_min_lanes : m_lanes;
  const double elements = static_cast<double>(std::uint64_t(c.m) * c.k);
  const double beats = oi->rows ? static_cast<double>(std::uint64_t(c.m) * ceil_div(c.k, lanes))
                                : std::ceil(elements / static_cast<double>(lanes));
  return {beats * (oi->two_pass ? 2 : 1), elements * m_energy_J_per_element[index_of(c.op)]};
}

double sfu::work_cycles_at_peak() const {
  double cycles = 0;
  for (std::size_t i = 0; i < op_count; ++i)
    cycles += m_op_elements[i]->value() /
              static_cast<double>(i == index_of(opcode::min_search) ? m_min_lanes : m_lanes);
  return cycles;
}

sfu::tile_shape sfu::tile_for(const op_info& oi, std::uint64_t k) const {
  if (oi.rows && !oi.holds_row)  // min_search: scores stream through; the buffer holds indices
    return {m_buffer_elements * element_bytes / index_bytes, 0};
  const std::uint64_t weights = oi.weight_rows * k;
  if (weights >= m_buffer_elements) return {0, 0};
  const std::uint64_t avail = m_buffer_elements - weights;
  if (oi.rows) {
    const std::uint64_t rows = avail / (oi.inputs * k);
    return {rows, rows * k};
  }
  std::uint64_t n = avail / oi.inputs;
  if (n >= m_lanes) n -= n % m_lanes;  // whole beats per tile
  if (n % 2 && n > 1) --n;             // a RoPE pair never straddles two tiles
  return {0, n};
}

cmd_status sfu::validate(const command& c) const {
  const op_info* oi = info(c.op);
  if (!oi) return cmd_status::bad_opcode;
  const std::uint64_t m = c.m, k = c.k;
  if (m == 0 || k == 0 || m > max_rows || k > max_row_length || m * k > max_elements)
    return cmd_status::bad_shape;
  if (c.op == opcode::rope && k % 2) return cmd_status::bad_shape;  // (even, odd) pairs
  const tile_shape ts = tile_for(*oi, k);
  if (oi->rows ? ts.rows == 0 : ts.elements == 0) return cmd_status::bad_shape;  // row > buffer

  const bool uses_b = oi->inputs == 2 || oi->weight_rows > 0;
  const std::uint64_t out_align = c.op == opcode::min_search ? index_bytes : element_bytes;
  if (c.addr_a % element_bytes || c.addr_c % out_align || (uses_b && c.addr_b % element_bytes))
    return cmd_status::misaligned;

  const std::uint64_t in_bytes = m * k * element_bytes;
  const std::uint64_t b_bytes = oi->inputs == 2 ? in_bytes : oi->weight_rows * k * element_bytes;
  const std::uint64_t out_bytes = c.op == opcode::min_search ? m * index_bytes : in_bytes;
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  if (c.addr_a > top - in_bytes || c.addr_c > top - out_bytes || (uses_b && c.addr_b > top - b_bytes))
    return cmd_status::bad_address;  // the operand wraps around the address space
  return cmd_status::ok;
}

std::string sfu::design_limit(const command& c) const {
  const std::uint64_t m = c.m, k = c.k;
  if (c.op == opcode::rope && k % 2) return "rope rotates pairs: an even row length";
  if (m > max_rows) return "at most " + std::to_string(max_rows) + " rows";
  if (k > max_row_length) return "rows of at most " + std::to_string(max_row_length) + " elements";
  if (m * k > max_elements)
    return std::to_string(m * k) + " elements, at most " + std::to_string(max_elements) + " in one command";
  return {};
}

std::string sfu::refusal(const command& c) const {
  const std::string limit = design_limit(c);
  return limit.empty() ? "a row larger than its buffer" : limit;
}

std::array<std::uint64_t, 4> sfu::operand_bytes(const command& c) const {
  const op_info* oi = info(c.op);
  if (!oi) return {0, 0, 0, 0};
  const std::uint64_t in = std::uint64_t(c.m) * c.k * element_bytes;
  const std::uint64_t b = oi->inputs == 2 ? in : oi->weight_rows * std::uint64_t(c.k) * element_bytes;
  return {in, b, c.op == opcode::min_search ? std::uint64_t(c.m) * index_bytes : in, 0};
}

cmd_status sfu::execute(const command& c) {
  const op_info& oi = *info(c.op);
  const std::size_t i = index_of(c.op);
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  const double elements0 = m_op_elements[i]->value(), beats0 = m_beats.value(),
               wait0 = m_operand_wait.value(), tiles0 = m_tiles.value();
  ++*m_op_commands[i];
  const cmd_status st = run_command(c, oi);
  const double elements = m_op_elements[i]->value() - elements0;
  const double lanes = static_cast<double>(c.op == opcode::min_search ? m_min_lanes : m_lanes);
  const double cycles = to_cycles(sc_core::sc_time_stamp() - start);
  m_last.valid = true;
  m_last.elements = elements;
  m_last.tiles = m_tiles.value() - tiles0;
  m_last.beats = m_beats.value() - beats0;
  m_last.operand_wait_cycles = m_operand_wait.value() - wait0;
  m_last.utilization = cycles > 0 ? elements / (lanes * cycles) : 0.0;
  m_last.energy_J = elements * m_energy_J_per_element[i];
  return st;
}

nlohmann::json sfu::last_command_report() const {
  if (!m_last.valid) return nlohmann::json::object();
  return {{"elements", m_last.elements},
          {"tiles", m_last.tiles},
          {"beats", m_last.beats},
          {"operand_wait_cycles", m_last.operand_wait_cycles},
          {"utilization", m_last.utilization},
          {"energy_J", m_last.energy_J}};
}

cmd_status sfu::run_command(const command& c, const op_info& oi) {
  const std::uint64_t k = c.k;
  if (oi.weight_rows > 0) {  // gamma (and beta) stay in the buffer for the whole command
    const cmd_status st = transfer(operand_class(c, operand_b), tlm::TLM_READ_COMMAND, c.addr_b, oi.weight_rows * k * element_bytes);
    if (st != cmd_status::ok) return st;
  }
  const std::uint64_t total = static_cast<std::uint64_t>(c.m) * k;
  const tile_shape ts = tile_for(oi, k);
  const std::uint64_t step = oi.rows ? std::min<std::uint64_t>(ts.rows, c.m) * k : ts.elements;
  for (std::uint64_t first = 0; first < total; first += step) {
    const cmd_status st = run_tile(c, oi, first, std::min(step, total - first));
    if (st != cmd_status::ok) return st;
  }
  return cmd_status::ok;
}

cmd_status sfu::run_tile(const command& c, const op_info& oi, std::uint64_t first, std::uint64_t n) {
  using sc_core::sc_time;
  const sc_time t0 = sc_core::sc_time_stamp();
  const sc_time cyc = cycles(1);
  const sc_time latency = cycles(static_cast<double>(m_latency_cycles));
  const bool search = c.op == opcode::min_search;
  const std::uint64_t lanes = search ? m_min_lanes : m_lanes;
  const std::uint64_t k = c.k;
  const std::uint64_t rows = oi.rows ? n / k : 0;
  const std::uint64_t per_row = oi.rows ? ceil_div(k, lanes) : 0;  // beats per row
  const std::uint64_t beats = oi.rows ? rows * per_row : ceil_div(n, lanes);
  // The beat that holds element e of the tile.
  auto beat_of = [&](std::uint64_t e) { return oi.rows ? (e / k) * per_row + (e % k) / lanes : e / lanes; };
  // How many beats lie entirely within the first e elements.
  auto beats_within = [&](std::uint64_t e) -> std::uint64_t {
    if (e >= n) return beats;
    return oi.rows ? (e / k) * per_row + (e % k) / lanes : e / lanes;
  };

  // 1. Stream the inputs in; a chunk is usable once it has arrived in every input stream.
  const std::uint64_t in_bytes = n * element_bytes;
  const std::uint64_t cb = chunk_bytes(in_bytes);
  const std::size_t chunks = static_cast<std::size_t>(ceil_div(in_bytes, cb));
  std::vector<sc_time> arrival(chunks, sc_core::SC_ZERO_TIME);
  const std::uint64_t in_addr[2] = {c.addr_a, c.addr_b};
  const traffic_class in_cls[2] = {operand_class(c, operand_a), operand_class(c, operand_b)};
  for (unsigned s = 0; s < oi.inputs; ++s) {
    const cmd_status st = transfer(in_cls[s], tlm::TLM_READ_COMMAND, in_addr[s] + first * element_bytes, in_bytes,
                                   [&arrival](std::size_t i, const sc_time& t) {
                                     arrival[i] = std::max(arrival[i], t);
                                   });
    if (st != cmd_status::ok) return st;
  }
  for (std::size_t i = 1; i < chunks; ++i) arrival[i] = std::max(arrival[i], arrival[i - 1]);
  *m_op_elements[index_of(c.op)] += static_cast<double>(n);
  ++m_tiles;

  // 2. Front pass: one beat per cycle, each beat no earlier than the chunk holding its last
  //    element. Recorded as runs of back-to-back beats.
  std::vector<beat_run> runs;
  sc_time end = t0, waited = sc_core::SC_ZERO_TIME;
  std::uint64_t done = 0;
  for (std::size_t ch = 0; ch < chunks && done < beats; ++ch) {
    const std::uint64_t upto =
        ch + 1 == chunks ? beats : beats_within(std::min<std::uint64_t>((ch + 1) * cb, in_bytes) / element_bytes);
    if (upto <= done) continue;
    if (runs.empty() || arrival[ch] > end) {
      if (arrival[ch] > end) {
        waited += arrival[ch] - end;
        end = arrival[ch];
      }
      runs.push_back({done, end});
    }
    end += cyc * static_cast<double>(upto - done);
    done = upto;
  }
  auto beat_end = [&](std::uint64_t b) {
    auto it = std::upper_bound(runs.begin(), runs.end(), b,
                               [](std::uint64_t v, const beat_run& r) { return v < r.first_beat; });
    --it;
    return it->start + cyc * static_cast<double>(b - it->first_beat + 1);
  };
  m_beats += static_cast<double>(beats);
  m_operand_wait += to_cycles(waited);

  // 3. Back pass of two-pass operations: row r starts when its front pass is done and the back
  //    unit is free.
  std::vector<sc_time> back_start;
  if (oi.two_pass) {
    back_start.resize(static_cast<std::size_t>(rows));
    sc_time free = t0;
    for (std::uint64_t r = 0; r < rows; ++r) {
      back_start[r] = std::max(beat_end(r * per_row + per_row - 1), free);
      free = back_start[r] + cyc * static_cast<double>(per_row);
    }
    m_beats += static_cast<double>(beats);
  }

  // 4. Write the results, each chunk once its last unit (element, or row index) is out.
  const std::uint64_t unit = search ? index_bytes : element_bytes;
  const std::uint64_t out_bytes = (search ? rows : n) * unit;
  auto ready = [&](std::uint64_t u) -> sc_time {
    if (search) return beat_end(u * per_row + per_row - 1) + latency;
    if (oi.two_pass) return back_start[u / k] + cyc * static_cast<double>((u % k) / lanes + 1) + latency;
    return beat_end(beat_of(u)) + latency;
  };
  const std::uint64_t ob = chunk_bytes(out_bytes);
  std::vector<sc_time> gate(static_cast<std::size_t>(ceil_div(out_bytes, ob)));
  for (std::size_t ch = 0; ch < gate.size(); ++ch)
    gate[ch] = ready((std::min<std::uint64_t>((ch + 1) * ob, out_bytes) - 1) / unit);
  const std::uint64_t out_addr = c.addr_c + (search ? first / k * index_bytes : first * element_bytes);
  return transfer(operand_class(c, operand_c), tlm::TLM_WRITE_COMMAND, out_addr, out_bytes, {},
                  [&gate](std::size_t i) { return gate[i]; });
}

KELLE_REGISTER(compute_blocks(), "sfu",
               "special-function unit: softmax (online max), exp/GeLU/SiLU LUTs, RMSNorm, LayerNorm, "
               "RoPE, add, mul, sequential min search",
               [](const compute_args& a) -> std::unique_ptr<compute_block> {
                 return std::make_unique<sfu>(a.name.c_str(), a);
               });

}  // namespace kelle
