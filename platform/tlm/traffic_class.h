// Traffic classes: what the bytes of a transaction are (weights, KV cache, activations). The
// initiator attaches the class to the transaction (`traffic_tag`); every memory counts its bytes
// and its access energy by class (memory_target), so a figure by class is counted once, by the
// memory that moved the bytes. A transaction without a tag is `unclassified` (a test initiator,
// the traffic generator, a plugin's own initiator).
#pragma once

#include <tlm>

#include <array>
#include <cstdint>

namespace kelle {

enum class traffic_class : std::uint8_t { unclassified = 0, weights = 1, kv = 2, activations = 3 };
constexpr std::size_t traffic_classes = 4;

// The class's name in statistics and results (bytes_<name>, dram_<name>).
constexpr const char* name_of(traffic_class c) {
  constexpr std::array<const char*, traffic_classes> names{"unclassified", "weights", "kv", "activations"};
  return names[static_cast<std::size_t>(c)];
}
constexpr std::size_t index_of(traffic_class c) { return static_cast<std::size_t>(c); }
constexpr traffic_class class_at(std::size_t i) { return static_cast<traffic_class>(i); }

// Attached by an initiator to a transaction: its traffic class. Sticky on pooled payloads: the
// initiator sets `cls` before each send.
struct traffic_tag : tlm::tlm_extension<traffic_tag> {
  traffic_class cls = traffic_class::unclassified;
  tlm::tlm_extension_base* clone() const override { return new traffic_tag(*this); }
  void copy_from(const tlm::tlm_extension_base& e) override { cls = static_cast<const traffic_tag&>(e).cls; }
};

// The class of a transaction (unclassified without a tag).
inline traffic_class class_of(const tlm::tlm_generic_payload& t) {
  const traffic_tag* tag = t.get_extension<traffic_tag>();
  return tag ? tag->cls : traffic_class::unclassified;
}

}  // namespace kelle
