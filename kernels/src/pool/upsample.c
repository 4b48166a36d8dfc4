/* upsample.c — NK_KERNEL_UPSAMPLE / NK_KERNEL_UPSAMPLE_BACKWARD: nearest,
 * nearest-exact, (bi/tri)linear and bicubic resampling of the last 1-3
 * dims of a 5-d (N, C, D, H, W) operand, forward and backward.
 *
 * Design (the why):
 *   - Separable taps.  Each resampled dim gets a table, per output index,
 *     of 1 (nearest), 2 (linear) or 4 (cubic) source indices and weights,
 *     computed once per launch with ATen's formulas (UpSample.h:
 *     compute_scales_value, area_pixel_compute_scale/_source_index,
 *     guard_index_and_lambda, nearest(_exact)_idx, the cubic convolution
 *     coefficients) in ATen's precision: float for the nearest modes, the op
 *     math type (double for float64, float otherwise) for linear/cubic,
 *     floorf where ATen calls floorf.  A dim that is not resampled (the D of
 *     a 2-d op) has the single tap (o, 1), which multiplies exactly.
 *   - The forward sums taps dim by dim, innermost first, each partial sum
 *     starting from its first term (ATen's Interpolate<n>: t0 * w0 + t1 *
 *     w1 ..., outermost dim last), so float32/float64 results on contiguous
 *     input are the CPU's bit for bit.  Nearest copies the element (any
 *     dtype, bits kept).
 *   - The backward is the CPU's scatter: per plane, outputs row-major,
 *     grad_in[taps] += (wd * wh * ww) * g (linear/nearest) or g * wh * ww
 *     with w taps outer (bicubic, whose backward uses the unguarded
 *     floorf index as ATen's backward does), accumulated in op math in a
 *     private plane buffer and stored once.  Work is split over planes
 *     only, so results do not depend on the thread count.
 *   - Every source index is clamped into the input by construction (the
 *     formulas' min/max); the tables are checked anyway before use. */
#include <stdatomic.h>
#include <stdlib.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"
#include "common/tmp_buffers.h"

#define UP_GRAIN_WORK 32768
#define UP_MAX_TAPS 4

typedef struct dim_taps {
  int ntap;
  int64_t *idx; /* [out][UP_MAX_TAPS] */
  double *w;    /* [out][UP_MAX_TAPS], exact values of the op-math weights */
} dim_taps;

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ATen's helpers in op math T (float or double). */
#define DEFINE_TAP_MATH(T, SFX)                                                                   \
  static T scales_value_##SFX(int has, double scale, int64_t in, int64_t out) {                   \
    return (has && scale > 0.) ? (T)(1.0 / scale) : ((T)in / (T)out);                            \
  }                                                                                               \
  static T area_scale_##SFX(int64_t in, int64_t out, int align, int has, double scale) {          \
    if (align) return out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0;                               \
    return scales_value_##SFX(has, scale, in, out);                                               \
  }                                                                                               \
  static T source_index_##SFX(T scale, int64_t o, int align, int cubic) {                         \
    if (align) return scale * (T)o;                                                               \
    T src = scale * ((T)o + (T)0.5) - (T)0.5;                                                     \
    return (!cubic && src < (T)0) ? (T)0 : src;                                                   \
  }                                                                                               \
  static void guard_##SFX(T real, int64_t in, int64_t *index, T *lambda) {                        \
    int64_t i = (int64_t)floorf((float)real);                                                     \
    if (i > in - 1) i = in - 1;                                                                   \
    *index = i;                                                                                   \
    T l = real - (T)i;                                                                            \
    if (l < (T)0) l = (T)0;                                                                       \
    if (l > (T)1) l = (T)1;                                                                       \
    *lambda = l;                                                                                  \
  }                                                                                               \
  static T conv1_##SFX(T x, T A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }                 \
  static T conv2_##SFX(T x, T A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }            \
  static void cubic_coeffs_##SFX(T c[4], T t) {                                                   \
    T A = (T)-0.75;                                                                               \
    T x1 = t;                                                                                     \
    c[0] = conv2_##SFX((T)(x1 + 1.0), A);                                                         \
    c[1] = conv1_##SFX(x1, A);                                                                    \
    T x2 = (T)(1.0 - t);                                                                          \
    c[2] = conv1_##SFX(x2, A);                                                                    \
    c[3] = conv2_##SFX((T)(x2 + 1.0), A);                                                         \
  }                                                                                               \
  static void fill_taps_##SFX(dim_taps *tp, int mode, int backward, int64_t in, int64_t out,      \
                              int align, int has, double sc) {                                    \
    T scale = area_scale_##SFX(in, out, align, has, sc);                                          \
    for (int64_t o = 0; o < out; o++) {                                                           \
      int64_t *ix = tp->idx + o * UP_MAX_TAPS;                                                    \
      double *w = tp->w + o * UP_MAX_TAPS;                                                        \
      if (mode == NK_UPSAMPLE_LINEAR) {                                                           \
        if (in == out) {                                                                          \
          ix[0] = ix[1] = o;                                                                      \
          w[0] = 1;                                                                               \
          w[1] = 0;                                                                               \
          continue;                                                                               \
        }                                                                                         \
        T real = source_index_##SFX(scale, o, align, 0), l1;                                      \
        int64_t i0;                                                                               \
        guard_##SFX(real, in, &i0, &l1);                                                          \
        ix[0] = i0;                                                                               \
        ix[1] = i0 + (i0 < in - 1 ? 1 : 0);                                                       \
        w[0] = (T)((T)1 - l1);                                                                    \
        w[1] = l1;                                                                                \
      } else { /* cubic */                                                                        \
        T real = source_index_##SFX(scale, o, align, 1), t, c[4];                                 \
        int64_t i0;                                                                               \
        if (backward) {                                                                           \
          i0 = (int64_t)floorf((float)real);                                                      \
          t = real - (T)i0;                                                                       \
        } else {                                                                                  \
          guard_##SFX(real, in, &i0, &t);                                                         \
        }                                                                                         \
        cubic_coeffs_##SFX(c, t);                                                                 \
        for (int k = 0; k < 4; k++) {                                                             \
          ix[k] = clamp_i64(i0 - 1 + k, 0, in - 1);                                               \
          w[k] = c[k];                                                                            \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }
DEFINE_TAP_MATH(float, f32)
DEFINE_TAP_MATH(double, f64)

/* nearest_idx / nearest_exact_idx (float scale, floorf, as ATen) */
static int64_t nearest_src(int exact, int64_t o, int64_t in, int64_t out, int has, double sc) {
  if (!exact) {
    if (out == in) return o;
    if (out == 2 * in) return o >> 1;
    float scale = scales_value_f32(has, sc, in, out);
    int64_t s = (int64_t)floorf((float)o * scale);
    return s < in - 1 ? s : in - 1;
  }
  float scale = scales_value_f32(has, sc, in, out);
  int64_t s = (int64_t)floorf((float)(((double)o + 0.5) * (double)scale));
  return s < in - 1 ? s : in - 1;
}

typedef struct up_job {
  const nrt_operand *src, *dst;
  nk_upsample_params p;
  int64_t n, c, in[3], out[3];
  dim_taps t[3];
  int dbl;
  _Atomic int oom;
} up_job;

NK_INLINE char *at5(const nrt_operand *op, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w) {
  return (char *)op->data + n * op->strides[0] + c * op->strides[1] + d * op->strides[2] +
         h * op->strides[3] + w * op->strides[4];
}

#define DEFINE_FORWARD_ROW(T, SFX, LOAD, STORE)                                                   \
  static void forward_row_##SFX(const up_job *j, int64_t n, int64_t c, int64_t od, int64_t oh) {  \
    const nrt_dtype dt = (nrt_dtype)j->src->dtype;                                                \
    const dim_taps *td = &j->t[0], *th = &j->t[1], *tw = &j->t[2];                                \
    const int64_t *id = td->idx + od * UP_MAX_TAPS, *ih = th->idx + oh * UP_MAX_TAPS;             \
    const double *wd = td->w + od * UP_MAX_TAPS, *wh = th->w + oh * UP_MAX_TAPS;                  \
    for (int64_t ow = 0; ow < j->out[2]; ow++) {                                                  \
      const int64_t *iw = tw->idx + ow * UP_MAX_TAPS;                                             \
      const double *ww = tw->w + ow * UP_MAX_TAPS;                                                \
      T accd = 0;                                                                                 \
      for (int a = 0; a < td->ntap; a++) {                                                        \
        T acch = 0;                                                                               \
        for (int b = 0; b < th->ntap; b++) {                                                      \
          T accw = 0;                                                                             \
          for (int k = 0; k < tw->ntap; k++) {                                                    \
            T term = (T)LOAD(dt, at5(j->src, n, c, id[a], ih[b], iw[k])) * (T)ww[k];              \
            accw = k == 0 ? term : accw + term;                                                   \
          }                                                                                       \
          T term = accw * (T)wh[b];                                                               \
          acch = b == 0 ? term : acch + term;                                                     \
        }                                                                                         \
        T term = acch * (T)wd[a];                                                                 \
        accd = a == 0 ? term : accd + term;                                                       \
      }                                                                                           \
      STORE((nrt_dtype)j->dst->dtype, at5(j->dst, n, c, od, oh, ow), accd);                       \
    }                                                                                             \
  }
DEFINE_FORWARD_ROW(float, f32, nk_load_f32, nk_store_f32)
DEFINE_FORWARD_ROW(double, f64, nk_load_f64, nk_store_f64)

static void forward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const up_job *j = arg;
  const size_t es = nk_dtype_size((nrt_dtype)j->src->dtype);
  const int nearest = j->p.mode == NK_UPSAMPLE_NEAREST || j->p.mode == NK_UPSAMPLE_NEAREST_EXACT;
  for (int64_t row = begin; row < end; row++) {
    int64_t oh = row % j->out[1], od = (row / j->out[1]) % j->out[0];
    int64_t nc = row / (j->out[1] * j->out[0]);
    int64_t c = nc % j->c, n = nc / j->c;
    if (nearest) {
      int64_t d = j->t[0].idx[od * UP_MAX_TAPS], h = j->t[1].idx[oh * UP_MAX_TAPS];
      for (int64_t ow = 0; ow < j->out[2]; ow++)
        memcpy(at5(j->dst, n, c, od, oh, ow), at5(j->src, n, c, d, h, j->t[2].idx[ow * UP_MAX_TAPS]), es);
    } else if (j->dbl) {
      forward_row_f64(j, n, c, od, oh);
    } else {
      forward_row_f32(j, n, c, od, oh);
    }
  }
}

#define DEFINE_BACKWARD_PLANE(T, SFX, LOAD, STORE)                                                \
  static void backward_plane_##SFX(const up_job *j, int64_t plane, T *buf) {                      \
    const int64_t n = plane / j->c, c = plane % j->c;                                             \
    const int64_t D = j->in[0], H = j->in[1], W = j->in[2];                                       \
    const nrt_dtype gt = (nrt_dtype)j->src->dtype;                                                \
    const dim_taps *td = &j->t[0], *th = &j->t[1], *tw = &j->t[2];                                \
    const int cubic = j->p.mode == NK_UPSAMPLE_CUBIC;                                             \
    for (int64_t i = 0; i < D * H * W; i++) buf[i] = 0;                                           \
    for (int64_t od = 0; od < j->out[0]; od++) {                                                  \
      const int64_t *id = td->idx + od * UP_MAX_TAPS;                                             \
      const double *wd = td->w + od * UP_MAX_TAPS;                                                \
      for (int64_t oh = 0; oh < j->out[1]; oh++) {                                                \
        const int64_t *ih = th->idx + oh * UP_MAX_TAPS;                                           \
        const double *wh = th->w + oh * UP_MAX_TAPS;                                              \
        for (int64_t ow = 0; ow < j->out[2]; ow++) {                                              \
          const int64_t *iw = tw->idx + ow * UP_MAX_TAPS;                                         \
          const double *ww = tw->w + ow * UP_MAX_TAPS;                                            \
          T g = (T)LOAD(gt, at5(j->src, n, c, od, oh, ow));                                       \
          if (cubic) {                                                                            \
            for (int k = 0; k < tw->ntap; k++)                                                    \
              for (int b = 0; b < th->ntap; b++)                                                  \
                buf[(id[0] * H + ih[b]) * W + iw[k]] += g * (T)wh[b] * (T)ww[k];                  \
            continue;                                                                             \
          }                                                                                       \
          for (int a = 0; a < td->ntap; a++)                                                      \
            for (int b = 0; b < th->ntap; b++)                                                    \
              for (int k = 0; k < tw->ntap; k++)                                                  \
                buf[(id[a] * H + ih[b]) * W + iw[k]] += (T)wd[a] * (T)wh[b] * (T)ww[k] * g;       \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
    const nrt_dtype dt = (nrt_dtype)j->dst->dtype;                                                \
    for (int64_t d = 0; d < D; d++)                                                               \
      for (int64_t h = 0; h < H; h++)                                                             \
        for (int64_t w = 0; w < W; w++) STORE(dt, at5(j->dst, n, c, d, h, w), buf[(d * H + h) * W + w]); \
  }
DEFINE_BACKWARD_PLANE(float, f32, nk_load_f32, nk_store_f32)
DEFINE_BACKWARD_PLANE(double, f64, nk_load_f64, nk_store_f64)

static void backward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  up_job *j = arg;
  const int64_t total = j->in[0] * j->in[1] * j->in[2];
  void *buf = nk_tmp_malloc((size_t)total * (j->dbl ? sizeof(double) : sizeof(float)));
  if (!buf) {
    atomic_store(&j->oom, 1);
    return;
  }
  for (int64_t pl = begin; pl < end; pl++) {
    if (j->dbl) backward_plane_f64(j, pl, buf);
    else backward_plane_f32(j, pl, buf);
  }
  nk_tmp_free(buf);
}

static void free_taps(up_job *j) {
  for (int k = 0; k < 3; k++) {
    free(j->t[k].idx);
    free(j->t[k].w);
  }
}

/* Validates, fills the geometry and the tap tables.  in = the small side
 * for the forward's source / the backward's destination. */
static int up_prepare(const nrt_task *task, nrt_exec_ctx *ctx, const char *name, int backward, up_job *j) {
  const nk_upsample_params *p = (const nk_upsample_params *)task->params;
  if (nk_check_operands(task, ctx, name, 2)) return -1;
  for (int k = 0; k < 2; k++)
    if (task->operands[k].ndim != 5) {
      nrt_exec_fail(ctx, "%s: operand %d must be 5-d (N, C, D, H, W), got ndim %d", name, k,
                    (int)task->operands[k].ndim);
      return -1;
    }
  if (p->mode < 0 || p->mode >= NK_UPSAMPLE_MODE_COUNT || p->nd < 1 || p->nd > 3 ||
      (p->mode == NK_UPSAMPLE_CUBIC && p->nd != 2)) {
    nrt_exec_fail(ctx, "%s: invalid mode %d with nd %d", name, (int)p->mode, (int)p->nd);
    return -1;
  }
  j->p = *p;
  j->dst = &task->operands[0];
  j->src = &task->operands[1];
  const nrt_operand *inop = backward ? j->dst : j->src, *outop = backward ? j->src : j->dst;
  j->n = inop->sizes[0];
  j->c = inop->sizes[1];
  if (outop->sizes[0] != j->n || outop->sizes[1] != j->c) {
    nrt_exec_fail(ctx, "%s: N and C of the operands differ", name);
    return -1;
  }
  const int nearest = p->mode == NK_UPSAMPLE_NEAREST || p->mode == NK_UPSAMPLE_NEAREST_EXACT;
  const nrt_dtype dt = (nrt_dtype)j->dst->dtype, st = (nrt_dtype)j->src->dtype;
  if ((nearest && !backward) ? dt != st : (!nk_dtype_is_floating(dt) || !nk_dtype_is_floating(st))) {
    nrt_exec_fail(ctx, "%s: unsupported dtypes %d <- %d for mode %d", name, (int)dt, (int)st, (int)p->mode);
    return -1;
  }
  j->dbl = (backward ? dt : st) == NRT_FLOAT64;
  for (int k = 0; k < 3; k++) {
    j->in[k] = inop->sizes[2 + k];
    j->out[k] = outop->sizes[2 + k];
    int active = k >= 3 - p->nd;
    if (!active && j->in[k] != j->out[k]) {
      nrt_exec_fail(ctx, "%s: dim %d is not resampled but sizes differ (%lld vs %lld)", name, k,
                    (long long)j->in[k], (long long)j->out[k]);
      return -1;
    }
    if (j->out[k] > 0 && j->in[k] == 0) {
      nrt_exec_fail(ctx, "%s: cannot resample an empty input dim to size %lld", name, (long long)j->out[k]);
      return -1;
    }
  }
  for (int k = 0; k < 3; k++) {
    int64_t out = j->out[k], in = j->in[k];
    dim_taps *tp = &j->t[k];
    int active = k >= 3 - p->nd;
    tp->ntap = !active || nearest ? 1 : p->mode == NK_UPSAMPLE_LINEAR ? 2 : 4;
    tp->idx = calloc((size_t)(out ? out : 1) * UP_MAX_TAPS, sizeof(int64_t));
    tp->w = calloc((size_t)(out ? out : 1) * UP_MAX_TAPS, sizeof(double));
    if (!tp->idx || !tp->w) {
      nrt_exec_fail(ctx, "%s: out of host memory", name);
      return -1;
    }
    if (out == 0) continue;
    if (!active) {
      for (int64_t o = 0; o < out; o++) {
        tp->idx[o * UP_MAX_TAPS] = o;
        tp->w[o * UP_MAX_TAPS] = 1;
      }
    } else if (nearest) {
      for (int64_t o = 0; o < out; o++) {
        tp->idx[o * UP_MAX_TAPS] = nearest_src(p->mode == NK_UPSAMPLE_NEAREST_EXACT, o, in, out, p->has_scale[k], p->scale[k]);
        tp->w[o * UP_MAX_TAPS] = 1;
      }
    } else if (j->dbl) {
      fill_taps_f64(tp, p->mode, backward, in, out, p->align_corners, p->has_scale[k], p->scale[k]);
    } else {
      fill_taps_f32(tp, p->mode, backward, in, out, p->align_corners, p->has_scale[k], p->scale[k]);
    }
    for (int64_t o = 0; o < out; o++)
      for (int t = 0; t < tp->ntap; t++) {
        int64_t v = tp->idx[o * UP_MAX_TAPS + t];
        if (v < 0 || v >= in) {
          nrt_exec_fail(ctx, "%s: source index %lld out of range for size %lld", name, (long long)v, (long long)in);
          return -1;
        }
      }
  }
  return 0;
}

static int64_t taps_work(const up_job *j) {
  return (int64_t)j->t[0].ntap * j->t[1].ntap * j->t[2].ntap;
}

int nk_upsample_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  up_job j;
  memset(&j, 0, sizeof j);
  int rc = up_prepare(task, ctx, "upsample", 0, &j);
  if (rc == 0) {
    int64_t rows = j.n * j.c * j.out[0] * j.out[1];
    int64_t per_row = j.out[2] * taps_work(&j);
    if (rows > 0 && j.out[2] > 0) {
      int64_t grain = per_row >= UP_GRAIN_WORK ? 1 : UP_GRAIN_WORK / (per_row ? per_row : 1);
      nk_parallel_for(rows, grain, forward_range, &j);
    }
  }
  free_taps(&j);
  return rc;
}

int nk_upsample_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  up_job j;
  memset(&j, 0, sizeof j);
  int rc = up_prepare(task, ctx, "upsample_backward", 1, &j);
  if (rc == 0) {
    int64_t planes = j.n * j.c;
    int64_t plane_in = j.in[0] * j.in[1] * j.in[2];
    int64_t plane_out = j.out[0] * j.out[1] * j.out[2];
    if (planes > 0 && plane_in > 0) {
      int64_t work = plane_in + plane_out * taps_work(&j);
      int64_t grain = work >= UP_GRAIN_WORK ? 1 : UP_GRAIN_WORK / (work ? work : 1);
      nk_parallel_for(planes, grain, backward_range, &j);
      if (atomic_load(&j.oom)) {
        nrt_exec_fail(ctx, "upsample_backward: out of host memory");
        rc = -1;
      }
    }
  }
  free_taps(&j);
  return rc;
}
