/* The movement kernels against independent references: NK_KERNEL_TRIANGLE
 * (lower/upper, every diagonal, batches, strided input, in place, every
 * dtype) and NK_KERNEL_PAD (reflect/replicate over 1..3 dims, batches,
 * strided input, negative pads), plus COPY with negative strides (flip)
 * and the validation errors. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

static void fill_pattern(nrt_dtype t, char *p, int64_t n) {
  const int64_t es = tk_size(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = t == NRT_BOOL ? 1 : (i % 100) + 1; /* never zero */
    tk_value x = {.is_int = 1, .i = v, .f = (double)v};
    tk_put(t, p + i * es, x);
  }
}

/* -------------------------------------------------------------- triangle */

static void check_triangle(nrt_dtype t, int upper, int64_t diag, int strided, int inplace) {
  const int64_t B = 3, R = 5, C = 7, n = B * R * C, es = tk_size(t);
  char *in = tk_alloc((size_t)(n * es)), *out = inplace ? in : tk_alloc((size_t)(n * es));
  char *orig = malloc((size_t)(n * es));
  fill_pattern(t, in, n);
  memcpy(orig, in, (size_t)(n * es));
  int64_t sizes[3] = {B, R, C};
  /* strided: the input is read as (B, R, C) from a (B, C, R) buffer transposed */
  int64_t st[3] = {R * C, strided ? 1 : C, strided ? R : 1};
  nrt_operand ops[2] = {tk_operand(out, t, 3, sizes, inplace ? st : NULL), tk_operand(in, t, 3, sizes, st)};
  nk_triangle_params p = {.diagonal = diag, .upper = upper};
  nrt_task task = tk_task(NK_KERNEL_TRIANGLE, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int ok = 1;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++) {
        int keep = upper ? j - i >= diag : j - i <= diag;
        int64_t src = b * st[0] + i * st[1] + j * st[2];
        int64_t dst = inplace ? src : (b * R + i) * C + j;
        uint64_t want = keep ? tk_raw(t, orig + src * es) : 0;
        ok &= tk_raw(t, out + dst * es) == want;
      }
  if (!ok)
    fprintf(stderr, "  triangle %s upper=%d diag=%lld strided=%d inplace=%d\n", tk_dtype_names[t],
            upper, (long long)diag, strided, inplace);
  CHECK(ok);
  free(orig);
  tk_free(in);
  if (!inplace) tk_free(out);
}

static void test_triangle(void) {
  const int64_t diags[] = {0, 1, -1, 3, -4, 6, -5, 100, -100, INT64_MAX, INT64_MIN};
  for (int t = 0; t < NRT_DTYPE_COUNT; t++)
    for (int upper = 0; upper < 2; upper++)
      for (size_t d = 0; d < sizeof diags / sizeof diags[0]; d++)
        check_triangle((nrt_dtype)t, upper, diags[d], (int)(d % 2), (int)(d % 3 == 0));
  float x = 1;
  nrt_operand one[2] = {tk_vector(&x, NRT_FLOAT32, 1), tk_vector(&x, NRT_FLOAT32, 1)};
  nk_triangle_params p = {0};
  nrt_task task = tk_task(NK_KERNEL_TRIANGLE, 2, one, &p, sizeof p);
  CHECK(tk_fails_with(&task, "at least 2 dims"));
  int64_t sz[2] = {0, 4};
  nrt_operand e[2] = {tk_operand(&x, NRT_FLOAT32, 2, sz, NULL), tk_operand(&x, NRT_FLOAT32, 2, sz, NULL)};
  task = tk_task(NK_KERNEL_TRIANGLE, 2, e, &p, sizeof p);
  CHECK_OK(tk_run(&task));
}

/* ------------------------------------------------------------------- pad */

static int64_t ref_index(int mode, int64_t o, int64_t before, int64_t n) {
  int64_t i = o - before;
  if (mode == NK_PAD_REPLICATE) return i < 0 ? 0 : i >= n ? n - 1 : i;
  /* reflection without a formula: walk the mirror one step at a time */
  int64_t pos = 0, dir = 1;
  for (int64_t k = 0; k < llabs(i); k++) {
    if (n == 1) break;
    int64_t step = i < 0 ? -dir : dir;
    if (pos + step < 0 || pos + step >= n) dir = -dir, step = -step;
    pos += step;
  }
  return pos;
}

static void check_pad(nrt_dtype t, int mode, int nd, const int64_t *in_sizes, const int64_t *pads,
                      int strided) {
  const int ndim = 4, es = tk_size(t);
  int64_t out_sizes[4], n_in = 1, n_out = 1, before[4] = {0, 0, 0, 0};
  for (int d = 0; d < ndim; d++) {
    out_sizes[d] = in_sizes[d];
    if (d >= ndim - nd) {
      int k = d - (ndim - nd); /* padded dims in order; pads in ATen order (last dim first) */
      int a = 2 * (nd - 1 - k);
      before[d] = pads[a];
      out_sizes[d] += pads[a] + pads[a + 1];
    }
    n_in *= in_sizes[d];
    n_out *= out_sizes[d];
  }
  char *in = tk_alloc((size_t)(n_in * es)), *out = tk_alloc((size_t)(n_out * es));
  fill_pattern(t, in, n_in);
  /* strided: the last two input dims read transposed */
  int64_t st[4];
  st[0] = in_sizes[1] * in_sizes[2] * in_sizes[3];
  st[1] = in_sizes[2] * in_sizes[3];
  st[2] = strided ? 1 : in_sizes[3];
  st[3] = strided ? in_sizes[2] : 1;
  nrt_operand ops[2] = {tk_operand(out, t, 4, out_sizes, NULL), tk_operand(in, t, 4, in_sizes, st)};
  nk_pad_params p = {.mode = mode, .nd = nd};
  for (int k = 0; k < nd; k++) p.before[k] = pads[2 * (nd - 1 - k)];
  nrt_task task = tk_task(NK_KERNEL_PAD, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int ok = 1;
  int64_t idx[4];
  for (int64_t f = 0; f < n_out && ok; f++) {
    int64_t r = f, src = 0;
    for (int d = ndim - 1; d >= 0; d--) { idx[d] = r % out_sizes[d]; r /= out_sizes[d]; }
    for (int d = 0; d < ndim; d++) {
      int64_t i = d >= ndim - nd ? ref_index(mode, idx[d], before[d], in_sizes[d]) : idx[d];
      src += i * st[d];
    }
    ok = tk_raw(t, out + f * es) == tk_raw(t, in + src * es);
  }
  if (!ok) fprintf(stderr, "  pad %s mode=%d nd=%d strided=%d\n", tk_dtype_names[t], mode, nd, strided);
  CHECK(ok);
  tk_free(in);
  tk_free(out);
}

/* backward: grad_in[i] = sum of grad_out[o] over the o that read i */
static void check_pad_backward(nrt_dtype t, int mode, int nd, const int64_t *in_sizes,
                               const int64_t *pads) {
  const int ndim = 4, es = tk_size(t);
  int64_t out_sizes[4], n_in = 1, n_out = 1, before[4] = {0, 0, 0, 0};
  for (int d = 0; d < ndim; d++) {
    out_sizes[d] = in_sizes[d];
    if (d >= ndim - nd) {
      int a = 2 * (nd - 1 - (d - (ndim - nd)));
      before[d] = pads[a];
      out_sizes[d] += pads[a] + pads[a + 1];
    }
    n_in *= in_sizes[d];
    n_out *= out_sizes[d];
  }
  char *gout = tk_alloc((size_t)(n_out * es)), *gin = tk_alloc((size_t)(n_in * es));
  double *ref = calloc((size_t)n_in, sizeof *ref);
  memset(gin, 0x7f, (size_t)(n_in * es)); /* overwritten, not accumulated into */
  int64_t idx[4];
  for (int64_t f = 0; f < n_out; f++) {
    double g = (double)((int)(tk_rand() % 9) - 4);
    tk_put(t, gout + f * es, (tk_value){.is_int = 1, .i = (int64_t)g, .f = g});
    int64_t r = f, src = 0;
    for (int d = ndim - 1; d >= 0; d--) { idx[d] = r % out_sizes[d]; r /= out_sizes[d]; }
    for (int d = 0; d < ndim; d++) {
      int64_t i = d >= ndim - nd ? ref_index(mode, idx[d], before[d], in_sizes[d]) : idx[d];
      src = src * in_sizes[d] + i;
    }
    ref[src] += g;
  }
  nrt_operand ops[2] = {tk_operand(gin, t, 4, in_sizes, NULL), tk_operand(gout, t, 4, out_sizes, NULL)};
  nk_pad_params p = {.mode = mode, .nd = nd};
  for (int k = 0; k < nd; k++) p.before[k] = pads[2 * (nd - 1 - k)];
  nrt_task task = tk_task(NK_KERNEL_PAD_BACKWARD, 2, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int ok = 1;
  for (int64_t i = 0; i < n_in; i++) {
    tk_value v = {.is_int = 1, .i = (int64_t)ref[i], .f = ref[i]};
    ok &= tk_raw(t, gin + i * es) == tk_expected(v, t);
  }
  if (!ok) fprintf(stderr, "  pad backward %s mode=%d nd=%d\n", tk_dtype_names[t], mode, nd);
  CHECK(ok);
  free(ref);
  tk_free(gout);
  tk_free(gin);
}

static void test_pad(void) {
  const int64_t sizes[4] = {2, 3, 4, 5};
  const int64_t pads[3][6] = {{2, 3, 0, 0, 0, 0}, {4, 1, 3, 2, 0, 0}, {1, 0, 2, 3, 1, 2}};
  const int64_t crop[6] = {-1, 2, 1, -2, 0, 0};
  for (int t = 0; t < NRT_DTYPE_COUNT; t++)
    for (int mode = 0; mode < 2; mode++)
      for (int nd = 1; nd <= 3; nd++) check_pad((nrt_dtype)t, mode, nd, sizes, pads[nd - 1], nd == 2);
  check_pad(NRT_FLOAT32, NK_PAD_REPLICATE, 3, sizes, pads[2], 1);
  check_pad(NRT_FLOAT32, NK_PAD_REFLECT, 2, sizes, crop, 0);
  check_pad(NRT_INT64, NK_PAD_REPLICATE, 2, sizes, crop, 1);
  const int64_t big[4] = {1, 1, 300, 200}; /* rows over the pool */
  const int64_t bp[6] = {7, 9, 11, 13, 0, 0};
  check_pad(NRT_BFLOAT16, NK_PAD_REFLECT, 2, big, bp, 0);
  const nrt_dtype bt[4] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_INT64};
  for (int t = 0; t < 4; t++)
    for (int mode = 0; mode < 2; mode++)
      for (int nd = 1; nd <= 3; nd++) check_pad_backward(bt[t], mode, nd, sizes, pads[nd - 1]);
  check_pad_backward(NRT_FLOAT32, NK_PAD_REPLICATE, 2, sizes, crop);
  check_pad_backward(NRT_FLOAT32, NK_PAD_REFLECT, 2, big, bp);
  /* a reflection reaching past the far edge is an error */
  float x[4] = {0}, y[16];
  int64_t n_in = 4, n_out = 10;
  nrt_operand ops[2] = {tk_vector(y, NRT_FLOAT32, n_out), tk_vector(x, NRT_FLOAT32, n_in)};
  nk_pad_params p = {.mode = NK_PAD_REFLECT, .nd = 1, .before = {7}};
  nrt_task task = tk_task(NK_KERNEL_PAD, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "outside [0, 4)"));
  p.nd = 2;
  task = tk_task(NK_KERNEL_PAD, 2, ops, &p, sizeof p);
  CHECK(tk_fails_with(&task, "1..3 padded dims"));
}

/* -------------------------------------------------------------- flip copy */

static void test_flip_copy(void) {
  int32_t *in = tk_alloc(24 * 4), *out = tk_alloc(24 * 4);
  for (int i = 0; i < 24; i++) in[i] = i;
  int64_t sizes[3] = {2, 3, 4};
  nrt_operand ops[2] = {tk_operand(out, NRT_INT32, 3, sizes, NULL), tk_operand(in, NRT_INT32, 3, sizes, NULL)};
  /* flip dims 0 and 2: start at the last element of each, negate strides */
  ops[1].data = (char *)in + (1 * 12 + 3) * 4;
  ops[1].strides[0] = -ops[1].strides[0];
  ops[1].strides[2] = -ops[1].strides[2];
  nrt_task task = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK_OK(tk_run(&task));
  int ok = 1;
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 4; c++) ok &= out[a * 12 + b * 4 + c] == in[(1 - a) * 12 + b * 4 + (3 - c)];
  CHECK(ok);
  tk_free(in);
  tk_free(out);
}

static void tests(void) {
  test_triangle();
  test_pad();
  test_flip_copy();
}

int main(void) { return tk_main(tests, __FILE__); }
