#include "tests/support/test_initiator.h"

#include <sys/wait.h>
#include <unistd.h>

namespace kelle::test {

struct test_initiator::tx : tlm::tlm_generic_payload {
  request* req = nullptr;
};

test_initiator::test_initiator(const sc_core::sc_module_name& name, const workload_args& a)
    : workload(name) {
  const unsigned ports = static_cast<unsigned>(a.params.get_uint("ports", 1, "initiator ports", 1, 2));
  for (unsigned i = 0; i < ports; ++i) {
    const std::string n = i == 0 ? std::string("socket") : "socket_" + std::to_string(i);
    m_ports.push_back(std::make_unique<at_initiator>(
        n.c_str(), [this](tlm::tlm_generic_payload& t, const sc_core::sc_time& at) { complete(t, at); }));
    const std::string port_name = i == 0 ? std::string(basename()) : std::string(basename()) + "_" + std::to_string(i);
    a.platform.interconnect().add_initiator(port_name);
    m_ports.back()->socket.bind(a.platform.interconnect().target_socket);
    sc_core::sc_spawn([this, i] { run(i); }, sc_core::sc_gen_unique_name("run"));
  }
}

test_initiator::~test_initiator() = default;

std::size_t test_initiator::add(request r) {
  if (r.port >= m_ports.size()) throw std::runtime_error("test_initiator: no port " + std::to_string(r.port));
  m_requests.push_back(std::make_unique<request>(std::move(r)));
  return m_requests.size() - 1;
}

std::size_t test_initiator::read(std::uint64_t addr, unsigned len, sc_core::sc_time at) {
  request r;
  r.addr = addr;
  r.len = len;
  r.issue_at = at;
  r.data.assign(len, 0);
  return add(std::move(r));
}

std::size_t test_initiator::write(std::uint64_t addr, std::vector<unsigned char> data, sc_core::sc_time at) {
  request r;
  r.cmd = tlm::TLM_WRITE_COMMAND;
  r.addr = addr;
  r.len = static_cast<unsigned>(data.size());
  r.data = std::move(data);
  r.issue_at = at;
  return add(std::move(r));
}

bool test_initiator::finished() const {
  for (const auto& r : m_requests)
    if (!r->done) return false;
  return true;
}

void test_initiator::run(unsigned port) {
  for (auto& rp : m_requests) {
    request& r = *rp;
    if (r.port != port) continue;
    at_initiator& out = *m_ports[port];
    if (r.issue_at > sc_core::sc_time_stamp()) sc_core::wait(r.issue_at - sc_core::sc_time_stamp());
    auto t = std::make_unique<tx>();
    t->req = &r;
    tlm::tlm_generic_payload& p = *t;
    p.set_command(r.cmd);
    p.set_address(r.addr);
    if (r.data.size() < r.len) r.data.resize(r.len);
    p.set_data_ptr(r.data.data());
    p.set_data_length(r.len);
    p.set_streaming_width(r.streaming_width ? r.streaming_width : r.len);
    p.set_byte_enable_ptr(r.byte_enable);
    p.set_byte_enable_length(r.byte_enable ? r.len : 0);
    p.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    m_tx.push_back(std::move(t));
    if (r.debug) {
      r.debug_bytes = out.socket->transport_dbg(p);
      r.begin_req = r.end_req = r.begin_resp = sc_core::sc_time_stamp();
      r.status = p.get_response_status();
      r.done = true;
      continue;
    }

    r.begin_req = sc_core::sc_time_stamp();
    out.send(p);
    r.end_req = sc_core::sc_time_stamp();
  }
}

void test_initiator::complete(tlm::tlm_generic_payload& t, const sc_core::sc_time& at) {
  request& r = *static_cast<tx&>(t).req;
  r.begin_resp = at;
  r.status = t.get_response_status();
  r.done = true;
}

namespace {
KELLE_REGISTER(workloads(), "test_script", "scripted test initiator (tests only)",
               [](const workload_args& a) -> std::unique_ptr<workload> {
                 return std::make_unique<test_initiator>("tester", a);
               });
}  // namespace

bench::bench(const std::string& yaml, const std::vector<std::string>& overrides)
    : cfg(config::from_string(yaml, "test.yaml", overrides)), p(std::make_unique<platform>(cfg)) {}

std::string in_child_process(const std::function<std::string()>& f) {
  int fd[2];
  if (pipe(fd) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fd[0]);
    std::string out;
    try {
      out = f();
    } catch (const std::exception& e) {
      out = std::string("error: ") + e.what();
    }
    const char* p = out.data();
    std::size_t left = out.size();
    while (left > 0) {
      const ssize_t n = ::write(fd[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    close(fd[1]);
    _exit(0);
  }
  close(fd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("child process failed");
  return out;
}

nlohmann::json results_in_child(const std::function<config()>& make) {
  const std::string out = in_child_process([&] {
    auto cfg = make();
    platform p(cfg);
    p.run();
    return p.results().dump();
  });
  if (out.rfind("error: ", 0) == 0) throw std::runtime_error(out);
  return nlohmann::json::parse(out);
}

}  // namespace kelle::test
