/* gemm_avx512_f64.c — the avx512 double GEMM micro-kernel (12x16: 12 rows of 2
 * 8-lane accumulators, 24 registers) and matrix-vector helpers,
 * from the template in gemm_simd.h. */
#include <immintrin.h>

#define ET double
#define VT __m512d
#define LANES 8
#define MR 12
#define NV 2
#define V_LOAD(p) _mm512_loadu_pd(p)
#define V_STORE(p, v) _mm512_storeu_pd(p, v)
#define V_SET1(x) _mm512_set1_pd(x)
#define V_ZERO() _mm512_setzero_pd()
#define V_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define V_MUL(a, b) _mm512_mul_pd(a, b)
#define V_ADD(a, b) _mm512_add_pd(a, b)
#define V_REDUCE(v) _mm512_reduce_add_pd(v)
#define UKR_NAME nk_gemm_ukr_avx512_f64
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512_f64
#define DOT_NAME nk_gemm_dot_avx512_f64
#define AXPY_NAME nk_gemm_axpy_avx512_f64
#include "gemm/gemm_simd.h"
