/* binary_avx2_f64.c — float64, AVX2+FMA binary loops, 4 lanes, 4x unrolled.
 * Compiled with -mavx2 -mfma (kernels/CMakeLists.txt); called only when
 * nk_cpu_isa() allows it.  The loop itself is binary_simd_loop.h. */
#define NK_VEC __m256d
#define NK_SCALAR double
#define NK_LANES 4
#define NK_SET1(x) _mm256_set1_pd(x)
#define NK_LOADU(p) _mm256_loadu_pd(p)
#define NK_STOREU(p, v) _mm256_storeu_pd(p, v)
#define NK_STREAM(p, v) _mm256_stream_pd(p, v)
#define NK_ADD(a, b) _mm256_add_pd(a, b)
#define NK_MUL(a, b) _mm256_mul_pd(a, b)
#define NK_DIV(a, b) _mm256_div_pd(a, b)
#define NK_FMADD(a, b, c) _mm256_fmadd_pd(a, b, c)
#define NK_SCALAR_OP nk_binop_f64
#define NK_ALPHA f64
#define NK_ENTRY nk_binary_avx2_f64
#include "elementwise/binary_simd_loop.h"
