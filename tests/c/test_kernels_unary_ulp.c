/* The float32 unary ops that have vector bodies (exp, exp2, expm1, log,
 * log2, log10, log1p, erf, erfc, sin, cos, atan, tanh, log_sigmoid) against a double reference, in ulps
 * of the float32 result, at every ISA level (tk_main: portable is the C
 * library's float functions, avx2 and avx512 the vector bodies), on:
 *   - the special values, checked bit-exactly (NaN stays NaN, the
 *     infinities, signed zeros, log of a negative, log(0) = -inf,
 *     exp's overflow and underflow thresholds);
 *   - random bit patterns over every float (huge, tiny, subnormal, negative);
 *   - random values in each op's busy range;
 * in one odd-length row, so the masked tail runs too.  The bounds are what
 * each body reaches plus a margin (measured on every 7th bit pattern: exp,
 * exp2, expm1, erf, tanh, sin, cos, log* <= 1.6 ulp, atan 2.3, erfc 3.4;
 * sin/cos beyond 2^17 are the C library's); a subnormal
 * result's ulp is the smallest subnormal.  Sigmoid and silu are ATen's
 * float formulas (1 / (1 + exp(-x))) and inherit exp's accuracy; they are
 * checked with the other hot ops in test_kernels_unary.c. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>

#include "test_kernels_util.h"

typedef struct ulp_case {
  nk_unary_op op;
  const char *name;
  double (*ref)(double);
  double max_ulp;
  double lo, hi; /* the busy range */
} ulp_case;

static double ref_exp2(double x) { return exp2(x); }
static double ref_log10(double x) { return log10(x); }
static double ref_log_sigmoid(double x) { return (x < 0 ? x : 0) - log1p(exp(-fabs(x))); }

static const ulp_case cases[] = {
    {NK_UNARY_EXP, "exp", exp, 2.0, -104, 89},
    {NK_UNARY_EXP2, "exp2", ref_exp2, 2.0, -150, 128},
    {NK_UNARY_EXPM1, "expm1", expm1, 2.0, -20, 89},
    {NK_UNARY_LOG, "log", log, 2.0, 0, 10},
    {NK_UNARY_LOG2, "log2", log2, 2.0, 0, 10},
    {NK_UNARY_LOG10, "log10", ref_log10, 2.0, 0, 10},
    {NK_UNARY_LOG1P, "log1p", log1p, 2.0, -1, 10},
    {NK_UNARY_ERF, "erf", erf, 2.0, -5, 5},
    {NK_UNARY_ERFC, "erfc", erfc, 4.5, -3, 10.5},
    {NK_UNARY_SIN, "sin", sin, 2.0, -100, 100},
    {NK_UNARY_COS, "cos", cos, 2.0, -100, 100},
    {NK_UNARY_ATAN, "atan", atan, 2.5, -5, 5},
    {NK_UNARY_TANH, "tanh", tanh, 2.5, -10, 10}, /* glibc's tanhf (portable) reaches 2.03 */
    {NK_UNARY_LOG_SIGMOID, "log_sigmoid", ref_log_sigmoid, 2.5, -20, 20}, /* reaches 1.83 */
};

/* distance from got to the exact want in units of the float32 ulp at want
 * (subnormals: the smallest subnormal); special values must match exactly
 * (0 or a huge number) */
static double ulp_error(float got, double want) {
  const float wf = (float)want;
  if (isnan(want)) return isnan(got) ? 0 : INFINITY;
  if (isnan(got)) return INFINITY;
  if (isinf(wf) || isinf(got)) return got == wf ? 0 : INFINITY;
  if (want == 0) return got == 0 && !signbit(got) == !signbit(want) ? 0 : INFINITY;
  int e;
  frexp(want, &e);
  double ulp = ldexp(1.0, e - 24);
  if (ulp < 0x1p-149) ulp = 0x1p-149;
  return fabs((double)got - want) / ulp;
}

static const float specials[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f,
    0x1p-126f, -0x1p-126f, 0x1.fffffcp-127f, FLT_MAX, -FLT_MAX, 88.72283f, 88.72284f, 89.0f,
    -87.33654f, -103.27893f, -103.97208f, -104.0f, 127.99999f, 128.0f, -126.0f, -149.0f, -150.0f,
    -151.0f, 1e-8f, -1e-8f, 1e-30f, -1e-30f, 0.5f, -0.5f, 0.625f, -0.625f, 0.9999999f, 1.0000001f,
    -0.9999999f, -0.99999994f, 2.0f, 4.0f, 3.92f, 10.0f, 10.06f, -10.0f, 0x1p-24f, -0x1p-25f,
    0.70710677f, 1.4142135f, 1e30f, -1e30f, 2.5f, 16777216.0f, 33554432.0f, -30.0f, -88.0f,
    131071.99f, 131072.0f, -131072.0f, 3.14159265f, 1.57079633f, -1.57079633f, 2.41421356f,
    0.41421356f, 0.41421357f, 1e10f};
#define N_SPECIALS ((int64_t)(sizeof specials / sizeof specials[0]))

static float rand_float_bits(void) {
  uint32_t u = (uint32_t)(tk_rand() >> 32);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_ulp(void) {
  const int64_t n = 200003; /* odd: the vector loops' masked tail runs */
  float *x = tk_alloc((size_t)n * 4), *o = tk_alloc((size_t)n * 4);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const ulp_case *c = &cases[k];
    int64_t i = 0;
    for (; i < N_SPECIALS; i++) x[i] = specials[i];
    for (; i < n / 2; i++) x[i] = rand_float_bits();
    for (; i < n; i++) x[i] = (float)(c->lo + (c->hi - c->lo) * ((double)(tk_rand() >> 11) * 0x1p-53));
    nrt_operand ops[2] = {tk_vector(o, NRT_FLOAT32, n), tk_vector(x, NRT_FLOAT32, n)};
    nk_unary_params prm = {c->op, NRT_FLOAT32, {{0, 0}, {0, 0}, {0, 0}}};
    nrt_task t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
    CHECK_OK(tk_run(&t));
    double worst = 0;
    int64_t at = 0, bad = 0;
    for (i = 0; i < n; i++) {
      const double err = ulp_error(o[i], c->ref((double)x[i]));
      if (err > c->max_ulp) bad++;
      if (!(err <= worst)) worst = err, at = i;
    }
    if (bad)
      fprintf(stderr, "  %s: %lld inputs above %.1f ulp; worst %.3g ulp at x=%.9g: got %.9g want %.9g\n",
              c->name, (long long)bad, c->max_ulp, worst, x[at], o[at], c->ref((double)x[at]));
    CHECK(bad == 0);
  }
  tk_free(x);
  tk_free(o);
}

static void tests(void) { test_ulp(); }

int main(void) { return tk_main(tests, __FILE__); }
