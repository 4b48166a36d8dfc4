/* gemm_avx512_f32_6x32.c — the AVX-512F float32 micro-kernel (see gemm.h):
 * 12 accumulators of 16 lanes, two B vectors, one A broadcast. */
#include <immintrin.h>

#include "gemm.h"

enum { MR = 6, NR = 32 };

void nk_gemm_avx512_f32_6x32(int64_t kc, const void *ap, const void *bp, void *cp, int64_t ldc) {
  const float *a = ap, *b = bp;
  float *c = cp;
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; p++, a += MR, b += NR) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
    for (int i = 0; i < MR; i++) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; i++) {
    float *row = c + i * ldc;
    _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]));
    _mm512_storeu_ps(row + 16, _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]));
  }
}
