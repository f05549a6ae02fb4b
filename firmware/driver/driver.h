// The firmware's driver: what a scheduler is written against. It submits commands to the
// compute blocks the way host firmware does, by writing 64-byte descriptors to their command
// ports over the interconnect (posted writes), keeps the blocks' queues from overflowing,
// collects completions the moment the blocks post them, and runs actions tied to a command's
// completion (freeing a buffer, closing an activation's lifetime).
//
//   driver::target& rsa = drv.target_of("rsa");  // a block, resolved once
//   ticket g = drv.submit(rsa, command{...});    // a command to it
//   ticket t = drv.dma(src, dst, bytes, traffic_class::weights);  // a DMA copy
//   drv.wait(t);                                 // the calling thread waits for completion
//   drv.after(g, [&] { ... });                   // run at g's completion time
#pragma once

#include "models/compute/compute_block.h"
#include "platform/system/workload.h"
#include "platform/tlm/at_initiator.h"
#include "platform/tlm/payload_pool.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kelle {

struct ticket {
  compute_block* block = nullptr;
  std::uint32_t id = 0;
  bool valid() const { return block != nullptr; }
};

class driver {
 public:
  // Construct inside the owning module's constructor; binds to the platform's interconnect as
  // initiator `port_name`. The commands it submits are counted in `stats` (`commands`).
  driver(const char* port_name, platform_view& platform, stat_group& stats);

  compute_block& block(const std::string& name);

  // A block's command port as the driver tracks it: resolved once by name (target()), then
  // submitted to without a look-up.
  struct target {
    compute_block* block;
    std::uint64_t base;         // its command port's address
    std::size_t in_flight = 0;  // commands submitted and not yet completed
  };
  // The block of that name; a clear error if the system has none.
  target& target_of(const std::string& name);

  // Submits a command to a block; returns at once (after the descriptor write is accepted),
  // unless the block's queue is full, then it first waits for one of its commands to complete.
  ticket submit(target& block, command c);
  ticket submit(const std::string& block, command c) { return submit(target_of(block), c); }
  // A DMA copy of `bytes` from `src` (data of traffic class `from`) to `dst` (class `to`): the
  // memories count the bytes by class (platform/tlm/traffic_class.h).
  ticket dma(std::uint64_t src, std::uint64_t dst, std::uint64_t bytes, traffic_class from, traffic_class to);
  ticket dma(std::uint64_t src, std::uint64_t dst, std::uint64_t bytes,
             traffic_class cls = traffic_class::unclassified) {
    return dma(src, dst, bytes, cls, cls);
  }

  // Waits until the command has completed and returns its completion. A failed command is a
  // simulation error (the firmware model does not issue commands that may fail).
  const completion& wait(const ticket& t);
  void wait_all();
  bool done(const ticket& t) const;
  // Runs `action` at the simulated time `t` completes (at once if it already has).
  void after(const ticket& t, std::function<void()> action);

  // Commands submitted by this process (the next command's id - 1).
  std::uint64_t commands_submitted() const { return m_next_id - 1; }

 private:
  void drain(target& b);

  platform_view& m_platform;
  std::map<std::string, target> m_blocks;
  target* m_dma = nullptr;  // for dma()
  std::map<std::uint32_t, completion> m_done;  // by command id
  std::multimap<std::uint32_t, std::function<void()>> m_actions;
  std::uint32_t m_next_id = 1;
  stat& m_commands;  // commands submitted (passes not simulated add theirs by extrapolation)
  payload_pool m_pool;
  at_initiator m_port;  // posted descriptor writes
  sc_core::sc_event m_completed;
};

}  // namespace kelle
