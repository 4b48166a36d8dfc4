/* simd_trig_f32.h — float32 sin, cos and atan over the vector macros of
 * simd_<isa>_f32.h (the unary ops' bodies, unary_simd_impl.h).
 *
 * sin/cos (Cephes' sinf/cosf polynomials): |x| = j pi/2 + r, j the nearest
 * integer (one FMA against 1.5 * 2^23, whose low bits are j mod 4), r by
 * FMAs with pi/2 in three floats (pi/2 to ~2^-72: r keeps ~24 good bits
 * while j pi/2's error stays below r's ulp, |x| < 2^17 here), then
 * sin r = r + r^3 S(r^2) or cos r = 1 - r^2/2 + r^4 C(r^2) by j's
 * quadrant, the sign from the quadrant (and x's, for sin: computed on |x|
 * so -0 stays -0).  Lanes beyond 2^17 (and inf, NaN) are rare: they go
 * through the C library's sinf/cosf one by one, as the portable loop does,
 * from a copy of the vector on the stack.
 *
 * atan (Cephes' atanf): |x| > tan(3 pi/8): pi/2 + atan(-1/|x|); |x| >
 * tan(pi/8): pi/4 + atan((|x| - 1) / (|x| + 1)); one division for both,
 * then an odd polynomial of degree 9 and x's sign.  atan(+-inf) = +-pi/2,
 * NaN stays NaN. */
#ifndef NK_SIMD_TRIG_F32_H
#define NK_SIMD_TRIG_F32_H

#include <math.h>

#define NK_TRIG_VECTOR_MAX 131072.0f /* 2^17 */

/* sin (cos_shift 0) or cos (cos_shift 1) of x */
static inline VT vsincos(VT x, int cos_shift) {
  const VT sign = VSET(-0.0f), rounder = VSET(12582912.0f);
  VT ax = VANDNOT(sign, x);
  /* the clamp keeps j small for the lanes redone below (NaN passes) */
  VT axc = VMIN(VSET(NK_TRIG_VECTOR_MAX), ax);
  VT t = VFMADD(axc, VSET(0.63661977236758134), rounder);
  VT j = VSUB(t, rounder);
  VT r = VFNMADD(j, VSET(1.5707963705062866), axc);
  r = VFNMADD(j, VSET(-4.371138828673793e-08), r);
  r = VFNMADD(j, VSET(-1.7151245100058819e-15), r);
  VT z = VMUL(r, r);
  VT s = VSET(-1.9515295891E-4);
  s = VFMADD(s, z, VSET(8.3321608736E-3));
  s = VFMADD(s, z, VSET(-1.6666654611E-1));
  s = VFMADD(VMUL(s, z), r, r);
  VT c = VSET(2.443315711809948E-005);
  c = VFMADD(c, z, VSET(-1.388731625493765E-003));
  c = VFMADD(c, z, VSET(4.166664568298827E-002));
  c = VFMADD(VMUL(c, z), z, VFNMADD(VSET(0.5), z, VSET(1.0)));
  VI q = IADD(VCAST_I(t), ISET(cos_shift)); /* j mod 4 in the low bits */
  /* odd quadrants take the other polynomial, bit 1 negates */
  const VMASK odd = VCMP(VCVT_F(IAND(q, ISET(1))), VSET(0.5), GT);
  VT y = VSEL(odd, c, s);
  VT sgn = ICAST_F(ISLLI(ISRAI(q, 1), 31));
  if (!cos_shift) sgn = VXOR(sgn, VAND(x, sign));
  y = VXOR(y, sgn);
  const VMASK far = VCMP(ax, VSET(NK_TRIG_VECTOR_MAX), NLT); /* NaN, inf too */
  if (VANY(far)) {
    float xs[LANES], ys[LANES];
    VSTOREU(xs, x);
    VSTOREU(ys, y);
    for (int k = 0; k < LANES; k++)
      if (!(fabsf(xs[k]) < NK_TRIG_VECTOR_MAX)) ys[k] = cos_shift ? cosf(xs[k]) : sinf(xs[k]);
    y = VLOADU(ys);
  }
  return y;
}

static inline VT vsin(VT x) { return vsincos(x, 0); }
static inline VT vcos(VT x) { return vsincos(x, 1); }

static inline VT vatan(VT x) {
  const VT sign = VSET(-0.0f), one = VSET(1.0);
  VT ax = VANDNOT(sign, x);
  const VMASK big = VCMP(ax, VSET(2.414213562373095), GT);
  const VMASK mid = VCMP(ax, VSET(0.4142135623730950), GT);
  /* big: -1 / ax; mid: (ax - 1) / (ax + 1); small: ax / 1 */
  VT num = VSEL(big, VSET(-1.0), VSEL(mid, VSUB(ax, one), ax));
  VT den = VSEL(big, ax, VSEL(mid, VADD(ax, one), one));
  VT u = VDIV(num, den);
  VT base = VSEL(big, VSET(1.5707963267948966), VSEL(mid, VSET(0.7853981633974483), VZERO()));
  VT z = VMUL(u, u);
  VT p = VSET(8.05374449538e-2);
  p = VFMADD(p, z, VSET(-1.38776856032E-1));
  p = VFMADD(p, z, VSET(1.99777106478E-1));
  p = VFMADD(p, z, VSET(-3.33329491539E-1));
  /* pi/2 and pi/4 as float are 0.7 ulp off: their low parts go in first */
  VT base_lo = VSEL(big, VSET(-4.371139000186243e-08), VSEL(mid, VSET(-2.1855695000931214e-08), VZERO()));
  VT y = VADD(base, VFMADD(VMUL(p, z), u, VADD(u, base_lo)));
  return VXOR(y, VAND(x, sign)); /* NaN: the compares are false, u is NaN */
}

#endif /* NK_SIMD_TRIG_F32_H */
