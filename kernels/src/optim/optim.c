/* optim.c — multi-tensor kernels: torch's _foreach_* ops, the fused
 * Adam/AdamW/SGD/Adagrad steps, and GradScaler's two ops.
 *
 * Design decisions (the why):
 *   - One launch per list, whatever its length.  A task carries at most
 *     NRT_MAX_OPERANDS (8) operand descriptors, and an optimizer step needs
 *     4-6 tensors per parameter, so descriptors would mean one launch per one
 *     or two parameters (CUDA's multi_tensor_apply has the same problem with
 *     its 4 KB of kernel arguments and chunks the lists).  Instead the glue
 *     writes a table of nk_tensor_set rows (data pointer per list, numel,
 *     per-tensor scalar, first block) into pinned host memory that it keeps
 *     until the task has run, and the task points at it.  The same table
 *     carries a scratch area for per-block partials.
 *   - Only ATen's fast route comes here: every tensor of a row has the same
 *     sizes and strides and is non-overlapping and dense, so each is a flat
 *     run of numel elements.  Anything else (mixed dtypes or devices,
 *     complex, integers, overlapping or differently strided tensors) runs
 *     ATen's per-tensor slow path in the glue, on our per-tensor kernels.
 *   - Work is cut into blocks of NK_FOREACH_BLOCK elements per tensor; the
 *     blocks of all tensors are one index space split over the compute
 *     pool, so a list of many small tensors and a list of a few large ones
 *     both use every core, and each element is computed the same way
 *     whatever the thread count.  Reductions (norms, max, found_inf) keep a
 *     partial per block in the table's scratch and combine them in block
 *     order afterwards: deterministic.
 *   - A block is processed in tiles of NK_OPT_TILE elements: operands in
 *     the compute type are used where they lie, others are loaded into local
 *     arrays (float16/bfloat16 widened to float32, ATen's opmath); the op
 *     runs as simple loops over the tiles (element-wise, so an in-place
 *     launch may write where it reads), then a converted result is rounded
 *     and stored.  The op switch runs once per tile, not per element, and
 *     no dtype x op template explosion.
 *   - Adaptive eager runs queued foreach ops over the same lists as one
 *     group, chunk by chunk (nk_foreach_multi below,
 *     runtime/src/fusion_multi.c).
 *   - Fused optimizer steps follow ATen CPU's vectorised formulas (factors
 *     like 1 - beta1 computed in double and rounded to the compute type,
 *     exp_avg.lerp_ as one fmadd, grad unscaled by division) so the neuron
 *     step agrees with torch's CPU fused optimizer to float rounding.  The
 *     step count, a tensor lr, grad_scale and found_inf are read on the
 *     device when the task runs (stream order), never on the host.
 *   - The AVX2+FMA build of the row loops (optim_avx2_f32.c) is picked at
 *     run time; without FMA, fmadd is a * b + c, as ATen's portable vectors. */
#include <math.h>
#include <string.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "optim/optim.h"
#include "common/validate.h"

#define OPT_ISA(name) name##_portable
#include "optim/optim_impl.h"

static int is_float_dtype(int32_t t) {
  return t == NRT_FLOAT16 || t == NRT_BFLOAT16 || t == NRT_FLOAT32 || t == NRT_FLOAT64;
}

static nk_opt_fe_rows_fn pick_fe_rows(void) {
  return nk_cpu_isa() >= NK_ISA_AVX2 ? nk_opt_fe_rows_avx2 : nk_opt_fe_rows_portable;
}

static nk_opt_fused_rows_fn pick_fused_rows(void) {
  return nk_cpu_isa() >= NK_ISA_AVX2 ? nk_opt_fused_rows_avx2 : nk_opt_fused_rows_portable;
}

/* The row holding block b: the last row whose first_block <= b (rows with
 * no blocks share first_block with the next row and are skipped so). */
static int64_t row_of_block(const nk_tensor_set *sets, int64_t n, int64_t b) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (sets[mid].first_block <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Checks the operands and the table: row count, blocks, slots in use. */
static int check_table(const nrt_task *task, nrt_exec_ctx *ctx, const char *name,
                       const nk_tensor_set *sets, int64_t n_tensors, int64_t n_blocks,
                       unsigned slot_mask, int scratch) {
  if (nk_check_operands(task, ctx, name, 2) != 0) return -1;
  if (n_tensors < 0 || n_blocks < 0 || (n_tensors > 0 && !sets)) {
    nrt_exec_fail(ctx, "%s: bad table (%lld tensors, %lld blocks)", name, (long long)n_tensors,
                  (long long)n_blocks);
    return -1;
  }
  const nrt_operand *t = &task->operands[0];
  int64_t need = n_tensors * (int64_t)sizeof(nk_tensor_set) +
                 (scratch ? n_blocks * (int64_t)sizeof(double) : 0);
  if (n_tensors > 0 && (t->ndim != 1 || t->data != (void *)sets || t->sizes[0] < need)) {
    nrt_exec_fail(ctx, "%s: the table operand does not hold %lld tensor rows", name,
                  (long long)n_tensors);
    return -1;
  }
  int64_t blocks = 0;
  for (int64_t i = 0; i < n_tensors; i++) {
    const nk_tensor_set *s = &sets[i];
    if (s->numel < 0 || s->first_block != blocks) {
      nrt_exec_fail(ctx, "%s: row %lld: numel %lld, first block %lld (expected %lld)", name,
                    (long long)i, (long long)s->numel, (long long)s->first_block,
                    (long long)blocks);
      return -1;
    }
    for (int k = 0; k < NK_FOREACH_SLOTS; k++)
      if ((slot_mask >> k & 1u) && s->numel > 0 && !s->data[k]) {
        nrt_exec_fail(ctx, "%s: row %lld: list %d has no data", name, (long long)i, k);
        return -1;
      }
    blocks += (s->numel + NK_FOREACH_BLOCK - 1) / NK_FOREACH_BLOCK;
  }
  if (blocks != n_blocks) {
    nrt_exec_fail(ctx, "%s: the rows have %lld blocks, params say %lld", name, (long long)blocks,
                  (long long)n_blocks);
    return -1;
  }
  return 0;
}

static int64_t total_elements(const nk_tensor_set *sets, int64_t n) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++) total += sets[i].numel;
  return total;
}

/* ================================================================ foreach */

typedef struct fe_job {
  const nk_foreach_params *prm;
  const nk_tensor_set *sets;
  double *scratch;
  double tensor_scalar; /* *scalar_ptr */
  nk_opt_fe plan;
  nk_opt_fe_rows_fn rows;
} fe_job;

static int op_shape(int op) {
  switch (op) {
  case NK_FOREACH_ADD: case NK_FOREACH_SUB: case NK_FOREACH_MUL: case NK_FOREACH_DIV:
  case NK_FOREACH_MAXIMUM: case NK_FOREACH_MINIMUM: case NK_FOREACH_POW: case NK_FOREACH_RPOW:
    return NK_OPT_SHAPE_BINARY;
  case NK_FOREACH_ADDCMUL: case NK_FOREACH_ADDCDIV: return NK_OPT_SHAPE_ADDC;
  case NK_FOREACH_LERP: return NK_OPT_SHAPE_LERP;
  case NK_FOREACH_ZERO: return NK_OPT_SHAPE_NULLARY;
  case NK_FOREACH_NORM: case NK_FOREACH_MAX: return NK_OPT_SHAPE_REDUCE;
  default: return NK_OPT_SHAPE_UNARY;
  }
}

static double row_scalar(const fe_job *j, const nk_tensor_set *s) {
  switch (j->prm->scalar_kind) {
  case NK_FOREACH_SCALAR_LIST: return s->scalar;
  case NK_FOREACH_SCALAR_TENSOR: return j->tensor_scalar;
  default: return j->prm->scalar;
  }
}

/* pow with a scalar exponent: ATen's pow_tensor_scalar special cases */
static void pow_plan(nk_opt_fe *plan, double e) {
  if (e == 0) plan->op = NK_OPT_POW_ONE;
  else if (e == 1) plan->op = NK_FOREACH_COPY;
  else if (e == 2) plan->op = NK_OPT_POW_SQ;
  else if (e == 3) plan->op = NK_OPT_POW_CUBE;
  else if (e == 0.5) plan->op = NK_FOREACH_SQRT;
  else if (e == -0.5) plan->op = NK_FOREACH_RSQRT;
  else if (e == -1) plan->op = NK_FOREACH_RECIPROCAL;
  else if (e == -2) plan->op = NK_OPT_POW_RECIP_SQ;
  else return;
  plan->shape = NK_OPT_SHAPE_UNARY;
}

/* Elements [lo, hi) of row s (a reduction's or unscale's partial into
 * *partial). */
static void fe_run(const fe_job *j, const nk_tensor_set *s, int64_t lo, int64_t hi,
                   double *partial) {
  const double sv = row_scalar(j, s);
  nk_opt_fe plan = j->plan;
  if (plan.op == NK_FOREACH_POW && !plan.b_is_list) pow_plan(&plan, sv);
  j->rows(&plan, s, sv, lo, hi, partial);
}

static void fe_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const fe_job *j = arg;
  int64_t n = j->prm->n_tensors;
  int64_t r = row_of_block(j->sets, n, begin);
  for (int64_t b = begin; b < end; b++) {
    while (r + 1 < n && j->sets[r + 1].first_block <= b) r++;
    const nk_tensor_set *s = &j->sets[r];
    int64_t lo = (b - s->first_block) * NK_FOREACH_BLOCK;
    int64_t hi = lo + NK_FOREACH_BLOCK < s->numel ? lo + NK_FOREACH_BLOCK : s->numel;
    fe_run(j, s, lo, hi, j->scratch ? &j->scratch[b] : NULL);
  }
}

/* A foreach task checked and planned: its parameters (job.prm points at
 * prm), the slots it reads or writes. */
typedef struct fe_state {
  nk_foreach_params prm;
  fe_job job;
  unsigned mask;
} fe_state;

static int foreach_prepare(const nrt_task *task, nrt_exec_ctx *ctx, void *state) {
  fe_state *st = state;
  nk_foreach_params *prm = &st->prm;
  memcpy(prm, task->params, sizeof *prm);
  if (prm->op < 0 || prm->op >= NK_FOREACH_OP_COUNT) {
    nrt_exec_fail(ctx, "foreach: unknown op %d", prm->op);
    return -1;
  }
  const int shape = op_shape(prm->op);
  /* slots read or written */
  unsigned mask = 1u;
  if (shape != NK_OPT_SHAPE_NULLARY) mask |= 2u;
  if ((shape == NK_OPT_SHAPE_BINARY && prm->b_is_list) || shape == NK_OPT_SHAPE_ADDC ||
      shape == NK_OPT_SHAPE_LERP)
    mask |= 4u;
  if (shape == NK_OPT_SHAPE_ADDC || (shape == NK_OPT_SHAPE_LERP && prm->b_is_list == 2)) mask |= 8u;
  const int reduce = shape == NK_OPT_SHAPE_REDUCE, unscale = prm->op == NK_FOREACH_UNSCALE;
  if (check_table(task, ctx, "foreach", prm->sets, prm->n_tensors, prm->n_blocks, mask,
                  reduce || unscale) != 0)
    return -1;
  int use_double = 0;
  for (int k = 0; k < NK_FOREACH_SLOTS; k++) {
    if (!(mask >> k & 1u)) continue;
    if (!is_float_dtype(prm->dtype[k])) {
      nrt_exec_fail(ctx, "foreach: list %d has dtype %d; only floating lists are supported", k,
                    prm->dtype[k]);
      return -1;
    }
    /* a reduction's result dtype does not set the compute type */
    if (prm->dtype[k] == NRT_FLOAT64 && !(reduce && k == 0)) use_double = 1;
  }
  if (prm->scalar_kind < NK_FOREACH_SCALAR_VALUE || prm->scalar_kind > NK_FOREACH_SCALAR_TENSOR ||
      (prm->scalar_kind == NK_FOREACH_SCALAR_TENSOR &&
       (!prm->scalar_ptr || !nk_dtype_valid(prm->scalar_dtype)))) {
    nrt_exec_fail(ctx, "foreach: bad scalar (kind %d)", prm->scalar_kind);
    return -1;
  }
  if (unscale && (!prm->flag_ptr || prm->scalar_kind != NK_FOREACH_SCALAR_TENSOR)) {
    nrt_exec_fail(ctx, "foreach: unscale needs found_inf and inv_scale");
    return -1;
  }
  fe_job *j = &st->job;
  *j = (fe_job){.prm = prm, .sets = prm->sets};
  j->scratch = (reduce || unscale) ? (double *)(void *)((char *)(void *)prm->sets +
                                                       prm->n_tensors * sizeof(nk_tensor_set))
                                  : NULL;
  if (prm->scalar_kind == NK_FOREACH_SCALAR_TENSOR)
    j->tensor_scalar = nk_load_f64((nrt_dtype)prm->scalar_dtype, prm->scalar_ptr);
  j->plan.op = prm->op;
  j->plan.shape = shape;
  j->plan.b_is_list = prm->b_is_list;
  j->plan.use_double = use_double;
  j->plan.alpha = prm->alpha;
  for (int k = 0; k < NK_FOREACH_SLOTS; k++) j->plan.dt[k] = (nrt_dtype)prm->dtype[k];
  j->plan.red_kind = NK_OPT_RED_NONE;
  if (prm->op == NK_FOREACH_MAX) {
    j->plan.red_kind = NK_OPT_RED_MAX;
  } else if (prm->op == NK_FOREACH_NORM) {
    double ord = prm->alpha;
    if (ord == 1) j->plan.red_kind = NK_OPT_RED_SUM_ABS;
    else if (ord == 2) j->plan.red_kind = NK_OPT_RED_SUM_SQ;
    else if (isinf(ord) && ord > 0) j->plan.red_kind = NK_OPT_RED_MAX_ABS;
    else if (ord > 0 && isfinite(ord)) j->plan.red_kind = NK_OPT_RED_SUM_POW;
    else {
      nrt_exec_fail(ctx, "foreach: norm of order %g is not supported", ord);
      return -1;
    }
  }
  if (prm->op == NK_FOREACH_MAX)
    for (int64_t i = 0; i < prm->n_tensors; i++)
      if (prm->sets[i].numel == 0) {
        nrt_exec_fail(ctx, "foreach: max of an empty tensor (row %lld)", (long long)i);
        return -1;
      }
  j->rows = pick_fe_rows();
  st->mask = mask;
  return 0;
}

int nk_foreach_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  fe_state st;
  if (foreach_prepare(task, ctx, &st) != 0) return -1;
  const nk_foreach_params *prm = &st.prm;
  fe_job *j = &st.job;
  const int reduce = j->plan.shape == NK_OPT_SHAPE_REDUCE, unscale = prm->op == NK_FOREACH_UNSCALE;
  if (prm->n_blocks > 0) {
    int64_t total = total_elements(prm->sets, prm->n_tensors);
    nk_parallel_for(prm->n_blocks, total <= NK_GRAIN_ELEMENTWISE ? prm->n_blocks : 1, fe_range, j);
  }
  if (reduce) {
    for (int64_t i = 0; i < prm->n_tensors; i++) {
      const nk_tensor_set *s = &prm->sets[i];
      int64_t nb = (s->numel + NK_FOREACH_BLOCK - 1) / NK_FOREACH_BLOCK;
      int maxlike = j->plan.red_kind >= NK_OPT_RED_MAX_ABS;
      double acc = j->plan.red_kind == NK_OPT_RED_MAX ? -INFINITY : 0;
      for (int64_t b = s->first_block; b < s->first_block + nb; b++) {
        double x = j->scratch[b];
        if (maxlike)
          acc = (x != x || acc != acc) ? NAN : (acc < x ? x : acc);
        else
          acc += x;
      }
      if (j->plan.red_kind == NK_OPT_RED_SUM_SQ) acc = sqrt(acc);
      else if (j->plan.red_kind == NK_OPT_RED_SUM_POW) acc = pow(acc, 1.0 / prm->alpha);
      nk_store_f64((nrt_dtype)prm->dtype[0], s->data[0], acc);
    }
  }
  if (unscale) {
    int bad = 0;
    for (int64_t b = 0; b < prm->n_blocks; b++) bad |= j->scratch[b] != 0;
    if (bad) {
      float one = 1.0f;
      memcpy(prm->flag_ptr, &one, sizeof one);
    }
  }
  return 0;
}

/* ---------------------------------------------------------- adaptive eager
 * A foreach op that writes only its output list (no norm, max or
 * unscale: those combine partials after all blocks) joins multi-tensor
 * groups (runtime/src/fusion_multi.c): the runtime runs fe_run on chunks of
 * FE_FUSE_CHUNK elements of a row.  A chunk starts on a tile boundary of
 * the block the whole task would run (NK_OPT_TILE divides it, and it
 * divides NK_FOREACH_BLOCK), so each element goes through the same tile
 * code, vector body or tail, as unfused: the same bits.  8192 elements:
 * an AdamW step's five operands of a chunk (160 KiB of float32) stay in L2
 * from one member to the next. */
#define FE_FUSE_CHUNK 8192
_Static_assert(FE_FUSE_CHUNK % NK_OPT_TILE == 0 && NK_FOREACH_BLOCK % FE_FUSE_CHUNK == 0,
               "a fused chunk must start on the tiles of the task's own blocks");

nrt_fuse_kind nk_foreach_fusion(const nrt_task *task) {
  nk_foreach_params prm;
  memcpy(&prm, task->params, sizeof prm);
  if (prm.op < 0 || prm.op >= NK_FOREACH_OP_COUNT || op_shape(prm.op) == NK_OPT_SHAPE_REDUCE ||
      prm.op == NK_FOREACH_UNSCALE)
    return NRT_FUSE_NONE;
  return NRT_FUSE_MULTI;
}

static int64_t fe_fuse_rows(const void *state) { return ((const fe_state *)state)->prm.n_tensors; }

static int64_t fe_fuse_row(const void *state, int64_t r, nrt_multi_operand *ops, int *n_ops) {
  const fe_state *st = state;
  const nk_tensor_set *s = &st->prm.sets[r];
  int n = 0;
  for (int k = 0; k < NK_FOREACH_SLOTS; k++)
    if (st->mask >> k & 1u)
      ops[n++] = (nrt_multi_operand){.data = s->data[k],
                                     .bytes = s->numel * (int64_t)nrt_dtype_size(st->prm.dtype[k]),
                                     .written = k == 0};
  if (st->prm.scalar_kind == NK_FOREACH_SCALAR_TENSOR)
    ops[n++] = (nrt_multi_operand){.data = st->prm.scalar_ptr,
                                   .bytes = (int64_t)nrt_dtype_size(st->prm.scalar_dtype)};
  *n_ops = n;
  return s->numel;
}

static void fe_fuse_run(const void *state, int64_t r, int64_t lo, int64_t hi) {
  const fe_state *st = state;
  fe_run(&st->job, &st->prm.sets[r], lo, hi, NULL);
}

/* At most a block per row, and at most the largest row (operand 1, the
 * glue's "work size") per row: the lesser of the two bounds, so that a
 * list of many small tensors does not look like millions of elements to
 * the worker's look-ahead. */
static int64_t fe_fuse_elements(const nrt_task *task) {
  nk_foreach_params prm;
  memcpy(&prm, task->params, sizeof prm);
  if (prm.n_blocks < 0 || prm.n_tensors < 0) return 0;
  int64_t bound = prm.n_blocks > INT64_MAX / NK_FOREACH_BLOCK ? INT64_MAX
                                                              : prm.n_blocks * NK_FOREACH_BLOCK;
  const nrt_operand *w = &task->operands[1];
  if (task->n_operands == 2 && w->ndim == 1 && w->sizes[0] >= 0 &&
      (prm.n_tensors == 0 || w->sizes[0] <= bound / prm.n_tensors))
    bound = prm.n_tensors * w->sizes[0];
  return bound;
}

const nrt_multi_fns nk_foreach_multi = {
    .state_bytes = sizeof(fe_state),
    .chunk = FE_FUSE_CHUNK,
    .prepare = foreach_prepare,
    .rows = fe_fuse_rows,
    .row = fe_fuse_row,
    .run = fe_fuse_run,
    .elements = fe_fuse_elements,
};

/* ================================================================ fused steps */

typedef struct fused_job {
  const nk_optim_params *prm;
  nk_opt_fused plan;
  double lr;
  nk_opt_fused_rows_fn rows;
} fused_job;

/* The row's factors, from its step (ATen reads the step as a float). */
static void row_coef(const fused_job *j, const nk_tensor_set *s, nk_opt_coef *k) {
  const nk_optim_params *p = j->prm;
  const double lr = j->lr;
  memset(k, 0, sizeof *k);
  k->grad_scale = p->grad_scale ? (double)*p->grad_scale : 1;
  k->wd = p->weight_decay;
  k->decay = 1;
  const int reduced = p->dtype == NRT_FLOAT16 || p->dtype == NRT_BFLOAT16;
  switch (p->op) {
  case NK_OPTIM_ADAM:
  case NK_OPTIM_ADAMW: {
    double step = (double)nk_load_f32((nrt_dtype)p->step_dtype, s->data[5]);
    double bc1 = 1 - pow(p->beta1, step), bc2 = 1 - pow(p->beta2, step);
    k->lerp_w = 1 - p->beta1;
    k->beta2 = p->beta2;
    k->c2 = 1 - p->beta2;
    k->bc2_sqrt = sqrt(bc2);
    k->eps = p->eps;
    k->neg_step_size = -(lr / bc1);
    if (p->op == NK_OPTIM_ADAMW) k->decay = 1 - lr * p->weight_decay;
    break;
  }
  case NK_OPTIM_SGD:
    /* ATen's reduced-precision vector path rounds these through scalar_t */
    k->momentum = p->beta1;
    k->one_minus_dampening = 1 - p->beta2;
    k->neg_step_size = -lr;
    if (reduced) {
      float t[3] = {(float)k->wd, (float)k->momentum, (float)k->one_minus_dampening};
      for (int i = 0; i < 3; i++) {
        float r = p->dtype == NRT_BFLOAT16 ? nk_bf16_to_f32(nk_f32_to_bf16(t[i]))
                                           : nk_f16_to_f32(nk_f32_to_f16(t[i]));
        t[i] = r;
      }
      k->wd = t[0];
      k->momentum = t[1];
      k->one_minus_dampening = t[2];
    }
    break;
  default: { /* Adagrad */
    double step = (double)nk_load_f32((nrt_dtype)p->step_dtype, s->data[5]);
    k->clr = lr / (1.0 + (step - 1.0) * p->beta1);
    k->eps = p->eps;
    if (reduced) {
      float t[3] = {(float)k->wd, (float)k->eps, (float)k->clr};
      for (int i = 0; i < 3; i++)
        t[i] = p->dtype == NRT_BFLOAT16 ? nk_bf16_to_f32(nk_f32_to_bf16(t[i]))
                                        : nk_f16_to_f32(nk_f32_to_f16(t[i]));
      k->wd = t[0];
      k->eps = t[1];
      k->clr = t[2];
    }
    break;
  }
  }
}

static void fused_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const fused_job *j = arg;
  const nk_tensor_set *sets = j->prm->sets;
  int64_t n = j->prm->n_tensors;
  int64_t r = row_of_block(sets, n, begin), coef_row = -1;
  nk_opt_coef k;
  for (int64_t b = begin; b < end; b++) {
    while (r + 1 < n && sets[r + 1].first_block <= b) r++;
    const nk_tensor_set *s = &sets[r];
    if (coef_row != r) {
      row_coef(j, s, &k);
      coef_row = r;
    }
    int64_t lo = (b - s->first_block) * NK_FOREACH_BLOCK;
    int64_t hi = lo + NK_FOREACH_BLOCK < s->numel ? lo + NK_FOREACH_BLOCK : s->numel;
    j->rows(&j->plan, &k, s, lo, hi);
  }
}

int nk_fused_optim_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  nk_optim_params prm;
  memcpy(&prm, task->params, sizeof prm);
  if (prm.op < 0 || prm.op >= NK_OPTIM_OP_COUNT) {
    nrt_exec_fail(ctx, "fused_optim: unknown op %d", prm.op);
    return -1;
  }
  const int adam = prm.op == NK_OPTIM_ADAM || prm.op == NK_OPTIM_ADAMW;
  unsigned mask = 3u;
  if (adam) mask |= 4u | 8u | 32u | ((prm.flags & NK_OPTIM_AMSGRAD) ? 16u : 0u);
  if (prm.op == NK_OPTIM_SGD && prm.beta1 != 0) mask |= 4u;
  if (prm.op == NK_OPTIM_ADAGRAD) mask |= 4u | 32u;
  if (check_table(task, ctx, "fused_optim", prm.sets, prm.n_tensors, prm.n_blocks, mask, 0) != 0)
    return -1;
  if (!is_float_dtype(prm.dtype) || ((mask & 32u) && !is_float_dtype(prm.step_dtype)) ||
      (prm.lr_ptr && !nk_dtype_valid(prm.lr_dtype))) {
    nrt_exec_fail(ctx, "fused_optim: params must be floating (dtype %d, step dtype %d)",
                  prm.dtype, prm.step_dtype);
    return -1;
  }
  /* step tensors are read even for empty params: they must exist */
  if (mask & 32u)
    for (int64_t i = 0; i < prm.n_tensors; i++)
      if (!prm.sets[i].data[5]) {
        nrt_exec_fail(ctx, "fused_optim: row %lld has no step", (long long)i);
        return -1;
      }
  if (prm.found_inf && *prm.found_inf == 1.0f) return 0; /* skipped step, as ATen */
  fused_job j = {.prm = &prm};
  j.lr = prm.lr_ptr ? nk_load_f64((nrt_dtype)prm.lr_dtype, prm.lr_ptr) : prm.lr;
  j.plan.op = prm.op;
  j.plan.flags = prm.flags;
  j.plan.has_scale = prm.grad_scale != NULL;
  j.plan.has_wd = prm.weight_decay != 0;
  j.plan.dt = (nrt_dtype)prm.dtype;
  j.rows = pick_fused_rows();
  if (prm.n_blocks > 0) {
    int64_t total = total_elements(prm.sets, prm.n_tensors);
    nk_parallel_for(prm.n_blocks, total <= NK_GRAIN_ELEMENTWISE / 4 ? prm.n_blocks : 1,
                    fused_range, &j);
  }
  return 0;
}

/* ================================================================ GradScaler */

int nk_amp_update_scale_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "amp_update_scale", 3) != 0) return -1;
  const nrt_operand *o = task->operands;
  for (int k = 0; k < 3; k++) {
    int64_t n = 1;
    for (int d = 0; d < o[k].ndim; d++) n *= o[k].sizes[d];
    if (n != 1 || o[k].dtype != (k == 1 ? NRT_INT32 : NRT_FLOAT32)) {
      nrt_exec_fail(ctx, "amp_update_scale: operand %d must be one %s", k,
                    k == 1 ? "int32" : "float32");
      return -1;
    }
  }
  nk_amp_update_scale_params prm;
  memcpy(&prm, task->params, sizeof prm);
  float scale = nk_read_f32(o[0].data);
  int32_t tracker;
  memcpy(&tracker, o[1].data, sizeof tracker);
  float found_inf = nk_read_f32(o[2].data);
  /* ATen's _amp_update_scale_cpu_: float32 state, the factors in double */
  if (found_inf) {
    scale = (float)((double)scale * prm.backoff);
    tracker = 0;
  } else {
    int32_t successful = (int32_t)((uint32_t)tracker + 1u); /* wraps, never UB */
    if (successful == prm.interval) {
      float grown = (float)((double)scale * prm.growth);
      if (isfinite(grown)) scale = grown;
      tracker = 0;
    } else {
      tracker = successful;
    }
  }
  nk_write_f32(o[0].data, scale);
  memcpy(o[1].data, &tracker, sizeof tracker);
  return 0;
}
