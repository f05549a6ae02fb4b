// The inner loops of functional mode's numerics (the engine's and the reference's), written so
// that the compiler vectorises them: fixed-width blocks over operands that do not alias. Each
// output element gets the same operations in the same order as in the plain loop (no sums are
// reassociated), so the results are those of the plain loop bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

// Functions whose loops these kernels are inlined into are also compiled for AVX2 (chosen at load
// time by the CPU): eight float lanes instead of four, the same operations per element (AVX2
// without FMA: a product and a sum stay two roundings), so the same results. Not under the
// sanitizers, which instrument one version.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
#define KELLE_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KELLE_AVX2_CLONES
#endif

namespace kelle::fn {

// o[n] += a x v[n] for n < N (v binary16 values as floats, or int8 weights).
template <typename T>
inline void axpy(float* __restrict o, const T* __restrict v, float a, std::size_t N) {
  constexpr std::size_t B = 8;
  std::size_t n = 0;
  for (; n + B <= N; n += B)
    for (std::size_t j = 0; j < B; ++j) o[n + j] += a * float(v[n + j]);
  for (; n < N; ++n) o[n] += a * float(v[n]);
}

// out[j] = sum over i < K of q[i] x rows[j][i] (summed in the order of i) for j < n: eight rows
// side by side, each with its own sum.
inline void dots(const float* __restrict q, const float* const* rows, std::size_t n, std::size_t K,
                 float* __restrict out) {
  constexpr std::size_t B = 8;
  std::size_t j = 0;
  for (; j + B <= n; j += B) {
    float acc[B] = {};
    for (std::size_t i = 0; i < K; ++i) {
      const float qi = q[i];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < B; ++r) acc[r] += qi * rows[j + r][i];
    }
    for (std::size_t r = 0; r < B; ++r) out[j + r] = acc[r];
  }
  for (; j < n; ++j) {
    float acc = 0;
    for (std::size_t i = 0; i < K; ++i) acc += q[i] * rows[j][i];
    out[j] = acc;
  }
}

// o[n] *= s[n] for n < N.
inline void scale(float* __restrict o, const float* __restrict s, std::size_t N) {
  constexpr std::size_t B = 8;
  std::size_t n = 0;
  for (; n + B <= N; n += B)
    for (std::size_t j = 0; j < B; ++j) o[n + j] *= s[n + j];
  for (; n < N; ++n) o[n] *= s[n];
}

}  // namespace kelle::fn
