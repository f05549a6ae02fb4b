#include "firmware/driver/driver.h"

#include "models/interconnect/router.h"

#include <cstring>

namespace kelle {

driver::driver(const char* port_name, platform_view& p, stat_group& stats)
    : m_platform(p),
      m_commands(stats.counter("commands", "count", "commands the firmware submitted")),
      m_port(port_name, [](tlm::tlm_generic_payload& t, const sc_core::sc_time&) {
        if (t.is_response_error())
          SC_REPORT_ERROR("firmware", ("a command write was refused: " + t.get_response_string()).c_str());
        t.release();
      }) {
  p.interconnect().add_initiator(port_name);
  m_port.socket.bind(p.interconnect().target_socket);
  for (compute_block* b : p.blocks()) {
    const std::string name = b->basename();
    target& s = m_blocks[name];
    s.block = b;
    s.base = p.interconnect().base_of(name);
    sc_core::sc_spawn([this, &s] {
      for (;;) {
        sc_core::wait(s.block->completion_event());
        drain(s);
      }
    }, sc_core::sc_gen_unique_name("completions"));
  }
}

compute_block& driver::block(const std::string& name) { return *target_of(name).block; }

driver::target& driver::target_of(const std::string& name) {
  auto it = m_blocks.find(name);
  if (it == m_blocks.end())
    throw config_error("the firmware needs a compute block named '" + name +
                       "' in system.compute (this system has: " + m_platform.block_names() + ")");
  return it->second;
}

void driver::drain(target& b) {
  completion c;
  while (b.block->pop_completion(c)) {
    if (c.status != cmd_status::ok)
      SC_REPORT_ERROR("firmware", ("command " + std::to_string(c.id) + " (" + to_string(c.op) + ") on " +
                                   b.block->basename() + " failed: " + to_string(c.status))
                                      .c_str());
    --b.in_flight;
    m_done[c.id] = c;
    auto range = m_actions.equal_range(c.id);
    std::vector<std::function<void()>> run;
    for (auto it = range.first; it != range.second; ++it) run.push_back(std::move(it->second));
    m_actions.erase(range.first, range.second);
    for (auto& a : run) a();
  }
  m_completed.notify(sc_core::SC_ZERO_TIME);
}

ticket driver::submit(target& b, command c) {
  while (b.in_flight >= b.block->queue_depth()) sc_core::wait(m_completed);
  c.id = m_next_id++;
  ++m_commands;
  tlm::tlm_generic_payload* t = m_pool.acquire(sizeof(command));
  std::memcpy(t->get_data_ptr(), &c, sizeof c);
  t->set_command(tlm::TLM_WRITE_COMMAND);
  t->set_address(b.base);
  ++b.in_flight;
  m_port.send(*t);
  return ticket{b.block, c.id};
}

ticket driver::dma(std::uint64_t src, std::uint64_t dst, std::uint64_t bytes, traffic_class from, traffic_class to) {
  command c;
  c.op = opcode::copy;
  c.m = 1;
  c.addr_a = src;
  c.addr_c = dst;
  set_operand_class(c, operand_a, from);
  set_operand_class(c, operand_c, to);
  // m rows of k bytes, k below 4 GiB.
  std::uint64_t rows = 1;
  while (bytes / rows > 0xffffffffull || bytes % rows) ++rows;
  c.m = static_cast<std::uint32_t>(rows);
  c.k = static_cast<std::uint32_t>(bytes / rows);
  if (!m_dma) m_dma = &target_of("dma");
  return submit(*m_dma, c);
}

bool driver::done(const ticket& t) const { return m_done.count(t.id) != 0; }

const completion& driver::wait(const ticket& t) {
  while (!done(t)) sc_core::wait(m_completed);
  return m_done.at(t.id);
}

void driver::wait_all() {
  for (;;) {
    bool busy = false;
    for (const auto& [n, b] : m_blocks) busy |= b.in_flight > 0;
    if (!busy) return;
    sc_core::wait(m_completed);
  }
}

void driver::after(const ticket& t, std::function<void()> action) {
  if (done(t))
    action();
  else
    m_actions.emplace(t.id, std::move(action));
}

}  // namespace kelle
