#include "models/compute/op_workload.h"

#include "models/interconnect/router.h"
#include "models/memory/memory_target.h"

#include <cstdio>
#include <map>
#include <cstring>

namespace kelle {

namespace {

const std::vector<std::pair<std::string, opcode>>& opcode_names() {
  static const std::vector<std::pair<std::string, opcode>> names = {
      {"gemm", opcode::gemm},         {"gemm_transposed", opcode::gemm_transposed},
      {"softmax", opcode::softmax},   {"exp", opcode::exp},
      {"gelu", opcode::gelu},         {"silu", opcode::silu},
      {"rmsnorm", opcode::rmsnorm},   {"layernorm", opcode::layernorm},
      {"rope", opcode::rope},         {"add", opcode::add},
      {"mul", opcode::mul},           {"min_search", opcode::min_search},
      {"evict_select", opcode::evict_select}, {"copy", opcode::copy}};
  return names;
}

// The block that implements an opcode in the built-in systems.
std::string default_block(opcode op) {
  if (op == opcode::gemm || op == opcode::gemm_transposed) return "rsa";
  if (op == opcode::evict_select) return "evictor";
  if (op == opcode::copy) return "dma";
  return "sfu";
}

}  // namespace

opcode op_workload::parse_opcode(const config_node& where, const std::string& key) {
  std::vector<std::string> allowed;
  for (const auto& [n, op] : opcode_names()) allowed.push_back(n);
  const std::string name = where.require_choice(key, allowed);
  for (const auto& [n, op] : opcode_names())
    if (n == name) return op;
  return opcode::gemm;
}

op_workload::op_workload(const sc_core::sc_module_name& name, const workload_args& a)
    : workload(name), m_port("socket", [this](tlm::tlm_generic_payload& t, const sc_core::sc_time& at) {
        m_write_status = t.get_response_status();
        m_answered = true;
        m_response.notify(at - sc_core::sc_time_stamp());
      }) {
  const config_node& p = a.params;
  m_cmd.op = parse_opcode(p, "op");
  m_block_name = p.get_string("block", default_block(m_cmd.op), "the compute block to run the command on");
  m_block = a.platform.block(m_block_name);
  if (!m_block)
    p.fail("block", "no compute block named '" + m_block_name + "' in this system (it has: " +
                        a.platform.block_names() + ")");
  m_block_base = a.platform.interconnect().base_of(m_block_name);
  m_cmd.id = 1;
  m_cmd.m = static_cast<std::uint32_t>(p.get_uint("m", 1, "rows M", 0, 0xffffffffu));
  m_cmd.k = static_cast<std::uint32_t>(p.get_uint("k", 1, "reduction / row length K", 0, 0xffffffffu));
  m_cmd.n = static_cast<std::uint32_t>(p.get_uint("n", 1, "output columns N", 0, 0xffffffffu));
  m_cmd.extra = static_cast<std::uint32_t>(p.get_uint("extra", 0, "opcode-specific count (stacked rows, heads)", 0, 0xffffffffu));
  m_cmd.flags = static_cast<std::uint32_t>(p.get_uint("flags", 0, "opcode-specific flags", 0, 0xffffffffu));
  m_cmd.batch = static_cast<std::uint32_t>(p.get_uint("batch", 1, "independent products of this shape", 1, 0xffffffffu));

  // Operands a, b, c, d placed one after another (64-byte aligned) in their memories.
  const std::string def_mem = a.platform.memory("weight_sram") ? "weight_sram" : "sram";
  const std::string all = p.get_string("operands", def_mem, "memory holding every operand");
  const std::array<std::uint64_t, 4> bytes = m_block->operand_bytes(m_cmd);
  std::map<std::string, std::uint64_t> next;  // next free offset per memory
  std::uint64_t* addr[4] = {&m_cmd.addr_a, &m_cmd.addr_b, &m_cmd.addr_c, &m_cmd.addr_d};
  const char* keys[4] = {"a_memory", "b_memory", "c_memory", "d_memory"};
  for (int i = 0; i < 4; ++i) {
    m_operand_memory[i] = p.get_string(keys[i], all, "memory holding this operand");
    memory_target* mem = a.platform.memory(m_operand_memory[i]);
    if (!mem)
      p.fail(keys[i], "no memory named '" + m_operand_memory[i] + "' (expected one of: " +
                          a.platform.memory_names() + ")");
    std::uint64_t& off = next[m_operand_memory[i]];
    if (off + bytes[i] > mem->capacity_bytes()) {
      // Where it would fit (beside the operands already there), other than where it is: the
      // largest such memory; none: the command is too large for this system.
      std::string other;
      std::uint64_t other_free = 0;
      for (memory_target* m : a.platform.memory_targets()) {
        const std::string n = m->basename();
        const std::uint64_t used = next.count(n) ? next[n] : 0;
        const std::uint64_t free = m->capacity_bytes() > used ? m->capacity_bytes() - used : 0;
        if (n != m_operand_memory[i] && free >= bytes[i] && free > other_free) {
          other = n;
          other_free = free;
        }
      }
      p.fail(keys[i], "the operands (" + std::to_string(off + bytes[i]) + " B) do not fit in " + m_operand_memory[i] +
                          " (" + std::to_string(mem->capacity_bytes()) + " B); " +
                          (other.empty() ? "no memory of this system holds operand " + std::string(1, char('a' + i)) +
                                               " (" + std::to_string(bytes[i]) + " B): reduce m, k or n"
                                         : "place them elsewhere, e.g. -p workload." + std::string(keys[i]) + "=" + other));
    }
    *addr[i] = a.platform.interconnect().base_of(m_operand_memory[i]) + off;
    off += (bytes[i] + 63) / 64 * 64;
  }

  // A command the block would refuse is an input error, not a run that ends with a status.
  const cmd_status st = m_block->check(m_cmd);
  std::string blame = st == cmd_status::bad_opcode ? "block" : "op";
  if (st == cmd_status::bad_shape)  // a size the command line set, else the command
    for (const char* k : {"m", "k", "n", "extra", "batch"})
      if (p.origin(k).rfind("command line", 0) == 0) {
        blame = k;
        break;
      }
  if (st != cmd_status::ok)
    p.fail(blame,
           m_block_name + " refuses " + to_string(m_cmd.op) + " m " + std::to_string(m_cmd.m) + ", k " +
               std::to_string(m_cmd.k) + ", n " + std::to_string(m_cmd.n) + " (" + to_string(st) + ")" +
               (st == cmd_status::bad_opcode ? "; its commands run on " + default_block(m_cmd.op) : ""));

  a.platform.interconnect().add_initiator(basename());
  m_port.socket.bind(a.platform.interconnect().target_socket);
  SC_HAS_PROCESS(op_workload);
  SC_THREAD(run);
}

void op_workload::run() {
  tlm::tlm_generic_payload t;
  unsigned char buf[sizeof(command)];
  std::memcpy(buf, &m_cmd, sizeof buf);
  t.set_command(tlm::TLM_WRITE_COMMAND);
  t.set_address(m_block_base);
  t.set_data_ptr(buf);
  t.set_data_length(sizeof buf);
  t.set_streaming_width(sizeof buf);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  m_port.send(t);
  while (!m_answered) sc_core::wait(m_response);  // the write's response, through the interconnect
  if (m_write_status != tlm::TLM_OK_RESPONSE) {
    SC_REPORT_ERROR(name(), ("the command write was refused: " + t.get_response_string()).c_str());
    return;
  }
  while (!m_block->pop_completion(m_completion)) sc_core::wait(m_block->completion_event());
  m_block_report = m_block->last_command_report();
  m_done = true;
}

void op_workload::add_results(nlohmann::json& r) const {
  const double t = (m_completion.finished - m_completion.started).to_seconds();
  nlohmann::json o = {{"block", m_block_name},
                      {"op", to_string(m_cmd.op)},
                      {"m", m_cmd.m},
                      {"k", m_cmd.k},
                      {"n", m_cmd.n},
                      {"extra", m_cmd.extra},
                      {"operands", m_operand_memory},
                      {"status", to_string(m_completion.status)},
                      {"cycles", m_completion.cycles},
                      {"time_s", t}};
  for (const auto& [k, v] : m_block_report.items())
    if (k == "energy_J")
      o["compute_energy_J"] = v;
    else
      o[k] = v;
  if (!o.contains("utilization")) o["utilization"] = nullptr;
  o["energy_J"] = r.contains("energy_J") ? r["energy_J"]["total"] : nlohmann::json(nullptr);
  r["op"] = o;
}


std::string op_workload::report() const {
  nlohmann::json r;
  add_results(r);
  const auto& o = r["op"];
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "Command %s on %s (m %u, k %u, n %u, extra %u; operands a:%s b:%s c:%s)\n"
                "  status             %s\n"
                "  cycles             %llu (%.4g us)\n",
                to_string(m_cmd.op).c_str(), m_block_name.c_str(), m_cmd.m, m_cmd.k, m_cmd.n,
                m_cmd.extra, m_operand_memory[0].c_str(), m_operand_memory[1].c_str(),
                m_operand_memory[2].c_str(), to_string(m_completion.status).c_str(),
                static_cast<unsigned long long>(m_completion.cycles), o["time_s"].get<double>() * 1e6);
  std::string s = buf;
  for (const auto& [k, v] : m_block_report.items()) {
    const std::string label = k == "energy_J" ? "compute_energy_J" : k;
    std::snprintf(buf, sizeof buf, "  %-18s %s\n", label.c_str(), v.dump().c_str());
    s += buf;
  }
  return s;
}

KELLE_REGISTER(workloads(), "op", "one command on one compute block (kelle-vp op)",
               [](const workload_args& a) -> std::unique_ptr<workload> {
                 return std::make_unique<op_workload>("op", a);
               });

}  // namespace kelle
