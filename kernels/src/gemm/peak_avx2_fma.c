/* peak_avx2_fma.c — the avx2 FMA peak probe (see gemm.h): 10 independent
 * accumulator chains (enough to cover the FMA latency on two pipes), no
 * memory traffic.  The result is folded into a volatile sink so the
 * compiler keeps every FMA. */
#include <immintrin.h>

#include "gemm/gemm.h"

#define NACC 10

int64_t nk_peak_fma_avx2(int64_t iters, int f64) {
  volatile double sink = 0;
  if (!f64) {
    __m256 acc[NACC], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < NACC; i++) acc[i] = _mm256_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 16
      for (int i = 0; i < NACC; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    for (int i = 1; i < NACC; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    float out[8];
    _mm256_storeu_ps(out, acc[0]);
    sink = out[0];
    return iters * NACC * 8 * 2;
  }
  __m256d acc[NACC], x = _mm256_set1_pd(0.999999), y = _mm256_set1_pd(1e-7);
  for (int i = 0; i < NACC; i++) acc[i] = _mm256_set1_pd((double)i);
  for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 16
    for (int i = 0; i < NACC; i++) acc[i] = _mm256_fmadd_pd(acc[i], x, y);
  for (int i = 1; i < NACC; i++) acc[0] = _mm256_add_pd(acc[0], acc[i]);
  double out[8 / 2];
  _mm256_storeu_pd(out, acc[0]);
  sink = out[0];
  (void)sink;
  return iters * NACC * (8 / 2) * 2;
}
