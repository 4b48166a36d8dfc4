/* binary_avx512_half.c — the fused 16-bit binary rows under AVX-512F's
 * flags (binary_half_avx512_impl.h). */
#define BH_NAME nk_binary_avx512_half
#include "elementwise/binary_half_avx512_impl.h"
