// Ignorable TLM-2.0 extensions the platform's initiators may attach to a generic payload.
#pragma once

#include <tlm>

namespace kelle {

// The transaction models timing only: targets account time and energy but do not copy data.
// Large bulk transfers (weight streams of gigabytes) use it so that timing runs stay fast.
struct timing_only : tlm::tlm_extension<timing_only> {
  tlm::tlm_extension_base* clone() const override { return new timing_only(*this); }
  void copy_from(const tlm::tlm_extension_base&) override {}
};

}  // namespace kelle
