/* gemm_avx512_f32.c — the avx512 float GEMM micro-kernel (12x32: 12 rows of 2
 * 16-lane accumulators, 24 registers) and matrix-vector helpers,
 * from the template in gemm_simd.h. */
#include <immintrin.h>

#define ET float
#define VT __m512
#define LANES 16
#define MR 12
#define NV 2
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ZERO() _mm512_setzero_ps()
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_REDUCE(v) _mm512_reduce_add_ps(v)
#define UKR_NAME nk_gemm_ukr_avx512_f32
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512_f32
#define DOT_NAME nk_gemm_dot_avx512_f32
#define AXPY_NAME nk_gemm_axpy_avx512_f32
#include "gemm_simd.h"
