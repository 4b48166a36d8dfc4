/* gemm_avx2_f32_6x16.c — the AVX2+FMA float32 micro-kernel (see gemm.h). */
#include <immintrin.h>

#include "gemm.h"

enum { MR = 6, NR = 16 };

void nk_gemm_avx2_f32_6x16(int64_t kc, const void *ap, const void *bp, void *cp, int64_t ldc) {
  const float *a = ap, *b = bp;
  float *c = cp;
  __m256 acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; p++, a += MR, b += NR) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    for (int i = 0; i < MR; i++) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; i++) {
    float *row = c + i * ldc;
    _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[i][0]));
    _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[i][1]));
  }
}
