/* unary_avx512bf16_half.c — the unary 16-bit rows (unary_simd_impl.h's
 * UNARY_HALF_NAME) with AVX512_BF16's rounding store (half_simd_avx512.h). */
#include "common/simd_avx512_f32.h"
#define UNARY_HALF_NAME nk_unary_avx512bf16_half
#include "elementwise/unary_simd_impl.h"
