// The die's temperature over simulated time, as the models that depend on it read it: the eDRAM's
// retention (the true temperature) and the refresh policies (the on-die sensor's reading). One per
// process, as one SystemC kernel is (the timeline recorder's rule): the platform sets it when the
// scenario has a `thermal:` section; without one there is none and every model stays at the
// technology's temperature (tech.temperature_C, the figures' anchor). docs/models/thermal.md.
#pragma once

#include <string>

namespace kelle {

class die_temperature {
 public:
  virtual ~die_temperature() = default;
  // The die's true temperature now, C (what the cells leak at).
  virtual double true_C() = 0;
  // The on-die sensor's reading now, C (what the refresh controller knows).
  virtual double sensed_C() = 0;
  // Whether the DRAM derates its refresh with its temperature (JEDEC MR4; thermal.dram_derating),
  // and that temperature now, C: the die's true temperature plus thermal.dram_offset_C (the
  // DRAM is another die in the same package; docs/models/thermal.md, "The DRAM").
  virtual bool dram_derating() const { return false; }
  virtual double dram_C() { return true_C(); }
  // Why the run went beyond the temperatures it may run at ("" when it has not): an input error
  // the platform reports at the end of the run, which a model that cannot go on reports first.
  virtual std::string range_error() const { return ""; }

  // The process's die, or null (no thermal model: the technology's temperature).
  static die_temperature* current() { return s_current; }
  static void set_current(die_temperature* t) { s_current = t; }

 private:
  static inline die_temperature* s_current = nullptr;
};

}  // namespace kelle
