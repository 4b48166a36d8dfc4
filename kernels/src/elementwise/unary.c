/* unary.c — NK_KERNEL_UNARY (out <- op(x)) and NK_KERNEL_UNARY_BACKWARD
 * (out <- op(a, b)) over strided, broadcast, mixed-dtype operands.
 *
 * One op table (unary_ops.h) serves both kernels; per task the op's
 * parameters are converted once (nk_unary_prepare) and the op is checked
 * against the compute class.  Inner loops, picked per row:
 *   - vectorised (unary_avx2_f32.c): float32 throughout, every operand
 *     contiguous, for the ops that have a vector body (forward and backward);
 *   - same dtype: every operand and the compute in float32, float64,
 *     float16 or bfloat16, each (dtype, op) a loop of its own, so the op's
 *     switch folds away and contiguous rows get constant strides;
 *   - mixed: each operand loaded from its own dtype into the compute class,
 *     the result rounded to the compute dtype and stored in out's dtype.
 * Predicates (isnan, signbit, logical_not, ...) compute on x's own dtype and
 * store 0/1 into any out dtype.  Dense rows of the predicates into bool and
 * of the bool/integer ops run unary_rows.c's loops instead of the mixed
 * one. */
#include <stdio.h>

#include "elementwise/unary_ops.h"

#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "elementwise/unary_rows.h"
#include "elementwise/unary_simd.h"
#include "common/validate.h"

/* which compute classes each op takes (see neuron_kernels.h) */
static uint8_t unary_classes(nk_unary_op op) {
  switch (op) {
  case NK_UNARY_ABS: case NK_UNARY_SIGN: return NK_UC_F | NK_UC_I | NK_UC_B;
  case NK_UNARY_NEG: case NK_UNARY_RELU: case NK_UNARY_CLAMP: return NK_UC_F | NK_UC_I;
  case NK_UNARY_BITWISE_NOT: return NK_UC_I | NK_UC_B;
  default: return op >= NK_UNARY_ISNAN ? NK_UC_P : NK_UC_F;
  }
}

static uint8_t class_bit(nk_class c) {
  return c == NK_CLASS_BOOL ? NK_UC_B : c == NK_CLASS_INT ? NK_UC_I : NK_UC_F;
}

/* Parameters in every class, with the derived constants ATen computes once
 * per call.  Floating bounds are rounded to the compute dtype (ATen converts
 * them to scalar_t), the rest converted as ATen's kernels do. */
static void prepare(bool backward, int op, nrt_dtype compute, const nk_scalar *s, nk_uprm *p) {
  memset(p, 0, sizeof *p);
  p->tc = compute;
  for (int k = 0; k < 3; k++) {
    p->d[k] = s[k].f;
    p->f[k] = (float)s[k].f;
    p->i[k] = s[k].i;
  }
  const bool logit = backward ? op == NK_UNARY_BW_LOGIT : op == NK_UNARY_LOGIT;
  const bool elu = backward ? (op == NK_UNARY_BW_ELU || op == NK_UNARY_BW_ELU_RESULT)
                            : op == NK_UNARY_ELU;
  if (logit) {
    double eps = s[0].f;
    /* forward: NaN or negative eps means none; backward: only negative */
    p->flag = backward ? !(eps < 0) : eps >= 0;
    float lo = nk_round_f32(compute, (float)eps);
    p->f[0] = lo;
    p->f[1] = nk_round_f32(compute, 1.0f - lo);
    p->d[0] = eps;
    p->d[1] = 1.0 - eps;
  } else if (elu) {
    /* negcoef = alpha * scale, poscoef = scale, negiptcoef = input_scale */
    p->f[0] = (float)s[0].f * (float)s[1].f;
    p->f[1] = (float)s[1].f;
    p->f[2] = (float)s[2].f;
    p->d[0] = s[0].f * s[1].f;
    p->d[1] = s[1].f;
    p->d[2] = s[2].f;
  } else if (!backward && op == NK_UNARY_ROUND_DECIMALS) {
    int64_t dec = s[0].i;
    p->flag = dec < 0;
    double ten = pow(10.0, (double)(dec < 0 ? -(double)dec : (double)dec));
    p->f[0] = (float)ten;
    p->d[0] = ten;
  }
}

/* ==================================================================== forward */

typedef struct unary_plan {
  nk_unary_op op;
  nrt_dtype out, in, compute;
  nk_uprm prm;
  nk_unary_vec_fn vec; /* set when the vectorised loop applies */
  nk_unary_half_fn vec_half; /* 16-bit rows in registers (NULL: none) */
  bool dense_rows; /* mixed_loop may try nk_unary_dense_row (unary_rows.h) */
} unary_plan;

NK_INLINE void unary_elem(const unary_plan *p, nrt_dtype to, nrt_dtype ti, nrt_dtype tc,
                          nk_unary_op op, void *o, const void *x) {
  if (op >= NK_UNARY_ISNAN) {
    bool r = nk_dtype_is_floating(ti) ? nk_unary_pred_f64(op, nk_load_f64(ti, x))
                                      : nk_unary_pred_i64(op, nk_load_integral(ti, x));
    nk_store_bool(to, o, r);
    return;
  }
  switch (nk_dtype_class(tc)) {
  case NK_CLASS_FLOAT: {
    float r = nk_unary_f32(op, nk_load_f32(ti, x), &p->prm);
    nk_store_f32(to, o, to == tc ? r : nk_round_f32(tc, r));
    break;
  }
  case NK_CLASS_DOUBLE: nk_store_f64(to, o, nk_unary_f64(op, nk_load_f64(ti, x), &p->prm)); break;
  case NK_CLASS_INT: {
    int64_t r = nk_unary_i64(op, nk_load_i64(ti, x), &p->prm);
    nk_store_i64(to, o, to == tc ? r : nk_wrap_i64(tc, r));
    break;
  }
  case NK_CLASS_BOOL: nk_store_bool(to, o, nk_unary_bool(op, nk_load_bool(ti, x))); break;
  }
}

NK_INLINE void same_row(const unary_plan *p, nrt_dtype t, nk_unary_op op, int64_t n,
                        char *const *data, const int64_t *s) {
  const int64_t es = (int64_t)nk_dtype_size(t);
  char *o = data[0];
  const char *x = data[1];
  if (s[0] == es && s[1] == es)
    for (int64_t i = 0; i < n; i++) unary_elem(p, t, t, t, op, o + i * es, x + i * es);
  else
    for (int64_t i = 0; i < n; i++) unary_elem(p, t, t, t, op, o + i * s[0], x + i * s[1]);
}

/* every floating op, each a case with the op a constant */
#define NK_UNARY_FLOAT_OPS(X)                                                                      \
  X(NK_UNARY_ABS) X(NK_UNARY_NEG) X(NK_UNARY_SIGN) X(NK_UNARY_EXP) X(NK_UNARY_EXP2)                \
  X(NK_UNARY_EXPM1) X(NK_UNARY_LOG) X(NK_UNARY_LOG2) X(NK_UNARY_LOG10) X(NK_UNARY_LOG1P)           \
  X(NK_UNARY_SQRT) X(NK_UNARY_RSQRT) X(NK_UNARY_RECIPROCAL) X(NK_UNARY_SIN) X(NK_UNARY_COS)        \
  X(NK_UNARY_TAN) X(NK_UNARY_ASIN) X(NK_UNARY_ACOS) X(NK_UNARY_ATAN) X(NK_UNARY_SINH)              \
  X(NK_UNARY_COSH) X(NK_UNARY_TANH) X(NK_UNARY_ASINH) X(NK_UNARY_ACOSH) X(NK_UNARY_ATANH)          \
  X(NK_UNARY_SIGMOID) X(NK_UNARY_LOGIT) X(NK_UNARY_ERF) X(NK_UNARY_ERFC) X(NK_UNARY_ERFINV)        \
  X(NK_UNARY_LGAMMA) X(NK_UNARY_DIGAMMA) X(NK_UNARY_FLOOR) X(NK_UNARY_CEIL) X(NK_UNARY_ROUND)      \
  X(NK_UNARY_ROUND_DECIMALS) X(NK_UNARY_TRUNC) X(NK_UNARY_FRAC) X(NK_UNARY_RELU)                   \
  X(NK_UNARY_CLAMP) X(NK_UNARY_GELU) X(NK_UNARY_GELU_TANH) X(NK_UNARY_SILU) X(NK_UNARY_MISH)       \
  X(NK_UNARY_SOFTPLUS) X(NK_UNARY_ELU) X(NK_UNARY_LEAKY_RELU) X(NK_UNARY_HARDSIGMOID)              \
  X(NK_UNARY_HARDSWISH) X(NK_UNARY_NAN_TO_NUM) X(NK_UNARY_SINC) X(NK_UNARY_HARDSHRINK)              \
  X(NK_UNARY_SOFTSHRINK) X(NK_UNARY_LOG_SIGMOID) X(NK_UNARY_POLYGAMMA)

NK_INLINE void same_ops(const unary_plan *p, nrt_dtype t, int64_t n, char *const *data,
                        const int64_t *s) {
#define NK_CASE(OP) case OP: same_row(p, t, OP, n, data, s); break;
  switch (p->op) {
    NK_UNARY_FLOAT_OPS(NK_CASE)
  default:
    for (int64_t i = 0; i < n; i++)
      unary_elem(p, t, t, t, p->op, data[0] + i * s[0], data[1] + i * s[1]);
    break;
  }
#undef NK_CASE
}

static void same_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const unary_plan *p = ctx;
  if (p->vec && s[0] == 4 && s[1] == 4 &&
      p->vec(p->op, n, (float *)data[0], (const float *)data[1], &p->prm))
    return;
  switch (p->out) {
  case NRT_FLOAT64: same_ops(p, NRT_FLOAT64, n, data, s); break;
  default: same_ops(p, NRT_FLOAT32, n, data, s); break; /* float32 rows, or widened 16-bit */
  }
}

/* The float-rows adapter's raw-row hook: a contiguous 16-bit row in its own
 * dtype goes through the in-register loop when the op has a vector body. */
static bool half_row(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const unary_plan *p = ctx;
  return p->vec_half && s[0] == 2 && s[1] == 2 && p->vec_half(p->op, p->out, n, data[0], data[1]);
}

static void mixed_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const unary_plan *p = ctx;
  const int64_t so = (int64_t)nk_dtype_size(p->out), si = (int64_t)nk_dtype_size(p->in);
  if (p->dense_rows && s[0] == so && s[1] == si && (uintptr_t)data[0] % (uintptr_t)so == 0 &&
      (uintptr_t)data[1] % (uintptr_t)si == 0 &&
      nk_unary_dense_row(p->op, p->in, p->out, n, data[0], data[1]))
    return;
  for (int64_t i = 0; i < n; i++)
    unary_elem(p, p->out, p->in, p->compute, p->op, data[0] + i * s[0], data[1] + i * s[1]);
}

int nk_unary_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_elementwise(task, ctx, "unary", 2)) return -1;
  const nk_unary_params *prm = (const nk_unary_params *)task->params;
  if (prm->op < 0 || prm->op >= NK_UNARY_OP_COUNT) {
    nrt_exec_fail(ctx, "unary: invalid op %d", (int)prm->op);
    return -1;
  }
  if (!nk_dtype_valid(prm->compute)) {
    nrt_exec_fail(ctx, "unary: invalid compute dtype %d", (int)prm->compute);
    return -1;
  }
  unary_plan p;
  p.op = (nk_unary_op)prm->op;
  p.out = (nrt_dtype)task->operands[0].dtype;
  p.in = (nrt_dtype)task->operands[1].dtype;
  p.compute = (nrt_dtype)prm->compute;
  const uint8_t classes = unary_classes(p.op);
  if (!(classes & NK_UC_P) && !(classes & class_bit(nk_dtype_class(p.compute)))) {
    nrt_exec_fail(ctx, "unary: op %d does not take compute dtype %d", (int)p.op, (int)p.compute);
    return -1;
  }
  prepare(false, p.op, p.compute, prm->p, &p.prm);
  /* a predicate reads x in its own dtype; another op's dense row computes in
   * x's dtype, so the compute dtype must be it */
  p.dense_rows = p.op >= NK_UNARY_ISNAN || p.compute == p.in;
  const bool same = !(classes & NK_UC_P) && p.out == p.compute && p.in == p.compute &&
                    nk_dtype_is_floating(p.compute);
  const bool f32_or_half = p.compute == NRT_FLOAT32 || p.compute == NRT_FLOAT16 ||
                          p.compute == NRT_BFLOAT16;
  p.vec = same && f32_or_half ? nk_unary_pick_vec() : NULL;
  p.vec_half = same && p.compute != NRT_FLOAT32 ? nk_unary_pick_half() : NULL;
  if (same && f32_or_half) /* 16-bit rows in registers, or widened to float32 */
    nk_for_each_float_plan(task->operands, 2, same_loop, p.vec_half ? half_row : NULL, &p, sizeof p);
  else
    nk_for_each_plan(task->operands, 2, same ? same_loop : mixed_loop, &p, sizeof p);
  return 0;
}

/* The captured routine as one expression, for adaptive eager's compiled
 * groups (nrt_row_expr): an op with a vector body (unary_vec_body.h) on
 * float32 rows, or on 16-bit rows of one dtype that the float-rows adapter
 * widens (the AVX-512 in-register loop gives the same bits), which its
 * contiguous rows run -- the compiled groups take dense rows only. */
bool nk_unary_row_expr(const nrt_row_entry *entry, nrt_row_expr *x) {
  const void *pv;
  if (nk_captured_loop(entry, &pv) != same_loop) return false;
  const unary_plan *p = pv;
  const bool float_rows = p->out == NRT_FLOAT32 || p->out == NRT_FLOAT16 || p->out == NRT_BFLOAT16;
  if (!float_rows || p->in != p->out || p->compute != p->out || !p->vec) return false;
  switch (p->op) {
#define NK_VEC_CASE(OP) case OP:
    NK_UNARY_VEC_OPS(NK_VEC_CASE)
#undef NK_VEC_CASE
    break;
  default: return false;
  }
  snprintf(x->code, sizeof x->code, "nk_unary_vec_body((nk_unary_op)%d, $1)", (int)p->op);
  x->in_dtype[1] = (uint8_t)p->in;
  x->dense_inputs = true; /* a stride-0 input takes the scalar code */
  x->n_scalars = 0;
  return true;
}

/* =================================================================== backward */

typedef struct bw_plan {
  nk_unary_backward_op op;
  nrt_dtype out, a, b, compute;
  nk_uprm prm;
  nk_unary_bw_vec_fn vec; /* set when the vectorised loop applies */
} bw_plan;

NK_INLINE void bw_elem(const bw_plan *p, nrt_dtype to, nrt_dtype ta, nrt_dtype tb, nrt_dtype tc,
                       nk_unary_backward_op op, void *o, const void *a, const void *b) {
  switch (nk_dtype_class(tc)) {
  case NK_CLASS_FLOAT: {
    float r = nk_unary_bw_f32(op, nk_load_f32(ta, a), nk_load_f32(tb, b), &p->prm);
    nk_store_f32(to, o, to == tc ? r : nk_round_f32(tc, r));
    break;
  }
  case NK_CLASS_DOUBLE:
    nk_store_f64(to, o, nk_unary_bw_f64(op, nk_load_f64(ta, a), nk_load_f64(tb, b), &p->prm));
    break;
  default: {
    int64_t r = nk_unary_bw_i64(op, nk_load_i64(ta, a), nk_load_i64(tb, b), &p->prm);
    nk_store_i64(to, o, to == tc ? r : nk_wrap_i64(tc, r));
    break;
  }
  }
}

NK_INLINE void bw_same_row(const bw_plan *p, nrt_dtype t, nk_unary_backward_op op, int64_t n,
                           char *const *data, const int64_t *s) {
  const int64_t es = (int64_t)nk_dtype_size(t);
  char *o = data[0];
  const char *a = data[1], *b = data[2];
  if (s[0] == es && s[1] == es && s[2] == es)
    for (int64_t i = 0; i < n; i++) bw_elem(p, t, t, t, t, op, o + i * es, a + i * es, b + i * es);
  else
    for (int64_t i = 0; i < n; i++)
      bw_elem(p, t, t, t, t, op, o + i * s[0], a + i * s[1], b + i * s[2]);
}

#define NK_UNARY_BW_OPS(X)                                                                         \
  X(NK_UNARY_BW_SIGMOID) X(NK_UNARY_BW_TANH) X(NK_UNARY_BW_LOGIT) X(NK_UNARY_BW_GELU)              \
  X(NK_UNARY_BW_GELU_TANH) X(NK_UNARY_BW_SILU) X(NK_UNARY_BW_MISH) X(NK_UNARY_BW_SOFTPLUS)         \
  X(NK_UNARY_BW_ELU) X(NK_UNARY_BW_ELU_RESULT) X(NK_UNARY_BW_LEAKY_RELU) X(NK_UNARY_BW_HARDTANH)   \
  X(NK_UNARY_BW_HARDSIGMOID) X(NK_UNARY_BW_HARDSWISH) X(NK_UNARY_BW_THRESHOLD)                     \
  X(NK_UNARY_BW_SHRINK) X(NK_UNARY_BW_LOG_SIGMOID)

NK_INLINE void bw_same_ops(const bw_plan *p, nrt_dtype t, int64_t n, char *const *data,
                           const int64_t *s) {
#define NK_CASE(OP) case OP: bw_same_row(p, t, OP, n, data, s); break;
  switch (p->op) {
    NK_UNARY_BW_OPS(NK_CASE)
  default: break;
  }
#undef NK_CASE
}

static void bw_same_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const bw_plan *p = ctx;
  if (p->vec && s[0] == 4 && s[1] == 4 && s[2] == 4 &&
      p->vec(p->op, n, (float *)data[0], (const float *)data[1], (const float *)data[2], &p->prm))
    return;
  switch (p->out) {
  case NRT_FLOAT64: bw_same_ops(p, NRT_FLOAT64, n, data, s); break;
  default: bw_same_ops(p, NRT_FLOAT32, n, data, s); break; /* float32 rows, or widened 16-bit */
  }
}

static void bw_mixed_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const bw_plan *p = ctx;
  for (int64_t i = 0; i < n; i++)
    bw_elem(p, p->out, p->a, p->b, p->compute, p->op, data[0] + i * s[0], data[1] + i * s[1],
            data[2] + i * s[2]);
}

int nk_unary_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_elementwise(task, ctx, "unary_backward", 3)) return -1;
  const nk_unary_params *prm = (const nk_unary_params *)task->params;
  if (prm->op < 0 || prm->op >= NK_UNARY_BW_OP_COUNT) {
    nrt_exec_fail(ctx, "unary_backward: invalid op %d", (int)prm->op);
    return -1;
  }
  if (!nk_dtype_valid(prm->compute)) {
    nrt_exec_fail(ctx, "unary_backward: invalid compute dtype %d", (int)prm->compute);
    return -1;
  }
  bw_plan p;
  p.op = (nk_unary_backward_op)prm->op;
  p.out = (nrt_dtype)task->operands[0].dtype;
  p.a = (nrt_dtype)task->operands[1].dtype;
  p.b = (nrt_dtype)task->operands[2].dtype;
  p.compute = (nrt_dtype)prm->compute;
  const nk_class cls = nk_dtype_class(p.compute);
  const bool floating = cls == NK_CLASS_FLOAT || cls == NK_CLASS_DOUBLE;
  if (!floating && !(cls == NK_CLASS_INT && p.op == NK_UNARY_BW_THRESHOLD)) {
    nrt_exec_fail(ctx, "unary_backward: op %d does not take compute dtype %d", (int)p.op,
                  (int)p.compute);
    return -1;
  }
  prepare(true, p.op, p.compute, prm->p, &p.prm);
  const bool same = floating && p.out == p.compute && p.a == p.compute && p.b == p.compute;
  const bool f32_or_half = p.compute == NRT_FLOAT32 || p.compute == NRT_FLOAT16 ||
                           p.compute == NRT_BFLOAT16;
  p.vec = same && f32_or_half ? nk_unary_bw_pick_vec() : NULL;
  if (same && f32_or_half)
    nk_for_each_float_plan(task->operands, 3, bw_same_loop, NULL, &p, sizeof p); /* 16-bit rows widened to float32 */
  else
    nk_for_each_plan(task->operands, 3, same ? bw_same_loop : bw_mixed_loop, &p, sizeof p);
  return 0;
}
