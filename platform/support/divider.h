// Division and remainder by a divisor fixed at construction (a memory's row size, bank count,
// interleave, ...): a shift and a mask when the divisor is a power of two, as every standard
// organisation's is, else the hardware division. The hot paths of the memory models split each
// transaction with several of these; a 64-bit `div` costs tens of cycles, a shift one.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace kelle {

class divider {
 public:
  divider() = default;
  explicit divider(std::uint64_t d) : m_d(d) {
    if (d == 0) throw std::logic_error("divider: division by zero");
    m_pow2 = (d & (d - 1)) == 0;
    if (m_pow2) m_shift = static_cast<unsigned>(__builtin_ctzll(d));
  }
  std::uint64_t value() const { return m_d; }
  std::uint64_t div(std::uint64_t x) const { return m_pow2 ? x >> m_shift : x / m_d; }
  std::uint64_t mod(std::uint64_t x) const { return m_pow2 ? x & (m_d - 1) : x % m_d; }

 private:
  std::uint64_t m_d = 1;
  unsigned m_shift = 0;
  bool m_pow2 = true;
};

}  // namespace kelle
