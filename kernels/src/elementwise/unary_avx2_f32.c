/* unary_avx2_f32.c — the unary vector bodies (unary_simd_impl.h) with
 * AVX2+FMA: 8 lanes, masks as vectors. */
#include "common/simd_avx2_f32.h"
#define UNARY_NAME nk_unary_avx2_f32
#define UNARY_BW_NAME nk_unary_bw_avx2_f32
#include "elementwise/unary_simd_impl.h"
