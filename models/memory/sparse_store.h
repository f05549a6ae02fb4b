// Backing store of a memory model: pages are allocated on first write, unwritten bytes read as 0,
// so a 16 GB DRAM costs only what is actually written.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

namespace kelle {

class sparse_store {
 public:
  void read(std::uint64_t addr, unsigned char* dst, std::uint64_t len) const;
  void write(std::uint64_t addr, const unsigned char* src, std::uint64_t len);
  std::uint64_t resident_bytes() const { return m_pages.size() * page_bytes; }

  static constexpr std::uint64_t page_bytes = 64 * 1024;

 private:
  std::unordered_map<std::uint64_t, std::unique_ptr<unsigned char[]>> m_pages;
};

}  // namespace kelle
