/* gather_scatter.c — NK_KERNEL_GATHER_SCATTER: gather and every scatter
 * along one dim (see neuron_kernels.h for the operands).
 *
 * The iteration shape is the index's.  It is cut into "lines": all the
 * positions that share every coordinate but `dim`.  A line is walked
 * serially in index order; lines go to the compute pool.  Two lines never
 * touch the same destination (their coordinates outside `dim` differ), so
 * scatters are race free and their accumulation order is the index order
 * whatever the thread count.  Gathers have no such constraint and also cut
 * long lines into pieces. */
#include "index_common.h"
#include "kernel_entries.h"
#include "nd_iter.h"
#include "validate.h"

#define GS_MAX_OPS 4

typedef struct gs_plan {
  const nk_gather_scatter_params *p;
  int n_ops, ndim, dim;
  int64_t sizes[NRT_MAX_DIMS];                  /* iteration (index) sizes */
  int64_t strides[GS_MAX_OPS][NRT_MAX_DIMS];   /* bytes, per operand      */
  char *data[GS_MAX_OPS];
  nrt_dtype dtype[GS_MAX_OPS];
  int64_t self_size;     /* the indexed operand's size along dim */
  int64_t self_stride;   /* and its stride (bytes)               */
  int self_op;           /* 2 for gather, 0 for scatter          */
  int64_t line_len;      /* sizes[dim]                           */
  int64_t pieces;        /* pieces per line (gather only)        */
  int64_t piece_len;
  int64_t lines;
  bool has_alpha;
  nk_index_error err;
} gs_plan;

/* A 0-dim operand is a 1-d one of one element. */
static void op_dims(const nrt_operand *op, int *ndim, const int64_t **sizes, const int64_t **strides) {
  static const int64_t one = 1, zero = 0;
  if (op->ndim == 0) {
    *ndim = 1;
    *sizes = &one;
    *strides = &zero;
  } else {
    *ndim = op->ndim;
    *sizes = op->sizes;
    *strides = op->strides;
  }
}

static int plan_gs(const nrt_task *task, nrt_exec_ctx *ctx, gs_plan *g) {
  const nk_gather_scatter_params *p = (const nk_gather_scatter_params *)task->params;
  g->p = p;
  const char *k = p->gather ? "gather" : "scatter";
  if (p->op < 0 || p->op >= NK_SCATTER_OP_COUNT) {
    nrt_exec_fail(ctx, "%s: invalid op %d", k, (int)p->op);
    return -1;
  }
  int expected = p->gather ? 3 : (p->has_value ? 2 : 3) + (p->op == NK_SCATTER_MEAN);
  if (p->gather && (p->has_value || p->op != NK_SCATTER_ASSIGN)) {
    nrt_exec_fail(ctx, "gather: takes no value or reduction");
    return -1;
  }
  if (nk_check_operands(task, ctx, k, expected)) return -1;
  g->n_ops = expected;
  const nrt_operand *ops = task->operands;
  if (!nk_index_dtype_ok(ops[1].dtype)) {
    nrt_exec_fail(ctx, "%s: index operand has dtype %d, expected int32 or int64", k, (int)ops[1].dtype);
    return -1;
  }
  const int64_t *isz, *ist;
  op_dims(&ops[1], &g->ndim, &isz, &ist);
  if (p->dim < 0 || p->dim >= g->ndim) {
    nrt_exec_fail(ctx, "%s: dim %d out of range for %d dims", k, (int)p->dim, g->ndim);
    return -1;
  }
  g->dim = p->dim;
  g->self_op = p->gather ? 2 : 0;
  for (int o = 0; o < expected; o++) {
    int nd;
    const int64_t *sz, *st;
    op_dims(&ops[o], &nd, &sz, &st);
    if (nd != g->ndim) {
      nrt_exec_fail(ctx, "%s: operand %d has %d dims, the index %d", k, o, nd, g->ndim);
      return -1;
    }
    g->data[o] = ops[o].data;
    g->dtype[o] = (nrt_dtype)ops[o].dtype;
    bool is_self = o == g->self_op, is_count = o == 3;
    for (int d = 0; d < nd; d++) {
      g->strides[o][d] = st[d];
      if (o == 1) g->sizes[d] = sz[d];
      if (is_count && sz[d] != (ops[0].ndim ? ops[0].sizes[d] : 1)) {
        nrt_exec_fail(ctx, "%s: the count operand must have self's sizes", k);
        return -1;
      }
      bool ok = is_count || (is_self && d == g->dim) || sz[d] >= isz[d];
      if (!ok) {
        nrt_exec_fail(ctx, "%s: operand %d's size %lld in dim %d is smaller than the index's %lld",
                      k, o, (long long)sz[d], d, (long long)isz[d]);
        return -1;
      }
    }
    if (is_self) {
      g->self_size = sz[g->dim];
      g->self_stride = st[g->dim];
    }
  }
  if (expected == 4 && ops[3].dtype != NRT_INT64) {
    nrt_exec_fail(ctx, "%s: the count operand must be int64", k);
    return -1;
  }
  g->line_len = g->sizes[g->dim];
  g->lines = 1;
  for (int d = 0; d < g->ndim; d++)
    if (d != g->dim) g->lines *= g->sizes[d];
  g->pieces = 1;
  g->piece_len = g->line_len;
  if (p->gather && g->lines < 64 && g->line_len > NK_GRAIN_ELEMENTWISE) {
    g->piece_len = NK_GRAIN_ELEMENTWISE / 4;
    g->pieces = (g->line_len + g->piece_len - 1) / g->piece_len;
  }
  g->has_alpha = p->op == NK_SCATTER_ADD && !(nk_dtype_is_floating(g->dtype[0]) ? p->alpha.f == 1.0 : p->alpha.i == 1);
  nk_index_error_init(&g->err);
  return 0;
}

/* byte offsets of line `line` (coordinates outside dim, row-major) */
static void line_offsets(const gs_plan *g, int64_t line, int64_t *off) {
  for (int o = 0; o < g->n_ops; o++) off[o] = 0;
  for (int d = g->ndim - 1; d >= 0; d--) {
    if (d == g->dim) continue;
    int64_t c = line % g->sizes[d];
    line /= g->sizes[d];
    for (int o = 0; o < g->n_ops; o++) off[o] += c * g->strides[o][d];
  }
}

static void gather_piece(gs_plan *g, const int64_t *off, int64_t j0, int64_t j1) {
  const int d = g->dim;
  char *out = g->data[0] + off[0];
  const char *idx = g->data[1] + off[1];
  const char *self = g->data[2] + off[2];
  const int64_t so = g->strides[0][d], si = g->strides[1][d];
  const nrt_dtype to = g->dtype[0], ts = g->dtype[2], ti = g->dtype[1];
  const size_t es = nk_dtype_size(to);
  const bool same = to == ts;
  for (int64_t j = j0; j < j1; j++) {
    int64_t i = nk_read_index(ti, idx + j * si);
    if (!nk_index_in_range(&i, g->self_size, g->p->wrap)) {
      nk_index_error_set(&g->err, i, d, g->self_size);
      return;
    }
    const char *s = self + i * g->self_stride;
    if (same)
      memcpy(out + j * so, s, es);
    else
      nk_convert(ts, to, out + j * so, s);
  }
}

static void scatter_line(gs_plan *g, const int64_t *off) {
  const nk_gather_scatter_params *p = g->p;
  const int d = g->dim;
  const nk_scatter_op op = (nk_scatter_op)p->op;
  char *self = g->data[0] + off[0];
  const char *idx = g->data[1] + off[1];
  const int64_t si = g->strides[1][d];
  const nrt_dtype td = g->dtype[0], ti = g->dtype[1];
  const size_t es = nk_dtype_size(td);
  /* the source: an operand, or the value in self's dtype */
  unsigned char value[8];
  const char *src = NULL;
  int64_t ss = 0;
  nrt_dtype ts = td;
  if (p->has_value) {
    if (nk_dtype_is_floating(td)) nk_store_f64(td, value, p->value.f);
    else nk_store_i64(td, value, p->value.i);
    src = (const char *)value;
  } else {
    src = g->data[2] + off[2];
    ss = g->strides[2][d];
    ts = g->dtype[2];
  }
  char *count = g->n_ops == 4 ? g->data[3] + off[3] : NULL;
  const int64_t cs = g->n_ops == 4 ? g->strides[3][d] : 0;
  const int64_t n = g->line_len;

  /* check the whole line first: nothing is written for a bad line */
  for (int64_t j = 0; j < n; j++) {
    int64_t i = nk_read_index(ti, idx + j * si);
    if (!nk_index_in_range(&i, g->self_size, p->wrap)) {
      nk_index_error_set(&g->err, i, d, g->self_size);
      return;
    }
  }
  if (op != NK_SCATTER_ASSIGN && !p->include_self) {
    for (int64_t j = 0; j < n; j++) {
      int64_t i = nk_read_index(ti, idx + j * si);
      nk_index_in_range(&i, g->self_size, p->wrap);
      if (p->has_skip && i == p->skip) continue;
      nk_store_identity(op, td, self + i * g->self_stride);
    }
  }
  for (int64_t j = 0; j < n; j++) {
    int64_t i = nk_read_index(ti, idx + j * si);
    nk_index_in_range(&i, g->self_size, p->wrap);
    if (p->has_skip && i == p->skip) continue;
    char *dst = self + i * g->self_stride;
    const char *s = src + j * ss;
    if (op == NK_SCATTER_ASSIGN) {
      if (ts == td) memcpy(dst, s, es);
      else nk_convert(ts, td, dst, s);
    } else {
      nk_reduce_at(op, td, dst, ts, s, &p->alpha, g->has_alpha);
      if (count) {
        char *c = count + i * cs;
        nk_write_i64(c, nk_read_i64(c) + 1);
      }
    }
  }
}

static void gs_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  gs_plan *g = arg;
  int64_t off[GS_MAX_OPS];
  for (int64_t w = begin; w < end && !nk_index_failed(&g->err); w++) {
    int64_t line = w / g->pieces, piece = w % g->pieces;
    line_offsets(g, line, off);
    if (g->p->gather) {
      int64_t j0 = piece * g->piece_len, j1 = j0 + g->piece_len;
      gather_piece(g, off, j0, j1 < g->line_len ? j1 : g->line_len);
    } else {
      scatter_line(g, off);
    }
  }
}

/* MEAN: every element with a count is divided by count (+1 with self) */
typedef struct mean_ctx {
  nrt_dtype t;
  bool include_self;
} mean_ctx;

static void mean_loop(void *arg, int64_t n, char *const *data, const int64_t *s) {
  const mean_ctx *m = arg;
  for (int64_t i = 0; i < n; i++) {
    int64_t c = nk_read_i64(data[1] + i * s[1]);
    if (c > 0) nk_divide_at(m->t, data[0] + i * s[0], c + (m->include_self ? 1 : 0));
  }
}

int nk_gather_scatter_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  gs_plan g;
  if (plan_gs(task, ctx, &g)) return -1;
  int64_t work = g.lines * g.pieces;
  for (int d = 0; d < g.ndim; d++)
    if (g.sizes[d] == 0) work = 0;
  if (work > 0) {
    int64_t per = g.pieces > 1 ? g.piece_len : (g.line_len > 0 ? g.line_len : 1);
    int64_t grain = NK_GRAIN_ELEMENTWISE / per;
    nk_parallel_for(work, grain > 0 ? grain : 1, gs_range, &g);
  }
  if (nk_index_error_report(&g.err, ctx)) return -1;
  if (!g.p->gather && g.p->op == NK_SCATTER_MEAN && task->operands[0].ndim >= 0) {
    nrt_operand ops[2] = {task->operands[0], task->operands[3]};
    bool empty = false;
    for (int d = 0; d < ops[0].ndim; d++) empty |= ops[0].sizes[d] == 0;
    mean_ctx m = {g.dtype[0], g.p->include_self != 0};
    if (!empty) nk_for_each(ops, 2, mean_loop, &m);
  }
  return 0;
}
