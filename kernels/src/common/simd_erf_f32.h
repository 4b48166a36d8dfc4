/* simd_erf_f32.h — float32 erf and erfc over the vector macros of
 * simd_<isa>_f32.h (the unary ops' bodies, unary_simd_impl.h).
 *
 * Fits made for these (weighted least squares on Chebyshev nodes, iterated
 * toward minimax, in double):
 *   |x| < 1:   erf(x) = x + x P(x^2), P of degree 6 (error 1.2e-9);
 *   erf, 1 <= |x| < 4: erfc(a) = e^Q(a - 1), Q of degree 7 fitted to
 *              log erfc on [1, 4] (erfc's absolute error 2e-11: erf only
 *              needs erfc to ~2^-25 absolute there), erf = 1 - erfc; Q's
 *              rounding grows with a, but erfc shrinks faster;
 *              beyond 4 (3.92 already) erf rounds to +-1;
 *   erfc, a = |x| >= 1/2: erfc(a) = e^(-a^2) t H(t - 0.45), t = 1 / (1 + a/2),
 *              H of degree 9 fitted to erfc(a) e^(a^2) / t on [1/2, 10.1],
 *              its coefficients rounded to float one at a time, the rest
 *              refitted after each (relative error 2e-8 as evaluated in
 *              float; H, unlike erfc e^(a^2) itself, stays in [0.3, 0.8],
 *              so Horner's rounding is not amplified); t carries its own
 *              rounding error as a second float (see verfc); a^2 is split
 *              exactly (hi + lo by an FMA) so e^(-a^2) is not off by a^2's
 *              rounding (up to 100 x 2^-24 relative); below 1/2, 1 - erf;
 *              for x < 0, 2 - erfc(-x).
 * erf is about 1.2 ulp, erfc up to 3.4 (exp's ulp and the rounded products).
 * NaN stays NaN, erf(+-inf) = +-1, erf(-0) = -0, erfc(+inf) = 0,
 * erfc(-inf) = 2; subnormal inputs keep erf(x) = 2x/sqrt(pi) rounded. */
#ifndef NK_SIMD_ERF_F32_H
#define NK_SIMD_ERF_F32_H

#include "common/simd_exp_f32.h"

/* erf(x) / x - 1 for x^2 = z <= 1: erf = x + x p, so p's rounding is
 * scaled by |p| <= 0.16 */
static inline VT verf_small(VT z) {
  VT p = VSET(7.8891089011002522e-05);
  p = VFMADD(p, z, VSET(-0.0008020838098433883));
  p = VFMADD(p, z, VSET(0.0051895349825193966));
  p = VFMADD(p, z, VSET(-0.026854444407586008));
  p = VFMADD(p, z, VSET(0.11283600171958208));
  p = VFMADD(p, z, VSET(-0.37612627135599641));
  return VFMADD(p, z, VSET(0.12837916591370035));
}

static inline VT verf(VT x) {
  const VT sign = VSET(-0.0f);
  VT a = VANDNOT(sign, x);
  VT small = VFMADD(x, verf_small(VMUL(x, x)), x);
  const VMASK big = VCMP(a, VSET(1.0), NLT); /* NaN too */
  if (!VANY(big)) return small;
  /* a clamped to 4 (NaN passes: min returns its second operand) */
  VT d = VSUB(VMIN(VSET(4.0), a), VSET(1.0));
  VT q = VSET(-2.1687085367736617e-05);
  q = VFMADD(q, d, VSET(0.00028952966615623446));
  q = VFMADD(q, d, VSET(-0.002011969935875255));
  q = VFMADD(q, d, VSET(0.010046455649934243));
  q = VFMADD(q, d, VSET(-0.041563482463019184));
  q = VFMADD(q, d, VSET(-0.8431070813377861));
  q = VFMADD(q, d, VSET(-2.638967514568583));
  q = VFMADD(q, d, VSET(-1.8496055100654278));
  VT r = VSUB(VSET(1.0), vexp_inrange(q)); /* q in [-18, -1.8] */
  return VSEL(big, VOR(r, VAND(x, sign)), small);
}

static inline VT verfc(VT x) {
  const VT sign = VSET(-0.0f);
  VT a = VANDNOT(sign, x);
  /* |x| < 1/2: 1 - erf(x) */
  VT small = VSUB(VSET(1.0), VFMADD(x, verf_small(VMUL(x, x)), x));
  const VMASK big = VCMP(a, VSET(0.5), NLT); /* NaN too */
  if (!VANY(big)) return small;
  /* a clamped to 10.1, where erfc is below the smallest subnormal */
  VT ac = VMIN(VSET(10.1), a);
  /* t = 1 / D, D = 1 + a/2 = dh + dl exactly; t's two roundings (of D and
   * of the quotient) would each cost an ulp in H(t) and again in t H, so
   * t = t0 + te with te = t0 (1 - t0 dh - t0 dl) */
  VT dh = VFMADD(ac, VSET(0.5), VSET(1.0));
  VT dl = VSUB(VMUL(ac, VSET(0.5)), VSUB(dh, VSET(1.0)));
  VT t0 = VDIV(VSET(1.0), dh);
  VT te = VMUL(t0, VFNMADD(t0, dl, VFNMADD(t0, dh, VSET(1.0))));
  VT d = VADD(VSUB(t0, VSET(0.45)), te);
  VT h = VSET(-0.05291267856955528);
  h = VFMADD(h, d, VSET(-0.03931216150522232));
  h = VFMADD(h, d, VSET(0.08501483500003815));
  h = VFMADD(h, d, VSET(0.07019165903329849));
  h = VFMADD(h, d, VSET(-0.12982547283172607));
  h = VFMADD(h, d, VSET(-0.14252109825611115));
  h = VFMADD(h, d, VSET(0.17735633254051208));
  h = VFMADD(h, d, VSET(0.5346324443817139));
  h = VFMADD(h, d, VSET(0.6324421763420105));
  h = VFMADD(h, d, VSET(0.47781142592430115));
  VT g = VFMADD(t0, h, VMUL(te, h));
  VT hi = VMUL(ac, ac), lo = VFMSUB(ac, ac, hi); /* a^2 = hi + lo exactly */
  /* e^(-hi - lo) G = e^(-hi) (1 - lo) G */
  VT r = vexp_mul_inrange(VXOR(hi, sign), VFNMADD(g, lo, g));
  r = VSEL(VCMP(x, VZERO(), LT), VSUB(VSET(2.0), r), r);
  return VSEL(big, r, small);
}

#endif /* NK_SIMD_ERF_F32_H */
