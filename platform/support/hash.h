// Seeded, stateless pseudo-random numbers: the same inputs give the same value on every run and
// machine (synthetic attention scores, fault injection).
#pragma once

#include <cstdint>

namespace kelle {

// The splitmix64 finaliser: a 64-bit hash with good avalanche.
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A hash as a uniform number in (0, 1), never 0 or 1.
inline double unit_interval(std::uint64_t h) { return (double(h >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace kelle
