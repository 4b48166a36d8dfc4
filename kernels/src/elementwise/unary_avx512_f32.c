/* unary_avx512_f32.c — the unary vector bodies (unary_simd_impl.h) with
 * AVX-512F: 16 lanes, compare masks in k registers. */
#include "common/simd_avx512_f32.h"
#define UNARY_NAME nk_unary_avx512_f32
#define UNARY_BW_NAME nk_unary_bw_avx512_f32
#define UNARY_HALF_NAME nk_unary_avx512_half
#include "elementwise/unary_simd_impl.h"
