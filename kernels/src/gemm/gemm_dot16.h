/* gemm_dot16.h — dot products of 16-bit float vectors (bfloat16 or float16
 * x and y, float32 sums) for matrix-vector products, once for every ISA
 * (included by gemm_dot16_<isa>_f32.c after their ISA headers).
 *
 * A 16-bit matrix times a vector (a linear layer at one token, LLM
 * decoding) is a pass over the matrix: these read it as it is, instead of
 * packing it for the micro-kernel, whose 32-column slivers held one real
 * column (a bfloat16 4096x4096 @ 4096 product ran at a quarter of torch
 * CPU's rate).  Each element widens exactly and the products accumulate
 * in float32 with FMA, in a fixed order (4 vector accumulators, then the
 * tail in order): the result is a function of n alone.
 *
 * Needs the ISA's simd_<isa>_f32.h (VT, LANES, VZERO, VFMADD, VADD,
 * vreduce_add), V_LOAD16(t, p) (LANES 16-bit values of dtype t widened:
 * half_simd_<isa>.h) and DOT16_NAME (suffixed _bf16 / _f16). */
#include <stdint.h>

#include "common/dtype_convert.h"

#define DOT16_GLUE2(a, b) a##b
#define DOT16_GLUE(a, b) DOT16_GLUE2(a, b)

/* t is a constant in each instantiation, so the load's dtype test folds */
static inline __attribute__((always_inline)) float dot16_body(nrt_dtype t, int64_t n,
                                                              const uint16_t *x,
                                                              const uint16_t *y) {
  VT s0 = VZERO(), s1 = VZERO(), s2 = VZERO(), s3 = VZERO();
  int64_t p = 0;
  for (; p + 4 * LANES <= n; p += 4 * LANES) {
    s0 = VFMADD(V_LOAD16(t, x + p), V_LOAD16(t, y + p), s0);
    s1 = VFMADD(V_LOAD16(t, x + p + LANES), V_LOAD16(t, y + p + LANES), s1);
    s2 = VFMADD(V_LOAD16(t, x + p + 2 * LANES), V_LOAD16(t, y + p + 2 * LANES), s2);
    s3 = VFMADD(V_LOAD16(t, x + p + 3 * LANES), V_LOAD16(t, y + p + 3 * LANES), s3);
  }
  for (; p + LANES <= n; p += LANES) s0 = VFMADD(V_LOAD16(t, x + p), V_LOAD16(t, y + p), s0);
  float s = vreduce_add(VADD(VADD(s0, s1), VADD(s2, s3)));
  for (; p < n; p++) s += nk_load_f32(t, x + p) * nk_load_f32(t, y + p);
  return s;
}

float DOT16_GLUE(DOT16_NAME, _bf16)(int64_t n, const uint16_t *x, const uint16_t *y) {
  return dot16_body(NRT_BFLOAT16, n, x, y);
}
float DOT16_GLUE(DOT16_NAME, _f16)(int64_t n, const uint16_t *x, const uint16_t *y) {
  return dot16_body(NRT_FLOAT16, n, x, y);
}
