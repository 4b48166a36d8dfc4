/* simd_act_f32.h — the float32 activations built on exp, over the vector
 * macros of simd_<isa>_f32.h: tanh, sigmoid and 1 + erf(x / sqrt 2) (the
 * exact gelu's), and |x|.  The unary ops' vector bodies use them
 * (elementwise/unary_simd_impl.h, which says how each is built), and so
 * does the C++ of torch.compile's kernels on neuron
 * (torch_neuronx/_inductor/vec_math.py), so an op computes the same bits
 * eager and compiled. */
#ifndef NK_SIMD_ACT_F32_H
#define NK_SIMD_ACT_F32_H

#include "common/simd_exp_f32.h"

static inline VT vabs(VT x) { return VANDNOT(VSET(-0.0f), x); }

/* e^z for z in [0, 18.25] (or NaN): vexp's bits there, the power of two
 * applied as one factor -- exact, as vldexp's two are, since no result is
 * subnormal or overflows -- and no clamp below. */
static inline VT vexp_tanh_range(VT z) {
  VT fx, r = vexp_reduce(z, &fx);
  VT e = VFMADD(vexp_poly(r), VMUL(r, r), VADD(r, VSET(1.0)));
  return VMUL(e, vpow2_normal(fx));
}

static inline VT vtanh(VT x) {
  VT ax = vabs(x);
  /* |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1).  Above 2|x| = 18.25 that is 1
   * (2 / (e + 1) < 2^-25), so the exponent is clamped there (NaN passes:
   * min returns its second operand): the same bits as vexp for every
   * float (checked exhaustively at AVX2), 0.90 -> 0.74 ns per element on a
   * Zen 3 core. */
  VT e = vexp_tanh_range(VMIN(VSET(18.25f), VADD(ax, ax)));
  VT big = VSUB(VSET(1.0), vdiv_fast(VSET(2.0), VADD(e, VSET(1.0))));
  /* |x| < 0.625: Cephes' odd polynomial */
  VT z = VMUL(ax, ax);
  VT p = VSET(-5.70498872745E-3);
  p = VFMADD(p, z, VSET(2.06390887954E-2));
  p = VFMADD(p, z, VSET(-5.37397155531E-2));
  p = VFMADD(p, z, VSET(1.33314422036E-1));
  p = VFMADD(p, z, VSET(-3.33332819422E-1));
  VT small = VFMADD(VMUL(p, z), ax, ax);
  VT r = VSEL(VCMP(ax, VSET(0.625), LT), small, big); /* NaN: big, NaN */
  return VOR(r, VAND(x, VSET(-0.0f)));
}

/* 1 + erf(x / sqrt 2) */
static inline VT one_plus_erf(VT x) {
  VT z = vabs(VMUL(x, VSET(0.70710678118654752440)));
  VT t = vdiv_fast(VSET(1.0), VFMADD(VSET(0.5), z, VSET(1.0)));
  VT p = VSET(0.17087277);
  p = VFMADD(p, t, VSET(-0.82215223));
  p = VFMADD(p, t, VSET(1.48851587));
  p = VFMADD(p, t, VSET(-1.13520398));
  p = VFMADD(p, t, VSET(0.27886807));
  p = VFMADD(p, t, VSET(-0.18628806));
  p = VFMADD(p, t, VSET(0.09678418));
  p = VFMADD(p, t, VSET(0.37409196));
  p = VFMADD(p, t, VSET(1.00002368));
  p = VFMADD(p, t, VSET(-1.26551223));
  VT erfc = VMUL(t, vexp(VFNMADD(z, z, p))); /* erfc(|z|) */
  return VSEL(VCMP(x, VZERO(), LT), erfc, VSUB(VSET(2.0), erfc));
}

/* 1 / (1 + exp(-x)), ATen's float formula (it saturates where ATen's does) */
static inline VT vsigmoid(VT x) {
  return vdiv_fast(VSET(1.0), VADD(VSET(1.0), vexp(VXOR(x, VSET(-0.0f)))));
}

#endif /* NK_SIMD_ACT_F32_H */
