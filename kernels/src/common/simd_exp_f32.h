/* simd_exp_f32.h — float32 exp, exp2 and expm1 over the vector macros of
 * simd_<isa>_f32.h: the exp family of the unary ops (unary_simd_impl.h,
 * where sigmoid, silu, tanh and gelu are built on them) and softmax's exp
 * (softmax_simd_impl.h).
 *
 * Cephes' expf: x = n ln 2 + r with ln 2 in two parts (n r-exact products
 * in the FMAs), |r| <= ln 2 / 2, e^r = 1 + r + r^2 p(r) with p of degree 5,
 * then the power of two applied by vldexp (AVX-512: one scalef; AVX2: two
 * integer-built factors), rounded once, so results down to the subnormals
 * are kept; about 1 ulp.
 *
 * Why it is shaped like this (it was ~2x slower per vector before):
 *   - n comes from one FMA against 1.5 * 2^23 (the sum's rounding is the
 *     round to nearest integer) instead of a multiply and a roundscale
 *     (2 uops on Intel) and a float-to-int convert;
 *   - the input is clamped to a range where vldexp itself overflows to inf
 *     or underflows to 0, so no compare/blend pairs fix the ends up
 *     afterwards; NaN passes the clamp (min/max return their second
 *     operand when either is NaN, and the constant is the first) and
 *     propagates through the arithmetic.
 * Special values: +inf above the float range, 0 for -inf and below it, NaN
 * stays NaN. */
#ifndef NK_SIMD_EXP_F32_H
#define NK_SIMD_EXP_F32_H

#include <math.h>

#define NK_EXP_ROUNDER 12582912.0f /* 1.5 * 2^23: x + it rounds x to an integer (|x| < 2^22) */

/* (e^r - 1 - r) / r^2 on |r| <= ln 2 / 2 (Cephes' expf coefficients) */
static inline VT vexp_poly(VT r) {
  VT p = VSET(1.9875691500E-4);
  p = VFMADD(p, r, VSET(1.3981999507E-3));
  p = VFMADD(p, r, VSET(8.3334519073E-3));
  p = VFMADD(p, r, VSET(4.1665795894E-2));
  p = VFMADD(p, r, VSET(1.6666665459E-1));
  return VFMADD(p, r, VSET(5.0000001201E-1));
}

/* x = fx ln 2 + r: fx the nearest integer to x / ln 2 (as float), r returned */
static inline VT vexp_reduce(VT x, VT *fx) {
  const VT rounder = VSET(NK_EXP_ROUNDER);
  *fx = VSUB(VFMADD(x, VSET(1.44269504088896341), rounder), rounder);
  VT r = VFNMADD(*fx, VSET(0.693359375), x);
  return VFNMADD(*fx, VSET(-2.12194440e-4), r);
}

/* e^x k for x in [-110, 100] (k in (0, 2]): e^r k = k + k (e^r - 1) is one
 * rounding (not e^r's and then the product's), and the factor goes in
 * before the power of two, so a subnormal result is rounded once */
static inline VT vexp_mul_inrange(VT x, VT k) {
  VT fx, r = vexp_reduce(x, &fx);
  VT em1 = VFMADD(vexp_poly(r), VMUL(r, r), r);
  return vldexp(VFMADD(k, em1, k), fx);
}

static inline VT vexp_inrange(VT x) {
  VT fx, r = vexp_reduce(x, &fx);
  return vldexp(VFMADD(vexp_poly(r), VMUL(r, r), VADD(r, VSET(1.0))), fx);
}

static inline VT vexp(VT x) {
  /* e^100 overflows and e^-110 underflows inside vldexp (n = 144, -159) */
  return vexp_inrange(VMIN(VSET(100.0f), VMAX(VSET(-110.0f), x)));
}

/* 2^x = 2^n e^(d ln 2), d = x - n exact; d ln 2 is rounded, and the
 * product's rounding error (with ln 2's own low part) is put back as
 * e^(r + rl) = e^r (1 + rl). */
static inline VT vexp2(VT x) {
  VT xc = VMIN(VSET(155.0f), VMAX(VSET(-155.0f), x));
  const VT rounder = VSET(NK_EXP_ROUNDER);
  VT n = VSUB(VADD(xc, rounder), rounder);
  VT d = VSUB(xc, n);
  const VT ln2 = VSET(0.693147180559945309), ln2_lo = VSET(-1.9046542999577e-09);
  VT r = VMUL(d, ln2);
  VT rl = VFMADD(d, ln2_lo, VFMSUB(d, ln2, r));
  VT y = VFMADD(vexp_poly(r), VMUL(r, r), VADD(r, VSET(1.0)));
  return vldexp(VFMADD(y, rl, y), n);
}

/* e^x - 1 for x <= 88 (NaN passes): e^x - 1 = 2^n (e^r - 1) + (2^n - 1),
 * one FMA; 2^n - 1 is exact for |n| <= 24 and beyond it the rounding is far
 * below the result's ulp.  -0 comes back as +0 (the caller fixes the sign
 * where it matters). */
/* 2^n for integral n (as float) in [-126, 127]: built from its exponent
 * bits, one factor (vldexp splits it in two for the subnormals). */
static inline VT vpow2_normal(VT n) { return ICAST_F(ISLLI(IADD(VCVT_I(n), ISET(127)), 23)); }

static inline VT vexpm1_core(VT x) {
  VT xc = VMIN(VSET(88.0f), VMAX(VSET(-30.0f), x)); /* n in [-43, 127] */
  VT fx, r = vexp_reduce(xc, &fx);
  VT em1r = VFMADD(vexp_poly(r), VMUL(r, r), r);
  VT s = vpow2_normal(fx);
  return VFMADD(s, em1r, VSUB(s, VSET(1.0)));
}

static inline VT vexpm1(VT x) {
  VT y = vexpm1_core(x);
  /* above 88, e^x - 1 is e^x to float precision (and overflows near 88.7) */
  const VMASK big = VCMP(x, VSET(88.0f), GT);
  if (VANY(big)) y = VSEL(big, vexp(x), y);
  return VOR(y, VAND(x, VSET(-0.0f))); /* the sign of x: -0 stays -0 */
}

#endif /* NK_SIMD_EXP_F32_H */
