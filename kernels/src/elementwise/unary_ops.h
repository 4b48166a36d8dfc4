/* unary_ops.h — the math of the unary kernels, one function per compute
 * class (float, double, int64, bool) and one for the predicates.
 *
 * Formulas follow ATen's CPU kernels (UnaryOpsKernel.cpp, Activation.cpp's
 * kernels): the same expressions in the same order, float32 math through the
 * C library's float functions (expf, tanhf, ...), float16/bfloat16 computed
 * in float32 by the caller.  erfinv has no C library function: it is
 * computed in double (a tighter result than ATen's float code, within its
 * tolerances); digamma/trigamma follow ATen's float code in float and its
 * double code in double.  Integers are computed in uint64 so that abs/neg
 * of the minimum wrap instead of overflowing; the caller wraps the result to
 * the compute dtype's width.
 *
 * The parameters arrive as nk_scalar p[3]; prepare() in unary.c turns them once
 * per task into each class's form (and derived constants such as elu's
 * coefficients or round's power of ten), so the per-element code never
 * converts. */
#ifndef NK_UNARY_OPS_H
#define NK_UNARY_OPS_H

#include <float.h>
#include <math.h>

#include "common/dtype_convert.h"
#include "neuron_kernels.h"
#include "elementwise/special_math.h"

/* which compute classes an op takes */
enum { NK_UC_F = 1, NK_UC_I = 2, NK_UC_B = 4, NK_UC_P = 8 /* predicate: any class, bool result */ };

/* parameters in every class, derived once per task */
typedef struct nk_uprm {
  nrt_dtype tc; /* the compute dtype (the few ops that round intermediates) */
  float f[4];
  double d[4];
  int64_t i[4];
  bool flag;
} nk_uprm;

#define NK_SQRT1_2 0.70710678118654752440
#define NK_2_SQRTPI 1.12837916709551257390
#define NK_SQRT2 1.41421356237309504880
#define NK_PI 3.14159265358979323846
#define NK_GELU_KBETA (NK_SQRT2 * NK_2_SQRTPI * 0.5) /* sqrt(2/pi) */
#define NK_GELU_KKAPPA 0.044715

/* --------------------------------------------------------- special functions */

/* erfinv in double: a starting value from Giles' single-precision
 * approximation, then Newton steps on erf (|y| <= 0.5) or on erfc (the tails,
 * where 1 - |y| is exact and erf would cancel). */
static inline double nk_erfinv(double y) {
  if (isnan(y) || y < -1.0 || y > 1.0) return NAN;
  if (y == 1.0) return INFINITY;
  if (y == -1.0) return -INFINITY;
  if (y == 0.0) return y;
  double w = -log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  /* Newton converges quadratically from within float accuracy; the tails
   * beyond float's range (1 - |y| < 2^-24) start further off and take a few
   * more steps. */
  double x = p * y, a = fabs(y);
  for (int k = 0; k < 12; k++) {
    double ax = fabs(x), d = NK_2_SQRTPI * exp(-ax * ax);
    if (!(d > 0)) break;
    double step = a <= 0.5 ? (erf(x) - y) / d : ((1.0 - a) - erfc(ax)) / d * (y < 0 ? -1.0 : 1.0);
    x -= step;
    if (fabs(step) <= 1e-17 * fabs(x)) break;
  }
  return x;
}

/* ATen's calc_digamma (Cephes' psi): reflection below 0, recurrence up to
 * 10, then the asymptotic series. */
static inline double nk_digamma(double x) {
  static const double psi_10 = 2.25175258906672110764;
  static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                             7.57575757575757575758E-3, -4.16666666666666666667E-3,
                             3.96825396825396825397E-3, -8.33333333333333333333E-3,
                             8.33333333333333333333E-2};
  if (x == 0) return copysign(INFINITY, -x);
  double result = 0;
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    double q, r = modf(x, &q);
    result = -NK_PI / tan(NK_PI * r);
    x = 1 - x;
  }
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + psi_10;
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x), poly = A[0];
    for (int k = 1; k < 7; k++) poly = poly * z + A[k];
    y = z * poly;
  }
  return result + log(x) - (0.5 / x) - y;
}

/* glibc's reentrant lgamma (no write to the global signgam); declared here
 * because math.h shows it only to _DEFAULT_SOURCE builds. */
double lgamma_r(double x, int *sign);
float lgammaf_r(float x, int *sign);

/* ATen's calc_trigamma (in double) */
static inline double nk_trigamma(double x) {
  double sign = +1, result = 0;
  if (x < 0.5) {
    sign = -1;
    const double s = sin(NK_PI * x);
    result -= (NK_PI * NK_PI) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += 1 / (x * x);
    x += 1;
  }
  const double ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x;
  return sign * result;
}

/* float twins of calc_digamma/calc_trigamma: ATen computes float16,
 * bfloat16 and float32 in float arithmetic, so these follow it step by step */
static inline float nk_digamma_f(float x) {
  static const float A[] = {8.33333333333333333333E-2f, -2.10927960927960927961E-2f,
                            7.57575757575757575758E-3f, -4.16666666666666666667E-3f,
                            3.96825396825396825397E-3f, -8.33333333333333333333E-3f,
                            8.33333333333333333333E-2f};
  if (x == 0) return copysignf(INFINITY, -x);
  float result = 0;
  if (x < 0) {
    if (x == truncf(x)) return NAN;
    double q, r = modf(x, &q);
    result = -(float)(NK_PI / tan(NK_PI * r));
    x = 1 - x;
  }
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + 2.25175258906672110764f;
  float y = 0;
  if (x < 1.0e17f) {
    float z = 1 / (x * x), poly = A[0];
    for (int k = 1; k < 7; k++) poly = poly * z + A[k];
    y = z * poly;
  }
  return result + logf(x) - (0.5f / x) - y;
}

static inline float nk_trigamma_f(float x) {
  float sign = +1, result = 0;
  if (x < 0.5f) {
    sign = -1;
    const float s = sinf((float)NK_PI * x);
    result -= (float)(NK_PI * NK_PI) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += 1 / (x * x);
    x += 1;
  }
  const float ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1.f / 6 - ixx * (1.f / 30 - ixx * (1.f / 42)))) / x;
  return sign * result;
}

/* Hurwitz zeta(x, q), Cephes' zeta.c as ATen has it */
static inline double nk_zeta(double x, double q) {
  static const double machep = 1.11022302462515654042E-16;
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
                             -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
                             1.1646782814350067249e14, -4.5979787224074726105e15,
                             1.8152105401943546773e17, -7.1661652561756670113e18};
  if (x == 1) return INFINITY;
  if (x < 1) return NAN;
  if (q <= 0) {
    if (q == floor(q)) return INFINITY;
    if (x != floor(x)) return NAN;
  }
  double s = pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    i += 1;
    a += 1;
    b = pow(a, -x);
    s += b;
    if (-machep * s < b && b < machep * s) return s;
  }
  double w = a, k = 0, t;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  a = 1;
  for (int j = 0; j < 12; j++) {
    a *= x + k;
    b /= w;
    t = a * b / A[j];
    s = s + t;
    t = fabs(t / s);
    if (t < machep) return s;
    k += 1;
    a *= x + k;
    b /= w;
    k += 1;
  }
  return s;
}

/* ATen's polygamma: digamma, trigamma, else (-1)^(n+1) n! zeta(n+1, x) */
static inline double nk_polygamma(int64_t n, double x) {
  if (n == 0) return nk_digamma(x);
  if (n == 1) return nk_trigamma(x);
  return ((n % 2) ? 1.0 : -1.0) * exp(lgamma((double)n + 1.0)) * nk_zeta((double)n + 1.0, x);
}

static inline double nk_lgamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}
static inline float nk_lgammaf(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}

/* --------------------------------------------------------------- the ops */

NK_INLINE float nk_unary_f32(nk_unary_op op, float x, const nk_uprm *p) {
  switch (op) {
  case NK_UNARY_ABS: return fabsf(x);
  case NK_UNARY_NEG: return -x;
  case NK_UNARY_SIGN: return (float)((0.0f < x) - (x < 0.0f));
  case NK_UNARY_EXP: return expf(x);
  case NK_UNARY_EXP2: return exp2f(x);
  case NK_UNARY_EXPM1: return expm1f(x);
  case NK_UNARY_LOG: return logf(x);
  case NK_UNARY_LOG2: return log2f(x);
  case NK_UNARY_LOG10: return log10f(x);
  case NK_UNARY_LOG1P: return log1pf(x);
  case NK_UNARY_SQRT: return sqrtf(x);
  case NK_UNARY_RSQRT: return 1.0f / sqrtf(x);
  case NK_UNARY_RECIPROCAL: return 1.0f / x;
  case NK_UNARY_SIN: return sinf(x);
  case NK_UNARY_COS: return cosf(x);
  case NK_UNARY_TAN: return tanf(x);
  case NK_UNARY_ASIN: return asinf(x);
  case NK_UNARY_ACOS: return acosf(x);
  case NK_UNARY_ATAN: return atanf(x);
  case NK_UNARY_SINH: return sinhf(x);
  case NK_UNARY_COSH: return coshf(x);
  case NK_UNARY_TANH: return tanhf(x);
  case NK_UNARY_ASINH: return asinhf(x);
  case NK_UNARY_ACOSH: return acoshf(x);
  case NK_UNARY_ATANH: return atanhf(x);
  case NK_UNARY_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case NK_UNARY_LOGIT: /* float16/bfloat16 round each step, as ATen's scalar_t math does */
    if (p->flag) x = x < p->f[0] ? p->f[0] : (x > p->f[1] ? p->f[1] : x);
    return x == 1.0f ? INFINITY : logf(nk_round_f32(p->tc, x / nk_round_f32(p->tc, 1.0f - x)));
  case NK_UNARY_ERF: return erff(x);
  case NK_UNARY_ERFC: return erfcf(x);
  case NK_UNARY_ERFINV: return (float)nk_erfinv(x);
  case NK_UNARY_LGAMMA: return nk_lgammaf(x);
  case NK_UNARY_DIGAMMA: return nk_digamma_f(x);
  case NK_UNARY_FLOOR: return floorf(x);
  case NK_UNARY_CEIL: return ceilf(x);
  case NK_UNARY_ROUND: return nearbyintf(x);
  case NK_UNARY_ROUND_DECIMALS:
    return p->flag ? nearbyintf(x / p->f[0]) * p->f[0] : nearbyintf(x * p->f[0]) / p->f[0];
  case NK_UNARY_TRUNC: return truncf(x);
  case NK_UNARY_FRAC: return x - truncf(x);
  case NK_UNARY_RELU: return x < 0.0f ? 0.0f : x;
  case NK_UNARY_CLAMP: {
    float r = x < p->f[0] ? p->f[0] : x;
    return p->f[1] < r ? p->f[1] : r;
  }
  case NK_UNARY_GELU: return x * 0.5f * (1.0f + erff(x * (float)NK_SQRT1_2));
  case NK_UNARY_GELU_TANH: {
    float inner = (float)NK_GELU_KBETA * (x + (float)NK_GELU_KKAPPA * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
  }
  case NK_UNARY_SILU: return x / (1.0f + expf(-x));
  case NK_UNARY_MISH: return x * tanhf(log1pf(expf(x)));
  case NK_UNARY_SOFTPLUS:
    return x * p->f[0] > p->f[1] ? x : log1pf(expf(x * p->f[0])) / p->f[0];
  case NK_UNARY_ELU: /* f = negcoef, poscoef, negiptcoef */
    return x <= 0.0f ? expm1f(x * p->f[2]) * p->f[0] : x * p->f[1];
  case NK_UNARY_LEAKY_RELU: return x > 0.0f ? x : x * p->f[0];
  case NK_UNARY_HARDSIGMOID: {
    float r = x + 3.0f;
    r = r < 0.0f ? 0.0f : r;
    return (6.0f < r ? 6.0f : r) / 6.0f;
  }
  case NK_UNARY_HARDSWISH: {
    float r = x + 3.0f;
    r = r < 0.0f ? 0.0f : r;
    return x * (6.0f < r ? 6.0f : r) / 6.0f;
  }
  case NK_UNARY_NAN_TO_NUM:
    return isnan(x) ? p->f[0] : x == INFINITY ? p->f[1] : x == -INFINITY ? p->f[2] : x;
  case NK_UNARY_SINC: {
    if (x == 0.0f) return 1.0f;
    float px = (float)NK_PI * x;
    return sinf(px) / px;
  }
  case NK_UNARY_HARDSHRINK: return (x >= -p->f[0] && x <= p->f[0]) ? 0.0f : x;
  case NK_UNARY_SOFTSHRINK:
    return isnan(x) ? x : x > p->f[0] ? x - p->f[0] : x < -p->f[0] ? x + p->f[0] : 0.0f;
  case NK_UNARY_LOG_SIGMOID: return (x < 0.0f ? x : 0.0f) - log1pf(expf(-fabsf(x)));
  case NK_UNARY_POLYGAMMA:
    return p->i[0] == 0 ? nk_digamma_f(x) : p->i[0] == 1 ? nk_trigamma_f(x) : (float)nk_polygamma(p->i[0], x);
  default: /* the special functions; anything else is refused by the plan */
    return NK_UNARY_IS_SPECIAL(op) ? nk_special_unary_f32(op, x, p->tc) : x;
  }
}

NK_INLINE double nk_unary_f64(nk_unary_op op, double x, const nk_uprm *p) {
  switch (op) {
  case NK_UNARY_ABS: return fabs(x);
  case NK_UNARY_NEG: return -x;
  case NK_UNARY_SIGN: return (double)((0.0 < x) - (x < 0.0));
  case NK_UNARY_EXP: return exp(x);
  case NK_UNARY_EXP2: return exp2(x);
  case NK_UNARY_EXPM1: return expm1(x);
  case NK_UNARY_LOG: return log(x);
  case NK_UNARY_LOG2: return log2(x);
  case NK_UNARY_LOG10: return log10(x);
  case NK_UNARY_LOG1P: return log1p(x);
  case NK_UNARY_SQRT: return sqrt(x);
  case NK_UNARY_RSQRT: return 1.0 / sqrt(x);
  case NK_UNARY_RECIPROCAL: return 1.0 / x;
  case NK_UNARY_SIN: return sin(x);
  case NK_UNARY_COS: return cos(x);
  case NK_UNARY_TAN: return tan(x);
  case NK_UNARY_ASIN: return asin(x);
  case NK_UNARY_ACOS: return acos(x);
  case NK_UNARY_ATAN: return atan(x);
  case NK_UNARY_SINH: return sinh(x);
  case NK_UNARY_COSH: return cosh(x);
  case NK_UNARY_TANH: return tanh(x);
  case NK_UNARY_ASINH: return asinh(x);
  case NK_UNARY_ACOSH: return acosh(x);
  case NK_UNARY_ATANH: return atanh(x);
  case NK_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case NK_UNARY_LOGIT:
    if (p->flag) x = x < p->d[0] ? p->d[0] : (x > p->d[1] ? p->d[1] : x);
    return x == 1.0 ? INFINITY : log(x / (1.0 - x));
  case NK_UNARY_ERF: return erf(x);
  case NK_UNARY_ERFC: return erfc(x);
  case NK_UNARY_ERFINV: return nk_erfinv(x);
  case NK_UNARY_LGAMMA: return nk_lgamma(x);
  case NK_UNARY_DIGAMMA: return nk_digamma(x);
  case NK_UNARY_FLOOR: return floor(x);
  case NK_UNARY_CEIL: return ceil(x);
  case NK_UNARY_ROUND: return nearbyint(x);
  case NK_UNARY_ROUND_DECIMALS:
    return p->flag ? nearbyint(x / p->d[0]) * p->d[0] : nearbyint(x * p->d[0]) / p->d[0];
  case NK_UNARY_TRUNC: return trunc(x);
  case NK_UNARY_FRAC: return x - trunc(x);
  case NK_UNARY_RELU: return x < 0.0 ? 0.0 : x;
  case NK_UNARY_CLAMP: {
    double r = x < p->d[0] ? p->d[0] : x;
    return p->d[1] < r ? p->d[1] : r;
  }
  case NK_UNARY_GELU: return x * 0.5 * (1.0 + erf(x * NK_SQRT1_2));
  case NK_UNARY_GELU_TANH: {
    double inner = NK_GELU_KBETA * (x + NK_GELU_KKAPPA * (x * x * x));
    return 0.5 * x * (1.0 + tanh(inner));
  }
  case NK_UNARY_SILU: return x / (1.0 + exp(-x));
  case NK_UNARY_MISH: return x * tanh(log1p(exp(x)));
  case NK_UNARY_SOFTPLUS: return x * p->d[0] > p->d[1] ? x : log1p(exp(x * p->d[0])) / p->d[0];
  case NK_UNARY_ELU: return x <= 0.0 ? expm1(x * p->d[2]) * p->d[0] : x * p->d[1];
  case NK_UNARY_LEAKY_RELU: return x > 0.0 ? x : x * p->d[0];
  case NK_UNARY_HARDSIGMOID: {
    double r = x + 3.0;
    r = r < 0.0 ? 0.0 : r;
    return (6.0 < r ? 6.0 : r) / 6.0;
  }
  case NK_UNARY_HARDSWISH: {
    double r = x + 3.0;
    r = r < 0.0 ? 0.0 : r;
    return x * (6.0 < r ? 6.0 : r) / 6.0;
  }
  case NK_UNARY_NAN_TO_NUM:
    return isnan(x) ? p->d[0] : x == INFINITY ? p->d[1] : x == -INFINITY ? p->d[2] : x;
  case NK_UNARY_SINC: {
    if (x == 0.0) return 1.0;
    double px = NK_PI * x;
    return sin(px) / px;
  }
  case NK_UNARY_HARDSHRINK: return (x >= -p->d[0] && x <= p->d[0]) ? 0.0 : x;
  case NK_UNARY_SOFTSHRINK:
    return isnan(x) ? x : x > p->d[0] ? x - p->d[0] : x < -p->d[0] ? x + p->d[0] : 0.0;
  case NK_UNARY_LOG_SIGMOID: return (x < 0.0 ? x : 0.0) - log1p(exp(-fabs(x)));
  case NK_UNARY_POLYGAMMA: return nk_polygamma(p->i[0], x);
  default: return NK_UNARY_IS_SPECIAL(op) ? nk_special_unary_f64(op, x) : x;
  }
}

/* integral compute (the caller wraps to the compute dtype) */
NK_INLINE int64_t nk_unary_i64(nk_unary_op op, int64_t x, const nk_uprm *p) {
  uint64_t u = (uint64_t)x;
  switch (op) {
  case NK_UNARY_ABS: return x < 0 ? (int64_t)(0 - u) : x;
  case NK_UNARY_NEG: return (int64_t)(0 - u);
  case NK_UNARY_SIGN: return (0 < x) - (x < 0);
  case NK_UNARY_RELU: return x < 0 ? 0 : x;
  case NK_UNARY_CLAMP: {
    int64_t r = x < p->i[0] ? p->i[0] : x;
    return p->i[1] < r ? p->i[1] : r;
  }
  case NK_UNARY_BITWISE_NOT: return (int64_t)~u;
  default: return x;
  }
}

NK_INLINE bool nk_unary_bool(nk_unary_op op, bool x) {
  switch (op) {
  case NK_UNARY_BITWISE_NOT: return !x;
  default: return x; /* abs, sign */
  }
}

/* predicates on a value of any class */
NK_INLINE bool nk_unary_pred_f64(nk_unary_op op, double x) {
  switch (op) {
  case NK_UNARY_ISNAN: return isnan(x);
  case NK_UNARY_ISINF: return isinf(x);
  case NK_UNARY_ISPOSINF: return x == INFINITY;
  case NK_UNARY_ISNEGINF: return x == -INFINITY;
  case NK_UNARY_ISFINITE: return isfinite(x);
  case NK_UNARY_SIGNBIT: return signbit(x) != 0;
  default: return x == 0; /* logical_not; NaN is true, so not(NaN) is false */
  }
}

NK_INLINE bool nk_unary_pred_i64(nk_unary_op op, int64_t x) {
  switch (op) {
  case NK_UNARY_ISFINITE: return true;
  case NK_UNARY_SIGNBIT: return x < 0;
  case NK_UNARY_LOGICAL_NOT: return x == 0;
  default: return false; /* isnan/isinf/isposinf/isneginf */
  }
}

/* ------------------------------------------------------------ backward ops */

NK_INLINE float nk_unary_bw_f32(nk_unary_backward_op op, float a, float b, const nk_uprm *p) {
  switch (op) {
  case NK_UNARY_BW_SIGMOID: return a * (1.0f - b) * b;
  case NK_UNARY_BW_TANH: return a * (1.0f - b * b);
  case NK_UNARY_BW_LOGIT:
    if (!p->flag)
      return (b < 0.0f || b > 1.0f) ? NAN
             : (b == 0.0f || b == 1.0f) ? a * INFINITY
                                        : a / (b * (1.0f - b));
    return (b < p->f[0] || b > p->f[1]) ? 0.0f : a / (b * (1.0f - b));
  case NK_UNARY_BW_GELU: {
    float cdf = 0.5f * (1.0f + erff(b * (float)NK_SQRT1_2));
    float pdf = (float)(NK_2_SQRTPI * NK_SQRT1_2 * 0.5) * expf(b * b * -0.5f);
    return a * (cdf + b * pdf);
  }
  case NK_UNARY_BW_GELU_TANH: {
    const float kbeta = (float)NK_GELU_KBETA, kkappa = (float)NK_GELU_KKAPPA;
    float x_sq = b * b, x_cube = x_sq * b;
    float inner = kbeta * (b + kkappa * x_cube), t = tanhf(inner);
    float left = 0.5f * b, right = 1.0f + t;
    float left_d = 0.5f * right, tanh_d = 1.0f - t * t;
    float inner_d = kbeta * (1.0f + 3.0f * kkappa * x_sq);
    return a * (left_d + left * tanh_d * inner_d);
  }
  case NK_UNARY_BW_SILU: {
    float s = 1.0f / (1.0f + expf(-b));
    return a * s * (1.0f + b * (1.0f - s));
  }
  case NK_UNARY_BW_MISH: {
    float s = 1.0f / (1.0f + expf(-b)), t = tanhf(log1pf(expf(b)));
    return a * (t + b * s * (1.0f - t * t));
  }
  case NK_UNARY_BW_SOFTPLUS: {
    float z = expf(b * p->f[0]);
    return b * p->f[0] > p->f[1] ? a : a * z / (z + 1.0f);
  }
  case NK_UNARY_BW_ELU: /* f = negcoef, poscoef, negiptcoef */
    return b <= 0.0f ? a * p->f[2] * p->f[0] * expf(b * p->f[2]) : a * p->f[1];
  case NK_UNARY_BW_ELU_RESULT: return b <= 0.0f ? a * p->f[2] * (b + p->f[0]) : a * p->f[1];
  case NK_UNARY_BW_LEAKY_RELU: return a > 0.0f ? b : b * p->f[0];
  case NK_UNARY_BW_HARDTANH: return (b <= p->f[0] || b >= p->f[1]) ? 0.0f : a;
  case NK_UNARY_BW_HARDSIGMOID: return (b > -3.0f && b < 3.0f) ? a * (1.0f / 6.0f) : 0.0f;
  case NK_UNARY_BW_HARDSWISH:
    return b < -3.0f ? 0.0f : b <= 3.0f ? a * ((b / 3.0f) + 0.5f) : a;
  case NK_UNARY_BW_THRESHOLD: return a <= p->f[0] ? p->f[1] : b;
  case NK_UNARY_BW_SHRINK: return (b >= -p->f[0] && b <= p->f[0]) ? 0.0f : a;
  case NK_UNARY_BW_LOG_SIGMOID: {
    float z = expf(-fabsf(b));
    return b < 0.0f ? a * (1.0f - z / (1.0f + z)) : a * (z / (1.0f + z));
  }
  default: return a;
  }
}

NK_INLINE double nk_unary_bw_f64(nk_unary_backward_op op, double a, double b, const nk_uprm *p) {
  switch (op) {
  case NK_UNARY_BW_SIGMOID: return a * (1.0 - b) * b;
  case NK_UNARY_BW_TANH: return a * (1.0 - b * b);
  case NK_UNARY_BW_LOGIT:
    if (!p->flag)
      return (b < 0.0 || b > 1.0) ? NAN : (b == 0.0 || b == 1.0) ? a * INFINITY : a / (b * (1.0 - b));
    return (b < p->d[0] || b > p->d[1]) ? 0.0 : a / (b * (1.0 - b));
  case NK_UNARY_BW_GELU: {
    double cdf = 0.5 * (1.0 + erf(b * NK_SQRT1_2));
    double pdf = (NK_2_SQRTPI * NK_SQRT1_2 * 0.5) * exp(b * b * -0.5);
    return a * (cdf + b * pdf);
  }
  case NK_UNARY_BW_GELU_TANH: {
    const double kbeta = NK_GELU_KBETA, kkappa = NK_GELU_KKAPPA;
    double x_sq = b * b, x_cube = x_sq * b;
    double inner = kbeta * (b + kkappa * x_cube), t = tanh(inner);
    double left = 0.5 * b, right = 1.0 + t;
    double left_d = 0.5 * right, tanh_d = 1.0 - t * t;
    double inner_d = kbeta * (1.0 + 3.0 * kkappa * x_sq);
    return a * (left_d + left * tanh_d * inner_d);
  }
  case NK_UNARY_BW_SILU: {
    double s = 1.0 / (1.0 + exp(-b));
    return a * s * (1.0 + b * (1.0 - s));
  }
  case NK_UNARY_BW_MISH: {
    double s = 1.0 / (1.0 + exp(-b)), t = tanh(log1p(exp(b)));
    return a * (t + b * s * (1.0 - t * t));
  }
  case NK_UNARY_BW_SOFTPLUS: {
    double z = exp(b * p->d[0]);
    return b * p->d[0] > p->d[1] ? a : a * z / (z + 1.0);
  }
  case NK_UNARY_BW_ELU: return b <= 0.0 ? a * p->d[2] * p->d[0] * exp(b * p->d[2]) : a * p->d[1];
  case NK_UNARY_BW_ELU_RESULT: return b <= 0.0 ? a * p->d[2] * (b + p->d[0]) : a * p->d[1];
  case NK_UNARY_BW_LEAKY_RELU: return a > 0.0 ? b : b * p->d[0];
  case NK_UNARY_BW_HARDTANH: return (b <= p->d[0] || b >= p->d[1]) ? 0.0 : a;
  case NK_UNARY_BW_HARDSIGMOID: return (b > -3.0 && b < 3.0) ? a * (1.0 / 6.0) : 0.0;
  case NK_UNARY_BW_HARDSWISH: return b < -3.0 ? 0.0 : b <= 3.0 ? a * ((b / 3.0) + 0.5) : a;
  case NK_UNARY_BW_THRESHOLD: return a <= p->d[0] ? p->d[1] : b;
  case NK_UNARY_BW_SHRINK: return (b >= -p->d[0] && b <= p->d[0]) ? 0.0 : a;
  case NK_UNARY_BW_LOG_SIGMOID: {
    double z = exp(-fabs(b));
    return b < 0.0 ? a * (1.0 - z / (1.0 + z)) : a * (z / (1.0 + z));
  }
  default: return a;
  }
}

NK_INLINE int64_t nk_unary_bw_i64(nk_unary_backward_op op, int64_t a, int64_t b, const nk_uprm *p) {
  (void)op; /* THRESHOLD is the only integral backward op */
  return a <= p->i[0] ? p->i[1] : b;
}

#endif /* NK_UNARY_OPS_H */
