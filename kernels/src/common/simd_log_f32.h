/* simd_log_f32.h — float32 log, log2, log10 and log1p over the vector
 * macros of simd_<isa>_f32.h (the unary ops' bodies, unary_simd_impl.h).
 *
 * Cephes' logf: x = 2^e m with m in [sqrt(1/2), sqrt(2)) taken from the
 * bits (subtracting sqrt(1/2)'s bits first puts the split there, so no
 * compare adjusts e), f = m - 1 exact, log(1 + f) = f + y with
 * y = f^3 P(f) - f^2 / 2 (P of degree 8), and e ln 2 added in two parts.
 * log2 and log10 scale f and y by the constant in two parts (FMAs), so the
 * result is not a rounded log times a rounded constant; log1p takes m from
 * u = 1 + x and folds u's rounding error back into f.  All about 1 ulp.
 *
 * Inputs outside the normal positive floats (0, negatives, subnormals, inf,
 * NaN) are rare, so they are tested once per vector and handled on a branch
 * that the common case skips: subnormals scaled by 2^23 first, then log of
 * a negative is NaN, log(+-0) = -inf, log(+inf) = +inf, NaN stays NaN. */
#ifndef NK_SIMD_LOG_F32_H
#define NK_SIMD_LOG_F32_H

#include <float.h>
#include <math.h>

#define NK_SQRT1_2_BITS 0x3f3504f3 /* sqrt(1/2) as float32 */

/* y with log(1 + f) = f + y, for f in [sqrt(1/2) - 1, sqrt(2) - 1] */
static inline VT vlog_tail(VT f) {
  VT z = VMUL(f, f);
  VT p = VSET(7.0376836292E-2);
  p = VFMADD(p, f, VSET(-1.1514610310E-1));
  p = VFMADD(p, f, VSET(1.1676998740E-1));
  p = VFMADD(p, f, VSET(-1.2420140846E-1));
  p = VFMADD(p, f, VSET(1.4249322787E-1));
  p = VFMADD(p, f, VSET(-1.6668057665E-1));
  p = VFMADD(p, f, VSET(2.0000714765E-1));
  p = VFMADD(p, f, VSET(-2.4999993993E-1));
  p = VFMADD(p, f, VSET(3.3333331174E-1));
  return VFNMADD(VSET(0.5), z, VMUL(VMUL(p, f), z));
}

/* x = 2^e m for a positive normal x: returns m in [sqrt(1/2), sqrt(2)) */
static inline VT vlog_split(VT x, VI *e) {
  VI i = ISUB(VCAST_I(x), ISET(NK_SQRT1_2_BITS));
  *e = ISRAI(i, 23);
  return ICAST_F(IADD(IAND(i, ISET(0x7fffff)), ISET(NK_SQRT1_2_BITS)));
}

/* e ln 2 + f + y, ln 2 in two parts (Cephes) */
static inline VT vlog_join(VT e, VT f, VT y) {
  return VFMADD(e, VSET(0.693359375), VADD(f, VFMADD(e, VSET(-2.12194440e-4), y)));
}

enum { NK_LOG_E, NK_LOG_2, NK_LOG_10 };

static inline VT vlog_base(VT x, int base) {
  const VMASK odd = VMOR(VCMP(x, VSET(FLT_MIN), LT), VCMP(x, VSET(INFINITY), NLT));
  VT xs = x, eadj = VZERO();
  if (VANY(odd)) { /* subnormals: scaled into the normal range */
    const VMASK sub = VCMP(x, VSET(FLT_MIN), LT);
    xs = VSEL(sub, VMUL(x, VSET(8388608.0)), x);
    eadj = VSEL(sub, VSET(-23.0), VZERO());
  }
  VI ei;
  VT f = VSUB(vlog_split(xs, &ei), VSET(1.0));
  VT e = VADD(VCVT_F(ei), eadj);
  VT y = vlog_tail(f), r;
  if (base == NK_LOG_E) {
    r = vlog_join(e, f, y);
  } else if (base == NK_LOG_2) {
    const VT hi = VSET(1.44269504088896341), lo = VSET(1.92596298909109e-08);
    VT t = VFMADD(f, lo, VMUL(y, hi));
    r = VADD(e, VFMADD(f, hi, t));
  } else {
    const VT hi = VSET(0.434294481903251828), lo = VSET(-1.0103050118726031e-08);
    const VT l2hi = VSET(0.301029995663981195), l2lo = VSET(-1.432098889475597e-08);
    VT t = VFMADD(e, l2lo, VFMADD(f, lo, VMUL(y, hi)));
    r = VFMADD(e, l2hi, VFMADD(f, hi, t));
  }
  if (VANY(odd)) {
    r = VSEL(VCMP(x, VZERO(), LT), VSET(NAN), r);
    r = VSEL(VCMP(x, VZERO(), EQ), VSET(-INFINITY), r);
    r = VSEL(VCMP(x, VSET(INFINITY), NLT), x, r); /* +inf, NaN */
  }
  return r;
}

static inline VT vlog(VT x) { return vlog_base(x, NK_LOG_E); }
static inline VT vlog2(VT x) { return vlog_base(x, NK_LOG_2); }
static inline VT vlog10(VT x) { return vlog_base(x, NK_LOG_10); }

/* log(1 + x): u = 1 + x rounded, c = x - (u - 1) its rounding error
 * (exact while |x| < 2^24; beyond, c is far below the result's ulp), and
 * log(u + c) = e ln 2 + log(m + c 2^-e), so f = (m - 1) + c 2^-e. */
static inline VT vlog1p(VT x) {
  const VMASK odd = VMOR(VCMP(x, VSET(-1.0), NGT), VCMP(x, VSET(INFINITY), EQ));
  VT u = VADD(x, VSET(1.0));
  VT c = VSUB(x, VSUB(u, VSET(1.0)));
  VI ei;
  VT m = vlog_split(u, &ei);
  /* 2^-e, e capped where c 2^-e no longer matters, so it stays normal */
  VT s = ICAST_F(ISLLI(ISUB(ISET(127), IMIN(ei, ISET(100))), 23));
  VT f = VFMADD(c, s, VSUB(m, VSET(1.0)));
  VT e = VCVT_F(ei);
  VT y = vlog_tail(f);
  VT r = vlog_join(e, f, y);
  r = VOR(r, VAND(x, VSET(-0.0f))); /* the sign of x: -0 stays -0 */
  if (VANY(odd)) {
    r = VSEL(VCMP(x, VSET(-1.0), LT), VSET(NAN), r);
    r = VSEL(VCMP(x, VSET(-1.0), EQ), VSET(-INFINITY), r);
    r = VSEL(VCMP(x, VSET(INFINITY), NLT), x, r); /* +inf, NaN */
  }
  return r;
}

#endif /* NK_SIMD_LOG_F32_H */
