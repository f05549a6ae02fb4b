#include "models/interconnect/router.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kelle {

router::router(const sc_core::sc_module_name& name, const config_node& params)
    : sc_core::sc_module(name),
      target_socket("target_socket"),
      initiator_socket("initiator_socket"),
      m_params(params),
      m_default_latency(sc_core::sc_time(
          params.get_double("latency_ns", 0.5, "latency of a port in ns (a crossing pays two)", 0.0),
          sc_core::SC_NS)),
      m_default_Bps(params.get_double_or_inf("bandwidth_GBps", 512.0,
                                      "bandwidth of a port per direction in GB/s (.inf: no limit)",
                                      1e-6) *
                    1e9),
      m_buffer_depth(params.get_uint("buffer_depth", 8,
                                     "requests buffered per initiator and target port", 1, 1 << 20)),
      m_stats("stats"),
      m_decode_errors(m_stats.counter("decode_errors", "count",
                                      "requests to unmapped addresses (TLM_ADDRESS_ERROR_RESPONSE)")) {
  target_socket.register_nb_transport_fw(this, &router::nb_transport_fw);
  target_socket.register_transport_dbg(this, &router::transport_dbg);
  initiator_socket.register_nb_transport_bw(this, &router::nb_transport_bw);
}

router::~router() {
  for (route* r : m_free_routes) delete r;
}

void router::configure_port(port& p, const std::string& name, const std::string& side) {
  p.name = name;
  p.latency = m_default_latency;
  p.Bps = m_default_Bps;
  const config_node ports = m_params.child_or_empty("ports");
  if (ports.has(name)) {
    const config_node pc = ports.child(name);
    p.latency = sc_core::sc_time(pc.get_double("latency_ns", m_default_latency.to_seconds() * 1e9,
                                               "latency of this port in ns", 0.0),
                                 sc_core::SC_NS);
    p.Bps = pc.get_double_or_inf("bandwidth_GBps", m_default_Bps / 1e9,
                                 "bandwidth of this port per direction in GB/s (.inf: no limit)", 1e-6) *
            1e9;
  }
  // A compute block has a target port (its commands) and an initiator port (its operands) of
  // the same name: statistics say which side, `to_<target>` or `from_<initiator>`.
  const std::string id = side + "_" + name;
  p.transactions = &m_stats.counter("transactions_" + id, "count", "transactions through port " + id);
  p.bytes = &m_stats.counter("bytes_" + id, "B", "data bytes through port " + id);
  p.wait = &m_stats.counter("wait_time_" + id, "s",
                            "time transactions waited at port " + id +
                                " (arbitration, link occupancy, back-pressure)");
}

void router::add_target(const std::string& name, std::uint64_t base, std::uint64_t size) {
  for (const auto& t : m_targets)
    if (base < t->base + t->size && t->base < base + size)
      throw config_error("interconnect: address range of '" + name + "' overlaps '" + t->name + "'");
  auto p = std::make_unique<target_port>();
  configure_port(*p, name, "to");
  p->base = base;
  p->size = size;
  m_targets.push_back(std::move(p));
}

void router::add_initiator(const std::string& name) {
  auto p = std::make_unique<initiator_port>();
  configure_port(*p, name, "from");
  m_initiators.push_back(std::move(p));
}

std::vector<router::mapping> router::address_map() const {
  std::vector<mapping> m;
  for (const auto& t : m_targets) m.push_back({t->name, t->base, t->size});
  return m;
}

std::uint64_t router::base_of(const std::string& target) const {
  for (const auto& t : m_targets)
    if (t->name == target) return t->base;
  throw std::out_of_range("interconnect: no target named '" + target + "'");
}

void router::before_end_of_elaboration() {
  for (auto& t : m_targets) {
    t->queues.resize(m_initiators.size());
    t->held.assign(m_initiators.size(), nullptr);
  }
  sc_core::sc_spawn_options method;
  method.spawn_method();
  for (unsigned i = 0; i < m_targets.size(); ++i)
    sc_core::sc_spawn([this, i] { target_method(i); },
                      sc_core::sc_gen_unique_name(("arbiter_" + m_targets[i]->name).c_str()), &method);
  for (unsigned i = 0; i < m_initiators.size(); ++i)
    sc_core::sc_spawn([this, i] { initiator_method(i); },
                      sc_core::sc_gen_unique_name(("responder_" + m_initiators[i]->name).c_str()), &method);
}

int router::decode(std::uint64_t addr) const {
  for (unsigned i = 0; i < m_targets.size(); ++i)
    if (addr >= m_targets[i]->base && addr - m_targets[i]->base < m_targets[i]->size)
      return static_cast<int>(i);
  return -1;
}

router::route* router::take_route() {
  if (m_free_routes.empty()) return new route;
  route* r = m_free_routes.back();
  m_free_routes.pop_back();
  return r;
}

sc_core::sc_time router::pass(link& l, double Bps, std::uint64_t bytes, const sc_core::sc_time& at) {
  if (std::isinf(Bps) || bytes == 0) return at;
  if (bytes != l.last_bytes) {
    l.last_bytes = bytes;
    l.last_time = sc_core::sc_time(static_cast<double>(bytes) / Bps, sc_core::SC_SEC);
  }
  const sc_core::sc_time done = std::max(at, l.free + l.last_time);
  l.free = done;
  return done;
}

tlm::tlm_sync_enum router::nb_transport_fw(int id, tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                           sc_core::sc_time& delay) {
  initiator_port& ip = *m_initiators.at(static_cast<unsigned>(id));
  if (ph == tlm::BEGIN_REQ) {
    const int ti = decode(t.get_address());
    if (ti < 0) {
      ++m_decode_errors;
      t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      delay += ip.latency;
      return tlm::TLM_COMPLETED;
    }
    target_port& tp = *m_targets[static_cast<unsigned>(ti)];
    route* r = take_route();
    r->initiator = static_cast<unsigned>(id);
    r->target = static_cast<unsigned>(ti);
    r->base = tp.base;
    t.set_extension(r);
    t.set_address(t.get_address() - tp.base);
    const sc_core::sc_time ready = sc_core::sc_time_stamp() + delay + ip.latency + tp.latency;
    auto& q = tp.queues[static_cast<unsigned>(id)];
    q.push_back({&t, ready});
    tp.wake.notify(delay + ip.latency + tp.latency);
    if (q.size() <= m_buffer_depth) {  // room in the buffer: accept at once
      ph = tlm::END_REQ;
      return tlm::TLM_UPDATED;
    }
    tp.held[static_cast<unsigned>(id)] = &t;  // END_REQ when the buffer has room again
    return tlm::TLM_ACCEPTED;
  }
  if (ph == tlm::END_RESP) {
    ip.end_resp.notify(delay);
    return tlm::TLM_COMPLETED;
  }
  SC_REPORT_FATAL(name(), ("unexpected phase " + std::string(ph.get_name()) + " from initiator " +
                           ip.name)
                              .c_str());
  return tlm::TLM_COMPLETED;
}

void router::target_method(unsigned ti) {
  target_port& tp = *m_targets[ti];
  const unsigned n = static_cast<unsigned>(tp.queues.size());
  for (;;) {
    switch (tp.at) {
      case target_port::step::arbitrate: {
        // Round-robin over initiators whose oldest request has arrived.
        const sc_core::sc_time now = sc_core::sc_time_stamp();
        int pick = -1;
        sc_core::sc_time earliest = sc_core::sc_max_time();
        for (unsigned k = 0; k < n; ++k) {
          const unsigned i = (tp.rr + k) % n;
          if (tp.queues[i].empty()) continue;
          const sc_core::sc_time r = tp.queues[i].front().ready;
          if (r <= now) {
            pick = static_cast<int>(i);
            break;
          }
          earliest = std::min(earliest, r);
        }
        if (pick < 0) {
          if (earliest == sc_core::sc_max_time())
            next_trigger(tp.wake);
          else
            next_trigger(earliest - now, tp.wake);
          return;
        }
        const unsigned ii = static_cast<unsigned>(pick);
        tp.rr = (ii + 1) % n;
        tp.current = ii;
        tlm::tlm_generic_payload& t = *tp.queues[ii].front().t;
        initiator_port& ip = *m_initiators[ii];

        // Write data crosses the initiator's and the target's downstream links.
        sc_core::sc_time send = now;
        if (t.is_write()) {
          const std::uint64_t len = t.get_data_length();
          send = pass(ip.down, ip.Bps, len, send);
          send = pass(tp.down, tp.Bps, len, send);
        }
        ++*tp.transactions;
        ++*ip.transactions;
        *tp.bytes += t.get_data_length();
        *ip.bytes += t.get_data_length();
        tp.at = target_port::step::send;
        if (send > now) {
          next_trigger(send - now);
          return;
        }
        break;
      }
      case target_port::step::send: {
        tlm::tlm_generic_payload& t = *tp.queues[tp.current].front().t;
        tlm::tlm_phase ph = tlm::BEGIN_REQ;
        sc_core::sc_time d = sc_core::SC_ZERO_TIME;
        tp.awaiting_end_req = &t;
        tp.at = target_port::step::accepted;
        const tlm::tlm_sync_enum r = initiator_socket[ti]->nb_transport_fw(t, ph, d);
        if (r == tlm::TLM_ACCEPTED) {
          if (tp.awaiting_end_req) {
            next_trigger(tp.end_req);
            return;
          }
          break;
        }
        if (r == tlm::TLM_UPDATED) {
          if (ph == tlm::BEGIN_RESP) push_response(t, sc_core::sc_time_stamp() + d);
          else if (ph != tlm::END_REQ)
            SC_REPORT_FATAL(name(), ("target returned phase " + std::string(ph.get_name())).c_str());
        } else {  // TLM_COMPLETED: the target answered at once
          push_response(t, sc_core::sc_time_stamp() + d);
        }
        if (d == sc_core::SC_ZERO_TIME) break;  // accepted now: on to the next request in this activation
        next_trigger(d);
        return;
      }
      case target_port::step::accepted: {
        const unsigned ii = tp.current;
        initiator_port& ip = *m_initiators[ii];
        tp.awaiting_end_req = nullptr;
        const sc_core::sc_time waited = sc_core::sc_time_stamp() - tp.queues[ii].front().ready;
        *tp.wait += waited.to_seconds();
        *ip.wait += waited.to_seconds();

        // The request leaves the buffer; a request held for want of room may now have END_REQ.
        tp.queues[ii].pop_front();
        tp.at = target_port::step::arbitrate;
        if (tlm::tlm_generic_payload* h = tp.held[ii]) {
          tp.held[ii] = nullptr;
          tlm::tlm_phase up = tlm::END_REQ;
          sc_core::sc_time ud = sc_core::SC_ZERO_TIME;
          target_socket[static_cast<int>(ii)]->nb_transport_bw(*h, up, ud);
        }
        break;
      }
    }
  }
}

void router::push_response(tlm::tlm_generic_payload& t, const sc_core::sc_time& at) {
  route* r = t.get_extension<route>();
  if (!r) SC_REPORT_FATAL(name(), "response for a transaction the router did not route");
  target_port& tp = *m_targets[r->target];
  initiator_port& ip = *m_initiators[r->initiator];
  sc_core::sc_time ready = at;
  if (t.is_read()) {
    const std::uint64_t len = t.get_data_length();
    ready = pass(tp.up, tp.Bps, len, ready);
    ready = pass(ip.up, ip.Bps, len, ready);
  }
  ready += tp.latency + ip.latency;
  auto pos = ip.responses.end();
  while (pos != ip.responses.begin() && std::prev(pos)->ready > ready) --pos;
  // At the end (nearly always) push_back: insert() at the front of an empty deque would take
  // and free a node per response.
  if (pos == ip.responses.end())
    ip.responses.push_back({&t, ready});
  else
    ip.responses.insert(pos, {&t, ready});
  ip.wake.notify(ready - sc_core::sc_time_stamp());
}

tlm::tlm_sync_enum router::nb_transport_bw(int id, tlm::tlm_generic_payload& t, tlm::tlm_phase& ph,
                                           sc_core::sc_time& delay) {
  target_port& tp = *m_targets.at(static_cast<unsigned>(id));
  if (ph == tlm::END_REQ) {
    if (tp.awaiting_end_req == &t) {
      tp.awaiting_end_req = nullptr;
      tp.end_req.notify(delay);
    }
    return tlm::TLM_ACCEPTED;
  }
  if (ph == tlm::BEGIN_RESP) {
    if (tp.awaiting_end_req == &t) {  // BEGIN_RESP implies END_REQ
      tp.awaiting_end_req = nullptr;
      tp.end_req.notify(delay);
    }
    push_response(t, sc_core::sc_time_stamp() + delay);
    return tlm::TLM_COMPLETED;  // the router buffers the response: END_RESP at once
  }
  SC_REPORT_FATAL(name(), ("unexpected phase " + std::string(ph.get_name()) + " from target " +
                           tp.name)
                              .c_str());
  return tlm::TLM_COMPLETED;
}

void router::initiator_method(unsigned ii) {
  initiator_port& ip = *m_initiators[ii];
  for (;;) {
    if (ip.responses.empty()) {
      next_trigger(ip.wake);
      return;
    }
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (ip.responses.front().ready > now) {
      next_trigger(ip.responses.front().ready - now, ip.wake);
      return;
    }
    tlm::tlm_generic_payload& t = *ip.responses.front().t;
    ip.responses.pop_front();
    route* r = t.get_extension<route>();
    t.set_address(t.get_address() + r->base);
    t.clear_extension(r);
    m_free_routes.push_back(r);

    tlm::tlm_phase ph = tlm::BEGIN_RESP;
    sc_core::sc_time d = sc_core::SC_ZERO_TIME;
    const tlm::tlm_sync_enum s = target_socket[static_cast<int>(ii)]->nb_transport_bw(t, ph, d);
    if (s == tlm::TLM_ACCEPTED) {
      next_trigger(ip.end_resp);
      return;
    }
    if (s == tlm::TLM_UPDATED) {
      next_trigger(d);
      return;
    }
  }
}

unsigned int router::transport_dbg(int, tlm::tlm_generic_payload& t) {
  const int ti = decode(t.get_address());
  if (ti < 0) return 0;
  const std::uint64_t base = m_targets[static_cast<unsigned>(ti)]->base;
  t.set_address(t.get_address() - base);
  const unsigned n = initiator_socket[ti]->transport_dbg(t);
  t.set_address(t.get_address() + base);
  return n;
}

}  // namespace kelle
