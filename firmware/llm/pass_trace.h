// The llm workload's part of the timeline (docs/timeline.md): it opens the recorder's window
// for the passes in --timeline-steps, draws the passes and layers on the firmware tracks and
// the activation lifetimes of one layer (--timeline-layer) on a track per buffer kind.
#pragma once

#include "firmware/schedulers/layer_ops.h"

#include <systemc>

#include <cstddef>
#include <vector>

namespace kelle {

class pass_trace {
 public:
  // At elaboration: checks the traced layer against the model's layers and claims the window
  // (nothing is recorded outside the passes in range). No-op without a timeline.
  // The run's passes are first_pass..last_pass (0: the prefill, N: decode step N); a requested
  // range that records none of them is an input error.
  static void attach(unsigned layers, unsigned first_pass, unsigned last_pass);

  // At a pass's start: opens the window if the pass is in range.
  pass_trace(const pass_info& p, layer_ops& ops);
  // Whether this pass is in the timeline's range (its layers are then all simulated in detail).
  bool on() const { return m_on; }
  void layer_begin(unsigned layer);
  void layer_end(unsigned layer);
  // When every command of the pass has completed: the lifetimes, the pass; closes the window.
  void end();

 private:
  layer_ops& m_ops;
  bool m_on;
  unsigned m_step;
  bool m_prefill;
  sc_core::sc_time m_start, m_layer_start;
  std::vector<lifetime_record> m_life;  // the buffers the traced layer produced
};

}  // namespace kelle
