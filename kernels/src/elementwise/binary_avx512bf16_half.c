/* binary_avx512bf16_half.c — the fused 16-bit binary rows with AVX512_BF16's
 * rounding store (binary_half_avx512_impl.h, half_simd_avx512.h). */
#define BH_NAME nk_binary_avx512bf16_half
#include "elementwise/binary_half_avx512_impl.h"
