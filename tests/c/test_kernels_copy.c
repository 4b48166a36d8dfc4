/* The copy kernel: all 10x10 dtype pairs against a scalar reference
 * written here from the conversion rules (see dtype_convert.h), through
 * contiguous, transposed, broadcast (stride 0) and offset/strided views;
 * 0-size and 0-dim operands; a tensor large enough for the parallel path;
 * and the validation failures, reported through the stream. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

/* The source values of dtype t (fills out[], returns the count). */
static int source_values(nrt_dtype t, tk_value *out) {
  static const int64_t ints[] = {0, 1, -1, 2, 7, -7, 100, 127, -128, 128, 255, 256, -129, 300, -300,
                                 1000, 32767, -32768, 32768, 65535, 65536, 70000, 16777217,
                                 2147483647, -2147483647 - 1, 2147483648ll, 5000000000ll,
                                 9007199254740993ll, INT64_MAX, INT64_MIN, -5000000001ll};
  static const double floats[] = {
      0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0 + 0x1p-8, 1.0 + 0x1p-11, 1.0 + 0x3p-11, 65504, 65519,
      65520, 1e5, -1e5, 3.4e38, 1e-8, 6e-8, 0x1p-24, 0x1p-25, 0x3p-26, 1e-40, 1e300, NAN, -NAN,
      INFINITY, -INFINITY, 127.9, -128.9, 255.5, 300.7, -1.9, 0.99, 0x1p31, -0x1p31, 3e9, 0x1p63,
      -0x1p63, 0x1p64, 1e20, -1e20, 123456.789, 70000.5, -2147483648.5};
  int n = 0;
  if (t == NRT_BOOL) {
    out[n++] = (tk_value){1, 0, 0};
    out[n++] = (tk_value){1, 1, 0};
  } else if (tk_is_integral(t)) {
    int bits = 8 * (int)tk_size(t);
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
      int64_t v = ints[k];
      int fits = bits == 64 || (t == NRT_UINT8 ? v >= 0 && v < 256
                                               : v >= -(1ll << (bits - 1)) && v < (1ll << (bits - 1)));
      if (fits) out[n++] = (tk_value){1, v, 0};
    }
  } else {
    for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++)
      out[n++] = tk_stored(t, (tk_value){0, 0, floats[k]});
  }
  return n;
}

/* Copies `in` (sizes/strides in elements) into a contiguous output and
 * checks each element against the reference of the input element it reads. */
static int check_layout(nrt_dtype from, nrt_dtype to, const tk_value *vals, int nvals, int ndim,
                        const int64_t *sizes, const int64_t *in_strides, int64_t in_offset) {
  int64_t numel = 1, span = 1;
  for (int d = 0; d < ndim; d++) {
    numel *= sizes[d];
    span += (sizes[d] - 1) * in_strides[d];
  }
  char *in = tk_alloc((size_t)((span + in_offset) * tk_size(from)));
  char *out = tk_alloc((size_t)(numel * tk_size(to)));
  /* input memory element j holds vals[j % nvals] */
  for (int64_t j = 0; j < span + in_offset; j++) tk_put(from, in + j * tk_size(from), vals[j % nvals]);
  nrt_operand ops[2] = {tk_operand(out, to, ndim, sizes, NULL),
                        tk_operand(in + in_offset * tk_size(from), from, ndim, sizes, in_strides)};
  nrt_task t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  int bad = tk_run(&t) != NRT_SUCCESS;
  for (int64_t lin = 0; lin < numel && !bad; lin++) {
    int64_t rest = lin, off = in_offset;
    for (int d = ndim - 1; d >= 0; d--) {
      off += (rest % sizes[d]) * in_strides[d];
      rest /= sizes[d];
    }
    tk_value v = vals[off % nvals];
    uint64_t want = tk_expected(v, to), got = tk_raw(to, out + lin * tk_size(to));
    if (want != got) {
      fprintf(stderr, "  %s -> %s: element %lld (value %lld / %g) gave 0x%llx, want 0x%llx\n",
              tk_dtype_names[from], tk_dtype_names[to], (long long)lin, (long long)v.i, v.f,
              (unsigned long long)got, (unsigned long long)want);
      bad = 1;
    }
  }
  tk_free(in);
  tk_free(out);
  return !bad;
}

static void test_all_pairs(void) {
  tk_value vals[64];
  for (nrt_dtype from = 0; from < NRT_DTYPE_COUNT; from++) {
    int n = source_values(from, vals);
    for (nrt_dtype to = 0; to < NRT_DTYPE_COUNT; to++) {
      int64_t len = 3 * n + 5; /* long enough for the vector loops and their tails */
      int64_t s1[1] = {len}, st1[1] = {1};
      CHECK(check_layout(from, to, vals, n, 1, s1, st1, 0));
      int64_t s2[2] = {n, 3}, tr[2] = {1, n}; /* transposed */
      CHECK(check_layout(from, to, vals, n, 2, s2, tr, 0));
      int64_t s3[2] = {4, len}, bc[2] = {0, 1}; /* broadcast rows */
      CHECK(check_layout(from, to, vals, n, 2, s3, bc, 0));
      int64_t s4[3] = {2, 3, n}, sv[3] = {7 * n, 2 * n, 2}; /* strided view at an offset */
      CHECK(check_layout(from, to, vals, n, 3, s4, sv, 5));
    }
  }
}

static void test_edge_shapes(void) {
  /* 0-size: nothing written, a null pointer allowed */
  int32_t *out = tk_alloc(16);
  for (int k = 0; k < 4; k++) out[k] = 77;
  int64_t sizes[2] = {0, 4};
  nrt_operand ops[2] = {tk_operand(out, NRT_INT32, 2, sizes, NULL), tk_operand(NULL, NRT_FLOAT32, 2, sizes, NULL)};
  nrt_task t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK_OK(tk_run(&t));
  CHECK(out[0] == 77 && out[3] == 77);
  /* 0-dim: one element */
  double *d = tk_alloc(8);
  *d = -3.75;
  ops[0] = tk_operand(out, NRT_INT32, 0, NULL, NULL);
  ops[1] = tk_operand(d, NRT_FLOAT64, 0, NULL, NULL);
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK_OK(tk_run(&t));
  CHECK(out[0] == -3 && out[1] == 77);
  tk_free(out);
  tk_free(d);
}

/* Big enough to split across the compute pool, in layouts that make the
 * chunks start mid-row. */
static void test_parallel(void) {
  tk_value vals[64];
  int n = source_values(NRT_FLOAT32, vals);
  int64_t s1[1] = {300001}, st1[1] = {1};
  CHECK(check_layout(NRT_FLOAT32, NRT_FLOAT16, vals, n, 1, s1, st1, 0));
  CHECK(check_layout(NRT_FLOAT32, NRT_FLOAT32, vals, n, 1, s1, st1, 1));
  int64_t s2[2] = {617, 519}, tr[2] = {1, 617};
  CHECK(check_layout(NRT_FLOAT32, NRT_BFLOAT16, vals, n, 2, s2, tr, 0));
  n = source_values(NRT_INT32, vals);
  int64_t s3[3] = {3, 257, 263}, st3[3] = {263, 3 * 263, 1};
  CHECK(check_layout(NRT_INT32, NRT_FLOAT64, vals, n, 3, s3, st3, 0));
}

static void test_validation(void) {
  float *buf = tk_alloc(64 * sizeof(float));
  int64_t n = 8;
  nrt_operand good[2] = {tk_operand(buf, NRT_FLOAT32, 1, &n, NULL), tk_operand(buf + 16, NRT_INT32, 1, &n, NULL)};
  nrt_operand ops[2];
  nrt_task t;

  t = tk_task(NK_KERNEL_COPY, 1, good, NULL, 0);
  CHECK(tk_fails_with(&t, "expected 2 operands, got 1"));

  memcpy(ops, good, sizeof ops);
  ops[1].dtype = 42;
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "operand 1 has invalid dtype 42"));

  memcpy(ops, good, sizeof ops);
  ops[0].ndim = NRT_MAX_DIMS + 1;
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "operand 0 has ndim 17"));

  memcpy(ops, good, sizeof ops);
  ops[0].sizes[0] = ops[1].sizes[0] = -1;
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "negative size"));

  memcpy(ops, good, sizeof ops);
  ops[1].sizes[0] = 9;
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "shape differs"));

  memcpy(ops, good, sizeof ops);
  ops[1].data = NULL;
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "null data pointer"));

  memcpy(ops, good, sizeof ops);
  ops[1].strides[0] = INT64_MAX / 4;
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "overflow"));

  int64_t huge[3] = {1ll << 40, 1ll << 40, 0};
  ops[0] = tk_operand(buf, NRT_FLOAT32, 3, huge, NULL);
  huge[2] = 1;
  ops[0].sizes[2] = 1;
  ops[1] = ops[0];
  t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK(tk_fails_with(&t, "overflow"));

  /* the stream keeps working after the failures */
  for (int k = 0; k < 8; k++) ((int32_t *)(buf + 16))[k] = k - 3;
  t = tk_task(NK_KERNEL_COPY, 2, good, NULL, 0);
  CHECK_OK(tk_run(&t));
  CHECK(buf[0] == -3.0f && buf[7] == 4.0f);
  tk_free(buf);
}

static void tests(void) {
  test_all_pairs();
  test_edge_shapes();
  test_parallel();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
