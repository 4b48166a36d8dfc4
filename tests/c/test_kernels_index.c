/* The index kernels (GATHER_SCATTER, INDEX, MASKED) against references
 * written here: gather with strided/transposed operands and sizes that take
 * the parallel paths, scatter with every reduction (include_self on and
 * off, duplicates, mean's floor division for integers), value scatter,
 * float16/bfloat16 rounding per step, index/index_put with negative and
 * several indices and accumulation, masked fill/count/nonzero/select/
 * scatter, the error for every out-of-range index (and the stream working
 * afterwards), and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

static void *dev_copy(const void *host, size_t bytes) {
  void *p = tk_alloc(bytes);
  memcpy(p, host, bytes);
  return p;
}

static nrt_task gs_task(const nk_gather_scatter_params *p, int n, const nrt_operand *ops) {
  return tk_task(NK_KERNEL_GATHER_SCATTER, n, ops, p, sizeof *p);
}

/* ----------------------------------------------------------------- gather */

static void test_gather(void) {
  /* self 4x6 double, seen transposed as 6x4; index 6x3 int64 along dim 1 */
  double self[24];
  for (int i = 0; i < 24; i++) self[i] = i * 1.5 - 7;
  int64_t idx[18];
  for (int i = 0; i < 18; i++) idx[i] = (i * 7 + 1) % 4;
  double *ds = dev_copy(self, sizeof self);
  int64_t *di = dev_copy(idx, sizeof idx);
  double *dout = tk_alloc(18 * sizeof(double));
  int64_t ssz[2] = {6, 4}, sst[2] = {1, 6}, isz[2] = {6, 3};
  nrt_operand ops[3] = {tk_operand(dout, NRT_FLOAT64, 2, isz, NULL), tk_operand(di, NRT_INT64, 2, isz, NULL),
                        tk_operand(ds, NRT_FLOAT64, 2, ssz, sst)};
  nk_gather_scatter_params p = {.gather = 1, .dim = 1};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  int ok = 1;
  for (int r = 0; r < 6; r++)
    for (int c = 0; c < 3; c++) ok &= dout[r * 3 + c] == self[idx[r * 3 + c] * 6 + r];
  CHECK(ok);

  /* int32 index along dim 0 with smaller index in dim 1 (ATen allows it) */
  int32_t idx32[6] = {5, 0, 3, 2, 1, 4};
  int32_t *di32 = dev_copy(idx32, sizeof idx32);
  int64_t i2[2] = {2, 3};
  ops[0] = tk_operand(dout, NRT_FLOAT64, 2, i2, NULL);
  ops[1] = tk_operand(di32, NRT_INT32, 2, i2, NULL);
  p.dim = 0;
  t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  ok = 1;
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) ok &= dout[r * 3 + c] == self[c * 6 + idx32[r * 3 + c]];
  CHECK(ok);

  /* out of range: the task fails naming the index, nothing else breaks */
  idx32[4] = 6;
  memcpy(di32, idx32, sizeof idx32);
  t = gs_task(&p, 3, ops);
  CHECK(tk_fails_with(&t, "index 6 is out of bounds for dimension 0 with size 6"));
  idx32[4] = -1;
  memcpy(di32, idx32, sizeof idx32);
  CHECK(tk_fails_with(&t, "index -1 is out of bounds for dimension 0 with size 6"));
  p.wrap = 1; /* with wrap, -1 is the last */
  t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  CHECK(dout[4] == self[1 * 6 + 5]);
  tk_free(ds), tk_free(di), tk_free(dout), tk_free(di32);
}

/* a long 1-d gather (pieces in parallel) and a wide 2-d one (lines) */
static void test_gather_parallel(void) {
  const int64_t n = 200000, m = 1000;
  float *src = tk_alloc(m * sizeof(float));
  for (int64_t i = 0; i < m; i++) src[i] = (float)(i * 3);
  int64_t *idx = tk_alloc(n * sizeof(int64_t));
  for (int64_t i = 0; i < n; i++) idx[i] = (i * 7919) % m;
  float *out = tk_alloc(n * sizeof(float));
  nrt_operand ops[3] = {tk_vector(out, NRT_FLOAT32, n), tk_vector(idx, NRT_INT64, n), tk_vector(src, NRT_FLOAT32, m)};
  nk_gather_scatter_params p = {.gather = 1};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= out[i] == (float)(((i * 7919) % m) * 3);
  CHECK(ok);
  idx[n - 3] = m; /* one bad index at the end of a late piece */
  CHECK(tk_fails_with(&t, "index 1000 is out of bounds for dimension 0 with size 1000"));
  tk_free(src), tk_free(idx), tk_free(out);
}

/* ---------------------------------------------------------------- scatter */

static double ref_reduce(nk_scatter_op op, double d, double s) {
  switch (op) {
  case NK_SCATTER_ADD: case NK_SCATTER_MEAN: return d + s;
  case NK_SCATTER_MUL: return d * s;
  case NK_SCATTER_AMAX: return d > s ? d : s;
  case NK_SCATTER_AMIN: return d < s ? d : s;
  default: return s;
  }
}

/* self R x C (int64 or double), scatter along dim 1 from an R x K src with
 * duplicate indices; reference is the serial loop (as ATen's CPU). */
static void scatter_case(nrt_dtype t, nk_scatter_op op, int include_self) {
  enum { R = 37, C = 5, K = 9 };
  double ref[R * C];
  int64_t idx[R * K];
  double srcv[R * K];
  void *self = tk_alloc(R * C * 8), *src = tk_alloc(R * K * 8);
  int64_t *count = tk_alloc(R * C * 8);
  for (int i = 0; i < R * C; i++) {
    double v = (double)((i * 5) % 11) - 4;
    ref[i] = v;
    if (t == NRT_INT64) ((int64_t *)self)[i] = (int64_t)v; else ((double *)self)[i] = v;
  }
  for (int i = 0; i < R * K; i++) {
    idx[i] = (i * 3 + i / 7) % C;
    double v = (double)((i * 13) % 9) - 3;
    srcv[i] = v;
    if (t == NRT_INT64) ((int64_t *)src)[i] = (int64_t)v; else ((double *)src)[i] = v;
  }
  int64_t *di = dev_copy(idx, sizeof idx);
  /* reference */
  int cnt[R * C] = {0};
  double init = op == NK_SCATTER_MUL ? 1 : op == NK_SCATTER_AMAX ? (t == NRT_INT64 ? -9.2233720368547758e18 : -INFINITY)
              : op == NK_SCATTER_AMIN ? (t == NRT_INT64 ? 9.2233720368547758e18 : INFINITY) : 0;
  if (!include_self)
    for (int r = 0; r < R; r++)
      for (int k = 0; k < K; k++) ref[r * C + idx[r * K + k]] = init;
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) {
      int o = r * C + (int)idx[r * K + k];
      ref[o] = ref_reduce(op, ref[o], srcv[r * K + k]);
      cnt[o]++;
    }
  if (op == NK_SCATTER_MEAN)
    for (int i = 0; i < R * C; i++)
      if (cnt[i]) {
        double c = cnt[i] + include_self;
        ref[i] = t == NRT_INT64 ? floor(ref[i] / c) : ref[i] / c;
      }
  int64_t ssz[2] = {R, C}, isz[2] = {R, K};
  nrt_operand ops[4] = {tk_operand(self, t, 2, ssz, NULL), tk_operand(di, NRT_INT64, 2, isz, NULL),
                        tk_operand(src, t, 2, isz, NULL), tk_operand(count, NRT_INT64, 2, ssz, NULL)};
  nk_gather_scatter_params p = {.dim = 1, .op = op, .include_self = include_self, .alpha = {1, 1}};
  nrt_task task = gs_task(&p, op == NK_SCATTER_MEAN ? 4 : 3, ops);
  CHECK_OK(tk_run(&task));
  int ok = 1;
  for (int i = 0; i < R * C; i++) {
    double got = t == NRT_INT64 ? (double)((int64_t *)self)[i] : ((double *)self)[i];
    if (got != ref[i]) {
      if (ok) fprintf(stderr, "  scatter %s op %d self %d: [%d] = %g, expected %g\n", tk_dtype_names[t], op,
                      include_self, i, got, ref[i]);
      ok = 0;
    }
  }
  CHECK(ok);
  tk_free(self), tk_free(src), tk_free(count), tk_free(di);
}

static void test_scatter_reductions(void) {
  for (int op = NK_SCATTER_ASSIGN; op < NK_SCATTER_OP_COUNT; op++)
    for (int inc = 0; inc < 2; inc++) {
      scatter_case(NRT_FLOAT64, (nk_scatter_op)op, inc);
      scatter_case(NRT_INT64, (nk_scatter_op)op, inc);
    }
}

/* scatter_add: float16 rounds after every step, like ATen's Half += Half;
 * a value scatter; alpha; bool add is or; skip (padding_idx) */
static void test_scatter_misc(void) {
  uint16_t self[2] = {0, 0};
  uint16_t src[4];
  for (int i = 0; i < 4; i++) src[i] = tk_f16_bits(i == 0 ? 2048.0 : 1.0);
  int64_t idx[4] = {0, 0, 0, 0};
  uint16_t *ds = dev_copy(self, sizeof self), *dsrc = dev_copy(src, sizeof src);
  int64_t *di = dev_copy(idx, sizeof idx);
  nrt_operand ops[3] = {tk_vector(ds, NRT_FLOAT16, 2), tk_vector(di, NRT_INT64, 4), tk_vector(dsrc, NRT_FLOAT16, 4)};
  nk_gather_scatter_params p = {.op = NK_SCATTER_ADD, .include_self = 1, .alpha = {1, 1}};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  CHECK(tk_f16_value(ds[0]) == 2048.0); /* 2048 + 1 rounds back to 2048 each time */

  /* value scatter with wrap (index_fill) into float32 */
  float f[5] = {0};
  float *df = dev_copy(f, sizeof f);
  int64_t widx[2] = {-1, 1};
  int64_t *dw = dev_copy(widx, sizeof widx);
  nrt_operand vops[2] = {tk_vector(df, NRT_FLOAT32, 5), tk_vector(dw, NRT_INT64, 2)};
  nk_gather_scatter_params vp = {.has_value = 1, .wrap = 1, .value = {2.5, 2}};
  t = gs_task(&vp, 2, vops);
  CHECK_OK(tk_run(&t));
  CHECK(df[4] == 2.5f && df[1] == 2.5f && df[0] == 0 && df[2] == 0);

  /* alpha and skip: self[idx] += 3 * src, idx == 2 ignored */
  int32_t a[4] = {1, 1, 1, 1}, as[3] = {5, 6, 7};
  int64_t aidx[3] = {0, 2, 0};
  int32_t *da = dev_copy(a, sizeof a), *das = dev_copy(as, sizeof as);
  int64_t *dai = dev_copy(aidx, sizeof aidx);
  nrt_operand aops[3] = {tk_vector(da, NRT_INT32, 4), tk_vector(dai, NRT_INT64, 3), tk_vector(das, NRT_INT32, 3)};
  nk_gather_scatter_params ap = {.op = NK_SCATTER_ADD, .include_self = 1, .has_skip = 1, .skip = 2, .alpha = {3, 3}};
  t = gs_task(&ap, 3, aops);
  CHECK_OK(tk_run(&t));
  CHECK(da[0] == 1 + 15 + 21 && da[2] == 1 && da[1] == 1);

  /* bool add is or, mul is and */
  uint8_t b[2] = {0, 1}, bs[2] = {1, 0};
  int64_t bidx[2] = {0, 1};
  uint8_t *db = dev_copy(b, 2), *dbs = dev_copy(bs, 2);
  int64_t *dbi = dev_copy(bidx, sizeof bidx);
  nrt_operand bops[3] = {tk_vector(db, NRT_BOOL, 2), tk_vector(dbi, NRT_INT64, 2), tk_vector(dbs, NRT_BOOL, 2)};
  nk_gather_scatter_params bp = {.op = NK_SCATTER_ADD, .include_self = 1, .alpha = {1, 1}};
  t = gs_task(&bp, 3, bops);
  CHECK_OK(tk_run(&t));
  CHECK(db[0] == 1 && db[1] == 1);

  /* a bad index in a scatter: the line is not written at all */
  int64_t bad[3] = {0, 9, 0};
  memcpy(dai, bad, sizeof bad);
  a[0] = 1;
  memcpy(da, a, sizeof a);
  t = gs_task(&ap, 3, aops);
  CHECK(tk_fails_with(&t, "index 9 is out of bounds for dimension 0 with size 4"));
  CHECK(da[0] == 1);
  /* and the stream works afterwards */
  memcpy(dai, aidx, sizeof aidx);
  CHECK_OK(tk_run(&t));
  CHECK(da[0] == 1 + 15 + 21);
  tk_free(ds), tk_free(dsrc), tk_free(di), tk_free(df), tk_free(dw), tk_free(da), tk_free(das), tk_free(dai);
  tk_free(db), tk_free(dbs), tk_free(dbi);
}

/* many lines in parallel with duplicates: the same as serial */
static void test_scatter_parallel(void) {
  enum { R = 3000, C = 17, K = 40 };
  float *self = tk_alloc(R * C * 4), *src = tk_alloc(R * K * 4);
  int64_t *idx = tk_alloc(R * K * 8);
  float *ref = calloc(R * C, 4);
  for (int i = 0; i < R * K; i++) {
    src[i] = (float)((i % 101) * 0.37);
    idx[i] = (i * 31 + i / 5) % C;
  }
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) ref[r * C + idx[r * K + k]] += src[r * K + k];
  int64_t ssz[2] = {R, C}, isz[2] = {R, K};
  nrt_operand ops[3] = {tk_operand(self, NRT_FLOAT32, 2, ssz, NULL), tk_operand(idx, NRT_INT64, 2, isz, NULL),
                        tk_operand(src, NRT_FLOAT32, 2, isz, NULL)};
  nk_gather_scatter_params p = {.dim = 1, .op = NK_SCATTER_ADD, .include_self = 1, .alpha = {1, 1}};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  CHECK(memcmp(self, ref, R * C * 4) == 0); /* bit exact: same order */
  free(ref);
  tk_free(self), tk_free(src), tk_free(idx);
}

/* index_add's shape: a 1-d index expanded along dim 0 (stride 0 across
 * columns), rows copied whole (the dim-major walk), mean without self */
static void test_scatter_rows(void) {
  enum { R = 7, C = 300, K = 50 };
  double *self = tk_alloc(R * C * 8), *src = tk_alloc(K * C * 8), ref[R * C];
  int64_t *count = tk_alloc(R * C * 8), idx[K], cnt[R] = {0};
  for (int i = 0; i < R * C; i++) self[i] = ref[i] = i % 13;
  for (int i = 0; i < K * C; i++) src[i] = (i * 7) % 10;
  for (int k = 0; k < K; k++) idx[k] = (k * 5 + k / 3) % R;
  int64_t *di = dev_copy(idx, sizeof idx);
  int64_t ssz[2] = {R, C}, isz[2] = {K, C}, ist[2] = {1, 0};
  nrt_operand ops[4] = {tk_operand(self, NRT_FLOAT64, 2, ssz, NULL), tk_operand(di, NRT_INT64, 2, isz, ist),
                        tk_operand(src, NRT_FLOAT64, 2, isz, NULL), tk_operand(count, NRT_INT64, 2, ssz, NULL)};
  nk_gather_scatter_params p = {.op = NK_SCATTER_ADD, .include_self = 1, .alpha = {2, 2}};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  for (int k = 0; k < K; k++)
    for (int c = 0; c < C; c++) ref[idx[k] * C + c] += 2 * src[k * C + c];
  CHECK(memcmp(self, ref, sizeof ref) == 0);
  /* mean without self: sum of the rows scattered to r / their count */
  nk_gather_scatter_params m = {.op = NK_SCATTER_MEAN, .include_self = 0, .alpha = {1, 1}};
  t = gs_task(&m, 4, ops);
  CHECK_OK(tk_run(&t));
  for (int k = 0; k < K; k++) cnt[idx[k]]++;
  int ok = 1;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      double sum = 0;
      for (int k = 0; k < K; k++) sum += idx[k] == r ? src[k * C + c] : 0;
      ok &= cnt[r] ? self[r * C + c] == sum / cnt[r] : self[r * C + c] == ref[r * C + c];
    }
  CHECK(ok);
  tk_free(self), tk_free(src), tk_free(count), tk_free(di);
}

/* index_select's shape: whole rows moved per index (and a bad one caught) */
static void test_gather_rows(void) {
  enum { R = 7, C = 300, K = 50 };
  float *self = tk_alloc(R * C * 4), *out = tk_alloc(K * C * 4);
  int64_t idx[K];
  for (int i = 0; i < R * C; i++) self[i] = (float)i;
  for (int k = 0; k < K; k++) idx[k] = (k * 3) % R;
  int64_t *di = dev_copy(idx, sizeof idx);
  int64_t ssz[2] = {R, C}, osz[2] = {K, C}, ist[2] = {1, 0};
  nrt_operand ops[3] = {tk_operand(out, NRT_FLOAT32, 2, osz, NULL), tk_operand(di, NRT_INT64, 2, osz, ist),
                        tk_operand(self, NRT_FLOAT32, 2, ssz, NULL)};
  nk_gather_scatter_params p = {.gather = 1};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  int ok = 1;
  for (int k = 0; k < K; k++)
    for (int c = 0; c < C; c++) ok &= out[k * C + c] == self[idx[k] * C + c];
  CHECK(ok);
  di[K - 1] = R;
  CHECK(tk_fails_with(&t, "index 7 is out of bounds for dimension 0 with size 7"));
  tk_free(self), tk_free(out), tk_free(di);
}

/* ------------------------------------------------------------------ index */

static void test_index(void) {
  /* x: 5 x 4 int16; out[i] = x[i0[i], i1[i]] with negative indices */
  int16_t x[20];
  for (int i = 0; i < 20; i++) x[i] = (int16_t)(i * 3 - 20);
  int64_t i0[6] = {0, 4, -1, -5, 2, 3};
  int32_t i1[6] = {3, -4, 0, 1, -1, 2};
  int16_t *dx = dev_copy(x, sizeof x), *dout = tk_alloc(12);
  int64_t *d0 = dev_copy(i0, sizeof i0);
  int32_t *d1 = dev_copy(i1, sizeof i1);
  int64_t n = 6, zero = 0;
  nrt_operand ops[4] = {tk_vector(dout, NRT_INT16, 6), tk_operand(dx, NRT_INT16, 1, &n, &zero),
                        tk_vector(d0, NRT_INT64, 6), tk_vector(d1, NRT_INT32, 6)};
  nk_index_params p = {.n_indices = 2, .sizes = {5, 4}, .strides = {8, 2}};
  nrt_task t = tk_task(NK_KERNEL_INDEX, 4, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= dout[i] == x[((i0[i] + 5) % 5) * 4 + (i1[i] + 4) % 4];
  CHECK(ok);
  d1[2] = 4;
  CHECK(tk_fails_with(&t, "index 4 is out of bounds for dimension 1 with size 4"));
  d1[2] = -5;
  CHECK(tk_fails_with(&t, "index -5 is out of bounds for dimension 1 with size 4"));
  d1[2] = 0;
  p.nowrap = 1; /* index_copy: negative is out of range */
  t = tk_task(NK_KERNEL_INDEX, 4, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "index -4 is out of bounds for dimension 1 with size 4")); /* element 1 */

  /* put with accumulate and duplicates: x[i0[i], i1[i]] += v[i] */
  int16_t v[6] = {1, 2, 3, 4, 5, 6};
  int16_t *dv = dev_copy(v, sizeof v);
  int64_t dup0[6] = {1, 1, -4, 0, 0, 0};
  int32_t dup1[6] = {2, 2, 2, 0, 0, -4};
  memcpy(d0, dup0, sizeof dup0);
  memcpy(d1, dup1, sizeof dup1);
  nrt_operand pops[4] = {tk_operand(dx, NRT_INT16, 1, &n, &zero), tk_vector(dv, NRT_INT16, 6),
                         tk_vector(d0, NRT_INT64, 6), tk_vector(d1, NRT_INT32, 6)};
  nk_index_params pp = {.put = 1, .accumulate = 1, .n_indices = 2, .sizes = {5, 4}, .strides = {8, 2}};
  t = tk_task(NK_KERNEL_INDEX, 4, pops, &pp, sizeof pp);
  CHECK_OK(tk_run(&t));
  CHECK(dx[1 * 4 + 2] == x[6] + 6 && dx[0] == x[0] + 15);
  pp.accumulate = 0; /* last write wins */
  t = tk_task(NK_KERNEL_INDEX, 4, pops, &pp, sizeof pp);
  CHECK_OK(tk_run(&t));
  CHECK(dx[1 * 4 + 2] == 3 && dx[0] == 6);
  tk_free(dx), tk_free(dout), tk_free(d0), tk_free(d1), tk_free(dv);
}

/* ----------------------------------------------------------------- masked */

static void test_masked(void) {
  /* x 3 x 4 float32 seen transposed (4 x 3), mask of the same logical shape */
  float x[12];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  uint8_t mask[12];
  for (int i = 0; i < 12; i++) mask[i] = (i % 3) != 1;
  float *dx = dev_copy(x, sizeof x);
  uint8_t *dm = dev_copy(mask, sizeof mask);
  int64_t sz[2] = {4, 3}, st[2] = {1, 4};
  nrt_operand xt = tk_operand(dx, NRT_FLOAT32, 2, sz, st), mt = tk_operand(dm, NRT_BOOL, 2, sz, NULL);

  /* count */
  int64_t *dc = tk_alloc(8);
  nrt_operand cops[2] = {tk_operand(dc, NRT_INT64, 0, NULL, NULL), mt};
  nk_masked_params cp = {.mode = NK_MASKED_COUNT};
  nrt_task t = tk_task(NK_KERNEL_MASKED, 2, cops, &cp, sizeof cp);
  CHECK_OK(tk_run(&t));
  CHECK(*dc == 8);

  /* nonzero of the transposed x (x != 0 except x[0]) */
  int64_t *dnz = tk_alloc(11 * 2 * 8);
  int64_t nsz[2] = {11, 2};
  nrt_operand nops[2] = {tk_operand(dnz, NRT_INT64, 2, nsz, NULL), xt};
  nk_masked_params np = {.mode = NK_MASKED_NONZERO, .count = 11};
  t = tk_task(NK_KERNEL_MASKED, 2, nops, &np, sizeof np);
  CHECK_OK(tk_run(&t));
  int ok = 1, k = 0;
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++)
      if (x[c * 4 + r] != 0) ok &= dnz[2 * k] == r && dnz[2 * k + 1] == c, k++;
  CHECK(ok && k == 11);
  np.count = 10; /* a wrong count fails, never writes past the output */
  nsz[0] = 10;
  nops[0] = tk_operand(dnz, NRT_INT64, 2, nsz, NULL);
  t = tk_task(NK_KERNEL_MASKED, 2, nops, &np, sizeof np);
  CHECK(tk_fails_with(&t, "expected 10 set elements, found 11"));

  /* select: row-major order of the logical (transposed) shape */
  float *dsel = tk_alloc(8 * 4);
  int64_t eight = 8;
  nrt_operand sops[3] = {tk_vector(dsel, NRT_FLOAT32, 8), mt, xt};
  nk_masked_params sp = {.mode = NK_MASKED_SELECT, .count = 8};
  t = tk_task(NK_KERNEL_MASKED, 3, sops, &sp, sizeof sp);
  CHECK_OK(tk_run(&t));
  ok = 1, k = 0;
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++)
      if (mask[r * 3 + c]) ok &= dsel[k++] == x[c * 4 + r];
  CHECK(ok && k == 8);
  (void)eight;

  /* scatter into the transposed x from a 1-d source */
  float srcv[9] = {100, 101, 102, 103, 104, 105, 106, 107, 108};
  float *dsrc = dev_copy(srcv, sizeof srcv);
  nrt_operand mops[3] = {xt, mt, tk_vector(dsrc, NRT_FLOAT32, 9)};
  nk_masked_params mp = {.mode = NK_MASKED_SCATTER};
  t = tk_task(NK_KERNEL_MASKED, 3, mops, &mp, sizeof mp);
  CHECK_OK(tk_run(&t));
  ok = 1, k = 0;
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++) ok &= dx[c * 4 + r] == (mask[r * 3 + c] ? srcv[k++] : x[c * 4 + r]);
  CHECK(ok);
  mops[2] = tk_vector(dsrc, NRT_FLOAT32, 7); /* too short a source */
  t = tk_task(NK_KERNEL_MASKED, 3, mops, &mp, sizeof mp);
  CHECK(tk_fails_with(&t, "Number of elements of source < number of ones in mask"));

  /* fill */
  nrt_operand fops[2] = {xt, mt};
  nk_masked_params fp = {.mode = NK_MASKED_FILL, .value = {-1.5, -1}};
  t = tk_task(NK_KERNEL_MASKED, 2, fops, &fp, sizeof fp);
  CHECK_OK(tk_run(&t));
  ok = 1;
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 3; c++) ok &= !mask[r * 3 + c] || dx[c * 4 + r] == -1.5f;
  CHECK(ok);
  tk_free(dx), tk_free(dm), tk_free(dc), tk_free(dnz), tk_free(dsel), tk_free(dsrc);
}

/* masked_fill's dense rows (index/masked.c, fill_dense_row): every element
 * size, a mask per element (nonzero bytes other than 1 too) and a mask
 * broadcast along the row (stride 0), 100 rows of 1001 (parallel, vector
 * tails); filled elements hold the value's bits, the others keep theirs
 * (NaN payloads included). */
static void test_masked_fill_dense(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_BFLOAT16, NRT_FLOAT32, NRT_FLOAT64};
  const int64_t rows = 100, cols = 1001, n = rows * cols;
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (int bcast = 0; bcast < 2; bcast++) {
      const nrt_dtype t = types[ti];
      const int64_t es = tk_size(t);
      unsigned char *x = tk_alloc((size_t)(n * es)), *before = malloc((size_t)(n * es));
      unsigned char *m = tk_alloc((size_t)(bcast ? rows : n));
      for (int64_t i = 0; i < n * es; i++) x[i] = before[i] = (unsigned char)(i * 37 + 11);
      for (int64_t i = 0; i < (bcast ? rows : n); i++) m[i] = (unsigned char)(i % 3 == 0 ? 0 : i % 3);
      int64_t sizes[2] = {rows, cols}, mstrides[2] = {bcast ? 1 : cols, bcast ? 0 : 1};
      nrt_operand ops[2] = {tk_operand(x, t, 2, sizes, NULL), tk_operand(m, NRT_UINT8, 2, sizes, mstrides)};
      nk_masked_params fp = {.mode = NK_MASKED_FILL, .value = {-1.5, 7}};
      nrt_task task = tk_task(NK_KERNEL_MASKED, 2, ops, &fp, sizeof fp);
      CHECK_OK(tk_run(&task));
      uint64_t want = tk_expected(t != NRT_UINT8 ? (tk_value){0, 0, -1.5} : (tk_value){1, 7, 0}, t);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; i++) {
        const bool on = m[bcast ? i / cols : i] != 0;
        uint64_t got = tk_raw(t, x + i * es), old = tk_raw(t, before + i * es);
        bad += got != (on ? want : old);
      }
      if (bad) fprintf(stderr, "  masked_fill %s bcast %d: %lld wrong\n", tk_dtype_names[t], bcast, (long long)bad);
      CHECK(bad == 0);
      tk_free(x), tk_free(m), free(before);
    }
}

/* a large nonzero: chunks counted and written in parallel, order kept */
static void test_nonzero_parallel(void) {
  const int64_t n = 300000;
  int32_t *x = tk_alloc(n * 4);
  int64_t expect = 0;
  for (int64_t i = 0; i < n; i++) expect += (x[i] = (i % 7 == 0 || i % 11 == 0)) != 0;
  int64_t *dc = tk_alloc(8);
  nrt_operand cops[2] = {tk_operand(dc, NRT_INT64, 0, NULL, NULL), tk_vector(x, NRT_INT32, n)};
  nk_masked_params cp = {.mode = NK_MASKED_COUNT};
  nrt_task t = tk_task(NK_KERNEL_MASKED, 2, cops, &cp, sizeof cp);
  CHECK_OK(tk_run(&t));
  CHECK(*dc == expect);
  int64_t *out = tk_alloc(expect * 8);
  int64_t osz[2] = {expect, 1};
  nrt_operand nops[2] = {tk_operand(out, NRT_INT64, 2, osz, NULL), tk_vector(x, NRT_INT32, n)};
  nk_masked_params np = {.mode = NK_MASKED_NONZERO, .count = expect};
  t = tk_task(NK_KERNEL_MASKED, 2, nops, &np, sizeof np);
  CHECK_OK(tk_run(&t));
  int ok = 1;
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (x[i]) ok &= out[k++] == i;
  CHECK(ok);
  tk_free(x), tk_free(dc), tk_free(out);
}

/* ------------------------------------------------------------- validation */

static void test_validation(void) {
  float a[4] = {0};
  int64_t idx[4] = {0};
  float *da = dev_copy(a, sizeof a);
  int64_t *di = dev_copy(idx, sizeof idx);
  nrt_operand ops[3] = {tk_vector(da, NRT_FLOAT32, 4), tk_vector(di, NRT_INT64, 4), tk_vector(da, NRT_FLOAT32, 4)};
  nk_gather_scatter_params p = {.gather = 1, .dim = 1};
  nrt_task t = gs_task(&p, 3, ops);
  CHECK(tk_fails_with(&t, "dim 1 out of range"));
  p.dim = 0;
  ops[1].dtype = NRT_FLOAT32;
  t = gs_task(&p, 3, ops);
  CHECK(tk_fails_with(&t, "expected int32 or int64"));
  ops[1] = tk_vector(di, NRT_INT64, 4);
  ops[0] = tk_vector(da, NRT_FLOAT32, 3); /* out smaller than the index */
  t = gs_task(&p, 3, ops);
  CHECK(tk_fails_with(&t, "smaller than the index"));
  p.op = 99;
  t = gs_task(&p, 3, ops);
  CHECK(tk_fails_with(&t, "invalid op"));
  nk_index_params ip = {.n_indices = 7};
  t = tk_task(NK_KERNEL_INDEX, 3, ops, &ip, sizeof ip);
  CHECK(tk_fails_with(&t, "index operands, expected 1..6"));
  nk_masked_params mp = {.mode = 42};
  t = tk_task(NK_KERNEL_MASKED, 2, ops, &mp, sizeof mp);
  CHECK(tk_fails_with(&t, "invalid mode"));
  /* 0-size index: nothing happens */
  p.op = 0;
  ops[0] = tk_vector(da, NRT_FLOAT32, 0);
  ops[1] = tk_vector(di, NRT_INT64, 0);
  t = gs_task(&p, 3, ops);
  CHECK_OK(tk_run(&t));
  tk_free(da), tk_free(di);
}

static void tests(void) {
  test_gather();
  test_gather_parallel();
  test_scatter_reductions();
  test_scatter_misc();
  test_scatter_parallel();
  test_scatter_rows();
  test_gather_rows();
  test_index();
  test_masked();
  test_masked_fill_dense();
  test_nonzero_parallel();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
