/* gemm_avx512_f32_m8.c — the avx512 float GEMM micro-kernel with 8 rows
 * (8x32: 8 rows of 2 16-lane accumulators), for products with few rows:
 * 16 or 32 output rows (a convolution with 16 or 32 output channels, its
 * input gradient with as many input channels) would run as 24 or 36 rows
 * on the 12-row kernel, a third of its multiply-adds wasted on padding.
 * gemm.c picks it where it pads less (pick_arch). */
#include <immintrin.h>

#define ET float
#define VT __m512
#define LANES 16
#define MR 8
#define NV 2
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ZERO() _mm512_setzero_ps()
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_REDUCE(v) _mm512_reduce_add_ps(v)
#define UKR_NAME nk_gemm_ukr_avx512_f32_m8
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512_f32_m8
#include "gemm_simd.h"
