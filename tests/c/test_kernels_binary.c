/* The binary kernel (add/sub with alpha, mul, true div): every dtype with
 * itself, mixed dtypes (ATen's promotions, out dtypes other than the
 * compute dtype), integer true division in float, division by zero, in
 * contiguous, broadcast-scalar, transposed, strided and 0-dim layouts and
 * sizes that take the parallel path; against a scalar reference written
 * here; plus the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

typedef struct bcase {
  nk_binary_op op;
  nrt_dtype out, a, b, compute;
  nk_scalar alpha;
} bcase;

static const char *const op_names[] = {"add", "sub", "mul", "div"};

static int is_float_class(nrt_dtype t) { return t >= NRT_FLOAT16 && t != NRT_FLOAT64; }

/* round a float result to the compute dtype's precision */
static float round_to(nrt_dtype t, float r) {
  if (t == NRT_FLOAT16) return (float)tk_f16_value(tk_f16_bits(r));
  if (t == NRT_BFLOAT16) return (float)tk_bf16_value(tk_bf16_bits(r));
  return r;
}

/* sign-extending wrap of v to integral dtype t */
static int64_t wrap_to(nrt_dtype t, uint64_t v) {
  int bits = 8 * (int)tk_size(t);
  if (t == NRT_BOOL) return v != 0;
  if (bits == 64) return (int64_t)v;
  v &= (1ull << bits) - 1;
  if (t != NRT_UINT8 && v >= (1ull << (bits - 1))) return (int64_t)(v - (1ull << bits));
  return (int64_t)v;
}

/* What ATen computes: inputs cast to the compute dtype, the op there
 * (a + alpha*b as one fma when alpha != 1), the result in the compute dtype,
 * then cast to the out dtype.  Returns the expected out bytes. */
static uint64_t reference(const bcase *c, tk_value a, tk_value b) {
  tk_value r = {0, 0, 0};
  if (c->compute == NRT_BOOL) {
    int x = a.is_int ? a.i != 0 : a.f != 0, y = b.is_int ? b.i != 0 : b.f != 0, al = c->alpha.i != 0;
    r = (tk_value){1, c->op == NK_BINARY_MUL ? x && y : x || (al && y), 0};
  } else if (tk_is_integral(c->compute)) {
    uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i, al = (uint64_t)c->alpha.i, v;
    switch (c->op) {
    case NK_BINARY_ADD: v = x + al * y; break;
    case NK_BINARY_SUB: v = x - al * y; break;
    default: v = x * y; break;
    }
    r = (tk_value){1, wrap_to(c->compute, v), 0};
  } else if (is_float_class(c->compute)) {
    float x = a.is_int ? (float)a.i : (float)a.f, y = b.is_int ? (float)b.i : (float)b.f, v;
    float al = (float)c->alpha.f;
    switch (c->op) {
    case NK_BINARY_ADD: v = al == 1 ? x + y : fmaf(al, y, x); break;
    case NK_BINARY_SUB: v = al == 1 ? x - y : fmaf(-al, y, x); break;
    case NK_BINARY_MUL: v = x * y; break;
    default: v = x / y; break;
    }
    r.f = round_to(c->compute, v);
  } else {
    double x = a.is_int ? (double)a.i : a.f, y = b.is_int ? (double)b.i : b.f, v, al = c->alpha.f;
    switch (c->op) {
    case NK_BINARY_ADD: v = al == 1 ? x + y : fma(al, y, x); break;
    case NK_BINARY_SUB: v = al == 1 ? x - y : fma(-al, y, x); break;
    case NK_BINARY_MUL: v = x * y; break;
    default: v = x / y; break;
    }
    r.f = v;
  }
  return tk_expected(r, c->out);
}

static int is_nan_raw(nrt_dtype t, uint64_t raw) {
  tk_value v = {0, 0, 0};
  switch (t) {
  case NRT_FLOAT16: return isnan(tk_f16_value((uint16_t)raw));
  case NRT_BFLOAT16: return isnan(tk_bf16_value((uint16_t)raw));
  case NRT_FLOAT32: { float f; memcpy(&f, &raw, 4); return isnan(f); }
  case NRT_FLOAT64: memcpy(&v.f, &raw, 8); return isnan(v.f);
  default: return 0;
  }
}

static int values_of(nrt_dtype t, tk_value *out) {
  static const int64_t ints[] = {0, 1, -1, 2, 3, -7, 100, 127, -128, 255, 1000, -32768, 65535,
                                 2147483647, -2147483647 - 1, (1ll << 40) + 3, INT64_MAX, INT64_MIN};
  static const double floats[] = {0, -0.0, 1, -1, 0.5, 3, -2.5, 1e-3, 1e30, -1e30, INFINITY,
                                  -INFINITY, NAN, 65504, 1e-7, 3.14159, 1 + 0x1p-8, 0x1p-20, 7};
  int n = 0;
  if (t == NRT_BOOL) {
    out[n++] = (tk_value){1, 0, 0};
    out[n++] = (tk_value){1, 1, 0};
    out[n++] = (tk_value){1, 1, 0};
  } else if (tk_is_integral(t)) {
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
      if (wrap_to(t, (uint64_t)ints[k]) == ints[k]) out[n++] = (tk_value){1, ints[k], 0};
  } else {
    for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++)
      out[n++] = tk_stored(t, (tk_value){0, 0, floats[k]});
  }
  return n;
}

/* strides in elements for out, a, b (NULL out: contiguous) */
static int check_case(const bcase *c, int ndim, const int64_t *sizes, const int64_t *so,
                      const int64_t *sa, const int64_t *sb) {
  const int64_t *st[3] = {so, sa, sb};
  nrt_dtype dt[3] = {c->out, c->a, c->b};
  int64_t contiguous[NRT_MAX_DIMS], step = 1, numel = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    contiguous[d] = step;
    step *= sizes[d];
    numel *= sizes[d];
  }
  if (!so) st[0] = contiguous;
  char *mem[3];
  nrt_operand ops[3];
  tk_value va[32], vb[32];
  int na = values_of(c->a, va), nb = values_of(c->b, vb);
  for (int k = 0; k < 3; k++) {
    int64_t span = 1;
    for (int d = 0; d < ndim; d++) span += (sizes[d] - 1) * st[k][d];
    mem[k] = tk_alloc((size_t)(span * tk_size(dt[k])));
    for (int64_t j = 0; k > 0 && j < span; j++)
      tk_put(dt[k], mem[k] + j * tk_size(dt[k]), k == 1 ? va[j % na] : vb[(5 * j + 1) % nb]);
    ops[k] = tk_operand(mem[k], dt[k], ndim, sizes, st[k]);
  }
  nk_binary_params prm = {c->op, c->compute, c->alpha};
  nrt_task t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  int bad = tk_run(&t) != NRT_SUCCESS;
  for (int64_t lin = 0; lin < numel && !bad; lin++) {
    int64_t rest = lin, off[3] = {0, 0, 0};
    for (int d = ndim - 1; d >= 0; d--) {
      for (int k = 0; k < 3; k++) off[k] += (rest % sizes[d]) * st[k][d];
      rest /= sizes[d];
    }
    tk_value a = va[off[1] % na], b = vb[(5 * off[2] + 1) % nb];
    uint64_t want = reference(c, a, b), got = tk_raw(c->out, mem[0] + off[0] * tk_size(c->out));
    if (want != got && !(is_nan_raw(c->out, want) && is_nan_raw(c->out, got))) {
      fprintf(stderr, "  %s(%s, %s) -> %s in %s, alpha %g: [%lld] a=%lld/%g b=%lld/%g gave 0x%llx, want 0x%llx\n",
              op_names[c->op], tk_dtype_names[c->a], tk_dtype_names[c->b], tk_dtype_names[c->out],
              tk_dtype_names[c->compute], c->alpha.f, (long long)lin, (long long)a.i, a.f,
              (long long)b.i, b.f, (unsigned long long)got, (unsigned long long)want);
      bad = 1;
    }
  }
  for (int k = 0; k < 3; k++) tk_free(mem[k]);
  return !bad;
}

/* the layouts every case runs in */
static void check_layouts(const bcase *c) {
  int64_t n1[1] = {1003}, one[1] = {1}, zero[1] = {0};
  CHECK(check_case(c, 1, n1, NULL, one, one));   /* contiguous */
  CHECK(check_case(c, 1, n1, NULL, one, zero));  /* tensor op scalar */
  CHECK(check_case(c, 1, n1, NULL, zero, one));  /* scalar op tensor */
  CHECK(check_case(c, 1, n1, NULL, zero, zero)); /* both broadcast */
  int64_t n2[2] = {37, 29}, tr[2] = {1, 37}, row[2] = {0, 1};
  CHECK(check_case(c, 2, n2, NULL, tr, row));    /* transposed a, broadcast row b */
  int64_t n3[1] = {500}, s2[1] = {2}, s3[1] = {3};
  CHECK(check_case(c, 1, n3, s2, s3, one));      /* strided out */
  CHECK(check_case(c, 0, NULL, NULL, NULL, NULL)); /* 0-dim */
}

static void test_same_dtype(void) {
  for (nrt_dtype t = 0; t < NRT_DTYPE_COUNT; t++) {
    bcase c = {NK_BINARY_ADD, t, t, t, t, {1, 1}};
    check_layouts(&c);
    c.op = NK_BINARY_MUL;
    check_layouts(&c);
    if (t == NRT_BOOL) {
      c = (bcase){NK_BINARY_ADD, t, t, t, t, {0, 0}}; /* alpha False: a */
      check_layouts(&c);
      continue;
    }
    c = (bcase){NK_BINARY_SUB, t, t, t, t, {1, 1}};
    check_layouts(&c);
    c = (bcase){NK_BINARY_ADD, t, t, t, t, {-0.5, 3}};
    check_layouts(&c);
    c = (bcase){NK_BINARY_SUB, t, t, t, t, {2.5, -2}};
    check_layouts(&c);
    if (t >= NRT_FLOAT16) {
      c = (bcase){NK_BINARY_DIV, t, t, t, t, {1, 1}};
      check_layouts(&c);
    } else { /* integer true division is computed in float32 */
      c = (bcase){NK_BINARY_DIV, NRT_FLOAT32, t, t, NRT_FLOAT32, {1, 1}};
      check_layouts(&c);
    }
  }
}

static void test_mixed(void) {
  const bcase cases[] = {
      {NK_BINARY_ADD, NRT_FLOAT32, NRT_INT32, NRT_FLOAT32, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_MUL, NRT_FLOAT32, NRT_FLOAT32, NRT_INT64, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_SUB, NRT_FLOAT64, NRT_FLOAT32, NRT_FLOAT64, NRT_FLOAT64, {0.75, 0}},
      {NK_BINARY_ADD, NRT_FLOAT32, NRT_FLOAT16, NRT_BFLOAT16, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_MUL, NRT_FLOAT32, NRT_FLOAT16, NRT_FLOAT16, NRT_FLOAT16, {1, 1}}, /* rounds to half first */
      {NK_BINARY_ADD, NRT_FLOAT16, NRT_FLOAT16, NRT_FLOAT64, NRT_FLOAT16, {2, 2}},  /* wrapped scalar */
      {NK_BINARY_ADD, NRT_INT64, NRT_INT32, NRT_INT64, NRT_INT64, {1, 1}},
      {NK_BINARY_ADD, NRT_INT32, NRT_UINT8, NRT_INT32, NRT_INT32, {1, 1}},
      {NK_BINARY_MUL, NRT_INT64, NRT_INT32, NRT_INT32, NRT_INT32, {1, 1}}, /* wraps at 32 bits */
      {NK_BINARY_SUB, NRT_INT16, NRT_INT8, NRT_UINT8, NRT_INT16, {1, 1}},
      {NK_BINARY_ADD, NRT_INT64, NRT_BOOL, NRT_INT64, NRT_INT64, {1, 1}},
      {NK_BINARY_MUL, NRT_FLOAT32, NRT_BOOL, NRT_FLOAT32, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_DIV, NRT_FLOAT32, NRT_INT32, NRT_INT64, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_DIV, NRT_FLOAT64, NRT_INT64, NRT_INT64, NRT_FLOAT64, {1, 1}},
      {NK_BINARY_DIV, NRT_BFLOAT16, NRT_INT16, NRT_BFLOAT16, NRT_BFLOAT16, {1, 1}},
      {NK_BINARY_ADD, NRT_BOOL, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_MUL, NRT_INT8, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {1, 1}},
      {NK_BINARY_ADD, NRT_BOOL, NRT_BOOL, NRT_BOOL, NRT_BOOL, {1, 1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_layouts(&cases[i]);
}

static void test_division_by_zero(void) {
  float *o = tk_alloc(16), *a = tk_alloc(16), *b = tk_alloc(16);
  const float av[4] = {1, -1, 0, NAN};
  memcpy(a, av, sizeof av);
  nrt_operand ops[3] = {tk_vector(o, NRT_FLOAT32, 4), tk_vector(a, NRT_FLOAT32, 4), tk_vector(b, NRT_FLOAT32, 4)};
  nk_binary_params prm = {NK_BINARY_DIV, NRT_FLOAT32, {1, 1}};
  nrt_task t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  CHECK(o[0] == INFINITY && o[1] == -INFINITY && isnan(o[2]) && isnan(o[3]));
  int32_t *ia = tk_alloc(16), *ib = tk_alloc(16);
  ia[0] = 5, ia[1] = -5, ia[2] = 0, ia[3] = 7;
  ib[3] = 2;
  ops[1] = tk_vector(ia, NRT_INT32, 4);
  ops[2] = tk_vector(ib, NRT_INT32, 4);
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  CHECK(o[0] == INFINITY && o[1] == -INFINITY && isnan(o[2]) && o[3] == 3.5f);
  tk_free(o), tk_free(a), tk_free(b), tk_free(ia), tk_free(ib);
}

/* sizes that the pool splits, chunks starting mid-row */
static void test_parallel(void) {
  int64_t n1[1] = {(1 << 20) + 3}, one[1] = {1}, zero[1] = {0};
  bcase c = {NK_BINARY_ADD, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {1, 1}};
  CHECK(check_case(&c, 1, n1, NULL, one, one));
  c.op = NK_BINARY_MUL;
  CHECK(check_case(&c, 1, n1, NULL, one, zero));
  int64_t big[1] = {(3 << 20) + 5}; /* rows past NK_STREAM_STORE_BYTES: streaming stores */
  c = (bcase){NK_BINARY_ADD, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, {-2, 1}};
  CHECK(check_case(&c, 1, big, NULL, one, one));
  c = (bcase){NK_BINARY_SUB, NRT_FLOAT64, NRT_FLOAT64, NRT_FLOAT64, NRT_FLOAT64, {1, 1}};
  CHECK(check_case(&c, 1, big, NULL, zero, one));
  c = (bcase){NK_BINARY_DIV, NRT_FLOAT64, NRT_FLOAT64, NRT_FLOAT64, NRT_FLOAT64, {1, 1}};
  int64_t n2[2] = {523, 401}, tr[2] = {1, 523}, cont[2] = {401, 1};
  CHECK(check_case(&c, 2, n2, NULL, tr, cont));
  c = (bcase){NK_BINARY_SUB, NRT_INT32, NRT_INT32, NRT_INT32, NRT_INT32, {3, 3}};
  CHECK(check_case(&c, 2, n2, tr, cont, tr));
}

static void test_validation(void) {
  float *buf = tk_alloc(64);
  nrt_operand ops[3] = {tk_vector(buf, NRT_FLOAT32, 4), tk_vector(buf + 4, NRT_FLOAT32, 4),
                        tk_vector(buf + 8, NRT_FLOAT32, 4)};
  nk_binary_params prm = {NK_BINARY_ADD, NRT_FLOAT32, {1, 1}};
  nrt_task t = tk_task(NK_KERNEL_BINARY, 2, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "expected 3 operands, got 2"));
  prm.op = 7;
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid op 7"));
  prm = (nk_binary_params){NK_BINARY_ADD, 99, {1, 1}};
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid compute dtype 99"));
  prm = (nk_binary_params){NK_BINARY_DIV, NRT_INT32, {1, 1}};
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "true division needs a floating compute dtype"));
  prm = (nk_binary_params){NK_BINARY_SUB, NRT_BOOL, {1, 1}};
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "subtraction with bool"));
  prm = (nk_binary_params){NK_BINARY_ADD, NRT_FLOAT32, {1, 1}};
  ops[2].sizes[0] = 3;
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "operand 2's shape differs"));
  ops[2].sizes[0] = 4;
  ops[1].dtype = -1;
  t = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "operand 1 has invalid dtype -1"));
  tk_free(buf);
}

static void tests(void) {
  test_same_dtype();
  test_mixed();
  test_division_by_zero();
  test_parallel();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
