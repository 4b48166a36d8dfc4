/* The reduce, scan and softmax kernels against references written here
 * (plain loops in double): every reduce op over dim subsets of 3-d inputs
 * (contiguous, transposed, expanded), float16/bfloat16/float32/float64,
 * integers and bool; NaN propagation and first-index rules; the chunked
 * parallel path and the precision of a long float32 sum; empty ranges
 * (identities, and the failure of max); scans with strided dims, ties and
 * NaN; softmax/log_softmax forward and backward on the vector path and the
 * strided path; and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "reduce/reduce_block.h"
#include "test_kernels_util.h"

/* ------------------------------------------------------------- helpers */

static double load(nrt_dtype t, const void *p) {
  union { uint8_t u8; int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint16_t h; float f; double d; } u;
  memcpy(&u, p, (size_t)tk_size(t));
  switch (t) {
  case NRT_BOOL: case NRT_UINT8: return u.u8;
  case NRT_INT8: return u.i8;
  case NRT_INT16: return u.i16;
  case NRT_INT32: return u.i32;
  case NRT_INT64: return (double)u.i64;
  case NRT_FLOAT16: return tk_f16_value(u.h);
  case NRT_BFLOAT16: return tk_bf16_value(u.h);
  case NRT_FLOAT32: return u.f;
  default: return u.d;
  }
}

static void put(nrt_dtype t, void *p, double v) {
  tk_value x = {tk_is_integral(t), (int64_t)v, v};
  tk_put(t, p, x);
}

static int close_to(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

static double tol_of(nrt_dtype t) {
  return t == NRT_FLOAT16 ? 2e-3 : t == NRT_BFLOAT16 ? 1.6e-2 : t == NRT_FLOAT32 ? 2e-6 : 1e-12;
}

/* ------------------------------------------------------ reduce reference */

typedef struct rres {
  double v;
  int64_t idx;
  double mean;
} rres;

/* float16/bfloat16 products round every step (ATen's CPU multiplies in
 * the dtype); the input dtype of the current check. */
static nrt_dtype ref_dtype;

/* Reference over the values xs[0..n) in reduced order. */
static rres ref_reduce(const nk_reduce_params *p, const double *xs, int64_t n) {
  rres r = {0, 0, NAN};
  switch ((nk_reduce_op)p->op) {
  case NK_REDUCE_SUM: case NK_REDUCE_NANSUM: case NK_REDUCE_MEAN:
    for (int64_t i = 0; i < n; i++) r.v += (p->op == NK_REDUCE_NANSUM && isnan(xs[i])) ? 0 : xs[i];
    if (p->op == NK_REDUCE_MEAN) r.v /= (double)n;
    break;
  case NK_REDUCE_PROD:
    r.v = 1;
    for (int64_t i = 0; i < n; i++) {
      r.v *= xs[i];
      if (ref_dtype == NRT_FLOAT16 || ref_dtype == NRT_BFLOAT16) r.v = tk_stored(ref_dtype, (tk_value){0, 0, r.v}).f;
    }
    break;
  case NK_REDUCE_MAX: case NK_REDUCE_ARGMAX: case NK_REDUCE_MAX_INDEX:
  case NK_REDUCE_MIN: case NK_REDUCE_ARGMIN: case NK_REDUCE_MIN_INDEX: {
    int mx = p->op == NK_REDUCE_MAX || p->op == NK_REDUCE_ARGMAX || p->op == NK_REDUCE_MAX_INDEX;
    r.v = xs[0];
    for (int64_t i = 1; i < n && !isnan(r.v); i++)
      if (isnan(xs[i]) || (mx ? xs[i] > r.v : xs[i] < r.v)) r.v = xs[i], r.idx = i;
    break;
  }
  case NK_REDUCE_ALL:
    r.v = 1;
    for (int64_t i = 0; i < n; i++) r.v = r.v && xs[i] != 0;
    break;
  case NK_REDUCE_ANY:
    for (int64_t i = 0; i < n; i++) r.v = r.v || xs[i] != 0;
    break;
  case NK_REDUCE_COUNT_NONZERO:
    for (int64_t i = 0; i < n; i++) r.v += xs[i] != 0;
    break;
  case NK_REDUCE_NORM:
    if (isinf(p->p)) {
      r.v = p->p > 0 ? 0 : INFINITY;
      for (int64_t i = 0; i < n; i++) {
        double a = fabs(xs[i]);
        if (isnan(a)) { r.v = a; break; }
        r.v = p->p > 0 ? fmax(r.v, a) : fmin(r.v, a);
      }
    } else if (p->p == 0) {
      for (int64_t i = 0; i < n; i++) r.v += xs[i] != 0;
    } else {
      for (int64_t i = 0; i < n; i++) r.v += pow(fabs(xs[i]), p->p);
      r.v = pow(r.v, 1.0 / p->p);
    }
    break;
  case NK_REDUCE_VAR: {
    double s = 0, m2 = 0;
    for (int64_t i = 0; i < n; i++) s += xs[i];
    r.mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) m2 += (xs[i] - r.mean) * (xs[i] - r.mean);
    double div = n - p->correction > 0 ? n - p->correction : 0;
    r.v = m2 / div;
    if (p->take_sqrt) r.v = sqrt(r.v);
    break;
  }
  default: break;
  }
  return r;
}

/* Reduces a 3-d input of `sizes` (strides in elements, may be 0 or
 * transposed) over the dims with mask bit set, compares with the
 * reference.  out is contiguous over the kept dims. */
static void check_reduce(nk_reduce_params prm, nrt_dtype in_t, nrt_dtype out_t, const int64_t *sizes,
                         const int64_t *strides, int mask, int nan_at) {
  int64_t span = 1;
  ref_dtype = in_t;
  for (int d = 0; d < 3; d++) span += (sizes[d] - 1) * strides[d];
  char *in = tk_alloc((size_t)(span * tk_size(in_t)));
  for (int64_t i = 0; i < span; i++) {
    double v;
    if (tk_is_integral(in_t)) v = in_t == NRT_BOOL ? (double)(tk_rand() % 4 != 0) : (double)(int)(tk_rand() % 7) - 2;
    else v = (double)(int)(tk_rand() % 2001 - 1000) / 256.0;
    if (prm.op == NK_REDUCE_PROD && !tk_is_integral(in_t)) v = 0.75 + (double)(tk_rand() % 100) / 200.0;
    if (prm.op == NK_REDUCE_PROD && tk_is_integral(in_t)) /* no overflow: rare 2s among +-1 */
      v = tk_rand() % 64 == 0 && in_t != NRT_BOOL ? 2 : (in_t == NRT_BOOL || in_t == NRT_UINT8 || tk_rand() % 2) ? 1 : -1;
    if (i == nan_at) v = NAN;
    put(in_t, in + i * tk_size(in_t), v);
  }
  int64_t n_out = 1, n_red = 1, ostr[3];
  for (int d = 2; d >= 0; d--) {
    if (mask >> d & 1) {
      ostr[d] = 0;
      n_red *= sizes[d];
    } else {
      ostr[d] = n_out;
      n_out *= sizes[d];
    }
  }
  int two = prm.op == NK_REDUCE_MAX_INDEX || prm.op == NK_REDUCE_MIN_INDEX || prm.op == NK_REDUCE_VAR;
  nrt_dtype o1_t = prm.op == NK_REDUCE_VAR ? out_t : NRT_INT64;
  char *o0 = tk_alloc((size_t)(n_out * tk_size(out_t))), *o1 = tk_alloc((size_t)(n_out * 8));
  nrt_operand ops[3];
  ops[0] = tk_operand(o0, out_t, 3, sizes, ostr);
  ops[1] = tk_operand(o1, o1_t, 3, sizes, ostr);
  ops[two ? 2 : 1] = tk_operand(in, in_t, 3, sizes, strides);
  nrt_task t = tk_task(NK_KERNEL_REDUCE, two ? 3 : 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  double *xs = malloc((size_t)(n_red > 0 ? n_red : 1) * sizeof(double));
  int bad = 0;
  for (int64_t i0 = 0; i0 < sizes[0]; i0++)
    for (int64_t i1 = 0; i1 < sizes[1]; i1++)
      for (int64_t i2 = 0; i2 < sizes[2]; i2++) {
        int64_t ii[3] = {i0, i1, i2}, o = 0;
        int first = 1;
        for (int d = 0; d < 3; d++) {
          if (mask >> d & 1) first = first && ii[d] == 0;
          else o += ii[d] * ostr[d];
        }
        if (!first) continue;
        /* gather this output's reduced elements in row-major order */
        int64_t k = 0;
        for (int64_t j0 = 0; j0 < ((mask & 1) ? sizes[0] : 1); j0++)
          for (int64_t j1 = 0; j1 < ((mask & 2) ? sizes[1] : 1); j1++)
            for (int64_t j2 = 0; j2 < ((mask & 4) ? sizes[2] : 1); j2++) {
              int64_t e[3] = {(mask & 1) ? j0 : i0, (mask & 2) ? j1 : i1, (mask & 4) ? j2 : i2};
              int64_t off = e[0] * strides[0] + e[1] * strides[1] + e[2] * strides[2];
              xs[k++] = load(in_t, in + off * tk_size(in_t));
            }
        rres r = ref_reduce(&prm, xs, n_red);
        double got = load(out_t, o0 + o * tk_size(out_t));
        double want = r.v;
        if (prm.op == NK_REDUCE_ARGMAX || prm.op == NK_REDUCE_ARGMIN) want = (double)r.idx;
        if (!tk_is_integral(out_t) && !isnan(want)) want = tk_stored(out_t, (tk_value){0, 0, want}).f;
        double rt = tol_of(in_t) * (prm.op == NK_REDUCE_VAR ? 4 : 1), at = rt * (n_red + 1) * 8;
        if (prm.op == NK_REDUCE_VAR && in_t != NRT_FLOAT64) rt = at = tol_of(out_t) * 4;
        /* 16-bit products round every step, in the kernel's (stride) order */
        if (prm.op == NK_REDUCE_PROD && (in_t == NRT_FLOAT16 || in_t == NRT_BFLOAT16)) rt = 0.1;
        if (tk_is_integral(out_t) && !tk_is_integral(in_t) && out_t != NRT_BOOL) rt = at = 0;
        if (!close_to(got, want, rt, at)) {
          if (bad++ < 3)
            fprintf(stderr, "  reduce op %d in %s out %s mask %d out[%lld]: got %.9g want %.9g\n", prm.op,
                    tk_dtype_names[in_t], tk_dtype_names[out_t], mask, (long long)o, got, want);
        }
        if (two && prm.op != NK_REDUCE_VAR && *(int64_t *)(o1 + o * 8) != r.idx) {
          if (bad++ < 3) fprintf(stderr, "  reduce op %d index: got %lld want %lld\n", prm.op,
                                 (long long)*(int64_t *)(o1 + o * 8), (long long)r.idx);
        }
        if (prm.op == NK_REDUCE_VAR && !close_to(load(out_t, o1 + o * tk_size(out_t)), r.mean, 4 * tol_of(out_t), 4 * tol_of(out_t)))
          bad++;
      }
  CHECK(bad == 0);
  free(xs);
  tk_free(in);
  tk_free(o0);
  tk_free(o1);
}

static nk_reduce_params rp(nk_reduce_op op) {
  nk_reduce_params p = {.op = op};
  return p;
}

/* all/any/count_nonzero over dense byte runs (reduce.c, fold_byte_run):
 * bool, uint8 and int8, runs of 1000 and 100003 (parallel chunks), one odd
 * element at the start, a block edge, the middle or the end, or none; a
 * true byte that is not 1 (uint8 2, int8 -1). */
static void test_reduce_byte_runs(void) {
  static const nrt_dtype types[] = {NRT_BOOL, NRT_UINT8, NRT_INT8};
  static const int64_t lengths[] = {1000, 100003};
  for (size_t ti = 0; ti < 3; ti++)
    for (size_t li = 0; li < 2; li++) {
      const int64_t n = lengths[li], at[] = {-1, 0, 63, 64, n / 2, n - 1};
      unsigned char *x = tk_alloc((size_t)n);
      unsigned char *o = tk_alloc(8);
      const unsigned char one = types[ti] == NRT_BOOL ? 1 : types[ti] == NRT_UINT8 ? 2 : 0xFF;
      for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        for (int op = 0; op < 3; op++) {
          const nk_reduce_op rop = op == 0 ? NK_REDUCE_ANY : op == 1 ? NK_REDUCE_ALL : NK_REDUCE_COUNT_NONZERO;
          /* any: zeros with one true; all: trues with one zero; count: every third true */
          for (int64_t i = 0; i < n; i++) x[i] = op == 0 ? 0 : op == 1 ? one : (i % 3 == 0 ? one : 0);
          if (at[k] >= 0 && op < 2) x[at[k]] = op == 0 ? one : 0;
          const nrt_dtype out_t = op == 2 ? NRT_INT64 : NRT_BOOL;
          int64_t zero = 0;
          nrt_operand ops[2] = {tk_operand(o, out_t, 1, &n, &zero), tk_vector(x, types[ti], n)};
          nk_reduce_params prm = rp(rop);
          nrt_task t = tk_task(NK_KERNEL_REDUCE, 2, ops, &prm, sizeof prm);
          CHECK_OK(tk_run(&t));
          int64_t got = op == 2 ? (int64_t)tk_raw(NRT_INT64, o) : o[0];
          int64_t want = op == 0 ? at[k] >= 0 : op == 1 ? at[k] < 0 : (n + 2) / 3;
          if (got != want)
            fprintf(stderr, "  byte run op %d %s n %lld at %lld: %lld, want %lld\n", op, tk_dtype_names[types[ti]],
                    (long long)n, (long long)at[k], (long long)got, (long long)want);
          CHECK(got == want);
        }
      tk_free(x);
      tk_free(o);
    }
}

static void test_reduce_ops(void) {
  static const nrt_dtype floats[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_FLOAT16, NRT_BFLOAT16};
  static const nrt_dtype ints[] = {NRT_INT32, NRT_INT64, NRT_UINT8, NRT_INT8, NRT_INT16, NRT_BOOL};
  const int64_t sizes[3] = {3, 5, 70};
  const int64_t contig[3] = {350, 70, 1}, transposed[3] = {1, 3, 15}, expanded[3] = {70, 0, 1};
  const int64_t *layouts[3] = {contig, transposed, expanded};
  for (int l = 0; l < 3; l++)
    for (int mask = 0; mask < 8; mask++) {
      for (size_t f = 0; f < 4; f++) {
        nrt_dtype t = floats[f];
        static const nk_reduce_op fops[] = {NK_REDUCE_SUM, NK_REDUCE_NANSUM, NK_REDUCE_MEAN, NK_REDUCE_PROD,
                                            NK_REDUCE_MAX, NK_REDUCE_MIN, NK_REDUCE_ALL, NK_REDUCE_ANY,
                                            NK_REDUCE_COUNT_NONZERO};
        for (size_t k = 0; k < sizeof fops / sizeof fops[0]; k++) {
          nrt_dtype out = fops[k] == NK_REDUCE_ALL || fops[k] == NK_REDUCE_ANY ? NRT_BOOL
                          : fops[k] == NK_REDUCE_COUNT_NONZERO ? NRT_INT64 : t;
          check_reduce(rp(fops[k]), t, out, sizes, layouts[l], mask, -1);
        }
        static const double ps[] = {0, 1, 2, 3, 0.5, INFINITY, -INFINITY, -1.5};
        for (int k = 0; k < 8; k++) {
          nk_reduce_params p = rp(NK_REDUCE_NORM);
          p.p = ps[k];
          check_reduce(p, t, t, sizes, layouts[l], mask, -1);
        }
        for (int k = 0; k < 2; k++) {
          nk_reduce_params p = rp(NK_REDUCE_VAR);
          p.correction = k;
          p.take_sqrt = k;
          check_reduce(p, t, t, sizes, layouts[l], mask, -1);
        }
        if (mask == 4 || mask == 1 || mask == 2) {
          check_reduce(rp(NK_REDUCE_MAX_INDEX), t, t, sizes, layouts[l], mask, -1);
          check_reduce(rp(NK_REDUCE_MIN_INDEX), t, t, sizes, layouts[l], mask, -1);
        }
        check_reduce(rp(NK_REDUCE_ARGMAX), t, NRT_INT64, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_ARGMIN), t, NRT_INT64, sizes, layouts[l], mask, -1);
      }
      for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        nrt_dtype t = ints[i];
        check_reduce(rp(NK_REDUCE_SUM), t, NRT_INT64, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_PROD), t, NRT_INT64, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_MAX), t, t, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_MIN), t, t, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_ARGMAX), t, NRT_INT64, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_ALL), t, NRT_BOOL, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_ANY), t, NRT_UINT8, sizes, layouts[l], mask, -1);
        check_reduce(rp(NK_REDUCE_COUNT_NONZERO), t, NRT_INT64, sizes, layouts[l], mask, -1);
      }
    }
  /* NaN: propagates through max/min/sum, first NaN's index, nansum skips it */
  static const nk_reduce_op nan_ops[] = {NK_REDUCE_SUM, NK_REDUCE_NANSUM, NK_REDUCE_MAX, NK_REDUCE_MIN,
                                         NK_REDUCE_ARGMAX, NK_REDUCE_ARGMIN, NK_REDUCE_MAX_INDEX};
  for (size_t k = 0; k < sizeof nan_ops / sizeof nan_ops[0]; k++)
    for (int mask = 1; mask < 8; mask++) {
      nrt_dtype out = nan_ops[k] == NK_REDUCE_ARGMAX || nan_ops[k] == NK_REDUCE_ARGMIN ? NRT_INT64 : NRT_FLOAT32;
      if (nan_ops[k] == NK_REDUCE_MAX_INDEX && mask != 4) continue;
      check_reduce(rp(nan_ops[k]), NRT_FLOAT32, out, sizes, contig, mask, 77);
      check_reduce(rp(nan_ops[k]), NRT_FLOAT32, out, sizes, contig, mask, 1000);
    }
  /* mixed dtypes: float16 summed into float32, int32 into int32 (wraps) */
  check_reduce(rp(NK_REDUCE_SUM), NRT_FLOAT16, NRT_FLOAT32, sizes, contig, 5, -1);
  check_reduce(rp(NK_REDUCE_SUM), NRT_INT32, NRT_INT32, sizes, contig, 7, -1);
}

/* first index among equal extremes, also across the chunked path */
static void test_reduce_ties_and_chunks(void) {
  const int64_t n = 300000;
  float *x = tk_alloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000) / 8.0f;
  x[200001] = 1e6f;
  x[250000] = 1e6f;
  int64_t *idx = tk_alloc(8);
  float *val = tk_alloc(4);
  int64_t zero = 0;
  nrt_operand ops[3] = {tk_operand(val, NRT_FLOAT32, 1, &n, &zero), tk_operand(idx, NRT_INT64, 1, &n, &zero),
                        tk_vector(x, NRT_FLOAT32, n)};
  nk_reduce_params p = rp(NK_REDUCE_MAX_INDEX);
  nrt_task t = tk_task(NK_KERNEL_REDUCE, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  CHECK(*val == 1e6f && *idx == 200001);
  /* min ties: value 0 first at 0 */
  p = rp(NK_REDUCE_MIN_INDEX);
  t = tk_task(NK_KERNEL_REDUCE, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  CHECK(*val == 0 && *idx == 0);
  /* NaN in a later chunk wins */
  x[299999] = NAN;
  x[280000] = NAN;
  p = rp(NK_REDUCE_MAX_INDEX);
  t = tk_task(NK_KERNEL_REDUCE, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  CHECK(isnan(*val) && *idx == 280000);
  tk_free(x);
  tk_free(idx);
  tk_free(val);
}

/* a long float32 sum: pairwise keeps the error near float32 eps */
static void test_sum_precision(void) {
  const int64_t n = 1000003;
  float *x = tk_alloc((size_t)n * 4);
  double exact = 0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = 0.1f + (float)(tk_rand() % 1000) * 1e-4f;
    exact += x[i];
  }
  float *out = tk_alloc(4);
  int64_t zero = 0;
  nrt_operand ops[2] = {tk_operand(out, NRT_FLOAT32, 1, &n, &zero), tk_vector(x, NRT_FLOAT32, n)};
  nk_reduce_params p = rp(NK_REDUCE_SUM);
  nrt_task t = tk_task(NK_KERNEL_REDUCE, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  CHECK(fabs(*out - exact) / exact < 1e-6);
  /* the same sum, strided (a column of a [n, 2] matrix) and as a mean */
  float *x2 = tk_alloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) x2[2 * i] = x[i];
  int64_t sz[2] = {n, 2}, st[2] = {2, 1}, ost[2] = {0, 1};
  float *out2 = tk_alloc(8);
  nrt_operand ops2[2] = {tk_operand(out2, NRT_FLOAT32, 2, sz, ost), tk_operand(x2, NRT_FLOAT32, 2, sz, st)};
  p = rp(NK_REDUCE_MEAN);
  t = tk_task(NK_KERNEL_REDUCE, 2, ops2, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  CHECK(fabs(out2[0] - exact / n) / (exact / n) < 1e-6 && out2[1] == 0);
  tk_free(x);
  tk_free(x2);
  tk_free(out);
  tk_free(out2);
}

/* x.sum(0) of a tall [n, 10] matrix: few outputs, long vertical reduction
 * (chunks of rows combined in order); sum, mean, 2-norm, float16 input */
static void test_tall_vertical(void) {
  const int64_t n = 100003, w = 10;
  int64_t sz[2] = {n, w}, ost[2] = {0, 1};
  float *x = tk_alloc((size_t)(n * w) * 4), *o = tk_alloc((size_t)w * 4);
  uint16_t *h = tk_alloc((size_t)(n * w) * 2);
  double ref[3][10] = {{0}};
  for (int64_t i = 0; i < n * w; i++) {
    x[i] = (float)(int)(tk_rand() % 2001 - 1000) / 512.0f;
    h[i] = tk_f16_bits(x[i]);
    ref[0][i % w] += x[i];
    ref[2][i % w] += (double)x[i] * x[i];
  }
  static const nk_reduce_op opsl[3] = {NK_REDUCE_SUM, NK_REDUCE_MEAN, NK_REDUCE_NORM};
  for (int half = 0; half < 2; half++)
    for (int k = 0; k < 3; k++) {
      nk_reduce_params p = rp(opsl[k]);
      p.p = 2;
      nrt_operand ops[2] = {tk_operand(o, NRT_FLOAT32, 2, sz, ost),
                            half ? tk_operand(h, NRT_FLOAT16, 2, sz, NULL) : tk_operand(x, NRT_FLOAT32, 2, sz, NULL)};
      nrt_task t = tk_task(NK_KERNEL_REDUCE, 2, ops, &p, sizeof p);
      CHECK_OK(tk_run(&t));
      int bad = 0;
      for (int64_t j = 0; j < w; j++) {
        double want = k == 0 ? ref[0][j] : k == 1 ? ref[0][j] / n : sqrt(ref[2][j]);
        double scale = k == 0 ? sqrt((double)n) * 2 : k == 1 ? 2.0 / sqrt((double)n) : want;
        if (fabs(o[j] - want) > 1e-5 * scale + 1e-6 * fabs(want) && bad++ < 3)
          fprintf(stderr, "  tall op %d half %d [%lld]: got %.9g want %.9g\n", k, half, (long long)j, o[j], want);
      }
      CHECK(bad == 0);
    }
  tk_free(x);
  tk_free(h);
  tk_free(o);
}

static void test_reduce_empty_and_validation(void) {
  int64_t sz[2] = {3, 0}, st[2] = {0, 1}, ost[2] = {1, 0};
  float *in = tk_alloc(4), *out = tk_alloc(12);
  nrt_operand ops[3] = {tk_operand(out, NRT_FLOAT32, 2, sz, ost), tk_operand(in, NRT_FLOAT32, 2, sz, st)};
  static const struct { nk_reduce_op op; double p, want; } ids[] = {
      {NK_REDUCE_SUM, 0, 0}, {NK_REDUCE_PROD, 0, 1}, {NK_REDUCE_MEAN, 0, NAN}, {NK_REDUCE_ALL, 0, 1},
      {NK_REDUCE_ANY, 0, 0}, {NK_REDUCE_NORM, 2, 0}, {NK_REDUCE_NORM, -INFINITY, INFINITY},
      {NK_REDUCE_VAR, 0, NAN}};
  for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
    nk_reduce_params p = rp(ids[k].op);
    p.p = ids[k].p;
    out[0] = out[1] = out[2] = 42;
    nrt_task t = tk_task(NK_KERNEL_REDUCE, 2, ops, &p, sizeof p);
    CHECK_OK(tk_run(&t));
    CHECK(close_to(out[0], ids[k].want, 0, 0) && close_to(out[2], ids[k].want, 0, 0));
  }
  nk_reduce_params p = rp(NK_REDUCE_MAX);
  nrt_task t = tk_task(NK_KERNEL_REDUCE, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "no identity"));
  p = rp(NK_REDUCE_OP_COUNT);
  t = tk_task(NK_KERNEL_REDUCE, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "invalid op"));
  p = rp(NK_REDUCE_MAX_INDEX);
  t = tk_task(NK_KERNEL_REDUCE, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "output operand"));
  int64_t n = 4;
  int32_t *iv = tk_alloc(16);
  nrt_operand iops[2] = {tk_operand(out, NRT_FLOAT32, 1, &n, (int64_t[]){0}), tk_vector(iv, NRT_INT32, 4)};
  p = rp(NK_REDUCE_NORM);
  t = tk_task(NK_KERNEL_REDUCE, 2, iops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "floating input"));
  p = rp(NK_REDUCE_ARGMAX);
  t = tk_task(NK_KERNEL_REDUCE, 2, iops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "int64"));
  int64_t s2[2] = {2, 2}, a[2] = {0, 1}, b[2] = {1, 0};
  nrt_operand two[3] = {tk_operand(out, NRT_FLOAT32, 2, s2, a), tk_operand(out, NRT_INT64, 2, s2, b),
                        tk_operand(in, NRT_FLOAT32, 2, s2, (int64_t[]){0, 0})};
  p = rp(NK_REDUCE_MAX_INDEX);
  t = tk_task(NK_KERNEL_REDUCE, 3, two, &p, sizeof p);
  CHECK(tk_fails_with(&t, "disagree"));
  tk_free(in);
  tk_free(out);
  tk_free(iv);
}

/* ------------------------------------------------------------------ scan */

static void check_scan(nk_scan_op op, nrt_dtype t, int dim, int transposed) {
  const int64_t sizes[2] = {6, 37};
  const int64_t st_c[2] = {37, 1}, st_t[2] = {1, 6};
  const int64_t *st = transposed ? st_t : st_c;
  char *in = tk_alloc((size_t)(6 * 37 * tk_size(t)));
  for (int64_t i = 0; i < 6 * 37; i++) {
    double v = tk_is_integral(t) ? (double)(tk_rand() % 5) - (t == NRT_BOOL || t == NRT_UINT8 ? 0 : 2)
                                 : (double)(int)(tk_rand() % 401 - 200) / 64.0;
    if (t == NRT_BOOL) v = v != 0;
    if (op == NK_SCAN_CUMPROD && !tk_is_integral(t)) v = 0.9 + (double)(tk_rand() % 20) / 100.0;
    if (op == NK_SCAN_CUMMAX && i == 100 && !tk_is_integral(t)) v = NAN;
    put(t, in + i * tk_size(t), v);
  }
  int has_idx = op == NK_SCAN_CUMMAX || op == NK_SCAN_CUMMIN;
  char *out = tk_alloc((size_t)(6 * 37 * tk_size(t)));
  int64_t *ix = tk_alloc(6 * 37 * 8);
  nrt_operand ops[3];
  ops[0] = tk_operand(out, t, 2, sizes, NULL);
  ops[1] = tk_operand(ix, NRT_INT64, 2, sizes, NULL);
  ops[has_idx ? 2 : 1] = tk_operand(in, t, 2, sizes, st);
  nk_scan_params p = {.op = op, .dim = dim};
  nrt_task task = tk_task(NK_KERNEL_SCAN, has_idx ? 3 : 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t line = 0; line < sizes[1 - dim]; line++) {
    double acc = op == NK_SCAN_CUMPROD ? 1 : op == NK_SCAN_LOGCUMSUMEXP ? -INFINITY : 0;
    int64_t bi = 0;
    for (int64_t k = 0; k < sizes[dim]; k++) {
      int64_t r = dim == 0 ? k : line, c = dim == 0 ? line : k;
      double x = load(t, in + (r * st[0] + c * st[1]) * tk_size(t));
      switch (op) {
      case NK_SCAN_CUMSUM: acc += x; break;
      case NK_SCAN_CUMPROD: acc *= x; break;
      case NK_SCAN_LOGCUMSUMEXP: acc = k == 0 ? x : fmax(acc, x) + log1p(exp(-fabs(acc - x))); break;
      default:
        if (k == 0 || isnan(x) || (!isnan(acc) && (op == NK_SCAN_CUMMAX ? x >= acc : x <= acc))) acc = x, bi = k;
      }
      double got = load(t, out + (r * 37 + c) * tk_size(t));
      double want = acc;
      if (t == NRT_INT32 && op == NK_SCAN_CUMPROD) want = (double)(int32_t)(int64_t)acc;
      if (!close_to(got, want, tol_of(t) * 4, tol_of(t) * 4)) bad++;
      if (has_idx && ix[r * 37 + c] != bi) bad++;
    }
  }
  if (bad) fprintf(stderr, "  scan op %d %s dim %d transposed %d: %d bad\n", op, tk_dtype_names[t], dim, transposed, bad);
  CHECK(bad == 0);
  tk_free(in);
  tk_free(out);
  tk_free(ix);
}

/* cumsum/cumprod of float32/float64 (scan.c's typed lines, and blocks of
 * neighbouring lines when the scan runs along dim 0): bit for bit the
 * sequential float64 accumulation, over rows longer than a block (150 =
 * 64 + 64 + 22) and enough lines to split over the pool mid-row. */
static void test_scan_typed_bits(void) {
  const int64_t rows = 300, cols = 150, sizes[2] = {300, 150};
  for (int f64 = 0; f64 < 2; f64++)
    for (int prod = 0; prod < 2; prod++)
      for (int dim = 0; dim < 2; dim++) {
        const nrt_dtype t = f64 ? NRT_FLOAT64 : NRT_FLOAT32;
        const int64_t es = tk_size(t);
        char *in = tk_alloc((size_t)(rows * cols * es)), *out = tk_alloc((size_t)(rows * cols * es));
        for (int64_t i = 0; i < rows * cols; i++) {
          double v = prod ? 0.995 + (double)(tk_rand() % 1000) / 100000.0 : ((double)(tk_rand() % 20001) - 10000) / 3001.0;
          put(t, in + i * es, v);
        }
        nrt_operand ops[2] = {tk_operand(out, t, 2, sizes, NULL), tk_operand(in, t, 2, sizes, NULL)};
        nk_scan_params p = {.op = prod ? NK_SCAN_CUMPROD : NK_SCAN_CUMSUM, .dim = dim};
        nrt_task task = tk_task(NK_KERNEL_SCAN, 2, ops, &p, sizeof p);
        CHECK_OK(tk_run(&task));
        int64_t bad = 0;
        for (int64_t line = 0; line < (dim ? rows : cols); line++) {
          double acc = prod ? 1 : 0;
          for (int64_t k = 0; k < (dim ? cols : rows); k++) {
            const int64_t at = dim ? line * cols + k : k * cols + line;
            const double x = load(t, in + at * es);
            acc = prod ? acc * x : acc + x;
            if (f64) {
              double got;
              memcpy(&got, out + at * es, 8);
              bad += memcmp(&got, &acc, 8) != 0;
            } else {
              float got, want = (float)acc;
              memcpy(&got, out + at * es, 4);
              bad += memcmp(&got, &want, 4) != 0;
            }
          }
        }
        if (bad) fprintf(stderr, "  typed scan %s prod %d dim %d: %lld differ\n", tk_dtype_names[t], prod, dim, (long long)bad);
        CHECK(bad == 0);
        tk_free(in);
        tk_free(out);
      }
}

static void test_scan(void) {
  static const nrt_dtype all[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_FLOAT16, NRT_BFLOAT16, NRT_INT32, NRT_INT64, NRT_UINT8, NRT_BOOL};
  for (int dim = 0; dim < 2; dim++)
    for (int tr = 0; tr < 2; tr++)
      for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        nrt_dtype t = all[i];
        if (t != NRT_BOOL) check_scan(NK_SCAN_CUMSUM, t, dim, tr);
        if (t != NRT_BOOL && t != NRT_UINT8) check_scan(NK_SCAN_CUMPROD, t, dim, tr);
        check_scan(NK_SCAN_CUMMAX, t, dim, tr);
        check_scan(NK_SCAN_CUMMIN, t, dim, tr);
        if (t >= NRT_FLOAT16) check_scan(NK_SCAN_LOGCUMSUMEXP, t, dim, tr);
      }
  int64_t n = 4;
  int32_t *v = tk_alloc(16);
  nrt_operand ops[2] = {tk_vector(v, NRT_INT32, n), tk_vector(v, NRT_INT32, n)};
  nk_scan_params p = {.op = NK_SCAN_LOGCUMSUMEXP};
  nrt_task t = tk_task(NK_KERNEL_SCAN, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "floating"));
  p = (nk_scan_params){.op = NK_SCAN_CUMSUM, .dim = 1};
  t = tk_task(NK_KERNEL_SCAN, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "out of range"));
  tk_free(v);
}

/* --------------------------------------------------------------- softmax */

static void check_softmax(nrt_dtype t, int is_log, int backward, int dim, int64_t n_line, int nan_row,
                          int64_t lines) {
  int64_t sizes[2] = {dim == 1 ? lines : n_line, dim == 1 ? n_line : lines};
  int64_t numel = lines * n_line;
  char *x = tk_alloc((size_t)(numel * tk_size(t))), *g = tk_alloc((size_t)(numel * tk_size(t)));
  char *out = tk_alloc((size_t)(numel * tk_size(t)));
  double *y = malloc((size_t)numel * sizeof(double));
  for (int64_t i = 0; i < numel; i++) {
    double v = (double)(int)(tk_rand() % 2001 - 1000) / 100.0;
    put(t, x + i * tk_size(t), v);
    put(t, g + i * tk_size(t), (double)(int)(tk_rand() % 201 - 100) / 50.0);
  }
  if (nan_row) put(t, x + 3 * tk_size(t), NAN);
  /* reference forward in double, on the stored inputs */
  for (int64_t l = 0; l < lines; l++) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < n_line; k++) {
      int64_t i = dim == 1 ? l * n_line + k : k * lines + l;
      double v = load(t, x + i * tk_size(t));
      m = isnan(v) || isnan(m) ? NAN : fmax(m, v);
    }
    for (int64_t k = 0; k < n_line; k++) {
      int64_t i = dim == 1 ? l * n_line + k : k * lines + l;
      s += exp(load(t, x + i * tk_size(t)) - m);
    }
    for (int64_t k = 0; k < n_line; k++) {
      int64_t i = dim == 1 ? l * n_line + k : k * lines + l;
      double v = load(t, x + i * tk_size(t)) - m;
      y[i] = is_log ? v - log(s) : exp(v) / s;
    }
  }
  nk_softmax_params p = {.dim = dim, .log = is_log, .backward = backward};
  nrt_operand ops[3] = {tk_operand(out, t, 2, sizes, NULL), tk_operand(backward ? g : x, t, 2, sizes, NULL)};
  char *yt = NULL;
  if (backward) {
    yt = tk_alloc((size_t)(numel * tk_size(t)));
    for (int64_t i = 0; i < numel; i++) put(t, yt + i * tk_size(t), y[i]);
    ops[2] = tk_operand(yt, t, 2, sizes, NULL);
  }
  nrt_task task = tk_task(NK_KERNEL_SOFTMAX, backward ? 3 : 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t l = 0; l < lines; l++) {
    double s = 0;
    if (backward)
      for (int64_t k = 0; k < n_line; k++) {
        int64_t i = dim == 1 ? l * n_line + k : k * lines + l;
        double gy = load(t, g + i * tk_size(t)), yy = load(t, yt + i * tk_size(t));
        s += is_log ? gy : gy * yy;
      }
    for (int64_t k = 0; k < n_line; k++) {
      int64_t i = dim == 1 ? l * n_line + k : k * lines + l;
      double want = y[i];
      if (backward) {
        double gy = load(t, g + i * tk_size(t)), yy = load(t, yt + i * tk_size(t));
        want = is_log ? gy - exp(yy) * s : yy * (gy - s);
      }
      double got = load(t, out + i * tk_size(t));
      double tol = t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : tol_of(t) * 2;
      if (!close_to(got, want, tol, tol * (backward ? n_line : 1))) {
        if (bad++ < 3) fprintf(stderr, "  softmax %s is_log %d bwd %d dim %d [%lld]: got %.9g want %.9g\n",
                               tk_dtype_names[t], is_log, backward, dim, (long long)i, got, want);
      }
    }
  }
  CHECK(bad == 0);
  free(y);
  tk_free(x);
  tk_free(g);
  tk_free(out);
  if (yt) tk_free(yt);
}

static void test_softmax(void) {
  static const nrt_dtype fl[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_FLOAT16, NRT_BFLOAT16};
  static const int64_t lens[] = {1, 7, 8, 33, 1000};
  for (size_t f = 0; f < 4; f++)
    for (int lg = 0; lg < 2; lg++)
      for (int bwd = 0; bwd < 2; bwd++)
        for (int dim = 0; dim < 2; dim++)
          for (size_t k = 0; k < 5; k++) check_softmax(fl[f], lg, bwd, dim, lens[k], 0, 5);
  for (int lg = 0; lg < 2; lg++) check_softmax(NRT_FLOAT32, lg, 0, 1, 33, 1, 5); /* NaN: its row all NaN */
  /* the vector lines both ways (AVX-512 and AVX2 where the machine has
   * AVX-512), tails of every width: float32 and widened 16-bit lines */
  static const int64_t tails[] = {16, 17, 31, 47, 2049};
  for (int isa = 0; isa < 2; isa++) {
    if (isa) setenv("NK_SOFTMAX_AVX2", "1", 1);
    for (size_t f = 0; f < 4; f++)
      for (int lg = 0; lg < 2; lg++)
        for (int bwd = 0; bwd < 2; bwd++)
          for (size_t k = 0; k < 5; k++) check_softmax(fl[f], lg, bwd, 1, tails[k], 0, 3);
    for (int lg = 0; lg < 2; lg++) check_softmax(NRT_FLOAT32, lg, 0, 1, 47, 1, 3);
  }
  unsetenv("NK_SOFTMAX_AVX2");
  /* float32 along dim 0 with 40 neighbouring lines: vector tiles of 32 and 8 */
  for (int lg = 0; lg < 2; lg++)
    for (int bwd = 0; bwd < 2; bwd++) check_softmax(NRT_FLOAT32, lg, bwd, 0, 19, 0, 40);
  for (int lg = 0; lg < 2; lg++) check_softmax(NRT_FLOAT32, lg, 0, 0, 19, 1, 40); /* NaN in a tile */
  /* -inf entries give exact zeros */
  float xs[4] = {-INFINITY, 0, -INFINITY, 1}, *x = tk_alloc(16), *o = tk_alloc(16);
  memcpy(x, xs, 16);
  nrt_operand ops[2] = {tk_vector(o, NRT_FLOAT32, 4), tk_vector(x, NRT_FLOAT32, 4)};
  nk_softmax_params p = {.dim = 0};
  nrt_task t = tk_task(NK_KERNEL_SOFTMAX, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  CHECK(o[0] == 0 && o[2] == 0 && fabsf(o[1] + o[3] - 1) < 1e-6f);
  int32_t *iv = tk_alloc(16);
  ops[1] = tk_vector(iv, NRT_INT32, 4);
  t = tk_task(NK_KERNEL_SOFTMAX, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "non-floating"));
  tk_free(x);
  tk_free(o);
  tk_free(iv);
}

/* reduce_block.h's order as its comment spells it, written out here
 * apart from the macro the kernels share. */
static float block_order_reference(const float *x, int64_t n) {
  float r = 0;
  if (n < 16) {
    for (int64_t i = 0; i < n; i++) r += x[i];
    return r;
  }
  float acc[64] = {0};
  int64_t i = 0;
  if (n >= 64) {
    for (; i + 64 <= n; i += 64)
      for (int j = 0; j < 64; j++) acc[j] += x[i + j];
    for (int j = 0; j < 32; j++) acc[j] += acc[j + 32];
    for (int j = 0; j < 16; j++) acc[j] += acc[j + 16];
  }
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; j++) acc[j] += x[i + j];
  for (int w = 8; w >= 2; w /= 2)
    for (int j = 0; j < w; j++) acc[j] += acc[j + w];
  r = acc[0] + acc[1];
  for (; i < n; i++) r += x[i];
  return r;
}

/* The plain float32 sum's block (reduce_block.h) compiled per ISA gives
 * the bits of the portable code (this file's own instantiation) and of the
 * order spelled out above: lengths around the 16 and 64 lanes and the 1024
 * block, values of mixed magnitudes and
 * signs (so that the order of additions shows), inf, NaN, -0, subnormals. */
static void test_block_sum_bits_per_isa(void) {
  static const int64_t lengths[] = {0,  1,  15, 16,  17,  31,  32,  33,  63,   64,
                                    65, 79, 80, 127, 128, 129, 255, 1000, 1023, 1024};
  float *x = malloc(1024 * sizeof *x);
  int bad = 0;
  for (int trial = 0; trial < 200; trial++) {
    for (int i = 0; i < 1024; i++) {
      const uint64_t r = tk_rand();
      x[i] = (float)((double)(int64_t)(r >> 11) / 9007199254740992.0 * 1e6) * (r % 7 == 0 ? 1e-30f : 1.0f);
      if (trial % 10 == 9 && r % 97 == 0) x[i] = (r >> 8) % 2 ? INFINITY : -0.0f;
      if (trial % 10 == 8 && r % 101 == 0) x[i] = NAN;
      if (trial % 10 == 7 && r % 5 == 0) x[i] = 1e-41f;
    }
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
      const int64_t n = lengths[k];
      const float want = nk_reduce_block_f32_body(x, n);
      const float got = nk_cpu_isa() == NK_ISA_AVX512 ? nk_reduce_block_f32_avx512(x, n)
                        : nk_cpu_isa() == NK_ISA_AVX2 ? nk_reduce_block_f32_avx2(x, n)
                                                     : want;
      bad += memcmp(&want, &got, sizeof want) != 0;
      const float spelled = block_order_reference(x, n);
      bad += memcmp(&want, &spelled, sizeof want) != 0;
    }
  }
  CHECK(bad == 0);
  free(x);
}

static void tests(void) {
  test_block_sum_bits_per_isa();
  test_reduce_ops();
  test_reduce_ties_and_chunks();
  test_sum_precision();
  test_tall_vertical();
  test_reduce_empty_and_validation();
  test_scan();
  test_reduce_byte_runs();
  test_scan_typed_bits();
  test_softmax();
}

int main(void) { return tk_main(tests, __FILE__); }
