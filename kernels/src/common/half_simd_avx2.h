/* half_simd_avx2.h — 8 float16/bfloat16 values widened exactly to a float32
 * AVX2 vector (F16C for float16): half_simd_avx512.h's load, 8 lanes.
 * Include from an *_avx2_* file only (its flags). */
#ifndef NK_HALF_SIMD_AVX2_H
#define NK_HALF_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "neuron_runtime.h"

static inline __m256 nk_h16_load_avx2(nrt_dtype t, const uint16_t *h) {
  const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)h);
  if (t == NRT_BFLOAT16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  return _mm256_cvtph_ps(raw);
}

#endif /* NK_HALF_SIMD_AVX2_H */
