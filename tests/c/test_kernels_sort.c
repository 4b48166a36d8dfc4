/* The sort family's kernels against independent references: NK_KERNEL_SORT
 * (stable order, descending, NaN largest, -0.0 == 0.0, topk's k, strided
 * slices, every dtype, many slices over the pool), NK_KERNEL_SEARCHSORTED
 * (left/right, sorter, per-row boundaries, NaN), NK_KERNEL_UNIQUE, the
 * sampling kernels (bernoulli with a tensor p, multinomial) and the
 * validation errors. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"
#include "sort/sort_keys.h" /* the heapsort stage, tested directly */

/* ------------------------------------------------------------ reference */

/* a < b in ATen's sort order: NaN is the largest, NaNs are equal */
static int ref_less(double a, double b) {
  if (isnan(a)) return 0;
  if (isnan(b)) return 1;
  return a < b;
}

typedef struct ref_item {
  double v;
  int64_t i;
  int desc;
} ref_item;

static int ref_cmp(const void *pa, const void *pb) {
  const ref_item *a = pa, *b = pb;
  int lt = a->desc ? ref_less(b->v, a->v) : ref_less(a->v, b->v);
  int gt = a->desc ? ref_less(a->v, b->v) : ref_less(b->v, a->v);
  if (lt) return -1;
  if (gt) return 1;
  return a->i < b->i ? -1 : a->i > b->i; /* stable */
}

static double load(nrt_dtype t, const void *p) {
  switch (t) {
  case NRT_BOOL: case NRT_UINT8: return *(const uint8_t *)p;
  case NRT_INT8: return *(const int8_t *)p;
  case NRT_INT16: return *(const int16_t *)p;
  case NRT_INT32: return *(const int32_t *)p;
  case NRT_INT64: return (double)*(const int64_t *)p;
  case NRT_FLOAT16: return tk_f16_value(*(const uint16_t *)p);
  case NRT_BFLOAT16: return tk_bf16_value(*(const uint16_t *)p);
  case NRT_FLOAT32: return *(const float *)p;
  default: return *(const double *)p;
  }
}

static tk_value val(double d) { return (tk_value){.is_int = 1, .i = isnan(d) ? 0 : (int64_t)d, .f = d}; }

/* ------------------------------------------------------------------ sort */

/* rows x cols of dtype t, sorted along `dim` (0 or 1), first k kept; the
 * input is the transpose of a contiguous buffer when `transposed`. */
static void check_sort(nrt_dtype t, int64_t rows, int64_t cols, int dim, int desc, int64_t k,
                       int transposed, int with_nan) {
  const int64_t es = tk_size(t), n = rows * cols;
  char *in = tk_alloc((size_t)(n * es));
  int64_t sizes[2] = {rows, cols};
  int64_t st[2] = {transposed ? 1 : cols, transposed ? rows : 1};
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      double v = t == NRT_BOOL ? (double)(tk_rand() % 2)
                 : t == NRT_UINT8 ? (double)(tk_rand() % 7)
                 : (double)((int)(tk_rand() % 13) - 6);
      if (t >= NRT_FLOAT16) {
        v /= 2;
        if (with_nan && tk_rand() % 5 == 0) v = NAN;
        if (v == 0 && tk_rand() % 2) v = -0.0;
      }
      tk_value x = val(v);
      x.is_int = 0;
      x.f = v;
      tk_put(t, in + (r * st[0] + c * st[1]) * es, x);
    }
  int64_t osz[2] = {dim == 0 ? k : rows, dim == 1 ? k : cols};
  char *vals = tk_alloc((size_t)(osz[0] * osz[1] * es));
  int64_t *idx = tk_alloc((size_t)(osz[0] * osz[1] * 8));
  nrt_operand ops[3] = {tk_operand(vals, t, 2, osz, NULL), tk_operand(idx, NRT_INT64, 2, osz, NULL),
                        tk_operand(in, t, 2, sizes, st)};
  nk_sort_params p = {.dim = dim, .descending = desc, .k = k};
  nrt_task task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  const int64_t len = dim == 0 ? rows : cols, slices = dim == 0 ? cols : rows;
  ref_item *ref = malloc((size_t)len * sizeof *ref);
  int ok = 1;
  for (int64_t s = 0; s < slices && ok; s++) {
    for (int64_t e = 0; e < len; e++) {
      int64_t r = dim == 0 ? e : s, c = dim == 0 ? s : e;
      ref[e] = (ref_item){load(t, in + (r * st[0] + c * st[1]) * es), e, desc};
    }
    qsort(ref, (size_t)len, sizeof *ref, ref_cmp);
    for (int64_t e = 0; e < k && ok; e++) {
      int64_t r = dim == 0 ? e : s, c = dim == 0 ? s : e;
      int64_t at = r * osz[1] + c;
      double got = load(t, vals + at * es);
      int same_v = (isnan(got) && isnan(ref[e].v)) || got == ref[e].v;
      /* -0.0 and 0.0 tie: the value is the stored element's own bits */
      int64_t src = ref[e].i;
      int64_t sr = dim == 0 ? src : s, sc = dim == 0 ? s : src;
      int same_bits = !memcmp(vals + at * es, in + (sr * st[0] + sc * st[1]) * es, (size_t)es);
      ok = same_v && same_bits && idx[at] == ref[e].i;
      if (!ok)
        fprintf(stderr, "  sort dtype %s slice %lld pos %lld: got %g@%lld, want %g@%lld\n",
                tk_dtype_names[t], (long long)s, (long long)e, got, (long long)idx[at], ref[e].v,
                (long long)ref[e].i);
    }
  }
  CHECK(ok);
  free(ref);
  tk_free(in);
  tk_free(vals);
  tk_free(idx);
}

/* unstable: sorted by the reference order, indices a permutation whose
 * elements are the values (tie order is the CPU's std::sort; pytest
 * compares that with torch). pattern: 0 random dups, 1 ascending, 2
 * descending, 3 all equal, 4 organ pipe */
static void check_unstable(int64_t n, int pattern, int desc) {
  int32_t *in = tk_alloc((size_t)n * 4), *v = tk_alloc((size_t)n * 4);
  int64_t *ix = tk_alloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++)
    in[i] = pattern == 0 ? (int32_t)(tk_rand() % 17) : pattern == 1 ? (int32_t)i
            : pattern == 2 ? (int32_t)(n - i) : pattern == 3 ? 5 : (int32_t)(i < n / 2 ? i : n - i);
  nrt_operand ops[3] = {tk_vector(v, NRT_INT32, n), tk_vector(ix, NRT_INT64, n), tk_vector(in, NRT_INT32, n)};
  nk_sort_params p = {.dim = 0, .descending = desc, .k = n, .order = NK_SORT_CPU_SORT};
  nrt_task task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  char *seen = calloc((size_t)n, 1);
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++) {
    ok = ix[i] >= 0 && ix[i] < n && !seen[ix[i]] && v[i] == in[ix[i]];
    if (ok) seen[ix[i]] = 1;
    if (ok && i > 0) ok = desc ? v[i - 1] >= v[i] : v[i - 1] <= v[i];
  }
  if (!ok) fprintf(stderr, "  unstable sort n=%lld pattern=%d desc=%d\n", (long long)n, pattern, desc);
  CHECK(ok);
  free(seen);
  tk_free(in); tk_free(v); tk_free(ix);
}

static void test_heap_stage(void) {
  /* the introsort's depth fallback: a heapsort, sorted and a permutation */
  enum { N = 1000 };
  nk_pair a[N];
  int64_t sum = 0;
  for (int i = 0; i < N; i++) a[i] = (nk_pair){tk_rand() % 50, i};
  nk_heap_sort(a, N);
  int ok = 1;
  for (int i = 0; i < N; i++) {
    sum += a[i].index;
    if (i) ok &= a[i - 1].key <= a[i].key;
  }
  CHECK(ok && sum == (int64_t)N * (N - 1) / 2);
}

/* selections: kth value (CPU quickselect) and median, values of size 1 */
static void test_select(void) {
  double x[9] = {4, 1, 7, 1, 9, 3, 1, 8, 2}; /* sorted: 1 1 1 2 3 4 7 8 9 */
  double *in = tk_alloc(sizeof x), *v = tk_alloc(8);
  int64_t *ix = tk_alloc(8), one = 1;
  memcpy(in, x, sizeof x);
  nrt_operand ops[3] = {tk_operand(v, NRT_FLOAT64, 1, &one, NULL), tk_operand(ix, NRT_INT64, 1, &one, NULL),
                        tk_vector(in, NRT_FLOAT64, 9)};
  int ok = 1;
  const double want[9] = {1, 1, 1, 2, 3, 4, 7, 8, 9};
  for (int k = 1; k <= 9; k++) {
    nk_sort_params p = {.dim = 0, .k = k, .order = NK_SORT_CPU_KTH};
    nrt_task task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
    CHECK_OK(tk_run(&task));
    ok &= *v == want[k - 1] && x[*ix] == *v;
  }
  CHECK(ok);
  nk_sort_params pm = {.dim = 0, .k = 1, .order = NK_SORT_MEDIAN};
  nrt_task task = tk_task(NK_KERNEL_SORT, 3, ops, &pm, sizeof pm);
  CHECK_OK(tk_run(&task));
  CHECK(*v == 3 && *ix == 5);
  in[2] = NAN; in[6] = NAN; /* the first NaN wins */
  CHECK_OK(tk_run(&task));
  CHECK(isnan(*v) && *ix == 2);
  in[2] = 7; in[6] = 1;
  nk_sort_params pmode = {.dim = 0, .k = 1, .order = NK_SORT_CPU_MODE};
  task = tk_task(NK_KERNEL_SORT, 3, ops, &pmode, sizeof pmode);
  CHECK_OK(tk_run(&task));
  CHECK(*v == 1 && (*ix == 1 || *ix == 3 || *ix == 6)); /* the index: pytest vs the CPU */
  in[0] = 9; in[5] = 9; /* 1 and 9 three times each: the smaller wins */
  CHECK_OK(tk_run(&task));
  CHECK(*v == 1);
  nk_sort_params bad = {.dim = 0, .k = 0, .order = NK_SORT_CPU_KTH};
  task = tk_task(NK_KERNEL_SORT, 3, ops, &bad, sizeof bad);
  CHECK(tk_fails_with(&task, "k 0 out of range"));
  tk_free(in); tk_free(v); tk_free(ix);
}

static void test_sort(void) {
  test_heap_stage();
  test_select();
  const int64_t lens[] = {1, 2, 15, 16, 17, 100, 4097};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (int pattern = 0; pattern < 5; pattern++)
      for (int desc = 0; desc < 2; desc++) check_unstable(lens[l], pattern, desc);
  for (int t = 0; t < NRT_DTYPE_COUNT; t++) {
    check_sort((nrt_dtype)t, 7, 33, 1, 0, 33, 0, 1);
    check_sort((nrt_dtype)t, 7, 33, 1, 1, 33, 0, 1);
    check_sort((nrt_dtype)t, 40, 5, 0, 0, 40, 1, 1);  /* strided slices */
    check_sort((nrt_dtype)t, 40, 5, 0, 1, 3, 0, 1);   /* topk, largest */
    check_sort((nrt_dtype)t, 9, 50, 1, 0, 4, 1, 0);   /* topk, smallest */
  }
  /* many slices (split over the pool) and one long slice (merge passes) */
  check_sort(NRT_FLOAT32, 3000, 20, 1, 0, 20, 0, 1);
  check_sort(NRT_INT64, 2, 5000, 1, 1, 5000, 0, 0);
  check_sort(NRT_FLOAT64, 4099, 2, 0, 0, 4099, 1, 1);

  /* 1-d known answer: NaN last (first descending), equal keys keep order */
  float x[8] = {3, NAN, -1, 0.0f, -0.0f, 3, -INFINITY, 1};
  float *in = tk_alloc(sizeof x), *v = tk_alloc(sizeof x);
  int64_t *ix = tk_alloc(8 * 8);
  memcpy(in, x, sizeof x);
  nrt_operand ops[3] = {tk_vector(v, NRT_FLOAT32, 8), tk_vector(ix, NRT_INT64, 8),
                        tk_vector(in, NRT_FLOAT32, 8)};
  nk_sort_params p = {.dim = 0, .descending = 0, .k = 8};
  nrt_task task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  const int64_t asc[8] = {6, 2, 3, 4, 7, 0, 5, 1};
  CHECK(!memcmp(ix, asc, sizeof asc));
  CHECK(signbit(v[2]) == 0 && signbit(v[3]) != 0); /* 0.0 then -0.0, as given */
  p.descending = 1;
  task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  const int64_t desc[8] = {1, 0, 5, 7, 3, 4, 2, 6};
  CHECK(!memcmp(ix, desc, sizeof desc));
  CHECK(isnan(v[0]));

  /* 0-dim input: one slice of one */
  nrt_operand z[3] = {tk_operand(v, NRT_FLOAT32, 0, NULL, NULL),
                      tk_operand(ix, NRT_INT64, 0, NULL, NULL),
                      tk_operand(in, NRT_FLOAT32, 0, NULL, NULL)};
  nk_sort_params pz = {.dim = 0, .k = 1};
  ix[0] = 99;
  task = tk_task(NK_KERNEL_SORT, 3, z, &pz, sizeof pz);
  CHECK_OK(tk_run(&task));
  CHECK(ix[0] == 0 && v[0] == 3);

  /* empty slices launch nothing; validation */
  int64_t e_sz[2] = {0, 8};
  nrt_operand e[3] = {tk_operand(v, NRT_FLOAT32, 2, e_sz, NULL), tk_operand(ix, NRT_INT64, 2, e_sz, NULL),
                      tk_operand(in, NRT_FLOAT32, 2, e_sz, NULL)};
  nk_sort_params pe = {.dim = 1, .k = 8};
  task = tk_task(NK_KERNEL_SORT, 3, e, &pe, sizeof pe);
  CHECK_OK(tk_run(&task));
  p.k = 9;
  task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "k 9 out of range"));
  p.k = 8;
  p.dim = 1;
  task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "dim 1 out of range"));
  p.dim = 0;
  ops[1].dtype = NRT_INT32;
  task = tk_task(NK_KERNEL_SORT, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "indices int64"));
  tk_free(in);
  tk_free(v);
  tk_free(ix);
}

/* ---------------------------------------------------------- searchsorted */

static int64_t ref_search(const double *b, const int64_t *sorter, int64_t m, double v, int right) {
  int64_t pos = 0; /* count of elements ordered before v (ATen's predicates) */
  for (int64_t i = 0; i < m; i++) {
    double x = b[sorter ? sorter[i] : i];
    int before = right ? !(x > v) : !(x >= v);
    if (!before) break;
    pos++;
  }
  return pos;
}

static void test_searchsorted(void) {
  double bnd[6] = {-1, 0, 0, 2.5, 7, 9}; /* NaN values; NaN boundaries: pytest vs the CPU */
  double vals[9] = {-2, -1, 0, 0.5, 2.5, 7, 8, NAN, -0.0};
  double *b = tk_alloc(sizeof bnd), *x = tk_alloc(sizeof vals);
  memcpy(b, bnd, sizeof bnd);
  memcpy(x, vals, sizeof vals);
  int64_t *out = tk_alloc(9 * 8);
  for (int right = 0; right < 2; right++) {
    nrt_operand ops[3] = {tk_vector(out, NRT_INT64, 9), tk_vector(x, NRT_FLOAT64, 9),
                          tk_vector(b, NRT_FLOAT64, 6)};
    nk_searchsorted_params p = {.right = right};
    nrt_task task = tk_task(NK_KERNEL_SEARCHSORTED, 3, ops, &p, sizeof p);
    CHECK_OK(tk_run(&task));
    int ok = 1;
    for (int i = 0; i < 9; i++) {
      if (out[i] != ref_search(bnd, NULL, 6, vals[i], right)) fprintf(stderr, "  ss right=%d v=%g got %lld want %lld\n", right, vals[i], (long long)out[i], (long long)ref_search(bnd, NULL, 6, vals[i], right));
      ok &= out[i] == ref_search(bnd, NULL, 6, vals[i], right);
    }
    CHECK(ok);
  }
  /* sorter: boundaries given unsorted, int32 out, strided values */
  int32_t ib[5] = {9, 1, 5, 3, 7};
  int64_t srt[5] = {1, 3, 2, 4, 0};
  double bd[5] = {9, 1, 5, 3, 7};
  int32_t *bi = tk_alloc(sizeof ib), *xi = tk_alloc(12 * 4), *o32 = tk_alloc(6 * 4);
  int64_t *sp = tk_alloc(sizeof srt);
  memcpy(bi, ib, sizeof ib);
  memcpy(sp, srt, sizeof srt);
  for (int i = 0; i < 12; i++) xi[i] = i - 1;
  int64_t six = 6, two = 2;
  nrt_operand ops[4] = {tk_vector(o32, NRT_INT32, 6), tk_operand(xi, NRT_INT32, 1, &six, &two),
                        tk_vector(bi, NRT_INT32, 5), tk_vector(sp, NRT_INT64, 5)};
  nk_searchsorted_params p = {.right = 1};
  nrt_task task = tk_task(NK_KERNEL_SEARCHSORTED, 4, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= o32[i] == ref_search(bd, srt, 5, xi[2 * i], 1);
  CHECK(ok);
  sp[2] = 5;
  CHECK(tk_fails_with(&task, "sorter index out of range"));

  /* per-row boundaries (2 x 4) and values (2 x 3), float16 */
  double rb[2][4] = {{0, 1, 2, 3}, {-4, -2, 0, 2}};
  double rv[2][3] = {{1.5, -1, 3}, {-2, 5, -3}};
  uint16_t *hb = tk_alloc(8 * 2), *hv = tk_alloc(6 * 2);
  for (int r = 0; r < 2; r++) {
    for (int c = 0; c < 4; c++) hb[r * 4 + c] = tk_f16_bits(rb[r][c]);
    for (int c = 0; c < 3; c++) hv[r * 3 + c] = tk_f16_bits(rv[r][c]);
  }
  int64_t bsz[2] = {2, 4}, vsz[2] = {2, 3};
  nrt_operand rops[3] = {tk_operand(out, NRT_INT64, 2, vsz, NULL), tk_operand(hv, NRT_FLOAT16, 2, vsz, NULL),
                         tk_operand(hb, NRT_FLOAT16, 2, bsz, NULL)};
  p.right = 0;
  task = tk_task(NK_KERNEL_SEARCHSORTED, 3, rops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  ok = 1;
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) ok &= out[r * 3 + c] == ref_search(rb[r], NULL, 4, rv[r][c], 0);
  CHECK(ok);
  rops[2].dtype = NRT_BFLOAT16;
  task = tk_task(NK_KERNEL_SEARCHSORTED, 3, rops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "share a dtype"));
  tk_free(b); tk_free(x); tk_free(out); tk_free(bi); tk_free(xi); tk_free(o32); tk_free(sp);
  tk_free(hb); tk_free(hv);
}

/* ---------------------------------------------------------------- unique */

static void test_unique(void) {
  /* sorted run order with a permutation; NaNs never join */
  float s[7] = {-1, -1, 0, 2, 2, NAN, NAN};
  int64_t perm[7] = {3, 0, 6, 1, 5, 2, 4};
  float *in = tk_alloc(sizeof s), *u = tk_alloc(sizeof s);
  int64_t *pp = tk_alloc(sizeof perm), *inv = tk_alloc(7 * 8), *cnt = tk_alloc(7 * 8), *num = tk_alloc(8);
  memcpy(in, s, sizeof s);
  memcpy(pp, perm, sizeof perm);
  nrt_operand ops[6] = {tk_vector(u, NRT_FLOAT32, 7), tk_vector(inv, NRT_INT64, 7),
                        tk_vector(cnt, NRT_INT64, 7), tk_operand(num, NRT_INT64, 0, NULL, NULL),
                        tk_vector(in, NRT_FLOAT32, 7), tk_vector(pp, NRT_INT64, 7)};
  nrt_task task = tk_task(NK_KERNEL_UNIQUE, 6, ops, NULL, 0);
  CHECK_OK(tk_run(&task));
  CHECK(*num == 5);
  CHECK(u[0] == -1 && u[1] == 0 && u[2] == 2 && isnan(u[3]) && isnan(u[4]));
  CHECK(cnt[0] == 2 && cnt[1] == 1 && cnt[2] == 2 && cnt[3] == 1 && cnt[4] == 1);
  int64_t want_inv[7]; /* inverse[perm[i]] = run of i */
  const int64_t run_of[7] = {0, 0, 1, 2, 2, 3, 4};
  for (int i = 0; i < 7; i++) want_inv[perm[i]] = run_of[i];
  CHECK(!memcmp(inv, want_inv, sizeof want_inv));
  /* consecutive: no permutation, int8 */
  int8_t c[6] = {1, 1, -3, 1, 1, 1};
  int8_t *ci = tk_alloc(6), *cu = tk_alloc(6);
  memcpy(ci, c, 6);
  nrt_operand cops[5] = {tk_vector(cu, NRT_INT8, 6), tk_vector(inv, NRT_INT64, 6),
                         tk_vector(cnt, NRT_INT64, 6), tk_operand(num, NRT_INT64, 0, NULL, NULL),
                         tk_vector(ci, NRT_INT8, 6)};
  task = tk_task(NK_KERNEL_UNIQUE, 5, cops, NULL, 0);
  CHECK_OK(tk_run(&task));
  CHECK(*num == 3 && cu[0] == 1 && cu[1] == -3 && cu[2] == 1);
  CHECK(cnt[0] == 2 && cnt[1] == 1 && cnt[2] == 3);
  CHECK(inv[0] == 0 && inv[1] == 0 && inv[2] == 1 && inv[3] == 2 && inv[5] == 2);
  /* empty input: zero runs */
  for (int k = 0; k < 5; k++) if (k != 3) cops[k].sizes[0] = 0;
  *num = 7;
  task = tk_task(NK_KERNEL_UNIQUE, 5, cops, NULL, 0);
  CHECK_OK(tk_run(&task));
  CHECK(*num == 0);
  /* a bad permutation index is an error */
  pp[4] = 7;
  task = tk_task(NK_KERNEL_UNIQUE, 6, ops, NULL, 0);
  CHECK(tk_fails_with(&task, "permutation index 7 out of range"));
  ops[2].sizes[0] = 6;
  task = tk_task(NK_KERNEL_UNIQUE, 6, ops, NULL, 0);
  CHECK(tk_fails_with(&task, "one length"));
  tk_free(in); tk_free(u); tk_free(pp); tk_free(inv); tk_free(cnt); tk_free(num); tk_free(ci);
  tk_free(cu);
}

static void test_unique_rows(void) {
  /* 5 rows x 3, read transposed from a 3 x 5 buffer; rows 0 and 3 equal */
  const int32_t rows[5][3] = {{1, 2, 3}, {0, 9, 9}, {1, 2, 2}, {1, 2, 3}, {-4, 0, 0}};
  int32_t *in = tk_alloc(15 * 4), *u = tk_alloc(15 * 4);
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 3; c++) in[c * 5 + r] = rows[r][c];
  int64_t *inv = tk_alloc(5 * 8), *cnt = tk_alloc(5 * 8), *num = tk_alloc(8);
  int64_t sz[2] = {5, 3}, st[2] = {1, 5};
  nrt_operand ops[5] = {tk_operand(u, NRT_INT32, 2, sz, NULL), tk_vector(inv, NRT_INT64, 5),
                        tk_vector(cnt, NRT_INT64, 5), tk_operand(num, NRT_INT64, 0, NULL, NULL),
                        tk_operand(in, NRT_INT32, 2, sz, st)};
  nk_unique_rows_params p = {.sort = 1};
  nrt_task task = tk_task(NK_KERNEL_UNIQUE_ROWS, 5, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  const int32_t want[4][3] = {{-4, 0, 0}, {0, 9, 9}, {1, 2, 2}, {1, 2, 3}};
  CHECK(*num == 4 && !memcmp(u, want, sizeof want));
  CHECK(cnt[0] == 1 && cnt[1] == 1 && cnt[2] == 1 && cnt[3] == 2);
  CHECK(inv[0] == 3 && inv[1] == 1 && inv[2] == 2 && inv[3] == 3 && inv[4] == 0);
  p.sort = 0; /* consecutive: rows 0 and 3 are not neighbours */
  task = tk_task(NK_KERNEL_UNIQUE_ROWS, 5, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  CHECK(*num == 5 && inv[3] == 3 && u[9] == 1 && u[10] == 2 && u[11] == 3);
  ops[1].sizes[0] = 4;
  task = tk_task(NK_KERNEL_UNIQUE_ROWS, 5, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "int64 inverse"));
  tk_free(in); tk_free(u); tk_free(inv); tk_free(cnt); tk_free(num);
}

/* -------------------------------------------------------------- sampling */

static void test_bernoulli(void) {
  enum { N = 20000 };
  float *p = tk_alloc(N * 4);
  uint8_t *a = tk_alloc(N), *b = tk_alloc(N);
  for (int i = 0; i < N; i++) p[i] = i % 4 == 0 ? 0.0f : i % 4 == 1 ? 1.0f : 0.3f;
  nrt_operand ops[2] = {tk_vector(a, NRT_BOOL, N), tk_vector(p, NRT_FLOAT32, N)};
  nk_philox_params prm = {.seed = 42, .offset = 8};
  nrt_task task = tk_task(NK_KERNEL_BERNOULLI_TENSOR, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int zero_ok = 1, one_ok = 1, ones = 0;
  for (int i = 0; i < N; i++) {
    if (i % 4 == 0) zero_ok &= a[i] == 0;
    if (i % 4 == 1) one_ok &= a[i] == 1;
    if (i % 4 >= 2) ones += a[i];
  }
  CHECK(zero_ok && one_ok);
  CHECK(abs(ones - (int)(0.3 * N / 2)) < N / 50);
  ops[0] = tk_vector(b, NRT_BOOL, N); /* same seed and offset: same draws */
  task = tk_task(NK_KERNEL_BERNOULLI_TENSOR, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(!memcmp(a, b, N));
  /* broadcast p (stride 0) into int64 out */
  int64_t *o = tk_alloc(N * 8), n = N, zs = 0;
  nrt_operand bops[2] = {tk_vector(o, NRT_INT64, N), tk_operand(p + 1, NRT_FLOAT32, 1, &n, &zs)};
  task = tk_task(NK_KERNEL_BERNOULLI_TENSOR, 2, bops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int all_one = 1;
  for (int i = 0; i < N; i++) all_one &= o[i] == 1;
  CHECK(all_one);
  p[7] = 1.5f;
  task = tk_task(NK_KERNEL_BERNOULLI_TENSOR, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "p_in >= 0 && p_in <= 1"));
  tk_free(p); tk_free(a); tk_free(b); tk_free(o);
}

static void test_multinomial(void) {
  enum { S = 20000 };
  double probs[2][4] = {{1, 0, 3, 0}, {0, 0, 0, 5}};
  double *pr = tk_alloc(sizeof probs);
  memcpy(pr, probs, sizeof probs);
  int64_t *out = tk_alloc(2 * S * 8), *again = tk_alloc(2 * S * 8);
  int64_t psz[2] = {2, 4}, osz[2] = {2, S};
  nrt_operand ops[2] = {tk_operand(out, NRT_INT64, 2, osz, NULL), tk_operand(pr, NRT_FLOAT64, 2, psz, NULL)};
  nk_multinomial_params p = {.seed = 7, .offset = 0, .replacement = 1};
  nrt_task task = tk_task(NK_KERNEL_MULTINOMIAL, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int n2 = 0, valid = 1;
  for (int s = 0; s < S; s++) {
    valid &= (out[s] == 0 || out[s] == 2) && out[S + s] == 3;
    n2 += out[s] == 2;
  }
  CHECK(valid);
  CHECK(abs(n2 - 3 * S / 4) < S / 50);
  ops[0].data = again;
  task = tk_task(NK_KERNEL_MULTINOMIAL, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  CHECK(!memcmp(out, again, 2 * S * 8));
  /* without replacement: distinct categories, the positive ones first */
  osz[1] = 4;
  ops[0] = tk_operand(out, NRT_INT64, 2, osz, NULL);
  p.replacement = 0;
  int first_big = 0;
  for (int trial = 0; trial < 400; trial++) {
    p.offset = (uint64_t)trial * 32;
    task = tk_task(NK_KERNEL_MULTINOMIAL, 2, ops, &p, sizeof p);
    CHECK_OK(tk_run(&task));
    int seen = 0, ok = 1;
    for (int s = 0; s < 4; s++) seen |= 1 << out[s];
    ok &= seen == 15 && (out[0] == 0 || out[0] == 2) && (out[1] == 0 || out[1] == 2);
    ok &= out[4] == 3;
    first_big += out[0] == 2;
    if (!ok) { CHECK(ok); break; }
  }
  CHECK(first_big > 260 && first_big < 340); /* P(first = 2) = 3/4 */
  osz[1] = 5;
  ops[0] = tk_operand(out, NRT_INT64, 2, osz, NULL);
  task = tk_task(NK_KERNEL_MULTINOMIAL, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "n_sample <= categories"));
  osz[1] = 2;
  ops[0] = tk_operand(out, NRT_INT64, 2, osz, NULL);
  pr[5] = -1;
  task = tk_task(NK_KERNEL_MULTINOMIAL, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "element < 0"));
  pr[5] = 0;
  pr[7] = 0;
  task = tk_task(NK_KERNEL_MULTINOMIAL, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "sum of probabilities"));
  tk_free(pr); tk_free(out); tk_free(again);
}

static void tests(void) {
  test_sort();
  test_searchsorted();
  test_unique();
  test_unique_rows();
  test_bernoulli();
  test_multinomial();
}

int main(void) { return tk_main(tests, __FILE__); }
