#include "models/compute/compute_block.h"

#include "models/interconnect/router.h"
#include "platform/tlm/extensions.h"
#include "platform/trace/timeline.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>

namespace kelle {

std::string to_string(opcode op) {
  switch (op) {
    case opcode::gemm: return "gemm";
    case opcode::gemm_transposed: return "gemm_transposed";
    case opcode::softmax: return "softmax";
    case opcode::exp: return "exp";
    case opcode::gelu: return "gelu";
    case opcode::silu: return "silu";
    case opcode::rmsnorm: return "rmsnorm";
    case opcode::layernorm: return "layernorm";
    case opcode::rope: return "rope";
    case opcode::add: return "add";
    case opcode::mul: return "mul";
    case opcode::min_search: return "min_search";
    case opcode::evict_select: return "evict_select";
    case opcode::copy: return "copy";
  }
  return "opcode " + std::to_string(static_cast<std::uint32_t>(op));
}

std::string to_string(cmd_status s) {
  switch (s) {
    case cmd_status::ok: return "ok";
    case cmd_status::bad_opcode: return "bad_opcode";
    case cmd_status::bad_shape: return "bad_shape";
    case cmd_status::bad_address: return "bad_address";
    case cmd_status::misaligned: return "misaligned";
    case cmd_status::memory_error: return "memory_error";
  }
  return "status " + std::to_string(static_cast<std::uint32_t>(s));
}

compute_registry& compute_blocks() {
  static compute_registry r("compute", "compute blocks (system.compute.<name>.model)");
  return r;
}

namespace {
// The command as a span on the block's timeline track (docs/timeline.md).
// A command overlapped with the previous one is drawn from the previous one's end (spans on a
// track do not overlap); `started_us` is when it began fetching its operands.
void trace_command(const compute_block& b, const command& cmd, const completion& c, const sc_core::sc_time& from) {
  timeline& tl = timeline::get();
  char args[256];
  std::snprintf(args, sizeof args,
                "\"m\":%u,\"k\":%u,\"n\":%u,\"batch\":%u,\"id\":%u,\"queued_us\":%.6f,\"started_us\":%.6f,"
                "\"status\":\"%s\"",
                cmd.m, cmd.k, cmd.n, cmd.batch ? cmd.batch : 1u, cmd.id, (c.started - c.queued).to_seconds() * 1e6,
                c.started.to_seconds() * 1e6, to_string(c.status).c_str());
  tl.complete(tl.thread_of(&b, "compute", b.basename()), to_string(cmd.op), from, c.finished, args);
}
}  // namespace

struct compute_block::chunk_tag : tlm::tlm_extension<chunk_tag> {
  std::size_t index = 0;
  xfer* owner = nullptr;  // the executing command's operand-engine state
  tlm::tlm_extension_base* clone() const override { return new chunk_tag(*this); }
  void copy_from(const tlm::tlm_extension_base& e) override {
    index = static_cast<const chunk_tag&>(e).index;
    owner = static_cast<const chunk_tag&>(e).owner;
  }
};

compute_block::compute_block(const sc_core::sc_module_name& name, const compute_args& a)
    : sc_core::sc_module(name),
      cmd_socket("cmd_socket"),
      m_stats("stats"),
      m_commands(m_stats.counter("commands", "count", "commands completed")),
      m_errors(m_stats.counter("command_errors", "count", "commands completed with an error status")),
      m_busy_cycles(m_stats.counter("busy_cycles", "cycles", "cycles spent executing commands")),
      m_bytes_read(m_stats.counter("bytes_read", "B", "operand bytes read over the interconnect")),
      m_bytes_written(m_stats.counter("bytes_written", "B", "result bytes written over the interconnect")),
      m_params(a.params),
      m_clock_Hz(a.clock_GHz * 1e9),
      m_queue_depth(a.params.get_uint("queue_depth", 16, "commands the block queues", 1, 1 << 16)),
      m_chunk_bytes(a.params.get_uint("chunk_bytes", 4096,
                                      "bytes per operand transaction (transaction granularity)", 1,
                                      1ull << 30)),
      m_outstanding(a.params.get_uint("outstanding", 8, "operand requests in flight at most", 1, 1 << 16)),
      m_max_chunks(a.params.get_uint("max_transactions_per_operand", 0,
                                     "transactions an operand transfer takes at most; larger operands move in "
                                     "larger transactions (0: no bound)",
                                     0, 1u << 30)),
      m_overlap(a.params.get_bool("overlap_commands", false,
                                  "the next command fetches its operands while the current one finishes")),
      m_mem("mem_socket", [this](tlm::tlm_generic_payload& t, const sc_core::sc_time& at) { chunk_done(t, at); }) {
  cmd_socket.register_nb_transport_fw(this, &compute_block::cmd_fw);
  for (unsigned i = 0; i < (m_overlap ? 2u : 1u); ++i)
    m_slots[i].thread = sc_core::sc_spawn([this, i] { worker(i); }, sc_core::sc_gen_unique_name("worker"));
  m_stats.formula("utilization_time", "fraction", "busy cycles / elapsed cycles", [this] {
    const double t = to_cycles(sc_core::sc_time_stamp());
    return t > 0 ? m_busy_cycles.value() / t : 0.0;
  });
}

void compute_block::bind_operands(router& r) { m_mem.socket.bind(r.target_socket); }

void attach(compute_block& b, router& r, std::uint64_t base) {
  r.add_target(b.basename(), base, sizeof(command));
  r.initiator_socket.bind(b.cmd_socket);
  r.add_initiator(b.basename());
  b.bind_operands(r);
}

tlm::tlm_sync_enum compute_block::cmd_fw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                         sc_core::sc_time& d) {
  if (ph == tlm::END_RESP) return tlm::TLM_COMPLETED;
  if (ph != tlm::BEGIN_REQ) {
    SC_REPORT_FATAL(name(), ("unexpected phase " + std::string(ph.get_name())).c_str());
    return tlm::TLM_COMPLETED;
  }
  d += cycles(1);
  if (!t.is_write() || t.get_address() != 0 || t.get_data_length() != sizeof(command) ||
      t.get_byte_enable_ptr()) {
    t.set_response_status(t.is_write() ? tlm::TLM_BURST_ERROR_RESPONSE : tlm::TLM_COMMAND_ERROR_RESPONSE);
    spdlog::warn("[{}] {}: command port accepts one {}-byte write at offset 0",
                 sc_core::sc_time_stamp().to_string(), name(), sizeof(command));
    return tlm::TLM_COMPLETED;
  }
  if (m_queue.size() >= m_queue_depth) {
    t.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
    spdlog::warn("[{}] {}: command queue full ({} commands)", sc_core::sc_time_stamp().to_string(),
                 name(), m_queue_depth);
    return tlm::TLM_COMPLETED;
  }
  queued q;
  std::memcpy(&q.cmd, t.get_data_ptr(), sizeof(command));
  q.at = sc_core::sc_time_stamp() + d;
  m_queue.push_back(q);
  m_state.notify(d);
  t.set_response_status(tlm::TLM_OK_RESPONSE);
  return tlm::TLM_COMPLETED;
}

bool compute_block::pop_completion(completion& c) {
  if (m_completions.empty()) return false;
  c = m_completions.front();
  m_completions.pop_front();
  return true;
}

namespace {
bool overlaps(std::uint64_t lo, std::uint64_t hi, std::uint64_t addr, std::uint64_t len) {
  return len > 0 && addr < hi && lo < addr + len;
}
}  // namespace

bool compute_block::may_start() const {
  if (m_queue.empty() || m_queue.front().at > sc_core::sc_time_stamp()) return false;
  const command& c = m_queue.front().cmd;
  for (const slot& s : m_slots) {
    if (!s.busy) continue;
    if (s.fetching) return false;  // one command fetches its inputs at a time
    // A hazard on the running command's results: wait for its completion.
    if (s.write_lo < s.write_hi) {
      const auto bytes = operand_bytes(c);
      const std::uint64_t addr[4] = {c.addr_a, c.addr_b, c.addr_c, c.addr_d};
      for (int k = 0; k < 4; ++k)
        if (overlaps(s.write_lo, s.write_hi, addr[k], bytes[k])) return false;
    }
  }
  return true;
}

compute_block::slot& compute_block::current() {
  if (m_overlap && m_slots[1].thread == sc_core::sc_get_current_process_handle()) return m_slots[1];
  return m_slots[0];
}

void compute_block::operands_fetched() {
  slot& s = current();
  if (!s.fetching) return;
  s.fetching = false;
  m_state.notify(sc_core::SC_ZERO_TIME);
}

void compute_block::worker(unsigned index) {
  slot& me = m_slots[index];
  for (;;) {
    while (!may_start()) {
      if (!m_queue.empty() && m_queue.front().at > sc_core::sc_time_stamp())
        sc_core::wait(m_queue.front().at - sc_core::sc_time_stamp(), m_state);
      else
        sc_core::wait(m_state);
    }
    const queued q = m_queue.front();
    m_queue.pop_front();
    me.busy = me.fetching = true;
    me.seq = m_started++;
    me.write_lo = me.write_hi = 0;
    completion c;
    c.id = q.cmd.id;
    c.op = q.cmd.op;
    c.queued = q.at;
    c.started = sc_core::sc_time_stamp();
    c.status = validate(q.cmd);
    if (c.status == cmd_status::ok) {
      const std::uint64_t out = operand_bytes(q.cmd)[2];
      me.write_lo = q.cmd.addr_c;
      me.write_hi = q.cmd.addr_c + out;
    }
    if (c.status == cmd_status::ok && m_functional) m_functional->start(*this, q.cmd);
    if (c.status == cmd_status::ok) c.status = execute(q.cmd);
    if (c.status == cmd_status::ok && m_functional) m_functional->finish(*this, q.cmd);
    me.fetching = false;
    m_state.notify(sc_core::SC_ZERO_TIME);
    while (m_posted != me.seq) sc_core::wait(m_state);  // completions in order
    c.finished = sc_core::sc_time_stamp();
    c.cycles = static_cast<std::uint64_t>(to_cycles(c.finished - c.started) + 0.5);
    // Busy time is the union of the commands' spans (overlapped commands count once).
    const sc_core::sc_time from = std::max(c.started, m_last_finish);
    m_busy_cycles += static_cast<double>(static_cast<std::uint64_t>(to_cycles(c.finished - from) + 0.5));
    m_last_finish = c.finished;
    ++m_commands;
    if (c.status != cmd_status::ok) {
      ++m_errors;
      spdlog::warn("[{}] {}: command {} ({}) failed: {}", c.finished.to_string(), name(), c.id,
                   to_string(c.op), to_string(c.status));
    }
    if (timeline::on()) trace_command(*this, q.cmd, c, from);
    m_completions.push_back(c);
    m_completion_event.notify(sc_core::SC_ZERO_TIME);
    me.busy = false;
    ++m_posted;
    m_state.notify(sc_core::SC_ZERO_TIME);
  }
}

cmd_status compute_block::transfer(traffic_class cls, tlm::tlm_command dir, std::uint64_t addr, std::uint64_t len,
                                   const std::function<void(std::size_t, const sc_core::sc_time&)>& on_chunk,
                                   const std::function<sc_core::sc_time(std::size_t)>& gate) {
  if (len == 0) return cmd_status::ok;
  const std::uint64_t cb = chunk_bytes(len);
  const std::size_t chunks = static_cast<std::size_t>((len + cb - 1) / cb);
  xfer& x = current().x;
  x.error = tlm::TLM_OK_RESPONSE;
  x.completed = 0;
  x.on_chunk = on_chunk ? &on_chunk : nullptr;
  std::size_t issued = 0;
  while (x.completed < chunks) {
    if (issued < chunks && m_in_flight < m_outstanding) {
      if (gate) {
        const sc_core::sc_time at = gate(issued);
        if (at == sc_core::sc_max_time()) {  // not known until more chunks have arrived
          sc_core::wait(m_chunk_event);
          continue;
        }
        if (at > sc_core::sc_time_stamp()) {
          sc_core::wait(at - sc_core::sc_time_stamp());
          continue;
        }
      }
      const std::uint64_t off = static_cast<std::uint64_t>(issued) * cb;
      issue(x, cls, dir, addr + off, std::min(cb, len - off), issued);
      ++issued;
    } else {
      sc_core::wait(m_chunk_event);
    }
  }
  x.on_chunk = nullptr;
  if (dir == tlm::TLM_READ_COMMAND)
    m_bytes_read += static_cast<double>(len);
  else
    m_bytes_written += static_cast<double>(len);
  if (x.error == tlm::TLM_OK_RESPONSE) return cmd_status::ok;
  return x.error == tlm::TLM_ADDRESS_ERROR_RESPONSE ? cmd_status::bad_address : cmd_status::memory_error;
}

void compute_block::issue(xfer& x, traffic_class cls, tlm::tlm_command dir, std::uint64_t addr,
                          std::uint64_t len, std::size_t index) {
  tlm::tlm_generic_payload* t = m_pool.acquire(0);
  t->set_command(dir);
  t->set_address(addr);
  t->set_data_length(static_cast<unsigned>(len));
  t->set_streaming_width(static_cast<unsigned>(len));
  if (!t->get_extension<timing_only>()) t->set_extension(new timing_only);
  traffic_tag* cl = t->get_extension<traffic_tag>();
  if (!cl) t->set_extension(cl = new traffic_tag);
  cl->cls = cls;
  chunk_tag* tag = t->get_extension<chunk_tag>();
  if (!tag) t->set_extension(tag = new chunk_tag);
  tag->index = index;
  tag->owner = &x;
  ++m_in_flight;
  m_mem.send(*t);
}

cmd_status compute_block::copy(traffic_class src_cls, std::uint64_t src, traffic_class dst_cls, std::uint64_t dst,
                               std::uint64_t len) {
  if (len == 0) return cmd_status::ok;
  const std::uint64_t cb = chunk_bytes(len);
  const std::size_t chunks = static_cast<std::size_t>((len + cb - 1) / cb);
  xfer& x = current().x;
  x.error = tlm::TLM_OK_RESPONSE;
  std::deque<std::size_t> readable;  // chunks read and not yet written
  x.completed = 0;
  std::size_t reads = 0, read_done = 0;
  // Reads carry their chunk index; writes carry chunks + index, so completions tell them apart.
  const std::function<void(std::size_t, const sc_core::sc_time&)> on_chunk =
      [&](std::size_t i, const sc_core::sc_time&) {
        if (i < chunks) {
          readable.push_back(i);
          ++read_done;
        }
      };
  x.on_chunk = &on_chunk;
  bool fetched = false;
  while (x.completed < 2 * chunks) {  // every chunk read and written
    if (!fetched && read_done == chunks) {  // every byte is in the engine: the next copy may start
      fetched = true;
      operands_fetched();
    }
    if (m_in_flight < m_outstanding && (!readable.empty() || reads < chunks)) {
      if (!readable.empty()) {  // writes first: they free the buffer
        const std::size_t i = readable.front();
        readable.pop_front();
        const std::uint64_t off = static_cast<std::uint64_t>(i) * cb;
        issue(x, dst_cls, tlm::TLM_WRITE_COMMAND, dst + off, std::min(cb, len - off), chunks + i);
      } else {
        const std::uint64_t off = static_cast<std::uint64_t>(reads) * cb;
        issue(x, src_cls, tlm::TLM_READ_COMMAND, src + off, std::min(cb, len - off), reads);
        ++reads;
      }
    } else {
      sc_core::wait(m_chunk_event);
    }
  }
  x.on_chunk = nullptr;
  m_bytes_read += static_cast<double>(len);
  m_bytes_written += static_cast<double>(len);
  if (x.error == tlm::TLM_OK_RESPONSE) return cmd_status::ok;
  return x.error == tlm::TLM_ADDRESS_ERROR_RESPONSE ? cmd_status::bad_address : cmd_status::memory_error;
}

void compute_block::chunk_done(tlm::tlm_generic_payload& t, const sc_core::sc_time& at) {
  const chunk_tag* tag = t.get_extension<chunk_tag>();
  xfer& x = *tag->owner;
  if (t.is_response_error() && x.error == tlm::TLM_OK_RESPONSE) x.error = t.get_response_status();
  ++x.completed;
  if (x.on_chunk) (*x.on_chunk)(tag->index, at);
  --m_in_flight;
  t.release();
  m_chunk_event.notify(at - sc_core::sc_time_stamp());
}

}  // namespace kelle
