/* The long-tail kernels: NK_KERNEL_TAIL_POINTWISE (glu, glu_backward,
 * prelu, prelu_backward, renorm factor, frexp, cross), NK_KERNEL_UNFOLD_BACKWARD,
 * NK_KERNEL_HISTOGRAM, NK_KERNEL_LOGSPACE, NK_KERNEL_DIST (cdist/pdist and
 * their backward), NK_KERNEL_EMBEDDING_BAG and the sort kernel's NANMEDIAN selection, against references written
 * here (double math, rounded to the output dtype), over float32/float64/
 * bfloat16/float16 and integers (cross), contiguous, transposed, broadcast
 * (stride 0), 0-dim and 0-size operands, sizes that take the parallel path,
 * and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

/* ------------------------------------------------------------ helpers */

static double get(nrt_dtype t, const void *p) {
  uint64_t raw = tk_raw(t, p);
  switch (t) {
  case NRT_FLOAT16: return tk_f16_value((uint16_t)raw);
  case NRT_BFLOAT16: return tk_bf16_value((uint16_t)raw);
  case NRT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
  case NRT_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
  case NRT_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
  case NRT_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
  default: return (double)raw;
  }
}

static void put(nrt_dtype t, void *p, double v) {
  tk_value x = {tk_is_integral(t), (int64_t)v, v};
  tk_put(t, p, x);
}

/* the value v takes when stored in t */
static double rounded(nrt_dtype t, double v) {
  if (t == NRT_FLOAT16) return tk_f16_value(tk_f16_bits(v));
  if (t == NRT_BFLOAT16) return tk_bf16_value(tk_bf16_bits(v));
  if (t == NRT_FLOAT32) return (float)v;
  return v;
}

/* |got - want| within the output dtype's precision (the kernel computes in
 * float for the 32-bit-and-narrower dtypes, the reference in double) */
static int close_to(nrt_dtype t, double got, double want) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  double tol = t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : t == NRT_BFLOAT16 ? 1e-2 : 2e-3;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

static double rnd(void) { return ((double)(tk_rand() % 20001) - 10000) / 2500.0; } /* [-4, 4] */

static nrt_task tail_task(nk_tail_op op, nrt_dtype compute, int n, const nrt_operand *ops, int dim,
                          double scalar) {
  nk_tail_pointwise_params p = {.op = op, .compute = compute, .dim = dim, .scalar = scalar};
  return tk_task(NK_KERNEL_TAIL_POINTWISE, n, ops, &p, sizeof p);
}

static double sigm(double b) { return 1 / (1 + exp(-b)); }

/* ------------------------------------------------ elementwise ops, 2-d */

/* One op over an r x c iteration.  Operand k (outputs first) is
 * contiguous, or transposed storage (trans bit k), or broadcast along rows
 * (bcast bit k, inputs only: one row of c).  Inputs get random values. */
static int check_elementwise(nk_tail_op op, nrt_dtype dt, int64_t r, int64_t c, unsigned trans, unsigned bcast,
                             double scalar) {
  static const int counts[][2] = {/* outputs, inputs */
                                  [NK_TAIL_GLU] = {1, 2},          [NK_TAIL_GLU_BACKWARD] = {2, 3},
                                  [NK_TAIL_PRELU] = {1, 2},        [NK_TAIL_PRELU_BACKWARD] = {2, 3},
                                  [NK_TAIL_RENORM_FACTOR] = {1, 1}, [NK_TAIL_FREXP] = {2, 1}};
  const int n_out = counts[op][0], n = counts[op][0] + counts[op][1];
  int64_t sizes[2] = {r, c};
  nrt_operand ops[5];
  void *buf[5];
  nrt_dtype dts[5];
  for (int k = 0; k < n; k++) {
    dts[k] = (op == NK_TAIL_FREXP && k == 1) ? NRT_INT32 : dt;
    int b = (bcast >> k) & 1, tr = (trans >> k) & 1;
    int64_t cnt = b ? c : r * c;
    buf[k] = tk_alloc((size_t)(cnt * tk_size(dts[k])) + 1);
    int64_t st[2] = {b ? 0 : (tr ? 1 : c), b ? 1 : (tr ? r : 1)};
    ops[k] = tk_operand(buf[k], dts[k], 2, sizes, st);
    if (k >= n_out)
      for (int64_t e = 0; e < cnt; e++) {
        double v = rnd();
        if (op == NK_TAIL_RENORM_FACTOR) v = fabs(v);
        if (op == NK_TAIL_FREXP && e % 7 == 3) v = ldexp(v, (int)(e % 60) - 30);
        put(dts[k], (char *)buf[k] + e * tk_size(dts[k]), v);
      }
  }
  nrt_task t = tail_task(op, dt == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32, n, ops, 0, scalar);
  if (tk_run(&t) != NRT_SUCCESS) {
    fprintf(stderr, "  run failed: %s\n", nrt_last_error());
    return 0;
  }
  int ok = 1;
  for (int64_t i = 0; i < r && ok; i++)
    for (int64_t j = 0; j < c && ok; j++) {
      double in[3], got[2];
      for (int k = n_out; k < n; k++)
        in[k - n_out] = get(dts[k], (char *)ops[k].data + i * ops[k].strides[0] + j * ops[k].strides[1]);
      for (int k = 0; k < n_out; k++)
        got[k] = get(dts[k], (char *)ops[k].data + i * ops[k].strides[0] + j * ops[k].strides[1]);
      double want[2] = {0, 0};
      switch (op) {
      case NK_TAIL_GLU: want[0] = in[0] * sigm(in[1]); break;
      case NK_TAIL_GLU_BACKWARD: {
        double s = sigm(in[1]);
        want[0] = s * in[2];
        want[1] = (1 - s) * s * in[0] * in[2];
        break;
      }
      case NK_TAIL_PRELU: want[0] = in[0] > 0 ? in[0] : in[1] * in[0]; break;
      case NK_TAIL_PRELU_BACKWARD:
        want[0] = in[0] > 0 ? in[2] : in[1] * in[2];
        want[1] = in[0] > 0 ? 0 : in[0] * in[2];
        break;
      case NK_TAIL_RENORM_FACTOR: want[0] = in[0] > scalar ? scalar / (in[0] + 1e-7) : 1; break;
      case NK_TAIL_FREXP: {
        int e;
        want[0] = frexp(in[0], &e);
        want[1] = e;
        break;
      }
      default: break;
      }
      for (int k = 0; k < n_out; k++) {
        int good = op == NK_TAIL_FREXP ? got[k] == want[k] : close_to(dts[k], got[k], rounded(dts[k], want[k]));
        if (!good) {
          fprintf(stderr, "  op %d dtype %s [%lld,%lld] out %d: got %.9g want %.9g\n", (int)op, tk_dtype_names[dt],
                  (long long)i, (long long)j, k, got[k], want[k]);
          ok = 0;
        }
      }
    }
  for (int k = 0; k < n; k++) tk_free(buf[k]);
  return ok;
}

static void test_elementwise(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  static const nk_tail_op ops[] = {NK_TAIL_GLU, NK_TAIL_GLU_BACKWARD, NK_TAIL_PRELU, NK_TAIL_PRELU_BACKWARD,
                                   NK_TAIL_RENORM_FACTOR, NK_TAIL_FREXP};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      CHECK(check_elementwise(ops[o], dts[d], 5, 7, 0, 0, 2.0));
      CHECK(check_elementwise(ops[o], dts[d], 6, 3, 0x5, 0, 1.5)); /* transposed out 0, operand 2 */
      CHECK(check_elementwise(ops[o], dts[d], 0, 4, 0, 0, 1.0));   /* empty */
    }
  /* prelu's weight broadcast along rows (a per-channel weight), both ways */
  CHECK(check_elementwise(NK_TAIL_PRELU, NRT_FLOAT32, 9, 4, 0, 0x4, 0));
  CHECK(check_elementwise(NK_TAIL_PRELU_BACKWARD, NRT_FLOAT32, 9, 4, 0, 0x8, 0));
  /* the parallel path */
  CHECK(check_elementwise(NK_TAIL_GLU, NRT_FLOAT32, 300, 257, 0x2, 0, 0));
  CHECK(check_elementwise(NK_TAIL_PRELU_BACKWARD, NRT_FLOAT64, 257, 300, 0x1, 0x8, 0));

  /* frexp's special values: 0, -0, inf, nan keep the value, exponent 0 */
  float x[4] = {0.0f, -0.0f, INFINITY, NAN}, m[4];
  int32_t e[4] = {9, 9, 9, 9};
  nrt_operand o[3] = {tk_vector(m, NRT_FLOAT32, 4), tk_vector(e, NRT_INT32, 4), tk_vector(x, NRT_FLOAT32, 4)};
  for (int k = 0; k < 3; k++) {
    o[k].data = tk_alloc(16);
    memcpy(o[k].data, k == 2 ? (void *)x : k == 1 ? (void *)e : (void *)m, 16);
  }
  nrt_task t = tail_task(NK_TAIL_FREXP, NRT_FLOAT32, 3, o, 0, 0);
  CHECK_OK(tk_run(&t));
  memcpy(m, o[0].data, 16);
  memcpy(e, o[1].data, 16);
  CHECK(m[0] == 0 && !signbit(m[0]) && m[1] == 0 && signbit(m[1]) && m[2] == INFINITY && isnan(m[3]));
  CHECK(e[0] == 0 && e[1] == 0);
  /* 0-dim */
  put(NRT_FLOAT32, o[2].data, 12.0);
  o[0].ndim = o[1].ndim = o[2].ndim = 0;
  CHECK_OK(tk_run(&t));
  CHECK(get(NRT_FLOAT32, o[0].data) == 0.75 && get(NRT_INT32, o[1].data) == 4);
  for (int k = 0; k < 3; k++) tk_free(o[k].data);
}

/* ------------------------------------------------------------ cross */

/* out = a x b along `dim` of a 3-d [d0, d1, d2] shape; b optionally
 * broadcast (stride 0) along dim 0, out optionally transposed storage. */
static int check_cross(nrt_dtype dt, const int64_t *sizes, int dim, int b_bcast, int out_rev) {
  int64_t numel = sizes[0] * sizes[1] * sizes[2];
  void *ob = tk_alloc((size_t)(numel * tk_size(dt))), *ab = tk_alloc((size_t)(numel * tk_size(dt))),
       *bb = tk_alloc((size_t)(numel * tk_size(dt)));
  int64_t rev[3] = {1, sizes[0], sizes[0] * sizes[1]};
  int64_t bst[3] = {0, sizes[2], 1};
  nrt_operand ops[3] = {tk_operand(ob, dt, 3, sizes, out_rev ? rev : NULL), tk_operand(ab, dt, 3, sizes, NULL),
                        tk_operand(bb, dt, 3, sizes, b_bcast ? bst : NULL)};
  for (int64_t e = 0; e < numel; e++) {
    /* int64 products exceed 2^32 (and one wraps past 2^63); int32's stay in range */
    const uint64_t span = dt == NRT_INT64 ? 200001 : 2001;
    double va = tk_is_integral(dt) ? (double)(int64_t)(tk_rand() % span) - (double)(span / 2) : rnd();
    double vb = tk_is_integral(dt) ? (double)(int64_t)(tk_rand() % span) - (double)(span / 2) : rnd();
    if (dt == NRT_INT64 && e == 1) va = 4e18; /* products wrap */
    put(dt, (char *)ab + e * tk_size(dt), va);
    put(dt, (char *)bb + e * tk_size(dt), vb);
  }
  nrt_task t = tail_task(NK_TAIL_CROSS, dt == NRT_FLOAT64 ? NRT_FLOAT64 : tk_is_integral(dt) ? dt : NRT_FLOAT32, 3,
                         ops, dim, 0);
  if (tk_run(&t) != NRT_SUCCESS) {
    fprintf(stderr, "  cross failed: %s\n", nrt_last_error());
    return 0;
  }
  int ok = 1;
  int64_t idx[3];
  for (idx[0] = 0; idx[0] < sizes[0]; idx[0]++)
    for (idx[1] = 0; idx[1] < sizes[1]; idx[1]++)
      for (idx[2] = 0; idx[2] < sizes[2]; idx[2]++) {
        if (idx[dim] != 0) continue;
        double a[3], b[3];
        int64_t ai[3], bi[3];
        for (int c = 0; c < 3; c++) {
          int64_t j[3] = {idx[0], idx[1], idx[2]};
          j[dim] = c;
          const char *pa = (const char *)ab, *pb = (const char *)bb;
          for (int d = 0; d < 3; d++) { pa += j[d] * ops[1].strides[d]; pb += j[d] * ops[2].strides[d]; }
          a[c] = get(dt, pa);
          b[c] = get(dt, pb);
          memcpy(&ai[c], pa, 8);
          memcpy(&bi[c], pb, 8);
        }
        for (int c = 0; c < 3; c++) {
          int64_t j[3] = {idx[0], idx[1], idx[2]};
          j[dim] = c;
          const char *po = (const char *)ob;
          for (int d = 0; d < 3; d++) po += j[d] * ops[0].strides[d];
          int c1 = (c + 1) % 3, c2 = (c + 2) % 3;
          if (dt == NRT_INT64) {
            int64_t want = (int64_t)((uint64_t)ai[c1] * (uint64_t)bi[c2] - (uint64_t)ai[c2] * (uint64_t)bi[c1]), got;
            memcpy(&got, po, 8);
            if (got != want) ok = 0;
          } else {
            double want = a[c1] * b[c2] - a[c2] * b[c1];
            if (!close_to(dt, get(dt, po), rounded(dt, want))) {
              fprintf(stderr, "  cross %s: got %g want %g\n", tk_dtype_names[dt], get(dt, po), want);
              ok = 0;
            }
          }
        }
      }
  tk_free(ob);
  tk_free(ab);
  tk_free(bb);
  return ok;
}

static void test_cross(void) {
  const int64_t s_last[3] = {4, 5, 3}, s_mid[3] = {2, 3, 7}, s_first[3] = {3, 6, 2}, s_big[3] = {3, 200, 300};
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_INT64, NRT_INT32};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    CHECK(check_cross(dts[d], s_last, 2, 0, 0));
    CHECK(check_cross(dts[d], s_mid, 1, 1, 0));
    CHECK(check_cross(dts[d], s_first, 0, 0, 1));
  }
  CHECK(check_cross(NRT_FLOAT32, s_big, 0, 0, 1));
}

/* --------------------------------------------------- unfold backward */

/* grad_in (shape [a, n, b], unfold along dim 1 with size, step) from grad
 * [a, nwin, b, size], against a scatter-add reference. */
static int check_unfold_backward(nrt_dtype dt, int64_t a, int64_t n, int64_t b, int64_t size, int64_t step,
                                 int transposed_grad) {
  const int64_t nwin = n >= size ? (n - size) / step + 1 : 0;
  int64_t gs[4] = {a, nwin, b, size}, os[3] = {a, n, b};
  int64_t gnum = a * nwin * b * size, onum = a * n * b;
  void *gb = tk_alloc((size_t)(gnum * tk_size(dt))), *obuf = tk_alloc((size_t)(onum * tk_size(dt)));
  /* transposed: the window and size dims swap their storage */
  int64_t gst[4] = {nwin * b * size, size, nwin * size, 1};
  if (transposed_grad) { gst[1] = 1; gst[3] = nwin; gst[2] = nwin * size; }
  nrt_operand ops[2] = {tk_operand(obuf, dt, 3, os, NULL), tk_operand(gb, dt, 4, gs, gst)};
  for (int64_t e = 0; e < gnum; e++) put(dt, (char *)gb + e * tk_size(dt), tk_is_integral(dt) ? (double)(e % 13) : rnd());
  double *ref = calloc((size_t)(onum ? onum : 1), sizeof *ref);
  for (int64_t i = 0; i < a; i++)
    for (int64_t w = 0; w < nwin; w++)
      for (int64_t j = 0; j < b; j++)
        for (int64_t s = 0; s < size; s++)
          ref[(i * n + w * step + s) * b + j] += get(dt, (char *)gb + (i * gst[0] + w * gst[1] + j * gst[2] + s * gst[3]) * tk_size(dt));
  nk_unfold_backward_params p = {.dim = 1, .size = size, .step = step};
  nrt_task t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, ops, &p, sizeof p);
  int ok = tk_run(&t) == NRT_SUCCESS;
  for (int64_t e = 0; ok && e < onum; e++) {
    double got = get(dt, (char *)obuf + e * tk_size(dt));
    if (!close_to(dt, got, rounded(dt, ref[e]))) {
      fprintf(stderr, "  unfold_backward %s [%lld]: got %g want %g\n", tk_dtype_names[dt], (long long)e, got, ref[e]);
      ok = 0;
    }
  }
  free(ref);
  tk_free(gb);
  tk_free(obuf);
  return ok;
}

static void test_unfold_backward(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_INT64};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    CHECK(check_unfold_backward(dts[d], 2, 10, 3, 4, 1, 0));
    CHECK(check_unfold_backward(dts[d], 3, 11, 2, 5, 2, 1));
    CHECK(check_unfold_backward(dts[d], 1, 9, 1, 3, 3, 0)); /* step == size */
    CHECK(check_unfold_backward(dts[d], 2, 7, 2, 2, 4, 0)); /* gaps: zeros */
  }
  CHECK(check_unfold_backward(NRT_FLOAT32, 0, 5, 3, 2, 1, 0));  /* empty */
  CHECK(check_unfold_backward(NRT_FLOAT32, 2, 3, 2, 5, 1, 0));  /* no window: all zero */
  CHECK(check_unfold_backward(NRT_FLOAT32, 64, 600, 2, 7, 3, 1)); /* parallel */
}

/* ------------------------------------------------------- nanmedian */

static void test_nanmedian(void) {
  /* rows: [3 NaN 1 2] -> 2 (idx 3); [NaN NaN] -> NaN (idx 0); [5 5 1 5] -> 5 (idx 0, ties by index) */
  float in[3][4] = {{3, NAN, 1, 2}, {NAN, NAN, NAN, NAN}, {5, 5, 1, 5}};
  int64_t s[2] = {3, 4}, so[2] = {3, 1};
  void *ib = tk_alloc(sizeof in), *vb = tk_alloc(3 * 4), *xb = tk_alloc(3 * 8);
  memcpy(ib, in, sizeof in);
  nrt_operand ops[3] = {tk_operand(vb, NRT_FLOAT32, 2, so, NULL), tk_operand(xb, NRT_INT64, 2, so, NULL),
                        tk_operand(ib, NRT_FLOAT32, 2, s, NULL)};
  nk_sort_params p = {.dim = 1, .k = 1, .order = NK_SORT_NANMEDIAN};
  nrt_task t = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  float v[3];
  int64_t ix[3];
  memcpy(v, vb, sizeof v);
  memcpy(ix, xb, sizeof ix);
  CHECK(v[0] == 2 && ix[0] == 3);
  CHECK(isnan(v[1]) && ix[1] == 0);
  CHECK(v[2] == 5 && ix[2] == 0);
  /* integers have no NaN: the lower median */
  int64_t ii[5] = {9, -3, 7, 7, 1}, n5 = 5, one = 1, iv = 0, ixx = 0;
  void *iib = tk_alloc(sizeof ii), *ivb = tk_alloc(8), *ixb = tk_alloc(8);
  memcpy(iib, ii, sizeof ii);
  nrt_operand o2[3] = {tk_operand(ivb, NRT_INT64, 1, &one, NULL), tk_operand(ixb, NRT_INT64, 1, &one, NULL),
                       tk_operand(iib, NRT_INT64, 1, &n5, NULL)};
  p.dim = 0;
  t = tk_task(NK_KERNEL_SORT, 3, o2, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  memcpy(&iv, ivb, 8);
  memcpy(&ixx, ixb, 8);
  CHECK(iv == 7 && ixx == 2);
  tk_free(ib); tk_free(vb); tk_free(xb); tk_free(iib); tk_free(ivb); tk_free(ixb);
}


/* ------------------------------------------------------------ histogram */

/* hist of n values (1-d) in `bins` equal bins over [lo, hi], against a
 * reference that bins in double with the binary search's semantics; the
 * values avoid bin edges so every algorithm agrees. */
static int check_histogram(nrt_dtype dt, int64_t n, int64_t bins, double lo, double hi, int algo, int weighted,
                           int strided) {
  int64_t in_sizes[2] = {n, 1}, in_strides[2] = {strided ? 3 : 1, 1};
  void *ib = tk_alloc((size_t)(n * (strided ? 3 : 1) * tk_size(dt)) + 8);
  void *eb = tk_alloc((size_t)((bins + 1) * tk_size(dt)));
  void *wb = tk_alloc((size_t)(n * tk_size(dt)) + 8);
  void *hb = tk_alloc((size_t)(bins * tk_size(dt)));
  double *ref = calloc((size_t)bins, sizeof *ref);
  double width = (hi - lo) / (double)bins;
  for (int64_t k = 0; k <= bins; k++) put(dt, (char *)eb + k * tk_size(dt), lo + width * (double)k);
  for (int64_t i = 0; i < n; i++) {
    /* a bin index (some outside), placed mid-bin */
    int64_t b = (int64_t)(tk_rand() % (uint64_t)(bins + 4)) - 2;
    double v = lo + width * ((double)b + 0.5);
    if (i % 17 == 5) v = NAN;
    if (i % 23 == 7) { v = hi; b = bins - 1; } /* the right edge counts in the last bin */
    double w = weighted ? (double)(tk_rand() % 8) / 4 : 1;
    put(dt, (char *)ib + i * in_strides[0] * tk_size(dt), v);
    put(dt, (char *)wb + i * tk_size(dt), w);
    double stored = get(dt, (char *)ib + i * in_strides[0] * tk_size(dt));
    if (!isnan(stored) && b >= 0 && b < bins) ref[b] += get(dt, (char *)wb + i * tk_size(dt));
  }
  nrt_operand ops[4] = {tk_operand(hb, dt, 1, &bins, NULL), tk_operand(ib, dt, 2, in_sizes, in_strides),
                        tk_vector(eb, dt, bins + 1), tk_vector(wb, dt, n)};
  nk_histogram_params p = {.algorithm = algo, .dims = 1};
  p.n_edges[0] = bins + 1;
  nrt_task t = tk_task(NK_KERNEL_HISTOGRAM, weighted ? 4 : 3, ops, &p, sizeof p);
  int ok = tk_run(&t) == NRT_SUCCESS;
  for (int64_t k = 0; ok && k < bins; k++) {
    double got = get(dt, (char *)hb + k * tk_size(dt));
    if (!close_to(dt, got, rounded(dt, ref[k]))) {
      fprintf(stderr, "  histogram %s algo %d bin %lld: got %g want %g\n", tk_dtype_names[dt], algo, (long long)k, got,
              ref[k]);
      ok = 0;
    }
  }
  free(ref);
  tk_free(ib); tk_free(eb); tk_free(wb); tk_free(hb);
  return ok;
}

static void test_histogram(void) {
  for (int algo = 0; algo < 3; algo++) {
    CHECK(check_histogram(NRT_FLOAT32, 100, 8, -2, 2, algo, 0, 0));
    CHECK(check_histogram(NRT_FLOAT64, 100, 5, 0, 10, algo, 1, 1));
    CHECK(check_histogram(NRT_BFLOAT16, 60, 4, -1, 1, algo, 0, 1));
    CHECK(check_histogram(NRT_FLOAT32, 0, 3, 0, 1, algo, 0, 0));       /* empty input: zeros */
    CHECK(check_histogram(NRT_FLOAT64, 20000, 16, -4, 4, algo, 1, 0)); /* several chunks */
  }
  /* 2-d: points (x, y) with edges {0,1,2} x {0,10,20,30} */
  float pts[5][2] = {{0.5f, 5}, {1.5f, 25}, {1.5f, 25}, {2.0f, 30}, {3.0f, 5}};
  float edges[7] = {0, 1, 2, 0, 10, 20, 30};
  void *pb = tk_alloc(sizeof pts), *eb = tk_alloc(sizeof edges), *hb = tk_alloc(6 * 4);
  memcpy(pb, pts, sizeof pts);
  memcpy(eb, edges, sizeof edges);
  int64_t ps[2] = {5, 2}, hs[2] = {2, 3};
  nrt_operand ops[3] = {tk_operand(hb, NRT_FLOAT32, 2, hs, NULL), tk_operand(pb, NRT_FLOAT32, 2, ps, NULL),
                        tk_vector(eb, NRT_FLOAT32, 7)};
  nk_histogram_params p = {.algorithm = NK_HISTOGRAM_BINARY_SEARCH, .dims = 2, .n_edges = {3, 4}};
  nrt_task t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  float h[6];
  memcpy(h, hb, sizeof h);
  CHECK(h[0] == 1 && h[1] == 0 && h[2] == 0 && h[3] == 0 && h[4] == 0 && h[5] == 3);
  /* validation */
  p.n_edges[1] = 5;
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "edges for"));
  p.n_edges[1] = 4;
  p.dims = 3;
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "bad shapes"));
  p.dims = 2;
  ops[2].sizes[0] = 6; /* fewer edges than the counts say */
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "edges given"));
  ops[2].sizes[0] = 7;
  ops[1].dtype = NRT_INT32;
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "floating dtype"));
  tk_free(pb); tk_free(eb); tk_free(hb);
}

/* histc on integers (NK_HISTOGRAM_INTEGER): CUDA's bin formula, counts in
 * the hist dtype (wrapping), values at int64's ends, strided input. */
static int check_histogram_integer(nrt_dtype dt, nrt_dtype ht, int64_t n, int64_t bins, int64_t lo, int64_t hi,
                                   const int64_t *fixed, int nfixed) {
  const int64_t es = tk_size(dt), hs = tk_size(ht);
  int64_t in_sizes[2] = {n, 1}, in_strides[2] = {2, 1};
  char *ib = tk_alloc((size_t)(2 * n * es) + 8);
  int64_t *eb = tk_alloc(16);
  char *hb = tk_alloc((size_t)(bins * hs));
  int64_t *ref = calloc((size_t)bins, sizeof *ref);
  eb[0] = lo;
  eb[1] = hi;
  for (int64_t i = 0; i < n; i++) {
    tk_value v = {1, i < nfixed ? fixed[i] : (int64_t)(tk_rand() % 200) - 100, 0};
    tk_put(dt, ib + 2 * i * es, v);
    const char *at = ib + 2 * i * es; /* the value as stored (wrapped to dt) */
    int64_t x = dt == NRT_UINT8 ? *(const uint8_t *)at : dt == NRT_INT8 ? *(const int8_t *)at
              : dt == NRT_INT16 ? *(const int16_t *)at : dt == NRT_INT32 ? *(const int32_t *)at
              : *(const int64_t *)at;
    if (x >= lo && x <= hi) {
      __int128 b = ((__int128)x - lo) * bins / ((__int128)hi - lo);
      ref[b >= bins ? bins - 1 : (int64_t)b]++;
    }
  }
  nrt_operand ops[3] = {tk_operand(hb, ht, 1, &bins, NULL), tk_operand(ib, dt, 2, in_sizes, in_strides),
                        tk_vector(eb, NRT_INT64, 2)};
  nk_histogram_params p = {.algorithm = NK_HISTOGRAM_INTEGER, .dims = 1};
  p.n_edges[0] = bins + 1;
  nrt_task t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  int ok = tk_run(&t) == NRT_SUCCESS;
  for (int64_t k = 0; ok && k < bins; k++) {
    tk_value want = {1, ref[k], (double)ref[k]};
    if (tk_raw(ht, hb + k * hs) != tk_expected(want, ht)) {
      fprintf(stderr, "  histc %s bin %lld: got raw %llu want %lld\n", tk_dtype_names[dt], (long long)k,
              (unsigned long long)tk_raw(ht, hb + k * hs), (long long)ref[k]);
      ok = 0;
    }
  }
  free(ref);
  tk_free(ib); tk_free(eb); tk_free(hb);
  return ok;
}

static void test_histogram_integer(void) {
  CHECK(check_histogram_integer(NRT_INT32, NRT_INT32, 500, 8, -10, 50, NULL, 0));
  CHECK(check_histogram_integer(NRT_INT64, NRT_INT64, 9000, 7, -100, 99, NULL, 0)); /* several chunks */
  CHECK(check_histogram_integer(NRT_INT16, NRT_INT16, 100, 1, 0, 1, NULL, 0));
  CHECK(check_histogram_integer(NRT_UINT8, NRT_UINT8, 300, 3, 0, 255, NULL, 0));
  CHECK(check_histogram_integer(NRT_INT8, NRT_INT8, 400, 2, -100, 100, NULL, 0)); /* counts wrap in int8 */
  CHECK(check_histogram_integer(NRT_INT32, NRT_FLOAT32, 50, 4, 0, 3, NULL, 0));
  CHECK(check_histogram_integer(NRT_INT32, NRT_INT32, 0, 4, -1, 1, NULL, 0)); /* empty input */
  const int64_t ends[4] = {INT64_MIN, -1, 0, INT64_MAX};
  CHECK(check_histogram_integer(NRT_INT64, NRT_INT64, 4, 4, INT64_MIN, INT64_MAX, ends, 4)); /* no overflow */
  /* validation: empty range, floating input, a weight, wrong edges */
  int32_t *ib = tk_alloc(16);
  int64_t *eb = tk_alloc(32), *hb = tk_alloc(32);
  int64_t in_sizes[2] = {4, 1}, bins = 4;
  eb[0] = 3;
  eb[1] = 3;
  nrt_operand ops[4] = {tk_operand(hb, NRT_INT64, 1, &bins, NULL), tk_operand(ib, NRT_INT32, 2, in_sizes, NULL),
                        tk_vector(eb, NRT_INT64, 2), tk_vector(eb, NRT_INT64, 4)};
  nk_histogram_params p = {.algorithm = NK_HISTOGRAM_INTEGER, .dims = 1};
  p.n_edges[0] = bins + 1;
  nrt_task t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "is empty"));
  eb[1] = 4;
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  t = tk_task(NK_KERNEL_HISTOGRAM, 4, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "integer mode"));
  ops[1].dtype = NRT_FLOAT32;
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "integer mode"));
  ops[1].dtype = NRT_INT32;
  ops[2] = tk_vector(eb, NRT_INT64, 3);
  t = tk_task(NK_KERNEL_HISTOGRAM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "integer mode"));
  tk_free(ib); tk_free(eb); tk_free(hb);
}

/* ------------------------------------------------------------- logspace */

static void test_logspace(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_INT64, NRT_INT16};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    const nrt_dtype dt = dts[d];
    const int64_t steps = 41;
    void *ob = tk_alloc((size_t)(2 * steps * tk_size(dt)));
    int64_t st = 2;
    nrt_operand o = tk_operand(ob, dt, 1, &steps, &st);
    nk_logspace_params p = {.base = 2, .start = -3, .end = 7, .step = 10.0 / 40, .steps = steps};
    nrt_task t = tk_task(NK_KERNEL_LOGSPACE, 1, &o, &p, sizeof p);
    int ok = tk_run(&t) == NRT_SUCCESS;
    for (int64_t i = 0; ok && i < steps; i++) {
      double e = i < steps / 2 ? p.start + p.step * (double)i : p.end - p.step * (double)(steps - 1 - i);
      double want = pow(2, e);
      if (tk_is_integral(dt)) want = trunc(want);
      double got = get(dt, (char *)ob + 2 * i * tk_size(dt));
      if (!close_to(dt, got, rounded(dt, want))) {
        fprintf(stderr, "  logspace %s [%lld]: got %g want %g\n", tk_dtype_names[dt], (long long)i, got, want);
        ok = 0;
      }
    }
    CHECK(ok);
    p.steps = 40; /* out has 41 */
    t = tk_task(NK_KERNEL_LOGSPACE, 1, &o, &p, sizeof p);
    CHECK(tk_fails_with(&t, "1-d of 40 elements"));
    tk_free(ob);
  }
}

/* ------------------------------------------------------------ distances */

static double tsign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

static double ref_norm(double p, const double *a, const double *b, int64_t m) {
  double agg = 0;
  for (int64_t x = 0; x < m; x++) {
    double d = fabs(a[x] - b[x]);
    if (p == 0) agg += d > 0;
    else if (isinf(p)) agg = d > agg ? d : agg;
    else agg += pow(d, p);
  }
  return p == 0 || isinf(p) ? agg : pow(agg, 1 / p);
}

static double ref_grad(double p, double diff, double g, double dist) {
  if (p == 0) return 0;
  if (p == 1) return g * tsign(diff);
  if (isinf(p)) return fabs(diff) == dist ? g * tsign(diff) : 0;
  if (dist == 0) return 0;
  if (p < 2 && diff == 0 && p < 1) return 0;
  return tsign(diff) * pow(fabs(diff), p - 1) * g / pow(dist, p - 1);
}

static int check_cdist(nrt_dtype dt, int64_t b, int64_t r1, int64_t r2, int64_t m, double p) {
  int64_t s1[3] = {b, r1, m}, s2[3] = {b, r2, m}, so[3] = {b, r1, r2};
  int64_t n1 = b * r1 * m, n2 = b * r2 * m, no = b * r1 * r2;
  size_t es = (size_t)tk_size(dt);
  double *x1 = malloc(sizeof(double) * (size_t)(n1 + 1)), *x2 = malloc(sizeof(double) * (size_t)(n2 + 1));
  double *g = malloc(sizeof(double) * (size_t)(no + 1)), *dist = malloc(sizeof(double) * (size_t)(no + 1));
  void *b1 = tk_alloc(es * (size_t)n1), *b2 = tk_alloc(es * (size_t)n2), *bo = tk_alloc(es * (size_t)no),
       *bg = tk_alloc(es * (size_t)no), *bgx = tk_alloc(es * (size_t)n1);
  for (int64_t i = 0; i < n1; i++) { x1[i] = (double)(int)(tk_rand() % 9) / 2 - 2; put(dt, (char *)b1 + i * (int64_t)es, x1[i]); }
  for (int64_t i = 0; i < n2; i++) { x2[i] = (double)(int)(tk_rand() % 9) / 2 - 2; put(dt, (char *)b2 + i * (int64_t)es, x2[i]); }
  for (int64_t i = 0; i < no; i++) { g[i] = rnd(); put(dt, (char *)bg + i * (int64_t)es, g[i]); g[i] = get(dt, (char *)bg + i * (int64_t)es); }
  nrt_operand f[3] = {tk_operand(bo, dt, 3, so, NULL), tk_operand(b1, dt, 3, s1, NULL), tk_operand(b2, dt, 3, s2, NULL)};
  nk_dist_params prm = {.op = NK_DIST_CDIST, .p = p};
  nrt_task t = tk_task(NK_KERNEL_DIST, 3, f, &prm, sizeof prm);
  int ok = tk_run(&t) == NRT_SUCCESS;
  for (int64_t l = 0; ok && l < b; l++)
    for (int64_t i = 0; ok && i < r1; i++)
      for (int64_t j = 0; ok && j < r2; j++) {
        double want = ref_norm(p, x1 + (l * r1 + i) * m, x2 + (l * r2 + j) * m, m);
        double got = get(dt, (char *)bo + ((l * r1 + i) * r2 + j) * (int64_t)es);
        dist[(l * r1 + i) * r2 + j] = got;
        if (!close_to(dt, got, want)) { fprintf(stderr, "  cdist p=%g: got %g want %g\n", p, got, want); ok = 0; }
      }
  nrt_operand bw[5] = {tk_operand(bgx, dt, 3, s1, NULL), tk_operand(bg, dt, 3, so, NULL), f[1], f[2], f[0]};
  prm.op = NK_DIST_CDIST_BACKWARD;
  t = tk_task(NK_KERNEL_DIST, 5, bw, &prm, sizeof prm);
  ok = ok && tk_run(&t) == NRT_SUCCESS;
  for (int64_t l = 0; ok && l < b; l++)
    for (int64_t i = 0; ok && i < r1; i++)
      for (int64_t x = 0; ok && x < m; x++) {
        double want = 0;
        for (int64_t j = 0; j < r2; j++)
          want += ref_grad(p, x1[(l * r1 + i) * m + x] - x2[(l * r2 + j) * m + x], g[(l * r1 + i) * r2 + j],
                           dist[(l * r1 + i) * r2 + j]);
        double got = get(dt, (char *)bgx + ((l * r1 + i) * m + x) * (int64_t)es);
        if (!close_to(dt, got, want)) { fprintf(stderr, "  cdist backward p=%g: got %g want %g\n", p, got, want); ok = 0; }
      }
  free(x1); free(x2); free(g); free(dist);
  tk_free(b1); tk_free(b2); tk_free(bo); tk_free(bg); tk_free(bgx);
  return ok;
}

static int check_pdist(nrt_dtype dt, int64_t n, int64_t m, double p) {
  const int64_t pairs = n * (n - 1) / 2;
  size_t es = (size_t)tk_size(dt);
  int64_t sx[2] = {n, m};
  double *x = malloc(sizeof(double) * (size_t)(n * m + 1)), *g = malloc(sizeof(double) * (size_t)(pairs + 1));
  double *dist = malloc(sizeof(double) * (size_t)(pairs + 1));
  void *bx = tk_alloc(es * (size_t)(n * m)), *bo = tk_alloc(es * (size_t)pairs), *bg = tk_alloc(es * (size_t)pairs),
       *bgx = tk_alloc(es * (size_t)(n * m));
  for (int64_t i = 0; i < n * m; i++) { x[i] = (double)(int)(tk_rand() % 7) / 2 - 1.5; put(dt, (char *)bx + i * (int64_t)es, x[i]); }
  for (int64_t k = 0; k < pairs; k++) { g[k] = rnd(); put(dt, (char *)bg + k * (int64_t)es, g[k]); g[k] = get(dt, (char *)bg + k * (int64_t)es); }
  nrt_operand f[2] = {tk_vector(bo, dt, pairs), tk_operand(bx, dt, 2, sx, NULL)};
  nk_dist_params prm = {.op = NK_DIST_PDIST, .p = p};
  nrt_task t = tk_task(NK_KERNEL_DIST, 2, f, &prm, sizeof prm);
  int ok = tk_run(&t) == NRT_SUCCESS;
  int64_t k = 0;
  for (int64_t i = 0; ok && i < n; i++)
    for (int64_t j = i + 1; ok && j < n; j++, k++) {
      double want = ref_norm(p, x + i * m, x + j * m, m), got = get(dt, (char *)bo + k * (int64_t)es);
      dist[k] = got;
      if (!close_to(dt, got, want)) { fprintf(stderr, "  pdist p=%g: got %g want %g\n", p, got, want); ok = 0; }
    }
  nrt_operand bw[4] = {tk_operand(bgx, dt, 2, sx, NULL), tk_vector(bg, dt, pairs), f[1], f[0]};
  prm.op = NK_DIST_PDIST_BACKWARD;
  t = tk_task(NK_KERNEL_DIST, 4, bw, &prm, sizeof prm);
  ok = ok && tk_run(&t) == NRT_SUCCESS;
  double *want = calloc((size_t)(n * m + 1), sizeof *want);
  k = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i + 1; j < n; j++, k++)
      for (int64_t c = 0; c < m; c++) {
        double r = ref_grad(p, x[i * m + c] - x[j * m + c], g[k], dist[k]);
        want[i * m + c] += r;
        want[j * m + c] -= r;
      }
  for (int64_t i = 0; ok && i < n * m; i++) {
    double got = get(dt, (char *)bgx + i * (int64_t)es);
    if (!close_to(dt, got, want[i])) { fprintf(stderr, "  pdist backward p=%g: got %g want %g\n", p, got, want[i]); ok = 0; }
  }
  free(want); free(x); free(g); free(dist);
  tk_free(bx); tk_free(bo); tk_free(bg); tk_free(bgx);
  return ok;
}

static void test_dist(void) {
  static const double ps[] = {0, 1, 2, 0.5, 1.5, 3, INFINITY};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
    CHECK(check_cdist(NRT_FLOAT64, 2, 4, 5, 3, ps[i]));
    CHECK(check_cdist(NRT_FLOAT32, 1, 7, 3, 6, ps[i]));
    CHECK(check_pdist(NRT_FLOAT64, 6, 4, ps[i]));
    CHECK(check_pdist(NRT_FLOAT32, 5, 3, ps[i]));
  }
  CHECK(check_cdist(NRT_FLOAT32, 0, 4, 5, 3, 2));  /* empty batch */
  CHECK(check_cdist(NRT_FLOAT64, 3, 60, 50, 9, 2)); /* parallel */
  CHECK(check_pdist(NRT_FLOAT32, 1, 3, 2));        /* no pairs */
  /* validation */
  float buf[64];
  memset(buf, 0, sizeof buf);
  float *dbuf = tk_alloc(sizeof buf);
  int64_t a[3] = {1, 2, 3}, c[3] = {1, 2, 4};
  nrt_operand o[3] = {tk_operand(dbuf, NRT_FLOAT32, 3, a, NULL), tk_operand(dbuf, NRT_FLOAT32, 3, a, NULL),
                      tk_operand(dbuf, NRT_FLOAT32, 3, c, NULL)};
  nk_dist_params prm = {.op = NK_DIST_CDIST, .p = 2};
  nrt_task t = tk_task(NK_KERNEL_DIST, 3, o, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "shapes do not match"));
  o[2] = o[1];
  o[0].sizes[2] = 2;
  prm.p = -1;
  t = tk_task(NK_KERNEL_DIST, 3, o, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "p must be"));
  prm.p = 2;
  o[1].dtype = NRT_FLOAT64;
  t = tk_task(NK_KERNEL_DIST, 3, o, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "dtype differs"));
  o[1].dtype = NRT_FLOAT32;
  prm.op = 9;
  t = tk_task(NK_KERNEL_DIST, 3, o, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "unknown op"));
  tk_free(dbuf);
}


/* -------------------------------------------------------- embedding bag */

/* V x D weights, n indices (int32 or int64) into bags by offsets; forward
 * in every mode (with padding, per-sample weights for sum, last offset
 * included or not, an empty bag), then both backward ops, against loops
 * written here. */
static int check_embedding_bag(nrt_dtype wt, nrt_dtype it, int mode, int with_psw, int include_last, int64_t pad) {
  enum { V = 7, D = 5, N = 11 };
  const int64_t offs_v[] = {0, 3, 3, 8, N}; /* bags [0,3) [3,3) [3,8) [8,11) */
  const int64_t B = 4, n_off = include_last ? 5 : 4;
  const int64_t idx_v[N] = {1, 4, 4, 0, 6, 2, 1, 5, 3, 3, 6};
  double w[V][D], psw[N], g[4][D];
  size_t es = (size_t)tk_size(wt), is = (size_t)tk_size(it);
  int64_t ws[2] = {V, D}, os[2] = {B, D}, nn = N;
  void *bw = tk_alloc(es * V * D), *bi = tk_alloc(is * N), *bo_ = tk_alloc(is * 5), *bp = tk_alloc(es * N),
       *bout = tk_alloc(es * (size_t)(B * D)), *b2b = tk_alloc(8 * N), *bsz = tk_alloc(8 * (size_t)B),
       *bmax = tk_alloc(8 * (size_t)(B * D)), *bg = tk_alloc(es * (size_t)(B * D)), *bgw = tk_alloc(es * V * D),
       *bgp = tk_alloc(es * N);
  for (int r = 0; r < V; r++)
    for (int d = 0; d < D; d++) { put(wt, (char *)bw + (r * D + d) * es, rnd()); w[r][d] = get(wt, (char *)bw + (r * D + d) * es); }
  for (int i = 0; i < N; i++) {
    put(it, (char *)bi + i * is, (double)idx_v[i]);
    put(wt, (char *)bp + i * es, rnd());
    psw[i] = get(wt, (char *)bp + i * es);
  }
  for (int b = 0; b < 5; b++) put(it, (char *)bo_ + b * is, (double)offs_v[b]);
  for (int b = 0; b < B; b++)
    for (int d = 0; d < D; d++) { put(wt, (char *)bg + (b * D + d) * es, rnd()); g[b][d] = get(wt, (char *)bg + (b * D + d) * es); }
  nrt_operand f[8] = {tk_operand(bout, wt, 2, os, NULL), tk_vector(b2b, NRT_INT64, N), tk_vector(bsz, NRT_INT64, B),
                      tk_operand(bmax, NRT_INT64, 2, os, NULL), tk_operand(bw, wt, 2, ws, NULL), tk_vector(bi, it, N),
                      tk_vector(bo_, it, n_off), tk_vector(bp, wt, N)};
  nk_embedding_bag_params prm = {.op = NK_EMBAG_FORWARD, .mode = mode, .include_last_offset = include_last,
                                 .padding_idx = pad};
  nrt_task t = tk_task(NK_KERNEL_EMBEDDING_BAG, with_psw ? 8 : 7, f, &prm, sizeof prm);
  if (tk_run(&t) != NRT_SUCCESS) { fprintf(stderr, "  embedding_bag forward: %s\n", nrt_last_error()); return 0; }
  int ok = 1;
  int64_t maxrow[4][D], count[4];
  for (int64_t b = 0; b < B; b++) {
    int64_t s0 = offs_v[b], e0 = b + 1 < n_off ? offs_v[b + 1] : N;
    count[b] = 0;
    for (int64_t i = s0; i < e0; i++) count[b] += idx_v[i] != pad;
    ok &= get(NRT_INT64, (char *)bsz + b * 8) == (double)count[b];
    for (int64_t i = s0; i < e0; i++) ok &= get(NRT_INT64, (char *)b2b + i * 8) == (double)b;
    for (int d = 0; d < D; d++) {
      double acc = 0;
      maxrow[b][d] = -1;
      for (int64_t i = s0; i < e0; i++) {
        if (idx_v[i] == pad) continue;
        double v = w[idx_v[i]][d];
        if (mode == NK_EMBAG_MAX) { if (maxrow[b][d] < 0 || v > acc) { acc = v; maxrow[b][d] = idx_v[i]; } }
        else acc += with_psw ? psw[i] * v : v;
      }
      if (mode == NK_EMBAG_MEAN && count[b] > 0) acc /= (double)count[b];
      double got = get(wt, (char *)bout + (b * D + d) * es);
      if (!close_to(wt, got, rounded(wt, acc))) { fprintf(stderr, "  embag fwd mode %d b %lld d %d: got %g want %g\n", mode, (long long)b, d, got, acc); ok = 0; }
      if (mode == NK_EMBAG_MAX) ok &= get(NRT_INT64, (char *)bmax + (b * D + d) * 8) == (double)maxrow[b][d];
    }
  }
  if (!include_last) { /* no index left outside a bag */ }
  /* dense backward */
  nrt_operand bwo[7] = {tk_operand(bgw, wt, 2, ws, NULL), tk_operand(bg, wt, 2, os, NULL), f[5], f[1], f[2], f[3], f[7]};
  prm.op = NK_EMBAG_DENSE_BACKWARD;
  prm.scale_grad_by_freq = mode == NK_EMBAG_SUM && !with_psw;
  t = tk_task(NK_KERNEL_EMBEDDING_BAG, with_psw ? 7 : 6, bwo, &prm, sizeof prm);
  ok = ok && tk_run(&t) == NRT_SUCCESS;
  double ref[V][D];
  memset(ref, 0, sizeof ref);
  int64_t freq[V] = {0};
  for (int i = 0; i < N; i++) freq[idx_v[i]]++;
  {
    /* ATen CPU's divisor: the g-th distinct index (ascending) gets freq[sorted[g]] */
    int64_t srt[N], div[V] = {0};
    for (int i = 0; i < N; i++) {
      int64_t v = idx_v[i];
      int k = i;
      for (; k > 0 && srt[k - 1] > v; k--) srt[k] = srt[k - 1];
      srt[k] = v;
    }
    for (int i = 0, gg = 0; i < N; i++)
      if (i == 0 || srt[i] != srt[i - 1]) div[srt[i]] = freq[srt[gg++]];
    for (int r = 0; r < V; r++) freq[r] = div[r];
  }
  if (mode == NK_EMBAG_MAX) {
    for (int b = 0; b < B; b++)
      for (int d = 0; d < D; d++)
        if (maxrow[b][d] >= 0) ref[maxrow[b][d]][d] += g[b][d];
  } else {
    for (int64_t b = 0; b < B; b++) {
      int64_t s0 = offs_v[b], e0 = b + 1 < n_off ? offs_v[b + 1] : N;
      for (int64_t i = s0; i < e0; i++) {
        if (idx_v[i] == pad) continue;
        double sc = with_psw ? psw[i] : 1;
        if (mode == NK_EMBAG_MEAN) sc /= (double)count[b];
        if (prm.scale_grad_by_freq) sc /= (double)freq[idx_v[i]];
        for (int d = 0; d < D; d++) ref[idx_v[i]][d] += g[b][d] * sc;
      }
    }
  }
  for (int r = 0; ok && r < V; r++)
    for (int d = 0; d < D; d++) {
      double got = get(wt, (char *)bgw + (r * D + d) * es);
      if (!close_to(wt, got, rounded(wt, ref[r][d]))) { fprintf(stderr, "  embag bwd mode %d row %d: got %g want %g\n", mode, r, got, ref[r][d]); ok = 0; break; }
    }
  /* per-sample-weights backward */
  if (mode == NK_EMBAG_SUM) {
    nrt_operand pb[5] = {tk_vector(bgp, wt, N), tk_operand(bg, wt, 2, os, NULL), f[4], f[5], f[1]};
    prm.op = NK_EMBAG_PSW_BACKWARD;
    t = tk_task(NK_KERNEL_EMBEDDING_BAG, 5, pb, &prm, sizeof prm);
    ok = ok && tk_run(&t) == NRT_SUCCESS;
    for (int64_t b = 0; ok && b < B; b++) {
      int64_t s0 = offs_v[b], e0 = b + 1 < n_off ? offs_v[b + 1] : N;
      for (int64_t i = s0; i < e0; i++) {
        double want = 0;
        if (idx_v[i] != pad)
          for (int d = 0; d < D; d++) want += g[b][d] * w[idx_v[i]][d];
        double got = get(wt, (char *)bgp + i * es);
        if (!close_to(wt, got, rounded(wt, want))) { fprintf(stderr, "  embag psw bwd [%lld]: got %g want %g\n", (long long)i, got, want); ok = 0; }
      }
    }
  }
  (void)nn;
  /* an index out of range fails, naming it */
  put(it, (char *)bi + 4 * is, (double)V);
  prm.op = NK_EMBAG_FORWARD;
  t = tk_task(NK_KERNEL_EMBEDDING_BAG, with_psw ? 8 : 7, f, &prm, sizeof prm);
  ok = ok && tk_fails_with(&t, "index 7 out of range [0, 7)");
  put(it, (char *)bi + 4 * is, -2);
  ok = ok && tk_fails_with(&t, "index -2 out of range");
  put(it, (char *)bi + 4 * is, 1);
  put(it, (char *)bo_ + 1 * is, (double)(N + 1));
  ok = ok && tk_fails_with(&t, "offset 12 out of range");
  tk_free(bw); tk_free(bi); tk_free(bo_); tk_free(bp); tk_free(bout); tk_free(b2b); tk_free(bsz);
  tk_free(bmax); tk_free(bg); tk_free(bgw); tk_free(bgp);
  return ok;
}

static void test_embedding_bag(void) {
  for (int mode = 0; mode < 3; mode++) {
    CHECK(check_embedding_bag(NRT_FLOAT32, NRT_INT64, mode, 0, 0, -1));
    CHECK(check_embedding_bag(NRT_FLOAT64, NRT_INT32, mode, 0, 1, 4));
    CHECK(check_embedding_bag(NRT_BFLOAT16, NRT_INT64, mode, 0, 1, -1));
  }
  CHECK(check_embedding_bag(NRT_FLOAT32, NRT_INT64, NK_EMBAG_SUM, 1, 0, 3));
  CHECK(check_embedding_bag(NRT_FLOAT64, NRT_INT32, NK_EMBAG_SUM, 1, 1, -1));
}

/* ------------------------------------------------------- validation */

static void test_validation(void) {
  float buf[16];
  int32_t e[16];
  int64_t s3[1] = {3}, s4[1] = {4};
  float *d = tk_alloc(sizeof buf);
  int32_t *ed = tk_alloc(sizeof e);
  memset(buf, 0, sizeof buf);
  nrt_operand v3 = tk_operand(d, NRT_FLOAT32, 1, s3, NULL), v4 = tk_operand(d, NRT_FLOAT32, 1, s4, NULL);
  nrt_operand ops[5] = {v3, v3, v3, v3, v3};
  nrt_task t = tail_task(NK_TAIL_OP_COUNT, NRT_FLOAT32, 3, ops, 0, 0);
  CHECK(tk_fails_with(&t, "unknown op"));
  t = tail_task(NK_TAIL_GLU, NRT_FLOAT32, 2, ops, 0, 0);
  CHECK(tk_fails_with(&t, "expected 3 operands, got 2"));
  t = tail_task(NK_TAIL_GLU, NRT_INT64, 3, ops, 0, 0);
  CHECK(tk_fails_with(&t, "compute dtype"));
  ops[2] = v4;
  t = tail_task(NK_TAIL_GLU, NRT_FLOAT32, 3, ops, 0, 0);
  CHECK(tk_fails_with(&t, "shape differs"));
  ops[2] = v3;
  t = tail_task(NK_TAIL_FREXP, NRT_FLOAT32, 3, ops, 0, 0); /* exponent not int32 */
  CHECK(tk_fails_with(&t, "int32"));
  ops[0] = ops[1] = ops[2] = v4;
  t = tail_task(NK_TAIL_CROSS, NRT_FLOAT32, 3, ops, 0, 0); /* size 4 along dim */
  CHECK(tk_fails_with(&t, "must have size 3"));
  ops[0] = ops[1] = ops[2] = v3;
  t = tail_task(NK_TAIL_CROSS, NRT_FLOAT32, 3, ops, 1, 0); /* dim out of range */
  CHECK(tk_fails_with(&t, "must have size 3"));
  t = tail_task(NK_TAIL_CROSS, NRT_FLOAT32, 3, ops, 0, 0);
  CHECK_OK(tk_run(&t));

  /* unfold_backward: bad shapes, a window overrunning grad_input */
  int64_t os[1] = {5}, gs[2] = {3, 2}, gs_bad[2] = {3, 3};
  nrt_operand u[2] = {tk_operand(d, NRT_FLOAT32, 1, os, NULL), tk_operand(d + 5, NRT_FLOAT32, 2, gs, NULL)};
  nk_unfold_backward_params up = {.dim = 0, .size = 2, .step = 1};
  t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, u, &up, sizeof up);
  CHECK_OK(tk_run(&t));
  up.step = 2; /* 3 windows of 2, step 2: reach 6 > 5 */
  t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, u, &up, sizeof up);
  CHECK(tk_fails_with(&t, "overrun"));
  up.step = 1;
  up.size = 3; /* grad's last dim is 2 */
  t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, u, &up, sizeof up);
  CHECK(tk_fails_with(&t, "grad's last dim"));
  u[1] = tk_operand(d + 5, NRT_FLOAT32, 2, gs_bad, NULL);
  up.size = 3;
  up.step = 2; /* 3 windows of 3, step 2 = reach 7 */
  t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, u, &up, sizeof up);
  CHECK(tk_fails_with(&t, "overrun"));
  up.dim = 1;
  t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, u, &up, sizeof up);
  CHECK(tk_fails_with(&t, "dim 1"));
  up.dim = 0;
  u[1].dtype = NRT_FLOAT64;
  t = tk_task(NK_KERNEL_UNFOLD_BACKWARD, 2, u, &up, sizeof up);
  CHECK(tk_fails_with(&t, "dtypes differ"));
  (void)ed;
  tk_free(d);
  tk_free(ed);
}

static void tests(void) {
  test_elementwise();
  test_cross();
  test_unfold_backward();
  test_nanmedian();
  test_histogram();
  test_histogram_integer();
  test_logspace();
  test_dist();
  test_embedding_bag();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
