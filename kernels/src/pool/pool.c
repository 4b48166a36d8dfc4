/* pool.c — NK_KERNEL_POOL (max / avg / adaptive pooling forward) and
 * NK_KERNEL_POOL_SCATTER (their backward, and max_unpool).
 *
 * Design (the why):
 *   - One canonical shape.  Every operand is 5-d (N, C, D, H, W) with byte
 *     strides; the glue gives 1-d and 2-d pools size-1 D/H dims with a
 *     window of one, so one kernel serves 1d/2d/3d, contiguous and
 *     channels_last alike, and the flat max index d * H * W + h * W + w is
 *     exactly ATen's for every rank.
 *   - ATen CPU's arithmetic, term for term: the same window clipping (max:
 *     start moved forward by the dilation while negative; avg: the divisor
 *     taken before clipping when count_include_pad), the same comparison
 *     (`val > max || isnan(val)`, so NaN wins and the last NaN's index is
 *     kept), the same sums in the op math type (float for 16-bit floats,
 *     double for float64, int64 for integers) in d, h, w order, and the same
 *     divisions (avg: sum / divisor; adaptive: sum / kd / kh / kw).
 *   - Forward outputs are independent: work is split over output rows
 *     (n, c, od, oh).  Backward work is a scatter; it is split over planes
 *     (n, c) only, each plane accumulating in op math in a private buffer in
 *     the CPU's order (outputs row-major), then stored once; so results do
 *     not depend on the thread count and 16-bit grads round once.
 *   - Indices are data: each one is checked against the plane before it is
 *     used.  A bad one fails the task (the first in plane order is named);
 *     nothing is written outside the tensor.
 *   - Integer overflow: windows are computed in int64 from sizes the
 *     validator bounded (byte extents fit int64), so o * stride etc. are
 *     within range for any tensor that exists. */
#include <stdatomic.h>
#include <stdlib.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"
#include "common/tmp_buffers.h"

#define POOL_GRAIN_WORK 32768 /* element reads per parallel chunk */

typedef struct pool_geom {
  int64_t n, c;
  int64_t in[3], out[3]; /* spatial sizes, d h w */
} pool_geom;

static int64_t start_index(int64_t a, int64_t b, int64_t c) { return (a / b) * c + ((a % b) * c) / b; }
static int64_t end_index(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

NK_INLINE char *at5(const nrt_operand *op, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
  return (char *)op->data + n * op->strides[0] + c * op->strides[1] + d * op->strides[2] +
         h * op->strides[3] + w * op->strides[4];
}

/* The clipped window of output position o along one dim: [*lo, *hi) with
 * step *step, and (AVG) the unclipped extent for the divisor. */
typedef struct win {
  int64_t lo, hi, step, full;
} win;

static win window(const nk_pool_params *p, int mode, int k, int64_t o, int64_t in, int64_t out) {
  win r = {0, 0, 1, 0};
  switch (mode) {
  case NK_POOL_MAX: {
    int64_t dil = p->dilation[k];
    int64_t s = o * p->stride[k] - p->pad[k];
    int64_t e = s + (p->kernel[k] - 1) * dil + 1;
    if (e > in) e = in;
    while (s < 0) s += dil;
    r.lo = s; r.hi = e; r.step = dil;
    break;
  }
  case NK_POOL_AVG: {
    int64_t s = o * p->stride[k] - p->pad[k];
    int64_t e = s + p->kernel[k];
    if (e > in + p->pad[k]) e = in + p->pad[k];
    r.full = e - s;
    r.lo = s < 0 ? 0 : s;
    r.hi = e > in ? in : e;
    break;
  }
  default: /* adaptive */
    r.lo = start_index(o, out, in);
    r.hi = end_index(o, out, in);
    r.full = r.hi - r.lo;
    break;
  }
  return r;
}

/* --------------------------------------------------------------- forward */

static int64_t int_lowest(nrt_dtype t) {
  switch (t) {
  case NRT_UINT8: return 0;
  case NRT_INT8: return INT8_MIN;
  case NRT_INT16: return INT16_MIN;
  case NRT_INT32: return INT32_MIN;
  default: return INT64_MIN;
  }
}

typedef struct pool_job {
  const nrt_operand *out, *idx, *in;
  nk_pool_params p;
  pool_geom g;
  nrt_dtype dt;
} pool_job;

static void pool_row(const pool_job *j, int64_t row) {
  const pool_geom *g = &j->g;
  const nk_pool_params *p = &j->p;
  int64_t oh = row % g->out[1], od = (row / g->out[1]) % g->out[0];
  int64_t nc = row / (g->out[1] * g->out[0]);
  int64_t c = nc % g->c, n = nc / g->c;
  const int mode = p->mode;
  const nrt_dtype dt = j->dt;
  const nk_class cls = nk_dtype_class(dt);
  const size_t es = nk_dtype_size(dt);
  win wd = window(p, mode, 0, od, g->in[0], g->out[0]);
  win wh = window(p, mode, 1, oh, g->in[1], g->out[1]);
  const int64_t H = g->in[1], W = g->in[2];
  for (int64_t ow = 0; ow < g->out[2]; ow++) {
    win ww = window(p, mode, 2, ow, g->in[2], g->out[2]);
    char *o = at5(j->out, n, c, od, oh, ow);
    if (mode == NK_POOL_MAX || mode == NK_POOL_ADAPTIVE_MAX) {
      int64_t best = (wd.lo * H + wh.lo) * W + ww.lo;
      const char *bestp = NULL;
      if (cls == NK_CLASS_INT) {
        int64_t m = INT64_MIN;
        for (int64_t d = wd.lo; d < wd.hi; d += wd.step)
          for (int64_t h = wh.lo; h < wh.hi; h += wh.step)
            for (int64_t w = ww.lo; w < ww.hi; w += ww.step) {
              const char *q = at5(j->in, n, c, d, h, w);
              int64_t v = nk_load_integral(dt, q);
              if (v > m || bestp == NULL) { m = v; best = (d * H + h) * W + w; bestp = q; }
            }
      } else if (cls == NK_CLASS_DOUBLE) {
        double m = -INFINITY;
        for (int64_t d = wd.lo; d < wd.hi; d += wd.step)
          for (int64_t h = wh.lo; h < wh.hi; h += wh.step)
            for (int64_t w = ww.lo; w < ww.hi; w += ww.step) {
              const char *q = at5(j->in, n, c, d, h, w);
              double v = nk_read_f64(q);
              if (v > m || isnan(v)) { m = v; best = (d * H + h) * W + w; bestp = q; }
            }
      } else {
        float m = -INFINITY;
        for (int64_t d = wd.lo; d < wd.hi; d += wd.step)
          for (int64_t h = wh.lo; h < wh.hi; h += wh.step)
            for (int64_t w = ww.lo; w < ww.hi; w += ww.step) {
              const char *q = at5(j->in, n, c, d, h, w);
              float v = nk_load_f32(dt, q);
              if (v > m || isnan(v)) { m = v; best = (d * H + h) * W + w; bestp = q; }
            }
      }
      /* The value is copied from the winner (bits kept); a window whose
       * every element is -inf (or empty) gives -inf / the dtype's lowest. */
      if (bestp) memcpy(o, bestp, es);
      else if (cls == NK_CLASS_INT) nk_store_i64(dt, o, int_lowest(dt));
      else nk_store_f64(dt, o, -INFINITY);
      nk_write_i64(at5(j->idx, n, c, od, oh, ow), best);
      continue;
    }
    /* averages */
    int adaptive = mode == NK_POOL_ADAPTIVE_AVG;
    if (!adaptive && (wd.lo >= wd.hi || wh.lo >= wh.hi || ww.lo >= ww.hi)) {
      nk_store_i64(dt, o, 0);
      continue;
    }
    int64_t div = 0;
    if (!adaptive) {
      if (p->divisor_override != 0) div = p->divisor_override;
      else if (p->count_include_pad) div = wd.full * wh.full * ww.full;
      else div = (wd.hi - wd.lo) * (wh.hi - wh.lo) * (ww.hi - ww.lo);
    }
    if (cls == NK_CLASS_DOUBLE) {
      double s = 0;
      for (int64_t d = wd.lo; d < wd.hi; d++)
        for (int64_t h = wh.lo; h < wh.hi; h++)
          for (int64_t w = ww.lo; w < ww.hi; w++) s += nk_read_f64(at5(j->in, n, c, d, h, w));
      double r = adaptive ? s / (double)wd.full / (double)wh.full / (double)ww.full : s / (double)div;
      nk_write_f64(o, r);
    } else if (cls == NK_CLASS_FLOAT) {
      float s = 0;
      for (int64_t d = wd.lo; d < wd.hi; d++)
        for (int64_t h = wh.lo; h < wh.hi; h++)
          for (int64_t w = ww.lo; w < ww.hi; w++) s += nk_load_f32(dt, at5(j->in, n, c, d, h, w));
      float r = adaptive ? s / (float)wd.full / (float)wh.full / (float)ww.full : s / (float)div;
      nk_store_f32(dt, o, r);
    } else {
      uint64_t s = 0; /* wraps without UB */
      for (int64_t d = wd.lo; d < wd.hi; d++)
        for (int64_t h = wh.lo; h < wh.hi; h++)
          for (int64_t w = ww.lo; w < ww.hi; w++)
            s += (uint64_t)nk_load_integral(dt, at5(j->in, n, c, d, h, w));
      int64_t sv = (int64_t)s;
      int64_t r = (sv == INT64_MIN && div == -1) ? sv : sv / div;
      nk_store_i64(dt, o, nk_wrap_i64(dt, r));
    }
  }
}

static void pool_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  for (int64_t r = begin; r < end; r++) pool_row(arg, r);
}

static int check_5d(const nrt_task *task, nrt_exec_ctx *ctx, const char *name) {
  for (int k = 0; k < task->n_operands; k++)
    if (task->operands[k].ndim != 5) {
      nrt_exec_fail(ctx, "%s: operand %d must be 5-d (N, C, D, H, W), got ndim %d", name, k,
                    (int)task->operands[k].ndim);
      return -1;
    }
  return 0;
}

static int same_nc(const nrt_operand *a, const nrt_operand *b) {
  return a->sizes[0] == b->sizes[0] && a->sizes[1] == b->sizes[1];
}

static int same_sizes(const nrt_operand *a, const nrt_operand *b) {
  for (int d = 0; d < 5; d++)
    if (a->sizes[d] != b->sizes[d]) return 0;
  return 1;
}

static int check_params(const nk_pool_params *p, nrt_exec_ctx *ctx, const char *name) {
  if (p->mode < 0 || p->mode >= NK_POOL_MODE_COUNT) {
    nrt_exec_fail(ctx, "%s: invalid mode %d", name, (int)p->mode);
    return -1;
  }
  if (p->mode == NK_POOL_MAX || p->mode == NK_POOL_AVG)
    for (int k = 0; k < 3; k++)
      if (p->kernel[k] <= 0 || p->stride[k] <= 0 || p->pad[k] < 0 ||
          (p->mode == NK_POOL_MAX && p->dilation[k] <= 0) || p->pad[k] > INT64_MAX / 4 ||
          p->kernel[k] > INT64_MAX / 4 / (p->mode == NK_POOL_MAX ? p->dilation[k] : 1)) {
        nrt_exec_fail(ctx, "%s: invalid window (kernel %lld, stride %lld, pad %lld, dilation %lld)",
                      name, (long long)p->kernel[k], (long long)p->stride[k], (long long)p->pad[k],
                      (long long)p->dilation[k]);
        return -1;
      }
  return 0;
}

/* o * stride must not overflow for the largest o; the windows of adaptive
 * pools need a nonzero output size (checked by the caller's emptiness test). */
static int check_reach(const nk_pool_params *p, const pool_geom *g, nrt_exec_ctx *ctx, const char *name) {
  if (p->mode != NK_POOL_MAX && p->mode != NK_POOL_AVG) {
    for (int k = 0; k < 3; k++)
      if (g->in[k] == 0 || g->out[k] > INT64_MAX / (g->in[k] + 1)) {
        nrt_exec_fail(ctx, "%s: adaptive pooling needs a non-empty input (size %lld to %lld)", name,
                      (long long)g->in[k], (long long)g->out[k]);
        return -1;
      }
    return 0;
  }
  for (int k = 0; k < 3; k++)
    if (g->out[k] > 0 && (g->out[k] - 1) > INT64_MAX / 4 / p->stride[k]) {
      nrt_exec_fail(ctx, "%s: output size %lld with stride %lld overflows", name,
                    (long long)g->out[k], (long long)p->stride[k]);
      return -1;
    }
  return 0;
}

static void geom_of(pool_geom *g, const nrt_operand *small_, const nrt_operand *big) {
  g->n = big->sizes[0];
  g->c = big->sizes[1];
  for (int k = 0; k < 3; k++) {
    g->out[k] = small_->sizes[2 + k];
    g->in[k] = big->sizes[2 + k];
  }
}

static int64_t numel5(const nrt_operand *op) {
  int64_t n = 1;
  for (int d = 0; d < 5; d++) n *= op->sizes[d];
  return n;
}

int nk_pool_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_pool_params *p = (const nk_pool_params *)task->params;
  if (check_params(p, ctx, "pool")) return -1;
  const int is_max = p->mode == NK_POOL_MAX || p->mode == NK_POOL_ADAPTIVE_MAX;
  if (p->mode == NK_POOL_UNPOOL) {
    nrt_exec_fail(ctx, "pool: UNPOOL is a NK_KERNEL_POOL_SCATTER mode");
    return -1;
  }
  if (nk_check_operands(task, ctx, "pool", is_max ? 3 : 2) || check_5d(task, ctx, "pool")) return -1;
  pool_job j = {.out = &task->operands[0], .idx = is_max ? &task->operands[1] : NULL,
                .in = &task->operands[is_max ? 2 : 1], .p = *p};
  j.dt = (nrt_dtype)j.in->dtype;
  if (j.out->dtype != j.in->dtype || !same_nc(j.out, j.in) ||
      (is_max && (j.idx->dtype != NRT_INT64 || !same_sizes(j.idx, j.out)))) {
    nrt_exec_fail(ctx, "pool: operands disagree (out/in dtype or N, C; indices int64 of out's sizes)");
    return -1;
  }
  if (j.dt == NRT_BOOL || (nk_dtype_class(j.dt) == NK_CLASS_INT && p->mode == NK_POOL_ADAPTIVE_AVG)) {
    nrt_exec_fail(ctx, "pool: dtype %d is not supported by this mode", (int)j.dt);
    return -1;
  }
  geom_of(&j.g, j.out, j.in);
  if (numel5(j.out) == 0) return 0;
  if (check_reach(p, &j.g, ctx, "pool")) return -1;
  int64_t rows = j.g.n * j.g.c * j.g.out[0] * j.g.out[1];
  int64_t win = 1;
  for (int k = 0; k < 3; k++) {
    int64_t w = p->mode == NK_POOL_MAX || p->mode == NK_POOL_AVG
                    ? p->kernel[k]
                    : (j.g.in[k] + j.g.out[k] - 1) / j.g.out[k] + 1;
    win = win > INT64_MAX / (w + 1) ? INT64_MAX / 2 : win * w;
  }
  int64_t per_row = j.g.out[2] * win;
  int64_t grain = per_row >= POOL_GRAIN_WORK ? 1 : POOL_GRAIN_WORK / (per_row ? per_row : 1);
  nk_parallel_for(rows, grain, pool_range, &j);
  return 0;
}

/* -------------------------------------------------------------- scatters */

typedef struct scatter_job {
  const nrt_operand *dst, *src, *idx;
  nk_pool_params p;
  pool_geom g; /* in = dst's spatial sizes, out = src's */
  _Atomic int64_t bad_plane; /* first plane (lowest) with a bad index, or INT64_MAX */
  _Atomic int64_t oom;
  int64_t bad_value;
  _Atomic int bad_lock;
} scatter_job;

static void report_bad(scatter_job *j, int64_t plane, int64_t value) {
  /* keep the lowest plane: a spin on a tiny critical section */
  while (atomic_exchange(&j->bad_lock, 1)) {
  }
  if (plane < atomic_load(&j->bad_plane)) {
    atomic_store(&j->bad_plane, plane);
    j->bad_value = value;
  }
  atomic_store(&j->bad_lock, 0);
}

/* One plane of a floating scatter-add, accumulated in T. */
#define DEFINE_SCATTER_PLANE(T, NAME, LOAD)                                                         \
  static int NAME(scatter_job *j, int64_t plane, T *buf) {                                          \
    const pool_geom *g = &j->g;                                                                     \
    const nk_pool_params *p = &j->p;                                                                \
    const int64_t n = plane / g->c, c = plane % g->c;                                               \
    const int64_t D = g->in[0], H = g->in[1], W = g->in[2], total = D * H * W;                      \
    const nrt_dtype gt = (nrt_dtype)j->src->dtype;                                                  \
    for (int64_t i = 0; i < total; i++) buf[i] = 0;                                                 \
    const int mode = p->mode;                                                                       \
    for (int64_t od = 0; od < g->out[0]; od++) {                                                    \
      win wd = window(p, mode, 0, od, D, g->out[0]);                                                \
      for (int64_t oh = 0; oh < g->out[1]; oh++) {                                                  \
        win wh = window(p, mode, 1, oh, H, g->out[1]);                                              \
        for (int64_t ow = 0; ow < g->out[2]; ow++) {                                                \
          T gv = (T)LOAD(gt, at5(j->src, n, c, od, oh, ow));                                        \
          if (mode == NK_POOL_MAX || mode == NK_POOL_ADAPTIVE_MAX) {                                \
            int64_t ix = nk_read_i64(at5(j->idx, n, c, od, oh, ow));                                \
            if (ix < 0 || ix >= total) {                                                            \
              report_bad(j, plane, ix);                                                             \
              return -1;                                                                            \
            }                                                                                       \
            buf[ix] += gv;                                                                          \
            continue;                                                                               \
          }                                                                                         \
          win ww = window(p, mode, 2, ow, W, g->out[2]);                                            \
          T delta;                                                                                  \
          if (mode == NK_POOL_ADAPTIVE_AVG) {                                                       \
            delta = gv / (T)wd.full / (T)wh.full / (T)ww.full;                                      \
          } else {                                                                                  \
            if (wd.lo >= wd.hi || wh.lo >= wh.hi || ww.lo >= ww.hi) continue;                       \
            int64_t div = p->divisor_override != 0 ? p->divisor_override                             \
                          : p->count_include_pad  ? wd.full * wh.full * ww.full                     \
                                                  : (wd.hi - wd.lo) * (wh.hi - wh.lo) * (ww.hi - ww.lo); \
            delta = gv / (T)div;                                                                    \
          }                                                                                         \
          for (int64_t d = wd.lo; d < wd.hi; d++)                                                   \
            for (int64_t h = wh.lo; h < wh.hi; h++)                                                 \
              for (int64_t w = ww.lo; w < ww.hi; w++) buf[(d * H + h) * W + w] += delta;            \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
    const nrt_dtype dt = (nrt_dtype)j->dst->dtype;                                                  \
    for (int64_t d = 0; d < D; d++)                                                                 \
      for (int64_t h = 0; h < H; h++)                                                               \
        for (int64_t w = 0; w < W; w++)                                                             \
          nk_store_f64(dt, at5(j->dst, n, c, d, h, w), (double)buf[(d * H + h) * W + w]);           \
    return 0;                                                                                       \
  }
DEFINE_SCATTER_PLANE(float, scatter_plane_f32, nk_load_f32)
DEFINE_SCATTER_PLANE(double, scatter_plane_f64, nk_load_f64)

/* max_unpool: out = 0; out[index] = in, row-major (the last duplicate wins). */
static int unpool_plane(scatter_job *j, int64_t plane) {
  const pool_geom *g = &j->g;
  const int64_t n = plane / g->c, c = plane % g->c;
  const int64_t D = g->in[0], H = g->in[1], W = g->in[2], total = D * H * W;
  const nrt_dtype dt = (nrt_dtype)j->dst->dtype;
  const size_t es = nk_dtype_size(dt);
  /* validate the whole plane first, so a bad index leaves it untouched */
  for (int64_t od = 0; od < g->out[0]; od++)
    for (int64_t oh = 0; oh < g->out[1]; oh++)
      for (int64_t ow = 0; ow < g->out[2]; ow++) {
        int64_t ix = nk_read_i64(at5(j->idx, n, c, od, oh, ow));
        if (ix < 0 || ix >= total) {
          report_bad(j, plane, ix);
          return -1;
        }
      }
  for (int64_t d = 0; d < D; d++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++) memset(at5(j->dst, n, c, d, h, w), 0, es);
  for (int64_t od = 0; od < g->out[0]; od++)
    for (int64_t oh = 0; oh < g->out[1]; oh++)
      for (int64_t ow = 0; ow < g->out[2]; ow++) {
        int64_t ix = nk_read_i64(at5(j->idx, n, c, od, oh, ow));
        int64_t d = ix / (H * W), h = (ix / W) % H, w = ix % W;
        memcpy(at5(j->dst, n, c, d, h, w), at5(j->src, n, c, od, oh, ow), es);
      }
  return 0;
}

static void scatter_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  scatter_job *j = arg;
  if (j->p.mode == NK_POOL_UNPOOL) {
    for (int64_t pl = begin; pl < end; pl++) unpool_plane(j, pl);
    return;
  }
  const int64_t total = j->g.in[0] * j->g.in[1] * j->g.in[2];
  const int dbl = j->dst->dtype == NRT_FLOAT64;
  void *buf = nk_tmp_malloc((size_t)total * (dbl ? sizeof(double) : sizeof(float)));
  if (!buf) {
    atomic_store(&j->oom, 1);
    return;
  }
  for (int64_t pl = begin; pl < end; pl++) {
    if (dbl) scatter_plane_f64(j, pl, buf);
    else scatter_plane_f32(j, pl, buf);
  }
  nk_tmp_free(buf);
}

int nk_pool_scatter_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_pool_params *p = (const nk_pool_params *)task->params;
  if (check_params(p, ctx, "pool_scatter")) return -1;
  const int has_idx = p->mode == NK_POOL_MAX || p->mode == NK_POOL_ADAPTIVE_MAX || p->mode == NK_POOL_UNPOOL;
  if (nk_check_operands(task, ctx, "pool_scatter", has_idx ? 3 : 2) || check_5d(task, ctx, "pool_scatter"))
    return -1;
  scatter_job *j = calloc(1, sizeof *j);
  if (!j) {
    nrt_exec_fail(ctx, "pool_scatter: out of host memory");
    return -1;
  }
  j->dst = &task->operands[0];
  j->src = &task->operands[1];
  j->idx = has_idx ? &task->operands[2] : NULL;
  j->p = *p;
  atomic_store(&j->bad_plane, INT64_MAX);
  int rc = 0;
  const nrt_dtype dt = (nrt_dtype)j->dst->dtype;
  if (!same_nc(j->dst, j->src) || (has_idx && (j->idx->dtype != NRT_INT64 || !same_sizes(j->idx, j->src)))) {
    nrt_exec_fail(ctx, "pool_scatter: operands disagree (N, C; indices int64 of the source's sizes)");
    rc = -1;
  } else if (p->mode == NK_POOL_UNPOOL ? j->src->dtype != j->dst->dtype : !nk_dtype_is_floating(dt)) {
    nrt_exec_fail(ctx, "pool_scatter: unsupported dtypes %d <- %d", (int)dt, (int)j->src->dtype);
    rc = -1;
  }
  if (rc == 0 && numel5(j->dst) > 0) {
    geom_of(&j->g, j->src, j->dst);
    if (p->mode != NK_POOL_UNPOOL && check_reach(p, &j->g, ctx, "pool_scatter")) {
      rc = -1;
    } else {
      int64_t planes = j->g.n * j->g.c;
      int64_t work = numel5(j->src) / (planes ? planes : 1) + j->g.in[0] * j->g.in[1] * j->g.in[2];
      int64_t grain = work >= POOL_GRAIN_WORK ? 1 : POOL_GRAIN_WORK / (work ? work : 1);
      nk_parallel_for(planes, grain, scatter_range, j);
      if (atomic_load(&j->oom)) {
        nrt_exec_fail(ctx, "pool_scatter: out of host memory");
        rc = -1;
      } else if (atomic_load(&j->bad_plane) != INT64_MAX) {
        if (p->mode == NK_POOL_UNPOOL) {
          if (p->nd == 3)
            nrt_exec_fail(ctx, "Found an invalid max index: %lld (output volumes are of size %lldx%lldx%lld)",
                          (long long)j->bad_value, (long long)j->g.in[0], (long long)j->g.in[1],
                          (long long)j->g.in[2]);
          else if (p->nd == 2)
            nrt_exec_fail(ctx, "Found an invalid max index: %lld (output volumes are of size %lldx%lld)",
                          (long long)j->bad_value, (long long)j->g.in[1], (long long)j->g.in[2]);
          else
            nrt_exec_fail(ctx, "Found an invalid max index: %lld (output volumes are of size %lld)",
                          (long long)j->bad_value, (long long)j->g.in[2]);
        } else {
          nrt_exec_fail(ctx, "index %lld is out of bounds for an input plane of %lld elements",
                        (long long)j->bad_value, (long long)(j->g.in[0] * j->g.in[1] * j->g.in[2]));
        }
        rc = -1;
      }
    }
  } else if (rc == 0 && p->mode == NK_POOL_UNPOOL) {
    /* nothing to write */
  }
  free(j);
  return rc;
}
