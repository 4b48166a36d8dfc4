/* gemm_dot16_avx512_f32.c — 16-bit dot products, AVX-512F (gemm_dot16.h). */
#include <immintrin.h>

#define VT __m512
#define LANES 16
#define V_ZERO() _mm512_setzero_ps()
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_REDUCE(v) _mm512_reduce_add_ps(v)
/* bfloat16 is float32's high half: zero-extend to 32 bits, shift up */
#define V_LOAD_BF16(p)                                                                     \
  _mm512_castsi512_ps(                                                                     \
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define V_LOAD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define DOT16_NAME nk_gemm_dot16_avx512
#include "gemm/gemm_dot16.h"
