/* unary_vec_body.h — the float32 vector body of each unary op that has
 * one (NK_UNARY_VEC_OPS), written once over the vector macros of the
 * including file's ISA (common/simd_<isa>_f32.h).  Used by the unary rows
 * (unary_simd_impl.h) and by adaptive eager's compiled groups
 * (fusion/jit_prelude.h), so a fused op computes with this very code.  The
 * formulas are described in unary_simd_impl.h. */
#ifndef NK_UNARY_VEC_BODY_H
#define NK_UNARY_VEC_BODY_H

#include "common/simd_act_f32.h"
#include "common/simd_erf_f32.h"
#include "common/simd_exp_f32.h"
#include "common/simd_log_f32.h"
#include "common/simd_trig_f32.h"
#include "elementwise/unary_simd.h"

static inline VT nk_unary_vec_body(nk_unary_op op, VT x) {
  switch (op) {
  case NK_UNARY_EXP: return vexp(x);
  case NK_UNARY_EXP2: return vexp2(x);
  case NK_UNARY_EXPM1: return vexpm1(x);
  case NK_UNARY_LOG: return vlog(x);
  case NK_UNARY_LOG2: return vlog2(x);
  case NK_UNARY_LOG10: return vlog10(x);
  case NK_UNARY_LOG1P: return vlog1p(x);
  case NK_UNARY_ERF: return verf(x);
  case NK_UNARY_ERFC: return verfc(x);
  case NK_UNARY_SIN: return vsin(x);
  case NK_UNARY_COS: return vcos(x);
  case NK_UNARY_ATAN: return vatan(x);
  case NK_UNARY_SIGMOID: return vsigmoid(x);
  case NK_UNARY_SILU: return vdiv_fast(x, VADD(VSET(1.0), vexp(VXOR(x, VSET(-0.0f)))));
  case NK_UNARY_TANH: return vtanh(x);
  case NK_UNARY_GELU: return VMUL(VMUL(x, VSET(0.5)), one_plus_erf(x));
  case NK_UNARY_GELU_TANH: {
    VT x3 = VMUL(VMUL(x, x), x);
    VT u = VMUL(VSET(0.7978845608028654), VFMADD(VSET(0.044715), x3, x));
    return vdiv_fast(x, VADD(VSET(1.0), vexp(VMUL(u, VSET(-2.0)))));
  }
  case NK_UNARY_RELU:
    return VSEL(VCMP(x, VZERO(), LT), VZERO(), x);
  case NK_UNARY_LOG_SIGMOID: /* min(x, 0) - log1p(exp(-|x|)), the scalar form */
    return VSUB(VSEL(VCMP(x, VZERO(), LT), x, VZERO()), vlog1p(vexp(VXOR(vabs(x), VSET(-0.0f)))));
  case NK_UNARY_ABS: return vabs(x);
  /* correctly rounded, as sqrtf and 1.0f / x are: the same bits */
  case NK_UNARY_SQRT: return VSQRT(x);
  case NK_UNARY_RSQRT: return VDIV(VSET(1.0), VSQRT(x));
  case NK_UNARY_RECIPROCAL: return VDIV(VSET(1.0), x);
  default: return VXOR(x, VSET(-0.0f)); /* NEG */
  }
}

#endif /* NK_UNARY_VEC_BODY_H */
