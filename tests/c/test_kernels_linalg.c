/* NK_KERNEL_LU: factor then P L U reassembled against A (and the pivots
 * against a partial-pivoting reference), solves against A x = b / A^T x = b
 * checked by residual, singular info, broadcast (stride-0) factors, and
 * validation (bad pivots, shapes, dtypes).
 *
 * NK_KERNEL_ORGQR (kernels/src/linalg/linalg.c) against a reference written here:
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

/* ------------------------------------------------------------------- LU */

static nrt_task lu_task(nk_lu_op op, int pivot, const nrt_operand *ops) {
  nk_lu_params p = {.op = op, .pivot = pivot};
  return tk_task(NK_KERNEL_LU, 3, ops, &p, sizeof p);
}

/* batch of m x n matrices, column-major (layout 0) or row-major (1) */
static int check_lu_factor(nrt_dtype dt, int64_t batch, int64_t m, int64_t n, int layout) {
  const int64_t es = tk_size(dt), k = m < n ? m : n;
  const int64_t rs = layout ? n : 1, cs = layout ? 1 : m;
  char *a = tk_alloc((size_t)(batch * m * n * es) + 8);
  int32_t *piv = tk_alloc((size_t)(batch * k * 4) + 4), *info = tk_alloc((size_t)batch * 4 + 4);
  double *in = malloc(sizeof(double) * (size_t)(batch * m * n + 1));
  for (int64_t i = 0; i < batch * m * n; i++) {
    const int64_t b = i / (m * n), r = i / n % m, c = i % n;
    st(dt, a + (b * m * n + r * rs + c * cs) * es, rnd());
    in[i] = ld(dt, a + (b * m * n + r * rs + c * cs) * es);
  }
  int64_t sz[3] = {batch, m, n}, str[3] = {m * n, rs, cs}, ps[2] = {batch, k};
  nrt_operand ops[3] = {tk_operand(a, dt, 3, sz, str), tk_operand(piv, NRT_INT32, 2, ps, NULL),
                        tk_vector(info, NRT_INT32, batch)};
  nrt_task t = lu_task(NK_LU_FACTOR, 1, ops);
  int ok = tk_run(&t) == NRT_SUCCESS;
  const double tol = dt == NRT_FLOAT32 ? 1e-5 : 1e-13;
  double *w = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t b = 0; ok && b < batch; b++) {
    ok = info[b] == 0;
    /* reference pivots: partial pivoting on a double copy */
    memcpy(w, in + b * m * n, sizeof(double) * (size_t)(m * n));
    for (int64_t c = 0; ok && c < k; c++) {
      int64_t p = c;
      for (int64_t r = c + 1; r < m; r++)
        if (fabs(w[r * n + c]) > fabs(w[p * n + c])) p = r;
      if (piv[b * k + c] != p + 1) {
        /* a near tie may fall either way in float32: accept an equal magnitude */
        int64_t q = piv[b * k + c] - 1;
        if (q < c || q >= m || fabs(fabs(w[q * n + c]) - fabs(w[p * n + c])) > 1e-5) ok = 0;
        p = q;
      }
      for (int64_t q = 0; q < n; q++) { double t2 = w[c * n + q]; w[c * n + q] = w[p * n + q]; w[p * n + q] = t2; }
      for (int64_t r = c + 1; r < m; r++) {
        double l = w[r * n + c] / w[c * n + c];
        w[r * n + c] = l;
        for (int64_t q = c + 1; q < n; q++) w[r * n + q] -= l * w[c * n + q];
      }
    }
    /* P L U == A: rebuild L U from the kernel's output, undo the swaps */
    double *lu = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t r = 0; r < m; r++)
      for (int64_t c = 0; c < n; c++) {
        double s2 = 0;
        for (int64_t q = 0; q <= (r < c ? r : c) && q < k; q++) {
          double l = q == r ? 1 : ld(dt, a + (b * m * n + r * rs + q * cs) * es);
          double u = ld(dt, a + (b * m * n + q * rs + c * cs) * es);
          s2 += (q < r ? l : 1) * u;
        }
        lu[r * n + c] = s2;
      }
    for (int64_t c = k - 1; c >= 0; c--) {
      int64_t p = piv[b * k + c] - 1;
      for (int64_t q = 0; q < n; q++) { double t2 = lu[c * n + q]; lu[c * n + q] = lu[p * n + q]; lu[p * n + q] = t2; }
    }
    for (int64_t i = 0; ok && i < m * n; i++)
      if (fabs(lu[i] - in[b * m * n + i]) > tol * 10) {
        fprintf(stderr, "  lu %s %lldx%lld layout %d: P L U [%lld] = %g, A = %g\n", tk_dtype_names[dt],
                (long long)m, (long long)n, layout, (long long)i, lu[i], in[b * m * n + i]);
        ok = 0;
      }
    free(lu);
  }
  free(w); free(in);
  tk_free(a); tk_free(piv); tk_free(info);
  return ok;
}

/* factor A (batch 1 or broadcast over `batch` with stride 0), solve for r
 * right-hand sides, check the residual A x - b (or A^T x - b) */
static int check_lu_solve(nrt_dtype dt, int64_t batch, int64_t n, int64_t r, int transpose, int broadcast) {
  const int64_t es = tk_size(dt), fb = broadcast ? 1 : batch;
  char *a = tk_alloc((size_t)(fb * n * n * es) + 8), *x = tk_alloc((size_t)(batch * n * r * es) + 8);
  int32_t *piv = tk_alloc((size_t)(fb * n * 4) + 4), *info = tk_alloc((size_t)fb * 4 + 4);
  double *A = malloc(sizeof(double) * (size_t)(fb * n * n + 1)), *B = malloc(sizeof(double) * (size_t)(batch * n * r + 1));
  for (int64_t i = 0; i < fb * n * n; i++) {
    st(dt, a + i * es, rnd() + ((i % (n * n)) / n == i % n ? 2 : 0));
    A[i] = ld(dt, a + i * es);
  }
  for (int64_t i = 0; i < batch * n * r; i++) {
    st(dt, x + i * es, rnd());
    B[i] = ld(dt, x + i * es);
  }
  int64_t fsz[3] = {fb, n, n}, psz[2] = {fb, n};
  nrt_operand f[3] = {tk_operand(a, dt, 3, fsz, NULL), tk_operand(piv, NRT_INT32, 2, psz, NULL),
                      tk_vector(info, NRT_INT32, fb)};
  nrt_task t = lu_task(NK_LU_FACTOR, 1, f);
  int ok = tk_run(&t) == NRT_SUCCESS;
  int64_t xsz[3] = {batch, n, r}, lsz[3] = {batch, n, n}, pvs[2] = {batch, n};
  int64_t lstr[3] = {broadcast ? 0 : n * n, n, 1}, pstr[2] = {broadcast ? 0 : n, 1};
  nrt_operand s[3] = {tk_operand(x, dt, 3, xsz, NULL), tk_operand(a, dt, 3, lsz, lstr),
                      tk_operand(piv, NRT_INT32, 2, pvs, pstr)};
  t = lu_task(transpose ? NK_LU_SOLVE_TRANSPOSE : NK_LU_SOLVE, 0, s);
  ok = ok && tk_run(&t) == NRT_SUCCESS;
  const double tol = dt == NRT_FLOAT32 ? 1e-4 : 1e-11;
  for (int64_t b = 0; ok && b < batch; b++) {
    const double *Ab = A + (broadcast ? 0 : b) * n * n;
    for (int64_t i = 0; ok && i < n; i++)
      for (int64_t c = 0; ok && c < r; c++) {
        double s2 = 0;
        for (int64_t q = 0; q < n; q++)
          s2 += (transpose ? Ab[q * n + i] : Ab[i * n + q]) * ld(dt, x + ((b * n + q) * r + c) * es);
        if (fabs(s2 - B[(b * n + i) * r + c]) > tol * (1 + n)) {
          fprintf(stderr, "  lu_solve %s n %lld t %d: residual %g\n", tk_dtype_names[dt], (long long)n, transpose,
                  s2 - B[(b * n + i) * r + c]);
          ok = 0;
        }
      }
  }
  free(A); free(B);
  tk_free(a); tk_free(x); tk_free(piv); tk_free(info);
  return ok;
}

static void test_lu(void) {
  for (int layout = 0; layout < 2; layout++) {
    CHECK(check_lu_factor(NRT_FLOAT64, 3, 5, 5, layout));
    CHECK(check_lu_factor(NRT_FLOAT32, 2, 6, 4, layout));
    CHECK(check_lu_factor(NRT_FLOAT64, 2, 3, 7, layout));
    CHECK(check_lu_factor(NRT_FLOAT32, 1, 1, 1, layout));
  }
  CHECK(check_lu_factor(NRT_FLOAT64, 33, 8, 8, 0)); /* several threads */
  CHECK(check_lu_factor(NRT_FLOAT64, 0, 3, 3, 0));  /* empty batch */
  for (int tr = 0; tr < 2; tr++) {
    CHECK(check_lu_solve(NRT_FLOAT64, 3, 6, 2, tr, 0));
    CHECK(check_lu_solve(NRT_FLOAT32, 3, 5, 3, tr, 0));
    CHECK(check_lu_solve(NRT_FLOAT64, 4, 7, 1, tr, 1)); /* factors broadcast, stride 0 */
    CHECK(check_lu_solve(NRT_FLOAT32, 2, 1, 2, tr, 0));
  }
  /* singular: info names the first zero pivot (1-based), no pivoting keeps rows */
  double *a = tk_alloc(9 * 8);
  int32_t *piv = tk_alloc(16), *info = tk_alloc(8);
  const double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  memcpy(a, ones, sizeof ones);
  int64_t sz[2] = {3, 3}, three = 3;
  nrt_operand ops[3] = {tk_operand(a, NRT_FLOAT64, 2, sz, NULL), tk_vector(piv, NRT_INT32, 3),
                        tk_operand(info, NRT_INT32, 0, NULL, NULL)};
  nrt_task t = lu_task(NK_LU_FACTOR, 1, ops);
  CHECK_OK(tk_run(&t));
  CHECK(info[0] == 2 && piv[0] == 1);
  const double m[9] = {4, 1, 0, 8, 5, 1, 0, 2, 3};
  memcpy(a, m, sizeof m);
  t = lu_task(NK_LU_FACTOR, 0, ops);
  CHECK_OK(tk_run(&t));
  CHECK(info[0] == 0 && piv[0] == 1 && piv[1] == 2 && piv[2] == 3 && a[3] == 2.0); /* l10 = 8 / 4 */
  /* validation */
  nrt_operand s[3] = {tk_operand(a, NRT_FLOAT64, 2, sz, NULL), tk_operand(a, NRT_FLOAT64, 2, sz, NULL),
                      tk_vector(piv, NRT_INT32, 3)};
  piv[0] = 4;
  t = lu_task(NK_LU_SOLVE, 0, s);
  CHECK(tk_fails_with(&t, "outside [1, 3]"));
  piv[0] = 1;
  s[2] = tk_vector(piv, NRT_INT32, 2);
  t = lu_task(NK_LU_SOLVE, 0, s);
  CHECK(tk_fails_with(&t, "bad ranks") || tk_fails_with(&t, "pivots"));
  s[2] = tk_vector(piv, NRT_INT64, 3);
  t = lu_task(NK_LU_SOLVE, 0, s);
  CHECK(tk_fails_with(&t, "int32"));
  s[2] = tk_vector(piv, NRT_INT32, 3);
  s[1].dtype = NRT_FLOAT32;
  t = lu_task(NK_LU_SOLVE, 0, s);
  CHECK(tk_fails_with(&t, "one dtype"));
  ops[1] = tk_vector(piv, NRT_INT32, 2);
  t = lu_task(NK_LU_FACTOR, 1, ops);
  CHECK(tk_fails_with(&t, "min(m, n)"));
  ops[0].dtype = NRT_BFLOAT16;
  t = lu_task(NK_LU_FACTOR, 1, ops);
  CHECK(tk_fails_with(&t, "float32 or float64"));
  t = lu_task(NK_LU_OP_COUNT, 1, ops);
  CHECK(tk_fails_with(&t, "unknown op"));
  (void)three;
  tk_free(a); tk_free(piv); tk_free(info);
}

static void tests(void) {
  test_orgqr();
  test_orgqr_validation();
  test_lu();
}

int main(void) { return tk_main(tests, __FILE__); }
