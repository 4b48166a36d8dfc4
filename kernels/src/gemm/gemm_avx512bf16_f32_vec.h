/* gemm_avx512bf16_f32_vec.h — the AVX512_BF16 pair kernel's vector macros
 * for gemm_simd.h, shared by the 12-row (gemm_avx512bf16_f32.c) and 8-row
 * (_m8) kernels: the float32 kernel's (float32 accumulators and C), with
 * the k step a VDPBF16PS on the broadcast pair's 32 bits. */
#include "gemm/gemm_avx512_f32_vec.h"

#define V_KSTEP(a, b, acc) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))
