#include "models/memory/sparse_store.h"

#include <algorithm>
#include <cstring>

namespace kelle {

void sparse_store::read(std::uint64_t addr, unsigned char* dst, std::uint64_t len) const {
  while (len > 0) {
    const std::uint64_t page = addr / page_bytes, off = addr % page_bytes;
    const std::uint64_t n = std::min(len, page_bytes - off);
    auto it = m_pages.find(page);
    if (it == m_pages.end())
      std::memset(dst, 0, n);
    else
      std::memcpy(dst, it->second.get() + off, n);
    addr += n;
    dst += n;
    len -= n;
  }
}

void sparse_store::write(std::uint64_t addr, const unsigned char* src, std::uint64_t len) {
  while (len > 0) {
    const std::uint64_t page = addr / page_bytes, off = addr % page_bytes;
    const std::uint64_t n = std::min(len, page_bytes - off);
    auto& p = m_pages[page];
    if (!p) p.reset(new unsigned char[page_bytes]());
    std::memcpy(p.get() + off, src, n);
    addr += n;
    src += n;
    len -= n;
  }
}

}  // namespace kelle
