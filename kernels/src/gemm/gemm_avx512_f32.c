/* gemm_avx512_f32.c — the avx512 float GEMM micro-kernel (12x32: 12 rows of 2
 * 16-lane accumulators, 24 registers) and matrix-vector helpers,
 * from the template in gemm_simd.h. */
#include "gemm/gemm_avx512_f32_vec.h"

#define MR 12
#define UKR_NAME nk_gemm_ukr_avx512_f32
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512_f32
#define DOT_NAME nk_gemm_dot_avx512_f32
#define AXPY_NAME nk_gemm_axpy_avx512_f32
#include "gemm/gemm_simd.h"
