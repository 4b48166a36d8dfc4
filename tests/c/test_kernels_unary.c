/* The unary kernels (NK_KERNEL_UNARY, NK_KERNEL_UNARY_BACKWARD): every op
 * against a double-precision reference written here from the definitions
 * (not the kernel's formulas), in float32, float64, float16 and bfloat16;
 * integral and bool ops exactly (wrapping); predicates on every class;
 * mixed dtypes; transposed, broadcast (stride 0), 0-dim, 0-size and
 * parallel-size operands (the vector loops run in the avx2/avx512
 * children); the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

#define PI_D 3.14159265358979323846

/* ---------------------------------------------------------------- reference */

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
static double clampd(double x, double lo, double hi) {
  if (isnan(x)) return x;
  return x < lo ? lo : x > hi ? hi : x;
}
static double erfinv_ref(double y) { /* bisection on erf */
  if (isnan(y) || y < -1 || y > 1) return NAN;
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  double lo = -7, hi = 7;
  for (int k = 0; k < 200; k++) {
    double mid = 0.5 * (lo + hi);
    if (erf(mid) < y) lo = mid; else hi = mid;
  }
  return 0.5 * (lo + hi);
}
static double digamma_ref(double x) { /* derivative of lgamma, x > 0 */
  if (isinf(x) || isnan(x)) return x;
  double h = 1e-5 * (x > 1 ? x : 1);
  return (lgamma(x + h) - lgamma(x - h)) / (2 * h);
}

static double ref_unary(nk_unary_op op, double x, const double *p) {
  switch (op) {
  case NK_UNARY_ABS: return fabs(x);
  case NK_UNARY_NEG: return -x;
  case NK_UNARY_SIGN: return isnan(x) ? 0 : x > 0 ? 1 : x < 0 ? -1 : 0;
  case NK_UNARY_EXP: return exp(x);
  case NK_UNARY_EXP2: return pow(2, x);
  case NK_UNARY_EXPM1: return expm1(x);
  case NK_UNARY_LOG: return log(x);
  case NK_UNARY_LOG2: return log(x) / log(2);
  case NK_UNARY_LOG10: return log(x) / log(10);
  case NK_UNARY_LOG1P: return log1p(x);
  case NK_UNARY_SQRT: return sqrt(x);
  case NK_UNARY_RSQRT: return 1 / sqrt(x);
  case NK_UNARY_RECIPROCAL: return 1 / x;
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
  case NK_UNARY_SIGMOID: return sigm(x);
  case NK_UNARY_LOGIT: {
    if (p[0] >= 0) x = clampd(x, p[0], 1 - p[0]);
    return log(x) - log1p(-x);
  }
  case NK_UNARY_ERF: return erf(x);
  case NK_UNARY_ERFC: return erfc(x);
  case NK_UNARY_ERFINV: return erfinv_ref(x);
  case NK_UNARY_LGAMMA: return lgamma(x);
  case NK_UNARY_DIGAMMA: return digamma_ref(x);
  case NK_UNARY_FLOOR: return floor(x);
  case NK_UNARY_CEIL: return ceil(x);
  case NK_UNARY_ROUND: return nearbyint(x);
  case NK_UNARY_ROUND_DECIMALS: return nearbyint(x * 100) / 100; /* decimals = 2 */
  case NK_UNARY_TRUNC: return trunc(x);
  case NK_UNARY_FRAC: return isinf(x) ? NAN : fmod(x, 1.0);
  case NK_UNARY_RELU: return isnan(x) ? x : x > 0 ? x : 0;
  case NK_UNARY_CLAMP: return clampd(x, p[0], p[1]);
  case NK_UNARY_GELU: return 0.5 * x * (1 + erf(x / sqrt(2)));
  case NK_UNARY_GELU_TANH:
    return 0.5 * x * (1 + tanh(sqrt(2 / PI_D) * (x + 0.044715 * x * x * x)));
  case NK_UNARY_SILU: return x * sigm(x);
  case NK_UNARY_MISH: return x * tanh(log1p(exp(x)));
  case NK_UNARY_SOFTPLUS: return p[0] * x > p[1] ? x : log1p(exp(p[0] * x)) / p[0];
  case NK_UNARY_ELU: return x > 0 ? p[1] * x : p[1] * p[0] * (exp(p[2] * x) - 1);
  case NK_UNARY_LEAKY_RELU: return x > 0 ? x : p[0] * x;
  case NK_UNARY_HARDSIGMOID: return clampd(x / 6 + 0.5, 0, 1);
  case NK_UNARY_HARDSWISH: return x * clampd(x / 6 + 0.5, 0, 1);
  case NK_UNARY_NAN_TO_NUM: return isnan(x) ? p[0] : x == INFINITY ? p[1] : x == -INFINITY ? p[2] : x;
  case NK_UNARY_SINC: return x == 0 ? 1 : sin(PI_D * x) / (PI_D * x);
  case NK_UNARY_HARDSHRINK: return fabs(x) <= p[0] ? 0 : x;
  case NK_UNARY_SOFTSHRINK: return isnan(x) ? x : x > p[0] ? x - p[0] : x < -p[0] ? x + p[0] : 0;
  case NK_UNARY_LOG_SIGMOID: return x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x));
  default: return NAN;
  }
}

static double ref_backward(nk_unary_backward_op op, double g, double x, const double *p) {
  switch (op) {
  case NK_UNARY_BW_SIGMOID: return g * x * (1 - x); /* x is the result */
  case NK_UNARY_BW_TANH: return g * (1 - x * x);
  case NK_UNARY_BW_LOGIT:
    if (p[0] >= 0 && (x < p[0] || x > 1 - p[0])) return 0;
    return g / (x * (1 - x));
  case NK_UNARY_BW_GELU: return g * (0.5 * (1 + erf(x / sqrt(2))) + x * exp(-x * x / 2) / sqrt(2 * PI_D));
  case NK_UNARY_BW_GELU_TANH: {
    double k = sqrt(2 / PI_D), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
  }
  case NK_UNARY_BW_SILU: return g * (sigm(x) + x * sigm(x) * (1 - sigm(x)));
  case NK_UNARY_BW_MISH: {
    double sp = log1p(exp(x)), t = tanh(sp);
    return g * (t + x * (1 - t * t) * sigm(x));
  }
  case NK_UNARY_BW_SOFTPLUS: return p[0] * x > p[1] ? g : g * sigm(p[0] * x);
  case NK_UNARY_BW_ELU: return x > 0 ? g * p[1] : g * p[1] * p[0] * p[2] * exp(p[2] * x);
  case NK_UNARY_BW_ELU_RESULT: /* x = elu's result y: dy/dx = input_scale * (y + alpha*scale) */
    return x > 0 ? g * p[1] : g * p[2] * (x + p[0] * p[1]);
  case NK_UNARY_BW_LEAKY_RELU: return g > 0 ? x : x * p[0]; /* operands (x, grad) */
  case NK_UNARY_BW_HARDTANH: return x > p[0] && x < p[1] ? g : 0;
  case NK_UNARY_BW_HARDSIGMOID: return x > -3 && x < 3 ? g / 6 : 0;
  case NK_UNARY_BW_HARDSWISH: return x < -3 ? 0 : x <= 3 ? g * (2 * x + 3) / 6 : g;
  case NK_UNARY_BW_THRESHOLD: return g <= p[0] ? p[1] : x; /* operands (x, other) */
  case NK_UNARY_BW_SHRINK: return fabs(x) <= p[0] ? 0 : g;
  case NK_UNARY_BW_LOG_SIGMOID: return g * sigm(-x);
  default: return NAN;
  }
}

/* got is close to want: both NaN, equal infinities, or within rel/abs */
static int close_to(double got, double want, double rel, double abs_tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

static double load_as_double(nrt_dtype t, const void *p) {
  switch (t) {
  case NRT_FLOAT16: return tk_f16_value(*(const uint16_t *)p);
  case NRT_BFLOAT16: return tk_bf16_value(*(const uint16_t *)p);
  case NRT_FLOAT32: return *(const float *)p;
  case NRT_FLOAT64: return *(const double *)p;
  default: return 0;
  }
}

/* the reference rounded to dtype t (overflow becomes inf, as the kernel's) */
static double to_dtype(nrt_dtype t, double v) {
  if (t == NRT_FLOAT16) return tk_f16_value(tk_f16_bits(v));
  if (t == NRT_BFLOAT16) return tk_bf16_value(tk_bf16_bits(v));
  if (t == NRT_FLOAT32) return (float)v;
  return v;
}

static double tol_rel(nrt_dtype t) {
  return t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : t == NRT_FLOAT16 ? 2e-3 : 1.6e-2;
}

static nk_unary_params uparams(int op, nrt_dtype compute, const double *p) {
  nk_unary_params prm = {op, compute, {{0, 0}, {0, 0}, {0, 0}}};
  for (int k = 0; k < 3; k++) prm.p[k] = (nk_scalar){p[k], (int64_t)p[k]};
  return prm;
}

static const double inputs[] = {-3.7, -1.5, -0.75, -0.3, -0.0, 0.0,  0.2,   0.5,  0.9,
                                1.0,  1.7,  2.5,   4.2,  10.0, 25.0, NAN, INFINITY, -INFINITY};
#define N_INPUTS ((int64_t)(sizeof inputs / sizeof inputs[0]))

/* one op over `inputs` in floating dtype t (out, x and compute all t) */
static int check_float_op(nk_unary_op op, nrt_dtype t, const double *p) {
  int64_t n = N_INPUTS, es = tk_size(t);
  char *x = tk_alloc((size_t)(n * es)), *o = tk_alloc((size_t)(n * es));
  for (int64_t i = 0; i < n; i++) {
    double v = inputs[i];
    if (op == NK_UNARY_ERFINV) v = v / 4.0; /* keep most inside [-1, 1] */
    if (op == NK_UNARY_DIGAMMA) v = fabs(v) + 0.25;
    if (op == NK_UNARY_LGAMMA && v < 0 && v == trunc(v)) v = 0.5;
    tk_put(t, x + i * es, (tk_value){0, 0, v});
  }
  nrt_operand ops[2] = {tk_vector(o, t, n), tk_vector(x, t, n)};
  nk_unary_params prm = uparams(op, t, p);
  nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  int ok = tk_run(&task) == NRT_SUCCESS;
  for (int64_t i = 0; ok && i < n; i++) {
    double xv = load_as_double(t, x + i * es), got = load_as_double(t, o + i * es);
    double want = to_dtype(t, ref_unary(op, xv, p));
    double abs_tol = t == NRT_FLOAT64 ? 1e-13 : t == NRT_FLOAT32 ? 2e-6 : 1e-3;
    if (op == NK_UNARY_DIGAMMA) abs_tol = 1e-6; /* the reference is a difference quotient */
    if (op == NK_UNARY_LOGIT) abs_tol *= 10;
    double rel = tol_rel(t);
    if (op == NK_UNARY_DIGAMMA && rel < 1e-5) rel = 1e-5;
    if (!close_to(got, want, rel, abs_tol)) {
      fprintf(stderr, "  op %d dtype %s x=%.9g: got %.12g want %.12g\n", (int)op, tk_dtype_names[t], xv,
              got, want);
      ok = 0;
    }
  }
  tk_free(x);
  tk_free(o);
  return ok;
}

static void test_float_ops(void) {
  static const double none[3] = {0, 0, 0};
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_FLOAT16, NRT_BFLOAT16};
  for (int d = 0; d < 4; d++) {
    for (int op = NK_UNARY_ABS; op < NK_UNARY_POLYGAMMA; op++) { /* polygamma: special values */
      const double *p = none;
      static const double logit_none[3] = {-1, 0, 0}, logit_eps[3] = {0.25, 0, 0};
      static const double clamp[3] = {-0.5, 2.0, 0}, softplus[3] = {2.0, 3.0, 0};
      static const double elu[3] = {1.3, 1.1, 0.7}, leaky[3] = {0.1, 0, 0};
      static const double n2n[3] = {7.0, 1000.0, -2000.0}, dec[3] = {2, 0, 0}, lambd[3] = {0.5, 0, 0};
      switch (op) {
      case NK_UNARY_LOGIT: p = logit_none; break;
      case NK_UNARY_CLAMP: p = clamp; break;
      case NK_UNARY_SOFTPLUS: p = softplus; break;
      case NK_UNARY_ELU: p = elu; break;
      case NK_UNARY_LEAKY_RELU: p = leaky; break;
      case NK_UNARY_NAN_TO_NUM: p = n2n; break;
      case NK_UNARY_ROUND_DECIMALS: p = dec; break;
      case NK_UNARY_HARDSHRINK: case NK_UNARY_SOFTSHRINK: p = lambd; break;
      default: break;
      }
      /* float16/bfloat16: round-decimals compares to a decimal value the
       * narrow dtype cannot hold; check it only in float32/64 */
      if (op == NK_UNARY_ROUND_DECIMALS && (dts[d] == NRT_FLOAT16 || dts[d] == NRT_BFLOAT16)) continue;
      if (!check_float_op((nk_unary_op)op, dts[d], p)) {
        fprintf(stderr, "  (float op %d in %s)\n", op, tk_dtype_names[dts[d]]);
        CHECK(0);
      } else {
        CHECK(1);
      }
      if (op == NK_UNARY_LOGIT) CHECK(check_float_op(NK_UNARY_LOGIT, dts[d], logit_eps));
    }
  }
}

/* digamma and erfinv at known points, float64 */
static void test_special_values(void) {
  double xs[] = {1.0, 0.5, -0.5, 0.0, -0.0, -2.0, 100.0};
  double want[] = {-0.57721566490153286, -1.9635100260214235, 0.03648997397857652, -INFINITY,
                   INFINITY, NAN, 4.6001618527380874};
  double *x = tk_alloc(sizeof xs), *o = tk_alloc(sizeof xs);
  memcpy(x, xs, sizeof xs);
  nrt_operand ops[2] = {tk_vector(o, NRT_FLOAT64, 7), tk_vector(x, NRT_FLOAT64, 7)};
  double none[3] = {0, 0, 0};
  nk_unary_params prm = uparams(NK_UNARY_DIGAMMA, NRT_FLOAT64, none);
  nrt_task t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  for (int i = 0; i < 7; i++) CHECK(close_to(o[i], want[i], 1e-13, 1e-15));
  /* erf(erfinv(y)) == y to double precision, also in the tails */
  double ys[] = {1e-300, 0.3, -0.5, 0.75, -0.999, 0.999999999, 1.0 - 0x1p-53, 1.0, -1.0};
  memcpy(x, ys, sizeof ys);
  ops[0] = tk_vector(o, NRT_FLOAT64, 9);
  ops[1] = tk_vector(x, NRT_FLOAT64, 9);
  prm = uparams(NK_UNARY_ERFINV, NRT_FLOAT64, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  for (int i = 0; i < 7; i++) {
    if (fabs(ys[i]) <= 0.5)
      CHECK(close_to(erf(o[i]), ys[i], 4e-16, 0));
    else
      /* erfc's relative slope is 2x: x within 4e-15 relative */
      CHECK(close_to(erfc(fabs(o[i])), 1 - fabs(ys[i]), 2 * o[i] * o[i] * 4e-15 + 4e-16, 0) &&
            signbit(o[i]) == signbit(ys[i]));
  }
  CHECK(o[7] == INFINITY && o[8] == -INFINITY);
  /* polygamma(n, x) at known points: psi1(1) = pi^2/6, psi2(1) = -2 zeta(3),
   * psi3(1/2) = pi^4, psi1(-0.5) = pi^2/2 + 4, psi0 = digamma */
  struct { int64_t n; double x, want; } pg[] = {
      {1, 1.0, PI_D * PI_D / 6}, {2, 1.0, -2.4041138063191885}, {3, 0.5, 97.409091034002437},
      {1, -0.5, PI_D * PI_D / 2 + 4}, {0, 1.0, -0.57721566490153286}, {4, 2.0, 24 - 24 * 1.0369277551433699}};
  for (int i = 0; i < 6; i++) {
    double pp[3] = {(double)pg[i].n, 0, 0};
    x[0] = pg[i].x;
    ops[0] = tk_vector(o, NRT_FLOAT64, 1);
    ops[1] = tk_vector(x, NRT_FLOAT64, 1);
    prm = uparams(NK_UNARY_POLYGAMMA, NRT_FLOAT64, pp);
    t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
    CHECK_OK(tk_run(&t));
    /* trigamma is ATen's short asymptotic series: about 5e-10 relative */
    double rel = pg[i].n == 1 ? 1e-9 : 1e-12;
    if (!close_to(o[0], pg[i].want, rel, 0))
      fprintf(stderr, "  polygamma(%lld, %g) = %.17g, want %.17g\n", (long long)pg[i].n, pg[i].x, o[0], pg[i].want);
    CHECK(close_to(o[0], pg[i].want, rel, 0));
  }
  tk_free(x);
  tk_free(o);
}

/* ------------------------------------------------------- integral and bool */

static int64_t wrap(nrt_dtype t, uint64_t v) {
  int bits = 8 * (int)tk_size(t);
  if (bits == 64) return (int64_t)v;
  v &= (1ull << bits) - 1;
  if (t != NRT_UINT8 && v >= (1ull << (bits - 1))) return (int64_t)(v - (1ull << bits));
  return (int64_t)v;
}

static int64_t ref_int(nk_unary_op op, nrt_dtype t, int64_t x, int64_t lo, int64_t hi) {
  switch (op) {
  case NK_UNARY_ABS: return wrap(t, x < 0 ? 0 - (uint64_t)x : (uint64_t)x);
  case NK_UNARY_NEG: return wrap(t, 0 - (uint64_t)x);
  case NK_UNARY_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
  case NK_UNARY_RELU: return x > 0 ? x : 0;
  case NK_UNARY_CLAMP: return x < lo ? lo : x > hi ? hi : x;
  default: return wrap(t, ~(uint64_t)x); /* bitwise_not */
  }
}

static void test_integral(void) {
  static const nrt_dtype dts[] = {NRT_UINT8, NRT_INT8, NRT_INT16, NRT_INT32, NRT_INT64};
  static const nk_unary_op ops_i[] = {NK_UNARY_ABS, NK_UNARY_NEG, NK_UNARY_SIGN, NK_UNARY_RELU,
                                      NK_UNARY_CLAMP, NK_UNARY_BITWISE_NOT};
  static const int64_t vals[] = {INT64_MIN, -40000, -128, -5, -1, 0, 1, 7, 127, 255, 40000, INT64_MAX};
  const int64_t n = sizeof vals / sizeof vals[0];
  for (int d = 0; d < 5; d++) {
    nrt_dtype t = dts[d];
    int64_t es = tk_size(t);
    char *x = tk_alloc((size_t)(n * es)), *o = tk_alloc((size_t)(n * es));
    for (int64_t i = 0; i < n; i++) tk_put(t, x + i * es, (tk_value){1, wrap(t, (uint64_t)vals[i]), 0});
    for (int k = 0; k < 6; k++) {
      double p[3] = {-3, 100, 0};
      nrt_operand ops[2] = {tk_vector(o, t, n), tk_vector(x, t, n)};
      nk_unary_params prm = uparams(ops_i[k], t, p);
      nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
      CHECK_OK(tk_run(&task));
      int ok = 1;
      for (int64_t i = 0; i < n; i++) {
        int64_t xv = wrap(t, (uint64_t)vals[i]);
        uint64_t want = (uint64_t)ref_int(ops_i[k], t, xv, -3, 100) & tk_raw_mask(t);
        if (tk_raw(t, o + i * es) != want) {
          fprintf(stderr, "  int op %d %s x=%lld: got %llx want %llx\n", (int)ops_i[k], tk_dtype_names[t],
                  (long long)xv, (unsigned long long)tk_raw(t, o + i * es), (unsigned long long)want);
          ok = 0;
        }
      }
      CHECK(ok);
    }
    tk_free(x);
    tk_free(o);
  }
  /* bool: sign is x, bitwise_not is !x */
  uint8_t *b = tk_alloc(4), *r = tk_alloc(4);
  b[0] = 0, b[1] = 1, b[2] = 1, b[3] = 0;
  nrt_operand ops[2] = {tk_vector(r, NRT_BOOL, 4), tk_vector(b, NRT_BOOL, 4)};
  double none[3] = {0, 0, 0};
  nk_unary_params prm = uparams(NK_UNARY_BITWISE_NOT, NRT_BOOL, none);
  nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(r[0] == 1 && r[1] == 0 && r[2] == 0 && r[3] == 1);
  prm = uparams(NK_UNARY_SIGN, NRT_BOOL, none);
  task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(r[0] == 0 && r[1] == 1 && r[2] == 1 && r[3] == 0);
  tk_free(b);
  tk_free(r);
}

/* -------------------------------------------------------------- predicates */

/* x's value as a double, decoded here from its bits (not by the kernels'
 * conversions), for the dense predicate rows' reference */
static double decode(nrt_dtype t, const void *p) {
  uint64_t b = tk_raw(t, p);
  switch (t) {
  case NRT_FLOAT64: { double d; memcpy(&d, &b, 8); return d; }
  case NRT_FLOAT32: { uint32_t u = (uint32_t)b; float f; memcpy(&f, &u, 4); return f; }
  case NRT_BFLOAT16: { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
  default: { /* float16 */
    const int sign = (int)(b >> 15) & 1, e = (int)(b >> 10) & 31, m = (int)b & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return sign ? -v : v;
  }
  }
}

static bool ref_pred(int k, double v) {
  switch (k) {
  case 0: return isnan(v);
  case 1: return isinf(v);
  case 2: return v == INFINITY;
  case 3: return v == -INFINITY;
  case 4: return isfinite(v);
  case 5: return signbit(v) != 0;
  default: return v == 0; /* logical_not: NaN is true */
  }
}

/* Dense rows of the predicates (unary_rows.c): every bit pattern of the
 * 16-bit dtypes, and for float32/float64 the special values (NaNs of both
 * signs, quiet and signalling, with payloads; infinities; zeros;
 * subnormals; the largest finite) among random bits, in rows long enough
 * for the vector loops and their tails. */
static void test_predicates_dense(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT16, NRT_BFLOAT16, NRT_FLOAT64};
  static const uint64_t special32[] = {0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF,
                                       0x7F800000, 0xFF800000, 0, 0x80000000, 1, 0x80000001,
                                       0x007FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000};
  static const uint64_t special64[] = {0x7FF8000000000000ull, 0xFFF8000000000000ull, 0x7FF0000000000001ull,
                                       0xFFF0000000000001ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull,
                                       0, 0x8000000000000000ull, 1, 0x800FFFFFFFFFFFFFull,
                                       0x7FEFFFFFFFFFFFFFull, 0x3FF0000000000000ull};
  double none[3] = {0, 0, 0};
  for (int d = 0; d < 4; d++) {
    const nrt_dtype t = dts[d];
    const int64_t es = tk_size(t), n = es == 2 ? 65536 : 4099;
    unsigned char *x = tk_alloc((size_t)(n * es));
    uint8_t *o = tk_alloc((size_t)n);
    for (int64_t i = 0; i < n; i++) {
      uint64_t b = es == 2 ? (uint64_t)i : tk_rand();
      if (es == 4 && i < (int64_t)(sizeof special32 / 8)) b = special32[i];
      if (es == 8 && i < (int64_t)(sizeof special64 / 8)) b = special64[i];
      memcpy(x + i * es, &b, (size_t)es); /* little-endian: the low bytes */
    }
    for (int k = 0; k < 7; k++) {
      nrt_operand ops[2] = {tk_vector(o, NRT_BOOL, n), tk_vector(x, t, n)};
      nk_unary_params prm = uparams(NK_UNARY_ISNAN + k, t, none);
      nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
      CHECK_OK(tk_run(&task));
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) bad += o[i] != ref_pred(k, decode(t, x + i * es));
      if (bad) fprintf(stderr, "  dense predicate %d on %s: %lld wrong\n", k, tk_dtype_names[t], (long long)bad);
      CHECK(bad == 0);
    }
    tk_free(x);
    tk_free(o);
  }
}

/* Dense rows of the integral ops and of bitwise_not on bool
 * (unary_rows.c): the dtype's minimum (negation wraps) and random values
 * in rows of 1001, against ref_int. */
static void test_integral_dense(void) {
  static const nrt_dtype dts[] = {NRT_UINT8, NRT_INT8, NRT_INT16, NRT_INT32, NRT_INT64};
  static const nk_unary_op ops_i[] = {NK_UNARY_ABS, NK_UNARY_NEG, NK_UNARY_SIGN, NK_UNARY_RELU,
                                      NK_UNARY_BITWISE_NOT};
  const int64_t n = 1001;
  double none[3] = {0, 0, 0};
  for (int d = 0; d < 5; d++) {
    const nrt_dtype t = dts[d];
    const int64_t es = tk_size(t);
    char *x = tk_alloc((size_t)(n * es)), *o = tk_alloc((size_t)(n * es));
    for (int64_t i = 0; i < n; i++) tk_put(t, x + i * es, (tk_value){1, wrap(t, i < 3 ? (uint64_t)1 << (8 * es - 1) : tk_rand()), 0});
    for (int k = 0; k < 5; k++) {
      nrt_operand ops[2] = {tk_vector(o, t, n), tk_vector(x, t, n)};
      nk_unary_params prm = uparams(ops_i[k], t, none);
      nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
      CHECK_OK(tk_run(&task));
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) {
        const int64_t xv = wrap(t, tk_raw(t, x + i * es));
        bad += tk_raw(t, o + i * es) != ((uint64_t)ref_int(ops_i[k], t, xv, 0, 0) & tk_raw_mask(t));
      }
      if (bad) fprintf(stderr, "  dense int op %d on %s: %lld wrong\n", (int)ops_i[k], tk_dtype_names[t], (long long)bad);
      CHECK(bad == 0);
    }
    tk_free(x);
    tk_free(o);
  }
  uint8_t *b = tk_alloc((size_t)n), *r = tk_alloc((size_t)n);
  for (int64_t i = 0; i < n; i++) b[i] = (uint8_t)(tk_rand() & 1);
  nrt_operand ops[2] = {tk_vector(r, NRT_BOOL, n), tk_vector(b, NRT_BOOL, n)};
  nk_unary_params prm = uparams(NK_UNARY_BITWISE_NOT, NRT_BOOL, none);
  nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += r[i] != !b[i];
  CHECK(bad == 0);
  tk_free(b);
  tk_free(r);
}

static void test_predicates(void) {
  static const float fv[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1.5f, -2.0f};
  /* isnan isinf isposinf isneginf isfinite signbit logical_not */
  static const uint8_t want[7][7] = {
      {1, 0, 0, 0, 0, 0, 0}, {0, 1, 1, 0, 0, 0, 0}, {0, 1, 0, 1, 0, 1, 0}, {0, 0, 0, 0, 1, 1, 1},
      {0, 0, 0, 0, 1, 0, 1}, {0, 0, 0, 0, 1, 0, 0}, {0, 0, 0, 0, 1, 1, 0}};
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT16, NRT_BFLOAT16, NRT_FLOAT64};
  double none[3] = {0, 0, 0};
  for (int d = 0; d < 4; d++) {
    nrt_dtype t = dts[d];
    int64_t es = tk_size(t);
    char *x = tk_alloc((size_t)(7 * es));
    uint8_t *o = tk_alloc(7);
    for (int i = 0; i < 7; i++) tk_put(t, x + i * es, (tk_value){0, 0, fv[i]});
    for (int k = 0; k < 7; k++) {
      nrt_operand ops[2] = {tk_vector(o, NRT_BOOL, 7), tk_vector(x, t, 7)};
      nk_unary_params prm = uparams(NK_UNARY_ISNAN + k, t, none);
      nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
      CHECK_OK(tk_run(&task));
      int ok = 1;
      for (int i = 0; i < 7; i++) ok &= o[i] == want[i][k];
      if (!ok) fprintf(stderr, "  predicate %d on %s\n", k, tk_dtype_names[t]);
      CHECK(ok);
    }
    tk_free(x);
    tk_free(o);
  }
  /* integers: never nan/inf, finite; signbit is x < 0; logical_not into float32 */
  int32_t *xi = tk_alloc(12);
  xi[0] = -4, xi[1] = 0, xi[2] = 9;
  float *of = tk_alloc(12);
  uint8_t *ob = tk_alloc(3);
  nrt_operand ops[2] = {tk_vector(of, NRT_FLOAT32, 3), tk_vector(xi, NRT_INT32, 3)};
  nk_unary_params prm = uparams(NK_UNARY_LOGICAL_NOT, NRT_INT32, none);
  nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(of[0] == 0.0f && of[1] == 1.0f && of[2] == 0.0f);
  ops[0] = tk_vector(ob, NRT_BOOL, 3);
  static const int expect_i[7][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}};
  for (int k = 0; k < 7; k++) {
    prm = uparams(NK_UNARY_ISNAN + k, NRT_INT32, none);
    task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
    CHECK_OK(tk_run(&task));
    CHECK(ob[0] == expect_i[k][0] && ob[1] == expect_i[k][1] && ob[2] == expect_i[k][2]);
  }
  tk_free(xi);
  tk_free(of);
  tk_free(ob);
}

/* ------------------------------------------------------------------ layouts */

static void test_layouts(void) {
  double none[3] = {0, 0, 0};
  /* int32 input, float32 compute, float64 out (exp of an integer tensor
   * with a float64 out=): the result is rounded to float32 first */
  int32_t *xi = tk_alloc(16);
  double *od = tk_alloc(32);
  for (int i = 0; i < 4; i++) xi[i] = i - 1;
  nrt_operand ops[2] = {tk_vector(od, NRT_FLOAT64, 4), tk_vector(xi, NRT_INT32, 4)};
  nk_unary_params prm = uparams(NK_UNARY_EXP, NRT_FLOAT32, none);
  nrt_task t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  for (int i = 0; i < 4; i++) CHECK(od[i] == (double)expf((float)(i - 1)));
  tk_free(xi);
  tk_free(od);

  /* transposed 2-d input (257 x 130), contiguous out; broadcast input */
  int64_t sz[2] = {257, 130}, tr[2] = {1, 257};
  float *x = tk_alloc(257 * 130 * 4), *o = tk_alloc(257 * 130 * 4);
  for (int64_t i = 0; i < 257 * 130; i++) x[i] = (float)((i % 97) - 48) / 16.0f;
  ops[0] = tk_operand(o, NRT_FLOAT32, 2, sz, NULL);
  ops[1] = tk_operand(x, NRT_FLOAT32, 2, sz, tr);
  prm = uparams(NK_UNARY_TANH, NRT_FLOAT32, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  int ok = 1;
  for (int64_t i = 0; i < 257; i++)
    for (int64_t j = 0; j < 130; j++) ok &= close_to(o[i * 130 + j], tanh(x[j * 257 + i]), 1e-5, 2e-6);
  CHECK(ok);
  int64_t zero_strides[2] = {0, 0};
  ops[1] = tk_operand(x + 5, NRT_FLOAT32, 2, sz, zero_strides);
  prm = uparams(NK_UNARY_SIGMOID, NRT_FLOAT32, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  ok = 1;
  for (int64_t i = 0; i < 257 * 130; i++) ok &= o[i] == o[0];
  CHECK(ok && close_to(o[0], sigm(x[5]), 1e-6, 0));

  /* 0-dim and 0-size */
  ops[0] = tk_operand(o, NRT_FLOAT32, 0, NULL, NULL);
  ops[1] = tk_operand(x + 1, NRT_FLOAT32, 0, NULL, NULL);
  prm = uparams(NK_UNARY_NEG, NRT_FLOAT32, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  CHECK(o[0] == -x[1]);
  int64_t empty[2] = {0, 3};
  ops[0] = tk_operand(NULL, NRT_FLOAT32, 2, empty, NULL);
  ops[1] = tk_operand(NULL, NRT_FLOAT32, 2, empty, NULL);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  tk_free(x);
  tk_free(o);
}

/* Sizes that take the parallel path and the vector loops (with ragged
 * tails): each hot op against the reference, and in place (out == x). */
static void test_parallel(void) {
  const int64_t n = 300007;
  float *x = tk_alloc((size_t)n * 4), *o = tk_alloc((size_t)n * 4), *y = tk_alloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(((i * 7919) % 20001) - 10000) / 1000.0f; /* [-10, 10] */
  x[3] = NAN, x[4] = INFINITY, x[5] = -INFINITY, x[6] = 100.0f, x[7] = -100.0f, x[8] = -0.0f;
  static const nk_unary_op hot[] = {NK_UNARY_EXP, NK_UNARY_TANH, NK_UNARY_SIGMOID, NK_UNARY_GELU,
                                    NK_UNARY_GELU_TANH, NK_UNARY_SILU, NK_UNARY_RELU, NK_UNARY_ERF,
                                    NK_UNARY_ABS, NK_UNARY_NEG};
  double none[3] = {0, 0, 0};
  for (size_t k = 0; k < sizeof hot / sizeof hot[0]; k++) {
    nrt_operand ops[2] = {tk_vector(o, NRT_FLOAT32, n), tk_vector(x, NRT_FLOAT32, n)};
    nk_unary_params prm = uparams(hot[k], NRT_FLOAT32, none);
    nrt_task t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
    CHECK_OK(tk_run(&t));
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
      double want = (float)ref_unary(hot[k], x[i], none);
      if (!close_to(o[i], want, 4e-6, 2e-7)) {
        fprintf(stderr, "  hot op %d x=%.9g: got %.9g want %.9g\n", (int)hot[k], x[i], o[i], want);
        ok = 0;
      }
    }
    CHECK(ok);
    memcpy(y, x, (size_t)n * 4); /* in place gives the same bits */
    ops[0] = tk_vector(y, NRT_FLOAT32, n);
    ops[1] = tk_vector(y, NRT_FLOAT32, n);
    t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
    CHECK_OK(tk_run(&t));
    CHECK(memcmp(y, o, (size_t)n * 4) == 0);
  }
  tk_free(x);
  tk_free(o);
  tk_free(y);
}

/* ----------------------------------------------------------------- backward */

static int check_backward(nk_unary_backward_op op, nrt_dtype t, const double *p) {
  const int64_t n = 12;
  static const double xs[12] = {-4.0, -2.5, -1.0, -0.4, 0.0, 0.1, 0.3, 0.7, 1.0, 2.0, 3.5, 30.0};
  static const double gs[12] = {1.0, -0.5, 2.0, 0.25, -1.0, 3.0, 1.5, -2.0, 0.5, 1.0, -1.5, 2.0};
  int64_t es = tk_size(t);
  char *g = tk_alloc((size_t)(n * es)), *x = tk_alloc((size_t)(n * es)), *o = tk_alloc((size_t)(n * es));
  const int swapped = op == NK_UNARY_BW_LEAKY_RELU || op == NK_UNARY_BW_THRESHOLD;
  for (int64_t i = 0; i < n; i++) {
    double xv = xs[i];
    if (op == NK_UNARY_BW_SIGMOID || op == NK_UNARY_BW_LOGIT) xv = sigm(xv); /* in (0, 1) */
    if (op == NK_UNARY_BW_TANH) xv = tanh(xv);
    tk_put(t, (swapped ? g : x) + i * es, (tk_value){0, 0, xv});
    tk_put(t, (swapped ? x : g) + i * es, (tk_value){0, 0, gs[i]});
  }
  nrt_operand ops[3] = {tk_vector(o, t, n), tk_vector(g, t, n), tk_vector(x, t, n)};
  nk_unary_params prm = uparams(op, t, p);
  nrt_task task = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, ops, &prm, sizeof prm);
  int ok = tk_run(&task) == NRT_SUCCESS;
  for (int64_t i = 0; ok && i < n; i++) {
    double gv = load_as_double(t, g + i * es), xv = load_as_double(t, x + i * es);
    double got = load_as_double(t, o + i * es), want = to_dtype(t, ref_backward(op, gv, xv, p));
    if (!close_to(got, want, tol_rel(t) * 4, t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : 2e-2)) {
      fprintf(stderr, "  bw op %d %s g=%g x=%g: got %.12g want %.12g\n", (int)op, tk_dtype_names[t], gv, xv,
              got, want);
      ok = 0;
    }
  }
  tk_free(g);
  tk_free(x);
  tk_free(o);
  return ok;
}

static void test_backward(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  for (int d = 0; d < 4; d++) {
    for (int op = 0; op < NK_UNARY_BW_OP_COUNT; op++) {
      double p[3] = {0, 0, 0};
      switch (op) {
      case NK_UNARY_BW_LOGIT: p[0] = -1; break;
      case NK_UNARY_BW_SOFTPLUS: p[0] = 2, p[1] = 3; break;
      case NK_UNARY_BW_ELU: case NK_UNARY_BW_ELU_RESULT: p[0] = 1.3, p[1] = 1.1, p[2] = 0.7; break;
      case NK_UNARY_BW_LEAKY_RELU: p[0] = 0.1; break;
      case NK_UNARY_BW_HARDTANH: p[0] = -1, p[1] = 2; break;
      case NK_UNARY_BW_THRESHOLD: p[0] = 0.5, p[1] = 9; break;
      case NK_UNARY_BW_SHRINK: p[0] = 0.5; break;
      default: break;
      }
      int ok = check_backward((nk_unary_backward_op)op, dts[d], p);
      if (op == NK_UNARY_BW_LOGIT) {
        p[0] = 0.3;
        ok &= check_backward((nk_unary_backward_op)op, dts[d], p);
      }
      if (!ok) fprintf(stderr, "  (backward op %d in %s)\n", op, tk_dtype_names[dts[d]]);
      CHECK(ok);
    }
  }
  /* parallel-size float32 rows (the vector loops in the avx2/avx512 children) */
  {
    const int64_t n = 100003;
    float *g = tk_alloc((size_t)n * 4), *x = tk_alloc((size_t)n * 4), *o = tk_alloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
      x[i] = (float)(((i * 7919) % 20001) - 10000) / 1000.0f;
      g[i] = (float)((i % 7) - 3) / 2.0f;
    }
    x[5] = NAN, x[6] = INFINITY, x[7] = -INFINITY;
    static const nk_unary_backward_op hot[] = {NK_UNARY_BW_GELU, NK_UNARY_BW_GELU_TANH, NK_UNARY_BW_SILU,
                                               NK_UNARY_BW_SIGMOID, NK_UNARY_BW_TANH, NK_UNARY_BW_THRESHOLD};
    for (size_t k = 0; k < sizeof hot / sizeof hot[0]; k++) {
      double p[3] = {0.25, -3.0, 0};
      const int swapped = hot[k] == NK_UNARY_BW_THRESHOLD;
      nrt_operand ops[3] = {tk_vector(o, NRT_FLOAT32, n), tk_vector(swapped ? x : g, NRT_FLOAT32, n),
                            tk_vector(swapped ? g : x, NRT_FLOAT32, n)};
      nk_unary_params prm = uparams(hot[k], NRT_FLOAT32, p);
      nrt_task t = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, ops, &prm, sizeof prm);
      CHECK_OK(tk_run(&t));
      int ok = 1;
      for (int64_t i = 0; i < n && ok; i++) {
        /* sigmoid/tanh backward take the forward's result; any value checks the arithmetic */
        double want = swapped ? ref_backward(hot[k], x[i], g[i], p) : (float)ref_backward(hot[k], g[i], x[i], p);
        if (!close_to(o[i], want, 1e-5, 1e-5 * fabs(g[i]) + 1e-30)) {
          fprintf(stderr, "  bw hot op %d g=%g x=%.9g: got %.9g want %.9g\n", (int)hot[k], g[i], x[i], o[i], want);
          ok = 0;
        }
      }
      CHECK(ok);
    }
    tk_free(g);
    tk_free(x);
    tk_free(o);
  }
  /* threshold on int64 (relu's backward on an integer tensor) */
  int64_t *a = tk_alloc(32), *b = tk_alloc(32), *o = tk_alloc(32);
  for (int i = 0; i < 4; i++) a[i] = i - 1, b[i] = 10 * i;
  nrt_operand ops[3] = {tk_vector(o, NRT_INT64, 4), tk_vector(a, NRT_INT64, 4), tk_vector(b, NRT_INT64, 4)};
  double p[3] = {0, -7, 0};
  nk_unary_params prm = uparams(NK_UNARY_BW_THRESHOLD, NRT_INT64, p);
  nrt_task t = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  CHECK(o[0] == -7 && o[1] == -7 && o[2] == 20 && o[3] == 30);
  tk_free(a);
  tk_free(b);
  tk_free(o);
}

/* --------------------------------------------------------------- validation */

static void test_validation(void) {
  float *buf = tk_alloc(64);
  nrt_operand ops[3] = {tk_vector(buf, NRT_FLOAT32, 4), tk_vector(buf + 4, NRT_FLOAT32, 4),
                        tk_vector(buf + 8, NRT_FLOAT32, 4)};
  double none[3] = {0, 0, 0};
  nk_unary_params prm = uparams(NK_UNARY_EXP, NRT_FLOAT32, none);
  nrt_task t = tk_task(NK_KERNEL_UNARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "expected 2 operands, got 3"));
  prm.op = NK_UNARY_OP_COUNT;
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid op"));
  prm.op = -1;
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid op -1"));
  prm = uparams(NK_UNARY_EXP, 99, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid compute dtype 99"));
  prm = uparams(NK_UNARY_EXP, NRT_INT64, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "does not take compute dtype"));
  prm = uparams(NK_UNARY_NEG, NRT_BOOL, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "does not take compute dtype"));
  prm = uparams(NK_UNARY_BITWISE_NOT, NRT_FLOAT32, none);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "does not take compute dtype"));
  prm = uparams(NK_UNARY_EXP, NRT_FLOAT32, none);
  ops[1].sizes[0] = 3;
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "operand 1's shape differs"));
  ops[1].sizes[0] = 4;

  prm = uparams(NK_UNARY_BW_GELU, NRT_FLOAT32, none);
  t = tk_task(NK_KERNEL_UNARY_BACKWARD, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "expected 3 operands, got 2"));
  prm.op = NK_UNARY_BW_OP_COUNT;
  t = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid op"));
  prm = uparams(NK_UNARY_BW_GELU, NRT_INT32, none);
  t = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "does not take compute dtype"));
  prm = uparams(NK_UNARY_BW_GELU, -3, none);
  t = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid compute dtype -3"));
  tk_free(buf);
}

static void tests(void) {
  test_float_ops();
  test_special_values();
  test_integral();
  test_predicates();
  test_predicates_dense();
  test_integral_dense();
  test_layouts();
  test_parallel();
  test_backward();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
