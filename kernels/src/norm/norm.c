/* norm.c — NK_KERNEL_NORM and NK_KERNEL_NORM_BACKWARD: layer norm, RMS
 * norm, group norm (rows) and batch norm (channels), forward and backward.
 *
 * Decisions:
 *  - Two shapes of work cover every normalisation.  Rows (layer, rms,
 *    group): each row of [R, L] is normalised over itself; group norm is a
 *    row per (sample, group) whose affine changes every hw elements.
 *    Channels (batch; instance norm is batch norm of [1, N*C, S] in ATen's
 *    composite): channel c of [N, C, S] over its N runs of S elements, any
 *    strides (channels_last arrives as strides, not a copy).
 *  - Statistics are two-pass (mean, then the sum of squared deviations from
 *    it), which is as stable as ATen's CPU Welford and vectorises plainly;
 *    run sums use 16 lane accumulators added pairwise, and runs/rows/columns
 *    are combined in float64 in a fixed order.  float16/bfloat16 compute in
 *    float32 (converted per run into a buffer), float32 in float32, float64
 *    in float64, as ATen's CPU; mean/rstd/invstd are stored in their
 *    operand's dtype (float32 for mixed 16-bit input + float32 weight).
 *  - Work splits over rows (forward, dx), over column blocks with rows in
 *    order (layer/rms dweight, dbias) and over batch-norm units, so every
 *    result is computed by one fixed sequence whatever the number of
 *    threads.
 *  - Batch norm (convolutional training: planes of 49..3136 elements) works
 *    on units of (channel, chunk of samples).  The unit's sums run their 16
 *    lanes across all its planes and fold once (norm_rows.h's msum, msumsq,
 *    mdsums; a fold per plane had cost as much as the data), and its apply
 *    / dx pass is one call over all its planes.  Statistics stay two-pass
 *    (mean, then squared deviations from it), over the unit while it is in
 *    cache, like ATen's CPU kernel (which is two-pass too, in double).
 *    chunk_plan picks the chunks from the shape alone: one per channel
 *    unless a channel has over NORM_CH_MAX elements or there are fewer than
 *    NORM_CH_UNITS channels; one chunk per channel runs everything of a
 *    channel in one parallel pass; with more, a first pass computes each
 *    unit's (mean, M2) or (sum dy, sum dy * (x - mean)), the channel
 *    combines its units in chunk order (Chan's pairwise update for the
 *    variance), and a second pass applies.  16-bit planes are widened
 *    once per unit (half_rows.h) and used by both passes.  Group norm's dweight/dbias come from per (n, c) sums saved
 *    by the row pass, added over n in order (as ATen does).
 *  - Backward uses the centred sums (sum dy*w and sum dy*w*(x - mean)),
 *    which loses less than ATen's sum dy*w*x - mean * sum dy*w when the
 *    mean is large; the formula is ATen's otherwise:
 *    dx = rstd*dy*w + b*x + c per row (channel).
 *  - The float32 primitives (norm_rows.h) are compiled three times:
 *    portable, AVX2 (norm_avx2_f32.c) and AVX-512 (norm_avx512_f32.c), the
 *    variant picked at run time by nk_cpu_isa(). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype_convert.h"
#include "common/half_rows.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "common/stream_store.h"
#include "neuron_kernels.h"
#include "norm/norm_simd.h"
#include "common/validate.h"

#define NORM_COLS 256 /* columns per block of the layer-norm weight gradient */
#define NORM_FUSED_CHUNKS 4 /* chunks from which dx and the sums share a pass */
#define NORM_ROWS 256 /* rows per chunk of it: (chunk, block) units share out the
                         work (768 columns alone made 3 units for 2+ threads) */
/* batch norm's units (channel, chunk of samples), from the shape alone: */
#define NORM_CH_MAX 65536 /* elements of a unit at most (a cached unit: 256 KB f32) */
#define NORM_CH_UNITS 32  /* fewer channels than this are split into chunks ... */
#define NORM_CH_MIN 8192  /* ... of at least this many elements */

/* ------------------------------------------------- run primitives (C) */

#define NR_T float
#define NR_NAME(x) pf_##x
#include "norm/norm_rows.h"
#undef NR_T
#undef NR_NAME
#define NR_T double
#define NR_NAME(x) pd_##x
#include "norm/norm_rows.h"
#undef NR_T
#undef NR_NAME

static const nk_norm_f32_fns portable_f32 = {pf_sum, pf_sumsq, pf_dsums, pf_apply, pf_dx, pf_colsums,
                                           pf_msum,  pf_msumsq, pf_mdsums, pf_mapply, pf_mdx};

static const nk_norm_f32_fns *pick_f32(void) {
  switch (nk_cpu_isa()) {
  case NK_ISA_AVX512: return &nk_norm_avx512_f32;
  case NK_ISA_AVX2: return &nk_norm_avx2_f32;
  default: return &portable_f32;
  }
}

/* ---------------------------------------------------------------- plan */

typedef struct norm_plan {
  nk_norm_params prm;
  const nrt_operand *o;
  int64_t R, L, W; /* rows: R x L, W weights; channels: W = C */
  void *w, *b;     /* weight, bias as the compute type (NULL: none) */
  double *scratch; /* group backward: per (n, c) sums */
  double *partial; /* layer/rms backward: per row chunk column sums (2 x L) */
  int64_t N, S;    /* channels: samples, elements of a plane */
  int64_t cr, uc;  /* channels: samples per chunk, chunks per channel */
  double *part;    /* channels, uc > 1: 2 per unit (mean, M2 / sum dy, sum dy*xc) */
  double *ab;      /* channels, uc > 1: per channel y's scale, shift / dx's a, b, c */
  const nk_norm_f32_fns *f;
  atomic_int oom;
} norm_plan;

/* ------------------------------------------------------ the two walks */

#define NI_T float
#define NI_DT NRT_FLOAT32
#define NI(x) f32_##x
#define NI_F(fn) p->f->fn
#define NI_LOAD(t, q) nk_load_f32(t, q)
#define NI_STORE(t, q, v) nk_store_f32(t, q, v)
#define NI_HALF
#include "norm/norm_impl.h"
#undef NI_HALF
#undef NI_T
#undef NI_DT
#undef NI
#undef NI_F
#undef NI_LOAD
#undef NI_STORE
#define NI_T double
#define NI_DT NRT_FLOAT64
#define NI(x) f64_##x
#define NI_F(fn) pd_##fn
#define NI_LOAD(t, q) nk_load_f64(t, q)
#define NI_STORE(t, q, v) nk_store_f64(t, q, v)
#include "norm/norm_impl.h"

/* ---------------------------------------------------------- validation */

static int64_t numel_of(const nrt_operand *o) {
  int64_t n = 1;
  for (int d = 0; d < o->ndim; d++) n *= o->sizes[d];
  return n;
}

/* a 1-d operand of n elements, or empty (= None) when `optional` */
static int check_vec(nrt_exec_ctx *ctx, const char *what, const nrt_operand *o, int k, int64_t n,
                     int optional, const char *role) {
  if (o->ndim == 1 && (o->sizes[0] == n || (optional && o->sizes[0] == 0))) return 0;
  nrt_exec_fail(ctx, "%s: operand %d (%s) must be 1-d of %lld elements%s", what, k, role,
                (long long)n, optional ? " or empty" : "");
  return -1;
}

static int same_shape(const nrt_operand *a, const nrt_operand *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d]) return 0;
  return 1;
}

/* every operand floating; x-shaped operands match; vectors sized.  roles:
 * 'x' the data shape (or empty when optional), 'r' a per-row/channel vector,
 * 'w' a per-weight vector; upper case = may be empty. */
static int check_plan(const nrt_task *task, nrt_exec_ctx *ctx, const char *what, const char *roles,
                      int xi, norm_plan *p) {
  const int n = (int)strlen(roles);
  if (nk_check_operands(task, ctx, what, n)) return -1;
  const nrt_operand *o = task->operands;
  const nrt_operand *x = &o[xi];
  const int batch = p->prm.kind == NK_NORM_BATCH;
  if (x->ndim != (batch ? 3 : 2)) {
    nrt_exec_fail(ctx, "%s: the input must be %d-d, got %d dims", what, batch ? 3 : 2, (int)x->ndim);
    return -1;
  }
  p->R = batch ? x->sizes[1] : x->sizes[0];
  p->L = batch ? x->sizes[0] * x->sizes[2] : x->sizes[1];
  p->W = batch ? x->sizes[1] : x->sizes[1];
  if (p->prm.kind == NK_NORM_GROUP) {
    if (p->prm.groups <= 0 || p->prm.hw <= 0 || p->L % p->prm.hw != 0) {
      nrt_exec_fail(ctx, "%s: bad group layout (groups %lld, hw %lld, row %lld)", what,
                    (long long)p->prm.groups, (long long)p->prm.hw, (long long)p->L);
      return -1;
    }
    p->W = p->prm.groups * (p->L / p->prm.hw);
  }
  for (int k = 0; k < n; k++) {
    if (!nk_dtype_is_floating((nrt_dtype)o[k].dtype)) {
      nrt_exec_fail(ctx, "%s: operand %d has a non-floating dtype %d", what, k, (int)o[k].dtype);
      return -1;
    }
    const char r = roles[k];
    const int opt = r >= 'A' && r <= 'Z';
    switch (r | 0x20) {
    case 'x':
      if (!same_shape(&o[k], x) && !(opt && numel_of(&o[k]) == 0)) {
        nrt_exec_fail(ctx, "%s: operand %d must have the input's shape", what, k);
        return -1;
      }
      break;
    case 'r':
      if (check_vec(ctx, what, &o[k], k, p->R, opt, batch ? "per channel" : "per row")) return -1;
      break;
    default:
      if (check_vec(ctx, what, &o[k], k, p->W, opt, "per weight")) return -1;
      break;
    }
  }
  return 0;
}

/* an optional per-weight operand as a compute-type array (NULL if empty) */
static int convert_vec(nrt_exec_ctx *ctx, const nrt_operand *o, int dbl, void **out) {
  *out = NULL;
  if (o->sizes[0] == 0) return 0;
  const int64_t n = o->sizes[0];
  void *v = malloc((size_t)n * (dbl ? sizeof(double) : sizeof(float)));
  if (!v) {
    nrt_exec_fail(ctx, "out of memory");
    return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    const char *q = (const char *)o->data + i * o->strides[0];
    if (dbl) ((double *)v)[i] = nk_load_f64((nrt_dtype)o->dtype, q);
    else ((float *)v)[i] = nk_load_f32((nrt_dtype)o->dtype, q);
  }
  *out = v;
  return 0;
}

static int64_t grain_for(int64_t per_item) {
  return per_item > 0 && NK_GRAIN_ELEMENTWISE / per_item > 0 ? NK_GRAIN_ELEMENTWISE / per_item : 1;
}

/* batch norm: how many chunks of how many samples per channel (p->uc,
 * p->cr), from the shape alone so that no result depends on the threads:
 * a chunk holds at most NORM_CH_MAX elements, and fewer than NORM_CH_UNITS
 * channels are split further while chunks keep NORM_CH_MIN elements */
static void chunk_plan(norm_plan *p, int64_t C) {
  const int64_t per = p->N * p->S;
  int64_t k = (per + NORM_CH_MAX - 1) / NORM_CH_MAX;
  if (C < NORM_CH_UNITS) {
    int64_t want = (NORM_CH_UNITS + C - 1) / C, most = per / NORM_CH_MIN;
    if (want > most) want = most;
    if (want > k) k = want;
  }
  if (k > p->N) k = p->N;
  if (k < 1) k = 1;
  p->cr = (p->N + k - 1) / k;
  p->uc = (p->N + p->cr - 1) / p->cr;
}

/* batch norm, chunked: the two buffers (NULL: out of memory, reported) */
static int chunk_buffers(norm_plan *p, nrt_exec_ctx *ctx, const char *what, int64_t C) {
  p->part = malloc((size_t)(2 * C * p->uc) * sizeof(double));
  p->ab = malloc((size_t)(3 * C) * sizeof(double));
  if (p->part && p->ab) return 0;
  nrt_exec_fail(ctx, "%s: out of memory", what);
  return -1;
}

static int finish(norm_plan *p, nrt_exec_ctx *ctx, const char *what) {
  free(p->part);
  free(p->ab);
  free(p->w);
  free(p->b);
  free(p->scratch);
  free(p->partial);
  if (atomic_load(&p->oom)) {
    nrt_exec_fail(ctx, "%s: out of memory", what);
    return -1;
  }
  return 0;
}

static int plan_params(const nrt_task *task, nrt_exec_ctx *ctx, const char *what, norm_plan *p) {
  p->prm = *(const nk_norm_params *)task->params;
  p->o = task->operands;
  p->f = pick_f32();
  atomic_init(&p->oom, 0);
  if (p->prm.kind < 0 || p->prm.kind >= NK_NORM_KIND_COUNT) {
    nrt_exec_fail(ctx, "%s: invalid kind %d", what, (int)p->prm.kind);
    return -1;
  }
  return 0;
}

int nk_norm_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  norm_plan p = {0};
  if (plan_params(task, ctx, "norm", &p)) return -1;
  const int batch = p.prm.kind == NK_NORM_BATCH;
  /* y, mean, rstd, x, weight, bias[, running_mean, running_var] */
  if (check_plan(task, ctx, "norm", batch ? "xRRxWWWW" : "xRRxWW", 3, &p)) return -1;
  const nrt_operand *o = task->operands;
  const int dbl = o[3].dtype == NRT_FLOAT64;
  if (batch && !p.prm.training && (o[6].sizes[0] == 0 || o[7].sizes[0] == 0) && p.R > 0) {
    nrt_exec_fail(ctx, "norm: running_mean and running_var must be given when not training");
    return -1;
  }
  if (p.R == 0) return 0;
  if (p.L == 0) {
    /* no elements per row: mean 0, rstd NaN, as ATen's CPU */
    if (batch) {
      nrt_exec_fail(ctx, "norm: batch norm of a channel with no elements");
      return -1;
    }
    for (int64_t r = 0; r < p.R; r++) {
      if (o[1].sizes[0]) nk_store_f64((nrt_dtype)o[1].dtype, (char *)o[1].data + r * o[1].strides[0], 0.0);
      if (o[2].sizes[0]) nk_store_f64((nrt_dtype)o[2].dtype, (char *)o[2].data + r * o[2].strides[0], NAN);
    }
    return 0;
  }
  if (convert_vec(ctx, &o[4], dbl, &p.w) || convert_vec(ctx, &o[5], dbl, &p.b)) return finish(&p, ctx, "norm"), -1;
  if (batch) {
    p.N = o[3].sizes[0];
    p.S = o[3].sizes[2];
    chunk_plan(&p, p.R);
    const int64_t per = p.cr * p.S * (p.prm.training ? 3 : 1);
    if (p.uc == 1) {
      nk_parallel_for(p.R, grain_for(per), dbl ? f64_channels_forward : f32_channels_forward, &p);
    } else {
      if (chunk_buffers(&p, ctx, "norm", p.R)) return finish(&p, ctx, "norm"), -1;
      if (p.prm.training)
        nk_parallel_for(p.R * p.uc, grain_for(per), dbl ? f64_units_stats : f32_units_stats, &p);
      if (!atomic_load(&p.oom)) {
        if (dbl) f64_chans_combine(&p, 0, p.R);
        else f32_chans_combine(&p, 0, p.R);
        nk_parallel_for(p.R * p.uc, grain_for(p.cr * p.S), dbl ? f64_units_apply : f32_units_apply, &p);
      }
    }
  } else {
    nk_parallel_for(p.R, grain_for(p.L), dbl ? f64_rows_forward : f32_rows_forward, &p);
  }
  return finish(&p, ctx, "norm");
}

int nk_norm_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  norm_plan p = {0};
  if (plan_params(task, ctx, "norm_backward", &p)) return -1;
  const int batch = p.prm.kind == NK_NORM_BATCH, rms = p.prm.kind == NK_NORM_RMS;
  /* dx, dweight, dbias, dy, x, mean, rstd, weight */
  if (check_plan(task, ctx, "norm_backward", rms ? "XWWxxRrW" : "XWWxxrrW", 4, &p)) return -1;
  const nrt_operand *o = task->operands;
  const int dbl = o[4].dtype == NRT_FLOAT64;
  if (p.R == 0) return 0;
  if (p.L == 0) {
    /* no elements: zero gradients of the weights (dx is empty) */
    if (!batch) {
      for (int k = 1; k <= 2; k++)
        for (int64_t j = 0; j < o[k].sizes[0]; j++)
          nk_store_f64((nrt_dtype)o[k].dtype, (char *)o[k].data + j * o[k].strides[0], 0.0);
      return 0;
    }
    nrt_exec_fail(ctx, "norm_backward: batch norm of a channel with no elements");
    return -1;
  }
  if (convert_vec(ctx, &o[7], dbl, &p.w)) return finish(&p, ctx, "norm_backward"), -1;
  if (batch) {
    p.N = o[4].sizes[0];
    p.S = o[4].sizes[2];
    chunk_plan(&p, p.R);
    if (p.uc == 1) {
      nk_parallel_for(p.R, grain_for(p.N * p.S * 2), dbl ? f64_channels_backward : f32_channels_backward, &p);
      return finish(&p, ctx, "norm_backward");
    }
    if (chunk_buffers(&p, ctx, "norm_backward", p.R)) return finish(&p, ctx, "norm_backward"), -1;
    if (dbl ? f64_want_dsums(&p) : f32_want_dsums(&p))
      nk_parallel_for(p.R * p.uc, grain_for(p.cr * p.S), dbl ? f64_units_dsums : f32_units_dsums, &p);
    if (!atomic_load(&p.oom)) {
      if (dbl) f64_chans_dcombine(&p, 0, p.R);
      else f32_chans_dcombine(&p, 0, p.R);
      if (o[0].sizes[0])
        nk_parallel_for(p.R * p.uc, grain_for(p.cr * p.S * 2), dbl ? f64_units_dx : f32_units_dx, &p);
    }
    return finish(&p, ctx, "norm_backward");
  }
  const int want_w = o[1].sizes[0] || o[2].sizes[0];
  if (p.prm.kind == NK_NORM_GROUP && want_w) {
    p.scratch = malloc((size_t)(2 * p.R * (p.L / p.prm.hw)) * sizeof(double));
    if (!p.scratch) {
      nrt_exec_fail(ctx, "norm_backward: out of memory");
      return finish(&p, ctx, "norm_backward"), -1;
    }
  }
  /* layer/rms norm with dweight or dbias: each row's dx and the column
   * sums in one pass per chunk of rows when there are chunks enough for
   * the pool (chunks_backward; LayerNorm (4096, 768) forward+backward: x
   * and dy were read twice), else dx by rows and the sums by (chunk,
   * column block) units (cols_backward: few rows, long ones) */
  const int64_t chunks = (p.R + NORM_ROWS - 1) / NORM_ROWS, blocks = (p.L + NORM_COLS - 1) / NORM_COLS;
  const int sums = want_w && p.prm.kind != NK_NORM_GROUP;
  const int fused = sums && chunks >= NORM_FUSED_CHUNKS;
  if (sums) {
    p.partial = malloc((size_t)(2 * chunks * p.L + 1) * sizeof(double));
    if (!p.partial) {
      nrt_exec_fail(ctx, "norm_backward: out of memory");
      return finish(&p, ctx, "norm_backward"), -1;
    }
  }
  if (fused)
    nk_parallel_for(chunks, 1, dbl ? f64_chunks_backward : f32_chunks_backward, &p);
  else
    nk_parallel_for(p.R, grain_for(p.L), dbl ? f64_rows_backward : f32_rows_backward, &p);
  if (want_w && p.prm.kind == NK_NORM_GROUP && !atomic_load(&p.oom)) {
    /* dweight[c] = sum_n s2[n, c] * rstd[n, g], dbias[c] = sum_n s1[n, c] */
    const int64_t C = p.W, G = p.prm.groups, cg = C / G, N = p.R / G;
    const nrt_operand *ro = &o[6];
    for (int64_t c = 0; c < C; c++) {
      double gw = 0, gb = 0;
      for (int64_t n = 0; n < N; n++) {
        const double rs = nk_load_f64((nrt_dtype)ro->dtype,
                                      (const char *)ro->data + (n * G + c / cg) * ro->strides[0]);
        gw += p.scratch[2 * (n * C + c) + 1] * rs;
        gb += p.scratch[2 * (n * C + c)];
      }
      if (o[1].sizes[0]) nk_store_f64((nrt_dtype)o[1].dtype, (char *)o[1].data + c * o[1].strides[0], gw);
      if (o[2].sizes[0]) nk_store_f64((nrt_dtype)o[2].dtype, (char *)o[2].data + c * o[2].strides[0], gb);
    }
  } else if (want_w) {
    if (!fused)
      nk_parallel_for(chunks * blocks, grain_for(NORM_ROWS * NORM_COLS),
                      dbl ? f64_cols_backward : f32_cols_backward, &p);
    if (!atomic_load(&p.oom))
      for (int64_t j = 0; j < p.L; j++) { /* the chunks' sums, in order */
        double gw = 0, gb = 0;
        for (int64_t c = 0; c < chunks; c++) {
          gw += p.partial[c * 2 * p.L + j];
          gb += p.partial[c * 2 * p.L + p.L + j];
        }
        /* rounded to the compute type first, as the per-block walk did */
        for (int k = 1; k <= 2; k++) {
          if (!o[k].sizes[0]) continue;
          char *dst = (char *)o[k].data + j * o[k].strides[0];
          const double v = k == 1 ? gw : gb;
          if (dbl) nk_store_f64((nrt_dtype)o[k].dtype, dst, v);
          else nk_store_f32((nrt_dtype)o[k].dtype, dst, (float)v);
        }
      }
  }
  return finish(&p, ctx, "norm_backward");
}
