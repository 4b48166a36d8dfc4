/* The multi-tensor kernels against references written here, in double:
 * NK_KERNEL_FOREACH (binary ops with list, scalar, per-tensor scalar and
 * device-scalar operands, in place and out of place; addcmul/addcdiv, lerp
 * with scalar and list weights, pow's special exponents, unary ops, copy
 * across dtypes, zero; norms 1/2/inf/3 and max per tensor, NaN; the AMP
 * unscale and its found_inf flag), over float32, float64, bfloat16 and
 * float16, lists mixing empty, tiny, and multi-block tensors;
 * NK_KERNEL_FUSED_OPTIM (Adam, AdamW, amsgrad, maximize, weight decay,
 * grad_scale, found_inf skipping, SGD with momentum/nesterov/dampening/
 * first step, Adagrad) over several steps; NK_KERNEL_AMP_UPDATE_SCALE; and
 * the validation failures (bad table, unknown op, integer lists). */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

static double ld(nrt_dtype t, const void *p, int64_t i) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
  case NRT_FLOAT16: memcpy(&h, (const char *)p + 2 * i, 2); return tk_f16_value(h);
  case NRT_BFLOAT16: memcpy(&h, (const char *)p + 2 * i, 2); return tk_bf16_value(h);
  case NRT_FLOAT32: memcpy(&f, (const char *)p + 4 * i, 4); return f;
  default: memcpy(&d, (const char *)p + 8 * i, 8); return d;
  }
}

static void st(nrt_dtype t, void *p, int64_t i, double v) {
  uint16_t h;
  float f;
  switch (t) {
  case NRT_FLOAT16: h = tk_f16_bits(v); memcpy((char *)p + 2 * i, &h, 2); break;
  case NRT_BFLOAT16: h = tk_bf16_bits(v); memcpy((char *)p + 2 * i, &h, 2); break;
  case NRT_FLOAT32: f = (float)v; memcpy((char *)p + 4 * i, &f, 4); break;
  default: memcpy((char *)p + 8 * i, &v, 8); break;
  }
}

/* tolerance of one computed-and-rounded result in dtype t */
static double tol(nrt_dtype t) {
  switch (t) {
  case NRT_FLOAT16: return 2e-3;
  case NRT_BFLOAT16: return 1.6e-2;
  case NRT_FLOAT32: return 2e-6;
  default: return 1e-13;
  }
}

static int close_to(double got, double want, double rtol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= rtol * (fabs(want) + 1e-3);
}

#define NT 5
static const int64_t sizes_[NT] = {0, 1, 7, 300, 70001}; /* 70001: three blocks */

typedef struct lists {
  void *data[NK_FOREACH_SLOTS][NT];
  nk_tensor_set *sets;
  size_t bytes;
  int64_t n_blocks;
} lists;

static double init_value(int slot, int t, int64_t i) {
  double x = sin(0.37 * (double)(i + 1) + 1.3 * t + 2.1 * slot) * (1 + slot);
  if (slot == 3) x = 0.5 + fabs(x); /* divisors, square-root arguments */
  return x;
}

/* Allocates NT tensors per used slot (dtype dt[k]) filled with init values,
 * and the table (rows + scratch). */
static void make_lists(lists *L, unsigned mask, const nrt_dtype *dt, int scratch) {
  memset(L, 0, sizeof *L);
  int64_t blocks = 0;
  for (int t = 0; t < NT; t++) blocks += (sizes_[t] + NK_FOREACH_BLOCK - 1) / NK_FOREACH_BLOCK;
  L->n_blocks = blocks;
  L->bytes = NT * sizeof(nk_tensor_set) + (scratch ? (size_t)blocks * 8 : 0);
  L->sets = tk_alloc(L->bytes);
  int64_t first = 0;
  for (int t = 0; t < NT; t++) {
    nk_tensor_set *s = &L->sets[t];
    s->numel = sizes_[t];
    s->first_block = first;
    s->scalar = 0.25 * (t + 1) - 0.6;
    first += (sizes_[t] + NK_FOREACH_BLOCK - 1) / NK_FOREACH_BLOCK;
    for (int k = 0; k < NK_FOREACH_SLOTS; k++) {
      if (!(mask >> k & 1u)) continue;
      int64_t n = sizes_[t] ? sizes_[t] : 1;
      L->data[k][t] = tk_alloc((size_t)n * nrt_dtype_size(dt[k]));
      for (int64_t i = 0; i < sizes_[t]; i++) st(dt[k], L->data[k][t], i, init_value(k, t, i));
      s->data[k] = L->data[k][t];
    }
  }
}

static void free_lists(lists *L) {
  for (int k = 0; k < NK_FOREACH_SLOTS; k++)
    for (int t = 0; t < NT; t++)
      if (L->data[k][t]) tk_free(L->data[k][t]);
  tk_free(L->sets);
}

static nrt_task table_task(nk_kernel_id id, const lists *L, const void *prm, size_t size) {
  nrt_operand ops[2] = {tk_vector(L->sets, NRT_UINT8, (int64_t)L->bytes),
                        tk_vector(L->data[1][NT - 1] ? L->data[1][NT - 1] : L->data[0][NT - 1],
                                  NRT_UINT8, sizes_[NT - 1])};
  return tk_task(id, 2, ops, prm, size);
}

static double ref_elem(int op, double a, double b, double c, double alpha) {
  switch (op) {
  case NK_FOREACH_ADD: return a + alpha * b;
  case NK_FOREACH_SUB: return a - alpha * b;
  case NK_FOREACH_MUL: return a * b;
  case NK_FOREACH_DIV: return a / b;
  case NK_FOREACH_MAXIMUM: return a > b ? a : b;
  case NK_FOREACH_MINIMUM: return a < b ? a : b;
  case NK_FOREACH_POW: return pow(a, b);
  case NK_FOREACH_ADDCMUL: return a + alpha * b * c;
  case NK_FOREACH_ADDCDIV: return a + alpha * b / c;
  case NK_FOREACH_LERP: return a + c * (b - a);
  case NK_FOREACH_NEG: return -a;
  case NK_FOREACH_ABS: return fabs(a);
  case NK_FOREACH_SQRT: return sqrt(a);
  case NK_FOREACH_EXP: return exp(a);
  case NK_FOREACH_RECIPROCAL: return 1 / a;
  case NK_FOREACH_SIGN: return (a > 0) - (a < 0);
  case NK_FOREACH_SIGMOID: return 1 / (1 + exp(-a));
  case NK_FOREACH_ROUND: return nearbyint(a);
  case NK_FOREACH_COPY: return a;
  case NK_FOREACH_ZERO: return 0;
  default: return NAN;
  }
}

/* One elementwise case: out slot 0 (inplace 1: in place in slot 1; 2: in
 * place, and the list operands b and c are slot 1's tensors too, as in
 * _foreach_addcmul_(xs, xs, xs)), inputs from slots 1..3; b is slot 2 or
 * the scalar given by kind. */
static void run_elementwise(int op, nrt_dtype t, int b_list, int kind, int inplace) {
  nrt_dtype dt[NK_FOREACH_SLOTS] = {t, t, t, t, t, t};
  int shape3 = op == NK_FOREACH_ADDCMUL || op == NK_FOREACH_ADDCDIV || op == NK_FOREACH_LERP;
  int unary = !shape3 && op >= NK_FOREACH_COPY;
  unsigned mask = 1u | 2u | ((b_list || shape3) && !unary ? 4u : 0u) |
                  ((op == NK_FOREACH_ADDCMUL || op == NK_FOREACH_ADDCDIV ||
                    (op == NK_FOREACH_LERP && b_list == 2)) ? 8u : 0u);
  lists L;
  make_lists(&L, mask, dt, 0);
  double dev_scalar = 1.75;
  double *dscalar = tk_alloc(8);
  *dscalar = dev_scalar;
  /* keep copies of the inputs for the reference */
  double *in[4][NT] = {{0}};
  for (int k = 1; k < 4; k++)
    for (int tt = 0; tt < NT; tt++)
      if (mask >> k & 1u) {
        in[k][tt] = malloc((size_t)(sizes_[tt] + 1) * 8);
        for (int64_t i = 0; i < sizes_[tt]; i++) in[k][tt][i] = ld(t, L.data[k][tt], i);
      }
  if (inplace)
    for (int tt = 0; tt < NT; tt++) L.sets[tt].data[0] = L.sets[tt].data[1];
  if (inplace == 2)
    for (int k = 2; k < 4; k++)
      for (int tt = 0; tt < NT; tt++)
        if (mask >> k & 1u) {
          L.sets[tt].data[k] = L.data[1][tt];
          memcpy(in[k][tt], in[1][tt], (size_t)sizes_[tt] * 8);
        }
  nk_foreach_params prm = {.sets = L.sets, .n_tensors = NT, .n_blocks = L.n_blocks, .op = op,
                           .b_is_list = b_list, .scalar_kind = kind, .alpha = -1.5,
                           .scalar = 0.3};
  if (op == NK_FOREACH_POW) prm.scalar = 2;
  memcpy(prm.dtype, dt, sizeof dt);
  if (kind == NK_FOREACH_SCALAR_TENSOR) {
    prm.scalar_ptr = dscalar;
    prm.scalar_dtype = NRT_FLOAT64;
  }
  nrt_task task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int tt = 0; tt < NT; tt++) {
    void *out = inplace ? L.data[1][tt] : L.data[0][tt];
    double s = kind == NK_FOREACH_SCALAR_VALUE ? prm.scalar
               : kind == NK_FOREACH_SCALAR_LIST ? L.sets[tt].scalar : dev_scalar;
    for (int64_t i = 0; i < sizes_[tt]; i++) {
      double a = in[1][tt][i];
      double b = (mask & 4u) ? in[2][tt][i] : s;
      double c = (mask & 8u) ? in[3][tt][i] : s;
      double alpha = prm.alpha;
      if (op == NK_FOREACH_ADDCMUL || op == NK_FOREACH_ADDCDIV) alpha = s;
      if (!(mask & 4u) && !unary) b = s;
      if (op == NK_FOREACH_POW && !b_list && t != NRT_FLOAT64) b = (float)b;
      double want = ref_elem(op, a, b, c, alpha);
      double got = ld(t, out, i);
      uint64_t rounded = 0; /* beyond float16's range the result is inf */
      st(t, &rounded, 0, want);
      if (isinf(ld(t, &rounded, 0)) && got == ld(t, &rounded, 0)) continue;
      /* a + alpha*b cancels: compare against the scale of the operands */
      double scale = fabs(a) + fabs(alpha * b) + fabs(want) + 1e-3;
      if (!(isnan(want) ? isnan(got) : fabs(got - want) <= 4 * tol(t) * scale)) {
        if (bad++ < 3)
          fprintf(stderr, "  op %d %s tensor %d [%lld]: got %g want %g\n", op, tk_dtype_names[t],
                  tt, (long long)i, got, want);
      }
    }
  }
  CHECK(bad == 0);
  for (int k = 1; k < 4; k++)
    for (int tt = 0; tt < NT; tt++) free(in[k][tt]);
  tk_free(dscalar);
  free_lists(&L);
}

static void test_elementwise(void) {
  const nrt_dtype dts[4] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  for (int d = 0; d < 4; d++) {
    nrt_dtype t = dts[d];
    for (int inplace = 0; inplace < 2; inplace++) {
      run_elementwise(NK_FOREACH_ADD, t, 1, 0, inplace);
      run_elementwise(NK_FOREACH_SUB, t, 1, 0, inplace);
      run_elementwise(NK_FOREACH_ADD, t, 0, NK_FOREACH_SCALAR_VALUE, inplace);
      run_elementwise(NK_FOREACH_MUL, t, 0, NK_FOREACH_SCALAR_LIST, inplace);
      run_elementwise(NK_FOREACH_DIV, t, 0, NK_FOREACH_SCALAR_TENSOR, inplace);
      run_elementwise(NK_FOREACH_DIV, t, 1, 0, inplace);
      run_elementwise(NK_FOREACH_MAXIMUM, t, 1, 0, inplace);
      run_elementwise(NK_FOREACH_MINIMUM, t, 0, NK_FOREACH_SCALAR_LIST, inplace);
      run_elementwise(NK_FOREACH_ADDCMUL, t, 1, NK_FOREACH_SCALAR_LIST, inplace);
      run_elementwise(NK_FOREACH_ADDCDIV, t, 1, NK_FOREACH_SCALAR_VALUE, inplace);
      run_elementwise(NK_FOREACH_LERP, t, 1, NK_FOREACH_SCALAR_LIST, inplace);
      run_elementwise(NK_FOREACH_LERP, t, 2, 0, inplace);
      run_elementwise(NK_FOREACH_NEG, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_ABS, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_EXP, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_SIGN, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_SIGMOID, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_RECIPROCAL, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_ROUND, t, 0, 0, inplace);
      run_elementwise(NK_FOREACH_POW, t, 0, NK_FOREACH_SCALAR_VALUE, inplace); /* x^2 */
    }
    /* every operand one tensor: the kernel reads and writes it in place */
    run_elementwise(NK_FOREACH_ADD, t, 1, 0, 2);
    run_elementwise(NK_FOREACH_MAXIMUM, t, 1, 0, 2);
    run_elementwise(NK_FOREACH_ADDCMUL, t, 1, NK_FOREACH_SCALAR_LIST, 2);
    run_elementwise(NK_FOREACH_LERP, t, 2, 0, 2);
  }
}

/* sqrt of negatives (NaN), pow exponent specials, zero, copy across dtypes */
static void test_special_cases(void) {
  float x[6] = {4.0f, -1.0f, 0.0f, INFINITY, NAN, 2.25f}, y[6], z[6];
  double w[6];
  nk_tensor_set set[1] = {{.data = {y, x}, .numel = 6, .first_block = 0}};
  nk_foreach_params prm = {.sets = set, .n_tensors = 1, .n_blocks = 1, .op = NK_FOREACH_SQRT};
  for (int k = 0; k < NK_FOREACH_SLOTS; k++) prm.dtype[k] = NRT_FLOAT32;
  nrt_operand ops[2] = {tk_vector(set, NRT_UINT8, sizeof set), tk_vector(x, NRT_FLOAT32, 6)};
  nrt_task task = tk_task(NK_KERNEL_FOREACH, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(y[0] == 2.0f && isnan(y[1]) && y[2] == 0.0f && isinf(y[3]) && isnan(y[4]) && y[5] == 1.5f);
  const double exps[8] = {0, 1, 2, 3, 0.5, -0.5, -1, -2};
  for (int e = 0; e < 8; e++) {
    prm.op = NK_FOREACH_POW;
    prm.scalar = exps[e];
    task = tk_task(NK_KERNEL_FOREACH, 2, ops, &prm, sizeof prm);
    CHECK_OK(tk_run(&task));
    int ok = 1;
    for (int i = 0; i < 6; i++) {
      double want = pow((double)x[i], exps[e]);
      if (exps[e] == 0.5) want = sqrt((double)x[i]); /* pow(-inf, .5) is inf, sqrt NaN */
      if (!close_to(y[i], (float)want, 1e-6)) ok = 0;
    }
    if (!ok) fprintf(stderr, "  pow exponent %g\n", exps[e]);
    CHECK(ok);
  }
  prm.op = NK_FOREACH_ZERO;
  task = tk_task(NK_KERNEL_FOREACH, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(y[0] == 0 && y[5] == 0 && !signbit(y[1]));
  /* copy float32 -> float64 and back through bfloat16 rounding */
  set[0].data[0] = w;
  prm.op = NK_FOREACH_COPY;
  prm.dtype[0] = NRT_FLOAT64;
  task = tk_task(NK_KERNEL_FOREACH, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(w[0] == 4.0 && w[1] == -1.0 && isinf(w[3]) && isnan(w[4]) && w[5] == 2.25);
  w[5] = 1.0 + 1e-3; /* rounds to 1 in bfloat16 */
  uint16_t hb[6];
  set[0].data[0] = hb;
  set[0].data[1] = w;
  prm.dtype[0] = NRT_BFLOAT16;
  prm.dtype[1] = NRT_FLOAT64;
  task = tk_task(NK_KERNEL_FOREACH, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(tk_bf16_value(hb[5]) == 1.0 && tk_bf16_value(hb[1]) == -1.0);
  (void)z;
}

static void test_norms(void) {
  const nrt_dtype dts[3] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16};
  const double ords[4] = {1, 2, INFINITY, 3};
  for (int d = 0; d < 3; d++)
    for (int o = 0; o < 5; o++) {
      nrt_dtype t = dts[d];
      nrt_dtype dt[NK_FOREACH_SLOTS] = {o == 1 ? NRT_FLOAT64 : t, t, t, t, t, t};
      lists L;
      make_lists(&L, 3u, dt, 1);
      nk_foreach_params prm = {.sets = L.sets, .n_tensors = NT, .n_blocks = L.n_blocks,
                               .op = o == 4 ? NK_FOREACH_MAX : NK_FOREACH_NORM,
                               .alpha = o == 4 ? 0 : ords[o]};
      memcpy(prm.dtype, dt, sizeof dt);
      nrt_task task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
      if (o == 4) { /* the max of the empty tensor 0 fails the task */
        CHECK(tk_fails_with(&task, "max of an empty tensor"));
        free_lists(&L);
        continue;
      }
      CHECK_OK(tk_run(&task));
      int bad = 0;
      for (int tt = 0; tt < NT; tt++) {
        double acc = 0;
        for (int64_t i = 0; i < sizes_[tt]; i++) {
          double x = fabs(ld(t, L.data[1][tt], i));
          if (isinf(ords[o])) acc = x > acc ? x : acc;
          else acc += pow(x, ords[o]);
        }
        if (!isinf(ords[o])) acc = pow(acc, 1 / ords[o]);
        double got = ld(dt[0], L.data[0][tt], 0);
        if (!close_to(got, acc, dt[0] == NRT_FLOAT64 ? 1e-12 : tol(dt[0]))) {
          if (bad++ < 3) fprintf(stderr, "  norm %g %s tensor %d: got %.9g want %.9g\n", ords[o],
                                 tk_dtype_names[t], tt, got, acc);
        }
      }
      CHECK(bad == 0);
      free_lists(&L);
    }
  /* max with NaN and negatives, 3 rows of one element + a large one */
  float a[3] = {-3, -1, -2}, b[2] = {1, NAN}, out[2] = {0, 0};
  struct { nk_tensor_set rows[2]; double scratch[2]; } tbl = {
      {{.data = {&out[0], a}, .numel = 3, .first_block = 0},
       {.data = {&out[1], b}, .numel = 2, .first_block = 1}}, {0, 0}};
  nk_foreach_params prm = {.sets = tbl.rows, .n_tensors = 2, .n_blocks = 2, .op = NK_FOREACH_MAX};
  for (int k = 0; k < NK_FOREACH_SLOTS; k++) prm.dtype[k] = NRT_FLOAT32;
  nrt_operand ops[2] = {tk_vector(&tbl, NRT_UINT8, sizeof tbl), tk_vector(a, NRT_FLOAT32, 3)};
  nrt_task task = tk_task(NK_KERNEL_FOREACH, 2, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(out[0] == -1.0f && isnan(out[1]));
}

static void test_unscale(void) {
  for (int inject = 0; inject < 3; inject++) {
    nrt_dtype dt[NK_FOREACH_SLOTS] = {NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32,
                                      NRT_FLOAT32, NRT_FLOAT32};
    lists L;
    make_lists(&L, 3u, dt, 1);
    for (int tt = 0; tt < NT; tt++) L.sets[tt].data[0] = L.sets[tt].data[1];
    if (inject == 1) st(NRT_FLOAT32, L.data[1][NT - 1], 69999, INFINITY);
    if (inject == 2) st(NRT_FLOAT32, L.data[1][2], 3, NAN);
    float *found = tk_alloc(4), *inv = tk_alloc(4);
    *inv = 0.125f;
    nk_foreach_params prm = {.sets = L.sets, .n_tensors = NT, .n_blocks = L.n_blocks,
                             .op = NK_FOREACH_UNSCALE, .scalar_kind = NK_FOREACH_SCALAR_TENSOR,
                             .scalar_ptr = inv, .scalar_dtype = NRT_FLOAT32, .flag_ptr = found};
    memcpy(prm.dtype, dt, sizeof dt);
    nrt_task task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
    CHECK_OK(tk_run(&task));
    CHECK(*found == (inject ? 1.0f : 0.0f));
    CHECK(ld(NRT_FLOAT32, L.data[1][3], 5) == (float)init_value(1, 3, 5) * 0.125f);
    tk_free(found), tk_free(inv);
    free_lists(&L);
  }
}

/* ------------------------------------------------------------ fused steps */

typedef struct ref_opt {
  int op, flags;
  double lr, b1, b2, wd, eps;
} ref_opt;

/* One step of one element in double (torch.optim's documented algorithms). */
static void ref_step(const ref_opt *o, double step, double *p, double *g, double *m, double *v,
                     double *vmax, double gscale) {
  double grad = *g / gscale;
  *g = grad;
  if (o->flags & NK_OPTIM_MAXIMIZE) grad = -grad;
  switch (o->op) {
  case NK_OPTIM_ADAM:
  case NK_OPTIM_ADAMW: {
    if (o->op == NK_OPTIM_ADAMW) *p *= 1 - o->lr * o->wd;
    else grad += o->wd * *p;
    *m = *m + (1 - o->b1) * (grad - *m);
    *v = *v * o->b2 + (1 - o->b2) * grad * grad;
    double vv = *v;
    if (o->flags & NK_OPTIM_AMSGRAD) vv = *vmax = *vmax > *v ? *vmax : *v;
    double bc1 = 1 - pow(o->b1, step), bc2 = 1 - pow(o->b2, step);
    *p -= o->lr / bc1 * *m / (sqrt(vv) / sqrt(bc2) + o->eps);
    break;
  }
  case NK_OPTIM_SGD:
    grad += o->wd * *p;
    if (o->b1 != 0) {
      *m = (o->flags & NK_OPTIM_FIRST_STEP) ? grad : *m * o->b1 + (1 - o->b2) * grad;
      grad = (o->flags & NK_OPTIM_NESTEROV) ? grad + o->b1 * *m : *m;
    }
    *p -= o->lr * grad;
    break;
  default: { /* Adagrad: b1 = lr_decay */
    grad += o->wd * *p;
    *m += grad * grad;
    double clr = o->lr / (1 + (step - 1) * o->b1);
    *p -= clr * grad / (sqrt(*m) + o->eps);
  }
  }
}

static void run_fused(const ref_opt *o, nrt_dtype t, int scaled, int skip) {
  nrt_dtype dt[NK_FOREACH_SLOTS] = {t, t, t, t, t, NRT_FLOAT32};
  unsigned mask = 1u | 2u | 4u | 8u | 16u | 32u;
  lists L;
  make_lists(&L, mask, dt, 0);
  /* state starts at zero / positive, steps at 1 */
  for (int tt = 0; tt < NT; tt++)
    for (int64_t i = 0; i < sizes_[tt]; i++) {
      st(t, L.data[3][tt], i, 0.01 * fabs(init_value(3, tt, i)));
      st(t, L.data[4][tt], i, 0.02);
      st(t, L.data[2][tt], i, 0.1 * fabs(init_value(2, tt, i)));
    }
  for (int tt = 0; tt < NT; tt++) st(NRT_FLOAT32, L.data[5][tt], 0, 1);
  int64_t total = 0;
  for (int tt = 0; tt < NT; tt++) total += sizes_[tt];
  double *ref = malloc((size_t)total * 5 * sizeof(double));
  int64_t at = 0;
  for (int tt = 0; tt < NT; tt++)
    for (int64_t i = 0; i < sizes_[tt]; i++, at++)
      for (int k = 0; k < 5; k++) ref[at * 5 + k] = ld(t, L.data[k][tt], i);
  float *gscale = tk_alloc(4), *found = tk_alloc(4);
  *gscale = 4.0f;
  *found = skip ? 1.0f : 0.0f;
  nk_optim_params prm = {.sets = L.sets, .n_tensors = NT, .n_blocks = L.n_blocks, .op = o->op,
                         .flags = o->flags, .dtype = t, .step_dtype = NRT_FLOAT32,
                         .grad_scale = scaled ? gscale : NULL, .found_inf = found, .lr = o->lr,
                         .beta1 = o->b1, .beta2 = o->b2, .weight_decay = o->wd, .eps = o->eps};
  ref_opt ro = *o;
  for (int step = 1; step <= 3; step++) {
    for (int tt = 0; tt < NT; tt++) st(NRT_FLOAT32, L.data[5][tt], 0, step);
    nrt_task task = table_task(NK_KERNEL_FUSED_OPTIM, &L, &prm, sizeof prm);
    CHECK_OK(tk_run(&task));
    if (!skip) {
      at = 0;
      for (int tt = 0; tt < NT; tt++)
        for (int64_t i = 0; i < sizes_[tt]; i++, at++) {
          double *r = &ref[at * 5];
          ref_step(&ro, step, &r[0], &r[1], &r[2], &r[3], &r[4], scaled ? 4.0 : 1.0);
          /* the kernel works from the stored (rounded) grads and state each step */
          for (int k = 1; k < 5; k++) r[k] = ld(t, L.data[k][tt], i);
        }
    }
    prm.flags &= ~NK_OPTIM_FIRST_STEP;
    ro.flags &= ~NK_OPTIM_FIRST_STEP;
  }
  int bad = 0;
  at = 0;
  for (int tt = 0; tt < NT; tt++)
    for (int64_t i = 0; i < sizes_[tt]; i++, at++) {
      double got = ld(t, L.data[0][tt], i), want = ref[at * 5];
      if (skip) { /* found_inf: nothing moved, bit for bit */
        uint64_t tmp = 0;
        st(t, &tmp, 0, init_value(0, tt, i));
        want = ld(t, &tmp, 0);
        if (got != want) bad++;
        continue;
      }
      if (!(fabs(got - want) <= 8 * tol(t) * (fabs(want) + 1))) { /* params are O(1) */
        if (bad++ < 3)
          fprintf(stderr, "  fused op %d flags %d %s tensor %d [%lld]: got %.9g want %.9g\n",
                  o->op, o->flags, tk_dtype_names[t], tt, (long long)i, got, want);
      }
    }
  CHECK(bad == 0);
  free(ref);
  tk_free(gscale), tk_free(found);
  free_lists(&L);
}

static void test_fused(void) {
  const nrt_dtype dts[4] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  const ref_opt cases[] = {
      {NK_OPTIM_ADAM, 0, 1e-2, 0.9, 0.999, 0, 1e-8},
      {NK_OPTIM_ADAM, NK_OPTIM_AMSGRAD | NK_OPTIM_MAXIMIZE, 1e-2, 0.9, 0.99, 0.1, 1e-6},
      {NK_OPTIM_ADAMW, 0, 1e-2, 0.9, 0.999, 0.01, 1e-8},
      {NK_OPTIM_ADAMW, NK_OPTIM_AMSGRAD, 1e-3, 0.3, 0.999, 0.5, 1e-8}, /* lerp weight >= .5 */
      {NK_OPTIM_SGD, NK_OPTIM_FIRST_STEP, 0.1, 0.9, 0.1, 0.01, 0},
      {NK_OPTIM_SGD, NK_OPTIM_FIRST_STEP | NK_OPTIM_NESTEROV | NK_OPTIM_MAXIMIZE, 0.1, 0.9, 0, 0, 0},
      {NK_OPTIM_SGD, 0, 0.1, 0, 0, 0.01, 0},
      {NK_OPTIM_ADAGRAD, 0, 0.1, 0.01, 0, 0.01, 1e-10},
  };
  for (int d = 0; d < 4; d++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) run_fused(&cases[c], dts[d], 0, 0);
  run_fused(&cases[1], NRT_FLOAT32, 1, 0);
  run_fused(&cases[4], NRT_FLOAT32, 1, 0);
  run_fused(&cases[0], NRT_FLOAT32, 1, 1);
  run_fused(&cases[7], NRT_FLOAT64, 1, 1);
}

static void test_update_scale(void) {
  float *scale = tk_alloc(4), *found = tk_alloc(4);
  int32_t *tracker = tk_alloc(4);
  nrt_operand ops[3] = {tk_operand(scale, NRT_FLOAT32, 0, NULL, NULL),
                        tk_operand(tracker, NRT_INT32, 0, NULL, NULL),
                        tk_operand(found, NRT_FLOAT32, 0, NULL, NULL)};
  nk_amp_update_scale_params prm = {2.0, 0.5, 3};
  nrt_task task = tk_task(NK_KERNEL_AMP_UPDATE_SCALE, 3, ops, &prm, sizeof prm);
  *scale = 1024;
  *tracker = 1;
  *found = 1;
  CHECK_OK(tk_run(&task));
  CHECK(*scale == 512 && *tracker == 0);
  *found = 0;
  CHECK_OK(tk_run(&task));
  CHECK_OK(tk_run(&task));
  CHECK(*scale == 512 && *tracker == 2);
  CHECK_OK(tk_run(&task));
  CHECK(*scale == 1024 && *tracker == 0);
  *scale = 3e38f; /* growing would overflow: kept */
  *tracker = 2;
  CHECK_OK(tk_run(&task));
  CHECK(*scale == 3e38f && *tracker == 0);
  ops[1].dtype = NRT_INT64;
  task = tk_task(NK_KERNEL_AMP_UPDATE_SCALE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "must be one int32"));
  tk_free(scale), tk_free(found), tk_free(tracker);
}

static void test_validation(void) {
  nrt_dtype dt[NK_FOREACH_SLOTS] = {NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32,
                                    NRT_FLOAT32, NRT_FLOAT32};
  lists L;
  make_lists(&L, 7u, dt, 1);
  nk_foreach_params prm = {.sets = L.sets, .n_tensors = NT, .n_blocks = L.n_blocks,
                           .op = NK_FOREACH_ADD, .b_is_list = 1, .alpha = 1};
  memcpy(prm.dtype, dt, sizeof dt);
  nrt_task task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  prm.n_blocks += 1;
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "blocks"));
  prm.n_blocks -= 1;
  L.sets[3].first_block += 1;
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "first block"));
  L.sets[3].first_block -= 1;
  void *keep = L.sets[2].data[2];
  L.sets[2].data[2] = NULL;
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "has no data"));
  L.sets[2].data[2] = keep;
  prm.op = NK_FOREACH_OP_COUNT;
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "unknown op"));
  prm.op = NK_FOREACH_ADD;
  prm.dtype[2] = NRT_INT32;
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "only floating"));
  prm.dtype[2] = NRT_FLOAT32;
  prm.n_tensors = NT + 1; /* more rows than the table operand holds */
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "table operand"));
  prm.n_tensors = NT;
  prm.op = NK_FOREACH_NORM;
  prm.alpha = 0;
  task = table_task(NK_KERNEL_FOREACH, &L, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "not supported"));
  nk_optim_params op = {.sets = L.sets, .n_tensors = NT, .n_blocks = L.n_blocks,
                        .op = NK_OPTIM_ADAM, .dtype = NRT_FLOAT32, .step_dtype = NRT_FLOAT32};
  task = table_task(NK_KERNEL_FUSED_OPTIM, &L, &op, sizeof op);
  CHECK(tk_fails_with(&task, "has no data")); /* adam needs slots 3 and 5 */
  op.op = 9;
  task = table_task(NK_KERNEL_FUSED_OPTIM, &L, &op, sizeof op);
  CHECK(tk_fails_with(&task, "unknown op"));
  free_lists(&L);
}

static void tests(void) {
  test_elementwise();
  test_special_cases();
  test_norms();
  test_unscale();
  test_fused();
  test_update_scale();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
