/* loss.c — the losses family: NK_KERNEL_LOSS_POINTWISE (the elementwise
 * part of mse/smooth_l1/huber/binary_cross_entropy and their gradients) and
 * NK_KERNEL_NLL_LOSS (nll_loss and nll_loss2d, forward and backward).
 *
 * Decisions:
 *  - Reductions of the elementwise losses are not here: ATen's own impls
 *    (mse_loss_out, smooth_l1_loss_out, huber_loss, the CPU's bce) call
 *    at::mean/at::sum on the elementwise loss, and those are the reduce
 *    family's kernels, deterministic by construction.  So the pointwise
 *    kernel is a plain nk_for_each loop: one op table, a same-dtype path
 *    (every operand float32, or every operand float64) whose dtypes and op
 *    are constants so the compiler vectorises it, and a mixed path that
 *    converts each operand on load.
 *  - Arithmetic follows ATen's CPU kernels: float16/bfloat16 compute in
 *    float32 and round once on store; the parameters ATen's CPU holds as
 *    scalar_t (mse/huber backward norm, huber's delta) are rounded to the
 *    compute dtype first; max(log(.), -100) is std::max (NaN propagates).
 *  - binary_cross_entropy checks 0 <= x <= 1 on every element as the CPU
 *    does; a bad element sets a flag (the loops cannot fail) and the task
 *    fails after the pass, with the CPU's message, raised at the next sync.
 *  - nll_loss takes every layout as [N, C, H, W] (the glue adds stride-0
 *    dims), so nll_loss (1-d/2-d) and nll_loss2d are one kernel.  Each
 *    target is checked against [0, C) before the input is read through it.
 *    The reduced forward replays ATen's CPU exactly: a serial pass in
 *    row-major order with its 8-level cascade of partial sums, each step
 *    rounded to the input dtype as ATen's scalar_t arithmetic rounds
 *    (computed in double then rounded: for one +,-,*,/ of float operands
 *    that is the correctly rounded float result, so bitwise equal), hence
 *    bitwise the CPU's result at any thread count.  It reads one element
 *    per target, so a serial pass costs little next to the log_softmax
 *    before it.
 *  - The backward writes all of grad_input (zeros, then the one gradient
 *    per target), so the glue needs no separate zero fill: rows [n, :, h, :]
 *    are split over the pool, each written by one worker. */
#include <stdatomic.h>
#include <stdlib.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

/* std::max(a, b): b when a < b, else a (so a NaN `a` stays). */
#define LOSS_MAX(a, b) ((a) < (b) ? (b) : (a))

/* ====================================================== pointwise losses */

typedef struct loss_plan {
  nk_loss_op op;
  nrt_dtype t[4]; /* operand dtypes */
  int n;          /* operands: 3 forward, 4 backward */
  float p0f, p1f;
  double p0, p1;
  atomic_int bad; /* BCE: an input outside [0, 1] */
} loss_plan;

static int loss_is_backward(nk_loss_op op) { return op >= NK_LOSS_MSE_BW; }

/* One element in float (float16/bfloat16/float32 compute). */
NK_INLINE float loss_f32(nk_loss_op op, float x, float y, float g, float p0, float p1, int *bad) {
  float d = x - y, z;
  switch (op) {
  case NK_LOSS_MSE: return d * d;
  case NK_LOSS_SMOOTH_L1: z = fabsf(d); return z < p0 ? 0.5f * z * z / p0 : z - 0.5f * p0;
  case NK_LOSS_HUBER: z = fabsf(d); return z < p0 ? 0.5f * z * z : p0 * (z - 0.5f * p0);
  case NK_LOSS_BCE:
    if (!(x >= 0.0f && x <= 1.0f)) *bad = 1;
    return (y - 1.0f) * LOSS_MAX(logf(1.0f - x), -100.0f) - y * LOSS_MAX(logf(x), -100.0f);
  case NK_LOSS_MSE_BW: return p0 * d * g;
  case NK_LOSS_SMOOTH_L1_BW:
    return p0 * (fabsf(d) >= p1 ? (d > 0.0f ? 1.0f : -1.0f) : d / p1) * g;
  case NK_LOSS_HUBER_BW: return p0 * (fabsf(d) >= p1 ? (d > 0.0f ? p1 : -p1) : d) * g;
  case NK_LOSS_BCE_BW: return g * d / LOSS_MAX((1.0f - x) * x, 1e-12f);
  default: return 0.0f;
  }
}

NK_INLINE double loss_f64(nk_loss_op op, double x, double y, double g, double p0, double p1,
                          int *bad) {
  double d = x - y, z;
  switch (op) {
  case NK_LOSS_MSE: return d * d;
  case NK_LOSS_SMOOTH_L1: z = fabs(d); return z < p0 ? 0.5 * z * z / p0 : z - 0.5 * p0;
  case NK_LOSS_HUBER: z = fabs(d); return z < p0 ? 0.5 * z * z : p0 * (z - 0.5 * p0);
  case NK_LOSS_BCE:
    if (!(x >= 0.0 && x <= 1.0)) *bad = 1;
    return (y - 1.0) * LOSS_MAX(log(1.0 - x), -100.0) - y * LOSS_MAX(log(x), -100.0);
  case NK_LOSS_MSE_BW: return p0 * d * g;
  case NK_LOSS_SMOOTH_L1_BW: return p0 * (fabs(d) >= p1 ? (d > 0.0 ? 1.0 : -1.0) : d / p1) * g;
  case NK_LOSS_HUBER_BW: return p0 * (fabs(d) >= p1 ? (d > 0.0 ? p1 : -p1) : d) * g;
  case NK_LOSS_BCE_BW: return g * d / LOSS_MAX((1.0 - x) * x, (double)1e-12f);
  default: return 0.0;
  }
}

/* A contiguous float32 row; the gradient (backward) steps gs elements: 1,
 * or 0 for the gradient of a reduced loss, one value broadcast.  gs is a
 * constant at each call, so both loops vectorise. */
NK_INLINE void row_contig_f32(const loss_plan *p, nk_loss_op op, int64_t n, char *const *data,
                              int64_t gs, int *bad) {
  const int back = loss_is_backward(op);
  float *o = (float *)data[0];
  const float *a = (const float *)data[1], *b = (const float *)data[2];
  const float *g = back ? (const float *)data[3] : NULL;
  int bd = 0;
  for (int64_t i = 0; i < n; i++) o[i] = loss_f32(op, a[i], b[i], back ? g[i * gs] : 0.0f, p->p0f, p->p1f, &bd);
  *bad |= bd;
}

/* Same-dtype rows: the dtype and op are constants here. */
NK_INLINE void row_same_f32(const loss_plan *p, nk_loss_op op, int64_t n, char *const *data,
                            const int64_t *s, int *bad) {
  const int back = loss_is_backward(op);
  if (s[0] == 4 && s[1] == 4 && s[2] == 4 && (!back || s[3] == 4)) {
    row_contig_f32(p, op, n, data, 1, bad);
    return;
  }
  if (back && s[0] == 4 && s[1] == 4 && s[2] == 4 && s[3] == 0) {
    row_contig_f32(p, op, n, data, 0, bad);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    float g = back ? nk_read_f32(data[3] + i * s[3]) : 0.0f;
    float r = loss_f32(op, nk_read_f32(data[1] + i * s[1]), nk_read_f32(data[2] + i * s[2]), g,
                       p->p0f, p->p1f, bad);
    nk_write_f32(data[0] + i * s[0], r);
  }
}

NK_INLINE void row_same_f64(const loss_plan *p, nk_loss_op op, int64_t n, char *const *data,
                            const int64_t *s, int *bad) {
  const int back = loss_is_backward(op);
  for (int64_t i = 0; i < n; i++) {
    double g = back ? nk_read_f64(data[3] + i * s[3]) : 0.0;
    double r = loss_f64(op, nk_read_f64(data[1] + i * s[1]), nk_read_f64(data[2] + i * s[2]), g,
                        p->p0, p->p1, bad);
    nk_write_f64(data[0] + i * s[0], r);
  }
}

#define LOSS_OPS(M)                                                                       \
  M(NK_LOSS_MSE) M(NK_LOSS_SMOOTH_L1) M(NK_LOSS_HUBER) M(NK_LOSS_BCE) M(NK_LOSS_MSE_BW)   \
  M(NK_LOSS_SMOOTH_L1_BW) M(NK_LOSS_HUBER_BW) M(NK_LOSS_BCE_BW)

static void same_f32_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  loss_plan *p = ctx;
  int bad = 0;
  switch (p->op) {
#define CASE(OP) case OP: row_same_f32(p, OP, n, data, s, &bad); break;
    LOSS_OPS(CASE)
#undef CASE
  default: break;
  }
  if (bad) atomic_store(&p->bad, 1);
}

static void same_f64_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  loss_plan *p = ctx;
  int bad = 0;
  switch (p->op) {
#define CASE(OP) case OP: row_same_f64(p, OP, n, data, s, &bad); break;
    LOSS_OPS(CASE)
#undef CASE
  default: break;
  }
  if (bad) atomic_store(&p->bad, 1);
}

/* Mixed dtypes (or 16-bit): each operand converted on load to the compute
 * class (float or double), the result rounded on store to out's dtype. */
typedef struct mixed_ctx {
  loss_plan *p;
  int dbl;           /* compute class double */
  nrt_dtype compute; /* float16/bfloat16: mse rounds the difference first, like ATen CPU */
} mixed_ctx;

static void mixed_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const mixed_ctx *m = ctx;
  loss_plan *p = m->p;
  const int back = p->n == 4;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *a = data[1] + i * s[1], *b = data[2] + i * s[2];
    char *o = data[0] + i * s[0];
    if (m->dbl) {
      double g = back ? nk_load_f64(p->t[3], data[3] + i * s[3]) : 0.0;
      nk_store_f64(p->t[0], o,
                   loss_f64(p->op, nk_load_f64(p->t[1], a), nk_load_f64(p->t[2], b), g, p->p0, p->p1, &bad));
    } else {
      float g = back ? nk_load_f32(p->t[3], data[3] + i * s[3]) : 0.0f;
      if (p->op == NK_LOSS_MSE && (m->compute == NRT_FLOAT16 || m->compute == NRT_BFLOAT16)) {
        /* ATen CPU: diff = a - b in scalar_t (rounded), then diff * diff rounded */
        float d = nk_round_f32(m->compute, nk_load_f32(p->t[1], a) - nk_load_f32(p->t[2], b));
        nk_store_f32(p->t[0], o, d * d);
        continue;
      }
      nk_store_f32(p->t[0], o,
                   loss_f32(p->op, nk_load_f32(p->t[1], a), nk_load_f32(p->t[2], b), g, p->p0f, p->p1f, &bad));
    }
  }
  if (bad) atomic_store(&p->bad, 1);
}

static const char *const loss_op_names[NK_LOSS_OP_COUNT] = {
    "mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "mse_loss_backward", "smooth_l1_loss_backward", "huber_loss_backward",
    "binary_cross_entropy_backward"};

int nk_loss_pointwise_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_loss_pointwise_params *prm = (const nk_loss_pointwise_params *)task->params;
  if (prm->op < 0 || prm->op >= NK_LOSS_OP_COUNT) {
    nrt_exec_fail(ctx, "loss_pointwise: invalid op %d", (int)prm->op);
    return -1;
  }
  const nk_loss_op op = (nk_loss_op)prm->op;
  const int n_ops = loss_is_backward(op) ? 4 : 3;
  if (nk_check_elementwise(task, ctx, loss_op_names[op], n_ops)) return -1;
  if (!nk_dtype_valid(prm->compute) || !nk_dtype_is_floating((nrt_dtype)prm->compute)) {
    nrt_exec_fail(ctx, "%s: needs a floating compute dtype, got dtype %d", loss_op_names[op],
                  (int)prm->compute);
    return -1;
  }
  const nrt_dtype compute = (nrt_dtype)prm->compute;
  static loss_plan zero_plan;
  loss_plan p = zero_plan;
  p.op = op;
  p.n = n_ops;
  int same = 1;
  for (int k = 0; k < n_ops; k++) {
    p.t[k] = (nrt_dtype)task->operands[k].dtype;
    same &= p.t[k] == compute;
  }
  /* The parameters ATen's CPU converts to scalar_t. */
  const int round_p0 = op == NK_LOSS_MSE_BW || op == NK_LOSS_HUBER || op == NK_LOSS_HUBER_BW;
  const int round_p1 = op == NK_LOSS_HUBER_BW;
  p.p0 = prm->p0;
  p.p1 = prm->p1;
  p.p0f = round_p0 ? nk_round_f32(compute, (float)prm->p0) : (float)prm->p0;
  p.p1f = round_p1 ? nk_round_f32(compute, (float)prm->p1) : (float)prm->p1;
  if ((op == NK_LOSS_SMOOTH_L1 && !(prm->p0 > 0)) || (op == NK_LOSS_SMOOTH_L1_BW && !(prm->p1 > 0))) {
    nrt_exec_fail(ctx, "%s: beta must be positive", loss_op_names[op]);
    return -1;
  }
  atomic_init(&p.bad, 0);
  if (same && compute == NRT_FLOAT32) {
    nk_for_each(task->operands, n_ops, same_f32_loop, &p);
  } else if (same && compute == NRT_FLOAT64) {
    nk_for_each(task->operands, n_ops, same_f64_loop, &p);
  } else {
    mixed_ctx m = {&p, compute == NRT_FLOAT64, compute};
    nk_for_each(task->operands, n_ops, mixed_loop, &m);
  }
  if (atomic_load(&p.bad)) {
    nrt_exec_fail(ctx, "all elements of input should be between 0 and 1");
    return -1;
  }
  return 0;
}

/* ============================================================== nll_loss */

typedef struct nll_plan {
  const nrt_operand *out, *tw, *in, *tgt, *w; /* forward; backward reuses */
  const nrt_operand *gin, *gout;              /* backward */
  nrt_dtype dt;                               /* the input's dtype (scalar_t) */
  int reduction;
  int64_t ignore;
  int64_t N, C, H, W;
  double grad;   /* backward, reduced: -(g / total_weight) or -g, in scalar_t */
  atomic_int bad;
} nll_plan;

/* v rounded to scalar_t (what one ATen scalar_t operation stores). */
NK_INLINE double nll_round(nrt_dtype t, double v) {
  if (t == NRT_FLOAT64) return v;
  return (double)nk_round_f32(t, (float)v);
}

NK_INLINE int64_t nll_target(const nll_plan *p, int64_t n, int64_t h, int64_t w) {
  const nrt_operand *t = p->tgt;
  const char *q = (const char *)t->data + n * t->strides[0] + h * t->strides[1] + w * t->strides[2];
  return t->dtype == NRT_UINT8 ? (int64_t)nk_read_u8(q) : nk_read_i64(q);
}

NK_INLINE int nll_target_ok(const nll_plan *p, int64_t t) { return t == p->ignore || (t >= 0 && t < p->C); }

NK_INLINE double nll_weight(const nll_plan *p, int64_t c) {
  if (!p->w) return 1.0;
  return nk_load_f64((nrt_dtype)p->w->dtype, (const char *)p->w->data + c * p->w->strides[0]);
}

NK_INLINE char *at4(const nrt_operand *o, int64_t n, int64_t c, int64_t h, int64_t w) {
  return (char *)o->data + n * o->strides[0] + c * o->strides[1] + h * o->strides[2] + w * o->strides[3];
}
NK_INLINE char *at3(const nrt_operand *o, int64_t n, int64_t h, int64_t w) {
  return (char *)o->data + n * o->strides[0] + h * o->strides[1] + w * o->strides[2];
}

/* Forward, reduction none: rows r = n * H + h. */
static void nll_forward_none_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  nll_plan *p = arg;
  const nrt_dtype od = (nrt_dtype)p->out->dtype, id = (nrt_dtype)p->in->dtype;
  for (int64_t r = begin; r < end; r++) {
    const int64_t n = r / p->H, h = r % p->H;
    for (int64_t w = 0; w < p->W; w++) {
      const int64_t t = nll_target(p, n, h, w);
      char *o = at3(p->out, n, h, w);
      if (t == p->ignore) {
        nk_store_f64(od, o, 0.0);
        continue;
      }
      if (t < 0 || t >= p->C) {
        atomic_store(&p->bad, 1);
        continue;
      }
      const double x = nk_load_f64(id, at4(p->in, n, t, h, w));
      nk_store_f64(od, o, nll_round(p->dt, -x * nll_round(p->dt, nll_weight(p, t))));
    }
  }
}

/* The first out-of-range target in row-major order (after a failed pass). */
static int64_t nll_first_bad(const nll_plan *p) {
  for (int64_t n = 0; n < p->N; n++)
    for (int64_t h = 0; h < p->H; h++)
      for (int64_t w = 0; w < p->W; w++) {
        const int64_t t = nll_target(p, n, h, w);
        if (!nll_target_ok(p, t)) return t;
      }
  return 0;
}

/* ATen's utils::CeilLog2. */
static int64_t ceil_log2(int64_t x) {
  if (x <= 2) return 1;
  uint64_t v = (uint64_t)x - 1;
  int64_t last = 63 - __builtin_clzll(v);
  return last + 1;
}

/* Forward with reduction: the CPU's serial cascade, in scalar_t steps. */
static int nll_forward_reduce(nll_plan *p, nrt_exec_ctx *ctx) {
  const nrt_dtype od = (nrt_dtype)p->out->dtype, twd = (nrt_dtype)p->tw->dtype;
  const nrt_dtype id = (nrt_dtype)p->in->dtype;
  const int64_t numiter = p->N * p->H * p->W;
  if (numiter == 0) {
    nk_store_f64(od, p->out->data, p->reduction == 1 ? NAN : 0.0);
    nk_store_f64(twd, p->tw->data, 0.0);
    return 0;
  }
  enum { LEVELS = 8 };
  const int64_t lc = ceil_log2(numiter) / LEVELS;
  const int64_t level_power = lc > 4 ? lc : 4;
  const int64_t level_mask = ((int64_t)1 << level_power) - 1;
  double wsum[LEVELS] = {0}, lsum[LEVELS] = {0};
  int64_t ignored = 0;
  const nrt_dtype t = p->dt;
  for (int64_t n = 0; n < p->N; n++)
    for (int64_t h = 0; h < p->H; h++)
      for (int64_t w = 0; w < p->W; w++) {
        const int64_t tg = nll_target(p, n, h, w);
        if (tg == p->ignore) {
          ignored++;
          continue;
        }
        if (tg < 0 || tg >= p->C) {
          nrt_exec_fail(ctx, "Target %lld is out of bounds.", (long long)tg);
          return -1;
        }
        const double x = nk_load_f64(id, at4(p->in, n, tg, h, w));
        if (p->w) {
          const double wv = nll_round(t, nll_weight(p, tg));
          lsum[0] = nll_round(t, lsum[0] - nll_round(t, x * wv));
          wsum[0] = nll_round(t, wsum[0] + wv);
        } else {
          lsum[0] = nll_round(t, lsum[0] - x);
        }
        const int64_t idx = (n * p->H + h) * p->W + w;
        for (int j = 0; j + 1 < LEVELS; j++) {
          const int64_t mask = level_mask << (j * level_power);
          if ((idx & mask) != 0) break;
          wsum[j + 1] = nll_round(t, wsum[j + 1] + wsum[j]);
          lsum[j + 1] = nll_round(t, lsum[j + 1] + lsum[j]);
          wsum[j] = 0;
          lsum[j] = 0;
        }
      }
  double total = 0, out = 0;
  if (p->w) {
    for (int j = 0; j < LEVELS; j++) total = nll_round(t, total + wsum[j]);
  } else {
    total = nll_round(t, (double)(numiter - ignored));
  }
  for (int j = 0; j < LEVELS; j++) out = nll_round(t, out + lsum[j]);
  if (p->reduction == 1) out = nll_round(t, out / total);
  nk_store_f64(od, p->out->data, out);
  nk_store_f64(twd, p->tw->data, total);
  return 0;
}

/* Backward: row r = n * H + h owns grad_input[n, :, h, :]. */
static void nll_backward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  nll_plan *p = arg;
  const nrt_operand *gi = p->gin;
  const nrt_dtype gd = (nrt_dtype)gi->dtype;
  const int64_t es = (int64_t)nk_dtype_size(gd);
  for (int64_t r = begin; r < end; r++) {
    const int64_t n = r / p->H, h = r % p->H;
    if (p->W == 1 && gi->strides[1] == es) {
      /* (N, C) input: the row's C classes are adjacent, one memset (per
       * class it was 2048 calls of 4 bytes: 40x the CPU's time) */
      memset(at4(gi, n, 0, h, 0), 0, (size_t)(p->C * es));
    } else for (int64_t c = 0; c < p->C; c++) {
      char *row = at4(gi, n, c, h, 0);
      if (gi->strides[3] == es || p->W == 1)
        memset(row, 0, (size_t)(p->W * es));
      else
        for (int64_t w = 0; w < p->W; w++) memset(row + w * gi->strides[3], 0, (size_t)es);
    }
    for (int64_t w = 0; w < p->W; w++) {
      const int64_t t = nll_target(p, n, h, w);
      if (t == p->ignore) continue;
      if (t < 0 || t >= p->C) {
        atomic_store(&p->bad, 1);
        continue;
      }
      double v;
      if (p->reduction == 0) {
        const double g = nk_load_f64((nrt_dtype)p->gout->dtype, at3(p->gout, n, h, w));
        v = nll_round(p->dt, -nll_round(p->dt, nll_weight(p, t)) * g);
      } else {
        v = p->w ? nll_round(p->dt, nll_round(p->dt, nll_weight(p, t)) * p->grad) : p->grad;
      }
      nk_store_f64(gd, at4(gi, n, t, h, w), v);
    }
  }
}

static int loss_fail(nrt_exec_ctx *ctx, const char *op, const char *what) {
  nrt_exec_fail(ctx, "%s: %s", op, what);
  return -1;
}
static int nll_fail_shape(nrt_exec_ctx *ctx, const char *what) { return loss_fail(ctx, "nll_loss", what); }

int nk_nll_loss_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_nll_loss_params *prm = (const nk_nll_loss_params *)task->params;
  const int n_ops = task->n_operands;
  if (n_ops != 4 && n_ops != 5) {
    nrt_exec_fail(ctx, "nll_loss: expected 4 or 5 operands, got %d", n_ops);
    return -1;
  }
  if (nk_check_operands(task, ctx, "nll_loss", n_ops)) return -1;
  if (prm->reduction < 0 || prm->reduction > 2) {
    nrt_exec_fail(ctx, "nll_loss: invalid reduction %d", (int)prm->reduction);
    return -1;
  }
  static nll_plan zero_plan;
  nll_plan p = zero_plan;
  const nrt_operand *ops = task->operands;
  p.reduction = prm->reduction;
  p.ignore = prm->ignore_index;
  p.w = n_ops == 5 ? &ops[4] : NULL;
  const nrt_operand *big; /* the [N, C, H, W] operand */
  if (!prm->backward) {
    p.out = &ops[0], p.tw = &ops[1], p.in = &ops[2], p.tgt = &ops[3];
    big = p.in;
  } else {
    p.gin = &ops[0], p.gout = &ops[1], p.tgt = &ops[2], p.tw = &ops[3];
    big = p.gin;
  }
  if (big->ndim != 4) return nll_fail_shape(ctx, "the input must be [N, C, H, W]");
  p.N = big->sizes[0], p.C = big->sizes[1], p.H = big->sizes[2], p.W = big->sizes[3];
  p.dt = (nrt_dtype)big->dtype;
  const nrt_operand *tg = p.tgt;
  if (tg->ndim != 3 || tg->sizes[0] != p.N || tg->sizes[1] != p.H || tg->sizes[2] != p.W)
    return nll_fail_shape(ctx, "the target must be [N, H, W] of the input's sizes");
  if (tg->dtype != NRT_INT64 && tg->dtype != NRT_UINT8)
    return nll_fail_shape(ctx, "the target must be int64 or uint8");
  if (!nk_dtype_is_floating(p.dt)) return nll_fail_shape(ctx, "the input must be floating");
  for (int k = 0; k < n_ops; k++) {
    if (&ops[k] != tg && !nk_dtype_is_floating((nrt_dtype)ops[k].dtype))
      return nll_fail_shape(ctx, "every operand but the target must be floating");
  }
  if (p.w && (p.w->ndim != 1 || p.w->sizes[0] != p.C))
    return nll_fail_shape(ctx, "the weight must be [C]");
  const nrt_operand *per = prm->backward ? p.gout : p.out; /* per-position or 0-dim */
  if (p.reduction == 0) {
    if (per->ndim != 3 || per->sizes[0] != p.N || per->sizes[1] != p.H || per->sizes[2] != p.W)
      return nll_fail_shape(ctx, "with reduction none the loss must be [N, H, W]");
  } else if (per->ndim != 0) {
    return nll_fail_shape(ctx, "a reduced loss must be 0-dim");
  }
  if (p.tw->ndim != 0) return nll_fail_shape(ctx, "total_weight must be 0-dim");
  atomic_init(&p.bad, 0);

  const int64_t rows = p.N * p.H;
  const int64_t per_row = (p.C > 0 ? p.C : 1) * (p.W > 0 ? p.W : 1);
  const int64_t grain = per_row >= NK_GRAIN_ELEMENTWISE ? 1 : NK_GRAIN_ELEMENTWISE / per_row;
  if (!prm->backward) {
    if (p.reduction != 0) return nll_forward_reduce(&p, ctx);
    nk_store_f64((nrt_dtype)p.tw->dtype, p.tw->data, 0.0); /* as ATen's CPU */
    nk_parallel_for(rows, grain, nll_forward_none_range, &p);
  } else {
    if (p.reduction != 0) {
      const double g = nk_load_f64((nrt_dtype)p.gout->dtype, p.gout->data);
      const double tw = nk_load_f64((nrt_dtype)p.tw->dtype, p.tw->data);
      p.grad = -(p.reduction == 1 ? nll_round(p.dt, g / tw) : g);
    }
    nk_parallel_for(rows, grain, nll_backward_range, &p);
  }
  if (atomic_load(&p.bad)) {
    nrt_exec_fail(ctx, "Target %lld is out of bounds.", (long long)nll_first_bad(&p));
    return -1;
  }
  return 0;
}

/* ======================================================== multi_margin */

typedef struct mm_plan {
  const nrt_operand *out, *gin, *gout, *in, *tgt, *w;
  nrt_dtype dt;
  int reduction, p;
  int64_t F, D;
  double margin, g; /* margin and the backward's g, in scalar_t */
  double *rows;     /* forward: each row's loss */
} mm_plan;

NK_INLINE double mm_x(const mm_plan *p, int64_t f, int64_t d) {
  return nk_load_f64((nrt_dtype)p->in->dtype,
                     (const char *)p->in->data + f * p->in->strides[0] + d * p->in->strides[1]);
}
NK_INLINE double mm_weight(const mm_plan *p, int64_t d) {
  if (!p->w) return 1.0;
  return nk_load_f64((nrt_dtype)p->w->dtype, (const char *)p->w->data + d * p->w->strides[0]);
}
NK_INLINE int64_t mm_target(const mm_plan *p, int64_t f) {
  return nk_read_i64((const char *)p->tgt->data + f * p->tgt->strides[0]);
}

static void mm_forward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  mm_plan *p = arg;
  const nrt_dtype t = p->dt;
  for (int64_t f = begin; f < end; f++) {
    const int64_t tg = mm_target(p, f);
    const double xt = mm_x(p, f, tg), wt = mm_weight(p, tg);
    double sum = 0;
    for (int64_t d = 0; d < p->D; d++) {
      if (d == tg) continue;
      const double z = nll_round(t, nll_round(t, p->margin - xt) + mm_x(p, f, d));
      if (z > 0) {
        double h = p->p == 1 ? z : nll_round(t, z * z);
        if (p->w) h = nll_round(t, h * wt);
        sum = nll_round(t, sum + h);
      }
    }
    p->rows[f] = nll_round(t, sum / (double)nll_round(t, (double)p->D));
  }
}

static void mm_backward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  mm_plan *p = arg;
  const nrt_dtype t = p->dt, gd = (nrt_dtype)p->gin->dtype;
  for (int64_t f = begin; f < end; f++) {
    const int64_t tg = mm_target(p, f);
    const double xt = mm_x(p, f, tg), wt = mm_weight(p, tg);
    const double go = nk_load_f64((nrt_dtype)p->gout->dtype,
                                  (const char *)p->gout->data + (p->gout->ndim ? f * p->gout->strides[0] : 0));
    double gt = 0;
    char *row = (char *)p->gin->data + f * p->gin->strides[0];
    for (int64_t d = 0; d < p->D; d++) {
      if (d == tg) continue;
      const double z = nll_round(t, nll_round(t, p->margin - xt) + mm_x(p, f, d));
      double h = 0;
      if (z > 0) {
        h = p->p == 1 ? p->g : nll_round(t, nll_round(t, 2 * p->g) * z);
        if (p->w) h = nll_round(t, h * wt);
        gt = nll_round(t, gt - h);
      }
      nk_store_f64(gd, row + d * p->gin->strides[1], nll_round(t, h * go));
    }
    nk_store_f64(gd, row + tg * p->gin->strides[1], nll_round(t, gt * go));
  }
}

int nk_multi_margin_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_multi_margin_params *prm = (const nk_multi_margin_params *)task->params;
  const int n_ops = task->n_operands, base = prm->backward ? 4 : 3;
  if (n_ops != base && n_ops != base + 1) {
    nrt_exec_fail(ctx, "multi_margin_loss: expected %d or %d operands, got %d", base, base + 1, n_ops);
    return -1;
  }
  if (nk_check_operands(task, ctx, "multi_margin_loss", n_ops)) return -1;
  if (prm->reduction < 0 || prm->reduction > 2 || (prm->p != 1 && prm->p != 2)) {
    nrt_exec_fail(ctx, "multi_margin_loss: invalid reduction %d or p %d", (int)prm->reduction, (int)prm->p);
    return -1;
  }
  static mm_plan zero_plan;
  mm_plan p = zero_plan;
  const nrt_operand *ops = task->operands;
  const nrt_operand *per;
  if (!prm->backward) {
    p.out = &ops[0], p.in = &ops[1], p.tgt = &ops[2], per = p.out;
  } else {
    p.gin = &ops[0], p.gout = &ops[1], p.in = &ops[2], p.tgt = &ops[3], per = p.gout;
  }
  p.w = n_ops == base + 1 ? &ops[base] : NULL;
  p.reduction = prm->reduction, p.p = prm->p;
  if (p.in->ndim != 2) return loss_fail(ctx, "multi_margin_loss", "the input must be [F, D]") ;
  p.F = p.in->sizes[0], p.D = p.in->sizes[1];
  p.dt = (nrt_dtype)p.in->dtype;
  if (!nk_dtype_is_floating(p.dt) || p.tgt->dtype != NRT_INT64 || p.tgt->ndim != 1 || p.tgt->sizes[0] != p.F)
    return loss_fail(ctx, "multi_margin_loss", "a floating [F, D] input and int64 [F] targets");
  if (p.w && (p.w->ndim != 1 || p.w->sizes[0] != p.D || !nk_dtype_is_floating((nrt_dtype)p.w->dtype)))
    return loss_fail(ctx, "multi_margin_loss", "the weight must be [D]");
  if (!nk_dtype_is_floating((nrt_dtype)per->dtype) ||
      (p.reduction == 0 ? per->ndim > 1 || (per->ndim == 1 && per->sizes[0] != p.F) || (per->ndim == 0 && p.F != 1)
                        : per->ndim != 0))
    return loss_fail(ctx, "multi_margin_loss", "the loss must be [F] (reduction none) or 0-dim");
  if (prm->backward && (p.gin->ndim != 2 || p.gin->sizes[0] != p.F || p.gin->sizes[1] != p.D ||
                        !nk_dtype_is_floating((nrt_dtype)p.gin->dtype)))
    return loss_fail(ctx, "multi_margin_loss", "grad_input must be [F, D]");
  for (int64_t f = 0; f < p.F; f++) {
    const int64_t t = mm_target(&p, f);
    if (t < 0 || t >= p.D) {
      nrt_exec_fail(ctx, "target out of range");
      return -1;
    }
  }
  p.margin = nll_round(p.dt, prm->margin);
  const int64_t grain = p.D >= NK_GRAIN_ELEMENTWISE ? 1 : NK_GRAIN_ELEMENTWISE / (p.D > 0 ? p.D : 1);
  if (prm->backward) {
    const double denom = p.reduction == 1 ? (double)(p.F * p.D) : (double)p.D;
    p.g = nll_round(p.dt, 1.0 / denom);
    nk_parallel_for(p.F, grain, mm_backward_range, &p);
    return 0;
  }
  if (p.F == 0) return 0;
  p.rows = malloc((size_t)p.F * sizeof *p.rows);
  if (!p.rows) {
    nrt_exec_fail(ctx, "multi_margin_loss: out of host memory");
    return -1;
  }
  nk_parallel_for(p.F, grain, mm_forward_range, &p);
  const nrt_dtype od = (nrt_dtype)p.out->dtype;
  if (p.reduction == 0) {
    for (int64_t f = 0; f < p.F; f++)
      nk_store_f64(od, (char *)p.out->data + (p.out->ndim ? f * p.out->strides[0] : 0), p.rows[f]);
  } else {
    double acc = 0; /* accscalar_t: double for float and double */
    for (int64_t f = 0; f < p.F; f++) acc += p.rows[f];
    if (p.reduction == 1) acc /= (double)p.F;
    nk_store_f64(od, p.out->data, acc);
  }
  free(p.rows);
  return 0;
}
