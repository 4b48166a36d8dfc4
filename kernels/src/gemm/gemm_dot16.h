/* gemm_dot16.h — dot products of 16-bit float vectors (bfloat16 or float16
 * x and y, float32 sums) for matrix-vector products, once for every ISA
 * (included by gemm_dot16_<isa>_f32.c, which define the vector macros).
 *
 * A 16-bit matrix times a vector (a linear layer at one token, LLM
 * decoding) is a pass over the matrix: these read it as it is, instead of
 * packing it for the micro-kernel, whose 32-column slivers held one real
 * column (a bfloat16 4096x4096 @ 4096 product ran at a quarter of torch
 * CPU's rate).  Each element widens exactly and the products accumulate
 * in float32 with FMA, in a fixed order (4 vector accumulators, then the
 * tail in order): the result is a function of n alone.
 *
 * Needs: VT, LANES, V_ZERO, V_FMA(a, b, c) = a * b + c, V_ADD, V_REDUCE,
 * V_LOAD_BF16(p) and V_LOAD_F16(p) (LANES 16-bit values widened), and
 * DOT16_NAME (suffixed _bf16 / _f16). */
#include <stdint.h>

#include "common/dtype_convert.h"

#define DOT16_GLUE2(a, b) a##b
#define DOT16_GLUE(a, b) DOT16_GLUE2(a, b)

#define DOT16_BODY(SUFFIX, LOAD, SCALAR)                                                   \
  float DOT16_GLUE(DOT16_NAME, SUFFIX)(int64_t n, const uint16_t *x, const uint16_t *y) { \
    VT s0 = V_ZERO(), s1 = V_ZERO(), s2 = V_ZERO(), s3 = V_ZERO();                        \
    int64_t p = 0;                                                                        \
    for (; p + 4 * LANES <= n; p += 4 * LANES) {                                          \
      s0 = V_FMA(LOAD(x + p), LOAD(y + p), s0);                                           \
      s1 = V_FMA(LOAD(x + p + LANES), LOAD(y + p + LANES), s1);                           \
      s2 = V_FMA(LOAD(x + p + 2 * LANES), LOAD(y + p + 2 * LANES), s2);                   \
      s3 = V_FMA(LOAD(x + p + 3 * LANES), LOAD(y + p + 3 * LANES), s3);                   \
    }                                                                                     \
    for (; p + LANES <= n; p += LANES) s0 = V_FMA(LOAD(x + p), LOAD(y + p), s0);          \
    float s = V_REDUCE(V_ADD(V_ADD(s0, s1), V_ADD(s2, s3)));                              \
    for (; p < n; p++) s += SCALAR(x[p]) * SCALAR(y[p]);                                  \
    return s;                                                                             \
  }

DOT16_BODY(_bf16, V_LOAD_BF16, nk_bf16_to_f32)
DOT16_BODY(_f16, V_LOAD_F16, nk_f16_to_f32)
