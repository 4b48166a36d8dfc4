/* gather_scatter.c — NK_KERNEL_GATHER_SCATTER: gather and every scatter
 * along one dim (see neuron_kernels.h for the operands).
 *
 * The iteration shape is the index's.  It is cut into "lines": all the
 * positions that share every coordinate but `dim`.  Lines (or blocks of
 * neighbouring lines) go to the compute pool; within one, positions along
 * dim are visited in index order.  Two lines never touch the same
 * destination (their coordinates outside `dim` differ), so scatters are
 * race free and each destination accumulates in index order whatever the
 * thread count.  When dim is the inner dim in memory a line is walked on
 * its own (gathers also cut long lines into pieces); when it is an outer
 * dim (index_select/index_add along dim 0) a block of lines is walked one
 * dim position at a time, so whole rows are copied.  A scatter checks all
 * the indices of its line or block before writing any. */
#include <stdlib.h>

#include "index/index_common.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "common/validate.h"

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
  bool dim_major;        /* walk blocks of lines one dim position at a time */
  unsigned char value[8]; /* has_value: the value in self's dtype */
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
  if (p->has_value && p->op == NK_SCATTER_MEAN) {
    nrt_exec_fail(ctx, "scatter: a mean needs a src operand");
    return -1;
  }
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
  /* dim-major when the dense operand (out, or src, else the index) moves
   * further per step along dim than along its innermost other dim */
  const int dense = p->gather ? 0 : (p->has_value ? 1 : 2);
  int inner = -1;
  for (int d = g->ndim - 1; d >= 0; d--)
    if (d != g->dim && g->sizes[d] > 1) { inner = d; break; }
  g->dim_major = inner >= 0 && g->lines > 1 && g->line_len > 1 &&
                 llabs(g->strides[dense][g->dim]) > llabs(g->strides[dense][inner]);
  if (g->dim_major) g->pieces = 1, g->piece_len = g->line_len;
  if (p->has_value) {
    if (nk_dtype_is_floating(g->dtype[0])) nk_store_f64(g->dtype[0], g->value, p->value.f);
    else nk_store_i64(g->dtype[0], g->value, p->value.i);
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

/* ------------------------------------------------------------ one element */

/* index j of a line, checked (and wrapped); false after recording an error */
NK_INLINE bool gs_index(gs_plan *g, const int64_t *off, int64_t j, int64_t *i) {
  int64_t v = nk_read_index(g->dtype[1], g->data[1] + off[1] + j * g->strides[1][g->dim]);
  if (!nk_index_in_range(&v, g->self_size, g->p->wrap)) {
    nk_index_error_set(&g->err, v, g->dim, g->self_size);
    return false;
  }
  *i = v;
  return true;
}

NK_INLINE bool gather_elem(gs_plan *g, const int64_t *off, int64_t j) {
  int64_t i;
  if (!gs_index(g, off, j, &i)) return false;
  char *o = g->data[0] + off[0] + j * g->strides[0][g->dim];
  const char *s = g->data[2] + off[2] + i * g->self_stride;
  if (g->dtype[0] == g->dtype[2]) nk_copy_elem(o, s, nk_dtype_size(g->dtype[0]));
  else nk_convert(g->dtype[2], g->dtype[0], o, s);
  return true;
}

/* phase 0: the identity into the destination (include_self off);
 * phase 1: the reduction (or assignment).  Indices already checked. */
NK_INLINE void scatter_elem(gs_plan *g, const int64_t *off, int64_t j, int phase) {
  const nk_gather_scatter_params *p = g->p;
  int64_t i = nk_read_index(g->dtype[1], g->data[1] + off[1] + j * g->strides[1][g->dim]);
  nk_index_in_range(&i, g->self_size, p->wrap);
  if (p->has_skip && i == p->skip) return;
  const nk_scatter_op op = (nk_scatter_op)p->op;
  const nrt_dtype td = g->dtype[0];
  char *dst = g->data[0] + off[0] + i * g->self_stride;
  if (phase == 0) {
    nk_store_identity(op, td, dst);
    return;
  }
  const char *src;
  nrt_dtype ts = td;
  if (p->has_value) {
    src = (const char *)g->value;
  } else {
    src = g->data[2] + off[2] + j * g->strides[2][g->dim];
    ts = g->dtype[2];
  }
  if (op == NK_SCATTER_ASSIGN) {
    if (ts == td) nk_copy_elem(dst, src, nk_dtype_size(td));
    else nk_convert(ts, td, dst, src);
    return;
  }
  nk_reduce_at(op, td, dst, ts, src, &p->alpha, g->has_alpha);
  if (g->n_ops == 4) {
    char *c = g->data[3] + off[3] + i * g->strides[3][g->dim];
    nk_write_i64(c, nk_read_i64(c) + 1);
  }
}

/* ------------------------------------------------------------------ walks */

/* Line-major: each line walked along dim (dim is the inner dim in memory). */
static void line_major(gs_plan *g, int64_t w) {
  int64_t off[GS_MAX_OPS];
  const int64_t line = w / g->pieces, piece = w % g->pieces;
  line_offsets(g, line, off);
  if (g->p->gather) {
    int64_t j0 = piece * g->piece_len, j1 = j0 + g->piece_len;
    if (j1 > g->line_len) j1 = g->line_len;
    for (int64_t j = j0; j < j1; j++)
      if (!gather_elem(g, off, j)) return;
    return;
  }
  int64_t i;
  for (int64_t j = 0; j < g->line_len; j++) /* nothing is written for a bad line */
    if (!gs_index(g, off, j, &i)) return;
  const bool init = g->p->op != NK_SCATTER_ASSIGN && !g->p->include_self;
  for (int phase = init ? 0 : 1; phase < 2; phase++)
    for (int64_t j = 0; j < g->line_len; j++) scatter_elem(g, off, j, phase);
}

/* index_add and embedding backward of contiguous float rows (dst and src
 * one dtype, a plain sum): each index adds one row of n elements, a loop
 * the compiler vectorises, instead of n generic element updates.  The same
 * arithmetic (d + s) in the same index order.  Indices already checked.
 * False when the block is not of that shape. */
#define GS_ADD_ROWS(T)                                                                          \
  for (int64_t j = 0; j < g->line_len; j++) {                                                   \
    int64_t i = nk_read_index(g->dtype[1], g->data[1] + off[0][1] + j * g->strides[1][g->dim]); \
    nk_index_in_range(&i, g->self_size, p->wrap);                                               \
    if (p->has_skip && i == p->skip) continue;                                                  \
    T *d = (T *)(void *)(g->data[0] + off[0][0] + i * g->self_stride);                          \
    const T *s = (const T *)(const void *)(g->data[2] + off[0][2] + j * g->strides[2][g->dim]); \
    for (int64_t l = 0; l < n; l++) d[l] += s[l];                                               \
  }
static bool add_rows(gs_plan *g, int64_t (*off)[GS_MAX_OPS], int64_t n) {
  const nk_gather_scatter_params *p = g->p;
  const nrt_dtype t = g->dtype[0];
  if (p->op != NK_SCATTER_ADD || p->has_value || g->has_alpha || g->n_ops != 3 || g->dtype[2] != t ||
      (t != NRT_FLOAT32 && t != NRT_FLOAT64))
    return false;
  const int64_t es = (int64_t)nk_dtype_size(t);
  for (int64_t l = 1; l < n; l++)
    if (off[l][1] != off[0][1] || off[l][0] != off[0][0] + l * es || off[l][2] != off[0][2] + l * es)
      return false;
  if (t == NRT_FLOAT32) GS_ADD_ROWS(float)
  else GS_ADD_ROWS(double)
  return true;
}

/* Dim-major: a block of neighbouring lines walked together, one position
 * along dim at a time (dim is an outer dim in memory: index_select and
 * index_add along dim 0 copy whole rows this way).  A destination still
 * belongs to one line only, and sees the indices in order. */
#define GS_BLOCK 128
static void dim_major(gs_plan *g, int64_t w) {
  int64_t off[GS_BLOCK][GS_MAX_OPS];
  const int64_t first = w * GS_BLOCK;
  const int64_t n = g->lines - first < GS_BLOCK ? g->lines - first : GS_BLOCK;
  for (int64_t l = 0; l < n; l++) line_offsets(g, first + l, off[l]);
  if (g->p->gather) {
    /* index_select of contiguous rows: the lines share their index and are
     * neighbours in out and self, so each index moves one span of bytes */
    const int64_t es = (int64_t)nk_dtype_size(g->dtype[0]);
    bool rows = g->dtype[0] == g->dtype[2];
    for (int64_t l = 1; rows && l < n; l++)
      rows = off[l][1] == off[0][1] && off[l][0] == off[0][0] + l * es && off[l][2] == off[0][2] + l * es;
    if (rows) {
      for (int64_t j = 0; j < g->line_len; j++) {
        int64_t i;
        if (!gs_index(g, off[0], j, &i)) return;
        memcpy(g->data[0] + off[0][0] + j * g->strides[0][g->dim],
               g->data[2] + off[0][2] + i * g->self_stride, (size_t)(n * es));
      }
      return;
    }
    for (int64_t j = 0; j < g->line_len; j++)
      for (int64_t l = 0; l < n; l++)
        if (!gather_elem(g, off[l], j)) return;
    return;
  }
  int64_t i;
  for (int64_t j = 0; j < g->line_len; j++)
    for (int64_t l = 0; l < n; l++)
      if (!gs_index(g, off[l], j, &i)) return;
  const bool init = g->p->op != NK_SCATTER_ASSIGN && !g->p->include_self;
  if (!init && add_rows(g, off, n)) return;
  for (int phase = init ? 0 : 1; phase < 2; phase++)
    for (int64_t j = 0; j < g->line_len; j++)
      for (int64_t l = 0; l < n; l++) scatter_elem(g, off[l], j, phase);
}

static void gs_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  gs_plan *g = arg;
  for (int64_t w = begin; w < end && !nk_index_failed(&g->err); w++) {
    if (g->dim_major) dim_major(g, w);
    else line_major(g, w);
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
  int64_t work = g.dim_major ? (g.lines + GS_BLOCK - 1) / GS_BLOCK : g.lines * g.pieces;
  for (int d = 0; d < g.ndim; d++)
    if (g.sizes[d] == 0) work = 0;
  if (work > 0) {
    int64_t per = g.dim_major ? GS_BLOCK * g.line_len : g.pieces > 1 ? g.piece_len : (g.line_len > 0 ? g.line_len : 1);
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
