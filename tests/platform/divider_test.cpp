// divider: a shift and a mask for powers of two, the hardware division otherwise; the same
// quotient and remainder as / and % for every divisor and dividend tried.
#include <catch2/catch.hpp>

#include "platform/support/divider.h"

#include <cstdint>
#include <random>
#include <stdexcept>

using namespace kelle;

TEST_CASE("divider: quotient and remainder equal / and % for powers of two and other divisors", "[divider]") {
  std::mt19937_64 rng(7);
  const std::uint64_t divisors[] = {1, 2, 3, 7, 8, 64, 96, 2048, 4095, 32768, 1ull << 40, (1ull << 63) + 5, ~0ull};
  for (std::uint64_t d : divisors) {
    const divider q(d);
    CHECK(q.value() == d);
    const std::uint64_t xs[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, ~0ull, ~0ull - 1};
    for (std::uint64_t x : xs) {
      CHECK(q.div(x) == x / d);
      CHECK(q.mod(x) == x % d);
    }
    for (int i = 0; i < 10000; ++i) {
      const std::uint64_t x = rng() >> (i % 64);
      REQUIRE(q.div(x) == x / d);
      REQUIRE(q.mod(x) == x % d);
    }
  }
  CHECK_THROWS_AS(divider(0), std::logic_error);
}
