/* gemm_dot16_avx512_f32.c — 16-bit dot products, AVX-512F (gemm_dot16.h). */
#include "common/half_simd_avx512.h"
#include "common/simd_avx512_f32.h"

#define V_LOAD16 nk_h16_load_avx512
#define DOT16_NAME nk_gemm_dot16_avx512
#include "gemm/gemm_dot16.h"
