/* unary_simd.h — the vectorised float32 loops of the unary kernel.
 *
 * A vector loop takes one contiguous float32 row (out and x may be the same
 * memory) and returns false, touching nothing, when the op has no vector
 * body; the scalar loop then runs it.  The vector bodies compute what the
 * scalar code does to within the float32 tolerances (a polynomial exp/tanh,
 * rational erf) and are checked against it in the tests. */
#ifndef NK_UNARY_SIMD_H
#define NK_UNARY_SIMD_H

#include <stdbool.h>
#include <stdint.h>

#include "neuron_kernels.h"
#include "elementwise/unary_ops.h"

/* the ops with a vector body (unary_vec_body.h) */
#define NK_UNARY_VEC_OPS(X)                                                                        \
  X(NK_UNARY_EXP) X(NK_UNARY_EXP2) X(NK_UNARY_EXPM1) X(NK_UNARY_LOG) X(NK_UNARY_LOG2)              \
  X(NK_UNARY_LOG10) X(NK_UNARY_LOG1P) X(NK_UNARY_ERF) X(NK_UNARY_ERFC) X(NK_UNARY_SIN)             \
  X(NK_UNARY_COS) X(NK_UNARY_ATAN) X(NK_UNARY_SIGMOID) X(NK_UNARY_SILU) X(NK_UNARY_TANH)           \
  X(NK_UNARY_GELU) X(NK_UNARY_GELU_TANH) X(NK_UNARY_RELU) X(NK_UNARY_ABS) X(NK_UNARY_NEG)          \
  X(NK_UNARY_SQRT) X(NK_UNARY_RSQRT) X(NK_UNARY_RECIPROCAL) X(NK_UNARY_LOG_SIGMOID)

typedef bool (*nk_unary_vec_fn)(nk_unary_op op, int64_t n, float *out, const float *x,
                                const nk_uprm *p);

bool nk_unary_avx2_f32(nk_unary_op op, int64_t n, float *out, const float *x, const nk_uprm *p);
bool nk_unary_avx512_f32(nk_unary_op op, int64_t n, float *out, const float *x, const nk_uprm *p);

/* the backward kernel's: out <- op(a, b), all contiguous float32 */
typedef bool (*nk_unary_bw_vec_fn)(nk_unary_backward_op op, int64_t n, float *out, const float *a,
                                   const float *b, const nk_uprm *p);
bool nk_unary_bw_avx2_f32(nk_unary_backward_op op, int64_t n, float *out, const float *a,
                          const float *b, const nk_uprm *p);
bool nk_unary_bw_avx512_f32(nk_unary_backward_op op, int64_t n, float *out, const float *a,
                            const float *b, const nk_uprm *p);

/* float16/bfloat16 rows, out and x contiguous in dtype t (AVX-512 only):
 * widened, computed and rounded in registers, the bits of the float32 loop
 * run on widened chunks; false when the op has no vector body. */
typedef bool (*nk_unary_half_fn)(nk_unary_op op, nrt_dtype t, int64_t n, void *out, const void *x);
bool nk_unary_avx512_half(nk_unary_op op, nrt_dtype t, int64_t n, void *out, const void *x);
bool nk_unary_avx512bf16_half(nk_unary_op op, nrt_dtype t, int64_t n, void *out, const void *x);

static inline nk_unary_half_fn nk_unary_pick_half(void) {
  static const nk_unary_half_fn half[NK_VARIANTS] = {NULL, NULL, nk_unary_avx512_half,
                                                     nk_unary_avx512bf16_half};
  return half[nk_cpu_variant()];
}

/* the loop for this CPU (NULL: portable C only) */
static inline nk_unary_vec_fn nk_unary_pick_vec(void) {
  const nk_isa isa = nk_cpu_isa();
  return isa == NK_ISA_AVX512 ? nk_unary_avx512_f32 : isa == NK_ISA_AVX2 ? nk_unary_avx2_f32 : NULL;
}

static inline nk_unary_bw_vec_fn nk_unary_bw_pick_vec(void) {
  const nk_isa isa = nk_cpu_isa();
  return isa == NK_ISA_AVX512 ? nk_unary_bw_avx512_f32 : isa == NK_ISA_AVX2 ? nk_unary_bw_avx2_f32 : NULL;
}

#endif /* NK_UNARY_SIMD_H */
