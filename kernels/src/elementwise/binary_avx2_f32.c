/* binary_avx2_f32.c — float32, AVX2+FMA binary loops, 8 lanes, 4x unrolled.
 * Compiled with -mavx2 -mfma (kernels/CMakeLists.txt); called only when
 * nk_cpu_isa() allows it.  The loop itself is binary_simd_loop.h. */
#include "common/simd_avx2_f32.h"
#include "elementwise/binary_vec_op.h"
/* the one float32 op (binary_vec_op.h: a fixed operand order for NaN), on
 * every element: the row's unaligned head and its tail take it masked */
#define NK_VEC_OP nk_binop_vec
#define NK_TAIL_MASK(r) TAIL_MASK(r)
#define NK_TAIL_LOAD(p, m) TAIL_LOAD(p, m)
#define NK_TAIL_STORE(p, m, v) TAIL_STORE(p, m, v)
#define NK_VEC __m256
#define NK_SCALAR float
#define NK_LANES 8
#define NK_SET1(x) _mm256_set1_ps(x)
#define NK_LOADU(p) _mm256_loadu_ps(p)
#define NK_STOREU(p, v) _mm256_storeu_ps(p, v)
#define NK_STREAM(p, v) _mm256_stream_ps(p, v)
#define NK_ALPHA f32
#define NK_ENTRY nk_binary_avx2_f32
#include "elementwise/binary_simd_loop.h"
