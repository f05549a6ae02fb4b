// A placed piece of data: which memory, where in the global address map, how many bytes.
#pragma once

#include <cstdint>
#include <string>

namespace kelle {

class memory_target;

struct region {
  std::string memory;        // instance name
  std::uint64_t addr = 0;    // global address
  std::uint64_t bytes = 0;
  bool on_chip = false;
  memory_target* target = nullptr;  // the memory, resolved when the plan places the region
  std::uint64_t base = 0;           // the memory's base address (addr - base is local to it)
};

}  // namespace kelle
