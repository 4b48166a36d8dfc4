/* tail.c — the long tail: small kernels that made ops fall back to the CPU.
 *
 * NK_KERNEL_TAIL_POINTWISE is one elementwise kernel with an op switch for
 * the stubs of ATen ops that each need one formula (glu and its backward,
 * prelu and its backward, renorm's scale factor, frexp, cross).  Why one
 * kernel: each op is a few lines of math over the same strided, mixed-dtype
 * operands (nk_for_each), so one plan + one row loop serve them all, and the
 * kernel tables get one row instead of seven.
 *   - Math is done in the compute class ATen's CPU kernel uses: double for
 *     float64, float for float32/float16/bfloat16 (rounded once on store),
 *     int64 wrapped to the dtype for cross on integers.
 *   - cross reads three elements along `dim` per output position: the
 *     kernel validates the full operands (size 3 along dim), then iterates
 *     over copies whose dim has size 1 and steps along dim itself, so the
 *     reach of every read is inside the validated operand.
 *
 * NK_KERNEL_UNFOLD_BACKWARD is the gather form of unfold's backward: every
 * element of grad_input sums the window elements of grad that came from it,
 * so each output is written by one thread (no atomics, results independent
 * of the thread count) and no zero-fill is needed first.
 *
 * NK_KERNEL_HISTOGRAM serves histc, histogram and histogramdd (ATen's CPU
 * functions reach it through their three stubs).  Bin selection replays
 * the CPU's formula in the input dtype's arithmetic (each float16/bfloat16
 * step rounded) so edge cases land in the CPU's bin; counts and weights sum
 * in double per fixed chunk of rows and the chunks are added in order (the
 * CPU sums per-thread histograms in the input dtype, so its float16/bfloat16
 * results above 256 per bin lose precision where ours do not).  Its
 * INTEGER mode is histc on integer dtypes, which only CUDA's histc has
 * (ATen's CPU one is floating-only): CUDA's bin formula in exact integer
 * arithmetic, counts stored in the input's dtype (wrapping, like CUDA's
 * atomic adds); the glue does CUDA's range checks and min == max rules.
 *
 * NK_KERNEL_LOGSPACE computes pow(base, exponent) in double with ATen's
 * two-sided exponent formula; the glue derives start/end/step in the
 * output dtype's terms, as the CPU does.
 *
 * NK_KERNEL_DIST is cdist/pdist and their backward with ATen's per-p
 * special cases (0, 1, 2, inf, p < 2) computed in the operand dtype; the
 * backward ops are gathers (each grad row is summed by one thread, in the
 * CPU's order of pairs), so no atomics are needed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

/* ------------------------------------------------------------ pointwise */

static const struct {
  const char *name;
  int operands;      /* outputs + inputs */
  int floating_only; /* else integral too (cross) */
} tp_ops[NK_TAIL_OP_COUNT] = {
    [NK_TAIL_GLU] = {"glu", 3, 1},
    [NK_TAIL_GLU_BACKWARD] = {"glu_backward", 5, 1},
    [NK_TAIL_PRELU] = {"prelu", 3, 1},
    [NK_TAIL_PRELU_BACKWARD] = {"prelu_backward", 5, 1},
    [NK_TAIL_RENORM_FACTOR] = {"renorm_scale_factor", 2, 1},
    [NK_TAIL_FREXP] = {"frexp", 3, 1},
    [NK_TAIL_CROSS] = {"cross", 3, 0},
};

typedef struct tp_plan {
  nk_tail_op op;
  nk_class cls;
  nrt_dtype dt[5];
  double scalar;
  int64_t dstride[3]; /* cross: byte stride along dim of out, a, b */
} tp_plan;

#define LD(k) (p->cls == NK_CLASS_DOUBLE ? nk_load_f64(p->dt[k], d[k]) : (double)nk_load_f32(p->dt[k], d[k]))

/* One element, compute type T (float or double). */
#define TP_ELEMENT(T, EXP, FREXP)                                                        \
  static void tp_element_##T(const tp_plan *p, char **d) {                               \
    switch (p->op) {                                                                     \
    case NK_TAIL_GLU: {                                                                  \
      T a = (T)LD(1), b = (T)LD(2);                                                      \
      nk_store_f64(p->dt[0], d[0], (double)(a * ((T)1 / ((T)1 + EXP(-b)))));             \
      break;                                                                             \
    }                                                                                    \
    case NK_TAIL_GLU_BACKWARD: { /* [0] gA [1] gB [2] a [3] b [4] grad */                \
      T a = (T)LD(2), b = (T)LD(3), g = (T)LD(4);                                        \
      T s = (T)1 / ((T)1 + EXP(-b));                                                     \
      nk_store_f64(p->dt[0], d[0], (double)(s * g));                                     \
      nk_store_f64(p->dt[1], d[1], (double)(((T)1 - s) * s * a * g));                    \
      break;                                                                             \
    }                                                                                    \
    case NK_TAIL_PRELU: {                                                                \
      T x = (T)LD(1), w = (T)LD(2);                                                      \
      nk_store_f64(p->dt[0], d[0], (double)(x > 0 ? x : w * x));                         \
      break;                                                                             \
    }                                                                                    \
    case NK_TAIL_PRELU_BACKWARD: { /* [0] gx [1] gw [2] x [3] w [4] grad */              \
      T x = (T)LD(2), w = (T)LD(3), g = (T)LD(4);                                        \
      nk_store_f64(p->dt[0], d[0], (double)(x > 0 ? g : w * g));                         \
      nk_store_f64(p->dt[1], d[1], (double)(x > 0 ? (T)0 : x * g));                      \
      break;                                                                             \
    }                                                                                    \
    case NK_TAIL_RENORM_FACTOR: {                                                        \
      T norm = (T)LD(1), maxnorm = (T)p->scalar;                                         \
      nk_store_f64(p->dt[0], d[0],                                                       \
                   (double)(norm > maxnorm ? maxnorm / (norm + (T)1e-7) : (T)1));        \
      break;                                                                             \
    }                                                                                    \
    case NK_TAIL_FREXP: { /* [0] mantissa [1] exponent (int32) [2] x */                  \
      int e = 0;                                                                         \
      T m = FREXP((T)LD(2), &e);                                                         \
      nk_store_f64(p->dt[0], d[0], (double)m);                                           \
      nk_store_i64(p->dt[1], d[1], e);                                                   \
      break;                                                                             \
    }                                                                                    \
    case NK_TAIL_CROSS: {                                                                \
      T a[3], b[3];                                                                      \
      for (int c = 0; c < 3; c++) {                                                      \
        const char *pa = d[1] + c * p->dstride[1], *pb = d[2] + c * p->dstride[2];       \
        a[c] = p->cls == NK_CLASS_DOUBLE ? (T)nk_load_f64(p->dt[1], pa)                  \
                                         : (T)nk_load_f32(p->dt[1], pa);                 \
        b[c] = p->cls == NK_CLASS_DOUBLE ? (T)nk_load_f64(p->dt[2], pb)                  \
                                         : (T)nk_load_f32(p->dt[2], pb);                 \
      }                                                                                  \
      nk_store_f64(p->dt[0], d[0], (double)(a[1] * b[2] - a[2] * b[1]));                 \
      nk_store_f64(p->dt[0], d[0] + p->dstride[0], (double)(a[2] * b[0] - a[0] * b[2])); \
      nk_store_f64(p->dt[0], d[0] + 2 * p->dstride[0], (double)(a[0] * b[1] - a[1] * b[0])); \
      break;                                                                             \
    }                                                                                    \
    default: break;                                                                      \
    }                                                                                    \
  }
TP_ELEMENT(float, expf, frexpf)
TP_ELEMENT(double, exp, frexp)
#undef TP_ELEMENT
#undef LD

/* cross on integers: int64 products in uint64 (wrapping, no UB). */
static void tp_cross_int(const tp_plan *p, char **d) {
  uint64_t a[3], b[3];
  for (int c = 0; c < 3; c++) {
    a[c] = (uint64_t)nk_load_i64(p->dt[1], d[1] + c * p->dstride[1]);
    b[c] = (uint64_t)nk_load_i64(p->dt[2], d[2] + c * p->dstride[2]);
  }
  nk_store_i64(p->dt[0], d[0], (int64_t)(a[1] * b[2] - a[2] * b[1]));
  nk_store_i64(p->dt[0], d[0] + p->dstride[0], (int64_t)(a[2] * b[0] - a[0] * b[2]));
  nk_store_i64(p->dt[0], d[0] + 2 * p->dstride[0], (int64_t)(a[0] * b[1] - a[1] * b[0]));
}

static void tp_loop(void *vctx, int64_t n, char *const *data, const int64_t *strides) {
  const tp_plan *p = vctx;
  const int k_n = tp_ops[p->op].operands;
  char *d[5];
  for (int k = 0; k < k_n; k++) d[k] = data[k];
  for (int64_t i = 0; i < n; i++) {
    if (p->cls == NK_CLASS_DOUBLE) tp_element_double(p, d);
    else if (p->cls == NK_CLASS_FLOAT) tp_element_float(p, d);
    else tp_cross_int(p, d);
    for (int k = 0; k < k_n; k++) d[k] += strides[k];
  }
}

int nk_tail_pointwise_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_tail_pointwise_params *prm = (const nk_tail_pointwise_params *)task->params;
  if (prm->op < 0 || prm->op >= NK_TAIL_OP_COUNT) {
    nrt_exec_fail(ctx, "tail_pointwise: unknown op %d", (int)prm->op);
    return -1;
  }
  const nk_tail_op op = (nk_tail_op)prm->op;
  const int n_ops = tp_ops[op].operands;
  if (nk_check_elementwise(task, ctx, tp_ops[op].name, n_ops)) return -1;
  if (!nk_dtype_valid(prm->compute) || prm->compute == NRT_BOOL ||
      (tp_ops[op].floating_only && !nk_dtype_is_floating((nrt_dtype)prm->compute))) {
    nrt_exec_fail(ctx, "%s: compute dtype %d not supported", tp_ops[op].name, (int)prm->compute);
    return -1;
  }
  tp_plan plan;
  memset(&plan, 0, sizeof plan);
  plan.op = op;
  plan.scalar = prm->scalar;
  nk_class cls = nk_dtype_class((nrt_dtype)prm->compute);
  plan.cls = cls;
  for (int k = 0; k < n_ops; k++) plan.dt[k] = (nrt_dtype)task->operands[k].dtype;
  if (op == NK_TAIL_FREXP && plan.dt[1] != NRT_INT32) {
    nrt_exec_fail(ctx, "frexp: the exponent must be int32");
    return -1;
  }
  nrt_operand ops[5];
  memcpy(ops, task->operands, sizeof ops[0] * (size_t)n_ops);
  if (op == NK_TAIL_CROSS) {
    const int nd = ops[0].ndim;
    if (prm->dim < 0 || prm->dim >= nd || ops[0].sizes[prm->dim] != 3) {
      nrt_exec_fail(ctx, "cross: dim %d must have size 3 (operands have %d dims)", (int)prm->dim, nd);
      return -1;
    }
    for (int k = 0; k < 3; k++) {
      plan.dstride[k] = ops[k].strides[prm->dim];
      ops[k].sizes[prm->dim] = 1;
    }
  }
  nk_for_each(ops, n_ops, tp_loop, &plan);
  return 0;
}

/* ------------------------------------------------------- unfold backward */

typedef struct ub_job {
  const nrt_operand *out, *grad;
  int dim, nd;
  int64_t size, step, nwin;
  nk_class cls;
} ub_job;

static void ub_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const ub_job *j = arg;
  const nrt_operand *o = j->out, *g = j->grad;
  const nrt_dtype to = (nrt_dtype)o->dtype, tg = (nrt_dtype)g->dtype;
  const int64_t gs_dim = g->strides[j->dim], gs_last = g->strides[j->nd];
  for (int64_t flat = begin; flat < end; flat++) {
    int64_t rem = flat, ooff = 0, goff = 0, i = 0;
    for (int e = j->nd - 1; e >= 0; e--) {
      const int64_t c = rem % o->sizes[e];
      rem /= o->sizes[e];
      ooff += c * o->strides[e];
      if (e == j->dim) i = c;
      else goff += c * g->strides[e];
    }
    /* windows w with w * step <= i < w * step + size, w < nwin */
    int64_t w_lo = i >= j->size ? (i - j->size) / j->step + 1 : 0;
    int64_t w_hi = i / j->step;
    if (w_hi > j->nwin - 1) w_hi = j->nwin - 1;
    const char *gb = (const char *)g->data + goff;
    char *dst = (char *)o->data + ooff;
    if (j->cls == NK_CLASS_DOUBLE) {
      double acc = 0;
      for (int64_t w = w_lo; w <= w_hi; w++)
        acc += nk_load_f64(tg, gb + w * gs_dim + (i - w * j->step) * gs_last);
      nk_store_f64(to, dst, acc);
    } else if (j->cls == NK_CLASS_FLOAT) {
      float acc = 0;
      for (int64_t w = w_lo; w <= w_hi; w++)
        acc += nk_load_f32(tg, gb + w * gs_dim + (i - w * j->step) * gs_last);
      nk_store_f32(to, dst, acc);
    } else {
      uint64_t acc = 0;
      for (int64_t w = w_lo; w <= w_hi; w++)
        acc += (uint64_t)nk_load_i64(tg, gb + w * gs_dim + (i - w * j->step) * gs_last);
      nk_store_i64(to, dst, (int64_t)acc);
    }
  }
}

int nk_unfold_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "unfold_backward", 2)) return -1;
  const nk_unfold_backward_params *p = (const nk_unfold_backward_params *)task->params;
  const nrt_operand *out = &task->operands[0], *grad = &task->operands[1];
  const int nd = out->ndim;
  if (nd < 1 || grad->ndim != nd + 1 || p->dim < 0 || p->dim >= nd) {
    nrt_exec_fail(ctx, "unfold_backward: grad_input has %d dims, grad %d, dim %d", nd, (int)grad->ndim,
                  (int)p->dim);
    return -1;
  }
  if (out->dtype != grad->dtype) {
    nrt_exec_fail(ctx, "unfold_backward: grad_input and grad dtypes differ");
    return -1;
  }
  if (p->size < 1 || p->step < 1 || grad->sizes[nd] != p->size) {
    nrt_exec_fail(ctx, "unfold_backward: size %lld, step %lld, grad's last dim %lld", (long long)p->size,
                  (long long)p->step, (long long)grad->sizes[nd]);
    return -1;
  }
  for (int e = 0; e < nd; e++) {
    if (e != p->dim && grad->sizes[e] != out->sizes[e]) {
      nrt_exec_fail(ctx, "unfold_backward: grad dim %d has size %lld, grad_input %lld", e,
                    (long long)grad->sizes[e], (long long)out->sizes[e]);
      return -1;
    }
  }
  const int64_t nwin = grad->sizes[p->dim];
  if (nwin > 0 && (nwin - 1) * p->step + p->size > out->sizes[p->dim]) {
    nrt_exec_fail(ctx, "unfold_backward: %lld windows of %lld (step %lld) overrun size %lld", (long long)nwin,
                  (long long)p->size, (long long)p->step, (long long)out->sizes[p->dim]);
    return -1;
  }
  int64_t numel = 1;
  for (int e = 0; e < nd; e++) numel *= out->sizes[e];
  if (numel == 0) return 0;
  ub_job j = {out, grad, (int)p->dim, nd, p->size, p->step, nwin, nk_dtype_class((nrt_dtype)out->dtype)};
  if (j.cls == NK_CLASS_BOOL) j.cls = NK_CLASS_INT;
  nk_parallel_for(numel, NK_GRAIN_ELEMENTWISE / 8, ub_range, &j);
  return 0;
}

/* ------------------------------------------------------------ histogram */

/* Rows per chunk of the input: each chunk counts into its own double
 * histogram and the chunks are summed in order, so results do not depend
 * on the thread count. */
#define HIST_CHUNK_ROWS 4096
#define HIST_MAX_SCRATCH ((int64_t)1 << 22) /* doubles over all chunks */

typedef struct hist_job {
  const nrt_operand *hist, *in, *edges, *weight;
  const nk_histogram_params *p;
  int64_t n, rows_per_chunk, hist_numel;
  int64_t edge_off[NK_HISTOGRAM_MAX_DIMS];
  int64_t hist_mul[NK_HISTOGRAM_MAX_DIMS]; /* row-major multipliers of the scratch */
  double *scratch;                         /* [chunks][hist_numel] */
} hist_job;

static double hist_edge(const hist_job *j, int d, int64_t k) {
  const nrt_operand *e = j->edges;
  return nk_load_f64((nrt_dtype)e->dtype, (const char *)e->data + (j->edge_off[d] + k) * e->strides[0]);
}

/* the bin of x along dim d, -1 when outside the edges (or NaN) */
static int64_t hist_bin(const hist_job *j, int d, double x) {
  const int64_t ne = j->p->n_edges[d];
  const double lo = hist_edge(j, d, 0), hi = hist_edge(j, d, ne - 1);
  if (!(x >= lo && x <= hi)) return -1;
  int64_t pos;
  if (j->p->algorithm == NK_HISTOGRAM_BINARY_SEARCH) {
    int64_t a = 0, b = ne; /* upper_bound: first edge > x */
    while (a < b) {
      int64_t m = a + (b - a) / 2;
      if (hist_edge(j, d, m) <= x) a = m + 1;
      else b = m;
    }
    pos = a - 1;
  } else {
    /* (x - lo) * (ne - 1) / (hi - lo) in the input dtype's arithmetic */
    const nrt_dtype t = (nrt_dtype)j->in->dtype;
    double q;
    if (t == NRT_FLOAT64) {
      q = (x - lo) * (double)(ne - 1) / (hi - lo);
    } else {
      float r = nk_round_f32(t, (float)x - (float)lo);
      r = nk_round_f32(t, r * nk_round_f32(t, (float)(ne - 1)));
      q = nk_round_f32(t, r / nk_round_f32(t, (float)hi - (float)lo));
    }
    pos = q >= 0 && q < (double)ne ? (int64_t)q : (q >= (double)ne ? ne - 1 : 0);
    if (j->p->algorithm == NK_HISTOGRAM_LINEAR_LOCAL_SEARCH) {
      int64_t a = pos - 1 > 0 ? pos - 1 : 0, b = pos + 2 < ne ? pos + 2 : ne;
      while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (hist_edge(j, d, m) <= x) a = m + 1;
        else b = m;
      }
      pos = a - 1;
    }
  }
  if (pos >= ne - 1) pos = ne - 2; /* the last bin includes its right edge */
  if (pos < 0) pos = 0;
  return pos;
}

/* NK_HISTOGRAM_INTEGER: histc on integers as CUDA's kernel, bin
 * (x - lo) * bins / (hi - lo), here in 128-bit arithmetic so that no value
 * of any integer dtype overflows (CUDA's int64 product can). */
static int64_t hist_bin_integer(const hist_job *j, int64_t x) {
  const nrt_operand *e = j->edges;
  const int64_t lo = nk_load_i64(NRT_INT64, e->data), hi = nk_load_i64(NRT_INT64, (const char *)e->data + e->strides[0]);
  if (x < lo || x > hi) return -1;
  const int64_t bins = j->p->n_edges[0] - 1;
  const __int128 q = ((__int128)x - lo) * bins / ((__int128)hi - lo);
  return q >= bins ? bins - 1 : (int64_t)q;
}

static void hist_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const hist_job *j = arg;
  const int D = j->p->dims;
  const nrt_dtype ti = (nrt_dtype)j->in->dtype;
  for (int64_t c = begin; c < end; c++) {
    double *h = j->scratch + c * j->hist_numel;
    const int64_t r0 = c * j->rows_per_chunk;
    const int64_t r1 = r0 + j->rows_per_chunk < j->n ? r0 + j->rows_per_chunk : j->n;
    if (j->p->algorithm == NK_HISTOGRAM_INTEGER) {
      for (int64_t r = r0; r < r1; r++) {
        int64_t b = hist_bin_integer(j, nk_load_i64(ti, (const char *)j->in->data + r * j->in->strides[0]));
        if (b >= 0) h[b] += 1.0;
      }
      continue;
    }
    for (int64_t r = r0; r < r1; r++) {
      int64_t flat = 0;
      int skip = 0;
      for (int d = 0; d < D && !skip; d++) {
        double x = nk_load_f64(ti, (const char *)j->in->data + r * j->in->strides[0] + d * j->in->strides[1]);
        int64_t b = hist_bin(j, d, x);
        if (b < 0) skip = 1;
        else flat += b * j->hist_mul[d];
      }
      if (skip) continue;
      h[flat] += j->weight ? nk_load_f64((nrt_dtype)j->weight->dtype,
                                         (const char *)j->weight->data + r * j->weight->strides[0])
                           : 1.0;
    }
  }
}

int nk_histogram_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (task->n_operands != 3 && task->n_operands != 4) {
    nrt_exec_fail(ctx, "histogram: %d operands, expected 3 or 4", (int)task->n_operands);
    return -1;
  }
  if (nk_check_operands(task, ctx, "histogram", task->n_operands)) return -1;
  const nk_histogram_params *p = (const nk_histogram_params *)task->params;
  const nrt_operand *hist = &task->operands[0], *in = &task->operands[1], *edges = &task->operands[2];
  const nrt_operand *weight = task->n_operands == 4 ? &task->operands[3] : NULL;
  const int D = p->dims;
  if (p->algorithm < 0 || p->algorithm > NK_HISTOGRAM_INTEGER || D < 1 || D > NK_HISTOGRAM_MAX_DIMS ||
      hist->ndim != D || in->ndim != 2 || in->sizes[1] != D || edges->ndim != 1) {
    nrt_exec_fail(ctx, "histogram: bad shapes (dims %d, hist %d-d, input %d-d)", D, (int)hist->ndim, (int)in->ndim);
    return -1;
  }
  const int integer = p->algorithm == NK_HISTOGRAM_INTEGER;
  if (integer) {
    if (D != 1 || weight || edges->dtype != NRT_INT64 || edges->sizes[0] != 2 ||
        nk_dtype_is_floating((nrt_dtype)in->dtype) || in->dtype == NRT_BOOL) {
      nrt_exec_fail(ctx, "histogram: the integer mode takes 1-d integer input, no weight and 2 int64 edges");
      return -1;
    }
    const int64_t lo = nk_load_i64(NRT_INT64, edges->data);
    const int64_t hi = nk_load_i64(NRT_INT64, (const char *)edges->data + edges->strides[0]);
    if (!(lo < hi)) {
      nrt_exec_fail(ctx, "histogram: range [%lld, %lld] is empty", (long long)lo, (long long)hi);
      return -1;
    }
  } else if (!nk_dtype_is_floating((nrt_dtype)in->dtype) || edges->dtype != in->dtype ||
             (weight && weight->dtype != in->dtype)) {
    nrt_exec_fail(ctx, "histogram: input, edges and weight must share one floating dtype");
    return -1;
  }
  hist_job j;
  memset(&j, 0, sizeof j);
  int64_t total = 0, numel = 1;
  for (int d = D - 1; d >= 0; d--) {
    const int64_t ne = p->n_edges[d];
    if (ne < 2 || hist->sizes[d] != ne - 1) {
      nrt_exec_fail(ctx, "histogram: dim %d has %lld edges for %lld bins", d, (long long)ne,
                    (long long)hist->sizes[d]);
      return -1;
    }
    j.hist_mul[d] = numel;
    numel *= hist->sizes[d];
  }
  for (int d = 0; d < D; d++) {
    j.edge_off[d] = total;
    total += p->n_edges[d];
  }
  if (!integer && total != edges->sizes[0]) {
    nrt_exec_fail(ctx, "histogram: %lld edges given, %lld expected", (long long)edges->sizes[0], (long long)total);
    return -1;
  }
  if (weight && (weight->ndim != 1 || weight->sizes[0] != in->sizes[0])) {
    nrt_exec_fail(ctx, "histogram: weight must have one value per input row");
    return -1;
  }
  j.hist = hist;
  j.in = in;
  j.edges = edges;
  j.weight = weight;
  j.p = p;
  j.n = in->sizes[0];
  j.hist_numel = numel;
  j.rows_per_chunk = HIST_CHUNK_ROWS;
  int64_t chunks = (j.n + j.rows_per_chunk - 1) / j.rows_per_chunk;
  const int64_t max_chunks = HIST_MAX_SCRATCH / numel > 1 ? HIST_MAX_SCRATCH / numel : 1;
  if (chunks > max_chunks) {
    chunks = max_chunks;
    j.rows_per_chunk = (j.n + chunks - 1) / chunks;
  }
  if (chunks < 1) chunks = 1;
  j.scratch = calloc((size_t)(chunks * numel), sizeof(double));
  if (!j.scratch) {
    nrt_exec_fail(ctx, "histogram: out of host memory for %lld bins", (long long)numel);
    return -1;
  }
  if (j.n > 0) nk_parallel_for(chunks, 1, hist_range, &j);
  const nrt_dtype th = (nrt_dtype)hist->dtype;
  for (int64_t f = 0; f < numel; f++) {
    double s = 0;
    for (int64_t c = 0; c < chunks; c++) s += j.scratch[c * numel + f];
    int64_t off = 0, rem = f;
    for (int d = D - 1; d >= 0; d--) {
      off += (rem % hist->sizes[d]) * hist->strides[d];
      rem /= hist->sizes[d];
    }
    if (nk_dtype_is_floating(th)) nk_store_f64(th, (char *)hist->data + off, s);
    else nk_store_i64(th, (char *)hist->data + off, (int64_t)s); /* counts wrap, as CUDA's adds */
  }
  free(j.scratch);
  return 0;
}

/* ------------------------------------------------------------- logspace */

typedef struct ls_job {
  const nrt_operand *out;
  const nk_logspace_params *p;
} ls_job;

static void ls_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const ls_job *j = arg;
  const nk_logspace_params *p = j->p;
  const int64_t half = p->steps / 2;
  for (int64_t i = begin; i < end; i++) {
    double e = i < half ? p->start + p->step * (double)i : p->end - p->step * (double)(p->steps - i - 1);
    nk_store_f64((nrt_dtype)j->out->dtype, (char *)j->out->data + i * j->out->strides[0], pow(p->base, e));
  }
}

int nk_logspace_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "logspace", 1)) return -1;
  const nk_logspace_params *p = (const nk_logspace_params *)task->params;
  const nrt_operand *out = &task->operands[0];
  if (out->ndim != 1 || out->sizes[0] != p->steps) {
    nrt_exec_fail(ctx, "logspace: out must be 1-d of %lld elements", (long long)p->steps);
    return -1;
  }
  ls_job j = {out, p};
  nk_parallel_for(p->steps, NK_GRAIN_ELEMENTWISE, ls_range, &j);
  return 0;
}

/* ------------------------------------------------------------- distances */

/* p-norm pieces, as ATen's CPU Dist: map |a - b| to a summand, reduce
 * (sum, or max for inf), finish (root); and the gradient of the norm with
 * respect to a, given diff = a - b, the upstream grad and the distance. */
typedef enum { DIST_ZERO, DIST_ONE, DIST_TWO, DIST_INF, DIST_GENERAL } dist_kind;

static dist_kind dist_kind_of(double p) {
  if (p == 0) return DIST_ZERO;
  if (p == 1) return DIST_ONE;
  if (p == 2) return DIST_TWO;
  if (isinf(p)) return DIST_INF;
  return DIST_GENERAL;
}

static double dsign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

#define DIST_FUNCS(T, POW, SQRT, FABS, CEIL)                                             \
  static T dist_norm_##T(dist_kind k, T p, const char *a, int64_t sa, const char *b,     \
                         int64_t sb, int64_t m, nrt_dtype dt) {                          \
    T agg = 0;                                                                           \
    for (int64_t x = 0; x < m; x++) {                                                    \
      T d = FABS((T)nk_load_f64(dt, a + x * sa) - (T)nk_load_f64(dt, b + x * sb));       \
      switch (k) {                                                                       \
      case DIST_ZERO: agg += 1 < CEIL(d) ? (T)1 : CEIL(d); break;                           \
      case DIST_ONE: agg += d; break;                                                    \
      case DIST_TWO: agg += d * d; break;                                                \
      case DIST_INF: agg = agg < d ? d : agg; break;                           \
      default: agg += POW(d, p); break;                                                  \
      }                                                                                  \
    }                                                                                    \
    if (k == DIST_TWO) return SQRT(agg);                                                 \
    if (k == DIST_GENERAL) return POW(agg, (T)1 / p);                                    \
    return agg;                                                                          \
  }                                                                                      \
  static T dist_grad_##T(dist_kind k, T p, T diff, T grad, T dist) {                     \
    switch (k) {                                                                         \
    case DIST_ZERO: return 0;                                                            \
    case DIST_ONE: return grad * (T)dsign(diff);                                         \
    case DIST_TWO: return dist == 0 ? (T)0 : grad * diff / dist;                         \
    case DIST_INF:                                                                       \
      return grad * (T)dsign(diff) * ((T)1 - (CEIL(FABS(FABS(diff) - dist)) < 1 ? CEIL(FABS(FABS(diff) - dist)) : 1)); \
    default:                                                                             \
      if (p < 2) {                                                                       \
        if (dist == 0 || (diff == 0 && p < 1)) return 0;                                 \
        return (T)dsign(diff) * POW(FABS(diff), p - 1) * grad / POW(dist, p - 1);        \
      }                                                                                  \
      return dist == 0 ? (T)0 : diff * POW(FABS(diff), p - 2) * grad / POW(dist, p - 1); \
    }                                                                                    \
  }
DIST_FUNCS(float, powf, sqrtf, fabsf, ceilf)
DIST_FUNCS(double, pow, sqrt, fabs, ceil)
#undef DIST_FUNCS

typedef struct dist_job {
  const nrt_task *task;
  const nk_dist_params *p;
  dist_kind kind;
  int is_double;
  int64_t b, r1, r2, m; /* pdist: r1 = r2 = n */
} dist_job;

#define OPND(k) (&j->task->operands[k])
#define AT3(o, x, y, z) ((char *)(o)->data + (x) * (o)->strides[0] + (y) * (o)->strides[1] + (z) * (o)->strides[2])
#define AT2(o, x, y) ((char *)(o)->data + (x) * (o)->strides[0] + (y) * (o)->strides[1])
#define AT1(o, x) ((char *)(o)->data + (x) * (o)->strides[0])

/* pdist's pair (i, j), i < j, is result element i*n - i*(i+1)/2 + j - i - 1 */
static int64_t pair_index(int64_t n, int64_t i, int64_t j) { return i * n - i * (i + 1) / 2 + j - i - 1; }

static void dist_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const dist_job *j = arg;
  const nrt_dtype dt = (nrt_dtype)OPND(0)->dtype;
  const double p = j->p->p;
  for (int64_t w = begin; w < end; w++) {
    switch (j->p->op) {
    case NK_DIST_CDIST: { /* w over b * r1 rows: one row of out */
      const int64_t bb = w / j->r1, i = w % j->r1;
      const nrt_operand *out = OPND(0), *x1 = OPND(1), *x2 = OPND(2);
      for (int64_t c = 0; c < j->r2; c++) {
        double v = j->is_double ? dist_norm_double(j->kind, p, AT3(x1, bb, i, 0), x1->strides[2], AT3(x2, bb, c, 0),
                                                   x2->strides[2], j->m, dt)
                                : dist_norm_float(j->kind, (float)p, AT3(x1, bb, i, 0), x1->strides[2],
                                                  AT3(x2, bb, c, 0), x2->strides[2], j->m, dt);
        nk_store_f64(dt, AT3(out, bb, i, c), v);
      }
      break;
    }
    case NK_DIST_CDIST_BACKWARD: { /* [0] grad_x1 [1] grad [2] x1 [3] x2 [4] dist */
      const int64_t bb = w / j->r1, i = w % j->r1;
      const nrt_operand *gx = OPND(0), *g = OPND(1), *x1 = OPND(2), *x2 = OPND(3), *ds = OPND(4);
      for (int64_t x = 0; x < j->m; x++) {
        double acc = 0;
        float accf = 0;
        const double a = nk_load_f64(dt, AT3(x1, bb, i, x));
        for (int64_t c = 0; c < j->r2; c++) {
          double diff = a - nk_load_f64(dt, AT3(x2, bb, c, x));
          double gr = nk_load_f64(dt, AT3(g, bb, i, c)), dd = nk_load_f64(dt, AT3(ds, bb, i, c));
          if (j->is_double) acc += dist_grad_double(j->kind, p, diff, gr, dd);
          else accf += dist_grad_float(j->kind, (float)p, (float)((float)a - (float)nk_load_f64(dt, AT3(x2, bb, c, x))),
                                       (float)gr, (float)dd);
        }
        nk_store_f64(dt, AT3(gx, bb, i, x), j->is_double ? acc : (double)accf);
      }
      break;
    }
    case NK_DIST_PDIST: { /* w over the n rows i: pairs (i, c > i) */
      const nrt_operand *out = OPND(0), *x = OPND(1);
      const int64_t n = j->r1, i = w;
      for (int64_t c = i + 1; c < n; c++) {
        double v = j->is_double ? dist_norm_double(j->kind, p, AT2(x, i, 0), x->strides[1], AT2(x, c, 0),
                                                   x->strides[1], j->m, dt)
                                : dist_norm_float(j->kind, (float)p, AT2(x, i, 0), x->strides[1], AT2(x, c, 0),
                                                  x->strides[1], j->m, dt);
        nk_store_f64(dt, AT1(out, pair_index(n, i, c)), v);
      }
      break;
    }
    case NK_DIST_PDIST_BACKWARD: { /* [0] grad_self [1] grad [2] self [3] dist */
      const nrt_operand *gs = OPND(0), *g = OPND(1), *x = OPND(2), *ds = OPND(3);
      const int64_t n = j->r1, r = w;
      for (int64_t col = 0; col < j->m; col++) {
        double acc = 0;
        float accf = 0;
        const double xr = nk_load_f64(dt, AT2(x, r, col));
        /* as the CPU: the pairs (i < r) subtract, then the pairs (r, c > r) add */
        for (int64_t i = 0; i < n; i++) {
          if (i == r) continue;
          const int64_t lo = i < r ? i : r, hi = i < r ? r : i, k = pair_index(n, lo, hi);
          const double xl = nk_load_f64(dt, AT2(x, lo, col)), xh = nk_load_f64(dt, AT2(x, hi, col));
          const double gr = nk_load_f64(dt, AT1(g, k)), dd = nk_load_f64(dt, AT1(ds, k));
          const double sgn = i < r ? -1 : 1;
          if (j->is_double) acc += sgn * dist_grad_double(j->kind, p, xl - xh, gr, dd);
          else accf += (float)sgn * dist_grad_float(j->kind, (float)p, (float)xl - (float)xh, (float)gr, (float)dd);
        }
        (void)xr;
        nk_store_f64(dt, AT2(gs, r, col), j->is_double ? acc : (double)accf);
      }
      break;
    }
    default: break;
    }
  }
}

int nk_dist_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_dist_params *p = (const nk_dist_params *)task->params;
  static const int n_ops[NK_DIST_OP_COUNT] = {3, 5, 2, 4};
  if (p->op < 0 || p->op >= NK_DIST_OP_COUNT) {
    nrt_exec_fail(ctx, "dist: unknown op %d", (int)p->op);
    return -1;
  }
  if (nk_check_operands(task, ctx, "dist", n_ops[p->op])) return -1;
  const nrt_operand *o = task->operands;
  const nrt_dtype dt = (nrt_dtype)o[0].dtype;
  if (dt != NRT_FLOAT32 && dt != NRT_FLOAT64) {
    nrt_exec_fail(ctx, "dist: only float32 and float64");
    return -1;
  }
  for (int k = 1; k < n_ops[p->op]; k++) {
    if ((nrt_dtype)o[k].dtype != dt) {
      nrt_exec_fail(ctx, "dist: operand %d's dtype differs", k);
      return -1;
    }
  }
  if (!(p->p >= 0)) {
    nrt_exec_fail(ctx, "dist: p must be >= 0");
    return -1;
  }
  dist_job j = {task, p, dist_kind_of(p->p), dt == NRT_FLOAT64, 0, 0, 0, 0};
  int ok = 1;
  int64_t work = 0;
  switch (p->op) {
  case NK_DIST_CDIST:
  case NK_DIST_CDIST_BACKWARD: {
    /* cdist: [0] out (b, r1, r2), [1] x1 (b, r1, m), [2] x2 (b, r2, m);
     * backward: [0] grad_x1 (b, r1, m), [1] grad (b, r1, r2), [2] x1, [3] x2, [4] dist (b, r1, r2) */
    const nrt_operand *x1 = &o[p->op == NK_DIST_CDIST ? 1 : 2], *x2 = &o[p->op == NK_DIST_CDIST ? 2 : 3];
    ok = x1->ndim == 3 && x2->ndim == 3 && x2->sizes[0] == x1->sizes[0] && x2->sizes[2] == x1->sizes[2];
    if (ok) {
      j.b = x1->sizes[0];
      j.r1 = x1->sizes[1];
      j.r2 = x2->sizes[1];
      j.m = x1->sizes[2];
      const int64_t rr[3] = {j.b, j.r1, j.r2}, rm[3] = {j.b, j.r1, j.m};
      for (int k = 0; k < n_ops[p->op] && ok; k++) {
        const nrt_operand *t = &o[k];
        if (t == x1 || t == x2) continue;
        const int64_t *want = (p->op == NK_DIST_CDIST || k == 1 || k == 4) ? rr : rm;
        ok = t->ndim == 3 && t->sizes[0] == want[0] && t->sizes[1] == want[1] && t->sizes[2] == want[2];
      }
    }
    work = j.b * j.r1;
    break;
  }
  default: {
    /* pdist: [0] out (n(n-1)/2), [1] self (n, m);
     * backward: [0] grad_self (n, m), [1] grad (n(n-1)/2), [2] self, [3] dist (n(n-1)/2) */
    const nrt_operand *x = &o[p->op == NK_DIST_PDIST ? 1 : 2];
    ok = x->ndim == 2;
    if (ok) {
      j.r1 = j.r2 = x->sizes[0];
      j.m = x->sizes[1];
      const int64_t pairs = j.r1 * (j.r1 - 1) / 2;
      for (int k = 0; k < n_ops[p->op] && ok; k++) {
        const nrt_operand *t = &o[k];
        if (t == x) continue;
        if (p->op == NK_DIST_PDIST_BACKWARD && k == 0)
          ok = t->ndim == 2 && t->sizes[0] == j.r1 && t->sizes[1] == j.m;
        else
          ok = t->ndim == 1 && t->sizes[0] == pairs;
      }
    }
    work = j.r1;
    break;
  }
  }
  if (!ok) {
    nrt_exec_fail(ctx, "dist: operand shapes do not match op %d", (int)p->op);
    return -1;
  }
  if (work > 0) nk_parallel_for(work, 1 + 4096 / (j.m * (j.r2 + 1) + 1), dist_range, &j);
  return 0;
}
#undef OPND
#undef AT3
#undef AT2
#undef AT1
