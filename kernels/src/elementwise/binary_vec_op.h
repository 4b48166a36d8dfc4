/* binary_vec_op.h — a float32 binary op on vectors, written once over the
 * vector macros of the including file's ISA (common/simd_<isa>_f32.h):
 * the 16-bit rows (binary_half_avx512_impl.h) and adaptive eager's compiled
 * groups (fusion/jit_prelude.h) compute with it; binary_ops.h's scalar op
 * gives the same bits (each is one correctly rounded operation, AXPY one
 * fused multiply-add). */
#ifndef NK_BINARY_VEC_OP_H
#define NK_BINARY_VEC_OP_H

#include "elementwise/binary_ops.h"

static inline VT nk_binop_vec(nk_binop k, VT a, VT b, VT alpha) {
  switch (k) {
  case NK_BINOP_ADD: return VADD(a, b);
  case NK_BINOP_AXPY: return VFMADD(alpha, b, a);
  case NK_BINOP_MUL: return VMUL(a, b);
  default: return VDIV(a, b);
  }
}

#endif /* NK_BINARY_VEC_OP_H */
