/* gemm_dot16_avx2_f32.c — 16-bit dot products, AVX2+FMA+F16C (gemm_dot16.h). */
#include "common/half_simd_avx2.h"
#include "common/simd_avx2_f32.h"

#define V_LOAD16 nk_h16_load_avx2
#define DOT16_NAME nk_gemm_dot16_avx2
#include "gemm/gemm_dot16.h"
