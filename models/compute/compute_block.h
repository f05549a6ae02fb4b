// The base of the accelerator's compute blocks: a command target (the firmware writes 64-byte
// descriptors to the block's base address), an in-order command queue, a completion queue with
// an interrupt-like event, and an operand engine that moves operands over the interconnect
// through the block's own AT initiator socket (so compute contends with every other transfer and
// waits for memory when memory is the bottleneck).
//
// Commands start in order and complete in order. With `overlap_commands` a block that has
// fetched a command's inputs (operands_fetched()) starts the next command's operand fetch while
// it finishes the current one (its compute, its result writes), as an engine that prefetches its
// next descriptor does; the next command waits instead if it reads or writes what the current
// one writes (an address-range hazard check).
#pragma once

#include "models/compute/command.h"
#include "platform/config/config.h"
#include "platform/registry/registry.h"
#include "platform/stats/stats.h"
#include "platform/tlm/at_initiator.h"
#include "platform/tlm/payload_pool.h"

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <nlohmann/json.hpp>

#include <array>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace kelle {

class compute_block;
class platform_view;
class score_board;

// Functional mode (docs/functional.md): computes a command's results from real operand data.
// start() runs when the block begins a valid command (it reads the operands as they are then),
// finish() when the command's timing has completed (it writes the results). Timing mode has none.
class functional_unit {
 public:
  virtual ~functional_unit() = default;
  virtual void start(const compute_block& block, const command& c) = 0;
  virtual void finish(const compute_block& block, const command& c) = 0;
};
class router;

struct compute_args {
  std::string name;    // instance name: rsa, sfu, evictor
  config_node params;  // system.compute.<name>
  config_node tech;    // the technology description
  double clock_GHz;    // system.clock_GHz
};

using compute_registry = registry<compute_block, const compute_args&>;
compute_registry& compute_blocks();

class compute_block : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<compute_block> cmd_socket;     // descriptors in

  compute_block(const sc_core::sc_module_name& name, const compute_args& args);

  // Completions, oldest first; the event fires when one is posted (the block's interrupt).
  bool pop_completion(completion& c);
  const sc_core::sc_event& completion_event() const { return m_completion_event; }
  std::size_t queue_depth() const { return m_queue_depth; }

  // What the block would answer to `c` before running it (ok, bad_shape, bad_opcode, ...): a
  // workload checks its commands with it while the platform is built.
  cmd_status check(const command& c) const { return validate(c); }
  // Bytes of operands a, b, c, d that a valid command reads or writes (for placing them).
  virtual std::array<std::uint64_t, 4> operand_bytes(const command& c) const = 0;
  // Binds the operand initiator to the interconnect (attach() does it).
  void bind_operands(router& r);
  // Called once every block exists, so a block can find the blocks it works with.
  virtual void connect(platform_view& /*platform*/) {}
  // Figures of the most recent command beyond its completion (RSA: MACs, utilisation, stalls).
  virtual nlohmann::json last_command_report() const { return nlohmann::json::object(); }
  // A systolic array's geometry and energies, for the firmware's cost models (nullptr: the
  // block is not one).
  struct array_params {
    unsigned rows = 0, cols = 0;
    double fill_cycles = 0;       // cycles to load a fold's weights into the PEs
    bool double_buffered = false; // the next fold's weights load while the current one streams
    double mac_J = 0, idle_pe_J = 0;
  };
  virtual const array_params* systolic_array() const { return nullptr; }
  // Victim selection (the systolic evictor): the KV heads one evict_select command serves, 0 when
  // the block does not select victims.
  virtual std::uint64_t victim_select_heads() const { return 0; }
  // ... the KV slots per head it covers (a command's k at most; 0: it states none), and its
  // importance-score registers, which the firmware programs from the KV policy (the tokens they
  // protect) and whose width and scale the policy's evictor score model takes (nullptr: none).
  virtual std::uint64_t victim_select_slots() const { return 0; }
  virtual score_board* victim_scores() { return nullptr; }
  // Why the block refuses command `c` by the limits of its design, in its docs page's words (e.g.
  // "rows of at most 16777216 elements"), or "" when its design takes `c` (the block may still
  // refuse it for its configuration, a buffer too small). A workload checks its commands with it
  // while the platform is built.
  virtual std::string design_limit(const command& /*c*/) const { return {}; }
  // Why the block refused `c` (check() did), in its docs page's words; "" when it says nothing.
  virtual std::string refusal(const command& c) const { return design_limit(c); }
  // Its section of the scenario (system.compute.<name>): errors about the block name its keys.
  const config_node& params() const { return m_params; }
  // The cycles the commands so far would take at the block's peak rate, every unit busy every
  // cycle (the compute term of a first-order estimate, docs/firmware.md, "Roofline"): the RSA's
  // MACs over its PEs, the SFU's elements over its lanes, the evictor's active cycles. 0 for a
  // block whose work is the memories' (the DMA). Derived from counters, so it covers sampled work.
  virtual double work_cycles_at_peak() const { return 0.0; }
  // What a first-order model of a run asks of the block without simulating it (kelle-vp
  // estimate, firmware/llm/estimate.h): the cycles command `c` keeps the block busy when its
  // operands are always there, and the energy it costs (the block's own formulas and figures).
  struct first_order_cost {
    double cycles = 0, energy_J = 0;
  };
  virtual first_order_cost first_order(const command& /*c*/) const { return {}; }
  // Silicon area of the block in mm2 (0 when the technology gives none).
  virtual double area_mm2() const { return 0.0; }
  // Functional mode: the unit that computes this block's results (nullptr: timing only).
  void set_functional(functional_unit* f) { m_functional = f; }

  double clock_Hz() const { return m_clock_Hz; }
  sc_core::sc_time cycles(double n) const { return sc_core::sc_time(n / m_clock_Hz, sc_core::SC_SEC); }
  double to_cycles(const sc_core::sc_time& t) const { return t.to_seconds() * m_clock_Hz; }

 protected:
  // Checks a command before it runs; anything but ok completes it with that status.
  virtual cmd_status validate(const command& c) const = 0;
  // Runs a valid command in the block's thread (it may wait); returns its status.
  virtual cmd_status execute(const command& c) = 0;
  // Called by execute() once the command's inputs are in the block: with `overlap_commands` the
  // next command may start fetching its operands (copy() calls it once every chunk is read).
  void operands_fetched();
  bool overlap_commands() const { return m_overlap; }

  // Moves [addr, addr + len) (bytes of traffic class `cls`: the operand's, operand_class()) over
  // the interconnect in chunks of `chunk_bytes`, with up to
  // `outstanding` requests in flight. `on_chunk(i, t)` is called when chunk i completes at t (in
  // any order); `gate(i)`, if given, returns the earliest time chunk i may be requested (an
  // operand buffer that fills up), or sc_max_time() while that depends on chunks still in
  // flight. Returns when every chunk has completed.
  cmd_status transfer(traffic_class cls, tlm::tlm_command dir, std::uint64_t addr, std::uint64_t len,
                      const std::function<void(std::size_t, const sc_core::sc_time&)>& on_chunk = {},
                      const std::function<sc_core::sc_time(std::size_t)>& gate = {});
  // Copies [src, src + len) to [dst, dst + len) chunk by chunk: each chunk is written as soon as
  // its read has completed, reads and writes sharing the `outstanding` requests in flight. The
  // reads are of traffic class `src_cls`, the writes of `dst_cls`.
  cmd_status copy(traffic_class src_cls, std::uint64_t src, traffic_class dst_cls, std::uint64_t dst,
                  std::uint64_t len);
  // Bytes per transaction for an operand of `len` bytes: chunk_bytes, or larger when the
  // operand would otherwise take more than max_transactions_per_operand transactions (so the
  // cost of moving an operand in simulation is bounded, whatever its size).
  std::uint64_t chunk_bytes(std::uint64_t len) const {
    if (m_max_chunks == 0 || len <= m_chunk_bytes * m_max_chunks) return m_chunk_bytes;
    const std::uint64_t c = (len + m_max_chunks - 1) / m_max_chunks;
    return (c + 63) / 64 * 64;  // whole 64-byte bursts
  }

  stat_group m_stats;
  stat& m_commands;
  stat& m_errors;
  stat& m_busy_cycles;
  stat& m_bytes_read;
  stat& m_bytes_written;

 private:
  struct queued {
    command cmd;
    sc_core::sc_time at;
  };
  struct chunk_tag;
  // The operand-engine state of one executing command.
  struct xfer {
    tlm::tlm_response_status error = tlm::TLM_OK_RESPONSE;
    std::size_t completed = 0;  // requests of the current transfer or copy that completed
    const std::function<void(std::size_t, const sc_core::sc_time&)>* on_chunk = nullptr;
  };
  // A command being executed by one of the worker threads (two with overlap_commands).
  struct slot {
    sc_core::sc_process_handle thread;
    bool busy = false;
    bool fetching = false;  // the command has not yet fetched its inputs
    std::uint64_t seq = 0;  // start order
    std::uint64_t write_lo = 0, write_hi = 0;  // the command's result range [lo, hi)
    xfer x;
  };

  tlm::tlm_sync_enum cmd_fw(tlm::tlm_generic_payload& t, tlm::tlm_phase& ph, sc_core::sc_time& d);
  void worker(unsigned index);
  // Whether the queue's front command may start now on a free worker.
  bool may_start() const;
  slot& current();
  void chunk_done(tlm::tlm_generic_payload& t, const sc_core::sc_time& at);
  // Sends one chunk request (BEGIN_REQ, waiting for END_REQ as the protocol requires).
  void issue(xfer& x, traffic_class cls, tlm::tlm_command dir, std::uint64_t addr, std::uint64_t len,
             std::size_t index);

  config_node m_params;
  double m_clock_Hz;
  std::size_t m_queue_depth;
  std::uint64_t m_chunk_bytes;
  std::size_t m_outstanding;
  std::uint64_t m_max_chunks;  // 0: no bound
  bool m_overlap;
  std::deque<queued> m_queue;
  sc_core::sc_event m_state;  // a command arrived, fetched its inputs or completed
  std::deque<completion> m_completions;
  sc_core::sc_event m_completion_event;
  functional_unit* m_functional = nullptr;
  std::array<slot, 2> m_slots;
  std::uint64_t m_started = 0, m_posted = 0;  // commands started, completions posted
  sc_core::sc_time m_last_finish;             // of the last posted command (busy time is a union)

  // Operand engine (requests of every executing command share `outstanding`).
  payload_pool m_pool;
  std::size_t m_in_flight = 0;
  at_initiator m_mem;  // operands in and out
  sc_core::sc_event m_chunk_event;
};

// Places a compute block in the system: command port at `base` and operand initiator on the
// interconnect.
void attach(compute_block& b, router& r, std::uint64_t base);

}  // namespace kelle
