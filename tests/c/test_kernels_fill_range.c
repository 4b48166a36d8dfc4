/* fill, arange and linspace: every dtype, strided and 0-dim outputs, large
 * outputs (parallel path), against the formulas written out here, plus the
 * validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"
#include "elementwise/fill_rows.h"

/* the bytes a kernel must store for a double / an int64 in dtype t: the
 * shared reference conversion of test_kernels_util.h */
static uint64_t float_raw(nrt_dtype t, double v) { return tk_expected((tk_value){0, 0, v}, t); }
static uint64_t int_raw(nrt_dtype t, int64_t v) { return tk_expected((tk_value){1, v, 0}, t); }

/* v as a value of integral dtype t (two's complement wrap, as ATen's
 * Scalar::to<uint8_t>(-1) gives 255) */
static int64_t wrap_to(nrt_dtype t, int64_t v) {
  int bits = 8 * (int)tk_size(t);
  if (bits == 64) return v;
  uint64_t u = (uint64_t)v & ((1ull << bits) - 1);
  if (t != NRT_UINT8 && u >= (1ull << (bits - 1))) return (int64_t)(u - (1ull << bits));
  return (int64_t)u;
}

static int is_floating(nrt_dtype t) { return t >= NRT_FLOAT16; }

/* ---------------------------------------------------------------- fill */

/* fills the view (sizes, strides) that starts `offset` elements into a
 * buffer, then checks every element of the buffer: the view's hold the
 * value, the others their sentinel */
static void check_fill_at(nrt_dtype t, nk_scalar value, int ndim, const int64_t *sizes,
                          const int64_t *strides, int64_t offset) {
  int64_t span = 1 + offset, numel = 1, es = tk_size(t);
  for (int d = 0; d < ndim; d++) {
    span += (sizes[d] - 1) * strides[d];
    numel *= sizes[d];
  }
  span += 1; /* a sentinel after the view */
  unsigned char *buf = tk_alloc((size_t)(span * es));
  memset(buf, 0xA5, (size_t)(span * es));
  nrt_operand op = tk_operand(buf + offset * es, t, ndim, sizes, strides);
  nk_fill_params prm = {value};
  nrt_task task = tk_task(NK_KERNEL_FILL, 1, &op, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  uint64_t want = is_floating(t) ? float_raw(t, value.f) : int_raw(t, value.i);
  uint64_t sentinel = 0;
  memset(&sentinel, 0xA5, (size_t)es);
  /* mark which elements the view covers, then check every element of the buffer */
  char *covered = calloc((size_t)span, 1);
  for (int64_t lin = 0; lin < numel; lin++) {
    int64_t rest = lin, off = offset;
    for (int d = ndim - 1; d >= 0; d--) {
      off += (rest % sizes[d]) * strides[d];
      rest /= sizes[d];
    }
    covered[off] = 1;
  }
  int bad = 0;
  for (int64_t j = 0; j < span; j++)
    bad += tk_raw(t, buf + j * es) != (covered[j] ? want : sentinel);
  if (bad) fprintf(stderr, "  fill %s: %d wrong elements\n", tk_dtype_names[t], bad);
  CHECK(bad == 0);
  free(covered);
  tk_free(buf);
}

static void check_fill(nrt_dtype t, nk_scalar value, int ndim, const int64_t *sizes, const int64_t *strides) {
  check_fill_at(t, value, ndim, sizes, strides, 0);
}

static void test_fill(void) {
  const nk_scalar values[] = {{1.5, 1}, {-0.0, 0}, {NAN, -1}, {1e10, 300}, {65519.0, -129},
                              {1.0 + 0x1p-8, 5}, {-3.4e38, INT64_MIN}, {0x1p-25 * 3, 255}};
  for (nrt_dtype t = 0; t < NRT_DTYPE_COUNT; t++)
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
      int64_t n1[1] = {1000}, c1[1] = {1};
      check_fill(t, values[v], 1, n1, c1);
      int64_t n2[2] = {7, 9}, s2[2] = {40, 3};
      check_fill(t, values[v], 2, n2, s2);
      check_fill(t, values[v], 0, NULL, NULL);
    }
  int64_t big[2] = {300, 700}, bs[2] = {1401, 2}; /* parallel, strided */
  check_fill(NRT_FLOAT32, (nk_scalar){2.25, 2}, 2, big, bs);
  check_fill(NRT_INT16, (nk_scalar){0, -2}, 2, big, bs);
}

/* Dense rows start anywhere (a view's offset): every element size, each
 * start within a 32-byte vector, lengths around the vector and unrolled
 * block sizes, through the kernel. */
static void test_fill_dense_offsets(void) {
  const nrt_dtype types[] = {NRT_UINT8, NRT_INT16, NRT_FLOAT32, NRT_FLOAT64};
  const int64_t lengths[] = {0, 1, 3, 7, 8, 31, 32, 33, 64, 127, 128, 129, 1000, 40000, 100003};
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
    for (int64_t off = 0; off < 40 / tk_size(types[ti]); off += 1 + (off > 8))
      for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t sizes[1] = {lengths[li]}, strides[1] = {1};
        check_fill_at(types[ti], (nk_scalar){-1.75, 0x5A}, 1, sizes, strides, off);
      }
}

/* nk_fill_row_avx2 itself, where the CPU has AVX2: every pattern size,
 * every start in a 32-byte vector, rows up to 300 bytes, and rows at the
 * non-temporal bound (the kernel reaches it only for outputs of 8 rows per
 * thread of that size). */
static void check_fill_row(unsigned char *buf, int64_t buf_bytes, int64_t start, int64_t bytes,
                           size_t size) {
  static const unsigned char pattern[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  memset(buf, 0xA5, (size_t)buf_bytes);
  nk_fill_row_avx2((char *)buf + start, bytes, pattern, size);
  int64_t bad = 0;
  for (int64_t j = 0; j < buf_bytes; j++) {
    const bool in = j >= start && j < start + bytes;
    bad += buf[j] != (in ? pattern[(j - start) % (int64_t)size] : 0xA5);
  }
  if (bad)
    fprintf(stderr, "  fill row: size %zu start %lld bytes %lld: %lld wrong\n", size, (long long)start,
            (long long)bytes, (long long)bad);
  CHECK(bad == 0);
}

static void test_fill_row_avx2(void) {
  if (nk_cpu_isa() < NK_ISA_AVX2) return;
  const int64_t small = 400, large = NK_FILL_STREAM_BYTES + 512;
  unsigned char *buf = tk_alloc((size_t)large);
  for (size_t size = 1; size <= 8; size *= 2)
    for (int64_t start = 0; start < 40; start += (int64_t)size) {
      for (int64_t bytes = 0; bytes <= 300; bytes += (int64_t)size)
        check_fill_row(buf, small, start, bytes, size);
      if (start % 8 == 0 || size == 1) /* rows at and above the bound */
        check_fill_row(buf, large, start, NK_FILL_STREAM_BYTES + (int64_t)size * 9, size);
    }
  tk_free(buf);
}

/* -------------------------------------------------------------- arange */

static uint64_t arange_want(nrt_dtype t, nk_scalar start, nk_scalar step, int64_t i) {
  if (t == NRT_FLOAT16 || t == NRT_BFLOAT16) /* float accumulate type */
    return float_raw(t, (float)start.f + (float)step.f * (float)i);
  if (is_floating(t)) return float_raw(t, start.f + step.f * (double)i);
  return int_raw(t, (int64_t)((uint64_t)start.i + (uint64_t)step.i * (uint64_t)i));
}

static void check_arange(nrt_dtype t, nk_scalar start, nk_scalar step, int64_t n, int64_t stride) {
  int64_t es = tk_size(t);
  char *buf = tk_alloc((size_t)(n * stride * es));
  nrt_operand op = tk_operand(buf, t, 1, &n, &stride);
  nk_arange_params prm = {start, step};
  nrt_task task = tk_task(NK_KERNEL_ARANGE, 1, &op, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (tk_raw(t, buf + i * stride * es) != arange_want(t, start, step, i) && bad++ < 3)
      fprintf(stderr, "  arange %s [%lld]\n", tk_dtype_names[t], (long long)i);
  CHECK(bad == 0);
  tk_free(buf);
}

static void test_arange(void) {
  for (nrt_dtype t = NRT_UINT8; t < NRT_DTYPE_COUNT; t++) {
    check_arange(t, (nk_scalar){0, 0}, (nk_scalar){1, 1}, 100, 1);
    check_arange(t, (nk_scalar){-5, -5}, (nk_scalar){3, 3}, 50, 2);
    check_arange(t, (nk_scalar){120, 120}, (nk_scalar){1, 1}, 20, 1); /* int8 wraps */
    check_arange(t, (nk_scalar){0.5, 0}, (nk_scalar){0.1, 0}, 333, 1);
    check_arange(t, (nk_scalar){1e6, INT64_MAX - 5}, (nk_scalar){-0.37, 1}, 40, 3);
  }
  check_arange(NRT_FLOAT32, (nk_scalar){-1, -1}, (nk_scalar){1e-3, 1}, 200001, 1);
  check_arange(NRT_INT64, (nk_scalar){0, 7}, (nk_scalar){0, -3}, 100003, 2);

  int64_t n = 4, sizes[2] = {2, 2};
  char *buf = tk_alloc(64);
  nk_arange_params prm = {{0, 0}, {1, 1}};
  nrt_operand op = tk_operand(buf, NRT_FLOAT32, 2, sizes, NULL);
  nrt_task task = tk_task(NK_KERNEL_ARANGE, 1, &op, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "must be 1-d"));
  op = tk_operand(buf, NRT_BOOL, 1, &n, NULL);
  task = tk_task(NK_KERNEL_ARANGE, 1, &op, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "bool"));
  tk_free(buf);
}

/* ------------------------------------------------------------ linspace */

/* ATen's formula, in the out dtype's arithmetic: float for the float32-or-
 * narrower types, double for float64, double for integers then truncation */
static uint64_t linspace_want(nrt_dtype t, double start, double end, int64_t steps, int64_t i) {
  int64_t half = steps / 2;
  if (steps == 1) i = 0, half = 1;
  if (t == NRT_FLOAT16 || t == NRT_BFLOAT16 || t == NRT_FLOAT32) {
    float s = (float)start, e = (float)end;
    if (t == NRT_FLOAT16) s = (float)tk_f16_value(tk_f16_bits(s)), e = (float)tk_f16_value(tk_f16_bits(e));
    if (t == NRT_BFLOAT16) s = (float)tk_bf16_value(tk_bf16_bits(s)), e = (float)tk_bf16_value(tk_bf16_bits(e));
    float step = steps > 1 ? (e - s) / (float)(steps - 1) : 0;
    return float_raw(t, i < half ? s + step * (float)i : e - step * (float)(steps - i - 1));
  }
  if (t == NRT_FLOAT64) {
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
    return float_raw(t, i < half ? start + step * (double)i : end - step * (double)(steps - i - 1));
  }
  double s = (double)wrap_to(t, (int64_t)trunc(start)), e = (double)wrap_to(t, (int64_t)trunc(end));
  double step = steps > 1 ? (e - s) / (double)(steps - 1) : 0;
  double v = i < half ? s + step * (double)i : e - step * (double)(steps - i - 1);
  return int_raw(t, (int64_t)trunc(v));
}

static void check_linspace(nrt_dtype t, double start, double end, int64_t steps, int64_t stride) {
  int64_t es = tk_size(t);
  char *buf = tk_alloc((size_t)((steps ? steps : 1) * stride * es));
  nrt_operand op = tk_operand(buf, t, 1, &steps, &stride);
  nk_linspace_params prm = {start, end, steps};
  nrt_task task = tk_task(NK_KERNEL_LINSPACE, 1, &op, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t i = 0; i < steps; i++)
    if (tk_raw(t, buf + i * stride * es) != linspace_want(t, start, end, steps, i) && bad++ < 3)
      fprintf(stderr, "  linspace %s(%g, %g, %lld) [%lld]\n", tk_dtype_names[t], start, end,
              (long long)steps, (long long)i);
  CHECK(bad == 0);
  if (steps > 1 && t == NRT_FLOAT64) { /* both ends exact */
    CHECK(((double *)buf)[0] == start);
    CHECK(((double *)buf)[(steps - 1) * stride] == end);
  }
  tk_free(buf);
}

static void test_linspace(void) {
  for (nrt_dtype t = NRT_UINT8; t < NRT_DTYPE_COUNT; t++) {
    check_linspace(t, 0, 1, 5, 1);
    check_linspace(t, -1, 1, 101, 1);
    check_linspace(t, 3, 10, 1, 1);
    check_linspace(t, 3.7, -7.2, 33, 2);
    check_linspace(t, 0, 100, 0, 1);
    check_linspace(t, 0.1, 0.7, 10, 1);
  }
  check_linspace(NRT_FLOAT32, 0, 1, 100001, 1);
  check_linspace(NRT_FLOAT64, -3, 1e6, 250007, 1);
  check_linspace(NRT_INT32, -1000, 1000, 99999, 3);

  int64_t n = 4;
  char *buf = tk_alloc(64);
  nk_linspace_params prm = {0, 1, 5};
  nrt_operand op = tk_operand(buf, NRT_FLOAT32, 1, &n, NULL);
  nrt_task task = tk_task(NK_KERNEL_LINSPACE, 1, &op, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "5 elements"));
  tk_free(buf);
}

static void tests(void) {
  test_fill();
  test_fill_dense_offsets();
  test_fill_row_avx2();
  test_arange();
  test_linspace();
}

int main(void) { return tk_main(tests, __FILE__); }
