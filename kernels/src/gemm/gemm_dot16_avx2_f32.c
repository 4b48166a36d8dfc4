/* gemm_dot16_avx2_f32.c — 16-bit dot products, AVX2+FMA+F16C (gemm_dot16.h). */
#include <immintrin.h>

static inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#define VT __m256
#define LANES 8
#define V_ZERO() _mm256_setzero_ps()
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_REDUCE(v) hsum256(v)
#define V_LOAD_BF16(p)                                                                     \
  _mm256_castsi256_ps(                                                                     \
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define V_LOAD_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define DOT16_NAME nk_gemm_dot16_avx2
#include "gemm/gemm_dot16.h"
