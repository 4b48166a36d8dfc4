/* The normalisation kernels (NK_KERNEL_NORM, NK_KERNEL_NORM_BACKWARD)
 * against references written here in double from the definitions:
 * layer norm, RMS norm and group norm over rows, batch norm over channels
 * (training with running-stat updates, eval), forward and every gradient
 * (dx from the textbook formula rstd/N * (N*g - sum g - xhat * sum g*xhat),
 * not the kernels' rearrangement); float32, float64, bfloat16/float16 input
 * with float32 parameters; optional weight/bias/running stats absent;
 * strided (channels_last-like and transposed) operands; rows longer than a
 * parallel grain; empty rows/batches; and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

/* ------------------------------------------------------------- helpers */

static double load(nrt_dtype t, const void *p) {
  union { uint16_t h; float f; double d; } u;
  memcpy(&u, p, (size_t)tk_size(t));
  switch (t) {
  case NRT_FLOAT16: return tk_f16_value(u.h);
  case NRT_BFLOAT16: return tk_bf16_value(u.h);
  case NRT_FLOAT32: return u.f;
  default: return u.d;
  }
}

static void put(nrt_dtype t, void *p, double v) {
  tk_value x = {0, 0, v};
  tk_put(t, p, x);
}

static double urand(void) { return (double)(tk_rand() >> 11) / 9007199254740992.0 * 2.0 - 1.0; }

static int close_to(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  return fabs(got - want) <= atol + rtol * fabs(want);
}

static double tol_of(nrt_dtype t) {
  return t == NRT_FLOAT16 ? 4e-3 : t == NRT_BFLOAT16 ? 3e-2 : t == NRT_FLOAT32 ? 2e-5 : 1e-11;
}

/* a buffer of n elements of dtype t filled with scale * urand() + shift;
 * the stored (rounded) values in *vals (double) */
static void *fill(nrt_dtype t, int64_t n, double scale, double shift, double **vals) {
  void *p = tk_alloc((size_t)(n > 0 ? n : 1) * (size_t)tk_size(t));
  *vals = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  for (int64_t i = 0; i < n; i++) {
    put(t, (char *)p + i * tk_size(t), scale * urand() + shift);
    (*vals)[i] = load(t, (char *)p + i * tk_size(t));
  }
  return p;
}

static nrt_operand none_op(void) {
  int64_t z = 0;
  return tk_operand(NULL, NRT_FLOAT32, 1, &z, NULL);
}

static nrt_status run(nk_kernel_id k, const nrt_operand *ops, int n, const nk_norm_params *p) {
  nrt_task t = tk_task(k, n, ops, p, sizeof *p);
  return tk_run(&t);
}

/* ------------------------------------------------------------- rows */

/* rows R x L (x strided as given in elements, NULL contiguous); kind LAYER /
 * RMS / GROUP (groups, hw); weight/bias optional; checks y, mean, rstd, then
 * the backward's dx, dweight, dbias. */
static void check_rows(nk_norm_kind kind, nrt_dtype tx, nrt_dtype tw, int64_t R, int64_t L,
                       int groups, int64_t hw, int has_w, int has_b, int transposed) {
  const double eps = 1e-5;
  const int64_t W = kind == NK_NORM_GROUP ? groups * (L / hw) : L;
  const nrt_dtype ts = tw; /* statistics in the parameters' dtype */
  double *xv, *wv, *bv, *gv;
  /* a transposed x: storage [L, R], viewed as [R, L] */
  void *x = fill(tx, R * L, 2.0, 0.5, &xv);
  void *dy = fill(tx, R * L, 1.0, 0.0, &gv);
  void *w = fill(tw, W, 1.0, 1.0, &wv);
  void *b = fill(tw, W, 1.0, 0.0, &bv);
  void *y = tk_alloc((size_t)(R * L) * (size_t)tk_size(tx));
  void *dx = tk_alloc((size_t)(R * L) * (size_t)tk_size(tx));
  void *mean = tk_alloc((size_t)(R + 1) * (size_t)tk_size(ts));
  void *rstd = tk_alloc((size_t)(R + 1) * (size_t)tk_size(ts));
  void *dw = tk_alloc((size_t)W * (size_t)tk_size(tw));
  void *db = tk_alloc((size_t)W * (size_t)tk_size(tw));
  const int64_t sz[2] = {R, L}, st_t[2] = {1, R};
  const int64_t *xs = transposed ? st_t : NULL;
  /* the element (r, l) of x / dy in storage */
#define AT(v, r, l) ((v)[transposed ? (l) * R + (r) : (r) * L + (l)])
  nrt_operand ops[8] = {
      tk_operand(y, tx, 2, sz, NULL), kind == NK_NORM_RMS ? none_op() : tk_vector(mean, ts, R),
      tk_vector(rstd, ts, R),         tk_operand(x, tx, 2, sz, xs),
      has_w ? tk_vector(w, tw, W) : none_op(),
      has_b && kind != NK_NORM_RMS ? tk_vector(b, tw, W) : none_op()};
  nk_norm_params p = {.kind = kind, .groups = groups, .hw = hw, .eps = eps};
  CHECK_OK(run(NK_KERNEL_NORM, ops, 6, &p));
  const double tol = tol_of(tx);
  int bad = 0;
  double *ref_m = malloc((size_t)R * sizeof(double)), *ref_r = malloc((size_t)R * sizeof(double));
  for (int64_t r = 0; r < R; r++) {
    double m = 0, v = 0;
    if (kind != NK_NORM_RMS) {
      for (int64_t l = 0; l < L; l++) m += AT(xv, r, l);
      m /= (double)L;
    }
    for (int64_t l = 0; l < L; l++) v += (AT(xv, r, l) - m) * (AT(xv, r, l) - m);
    const double rs = 1.0 / sqrt(v / (double)L + eps);
    ref_m[r] = m;
    ref_r[r] = rs;
    if (kind != NK_NORM_RMS && !close_to(load(ts, (char *)mean + r * tk_size(ts)), m, tol, tol)) bad++;
    if (!close_to(load(ts, (char *)rstd + r * tk_size(ts)), rs, tol, tol)) bad++;
    for (int64_t l = 0; l < L; l++) {
      const int64_t c = kind == NK_NORM_GROUP ? (r % groups) * (L / hw) + l / hw : l;
      double want = (AT(xv, r, l) - m) * rs * (has_w ? wv[c] : 1.0) +
                    (has_b && kind != NK_NORM_RMS ? bv[c] : 0.0);
      if (!close_to(load(tx, (char *)y + (r * L + l) * tk_size(tx)), want, tol * 4, tol * 4)) bad++;
    }
  }
  CHECK(bad == 0);
  if (bad) fprintf(stderr, "  rows forward kind %d dtype %s R %lld L %lld: %d bad\n", kind,
                   tk_dtype_names[tx], (long long)R, (long long)L, bad);

  /* backward, with the statistics the forward saved */
  nrt_operand bops[8] = {tk_operand(dx, tx, 2, sz, NULL),
                         has_w ? tk_vector(dw, tw, W) : none_op(),
                         has_b && kind != NK_NORM_RMS ? tk_vector(db, tw, W) : none_op(),
                         tk_operand(dy, tx, 2, sz, xs),
                         tk_operand(x, tx, 2, sz, xs),
                         kind == NK_NORM_RMS ? none_op() : tk_vector(mean, ts, R),
                         tk_vector(rstd, ts, R),
                         has_w ? tk_vector(w, tw, W) : none_op()};
  CHECK_OK(run(NK_KERNEL_NORM_BACKWARD, bops, 8, &p));
  bad = 0;
  double *gw = calloc((size_t)W, sizeof(double)), *gb = calloc((size_t)W, sizeof(double));
  for (int64_t r = 0; r < R; r++) {
    double sg = 0, sgx = 0;
    for (int64_t l = 0; l < L; l++) {
      const int64_t c = kind == NK_NORM_GROUP ? (r % groups) * (L / hw) + l / hw : l;
      const double g = AT(gv, r, l) * (has_w ? wv[c] : 1.0);
      const double xhat = (AT(xv, r, l) - ref_m[r]) * ref_r[r];
      sg += g;
      sgx += g * xhat;
      gw[c] += AT(gv, r, l) * xhat;
      gb[c] += AT(gv, r, l);
    }
    if (kind == NK_NORM_RMS) sg = 0;
    for (int64_t l = 0; l < L; l++) {
      const int64_t c = kind == NK_NORM_GROUP ? (r % groups) * (L / hw) + l / hw : l;
      const double g = AT(gv, r, l) * (has_w ? wv[c] : 1.0);
      const double xhat = (AT(xv, r, l) - ref_m[r]) * ref_r[r];
      const double want = ref_r[r] / (double)L * ((double)L * g - sg - xhat * sgx);
      if (!close_to(load(tx, (char *)dx + (r * L + l) * tk_size(tx)), want, tol * 8, tol * 8)) bad++;
    }
  }
  for (int64_t c = 0; c < W; c++) {
    if (has_w && !close_to(load(tw, (char *)dw + c * tk_size(tw)), gw[c], tol * 8, tol * 8 * sqrt((double)R)))
      bad++;
    if (has_b && kind != NK_NORM_RMS &&
        !close_to(load(tw, (char *)db + c * tk_size(tw)), gb[c], tol * 8, tol * 8 * sqrt((double)R)))
      bad++;
  }
  CHECK(bad == 0);
  if (bad) fprintf(stderr, "  rows backward kind %d dtype %s R %lld L %lld: %d bad\n", kind,
                   tk_dtype_names[tx], (long long)R, (long long)L, bad);
#undef AT
  free(gw), free(gb), free(ref_m), free(ref_r), free(xv), free(wv), free(bv), free(gv);
  tk_free(x), tk_free(dy), tk_free(w), tk_free(b), tk_free(y), tk_free(dx), tk_free(mean);
  tk_free(rstd), tk_free(dw), tk_free(db);
}

/* ----------------------------------------------------------- channels */

/* batch norm of x [N, C, S], contiguous or channels_last ([N, S, C] in
 * storage); training (with/without running stats) or eval; then backward */
static void check_batch(nrt_dtype tx, nrt_dtype tw, int64_t N, int64_t C, int64_t S, int train,
                        int has_run, int has_w, int channels_last) {
  const double eps = 1e-5, mom = 0.1;
  double *xv, *gv, *wv, *bv, *rmv, *rvv;
  const int64_t n = N * C * S;
  void *x = fill(tx, n, 3.0, -1.0, &xv);
  void *dy = fill(tx, n, 1.0, 0.0, &gv);
  void *w = fill(tw, C, 1.0, 1.0, &wv);
  void *b = fill(tw, C, 1.0, 0.0, &bv);
  void *rm = fill(tw, C, 0.5, 0.0, &rmv);
  void *rv = fill(tw, C, 0.5, 1.0, &rvv);
  void *y = tk_alloc((size_t)n * (size_t)tk_size(tx));
  void *dx = tk_alloc((size_t)n * (size_t)tk_size(tx));
  void *sm = tk_alloc((size_t)C * (size_t)tk_size(tw));
  void *si = tk_alloc((size_t)C * (size_t)tk_size(tw));
  void *dw = tk_alloc((size_t)C * (size_t)tk_size(tw));
  void *db = tk_alloc((size_t)C * (size_t)tk_size(tw));
  const int64_t sz[3] = {N, C, S}, st_cl[3] = {S * C, 1, C};
  const int64_t *xs = channels_last ? st_cl : NULL;
#define IDX(nn, c, s) (channels_last ? (nn) * S * C + (s) * C + (c) : ((nn) * C + (c)) * S + (s))
  nrt_operand ops[8] = {tk_operand(y, tx, 3, sz, xs),
                        train ? tk_vector(sm, tw, C) : none_op(),
                        train ? tk_vector(si, tw, C) : none_op(),
                        tk_operand(x, tx, 3, sz, xs),
                        has_w ? tk_vector(w, tw, C) : none_op(),
                        has_w ? tk_vector(b, tw, C) : none_op(),
                        has_run ? tk_vector(rm, tw, C) : none_op(),
                        has_run ? tk_vector(rv, tw, C) : none_op()};
  nk_norm_params p = {.kind = NK_NORM_BATCH, .training = train, .eps = eps, .momentum = mom};
  CHECK_OK(run(NK_KERNEL_NORM, ops, 8, &p));
  const double tol = tol_of(tx), tp = tol_of(tw);
  int bad = 0;
  double *mean = malloc((size_t)C * sizeof(double)), *inv = malloc((size_t)C * sizeof(double));
  for (int64_t c = 0; c < C; c++) {
    double m = 0, v = 0;
    if (train) {
      for (int64_t nn = 0; nn < N; nn++)
        for (int64_t s = 0; s < S; s++) m += xv[IDX(nn, c, s)];
      m /= (double)(N * S);
      for (int64_t nn = 0; nn < N; nn++)
        for (int64_t s = 0; s < S; s++) v += (xv[IDX(nn, c, s)] - m) * (xv[IDX(nn, c, s)] - m);
      inv[c] = 1.0 / sqrt(v / (double)(N * S) + eps);
      if (!close_to(load(tw, (char *)sm + c * tk_size(tw)), m, tp, tol)) bad++;
      if (!close_to(load(tw, (char *)si + c * tk_size(tw)), inv[c], tol, tol)) bad++;
      if (has_run) {
        double wm = (1 - mom) * rmv[c] + mom * m, wv2 = (1 - mom) * rvv[c] + mom * v / (double)(N * S - 1);
        if (!close_to(load(tw, (char *)rm + c * tk_size(tw)), wm, tp, tol)) bad++;
        if (!close_to(load(tw, (char *)rv + c * tk_size(tw)), wv2, tp, tol)) bad++;
      }
    } else {
      m = rmv[c];
      inv[c] = 1.0 / sqrt(rvv[c] + eps);
      if (!close_to(load(tw, (char *)rm + c * tk_size(tw)), rmv[c], 0, 0)) bad++; /* untouched */
    }
    mean[c] = m;
    for (int64_t nn = 0; nn < N; nn++)
      for (int64_t s = 0; s < S; s++) {
        double want = (xv[IDX(nn, c, s)] - m) * inv[c] * (has_w ? wv[c] : 1) + (has_w ? bv[c] : 0);
        if (!close_to(load(tx, (char *)y + IDX(nn, c, s) * tk_size(tx)), want, tol * 4, tol * 4)) bad++;
      }
  }
  CHECK(bad == 0);
  if (bad) fprintf(stderr, "  batch forward %s train %d: %d bad\n", tk_dtype_names[tx], train, bad);

  /* backward: training takes the saved invstd; eval the running var */
  nrt_operand bops[8] = {tk_operand(dx, tx, 3, sz, xs),
                         tk_vector(dw, tw, C),
                         tk_vector(db, tw, C),
                         tk_operand(dy, tx, 3, sz, xs),
                         tk_operand(x, tx, 3, sz, xs),
                         train ? tk_vector(sm, tw, C) : tk_vector(rm, tw, C),
                         train ? tk_vector(si, tw, C) : tk_vector(rv, tw, C),
                         has_w ? tk_vector(w, tw, C) : none_op()};
  CHECK_OK(run(NK_KERNEL_NORM_BACKWARD, bops, 8, &p));
  bad = 0;
  for (int64_t c = 0; c < C; c++) {
    const double m = train ? load(tw, (char *)sm + c * tk_size(tw)) : rmv[c];
    const double is = train ? load(tw, (char *)si + c * tk_size(tw)) : inv[c];
    const double wc = has_w ? wv[c] : 1.0, cnt = (double)(N * S);
    double sg = 0, sgx = 0;
    for (int64_t nn = 0; nn < N; nn++)
      for (int64_t s = 0; s < S; s++) {
        sg += gv[IDX(nn, c, s)];
        sgx += gv[IDX(nn, c, s)] * (xv[IDX(nn, c, s)] - m) * is;
      }
    if (!close_to(load(tw, (char *)dw + c * tk_size(tw)), sgx, tol * 8, tol * 8 * sqrt(cnt))) bad++;
    if (!close_to(load(tw, (char *)db + c * tk_size(tw)), sg, tol * 8, tol * 8 * sqrt(cnt))) bad++;
    for (int64_t nn = 0; nn < N; nn++)
      for (int64_t s = 0; s < S; s++) {
        const double g = gv[IDX(nn, c, s)], xhat = (xv[IDX(nn, c, s)] - m) * is;
        const double want = train ? wc * is / cnt * (cnt * g - sg - xhat * sgx) : wc * is * g;
        if (!close_to(load(tx, (char *)dx + IDX(nn, c, s) * tk_size(tx)), want, tol * 8, tol * 8)) bad++;
      }
  }
  CHECK(bad == 0);
  if (bad) fprintf(stderr, "  batch backward %s train %d: %d bad\n", tk_dtype_names[tx], train, bad);
#undef IDX
  free(xv), free(gv), free(wv), free(bv), free(rmv), free(rvv), free(mean), free(inv);
  tk_free(x), tk_free(dy), tk_free(w), tk_free(b), tk_free(rm), tk_free(rv), tk_free(y);
  tk_free(dx), tk_free(sm), tk_free(si), tk_free(dw), tk_free(db);
}

/* ------------------------------------------------------- edge cases */

static void check_empty_and_errors(void) {
  /* rows of length 0: mean 0, rstd NaN (ATen's CPU) */
  float mean[3] = {7, 7, 7}, rstd[3] = {7, 7, 7};
  const int64_t sz[2] = {3, 0};
  nrt_operand ops[8] = {tk_operand(NULL, NRT_FLOAT32, 2, sz, NULL), tk_vector(mean, NRT_FLOAT32, 3),
                        tk_vector(rstd, NRT_FLOAT32, 3),          tk_operand(NULL, NRT_FLOAT32, 2, sz, NULL),
                        none_op(),                                none_op()};
  void *dm = tk_alloc(sizeof mean), *dr = tk_alloc(sizeof rstd);
  ops[1].data = dm;
  ops[2].data = dr;
  nk_norm_params p = {.kind = NK_NORM_LAYER, .eps = 1e-5};
  CHECK_OK(run(NK_KERNEL_NORM, ops, 6, &p));
  memcpy(mean, dm, sizeof mean);
  memcpy(rstd, dr, sizeof rstd);
  CHECK(mean[0] == 0 && mean[2] == 0 && isnan(rstd[0]) && isnan(rstd[2]));

  /* zero rows: nothing to do */
  const int64_t z2[2] = {0, 5};
  nrt_operand e[6] = {tk_operand(NULL, NRT_FLOAT32, 2, z2, NULL), none_op(), none_op(),
                      tk_operand(NULL, NRT_FLOAT32, 2, z2, NULL), none_op(), none_op()};
  CHECK_OK(run(NK_KERNEL_NORM, e, 6, &p));

  /* validation */
  float *buf = tk_alloc(16 * sizeof(float));
  const int64_t s2[2] = {2, 4}, s3[3] = {2, 2, 2}, two = 2, three = 3;
  nrt_operand v[6] = {tk_operand(buf, NRT_FLOAT32, 2, s2, NULL), tk_vector(buf, NRT_FLOAT32, 2),
                      tk_vector(buf, NRT_FLOAT32, 2),           tk_operand(buf, NRT_FLOAT32, 2, s2, NULL),
                      none_op(),                                none_op()};
  nk_norm_params bad_kind = {.kind = 99};
  nrt_task t = tk_task(NK_KERNEL_NORM, 6, v, &bad_kind, sizeof bad_kind);
  CHECK(tk_fails_with(&t, "invalid kind"));
  v[4] = tk_vector(buf, NRT_FLOAT32, 3); /* weight of 3 for rows of 4 */
  t = tk_task(NK_KERNEL_NORM, 6, v, &p, sizeof p);
  CHECK(tk_fails_with(&t, "per weight"));
  v[4] = none_op();
  v[2] = tk_vector(buf, NRT_FLOAT32, 3); /* rstd of 3 for 2 rows */
  t = tk_task(NK_KERNEL_NORM, 6, v, &p, sizeof p);
  CHECK(tk_fails_with(&t, "per row"));
  v[2] = tk_vector(buf, NRT_FLOAT32, 2);
  v[3].dtype = NRT_INT32;
  t = tk_task(NK_KERNEL_NORM, 6, v, &p, sizeof p);
  CHECK(tk_fails_with(&t, "non-floating"));
  v[3].dtype = NRT_FLOAT32;
  t = tk_task(NK_KERNEL_NORM, 5, v, &p, sizeof p);
  CHECK(tk_fails_with(&t, "operand"));
  nk_norm_params g = {.kind = NK_NORM_GROUP, .groups = 2, .hw = 3, .eps = 1e-5};
  t = tk_task(NK_KERNEL_NORM, 6, v, &g, sizeof g); /* 4 is not a multiple of hw 3 */
  CHECK(tk_fails_with(&t, "group layout"));
  /* batch norm, eval without running stats; and a 2-d input */
  nrt_operand bn[8] = {tk_operand(buf, NRT_FLOAT32, 3, s3, NULL), none_op(), none_op(),
                       tk_operand(buf, NRT_FLOAT32, 3, s3, NULL), none_op(), none_op(),
                       none_op(), none_op()};
  nk_norm_params be = {.kind = NK_NORM_BATCH, .training = 0, .eps = 1e-5};
  t = tk_task(NK_KERNEL_NORM, 8, bn, &be, sizeof be);
  CHECK(tk_fails_with(&t, "running_mean and running_var"));
  bn[6] = tk_vector(buf, NRT_FLOAT32, three); /* 3 running means for 2 channels */
  bn[7] = tk_vector(buf, NRT_FLOAT32, two);
  t = tk_task(NK_KERNEL_NORM, 8, bn, &be, sizeof be);
  CHECK(tk_fails_with(&t, "per weight"));
  bn[0] = tk_operand(buf, NRT_FLOAT32, 2, s2, NULL);
  bn[3] = tk_operand(buf, NRT_FLOAT32, 2, s2, NULL);
  t = tk_task(NK_KERNEL_NORM, 8, bn, &be, sizeof be);
  CHECK(tk_fails_with(&t, "3-d"));
  tk_free(dm), tk_free(dr), tk_free(buf);
}

static void tests(void) {
  const nrt_dtype f32 = NRT_FLOAT32, f64 = NRT_FLOAT64;
  /* layer norm: dtypes, optional affine, odd lengths, transposed, long rows */
  check_rows(NK_NORM_LAYER, f32, f32, 7, 33, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, f32, f32, 5, 16, 1, 1, 0, 0, 0);
  check_rows(NK_NORM_LAYER, f32, f32, 6, 19, 1, 1, 1, 0, 1);
  check_rows(NK_NORM_LAYER, f64, f64, 9, 40, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, NRT_BFLOAT16, f32, 8, 48, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, NRT_FLOAT16, f32, 8, 20, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, NRT_BFLOAT16, NRT_BFLOAT16, 4, 24, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, f32, f32, 300, 700, 1, 1, 1, 1, 0); /* parallel rows, column blocks */
  /* 4+ chunks of 256 rows: dx and the column sums in one pass per chunk
   * (the last chunk short, rows not a multiple of 4), converted and
   * transposed rows, double, rms with a weight only */
  check_rows(NK_NORM_LAYER, f32, f32, 1031, 37, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, NRT_BFLOAT16, f32, 1030, 24, 1, 1, 1, 1, 1);
  check_rows(NK_NORM_LAYER, f64, f64, 1025, 9, 1, 1, 1, 0, 0);
  check_rows(NK_NORM_RMS, f32, f32, 1100, 20, 1, 1, 1, 0, 0);
  check_rows(NK_NORM_LAYER, f32, f32, 1, 1, 1, 1, 1, 1, 0);
  /* a row's sum: float lanes go to double every 4096 elements (NR_BLOCK);
   * two sets of 16 lanes per step, then one set, then a tail */
  check_rows(NK_NORM_LAYER, f32, f32, 3, 8211, 1, 1, 1, 1, 0);
  check_rows(NK_NORM_LAYER, f32, f32, 4, 83, 1, 1, 1, 1, 0);
  /* rms */
  check_rows(NK_NORM_RMS, f32, f32, 7, 33, 1, 1, 1, 0, 0);
  check_rows(NK_NORM_RMS, f32, f32, 3, 64, 1, 1, 0, 0, 1);
  check_rows(NK_NORM_RMS, f64, f64, 5, 17, 1, 1, 1, 0, 0);
  check_rows(NK_NORM_RMS, NRT_BFLOAT16, f32, 6, 40, 1, 1, 1, 0, 0);
  /* group: rows (n, g) of (C/G) * hw */
  check_rows(NK_NORM_GROUP, f32, f32, 2 * 3, 2 * 5, 3, 5, 1, 1, 0);
  check_rows(NK_NORM_GROUP, f32, f32, 4 * 2, 3 * 7, 2, 7, 0, 1, 0);
  check_rows(NK_NORM_GROUP, f64, f64, 3 * 4, 1 * 9, 4, 9, 1, 1, 0);
  check_rows(NK_NORM_GROUP, NRT_BFLOAT16, f32, 2 * 2, 4 * 6, 2, 6, 1, 1, 0);
  check_rows(NK_NORM_GROUP, f32, f32, 2 * 1, 8 * 1, 1, 1, 1, 1, 0);
  /* batch */
  check_batch(f32, f32, 4, 3, 10, 1, 1, 1, 0);
  check_batch(f32, f32, 4, 3, 10, 1, 1, 1, 1);
  check_batch(f32, f32, 3, 5, 1, 1, 0, 0, 0);
  check_batch(f32, f32, 2, 4, 7, 0, 1, 1, 0);
  check_batch(f32, f32, 2, 4, 7, 0, 1, 0, 1);
  check_batch(f64, f64, 3, 2, 9, 1, 1, 1, 0);
  check_batch(NRT_BFLOAT16, f32, 4, 3, 12, 1, 1, 1, 1);
  check_batch(NRT_FLOAT16, f32, 4, 3, 12, 0, 1, 1, 0);
  check_batch(f32, f32, 16, 8, 300, 1, 1, 1, 0); /* parallel channels */
  /* channels split into chunks of samples (norm.c's chunk_plan): few
   * channels (C < 32: 64 x 256 -> 2 chunks of 32), uneven chunks (10
   * samples -> 4, 4, 2), a channel over 65536 elements; every layout and
   * dtype through the chunked path, training and eval */
  check_batch(f32, f32, 64, 2, 256, 1, 1, 1, 0);
  check_batch(f32, f32, 10, 3, 3000, 1, 1, 1, 0);
  check_batch(f32, f32, 10, 3, 3000, 1, 0, 0, 1);
  check_batch(f32, f32, 10, 3, 3000, 0, 1, 1, 0);
  check_batch(f32, f32, 3, 40, 30000, 1, 1, 1, 0);
  check_batch(f64, f64, 10, 3, 3000, 1, 1, 1, 0);
  check_batch(NRT_BFLOAT16, f32, 10, 3, 3000, 1, 1, 1, 0);
  check_batch(NRT_BFLOAT16, NRT_BFLOAT16, 10, 3, 3000, 1, 1, 1, 1);
  /* many samples of short planes (run tails of every length) */
  check_batch(f32, f32, 300, 5, 3, 1, 1, 1, 0);
  check_batch(f32, f32, 100, 4, 17, 1, 1, 1, 0);
  check_batch(f32, f32, 64, 6, 49, 1, 1, 1, 1);
  check_batch(NRT_BFLOAT16, f32, 64, 6, 49, 1, 1, 1, 0);
  check_batch(f32, f32, 2000, 3, 1, 1, 1, 1, 0);
  check_empty_and_errors();
}

int main(void) { return tk_main(tests, __FILE__); }
