#include "models/compute/rsa/rsa.h"

#include "models/compute/kv_format/kv_format.h"
#include "platform/support/divider.h"

#include <algorithm>
#include <cmath>

namespace kelle {

namespace {
std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
constexpr std::uint64_t act_bytes = 2;  // 16-bit activations and results
}  // namespace

rsa::rsa(const sc_core::sc_module_name& name, const compute_args& a)
    : compute_block(name, a),
      m_rows(static_cast<unsigned>(a.params.get_uint("rows", 32, "PE rows (reduction dimension)", 1, 4096))),
      m_cols(static_cast<unsigned>(a.params.get_uint("cols", 32, "PE columns (output dimension)", 1, 4096))),
      m_rows_per_cycle(static_cast<unsigned>(a.params.get_uint(
          "weight_load_rows_per_cycle", 4, "weight rows loaded into the PEs per cycle", 1, 4096))),
      m_double_buffered(a.params.get_bool("double_buffered_weights", true,
                                          "the next fold's weights load while the current fold computes")),
      m_buffer_bytes(a.params.get_uint("weight_buffer_bytes", 65536,
                                       "operand buffer between the interconnect and the PEs, B", 1)),
      m_macs(m_stats.counter("macs", "count", "multiply-accumulates performed")),
      m_pe_cycles(m_stats.counter("pe_cycles", "PE x cycles", "PEs x cycles of the array pipeline")),
      m_stall_cycles(m_stats.counter("stall_cycles", "cycles", "cycles folds waited for their weights")),
      m_recompute_macs(m_stats.counter("recompute_macs", "count", "MACs of stacked recompute rows")),
      m_weight_bytes(m_stats.counter("weight_bytes", "B", "stationary operand bytes fetched")) {
  const config_node t = a.tech.child("rsa");
  m_mac_J = t.require_double("mac_energy_pJ", "energy per MAC, pJ", 0) * 1e-12;
  m_idle_J = t.require_double("idle_pe_cycle_energy_pJ", "energy of an idle PE for one cycle, pJ", 0) * 1e-12;
  const double pe_area = t.require_double("area_mm2_per_pe", "area of one PE, mm2", 0);
  m_array = {m_rows, m_cols, static_cast<double>(ceil_div(m_rows, m_rows_per_cycle)), m_double_buffered, m_mac_J,
             m_idle_J};
  m_area_mm2 = pe_area * m_rows * m_cols;
  m_stats.formula("area", "mm2", "PEs x area per PE", [this] { return m_area_mm2; });
  m_stats.formula("utilization", "fraction", "MACs / (PEs x busy cycles of every command)", [this] {
    const double pc = m_busy_cycles.value() * m_rows * m_cols;
    return pc > 0 ? m_macs.value() / pc : 0.0;
  });
  m_stats.energy(energy_kind::compute, "mac", "MACs x energy per MAC", [this] { return m_macs.value() * m_mac_J; });
  m_stats.energy(energy_kind::compute, "idle_pe", "idle PE-cycles of the array pipeline x energy per idle PE-cycle",
                 [this] { return std::max(0.0, m_pe_cycles.value() - m_macs.value()) * m_idle_J; });
}

double rsa::ideal_cycles(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::uint64_t batch) const {
  const double folds = static_cast<double>(batch * ceil_div(k, m_rows) * ceil_div(n, m_cols));
  const double fill = static_cast<double>(ceil_div(m_rows, m_rows_per_cycle));
  const double tail = m_rows + m_cols - 2.0;
  if (!m_double_buffered) return folds * (fill + static_cast<double>(m) + tail);
  return fill + (folds - 1) * std::max(static_cast<double>(m), fill) + static_cast<double>(m) + tail;
}

namespace {
std::uint64_t b_elem_bytes(const command& c) {
  return c.op == opcode::gemm && !(c.flags & flag_b_16bit) ? 1 : 2;
}
std::uint64_t batches(const command& c) { return c.batch ? c.batch : 1; }
// The KV format of operand `o` (command.h, flag_kv_format_shift): the command's when the operand
// is of class kv and its format is not a 16-bit word; else null (the operand's own element bytes).
const kv_number_format* kv_of(const command& c, operand o, kv_format& f) {
  if (operand_class(c, o) != traffic_class::kv) return nullptr;
  f = kv_format::from_command(c.flags);
  return f.type().command_code() ? &f.type() : nullptr;
}
bool packed_kv(const command& c, operand o) {
  kv_format f;
  return kv_of(c, o, f) != nullptr;
}
// Bytes of one product's operand b: B[k x n] (gemm: a row per k, the tokens of A . V's values)
// or B[n x k] (gemm_transposed: a row per n, the tokens of q . K^T's keys).
std::uint64_t b_product_bytes(const command& c) {
  kv_format f;
  if (!kv_of(c, operand_b, f)) return std::uint64_t(c.k) * c.n * b_elem_bytes(c);
  return c.op == opcode::gemm_transposed ? c.n * f.row_bytes(c.k) : c.k * f.row_bytes(c.n);
}
// Bytes of one result row of n elements (a new token's K or V in the cache in its format).
std::uint64_t c_row_bytes(const command& c) {
  kv_format f;
  return kv_of(c, operand_c, f) ? f.row_bytes(c.n) : std::uint64_t(c.n) * act_bytes;
}
}  // namespace

std::array<std::uint64_t, 4> rsa::operand_bytes(const command& c) const {
  const std::uint64_t b = batches(c);
  const std::uint64_t b_bytes = c.flags & flag_b_held ? 0 : b * b_product_bytes(c);  // held: none move
  return {b * c.m * c.k * act_bytes, b_bytes, b * (std::uint64_t(c.m) + c.extra) * c_row_bytes(c),
          b * c.extra * c.k * act_bytes};
}

compute_block::first_order_cost rsa::first_order(const command& c) const {
  const std::uint64_t B = batches(c), Mp = std::uint64_t(c.m) + c.extra;
  const double cycles = ideal_cycles(Mp, c.k, c.n, B);
  const double macs = static_cast<double>(B * Mp * c.k * c.n);
  return {cycles, macs * m_mac_J + std::max(0.0, cycles * m_rows * m_cols - macs) * m_idle_J};
}

cmd_status rsa::validate(const command& c) const {
  if (c.op != opcode::gemm && c.op != opcode::gemm_transposed) return cmd_status::bad_opcode;
  if (c.m == 0 || c.k == 0 || c.n == 0 || c.m > max_dim || c.k > max_dim || c.n > max_dim ||
      c.extra > max_dim)
    return cmd_status::bad_shape;
  // Quantised KV rows are byte-aligned (codes and scales packed per row).
  const std::uint64_t eb = packed_kv(c, operand_b) ? 1 : b_elem_bytes(c);
  const std::uint64_t cb = packed_kv(c, operand_c) ? 1 : act_bytes;
  if (c.batch > max_dim) return cmd_status::bad_shape;
  if (c.addr_a % act_bytes || c.addr_c % cb || c.addr_b % eb || (c.extra && c.addr_d % act_bytes))
    return cmd_status::misaligned;
  return cmd_status::ok;
}

std::string rsa::design_limit(const command& c) const {
  const bool beyond = c.m > max_dim || c.k > max_dim || c.n > max_dim || c.extra > max_dim || c.batch > max_dim;
  return beyond ? refusal(c) : std::string();
}

std::string rsa::refusal(const command&) const {
  return "m, k, n and batch at most " + std::to_string(max_dim) + " each";
}

cmd_status rsa::execute(const command& c) {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  const std::uint64_t M = c.m, K = c.k, N = c.n, S = c.extra, Mp = M + S, B = batches(c);
  const std::uint64_t eb = b_elem_bytes(c);
  // A quantised KV operand b: its bytes spread over the folds by their share of its elements.
  const bool packed = packed_kv(c, operand_b);
  const std::uint64_t product_bytes = b_product_bytes(c), product_elems = K * N;

  // Input rows: the current tokens' and the stacked recompute rows, of every product.
  cmd_status st = transfer(operand_class(c, operand_a), tlm::TLM_READ_COMMAND, c.addr_a, B * M * K * act_bytes);
  if (st == cmd_status::ok && S) st = transfer(operand_class(c, operand_d), tlm::TLM_READ_COMMAND, c.addr_d, B * S * K * act_bytes);
  if (st != cmd_status::ok) return st;

  // Stationary operand, fold by fold (tiles laid out contiguously in fold order), product
  // after product.
  const std::uint64_t fk = ceil_div(K, m_rows), fn = ceil_div(N, m_cols), F = B * fk * fn;
  std::vector<std::uint64_t> fold_end(F);  // end byte of each fold's tile
  std::uint64_t total = 0, elems = 0;
  for (std::uint64_t b = 0, f = 0; b < B; ++b)
    for (std::uint64_t nt = 0; nt < fn; ++nt)
      for (std::uint64_t kt = 0; kt < fk; ++kt, ++f) {
        const std::uint64_t kf = std::min<std::uint64_t>(m_rows, K - kt * m_rows);
        const std::uint64_t nf = std::min<std::uint64_t>(m_cols, N - nt * m_cols);
        if (packed) {
          elems += kf * nf;
          total = b * product_bytes + static_cast<std::uint64_t>(double(product_bytes) * double(elems) /
                                                                 double(product_elems));
          if (elems == product_elems) total = (b + 1) * product_bytes, elems = 0;
        } else {
          total += kf * nf * eb;
        }
        fold_end[f] = total;
      }
  const std::uint64_t chunk = chunk_bytes(total);
  const divider by_chunk(chunk);  // a shift for the usual power-of-two chunks
  const std::size_t chunks = static_cast<std::size_t>(ceil_div(total, chunk));
  const double cyc = 1.0 / clock_Hz();
  const double fill = static_cast<double>(ceil_div(m_rows, m_rows_per_cycle)) * cyc;
  const double stream = static_cast<double>(Mp) * cyc;
  const double tail = (m_rows + m_cols - 2.0) * cyc;

  // The fold schedule, advanced as weight chunks arrive (possibly out of order). With
  // overlap_commands the previous command may still be computing: the array is free from its end.
  const double t0 = std::max(sc_core::sc_time_stamp().to_seconds(), m_array_free);
  std::vector<double> arrival(chunks, -1.0), consumed(chunks, -1.0);
  std::size_t arrived_prefix = 0, next_fold = 0, next_consumed = 0;
  double prev_stream = t0, prev_end = t0, stall = 0.0, compute_end = t0, first_row_out = -1.0;
  auto advance = [&] {
    while (arrived_prefix < chunks && arrival[arrived_prefix] >= 0) ++arrived_prefix;
    // The schedule's state in locals for the loop (the stores to `consumed` could otherwise alias
    // it and force every value back to memory at each fold).
    double ps = prev_stream, pe = prev_end, st_sum = stall, ce = compute_end, fro = first_row_out;
    std::size_t nf = next_fold, nc = next_consumed;
    const std::uint64_t* fe = fold_end.data();
    double* cons = consumed.data();
    const double* arr = arrival.data();
    while (nf < F && by_chunk.div(fe[nf] - 1) < arrived_prefix) {
      const double ready = arr[by_chunk.div(fe[nf] - 1)];
      const double earliest = m_double_buffered ? ps : pe;
      const double load = std::max(earliest, ready);
      st_sum += load - earliest;
      const double stream_start = m_double_buffered && nf > 0 ? std::max(load + fill, ps + stream) : load + fill;
      ps = stream_start;
      pe = ce = stream_start + stream + tail;
      if (fro < 0) fro = stream_start + tail + cyc;
      // Chunks whose last byte this fold holds are free once its weights are in the PEs.
      while (nc < chunks && std::min<std::uint64_t>((nc + 1) * chunk, total) <= fe[nf]) cons[nc++] = load + fill;
      ++nf;
    }
    prev_stream = ps, prev_end = pe, stall = st_sum, compute_end = ce, first_row_out = fro;
    next_fold = nf, next_consumed = nc;
  };
  // At least four chunks: a fold may straddle two, and chunks enlarged by the bound on
  // transactions per operand (a simulation granularity) must not throttle the stream.
  const std::size_t buffer_chunks = std::max<std::size_t>(4, m_buffer_bytes / chunk);
  const bool held = c.flags & flag_b_held;
  if (held) {  // already in the operand buffer: every chunk there now, nothing moves
    std::fill(arrival.begin(), arrival.end(), sc_core::sc_time_stamp().to_seconds());
    advance();
  } else {
    st = transfer(
        operand_class(c, operand_b), tlm::TLM_READ_COMMAND, c.addr_b, total,
        [&](std::size_t i, const sc_core::sc_time& t) {
          arrival[i] = t.to_seconds();
          advance();
        },
        [&](std::size_t i) {
          // The first chunks take the places the previous command's last chunks free.
          if (i < buffer_chunks)
            return i < m_prev_consumed.size() ? sc_core::sc_time(m_prev_consumed[i], sc_core::SC_SEC)
                                              : sc_core::SC_ZERO_TIME;
          const double free_at = consumed[i - buffer_chunks];
          return free_at < 0 ? sc_core::sc_max_time() : sc_core::sc_time(free_at, sc_core::SC_SEC);
        });
  }
  if (st != cmd_status::ok) return st;
  if (overlap_commands()) {  // every operand is in: the next command may fetch its own
    m_array_free = compute_end;
    // When the places of the operand buffer free up: the consumption of the last chunks.
    const std::size_t keep = std::min(buffer_chunks, chunks);
    m_prev_consumed.assign(buffer_chunks - keep, t0);
    m_prev_consumed.insert(m_prev_consumed.end(), consumed.end() - static_cast<std::ptrdiff_t>(keep), consumed.end());
    operands_fetched();
  }
  const sc_core::sc_time end(compute_end, sc_core::SC_SEC);
  if (m_listener && c.op == opcode::gemm_transposed && (c.flags & flag_scores_to_evictor))
    m_listener->on_scores(c, sc_core::sc_time(first_row_out, sc_core::SC_SEC), end);
  if (end > sc_core::sc_time_stamp()) sc_core::wait(end - sc_core::sc_time_stamp());

  // Results (the recomputed rows' too).
  st = transfer(operand_class(c, operand_c), tlm::TLM_WRITE_COMMAND, c.addr_c, B * Mp * c_row_bytes(c));

  const double macs = static_cast<double>(B * Mp * K * N);
  const double array_cycles = (compute_end - t0) * clock_Hz();
  m_macs += macs;
  m_recompute_macs += static_cast<double>(B * S * K * N);
  m_pe_cycles += array_cycles * m_rows * m_cols;
  m_stall_cycles += stall * clock_Hz();
  if (!held) m_weight_bytes += static_cast<double>(total);
  const double cycles = to_cycles(sc_core::sc_time_stamp() - start);
  m_last.valid = true;
  m_last.macs = macs;
  m_last.folds = F;
  m_last.array_cycles = array_cycles;
  m_last.ideal_array_cycles = ideal_cycles(Mp, K, N, B);
  m_last.stall_cycles = stall * clock_Hz();
  m_last.utilization = cycles > 0 ? macs / (cycles * m_rows * m_cols) : 0.0;
  m_last.energy_J = macs * m_mac_J + std::max(0.0, array_cycles * m_rows * m_cols - macs) * m_idle_J;
  return st;
}

nlohmann::json rsa::last_command_report() const {
  if (!m_last.valid) return nlohmann::json::object();
  return {{"macs", m_last.macs},
          {"folds", m_last.folds},
          {"array_cycles", m_last.array_cycles},
          {"ideal_array_cycles", m_last.ideal_array_cycles},
          {"stall_cycles", m_last.stall_cycles},
          {"utilization", m_last.utilization},
          {"energy_J", m_last.energy_J}};
}

KELLE_REGISTER(compute_blocks(), "rsa", "reconfigurable systolic array, weight-stationary GEMM",
               [](const compute_args& a) -> std::unique_ptr<compute_block> {
                 return std::make_unique<rsa>(a.name.c_str(), a);
               });

}  // namespace kelle
