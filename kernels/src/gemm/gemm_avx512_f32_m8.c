/* gemm_avx512_f32_m8.c — the avx512 float GEMM micro-kernel with 8 rows
 * (8x32: 8 rows of 2 16-lane accumulators), for products with few rows:
 * 16 or 32 output rows (a convolution with 16 or 32 output channels, its
 * input gradient with as many input channels) would run as 24 or 36 rows
 * on the 12-row kernel, a third of its multiply-adds wasted on padding.
 * gemm.c picks it where it pads less (pick_arch). */
#include "gemm/gemm_avx512_f32_vec.h"

#define MR 8
#define UKR_NAME nk_gemm_ukr_avx512_f32_m8
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512_f32_m8
#include "gemm/gemm_simd.h"
