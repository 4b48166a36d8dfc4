/* pointwise_vec_op.h — addcmul and addcdiv on float32 vectors, written once
 * over the vector macros of the including file's ISA: the pointwise rows
 * (pointwise_simd_impl.h) and adaptive eager's compiled groups
 * (fusion/jit_prelude.h).  a + (v * b) * c and a + (v * b) / c in that
 * order, no FMA, the add and multiplies in binary_vec_op.h's fixed operand
 * order (which NaN comes back where two meet). */
#ifndef NK_POINTWISE_VEC_OP_H
#define NK_POINTWISE_VEC_OP_H

#include "elementwise/binary_vec_op.h"
#include "neuron_kernels.h"

static inline VT nk_pw_addc_vec(nk_pointwise_op op, VT a, VT b, VT c, VT v) {
  const VT vb = nk_vmul_ordered(v, b);
  return nk_vadd_ordered(a, op == NK_PW_ADDCMUL ? nk_vmul_ordered(vb, c) : VDIV(vb, c));
}

#endif /* NK_POINTWISE_VEC_OP_H */
