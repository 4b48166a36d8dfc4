/* simd_exp_f32.h — float32 exp over the vector macros of simd_<isa>_f32.h,
 * the one vector exp of the unary ops (unary_simd_impl.h) and softmax
 * (softmax_simd_impl.h).
 *
 * Cephes' expf: range reduction by ln 2 in two parts, a degree-5
 * polynomial, the power of two applied in two halves so that results down
 * to the subnormals are kept; about 1 ulp.  +inf above the float range, 0
 * below it (and for -inf), NaN stays NaN. */
#ifndef NK_SIMD_EXP_F32_H
#define NK_SIMD_EXP_F32_H

#include <math.h>

static inline VT vexp(VT x) {
  const VT hi = VSET(88.72283935546875), lo = VSET(-103.97208404541016);
  VT xc = VMIN(VMAX(x, lo), hi);
  VT fx = VROUND_NEAREST(VMUL(xc, VSET(1.44269504088896341)));
  VT r = VFNMADD(fx, VSET(0.693359375), xc);
  r = VFNMADD(fx, VSET(-2.12194440e-4), r);
  VT p = VSET(1.9875691500E-4);
  p = VFMADD(p, r, VSET(1.3981999507E-3));
  p = VFMADD(p, r, VSET(8.3334519073E-3));
  p = VFMADD(p, r, VSET(4.1665795894E-2));
  p = VFMADD(p, r, VSET(1.6666665459E-1));
  p = VFMADD(p, r, VSET(5.0000001201E-1));
  VT y = VFMADD(p, VMUL(r, r), VADD(r, VSET(1.0)));
  /* 2^n in two factors: n in [-150, 128] keeps both in the normal range */
  VI n = VCVT_I(fx);
  VI n1 = ISRAI1(n), n2 = ISUB(n, n1);
  VT s1 = ICAST_F(ISLLI(IADD(n1, ISET(127)), 23));
  VT s2 = ICAST_F(ISLLI(IADD(n2, ISET(127)), 23));
  y = VMUL(VMUL(y, s1), s2);
  y = VSEL(VCMP(x, hi, GT), VSET(INFINITY), y);
  y = VSEL(VCMP(x, lo, LT), VZERO(), y);
  return VSEL(VCMP(x, x, UNORD), x, y); /* NaN stays */
}

#endif /* NK_SIMD_EXP_F32_H */
