/* binary_vec_op.h — a float32 binary op on vectors, written once over the
 * vector macros of the including file's ISA (common/simd_<isa>_f32.h):
 * the float32 rows (binary_<isa>_f32.c), the 16-bit rows
 * (binary_half_avx512_impl.h) and adaptive eager's compiled groups
 * (fusion/jit_prelude.h) compute with it.
 *
 * One operand order, fixed in assembly.  Where both operands are NaN, x86
 * returns the first source's NaN (its sign and payload), and a compiler may
 * swap the operands of an add or a multiply (they commute), separately at
 * each place the op is inlined: the kernels' loops and a compiled group's
 * code disagreed on which NaN `sigmoid(x) * x` returns for x = NaN.  Here a
 * is always the first source (b the multiplied operand of AXPY's alpha * b
 * + a); a division keeps its order anyway. */
#ifndef NK_BINARY_VEC_OP_H
#define NK_BINARY_VEC_OP_H

#include "elementwise/binary_ops.h"

#if LANES == 16
#define NK_VREG "v" /* any of zmm0-31 */
#else
#define NK_VREG "x" /* ymm0-15 */
#endif

static inline VT nk_vadd_ordered(VT a, VT b) {
  VT r;
  __asm__("vaddps %2, %1, %0" : "=" NK_VREG(r) : NK_VREG(a), NK_VREG(b));
  return r;
}

static inline VT nk_vmul_ordered(VT a, VT b) {
  VT r;
  __asm__("vmulps %2, %1, %0" : "=" NK_VREG(r) : NK_VREG(a), NK_VREG(b));
  return r;
}

/* alpha * b + a, one rounding */
static inline VT nk_vaxpy_ordered(VT alpha, VT b, VT a) {
  __asm__("vfmadd231ps %2, %1, %0" : "+" NK_VREG(a) : NK_VREG(alpha), NK_VREG(b));
  return a;
}

static inline VT nk_binop_vec(nk_binop k, VT a, VT b, VT alpha) {
  switch (k) {
  case NK_BINOP_ADD: return nk_vadd_ordered(a, b);
  case NK_BINOP_AXPY: return nk_vaxpy_ordered(alpha, b, a);
  case NK_BINOP_MUL: return nk_vmul_ordered(a, b);
  default: return VDIV(a, b);
  }
}

#endif /* NK_BINARY_VEC_OP_H */
