/* binary_avx512_f64.c — float64, AVX-512F binary loops, 8 lanes, 4x unrolled.
 * Compiled with -mavx512f (kernels/CMakeLists.txt); called only when
 * nk_cpu_isa() allows it.  The loop itself is binary_simd_loop.h. */
#define NK_VEC __m512d
#define NK_SCALAR double
#define NK_LANES 8
#define NK_SET1(x) _mm512_set1_pd(x)
#define NK_LOADU(p) _mm512_loadu_pd(p)
#define NK_STOREU(p, v) _mm512_storeu_pd(p, v)
#define NK_STREAM(p, v) _mm512_stream_pd(p, v)
#define NK_ADD(a, b) _mm512_add_pd(a, b)
#define NK_MUL(a, b) _mm512_mul_pd(a, b)
#define NK_DIV(a, b) _mm512_div_pd(a, b)
#define NK_FMADD(a, b, c) _mm512_fmadd_pd(a, b, c)
#define NK_SCALAR_OP nk_binop_f64
#define NK_ALPHA f64
#define NK_ENTRY nk_binary_avx512_f64
#include "elementwise/binary_simd_loop.h"
