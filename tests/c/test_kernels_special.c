/* The special functions of NK_KERNEL_UNARY and NK_KERNEL_POINTWISE
 * (kernels/src/elementwise/special.c): every op against values known to double
 * precision (closed forms, tabulated values), float32 against the kernel's
 * own float64 (the same algorithm in double) over wide sweeps, float16 and
 * bfloat16 as the float32 result rounded once, the edges (NaN, +-inf, 0,
 * out-of-domain, non-finite and huge polynomial degrees), mixed dtypes
 * (int64 inputs promoted), broadcast and 0-size operands, and the refusal
 * of an integral compute dtype. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

#include <float.h>

/* special.c's degree conversion (a kernel-internal function) */
int64_t nk_special_degree(double n);

#define PI_D 3.14159265358979323846
#define E_D 2.71828182845904523536

static int close_to(double got, double want, double rel, double abs_tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

static nk_unary_params uparams(int op, nrt_dtype compute) {
  nk_unary_params p;
  memset(&p, 0, sizeof p);
  p.op = op;
  p.compute = compute;
  return p;
}

static nk_pointwise_params pparams(int op, nrt_dtype compute) {
  nk_pointwise_params p;
  memset(&p, 0, sizeof p);
  p.op = op;
  p.compute = compute;
  return p;
}

/* out[i] = op(x[i]) in dtype t (x given as doubles, stored in t) */
static void run_unary(int op, nrt_dtype t, const double *xs, int n, double *got) {
  const int64_t es = tk_size(t);
  char *x = tk_alloc((size_t)(n * es)), *o = tk_alloc((size_t)(n * es));
  for (int i = 0; i < n; i++) tk_put(t, x + i * es, (tk_value){.f = xs[i]});
  nrt_operand ops[2] = {tk_vector(o, t, n), tk_vector(x, t, n)};
  nk_unary_params prm = uparams(op, t);
  nrt_task task = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  for (int i = 0; i < n; i++) {
    uint64_t raw = tk_raw(t, o + i * es);
    switch (t) {
    case NRT_FLOAT16: got[i] = tk_f16_value((uint16_t)raw); break;
    case NRT_BFLOAT16: got[i] = tk_bf16_value((uint16_t)raw); break;
    case NRT_FLOAT32: got[i] = ((float *)o)[i]; break;
    default: got[i] = ((double *)o)[i]; break;
    }
  }
  tk_free(x);
  tk_free(o);
}

static void run_binary(int op, nrt_dtype t, const double *as, const double *bs, int n, double *got) {
  const int64_t es = tk_size(t);
  char *a = tk_alloc((size_t)(n * es)), *b = tk_alloc((size_t)(n * es)), *o = tk_alloc((size_t)(n * es));
  for (int i = 0; i < n; i++) {
    tk_put(t, a + i * es, (tk_value){.f = as[i]});
    tk_put(t, b + i * es, (tk_value){.f = bs[i]});
  }
  nrt_operand ops[3] = {tk_vector(o, t, n), tk_vector(a, t, n), tk_vector(b, t, n)};
  nk_pointwise_params prm = pparams(op, t);
  nrt_task task = tk_task(NK_KERNEL_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  for (int i = 0; i < n; i++)
    got[i] = t == NRT_FLOAT32 ? ((float *)o)[i] : t == NRT_FLOAT64 ? ((double *)o)[i]
             : t == NRT_FLOAT16 ? tk_f16_value((uint16_t)tk_raw(t, o + i * es))
                                : tk_bf16_value((uint16_t)tk_raw(t, o + i * es));
  tk_free(a);
  tk_free(b);
  tk_free(o);
}

/* ------------------------------------------------------------ known values */

/* rel: the tolerance where ATen's algorithm is known to be coarser than
 * double precision (0: 1e-13) */
typedef struct { int op; double x, want, rel; } uval;

static const uval unary_known[] = {
    {NK_UNARY_I0, 0.0, 1.0, 0},
    {NK_UNARY_I0, 1.0, 1.2660658777520083, 0},
    {NK_UNARY_I0, -10.0, 2815.716628466254, 0},
    {NK_UNARY_I0E, 1.0, 1.2660658777520083 / E_D, 0},
    {NK_UNARY_I0E, 20.0, 0.089780311884826022, 0},
    {NK_UNARY_I1, 1.0, 0.5651591039924851, 0},
    {NK_UNARY_I1, -1.0, -0.5651591039924851, 0},
    {NK_UNARY_I1E, 2.0, 1.5906368546373291 / (E_D * E_D), 0},
    {NK_UNARY_NDTRI, 0.975, 1.959963984540054, 0},
    {NK_UNARY_NDTRI, 0.5, 0.0, 0},
    {NK_UNARY_NDTRI, 0.0, -INFINITY, 0},
    {NK_UNARY_NDTRI, 1.0, INFINITY, 0},
    {NK_UNARY_NDTRI, 1.5, NAN, 0},
    {NK_UNARY_LOG_NDTR, 0.0, -0.6931471805599453, 0},
    {NK_UNARY_LOG_NDTR, -10.0, -53.23128515051247, 0},
    {NK_UNARY_ERFCX, 1.0, 0.42758357615580705, 0},
    {NK_UNARY_ERFCX, 0.0, 1.0, 0},
    {NK_UNARY_ERFCX, -30.0, INFINITY, 0},
    {NK_UNARY_ENTR, 0.5, 0.34657359027997264, 0},
    {NK_UNARY_ENTR, 0.0, 0.0, 0},
    {NK_UNARY_ENTR, -1.0, -INFINITY, 0},
    {NK_UNARY_AIRY_AI, 0.0, 0.3550280538878172, 0},
    {NK_UNARY_AIRY_AI, 1.0, 0.1352924163128814, 0},
    {NK_UNARY_AIRY_AI, -2.0, 0.22740742820168558, 0},
    {NK_UNARY_BESSEL_J0, 1.0, 0.7651976865579666, 0},
    {NK_UNARY_BESSEL_J0, 10.0, -0.24593576445134834, 2e-9}, /* ATen: -0.24593576441958856 */
    {NK_UNARY_BESSEL_J1, 1.0, 0.44005058574493355, 0},
    {NK_UNARY_BESSEL_J1, -1.0, -0.44005058574493355, 0},
    {NK_UNARY_BESSEL_Y0, 1.0, 0.08825696421567697, 0},
    {NK_UNARY_BESSEL_Y0, 0.0, -INFINITY, 0},
    {NK_UNARY_BESSEL_Y0, -1.0, NAN, 0},
    {NK_UNARY_BESSEL_Y1, 1.0, -0.7812128213002887, 0},
    {NK_UNARY_MODIFIED_BESSEL_I0, 1.0, 1.2660658777520083, 0},
    {NK_UNARY_MODIFIED_BESSEL_I1, 1.0, 0.5651591039924851, 0},
    {NK_UNARY_MODIFIED_BESSEL_K0, 1.0, 0.42102443824070834, 0},
    {NK_UNARY_MODIFIED_BESSEL_K0, 0.0, INFINITY, 0},
    {NK_UNARY_MODIFIED_BESSEL_K1, 1.0, 0.6019072301972346, 0},
    {NK_UNARY_SCALED_MODIFIED_BESSEL_K0, 1.0, 0.42102443824070834 * E_D, 0},
    {NK_UNARY_SCALED_MODIFIED_BESSEL_K1, 1.0, 0.6019072301972346 * E_D, 0},
    {NK_UNARY_SPHERICAL_BESSEL_J0, 1.0, 0.8414709848078965, 0},
    {NK_UNARY_SPHERICAL_BESSEL_J0, 0.0, 1.0, 0},
    {NK_UNARY_SPHERICAL_BESSEL_J0, INFINITY, 0.0, 0},
};

typedef struct { int op; double a, b, want, rel; } bval;

static const bval binary_known[] = {
    {NK_PW_IGAMMA, 1.0, 1.0, 1.0 - 1.0 / E_D, 0},
    {NK_PW_IGAMMA, 0.0, 1.0, 1.0, 0},
    {NK_PW_IGAMMA, 2.0, 0.0, 0.0, 0},
    {NK_PW_IGAMMA, -1.0, 1.0, NAN, 0},
    {NK_PW_IGAMMA, 100.0, 100.0, 0.51329879827914866, 1e-9}, /* the asymptotic series; ATen: 0.5132987980941123 */
    {NK_PW_IGAMMAC, 2.0, 1.0, 2.0 / E_D, 0},
    {NK_PW_IGAMMAC, 3.0, INFINITY, 0.0, 0},
    {NK_PW_IGAMMAC, 0.5, 10.0, 7.744216431044092e-06, 0}, /* the continued fraction */
    {NK_PW_ZETA, 2.0, 1.0, PI_D * PI_D / 6, 0},
    {NK_PW_ZETA, 4.0, 1.0, PI_D * PI_D * PI_D * PI_D / 90, 0},
    {NK_PW_ZETA, 2.0, 2.0, PI_D * PI_D / 6 - 1, 0},
    {NK_PW_ZETA, 1.0, 3.0, INFINITY, 0},
    {NK_PW_ZETA, 0.5, 3.0, NAN, 0},
    {NK_PW_CHEBYSHEV_T, 0.5, 3.0, -1.0, 0},
    {NK_PW_CHEBYSHEV_T, 0.3, 10.0, cos(10 * acos(0.3)), 0},
    {NK_PW_CHEBYSHEV_U, 0.5, 2.0, 0.0, 0},
    {NK_PW_CHEBYSHEV_U, 0.2, 3.0, 8 * 0.008 - 4 * 0.2, 0},
    {NK_PW_CHEBYSHEV_V, 0.5, 1.0, 0.0, 0},  /* 2x - 1 */
    {NK_PW_CHEBYSHEV_W, 0.5, 1.0, 2.0, 0},  /* 2x + 1 */
    {NK_PW_SHIFTED_CHEBYSHEV_T, 0.25, 2.0, -0.5, 0}, /* T2(2x - 1) */
    {NK_PW_SHIFTED_CHEBYSHEV_U, 0.75, 2.0, 0.0, 0},  /* U2(0.5) */
    {NK_PW_SHIFTED_CHEBYSHEV_V, 0.75, 1.0, 0.0, 0},  /* V1(0.5) */
    {NK_PW_SHIFTED_CHEBYSHEV_W, 0.75, 1.0, 2.0, 0},  /* W1(0.5) */
    {NK_PW_HERMITE_H, 0.5, 3.0, -5.0, 0},
    {NK_PW_HERMITE_H, 0.5, NAN, 0.0, 0},
    {NK_PW_HERMITE_H, 0.5, 1e6, NAN, 0}, /* beyond the limit */
    {NK_PW_HERMITE_HE, 0.5, 3.0, -1.375, 0},
    {NK_PW_LAGUERRE_L, 0.5, 2.0, 0.125, 0},
    {NK_PW_LEGENDRE_P, 0.5, 2.0, -0.125, 0},
    {NK_PW_LEGENDRE_P, 0.5, -1.0, 0.0, 0},
    {NK_PW_LEGENDRE_P, 0.5, INFINITY, 0.0, 0}, /* x86's int64 of inf: a negative degree */
    {NK_PW_CHEBYSHEV_T, 0.5, NAN, 0.0, 0},
    {NK_PW_CHEBYSHEV_T, 1.0, 7.0, 1.0, 0},
    {NK_PW_CHEBYSHEV_T, -1.0, 7.0, -1.0, 0},
};

static void test_known_values(void) {
  const int nu = (int)(sizeof unary_known / sizeof unary_known[0]);
  for (int i = 0; i < nu; i++) {
    double got;
    run_unary(unary_known[i].op, NRT_FLOAT64, &unary_known[i].x, 1, &got);
    int ok = close_to(got, unary_known[i].want, unary_known[i].rel > 0 ? unary_known[i].rel : 1e-13, 1e-15);
    if (!ok)
      fprintf(stderr, "  unary op %d at %g: %.17g, want %.17g\n", unary_known[i].op, unary_known[i].x,
              got, unary_known[i].want);
    CHECK(ok);
  }
  const int nb = (int)(sizeof binary_known / sizeof binary_known[0]);
  for (int i = 0; i < nb; i++) {
    double got;
    run_binary(binary_known[i].op, NRT_FLOAT64, &binary_known[i].a, &binary_known[i].b, 1, &got);
    int ok = close_to(got, binary_known[i].want, binary_known[i].rel > 0 ? binary_known[i].rel : 1e-12, 1e-14);
    if (!ok)
      fprintf(stderr, "  pointwise op %d at (%g, %g): %.17g, want %.17g\n", binary_known[i].op,
              binary_known[i].a, binary_known[i].b, got, binary_known[i].want);
    CHECK(ok);
  }
  /* NaN in, NaN out, for every unary op but the Bessel zero at inf */
  for (int op = NK_UNARY_I0; op <= NK_UNARY_SPHERICAL_BESSEL_J0; op++) {
    double nan = NAN, got;
    run_unary(op, NRT_FLOAT64, &nan, 1, &got);
    CHECK(isnan(got));
  }
}

/* -------------------------------------------- float32 / 16-bit vs float64 */

#define SWEEP 257

static void test_precisions(void) {
  double xs[SWEEP], ys[SWEEP], d64[SWEEP], d32[SWEEP], d16[SWEEP];
  for (int op = NK_UNARY_I0; op <= NK_UNARY_SPHERICAL_BESSEL_J0; op++) {
    double lo = op == NK_UNARY_NDTRI ? 0.001 : op == NK_UNARY_ENTR ? 0.01 : -20,
           hi = op == NK_UNARY_NDTRI ? 0.999 : 20;
    if (op >= NK_UNARY_BESSEL_Y0 && op <= NK_UNARY_BESSEL_Y1) lo = 0.1;
    if (op >= NK_UNARY_MODIFIED_BESSEL_K0) lo = 0.1;
    for (int i = 0; i < SWEEP; i++) xs[i] = (double)(float)(lo + (hi - lo) * i / (SWEEP - 1));
    run_unary(op, NRT_FLOAT64, xs, SWEEP, d64);
    run_unary(op, NRT_FLOAT32, xs, SWEEP, d32);
    int bad = 0;
    double scale = 0;
    for (int i = 0; i < SWEEP; i++) scale = fmax(scale, isfinite(d64[i]) ? fabs(d64[i]) : 0);
    for (int i = 0; i < SWEEP; i++) {
      /* relative, or absolute near the zeros of the oscillating ones;
       * float overflows where double does not; ATen's float Airy function
       * loses digits for large negative x (the CPU's own float result) */
      if (fabs(d64[i]) > FLT_MAX) {
        if (!(isinf(d32[i]) || fabs(d32[i]) > 1e37)) bad++;
        continue;
      }
      const double abs_tol = (op == NK_UNARY_AIRY_AI ? 5e-5 : 2e-6) * scale;
      if (!close_to(d32[i], d64[i], 2e-5, abs_tol)) {
        if (!bad) fprintf(stderr, "  unary op %d float32 at %g: %.9g vs %.17g\n", op, xs[i], d32[i], d64[i]);
        bad++;
      }
    }
    CHECK(bad == 0);
  }
  /* float16/bfloat16 (i0, i0e, i1, i1e, entr take them): float32 rounded once */
  const int reduced[] = {NK_UNARY_I0, NK_UNARY_I0E, NK_UNARY_I1, NK_UNARY_I1E, NK_UNARY_ENTR};
  const nrt_dtype r16[] = {NRT_FLOAT16, NRT_BFLOAT16};
  for (int k = 0; k < 5; k++)
    for (int d = 0; d < 2; d++) {
      const nrt_dtype t = r16[d];
      for (int i = 0; i < SWEEP; i++) {
        double v = -8 + 16.0 * i / (SWEEP - 1);
        xs[i] = t == NRT_FLOAT16 ? tk_f16_value(tk_f16_bits(v)) : tk_bf16_value(tk_bf16_bits(v));
      }
      run_unary(reduced[k], NRT_FLOAT32, xs, SWEEP, d32);
      run_unary(reduced[k], t, xs, SWEEP, d16);
      int bad = 0;
      for (int i = 0; i < SWEEP; i++) {
        double want = reduced[k] == NK_UNARY_ENTR && xs[i] > 0
                          /* ATen rounds log(x) to the 16-bit type first */
                          ? (double)(float)(-(float)xs[i] * (float)(t == NRT_FLOAT16
                                ? tk_f16_value(tk_f16_bits(logf((float)xs[i])))
                                : tk_bf16_value(tk_bf16_bits(logf((float)xs[i])))))
                          : d32[i];
        want = t == NRT_FLOAT16 ? tk_f16_value(tk_f16_bits((float)want)) : tk_bf16_value(tk_bf16_bits((float)want));
        if (!(d16[i] == want || (isnan(d16[i]) && isnan(want)))) bad++;
      }
      CHECK(bad == 0);
    }
  /* binary ops, float32 against float64 */
  for (int op = NK_PW_IGAMMA; op <= NK_PW_LEGENDRE_P; op++) {
    for (int i = 0; i < SWEEP; i++) {
      if (op <= NK_PW_IGAMMAC) {
        xs[i] = (double)(float)(0.05 + 15.0 * (i % 17) / 16);
        ys[i] = (double)(float)(0.05 + 15.0 * (i / 17) / 15);
      } else if (op == NK_PW_ZETA) {
        xs[i] = (double)(float)(1.5 + 6.0 * (i % 17) / 16);
        ys[i] = (double)(float)(0.5 + 10.0 * (i / 17) / 15);
      } else {
        double lo = op >= NK_PW_SHIFTED_CHEBYSHEV_T && op <= NK_PW_SHIFTED_CHEBYSHEV_W ? 0 : -1;
        if (op == NK_PW_HERMITE_H || op == NK_PW_HERMITE_HE || op == NK_PW_LAGUERRE_L) lo = -2;
        xs[i] = (double)(float)(lo + (lo < 0 ? 2.0 : 1.0) * (i % 17) / 16);
        ys[i] = (double)(i / 17); /* degrees 0..15 */
      }
    }
    run_binary(op, NRT_FLOAT64, xs, ys, SWEEP, d64);
    run_binary(op, NRT_FLOAT32, xs, ys, SWEEP, d32);
    int bad = 0;
    for (int i = 0; i < SWEEP; i++) {
      if (!close_to(d32[i], d64[i], 5e-5, 5e-5)) {
        if (!bad) fprintf(stderr, "  pointwise op %d float32 at (%g, %g): %.9g vs %.17g\n", op, xs[i], ys[i], d32[i], d64[i]);
        bad++;
      }
    }
    CHECK(bad == 0);
  }
  /* igamma in float16: float32 rounded once */
  for (int i = 0; i < SWEEP; i++) {
    xs[i] = tk_f16_value(tk_f16_bits(0.1 + 9.0 * (i % 17) / 16));
    ys[i] = tk_f16_value(tk_f16_bits(0.1 + 9.0 * (i / 17) / 15));
  }
  run_binary(NK_PW_IGAMMA, NRT_FLOAT32, xs, ys, SWEEP, d32);
  run_binary(NK_PW_IGAMMA, NRT_FLOAT16, xs, ys, SWEEP, d16);
  int bad = 0;
  for (int i = 0; i < SWEEP; i++) bad += d16[i] != tk_f16_value(tk_f16_bits((float)d32[i]));
  CHECK(bad == 0);
}

/* ------------------------------------------------------- operand layouts */

static void test_layouts(void) {
  /* int64 input, float32 out and compute (ATen's integer promotion) */
  int64_t *xi = tk_alloc(5 * sizeof(int64_t));
  float *o = tk_alloc(5 * sizeof(float));
  for (int i = 0; i < 5; i++) xi[i] = i - 2;
  nrt_operand ops[3] = {tk_vector(o, NRT_FLOAT32, 5), tk_vector(xi, NRT_INT64, 5)};
  nk_unary_params prm = uparams(NK_UNARY_I0, NRT_FLOAT32);
  nrt_task t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  double want[5];
  double xd[5] = {-2, -1, 0, 1, 2};
  run_unary(NK_UNARY_I0, NRT_FLOAT64, xd, 5, want);
  for (int i = 0; i < 5; i++) CHECK(close_to(o[i], want[i], 1e-6, 0));
  /* pointwise: a broadcast (stride 0) degree, a 2-d strided x, float64 out */
  double *x = tk_alloc(12 * sizeof(double)), *out = tk_alloc(6 * sizeof(double));
  int64_t *n = tk_alloc(sizeof(int64_t));
  for (int i = 0; i < 12; i++) x[i] = -1 + i / 6.0;
  *n = 4;
  int64_t sizes[2] = {2, 3}, xstr[2] = {6, 2}, zero[2] = {0, 0};
  ops[0] = tk_operand(out, NRT_FLOAT64, 2, sizes, NULL);
  ops[1] = tk_operand(x, NRT_FLOAT64, 2, sizes, xstr);
  ops[2] = tk_operand(n, NRT_INT64, 2, sizes, zero);
  nk_pointwise_params pp = pparams(NK_PW_LEGENDRE_P, NRT_FLOAT64);
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &pp, sizeof pp);
  CHECK_OK(tk_run(&t));
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) {
      double v = x[r * 6 + c * 2], p4 = (35 * v * v * v * v - 30 * v * v + 3) / 8;
      CHECK(close_to(out[r * 3 + c], p4, 1e-13, 1e-15));
    }
  /* 0-size: nothing written, nothing fails */
  int64_t empty[2] = {0, 3};
  ops[0] = tk_operand(out, NRT_FLOAT64, 2, empty, NULL);
  ops[1] = tk_operand(x, NRT_FLOAT64, 2, empty, NULL);
  ops[2] = tk_operand(x, NRT_FLOAT64, 2, empty, NULL);
  pp = pparams(NK_PW_ZETA, NRT_FLOAT64);
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &pp, sizeof pp);
  CHECK_OK(tk_run(&t));
  /* a parallel-size run (the pool splits it): every element right */
  enum { BIG = 1 << 16 };
  double *bx = tk_alloc(BIG * sizeof(double)), *bo = tk_alloc(BIG * sizeof(double));
  for (int i = 0; i < BIG; i++) bx[i] = -30 + 60.0 * i / BIG;
  ops[0] = tk_vector(bo, NRT_FLOAT64, BIG);
  ops[1] = tk_vector(bx, NRT_FLOAT64, BIG);
  prm = uparams(NK_UNARY_BESSEL_J0, NRT_FLOAT64);
  t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  int bad = 0;
  for (int i = 0; i < BIG; i += 97) {
    double one;
    run_unary(NK_UNARY_BESSEL_J0, NRT_FLOAT64, &bx[i], 1, &one);
    bad += bo[i] != one;
  }
  CHECK(bad == 0);
  tk_free(bx);
  tk_free(bo);
  tk_free(xi);
  tk_free(o);
  tk_free(x);
  tk_free(out);
  tk_free(n);
}

/* ------------------------------------------------------------ validation */

static void test_validation(void) {
  int64_t *a = tk_alloc(4 * sizeof(int64_t)), *o = tk_alloc(4 * sizeof(int64_t));
  nrt_operand ops[3] = {tk_vector(o, NRT_INT64, 4), tk_vector(a, NRT_INT64, 4), tk_vector(a, NRT_INT64, 4)};
  nk_unary_params prm = uparams(NK_UNARY_BESSEL_J0, NRT_INT64);
  nrt_task t = tk_task(NK_KERNEL_UNARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "does not take compute dtype"));
  nk_pointwise_params pp = pparams(NK_PW_IGAMMA, NRT_INT64);
  t = tk_task(NK_KERNEL_POINTWISE, 3, ops, &pp, sizeof pp);
  CHECK(tk_fails_with(&t, "igamma: not defined for compute dtype"));
  pp = pparams(NK_PW_ZETA, NRT_FLOAT64);
  t = tk_task(NK_KERNEL_POINTWISE, 2, ops, &pp, sizeof pp);
  CHECK(tk_fails_with(&t, "expected 3"));
  tk_free(a);
  tk_free(o);
}

/* the degree conversion: x86's cvttsd2si without C's undefined cast */
static void test_degree(void) {
  CHECK(nk_special_degree(7.9) == 7);
  CHECK(nk_special_degree(-2.5) == -2);
  CHECK(nk_special_degree(NAN) == INT64_MIN);
  CHECK(nk_special_degree(INFINITY) == INT64_MIN);
  CHECK(nk_special_degree(-INFINITY) == INT64_MIN);
  CHECK(nk_special_degree(1e30) == INT64_MIN);
  CHECK(nk_special_degree(-9223372036854775808.0) == INT64_MIN);
  CHECK(nk_special_degree(9007199254740992.0) == 9007199254740992LL);
}

static void tests(void) {
  test_known_values();
  test_precisions();
  test_layouts();
  test_validation();
  test_degree();
}

int main(void) { return tk_main(tests, __FILE__); }
