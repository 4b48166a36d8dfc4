/* gemm_avx512bf16_f32_vec.h — the AVX512_BF16 pair kernel's vector macros
 * for gemm_simd.h, shared by the 12-row (gemm_avx512bf16_f32.c) and 8-row
 * (_m8) kernels. */
#include <immintrin.h>

#define ET float
#define VT __m512
#define LANES 16
#define NV 2
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_SET1(x) _mm512_set1_ps(x) /* broadcasts the pair's 32 bits */
#define V_ZERO() _mm512_setzero_ps()
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_KSTEP(a, b, acc) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_REDUCE(v) _mm512_reduce_add_ps(v)
