/* pointwise_simd.h — vector bodies of the pointwise kernel's float32 rows
 * (pointwise_simd_impl.h, built per ISA): addcmul and addcdiv, the
 * optimizers' per-parameter updates, and lerp (c the weights, or v for
 * NK_PW_LERP_SCALAR, c then unused).
 *
 * A body takes contiguous float32 rows (out may be any of the inputs) and
 * returns false, touching nothing, for an op it does not have.  It computes
 * a + (v * b) * c and a + (v * b) / c lane by lane in that order, with no
 * FMA (the build is ISO C: -ffp-contract=off), so its bits are those of the
 * scalar loop (pointwise.c's addc_rows); lerp with the fma the scalar form
 * calls. */
#ifndef NK_POINTWISE_SIMD_H
#define NK_POINTWISE_SIMD_H

#include <stdbool.h>
#include <stdint.h>

#include "neuron_kernels.h"

typedef bool (*nk_pointwise_vec_fn)(nk_pointwise_op op, int64_t n, float *out, const float *a,
                                    const float *b, const float *c, float v);

bool nk_pointwise_avx2_f32(nk_pointwise_op op, int64_t n, float *out, const float *a,
                           const float *b, const float *c, float v);
bool nk_pointwise_avx512_f32(nk_pointwise_op op, int64_t n, float *out, const float *a,
                             const float *b, const float *c, float v);

/* the body for this CPU (NULL: portable C only) */
static inline nk_pointwise_vec_fn nk_pointwise_pick_vec(void) {
  const nk_isa isa = nk_cpu_isa();
  return isa == NK_ISA_AVX512 ? nk_pointwise_avx512_f32
         : isa == NK_ISA_AVX2 ? nk_pointwise_avx2_f32
                              : NULL;
}

#endif /* NK_POINTWISE_SIMD_H */
