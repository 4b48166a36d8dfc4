/* binary.c — NK_KERNEL_BINARY: out <- op(a, b) over strided, broadcast,
 * mixed-dtype operands.
 *
 * Three inner loops, picked per row:
 *   - vectorised (binary_<isa>_<dtype>.c): all float32 or all float64, out
 *     contiguous, a and b contiguous or broadcast scalars;
 *   - same dtype: every operand and the compute in one dtype, each
 *     (dtype, op) a loop of its own (contiguous rows get constant strides,
 *     which the compiler vectorises);
 *   - mixed: each operand loaded from its own dtype into the compute class,
 *     the result rounded to the compute dtype (as ATen's common dtype is)
 *     and stored in the out dtype.
 * Float rows computed in float32 (float16/bfloat16 compute, or float32
 * compute with 16-bit operands under autocast) skip the per-element dtype
 * switches: they run through nd_iter's float-rows adapter (nk_for_each_float,
 * which widens 16-bit chunks and rounds the output back once) with
 * float32's vector loop; on AVX-512 the commonest of them -- all 16-bit in
 * one dtype, contiguous or broadcast along the row -- are first offered to
 * the fused loop of binary_avx512_half.c (conversions in registers, no
 * chunk buffers: 1.5-2x faster, the same bits).  A Python number (a float64
 * or int64 stride-0 operand) is converted to float32 once per task, before
 * any row runs. */
#include <stdio.h>

#include "elementwise/binary_simd.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

typedef struct binary_plan {
  nk_binop kind;
  nrt_dtype out, a, b, compute;
  nk_alpha alpha;
  bool same;            /* every operand and the compute in one dtype */
  nk_binary_vec_fn vec; /* set when the vectorised loop applies */
  nk_binary_vec_fn vec_f32; /* float32's vector loop, for float_loop (NULL: none) */
  nk_binary_half_fn vec_half; /* fused 16-bit rows, for half_row (NULL: none) */
} binary_plan;

/* One element; every dtype and the kind are constants in the same-dtype
 * loops, so this folds to a load, the op and a store. */
NK_INLINE void binary_elem(const binary_plan *p, nrt_dtype to, nrt_dtype ta, nrt_dtype tb,
                           nrt_dtype tc, nk_binop k, void *o, const void *a, const void *b) {
  switch (nk_dtype_class(tc)) {
  case NK_CLASS_FLOAT: {
    float r = nk_binop_f32(k, nk_load_f32(ta, a), nk_load_f32(tb, b), &p->alpha);
    nk_store_f32(to, o, to == tc ? r : nk_round_f32(tc, r));
    break;
  }
  case NK_CLASS_DOUBLE:
    nk_store_f64(to, o, nk_binop_f64(k, nk_load_f64(ta, a), nk_load_f64(tb, b), &p->alpha));
    break;
  case NK_CLASS_INT: {
    int64_t r = nk_binop_i64(k, nk_load_i64(ta, a), nk_load_i64(tb, b), &p->alpha);
    nk_store_i64(to, o, to == tc ? r : nk_wrap_i64(tc, r));
    break;
  }
  case NK_CLASS_BOOL:
    nk_store_bool(to, o, nk_binop_bool(k, nk_load_bool(ta, a), nk_load_bool(tb, b), &p->alpha));
    break;
  }
}

NK_INLINE void same_dtype_row(const binary_plan *p, nrt_dtype t, nk_binop k, int64_t n,
                              char *const *data, const int64_t *s) {
  const int64_t es = (int64_t)nk_dtype_size(t);
  char *o = data[0];
  const char *a = data[1], *b = data[2];
  if (s[0] == es && s[1] == es && s[2] == es)
    for (int64_t i = 0; i < n; i++) binary_elem(p, t, t, t, t, k, o + i * es, a + i * es, b + i * es);
  else
    for (int64_t i = 0; i < n; i++)
      binary_elem(p, t, t, t, t, k, o + i * s[0], a + i * s[1], b + i * s[2]);
}

NK_INLINE void same_dtype_kinds(const binary_plan *p, nrt_dtype t, int64_t n, char *const *data,
                                const int64_t *s) {
  switch (p->kind) {
  case NK_BINOP_ADD: same_dtype_row(p, t, NK_BINOP_ADD, n, data, s); break;
  case NK_BINOP_AXPY: same_dtype_row(p, t, NK_BINOP_AXPY, n, data, s); break;
  case NK_BINOP_MUL: same_dtype_row(p, t, NK_BINOP_MUL, n, data, s); break;
  default: same_dtype_row(p, t, NK_BINOP_DIV, n, data, s); break;
  }
}

static void same_dtype_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const binary_plan *p = ctx;
  const int64_t es = (int64_t)nk_dtype_size(p->out);
  if (p->vec && s[0] == es && (s[1] == es || s[1] == 0) && (s[2] == es || s[2] == 0)) {
    p->vec(p->kind, n, data[0], data[1], s[1] == 0, data[2], s[2] == 0, &p->alpha);
    return;
  }
  switch (p->out) {
  case NRT_BOOL: same_dtype_kinds(p, NRT_BOOL, n, data, s); break;
  case NRT_UINT8: same_dtype_kinds(p, NRT_UINT8, n, data, s); break;
  case NRT_INT8: same_dtype_kinds(p, NRT_INT8, n, data, s); break;
  case NRT_INT16: same_dtype_kinds(p, NRT_INT16, n, data, s); break;
  case NRT_INT32: same_dtype_kinds(p, NRT_INT32, n, data, s); break;
  case NRT_INT64: same_dtype_kinds(p, NRT_INT64, n, data, s); break;
  case NRT_FLOAT16: same_dtype_kinds(p, NRT_FLOAT16, n, data, s); break;
  case NRT_BFLOAT16: same_dtype_kinds(p, NRT_BFLOAT16, n, data, s); break;
  case NRT_FLOAT32: same_dtype_kinds(p, NRT_FLOAT32, n, data, s); break;
  case NRT_FLOAT64: same_dtype_kinds(p, NRT_FLOAT64, n, data, s); break;
  case NRT_DTYPE_COUNT: break;
  }
}

NK_INLINE void mixed_row(const binary_plan *p, nk_binop k, int64_t n, char *const *data,
                         const int64_t *s) {
  for (int64_t i = 0; i < n; i++)
    binary_elem(p, p->out, p->a, p->b, p->compute, k, data[0] + i * s[0], data[1] + i * s[1],
                data[2] + i * s[2]);
}

static void mixed_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const binary_plan *p = ctx;
  switch (p->kind) {
  case NK_BINOP_ADD: mixed_row(p, NK_BINOP_ADD, n, data, s); break;
  case NK_BINOP_AXPY: mixed_row(p, NK_BINOP_AXPY, n, data, s); break;
  case NK_BINOP_MUL: mixed_row(p, NK_BINOP_MUL, n, data, s); break;
  default: mixed_row(p, NK_BINOP_DIV, n, data, s); break;
  }
}

/* Float rows computed in float32 (compute float32, float16 or bfloat16),
 * run by nd_iter's float-rows adapter (nk_for_each_float): float16/bfloat16
 * operands arrive widened to float32 chunks and the output is rounded once
 * to its dtype on the way back -- element for element what the mixed loop
 * computes (load to float, op in float, round).  float32 operands arrive in
 * place with their own strides. */
static void float_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const binary_plan *p = ctx;
  if (p->vec_f32 && s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
    p->vec_f32(p->kind, n, data[0], data[1], s[1] == 0, data[2], s[2] == 0, &p->alpha);
    return;
  }
  same_dtype_kinds(p, NRT_FLOAT32, n, data, s);
}

/* The adapter's raw-row hook: a row whose out is 16-bit and contiguous,
 * each input contiguous in out's dtype or broadcast along the row (stride
 * 0, any float dtype: converted to float here), runs the fused AVX-512 loop
 * (binary_avx512_half.c); anything else is widened by the adapter. */
static bool half_row(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const binary_plan *p = ctx;
  if (s[0] != 2 || (p->out != NRT_FLOAT16 && p->out != NRT_BFLOAT16)) return false;
  float v[2];
  const float *bc[2] = {NULL, NULL};
  const nrt_dtype in[2] = {p->a, p->b};
  for (int k = 0; k < 2; k++) {
    if (s[k + 1] == 0) {
      v[k] = nk_load_f32(in[k], data[k + 1]);
      bc[k] = &v[k];
    } else if (s[k + 1] != 2 || in[k] != p->out) {
      return false;
    }
  }
  p->vec_half(p->out, p->kind, n, data[0], data[1], bc[0], data[2], bc[1], &p->alpha);
  return true;
}

static nk_binary_vec_fn pick_vec(nrt_dtype t) {
  static const nk_binary_vec_fn f32[] = {NULL, nk_binary_avx2_f32, nk_binary_avx512_f32};
  static const nk_binary_vec_fn f64[] = {NULL, nk_binary_avx2_f64, nk_binary_avx512_f64};
  nk_isa isa = nk_cpu_isa();
  return t == NRT_FLOAT32 ? f32[isa] : t == NRT_FLOAT64 ? f64[isa] : NULL;
}

/* Lowers (op, alpha) to a kind and alpha in the compute class: sub is add
 * of -alpha; add with alpha == 1 is a plain add. */
static int plan_binary(const nrt_task *task, nrt_exec_ctx *ctx, binary_plan *p) {
  const nk_binary_params *prm = (const nk_binary_params *)task->params;
  if (prm->op < 0 || prm->op >= NK_BINARY_OP_COUNT) {
    nrt_exec_fail(ctx, "binary: invalid op %d", (int)prm->op);
    return -1;
  }
  if (!nk_dtype_valid(prm->compute)) {
    nrt_exec_fail(ctx, "binary: invalid compute dtype %d", (int)prm->compute);
    return -1;
  }
  p->out = (nrt_dtype)task->operands[0].dtype;
  p->a = (nrt_dtype)task->operands[1].dtype;
  p->b = (nrt_dtype)task->operands[2].dtype;
  p->compute = (nrt_dtype)prm->compute;
  nk_class cls = nk_dtype_class(p->compute);
  if (prm->op == NK_BINARY_DIV && cls != NK_CLASS_FLOAT && cls != NK_CLASS_DOUBLE) {
    nrt_exec_fail(ctx, "binary: true division needs a floating compute dtype, got dtype %d",
                  (int)prm->compute);
    return -1;
  }
  if (prm->op == NK_BINARY_SUB && cls == NK_CLASS_BOOL) {
    nrt_exec_fail(ctx, "binary: subtraction with bool tensors is not supported");
    return -1;
  }

  int negate = prm->op == NK_BINARY_SUB;
  double af = negate ? -prm->alpha.f : prm->alpha.f;
  int64_t ai = negate ? (int64_t)(0 - (uint64_t)prm->alpha.i) : prm->alpha.i;
  p->alpha = (nk_alpha){.f32 = (float)af, .f64 = af, .i64 = ai, .b = ai != 0};
  int alpha_is_one = cls == NK_CLASS_BOOL ? p->alpha.b
                     : cls == NK_CLASS_INT ? ai == 1
                     : cls == NK_CLASS_FLOAT ? p->alpha.f32 == 1.0f : af == 1.0;
  switch ((nk_binary_op)prm->op) {
  case NK_BINARY_ADD: case NK_BINARY_SUB:
    p->kind = alpha_is_one ? NK_BINOP_ADD : NK_BINOP_AXPY;
    break;
  case NK_BINARY_MUL: p->kind = NK_BINOP_MUL; break;
  default: p->kind = NK_BINOP_DIV; break;
  }
  return 0;
}

/* float32, float16 or bfloat16 (what float32 chunks hold exactly) */
static int is_float(nrt_dtype t) {
  return t == NRT_FLOAT32 || t == NRT_FLOAT16 || t == NRT_BFLOAT16;
}

static int is_broadcast_scalar(const nrt_operand *o) {
  for (int d = 0; d < o->ndim; d++)
    if (o->strides[d] != 0 && o->sizes[d] != 1) return 0;
  return 1;
}

int nk_binary_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  binary_plan plan;
  if (nk_check_elementwise(task, ctx, "binary", 3) || plan_binary(task, ctx, &plan)) return -1;
  /* x * 2.0: the Python number arrives as a float64 (or int64) scalar
   * broadcast over a float32 tensor, which would send every element down
   * the mixed-dtype loop (a dtype switch per load: 10x slower).  The mixed
   * loop converts it to float at each load anyway, so convert it once: the
   * same bits, and the vectorised loop applies. */
  nrt_operand ops[3] = {task->operands[0], task->operands[1], task->operands[2]};
  float scalar_f32[2];
  const int half = plan.compute == NRT_FLOAT16 || plan.compute == NRT_BFLOAT16;
  if (plan.compute == NRT_FLOAT32 || half)
    for (int i = 1; i <= 2; i++)
      if (ops[i].dtype != NRT_FLOAT32 && is_broadcast_scalar(&ops[i])) {
        scalar_f32[i - 1] = nk_load_f32((nrt_dtype)ops[i].dtype, ops[i].data);
        ops[i].data = &scalar_f32[i - 1];
        ops[i].dtype = NRT_FLOAT32;
      }
  plan.a = (nrt_dtype)ops[1].dtype;
  plan.b = (nrt_dtype)ops[2].dtype;
  plan.same = plan.out == plan.compute && plan.a == plan.compute && plan.b == plan.compute;
  plan.vec = plan.same ? pick_vec(plan.compute) : NULL;
  /* Float rows: float32 compute with float inputs and outputs of any
   * width (f32 + bf16 under autocast), or 16-bit compute with its own dtype
   * out (rounding to the compute dtype is then the store's rounding). */
  const int floats_in = is_float(plan.a) && is_float(plan.b);
  const int float_rows = !plan.vec && floats_in && is_float(plan.out) &&
                         (plan.compute == NRT_FLOAT32 || (half && plan.out == plan.compute));
  if (float_rows) {
    plan.vec_f32 = pick_vec(NRT_FLOAT32);
    static const nk_binary_half_fn half[NK_VARIANTS] = {NULL, NULL, nk_binary_avx512_half,
                                                        nk_binary_avx512bf16_half};
    plan.vec_half = half[nk_cpu_variant()];
    nk_for_each_float_plan(ops, 3, float_loop, plan.vec_half ? half_row : NULL, &plan, sizeof plan);
  } else {
    nk_for_each_plan(ops, 3, plan.same ? same_dtype_loop : mixed_loop, &plan, sizeof plan);
  }
  return 0;
}

/* The captured routine as one expression, for adaptive eager's compiled
 * groups (nrt_row_expr): float rows (float32 compute, or 16-bit compute
 * stored in its own dtype) and all-float32 rows compute, per element,
 * op(a, b) in float32 -- binary_vec_op.h's op, which the scalar tails, the
 * same-dtype loop and the AVX-512 16-bit rows match bit for bit -- on
 * operands read as their dtype (16-bit ones widen exactly), and the
 * adapter rounds the result to the output's dtype once, as the generated
 * code does after the expression. */
bool nk_binary_row_expr(const nrt_row_entry *entry, nrt_row_expr *x) {
  const void *pv;
  const nk_loop_fn loop = nk_captured_loop(entry, &pv);
  const binary_plan *p = pv;
  if (loop == same_dtype_loop ? !p->vec : loop != float_loop) return false;
  if (!is_float(p->out) || !is_float(p->a) || !is_float(p->b)) return false;
  snprintf(x->code, sizeof x->code, "nk_binop_vec((nk_binop)%d, $1, $2, #0)", (int)p->kind);
  x->in_dtype[1] = (uint8_t)p->a;
  x->in_dtype[2] = (uint8_t)p->b;
  x->n_scalars = 1;
  x->scalars[0] = p->alpha.f32;
  return true;
}
