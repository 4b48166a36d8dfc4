/* NK_KERNEL_ORGQR (kernels/src/linalg.c) against a reference written here:
 * the product H_0 H_1 ... H_{k-1} formed explicitly in double (each
 * H_j = I - tau_j v_j v_j^T as a full m x m matrix), its first n columns.
 * float32/float64, batched, column-major (what ATen hands over), row-major
 * and padded strides, k = 0, n = 1, a batch dim of 0, and validation. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

static double rnd(void) { return ((double)(tk_rand() % 20001) - 10000) / 10000.0; } /* [-1, 1] */

static double ld(nrt_dtype t, const char *p) {
  if (t == NRT_FLOAT32) { float f; memcpy(&f, p, 4); return f; }
  double d; memcpy(&d, p, 8); return d;
}
static void st(nrt_dtype t, char *p, double v) {
  if (t == NRT_FLOAT32) { float f = (float)v; memcpy(p, &f, 4); }
  else memcpy(p, &v, 8);
}

/* batch x (m x n) with element (b, r, c) at b*bs + r*rs + c*cs (elements) */
static int check_orgqr(nrt_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t k, int layout) {
  const int64_t es = tk_size(dt);
  int64_t rs, cs, bs;
  if (layout == 0) { rs = 1; cs = m; bs = m * n; }                    /* column-major */
  else if (layout == 1) { rs = n; cs = 1; bs = m * n; }               /* row-major */
  else { rs = 2; cs = 2 * m + 1; bs = (2 * m + 1) * n + 3; }          /* padded */
  const int64_t span = batch * bs + 1;
  char *a = tk_alloc((size_t)(span * es));
  char *tau = tk_alloc((size_t)((batch * k + 1) * es));
  double *in = malloc(sizeof(double) * (size_t)(batch * m * n + 1));
  double *tv = malloc(sizeof(double) * (size_t)(batch * k + 1));
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t r = 0; r < m; r++)
      for (int64_t c = 0; c < n; c++) {
        double v = rnd();
        st(dt, a + (b * bs + r * rs + c * cs) * es, v);
        in[(b * m + r) * n + c] = ld(dt, a + (b * bs + r * rs + c * cs) * es);
      }
    for (int64_t j = 0; j < k; j++) {
      double v = (rnd() + 1) * (j == 1 ? 0 : 1); /* tau in [0, 2], one 0 */
      st(dt, tau + (b * k + j) * es, v);
      tv[b * k + j] = ld(dt, tau + (b * k + j) * es);
    }
  }
  int64_t sizes[3] = {batch, m, n}, strides[3] = {bs, rs, cs}, tsizes[2] = {batch, k};
  nrt_operand ops[2] = {tk_operand(a, dt, 3, sizes, strides), tk_operand(tau, dt, 2, tsizes, NULL)};
  nrt_task t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  int ok = tk_run(&t) == NRT_SUCCESS;
  double *Q = malloc(sizeof(double) * (size_t)(m * m)), *T = malloc(sizeof(double) * (size_t)(m * m));
  double *v = malloc(sizeof(double) * (size_t)m);
  const double tol = dt == NRT_FLOAT32 ? 2e-5 : 1e-12;
  for (int64_t b = 0; ok && b < batch; b++) {
    for (int64_t i = 0; i < m * m; i++) Q[i] = (i / m == i % m);
    for (int64_t j = 0; j < k; j++) {
      for (int64_t r = 0; r < m; r++) v[r] = r < j ? 0 : r == j ? 1 : in[(b * m + r) * n + j];
      /* Q <- Q (I - tau v v^T) */
      for (int64_t r = 0; r < m; r++) {
        double qv = 0;
        for (int64_t c = 0; c < m; c++) qv += Q[r * m + c] * v[c];
        for (int64_t c = 0; c < m; c++) T[r * m + c] = Q[r * m + c] - tv[b * k + j] * qv * v[c];
      }
      memcpy(Q, T, sizeof(double) * (size_t)(m * m));
    }
    /* random taus are not a QR's, so Q can grow: tolerance relative to its
     * largest entry */
    double scale = 1;
    for (int64_t r = 0; r < m; r++)
      for (int64_t c = 0; c < n; c++) scale = fmax(scale, fabs(Q[r * m + c]));
    for (int64_t r = 0; r < m; r++)
      for (int64_t c = 0; c < n; c++) {
        double got = ld(dt, a + (b * bs + r * rs + c * cs) * es), want = Q[r * m + c];
        if (fabs(got - want) > tol * 4 * scale) {
          fprintf(stderr, "  orgqr %s %lldx%lldx%lld k %lld layout %d at (%lld,%lld,%lld): got %g want %g\n",
                  tk_dtype_names[dt], (long long)batch, (long long)m, (long long)n, (long long)k, layout,
                  (long long)b, (long long)r, (long long)c, got, want);
          ok = 0;
          r = m;
          break;
        }
      }
  }
  free(Q); free(T); free(v); free(in); free(tv);
  tk_free(a); tk_free(tau);
  return ok;
}

static void test_orgqr(void) {
  for (int layout = 0; layout < 3; layout++) {
    CHECK(check_orgqr(NRT_FLOAT32, 3, 6, 4, 3, layout));
    CHECK(check_orgqr(NRT_FLOAT64, 3, 6, 4, 4, layout));
    CHECK(check_orgqr(NRT_FLOAT64, 2, 5, 5, 5, layout));
    CHECK(check_orgqr(NRT_FLOAT32, 1, 7, 3, 0, layout)); /* k = 0: the identity's columns */
    CHECK(check_orgqr(NRT_FLOAT64, 2, 4, 1, 1, layout));
  }
  CHECK(check_orgqr(NRT_FLOAT64, 40, 9, 6, 5, 0)); /* several threads */
  CHECK(check_orgqr(NRT_FLOAT32, 1, 40, 24, 24, 0));
  CHECK(check_orgqr(NRT_FLOAT64, 0, 4, 3, 2, 0)); /* empty batch */
}

static void test_orgqr_validation(void) {
  double *a = tk_alloc(64 * 8), *tau = tk_alloc(8 * 8);
  int64_t s[3] = {1, 4, 3}, ts[2] = {1, 2}, ts_bad[2] = {1, 4}, tb[2] = {2, 2};
  nrt_operand ops[2] = {tk_operand(a, NRT_FLOAT64, 3, s, NULL), tk_operand(tau, NRT_FLOAT64, 2, ts, NULL)};
  nrt_task t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  CHECK_OK(tk_run(&t));
  ops[1] = tk_operand(tau, NRT_FLOAT64, 2, ts_bad, NULL); /* k > n */
  t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "m >= n >= k"));
  ops[1] = tk_operand(tau, NRT_FLOAT64, 2, tb, NULL); /* batch 2 vs 1 */
  t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "batch dim 0"));
  ops[1] = tk_operand(tau, NRT_FLOAT32, 2, ts, NULL);
  t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "one dtype"));
  ops[0] = tk_operand(a, NRT_BFLOAT16, 3, s, NULL);
  ops[1] = tk_operand(tau, NRT_BFLOAT16, 2, ts, NULL);
  t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "float32 or float64"));
  ops[0] = tk_operand(a, NRT_FLOAT64, 1, s + 1, NULL);
  ops[1] = tk_operand(tau, NRT_FLOAT64, 2, ts, NULL);
  t = tk_task(NK_KERNEL_ORGQR, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "(..., m, n)"));
  t = tk_task(NK_KERNEL_ORGQR, 1, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "orgqr"));
  tk_free(a);
  tk_free(tau);
}

static void tests(void) {
  test_orgqr();
  test_orgqr_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
