/* gemm_avx2_f64.c — the avx2 double GEMM micro-kernel (6x8: 6 rows of 2
 * 4-lane accumulators, 12 registers) and matrix-vector helpers,
 * from the template in gemm_simd.h. */
#include <immintrin.h>

static inline float nk_hsum256_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}
static inline double nk_hsum256_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

#define ET double
#define VT __m256d
#define LANES 4
#define MR 6
#define NV 2
#define V_LOAD(p) _mm256_loadu_pd(p)
#define V_STORE(p, v) _mm256_storeu_pd(p, v)
#define V_SET1(x) _mm256_set1_pd(x)
#define V_ZERO() _mm256_setzero_pd()
#define V_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define V_MUL(a, b) _mm256_mul_pd(a, b)
#define V_ADD(a, b) _mm256_add_pd(a, b)
#define V_REDUCE(v) nk_hsum256_pd(v)
#define UKR_NAME nk_gemm_ukr_avx2_f64
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx2_f64
#define DOT_NAME nk_gemm_dot_avx2_f64
#define AXPY_NAME nk_gemm_axpy_avx2_f64
#include "gemm/gemm_simd.h"
