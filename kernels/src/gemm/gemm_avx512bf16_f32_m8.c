/* gemm_avx512bf16_f32_m8.c — the bfloat16 dot-product micro-kernel with 8
 * rows (8x32), for products with 16 or 32 rows (a convolution with few
 * output channels), which the 12-row kernel pads to 24 or 36; gemm.c picks
 * it where it pads less, as for float32 (pick_arch). */
#include "gemm/gemm_avx512bf16_f32_vec.h"

#define MR 8
#define UKR_NAME nk_gemm_ukr_avx512bf16_f32_m8
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512bf16_f32_m8
#include "gemm/gemm_simd.h"
