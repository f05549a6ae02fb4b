// Ignorable TLM-2.0 extensions the platform's initiators may attach to a generic payload.
#pragma once

#include <tlm>

#include <cstdint>

namespace kelle {

// The transaction models timing only: targets account time and energy but do not copy data.
// Large bulk transfers (weight streams of gigabytes) use it so that timing runs stay fast.
struct timing_only : tlm::tlm_extension<timing_only> {
  tlm::tlm_extension_base* clone() const override { return new timing_only(*this); }
  void copy_from(const tlm::tlm_extension_base&) override {}
};

// Attached by the interconnect while it carries a transaction (requests and responses): the
// initiator port the transaction came in on, the target port it goes to and that target's base
// address. A target may read `initiator` to tell its requesters apart (docs/models/memory-sram.md,
// bank arbitration); only the interconnect writes it.
struct routed : tlm::tlm_extension<routed> {
  unsigned initiator = 0;
  unsigned target = 0;
  std::uint64_t base = 0;
  tlm::tlm_extension_base* clone() const override { return new routed(*this); }
  void copy_from(const tlm::tlm_extension_base& e) override { *this = static_cast<const routed&>(e); }
};

}  // namespace kelle
