/* conv.c — NK_KERNEL_CONV: convolution forward and backward (input, weight),
 * 1-3 spatial dims, stride/padding/dilation/groups, and the im2col/col2im
 * ops (nn.functional.unfold/fold), all on one geometry.
 *
 * Decisions (the why):
 *  - Lowering to GEMM.  Forward is y[n, g] = w[g] (O/g x CK) @ col(x[n, g])
 *    (CK x L), where col is im2col; the input gradient is col2im(w[g]^T @
 *    dy[n, g]); the weight gradient is dy[n, g] @ col(x[n, g])^T summed over
 *    n.  Every product goes through nk_gemm_operands (gemm.h), batched over
 *    the samples of a chunk (the GEMM batch dim), so this file holds no
 *    multiply-add loop of its own except the depthwise kernels.
 *  - Every spatial rank is run as 3-d (leading dims of size 1), so one
 *    im2col and one col2im serve conv1d/2d/3d and unfold/fold.
 *  - Memory is bounded: the col buffer holds at most NK_CONV_COL_CAP
 *    elements.  Whole samples are batched while they fit; a sample whose
 *    col matrix is larger is cut into column (output position) ranges.
 *    Buffers are allocated per task from the thread's cache of work
 *    buffers (common/tmp_buffers.h); failure is an nrt_exec_fail, never a
 *    crash.  A 1x1 kernel with stride 1 and no padding needs no col at all:
 *    the input itself is the GEMM operand (forward and input gradient).
 *  - Samples are stacked side by side.  The col buffer of a chunk of nb
 *    samples is one (CK, nb * L) matrix, so a chunk is one GEMM with nb * L
 *    columns (forward, input gradient) or nb * L deep (weight gradient)
 *    instead of nb products of L columns: at ResNet's late layers L is 49
 *    or 196, and a GEMM that narrow spends its time on edge tiles, packing
 *    and C updates (0.5x the CPU before this).  The output side (y or dy,
 *    (N, O, L)) is gathered into / scattered from an (O, nb * L) buffer
 *    for it, one cheap pass.  Wide samples (L >= 512) forward and input
 *    gradients skip that pass: per-sample products are wide enough.
 *  - The weight gradient accumulates in a float buffer, chunk after chunk
 *    (beta 1), the GEMM summing a chunk's nb * L positions in its fixed
 *    k-block order: the result depends on the shapes only, never on the
 *    thread count.  col2im splits work over (sample, channel) pairs, each
 *    walked serially: deterministic too.
 *  - Depthwise (one input channel per group) has direct kernels: a GEMM
 *    with a handful of rows would spend its time packing.  So do 3x3
 *    float32 layers of few channels (conv_direct.c): the GEMM paths'
 *    copies cost more than their products there.
 *  - Two types per convolution: the operand type ot, what the GEMMs
 *    multiply, and the accumulation type ct (float32, float64 for float64),
 *    where results live until they are rounded once on store (ATen's CPU
 *    accumulates in float32 too).  A mode's inputs (forward x, w; input
 *    gradient dy, w; weight gradient x, dy) and every buffer that feeds a
 *    GEMM (the col matrix of the forward and the weight gradient, the
 *    stacked dy, conv_implicit's padded grid and transposed weight) are in
 *    ot; its output (the y working copy the bias is added to, the input
 *    gradient's col before col2im sums overlapping columns, the weight
 *    gradient's accumulator across chunks and groups) in ct.
 *    bfloat16 on a CPU with AVX512_BF16 (nk_gemm_bf16_dot) has ot =
 *    bfloat16: its operands go to the GEMM as they are (im2col and the
 *    padded grid move 2-byte elements, half the bytes of float32), and the
 *    GEMM (bfloat16 a and b, float32 out) runs its dot-product kernel at
 *    twice the float32 rate, as oneDNN's bf16 convolution does for ATen's
 *    CPU (0.71x of it with float32 copies for the CNN example under
 *    autocast).  The products are exact in float32 and summed in float32,
 *    so this changes only the summation order against the widened path.
 *    Elsewhere (float16: no dot instruction; bfloat16 without AVX512_BF16,
 *    under TORCHNEURON_ISA=avx2 or TORCHNEURON_CONV_BF16_DOT=0; depthwise,
 *    whose direct kernels compute in ct) ot = ct: 16-bit operands are
 *    widened into float32 working copies.  float32/float64 work in place
 *    whatever the strides, copying only an operand the GEMM cannot take as
 *    a strided matrix (spatial dims that do not flatten to one stride); a
 *    bfloat16 operand that must be copied is copied raw.
 *  - Transposed convolution is not a mode: its forward is BACKWARD_INPUT,
 *    its input gradient FORWARD and its weight gradient BACKWARD_WEIGHT
 *    with x and dy swapped; the glue maps them. */
#include <stdlib.h>
#include <string.h>

#include "common/dtype_convert.h"
#include "conv/conv.h"
#include "gemm/gemm.h"
#include "common/half_rows.h"
#include "common/tmp_buffers.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

/* Elements of the col buffer per chunk (16 MiB of float32). */
#define NK_CONV_COL_CAP ((int64_t)1 << 22)



/* Operand dims padded to (A, B, s0, s1, s2). */
static void padded(const nrt_operand *op, int nd, int64_t sizes[5], int64_t strides[5]) {
  sizes[0] = op->sizes[0];
  strides[0] = op->strides[0];
  sizes[1] = op->sizes[1];
  strides[1] = op->strides[1];
  for (int d = 0; d < 3; d++) {
    const int src = 2 + d - (3 - nd);
    sizes[2 + d] = d < 3 - nd ? 1 : op->sizes[src];
    strides[2 + d] = d < 3 - nd ? 0 : op->strides[src];
  }
}

/* The single stride of dims [first, 5) read as one row-major index, or -1. */
static int64_t flat_stride(const int64_t sizes[5], const int64_t strides[5], int first, int64_t es) {
  int64_t want = -1, sl = es;
  for (int d = 4; d >= first; d--) {
    if (sizes[d] == 1) continue;
    if (want < 0) {
      sl = strides[d];
      want = strides[d] * sizes[d];
    } else {
      if (strides[d] != want) return -1;
      want *= sizes[d];
    }
  }
  return sl;
}

/* Walks every element of a (A, B, s0, s1, s2) tensor in row-major order
 * together with a contiguous buffer of the compute dtype; to_buf copies
 * in (converting), else out.  float16/bfloat16 <-> float32 rows go through
 * the vectorised row conversions (half_rows.h): the working copies of a
 * bfloat16 convolution under autocast. */
static void copy_walk(const int64_t size[5], const int64_t stride[5], char *data, nrt_dtype t,
                      char *buf, nrt_dtype ct, int to_buf) {
  const size_t ces = nk_dtype_size(ct);
  /* Outer dims that continue the innermost one's run join it (the buffer
   * is row-major), so rows are long: a bfloat16 weight gradient of
   * 512 x 512 x 3 x 3 was 786k three-element row conversions, a third of
   * its time. */
  int64_t sz[5], st[5];
  memcpy(sz, size, sizeof sz);
  memcpy(st, stride, sizeof st);
  for (int d = 3; d >= 0; d--) {
    if (sz[d] == 1) continue;
    if (st[d] != st[4] * sz[4]) break;
    sz[4] *= sz[d];
    sz[d] = 1;
  }
  const int rows16 = ct == NRT_FLOAT32 && (t == NRT_FLOAT16 || t == NRT_BFLOAT16 || t == NRT_FLOAT32);
  const nk_half_fns *h = nk_half_pick();
  for (int64_t a = 0; a < sz[0]; a++)
    for (int64_t b = 0; b < sz[1]; b++)
      for (int64_t i = 0; i < sz[2]; i++)
        for (int64_t j = 0; j < sz[3]; j++) {
          char *p = data + a * st[0] + b * st[1] + i * st[2] + j * st[3];
          if (rows16) {
            if (to_buf) {
              const float *v = h->in(t, p, st[4], sz[4], (float *)(void *)buf);
              if (v != (const float *)(const void *)buf) memcpy(buf, v, (size_t)sz[4] * 4);
              if (st[4] == 0) for (int64_t k = 1; k < sz[4]; k++) memcpy(buf + k * 4, buf, 4);
            } else {
              h->out(t, p, st[4], sz[4], (const float *)(const void *)buf);
            }
            buf += sz[4] * ces;
            continue;
          }
          for (int64_t k = 0; k < sz[4]; k++, p += st[4], buf += ces) {
            if (t == ct) {
              /* bfloat16 operands of the dot-product GEMM: raw copies */
              if (to_buf) memcpy(buf, p, ces);
              else memcpy(p, buf, ces);
            } else if (ct == NRT_FLOAT64) {
              if (to_buf) nk_write_f64(buf, nk_load_f64(t, p));
              else nk_store_f64(t, p, nk_read_f64(buf));
            } else {
              if (to_buf) nk_write_f32(buf, nk_load_f32(t, p));
              else nk_store_f32(t, p, nk_read_f32(buf));
            }
          }
        }
}

/* A view of op in the compute dtype ct.  need_flat: the GEMM takes it, so
 * dims [flat_from, 5) must read as one index (flat_from 2: spatial; 1: the
 * weight's (C/g, K...)).  An output that has to be copied is zeroed (or
 * copied in when `load`) and stored back by view_finish. */
static int view_make(nrt_exec_ctx *ctx, const nrt_operand *op, int nd, nrt_dtype ct, int need_flat,
                     int flat_from, int is_out, int load, cview *v) {
  int64_t st[5];
  memset(v, 0, sizeof *v);
  padded(op, nd, v->size, st);
  const int64_t es = (int64_t)nk_dtype_size((nrt_dtype)op->dtype);
  int64_t sl = flat_stride(v->size, st, 2, es);
  int ok = op->dtype == (int32_t)ct;
  if (need_flat && sl < 0) ok = 0;
  if (need_flat && flat_from == 1 && flat_stride(v->size, st, 1, es) < 0) ok = 0;
  if (ok) {
    v->data = op->data;
    v->t = (nrt_dtype)op->dtype;
    v->sa = st[0];
    v->sb = st[1];
    memcpy(v->sp, st + 2, sizeof v->sp);
    v->sl = sl;
    return 0;
  }
  const int64_t ces = (int64_t)nk_dtype_size(ct);
  const int64_t numel = v->size[0] * v->size[1] * v->size[2] * v->size[3] * v->size[4];
  v->owned = nk_tmp_calloc((size_t)(numel ? numel : 1), (size_t)ces);
  if (!v->owned) {
    nrt_exec_fail(ctx, "conv: out of host memory for a %lld-element working copy", (long long)numel);
    return -1;
  }
  v->data = v->owned;
  v->t = ct;
  v->sp[2] = ces;
  v->sp[1] = ces * v->size[4];
  v->sp[0] = v->sp[1] * v->size[3];
  v->sb = v->sp[0] * v->size[2];
  v->sa = v->sb * v->size[1];
  v->sl = ces;
  if (!is_out || load) copy_walk(v->size, st, op->data, (nrt_dtype)op->dtype, v->owned, ct, 1);
  v->writeback = is_out;
  return 0;
}

/* The bias (O) as a view in ct, read as (O, 1, 1). */
static int bias_view(nrt_exec_ctx *ctx, const nrt_operand *bo, nrt_dtype ct, cview *v) {
  nrt_operand b3 = *bo;
  b3.ndim = 3;
  b3.sizes[1] = b3.sizes[2] = 1;
  b3.strides[1] = b3.strides[2] = 0;
  return view_make(ctx, &b3, 1, ct, 0, 2, 0, 0, v);
}

static void view_finish(const nrt_operand *op, int nd, nrt_dtype ct, cview *v) {
  if (v->owned && v->writeback) {
    int64_t sz[5], st[5];
    padded(op, nd, sz, st);
    copy_walk(sz, st, op->data, (nrt_dtype)op->dtype, v->owned, ct, 0);
  }
  nk_tmp_free(v->owned);
  v->owned = NULL;
}

/* ------------------------------------------------------------- im2col */

/* Rows [r0, r1) of the col matrix of one sample: row r = (c, k0, k1, k2)
 * (c relative to x, which points at the first channel), columns are the
 * output positions [l0, l0 + lc).  dst row r starts at dst + (r - r0) *
 * drs; elements are es bytes apart (raw copies: no conversion). */
static void im2col_rows(const conv_geom *g, const char *x, int64_t sxc, const int64_t sx[3],
                        size_t es, int64_t r0, int64_t r1, int64_t l0, int64_t lc, char *dst,
                        int64_t drs, int64_t des) {
  for (int64_t r = r0; r < r1; r++) {
    const int64_t c = r / g->kprod, kr = r % g->kprod;
    const int64_t kk0 = kr / (g->k[1] * g->k[2]), kk1 = kr / g->k[2] % g->k[1], kk2 = kr % g->k[2];
    const char *xc = x + c * sxc;
    char *row = dst + (r - r0) * drs;
    int64_t o0 = l0 / (g->out[1] * g->out[2]), o1 = l0 / g->out[2] % g->out[1],
            o2 = l0 % g->out[2];
    for (int64_t l = 0; l < lc;) {
      const int64_t run = g->out[2] - o2 < lc - l ? g->out[2] - o2 : lc - l;
      const int64_t i0 = o0 * g->s[0] - g->p[0] + kk0 * g->d[0];
      const int64_t i1 = o1 * g->s[1] - g->p[1] + kk1 * g->d[1];
      char *out = row + l * des;
      if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1]) {
        if (des == (int64_t)es) memset(out, 0, (size_t)run * es);
        else for (int64_t j = 0; j < run; j++) memset(out + j * des, 0, es);
      } else {
        const char *base = xc + i0 * sx[0] + i1 * sx[1];
        const int64_t step = g->s[2], first = o2 * step + kk2 * g->d[2] - g->p[2];
        /* positions j of the run with 0 <= first + j * step < in: [jlo, jhi) */
        int64_t jlo = first >= 0 ? 0 : (-first + step - 1) / step;
        int64_t jhi = first >= g->in[2] ? 0 : (g->in[2] - first + step - 1) / step;
        if (jlo > run) jlo = run;
        if (jhi > run) jhi = run;
        if (jhi < jlo) jhi = jlo;
        for (int64_t j = 0; j < jlo; j++) memset(out + j * des, 0, es);
        for (int64_t j = jhi; j < run; j++) memset(out + j * des, 0, es);
        const char *src = jhi > jlo ? base + (first + jlo * step) * sx[2] : base;
        if (jhi == jlo) {
          /* nothing inside */
        } else if (step * sx[2] == (int64_t)es && des == (int64_t)es) {
          memcpy(out + jlo * des, src, (size_t)(jhi - jlo) * es);
        } else {
          const int64_t ss = step * sx[2];
          char *o = out + jlo * des;
          switch (es) {
#define NK_IM2COL_ROW(T)                                           \
  for (int64_t j = jlo; j < jhi; j++, src += ss, o += des) {       \
    T v;                                                           \
    memcpy(&v, src, sizeof v);                                     \
    memcpy(o, &v, sizeof v);                                       \
  }                                                                \
  break;
          case 2: NK_IM2COL_ROW(uint16_t)
          case 4: NK_IM2COL_ROW(uint32_t)
          default: NK_IM2COL_ROW(uint64_t)
#undef NK_IM2COL_ROW
          }
        }
      }
      l += run;
      o2 = 0;
      if (++o1 == g->out[1]) {
        o1 = 0;
        o0++;
      }
    }
  }
}

/* ------------------------------------------------------------- col2im */

/* x[c] += the col rows of channel c (kprod rows, crs bytes apart, of lc
 * columns from l0, ccs bytes apart); x is a compute-typed flat-spatial view
 * of one sample's channel (sxl bytes between positions). */
static void col2im_channel(const conv_geom *g, const char *col, int64_t crs, int64_t ccs,
                           char *x, int64_t sxl, nrt_dtype ct, int64_t l0, int64_t lc) {
  for (int64_t kr = 0; kr < g->kprod; kr++) {
    const int64_t kk0 = kr / (g->k[1] * g->k[2]), kk1 = kr / g->k[2] % g->k[1], kk2 = kr % g->k[2];
    const char *row = col + kr * crs;
    int64_t o0 = l0 / (g->out[1] * g->out[2]), o1 = l0 / g->out[2] % g->out[1],
            o2 = l0 % g->out[2];
    for (int64_t l = 0; l < lc;) {
      const int64_t run = g->out[2] - o2 < lc - l ? g->out[2] - o2 : lc - l;
      const int64_t i0 = o0 * g->s[0] - g->p[0] + kk0 * g->d[0];
      const int64_t i1 = o1 * g->s[1] - g->p[1] + kk1 * g->d[1];
      if (i0 >= 0 && i0 < g->in[0] && i1 >= 0 && i1 < g->in[1]) {
        char *base = x + ((i0 * g->in[1] + i1) * g->in[2]) * sxl;
        const char *src = row + l * ccs;
        int64_t i2 = o2 * g->s[2] - g->p[2] + kk2 * g->d[2];
        if (ct == NRT_FLOAT64) {
          for (int64_t j = 0; j < run; j++, i2 += g->s[2])
            if (i2 >= 0 && i2 < g->in[2])
              nk_write_f64(base + i2 * sxl, nk_read_f64(base + i2 * sxl) + nk_read_f64(src + j * ccs));
        } else {
          for (int64_t j = 0; j < run; j++, i2 += g->s[2])
            if (i2 >= 0 && i2 < g->in[2])
              nk_write_f32(base + i2 * sxl, nk_read_f32(base + i2 * sxl) + nk_read_f32(src + j * ccs));
        }
      }
      l += run;
      o2 = 0;
      if (++o1 == g->out[1]) {
        o1 = 0;
        o0++;
      }
    }
  }
}

/* ------------------------------------------------------------- plan */

enum { STACK_GATHER, STACK_SCATTER, STACK_SCATTER_ADD };

typedef struct conv_job {
  const conv_geom *g;
  nrt_dtype ct;  /* accumulation type: float32/float64 */
  int64_t ces;
  int64_t col_es, ys_es; /* element sizes of col and ystack (ct's, or 2: bfloat16 operands) */
  cview x, w, y, b; /* roles by mode (x: input side, y: output side) */
  int64_t n0, nb, l0, lc, grp;
  char *col;     /* ck x (nb * lc): sample b's columns at b * lc */
  char *ystack;  /* og x (nb * lc): the output side stacked the same way */
  int stack_dir; /* stack_task: STACK_GATHER, STACK_SCATTER or STACK_SCATTER_ADD */
  char *acc;     /* o x ck (BACKWARD_WEIGHT) */
  const nrt_operand *col_op; /* IM2COL / COL2IM: the col operand */
  cview colv;
} conv_job;


static void im2col_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const conv_job *j = arg;
  const conv_geom *g = j->g;
  for (int64_t t = begin; t < end; t++) {
    const int64_t b = t / g->ck, r = t % g->ck;
    const char *x = j->x.data + (j->n0 + b) * j->x.sa + j->grp * g->cg * j->x.sb;
    im2col_rows(g, x, j->x.sb, j->x.sp, (size_t)j->col_es, r, r + 1, j->l0, j->lc,
                j->col + (r * j->nb + b) * j->lc * j->col_es, j->nb * j->lc * j->col_es, j->col_es);
  }
}

static void col2im_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const conv_job *j = arg;
  const conv_geom *g = j->g;
  for (int64_t t = begin; t < end; t++) {
    const int64_t b = t / g->cg, c = t % g->cg;
    char *x = j->x.data + (j->n0 + b) * j->x.sa + (j->grp * g->cg + c) * j->x.sb;
    const char *col = j->col + (c * g->kprod * j->nb + b) * j->lc * j->ces;
    col2im_channel(g, col, j->nb * j->lc * j->ces, j->ces, x, j->x.sl, j->ct, j->l0, j->lc);
  }
}

static void col2im_op_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const conv_job *j = arg;
  const conv_geom *g = j->g;
  for (int64_t t = begin; t < end; t++) {
    const int64_t n = t / g->c, c = t % g->c;
    char *x = j->x.data + n * j->x.sa + c * j->x.sb;
    const char *col = j->colv.data + n * j->colv.sa + c * g->kprod * j->colv.sb;
    col2im_channel(g, col, j->colv.sb, j->colv.sl, x, j->x.sl, j->ct, 0, g->lprod);
  }
}

static void im2col_op_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const conv_job *j = arg;
  const conv_geom *g = j->g;
  const nrt_operand *col = j->col_op;
  for (int64_t t = begin; t < end; t++) {
    const int64_t n = t / g->c, c = t % g->c;
    im2col_rows(g, j->x.data + n * j->x.sa, j->x.sb, j->x.sp, (size_t)j->ces, c * g->kprod,
                (c + 1) * g->kprod, 0, g->lprod,
                (char *)col->data + n * col->strides[0] + c * g->kprod * col->strides[1],
                col->strides[1], col->strides[2]);
  }
}

/* y[n, o, :] = bias[o] */
static void bias_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const conv_job *j = arg;
  const conv_geom *g = j->g;
  for (int64_t t = begin; t < end; t++) {
    const int64_t n = t / g->o, o = t % g->o;
    char *p = j->y.data + n * j->y.sa + o * j->y.sb;
    const char *bp = j->b.data + o * j->b.sa;
    for (int64_t l = 0; l < g->lprod; l++) memcpy(p + l * j->y.sl, bp, (size_t)j->ces);
  }
}

/* Unit (b, o) of a chunk: row o of ystack at column b * lc <-> y[n0 + b,
 * grp * og + o, l0 .. l0 + lc).  FORWARD scatters (adding when y holds the
 * bias: the same single rounding as a GEMM with beta 1), the backward modes
 * gather dy. */
static void stack_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const conv_job *j = arg;
  const conv_geom *g = j->g;
  const int64_t ces = j->ys_es, row = j->nb * j->lc;
  for (int64_t t = begin; t < end; t++) {
    const int64_t b = t / g->og, o = t % g->og;
    char *y = j->y.data + (j->n0 + b) * j->y.sa + (j->grp * g->og + o) * j->y.sb + j->l0 * j->y.sl;
    char *st = j->ystack + (o * row + b * j->lc) * ces;
    if (j->stack_dir == STACK_SCATTER_ADD) {
      for (int64_t l = 0; l < j->lc; l++) {
        char *p = y + l * j->y.sl;
        if (j->ct == NRT_FLOAT64) nk_write_f64(p, nk_read_f64(p) + nk_read_f64(st + l * ces));
        else nk_write_f32(p, nk_read_f32(p) + nk_read_f32(st + l * ces));
      }
    } else if (j->y.sl == ces) {
      if (j->stack_dir == STACK_SCATTER) memcpy(y, st, (size_t)(j->lc * ces));
      else memcpy(st, y, (size_t)(j->lc * ces));
    } else {
      for (int64_t l = 0; l < j->lc; l++)
        if (j->stack_dir == STACK_SCATTER) memcpy(y + l * j->y.sl, st + l * ces, (size_t)ces);
        else memcpy(st + l * ces, y + l * j->y.sl, (size_t)ces);
    }
  }
}

/* Fills (A, B, flat spatial) view v with zeros. */
static void zero_view(const cview *v, int64_t ces) {
  for (int64_t a = 0; a < v->size[0]; a++)
    for (int64_t b = 0; b < v->size[1]; b++)
      for (int64_t i = 0; i < v->size[2]; i++)
        for (int64_t jx = 0; jx < v->size[3]; jx++) {
          char *p = v->data + a * v->sa + b * v->sb + i * v->sp[0] + jx * v->sp[1];
          if (v->sp[2] == ces) memset(p, 0, (size_t)(v->size[4] * ces));
          else for (int64_t k = 0; k < v->size[4]; k++) memset(p + k * v->sp[2], 0, (size_t)ces);
        }
}

/* ------------------------------------------------------------- depthwise */

typedef struct dw_job {
  const conv_geom *g;
  nrt_dtype ct;
  int mode;
  const cview *x, *w, *y, *b;
} dw_job;

/* One input channel per group (cg == 1), og = multiplier.  Units:
 *  FORWARD: (n, o) -> y[n, o] = bias + sum_k w[o, k] x[n, o / og, pos(l, k)]
 *  BACKWARD_INPUT: (n, c) -> dx[n, c] = sum over o of group c, l, k (scatter,
 *      serial in the unit, so deterministic)
 *  BACKWARD_WEIGHT: o -> dw[o, k] = sum_n sum_l dy[n, o, l] x[n, c, pos(l, k)] */
#define NK_DW_BODY(T, RD, WR)                                                                  \
  for (int64_t u = begin; u < end; u++) {                                                      \
    if (j->mode == NK_CONV_FORWARD) {                                                          \
      const int64_t n = u / g->o, o = u % g->o, c = o / g->og;                                 \
      const char *xc = x->data + n * x->sa + c * x->sb;                                        \
      char *yc = y->data + n * y->sa + o * y->sb;                                              \
      const T bias = j->b && j->b->data ? RD(j->b->data + o * j->b->sa) : (T)0;                \
      for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                               \
        for (int64_t o1 = 0; o1 < g->out[1]; o1++)                                             \
          for (int64_t o2 = 0; o2 < g->out[2]; o2++) {                                         \
            T s = bias;                                                                        \
            int64_t kr = 0;                                                                    \
            for (int64_t k0 = 0; k0 < g->k[0]; k0++) {                                         \
              const int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];                        \
              for (int64_t k1 = 0; k1 < g->k[1]; k1++) {                                       \
                const int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];                      \
                const int ok = i0 >= 0 && i0 < g->in[0] && i1 >= 0 && i1 < g->in[1];           \
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, kr++) {                               \
                  const int64_t i2 = o2 * g->s[2] - g->p[2] + k2 * g->d[2];                    \
                  if (ok && i2 >= 0 && i2 < g->in[2])                                          \
                    s += RD(w->data + o * w->sa + kr * w->sl) *                                \
                         RD(xc + i0 * x->sp[0] + i1 * x->sp[1] + i2 * x->sp[2]);               \
                }                                                                              \
              }                                                                                \
            }                                                                                  \
            WR(yc + o0 * y->sp[0] + o1 * y->sp[1] + o2 * y->sp[2], s);                         \
          }                                                                                    \
    } else if (j->mode == NK_CONV_BACKWARD_INPUT) {                                            \
      const int64_t n = u / g->c, c = u % g->c;                                                \
      char *xc = x->data + n * x->sa + c * x->sb;                                              \
      for (int64_t m = 0; m < g->og; m++) {                                                    \
        const int64_t o = c * g->og + m;                                                       \
        const char *yc = y->data + n * y->sa + o * y->sb;                                      \
        for (int64_t o0 = 0; o0 < g->out[0]; o0++)                                             \
          for (int64_t o1 = 0; o1 < g->out[1]; o1++)                                           \
            for (int64_t o2 = 0; o2 < g->out[2]; o2++) {                                       \
              const T dy = RD(yc + o0 * y->sp[0] + o1 * y->sp[1] + o2 * y->sp[2]);             \
              int64_t kr = 0;                                                                  \
              for (int64_t k0 = 0; k0 < g->k[0]; k0++) {                                       \
                const int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];                      \
                for (int64_t k1 = 0; k1 < g->k[1]; k1++) {                                     \
                  const int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];                    \
                  const int ok = i0 >= 0 && i0 < g->in[0] && i1 >= 0 && i1 < g->in[1];         \
                  for (int64_t k2 = 0; k2 < g->k[2]; k2++, kr++) {                             \
                    const int64_t i2 = o2 * g->s[2] - g->p[2] + k2 * g->d[2];                  \
                    if (ok && i2 >= 0 && i2 < g->in[2]) {                                      \
                      char *px = xc + i0 * x->sp[0] + i1 * x->sp[1] + i2 * x->sp[2];           \
                      WR(px, RD(px) + dy * RD(w->data + o * w->sa + kr * w->sl));              \
                    }                                                                          \
                  }                                                                            \
                }                                                                              \
              }                                                                                \
            }                                                                                  \
      }                                                                                        \
    } else {                                                                                   \
      const int64_t o = u, c = o / g->og;                                                      \
      int64_t kr = 0;                                                                          \
      for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                                 \
        for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                               \
          for (int64_t k2 = 0; k2 < g->k[2]; k2++, kr++) {                                     \
            T s = 0;                                                                           \
            for (int64_t n = 0; n < g->n; n++) {                                               \
              const char *xc = x->data + n * x->sa + c * x->sb;                                \
              const char *yc = y->data + n * y->sa + o * y->sb;                                \
              for (int64_t o0 = 0; o0 < g->out[0]; o0++) {                                     \
                const int64_t i0 = o0 * g->s[0] - g->p[0] + k0 * g->d[0];                      \
                if (i0 < 0 || i0 >= g->in[0]) continue;                                        \
                for (int64_t o1 = 0; o1 < g->out[1]; o1++) {                                   \
                  const int64_t i1 = o1 * g->s[1] - g->p[1] + k1 * g->d[1];                    \
                  if (i1 < 0 || i1 >= g->in[1]) continue;                                      \
                  for (int64_t o2 = 0; o2 < g->out[2]; o2++) {                                 \
                    const int64_t i2 = o2 * g->s[2] - g->p[2] + k2 * g->d[2];                  \
                    if (i2 >= 0 && i2 < g->in[2])                                              \
                      s += RD(yc + o0 * y->sp[0] + o1 * y->sp[1] + o2 * y->sp[2]) *            \
                           RD(xc + i0 * x->sp[0] + i1 * x->sp[1] + i2 * x->sp[2]);             \
                  }                                                                            \
                }                                                                              \
              }                                                                                \
            }                                                                                  \
            WR(w->data + o * w->sa + kr * w->sl, s);                                           \
          }                                                                                    \
    }                                                                                          \
  }

static void dw_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const dw_job *j = arg;
  const conv_geom *g = j->g;
  const cview *x = j->x, *w = j->w, *y = j->y;
  if (j->ct == NRT_FLOAT64) {
    NK_DW_BODY(double, nk_read_f64, nk_write_f64)
  } else {
    NK_DW_BODY(float, nk_read_f32, nk_write_f32)
  }
}

/* ------------------------------------------------------------- entry */

static int bad(nrt_exec_ctx *ctx, const char *what) {
  nrt_exec_fail(ctx, "conv: %s", what);
  return -1;
}

/* Chunking: samples per chunk and columns per chunk for a col of ck rows. */
static void plan_chunks(const conv_geom *g, int64_t extra_per_sample, int64_t *nb, int64_t *lc) {
  const int64_t ck = g->ck ? g->ck : 1, l = g->lprod ? g->lprod : 1;
  const int64_t per = ck * l + extra_per_sample;
  /* Enough elements for ~1024 GEMM columns, but no more: im2col writes the
   * col matrix and the GEMM's packing reads it back, from the caches when
   * it is small, from memory when not (a third of a 64->64 3x3 conv's
   * time at 16 MiB chunks). */
  int64_t cap = ck * 1024;
  if (cap < ((int64_t)1 << 18)) cap = (int64_t)1 << 18;
  if (cap > NK_CONV_COL_CAP) cap = NK_CONV_COL_CAP;
  if (per <= cap) {
    *nb = cap / per;
    if (*nb > g->n) *nb = g->n;
    if (*nb < 1) *nb = 1;
    *lc = g->lprod;
  } else {
    *nb = 1;
    *lc = cap / ck;
    if (*lc < 16) *lc = 16;
    if (*lc > g->lprod) *lc = g->lprod;
  }
}

/* Whether a stride-1 convolution goes to conv_implicit.c: when the padded
 * grid's extra columns cost less than the col matrix they save.  The input
 * gradient of many channels on small images stays with im2col: there the
 * implicit form is one product of few columns and a deep k (ResNet-50's
 * 256/512-channel 14x14 and 7x7 layers measured 0.61x / 0.37x the CPU
 * implicit, 0.71x / 0.58x with im2col), while with <= 64 channels or
 * larger images it wins (16 channels at 16x16: 0.8x against 0.2x).
 * TORCHNEURON_CONV_IMPLICIT=0 / 1 turns the path off / on everywhere it
 * applies (tuning, and tests of both paths). */
static int implicit_pays(const conv_geom *g, int mode) {
  const char *env = getenv("TORCHNEURON_CONV_IMPLICIT");
  if (env && *env) return env[0] != '0';
  if (g->kprod == 1) return 0;
  if (mode == NK_CONV_BACKWARD_INPUT && g->cg > 64 && g->lprod < 512) return 0;
  /* the grid's share of valid columns (a strided product's phase grid:
   * ceil((in + 2p) / s) per dim; conv_implicit.c) */
  double useful = 1;
  for (int d = 0; d < 3; d++)
    useful *= (double)g->out[d] / (double)((g->in[d] + 2 * g->p[d] + g->s[d] - 1) / g->s[d]);
  return useful >= 0.5;
}

/* Whether a bfloat16 convolution on AVX512_BF16 hands its operands to the
 * dot-product kernels as bfloat16 (else they are widened to float32).
 * Everywhere except implicit-GEMM products of at most 32 rows (the
 * forward's and weight gradient's output channels, the input gradient's
 * input channels; the CNN example's 16/32-channel layers) that cannot read
 * channel pairs in place (a strided input gradient, or an AMX machine:
 * nk_conv_pair_rows):
 * there the pair kernel would pack B for only a tile or three of rows, and
 * widening measured 1.3-1.8x faster (batch 32, 16->16 and 32->32).  With
 * channel pairs read in place (conv_implicit.c) bfloat16 operands are
 * faster again: 16->16 3x3 @16 forward 0.31 -> 0.21 ms.  The weight
 * gradient of <= 32 channels takes the bfloat16 dot products
 * (conv_dw_avx512bf16_f32.c: backward 0.50 -> 0.42 ms there).  From 64
 * channels up, and on the im2col and 1x1 paths, bfloat16 operands were
 * 1.2-2.5x faster.  TORCHNEURON_CONV_BF16_DOT=1 / 0 forces bfloat16
 * operands / widening wherever the CPU allows (tests of both ways, tuning). */
static int bf16_operands_pay(const conv_geom *g, int mode, int use_direct) {
  const char *env = getenv("TORCHNEURON_CONV_BF16_DOT");
  if (env && *env) return env[0] != '0';
  if (!use_direct && implicit_pays(g, mode)) {
    const int64_t rows = mode == NK_CONV_BACKWARD_INPUT ? g->cg : g->og;
    const int unit = g->s[0] == 1 && g->s[1] == 1 && g->s[2] == 1;
    /* unless the pair kernel reads the padded input in place as channel
     * pairs (conv_implicit.c; the forward, and the input gradient at stride 1);
     * the weight gradient's dot products read bfloat16 as it is */
    if (rows <= 32)
      return mode == NK_CONV_BACKWARD_WEIGHT || ((unit || mode == NK_CONV_FORWARD) && nk_conv_pair_rows(rows));
  }
  return 1;
}

static int run_gemm(nrt_exec_ctx *ctx, nrt_operand out, nrt_operand a, nrt_operand b, double beta) {
  const nrt_operand ops[3] = {out, a, b};
  nk_scalar one = {1.0, 1}, bt = {beta, (int64_t)beta};
  return nk_gemm_operands(ctx, ops, one, bt);
}

int nk_conv_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_conv_params *prm = (const nk_conv_params *)task->params;
  const int mode = prm->mode;
  if (mode < 0 || mode >= NK_CONV_MODE_COUNT) return bad(ctx, "unknown mode");
  const int n_ops = task->n_operands;
  const int want = mode == NK_CONV_FORWARD && n_ops == 4 ? 4
                   : (mode == NK_CONV_IM2COL || mode == NK_CONV_COL2IM) ? 2 : 3;
  if (nk_check_operands(task, ctx, "conv", want)) return -1;
  const nrt_operand *ops = task->operands;
  const int nd = prm->nd;
  if (nd < 1 || nd > 3) return bad(ctx, "nd must be 1, 2 or 3");
  const nrt_dtype t = (nrt_dtype)ops[0].dtype;
  if (t != NRT_FLOAT32 && t != NRT_FLOAT64 && t != NRT_FLOAT16 && t != NRT_BFLOAT16)
    return bad(ctx, "dtype must be float32, float64, float16 or bfloat16");
  for (int i = 1; i < want; i++)
    if (ops[i].dtype != (int32_t)t) return bad(ctx, "operands must share one dtype");
  const nrt_dtype ct = t == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32;
  const int64_t ces = (int64_t)nk_dtype_size(ct);

  /* Geometry: x is the input side, y the output side, w the weight. */
  const nrt_operand *xo, *yo, *wo = NULL, *bo = NULL;
  switch (mode) {
  case NK_CONV_FORWARD: yo = &ops[0]; xo = &ops[1]; wo = &ops[2]; bo = want == 4 ? &ops[3] : NULL; break;
  case NK_CONV_BACKWARD_INPUT: xo = &ops[0]; yo = &ops[1]; wo = &ops[2]; break;
  case NK_CONV_BACKWARD_WEIGHT: wo = &ops[0]; yo = &ops[1]; xo = &ops[2]; break;
  case NK_CONV_IM2COL: yo = &ops[0]; xo = &ops[1]; break;
  default: xo = &ops[0]; yo = &ops[1]; break;
  }
  conv_geom g;
  memset(&g, 0, sizeof g);
  if (xo->ndim != 2 + nd) return bad(ctx, "input must have 2 + nd dims");
  g.n = xo->sizes[0];
  g.c = xo->sizes[1];
  g.groups = prm->groups;
  for (int d = 0; d < 3; d++) {
    const int src = d - (3 - nd);
    g.in[d] = src < 0 ? 1 : xo->sizes[2 + src];
    g.s[d] = src < 0 ? 1 : prm->stride[src];
    g.p[d] = src < 0 ? 0 : prm->padding[src];
    g.d[d] = src < 0 ? 1 : prm->dilation[src];
    if (g.s[d] < 1 || g.d[d] < 1 || g.p[d] < 0)
      return bad(ctx, "stride and dilation must be positive, padding non-negative");
  }
  if (mode == NK_CONV_IM2COL || mode == NK_CONV_COL2IM) {
    g.groups = 1;
    g.o = g.c;
    for (int d = 0; d < 3; d++) {
      const int src = d - (3 - nd);
      g.k[d] = src < 0 ? 1 : prm->kernel[src];
      if (g.k[d] < 1) return bad(ctx, "kernel sizes must be positive");
      const int64_t span = g.in[d] + 2 * g.p[d] - g.d[d] * (g.k[d] - 1) - 1;
      g.out[d] = span < 0 ? 0 : span / g.s[d] + 1;
    }
    g.kprod = g.k[0] * g.k[1] * g.k[2];
    g.lprod = g.out[0] * g.out[1] * g.out[2];
    if (yo->ndim != 3 || yo->sizes[0] != g.n || yo->sizes[1] != g.c * g.kprod ||
        yo->sizes[2] != g.lprod)
      return bad(ctx, "col operand must be (N, C * prod(kernel), L) with L the output positions");
  } else {
    if (yo->ndim != 2 + nd || wo->ndim != 2 + nd) return bad(ctx, "every operand must have 2 + nd dims");
    g.o = yo->sizes[1];
    if (g.groups < 1 || g.c % g.groups || g.o % g.groups)
      return bad(ctx, "groups must divide the input and output channels");
    if (yo->sizes[0] != g.n || wo->sizes[0] != g.o || wo->sizes[1] != g.c / g.groups)
      return bad(ctx, "weight must be (O, C / groups, K...) and the batch sizes equal");
    if (bo && (bo->ndim != 1 || bo->sizes[0] != g.o)) return bad(ctx, "bias must be (O)");
    for (int d = 0; d < 3; d++) {
      const int src = d - (3 - nd);
      g.out[d] = src < 0 ? 1 : yo->sizes[2 + src];
      g.k[d] = src < 0 ? 1 : wo->sizes[2 + src];
    }
    g.kprod = g.k[0] * g.k[1] * g.k[2];
    g.lprod = g.out[0] * g.out[1] * g.out[2];
  }
  g.iprod = g.in[0] * g.in[1] * g.in[2];
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  g.ck = g.cg * g.kprod;

  conv_job j;
  memset(&j, 0, sizeof j);
  j.g = &g;
  j.ct = ct;
  j.ces = ces;
  j.col_es = j.ys_es = ces;
  int rc = -1;

  /* -------- im2col / col2im (the ATen ops) */
  if (mode == NK_CONV_IM2COL) {
    /* raw copies in the operands' own dtype: no conversion at all */
    int64_t sz[5], st[5];
    padded(xo, nd, sz, st);
    j.ces = (int64_t)nk_dtype_size(t);
    j.x.data = xo->data;
    j.x.sa = st[0];
    j.x.sb = st[1];
    memcpy(j.x.sp, st + 2, sizeof j.x.sp);
    j.col_op = yo;
    const int64_t work = g.kprod * g.lprod;
    if (g.lprod) nk_parallel_for(g.n * g.c, work >= 32768 ? 1 : 32768 / (work ? work : 1), im2col_op_task, &j);
    return 0;
  }
  if (mode == NK_CONV_COL2IM) {
    if (view_make(ctx, xo, nd, ct, 1, 2, 1, 0, &j.x)) return -1;
    nrt_operand colop = *yo; /* (N, CK, L), read as (N, CK, 1, 1, L) */
    if (view_make(ctx, &colop, 1, ct, 1, 2, 0, 0, &j.colv)) {
      nk_tmp_free(j.x.owned);
      return -1;
    }
    if (!j.x.owned) zero_view(&j.x, ces);
    const int64_t work = g.kprod * g.lprod;
    nk_parallel_for(g.n * g.c, work >= 32768 ? 1 : 32768 / (work ? work : 1), col2im_op_task, &j);
    view_finish(xo, nd, ct, &j.x);
    nk_tmp_free(j.colv.owned);
    return 0;
  }

  /* -------- convolution */
  cview *xv = &j.x, *yv = &j.y, *wv = &j.w;
  /* 1x1, stride 1, no padding: x itself is the GEMM operand, no col.  Not
   * for the weight gradient, which stacks samples through the col buffer. */
  const int use_direct = mode != NK_CONV_BACKWARD_WEIGHT && g.kprod == 1 && g.s[0] == 1 &&
                         g.s[1] == 1 && g.s[2] == 1 && g.p[0] == 0 && g.p[1] == 0 && g.p[2] == 0;
  const int depthwise = g.cg == 1 && g.groups > 1;
  /* Operand type ot: what the GEMMs multiply (bfloat16 itself on the
   * dot-product kernel, else ct); results stay in ct until the single
   * rounding in view_finish.  By mode, the inputs are in ot and the
   * output in ct: forward x, w (ot) -> y (ct); input gradient dy, w ->
   * dx; weight gradient x, dy -> dw.  Depthwise kernels stay in ct. */
  const nrt_dtype ot = t == NRT_BFLOAT16 && nk_gemm_bf16_dot() && !depthwise &&
                       bf16_operands_pay(&g, mode, use_direct) ? NRT_BFLOAT16 : ct;
  const int64_t oes = (int64_t)nk_dtype_size(ot);
  const nrt_dtype xt_ = mode == NK_CONV_BACKWARD_INPUT ? ct : ot;
  const nrt_dtype yt_ = mode == NK_CONV_FORWARD ? ct : ot;
  const nrt_dtype wt_ = mode == NK_CONV_BACKWARD_WEIGHT ? ct : ot;
  /* col: a GEMM input (forward, weight gradient) or the input gradient's
   * GEMM output before col2im; ystack: y's type */
  j.col_es = mode == NK_CONV_BACKWARD_INPUT ? ces : oes;
  j.ys_es = (int64_t)nk_dtype_size(yt_);
  if (depthwise) {
    /* direct kernels: any strides, no flattening needed (weight flat per o) */
    if (view_make(ctx, xo, nd, ct, 0, 2, mode == NK_CONV_BACKWARD_INPUT, 0, xv)) return -1;
    if (view_make(ctx, yo, nd, ct, 0, 2, mode == NK_CONV_FORWARD, 0, yv)) goto out_x;
    if (view_make(ctx, wo, nd, ct, 1, 1, mode == NK_CONV_BACKWARD_WEIGHT, 0, wv)) goto out_y;
    if (bo && bias_view(ctx, bo, ct, &j.b)) goto out_w;
    if (mode == NK_CONV_BACKWARD_INPUT && !xv->owned) zero_view(xv, ces);
    dw_job dj = {&g, ct, mode, xv, wv, yv, bo ? &j.b : NULL};
    const int64_t units = mode == NK_CONV_FORWARD ? g.n * g.o
                          : mode == NK_CONV_BACKWARD_INPUT ? g.n * g.c : g.o;
    const int64_t work = (mode == NK_CONV_BACKWARD_WEIGHT ? g.n : 1) * g.lprod * g.kprod *
                         (mode == NK_CONV_BACKWARD_INPUT ? g.og : 1);
    const int64_t grain = work >= 32768 ? 1 : 32768 / (work ? work : 1);
    nk_parallel_for(units, grain, dw_task, &dj);
    rc = 0;
    goto out_all;
  }

  /* 16-bit x and y of a float32 product on the implicit path: its padded
   * copy widens the input and its scatter rounds the output (the gradient
   * side of the weight gradient is widened as it is gathered), so neither
   * gets a float32 working copy -- two more passes over each, on the
   * stream's worker alone (a bfloat16 16->16 3x3 forward at 16x16, batch
   * 32, took 1.45x the float32 one).  Returns here unless the implicit
   * path declines the shape (then the working copies below).  The same
   * for bfloat16 operands of the dot-product kernel (their input is read
   * as it is): the output's float32 working copy goes. */
  const int fold_in = t != ct && ot == ct && ct == NRT_FLOAT32;
  const int fold_out = t == NRT_BFLOAT16 && ot == t && mode != NK_CONV_BACKWARD_WEIGHT;
  if ((fold_in || fold_out) && !use_direct && implicit_pays(&g, mode)) {
    cview rx, ry, rw, rb;
    memset(&rb, 0, sizeof rb);
    int done = -1;
    /* dtype t itself: views of the operands, never copies */
    if (view_make(ctx, xo, nd, t, 0, 2, 0, 0, &rx) || view_make(ctx, yo, nd, t, 0, 2, 0, 0, &ry))
      return -1;
    if (view_make(ctx, wo, nd, ot, 1, 1, mode == NK_CONV_BACKWARD_WEIGHT, 0, &rw)) return -1;
    if (bo && bias_view(ctx, bo, ct, &rb)) goto out16;
    done = nk_conv_implicit(ctx, mode, &g, ct, ot, &rx, &rw, &ry, bo ? &rb : NULL);
  out16:
    if (done == 1) view_finish(wo, nd, ot, &rw); /* the weight gradient's rounding */
    else nk_tmp_free(rw.owned);
    nk_tmp_free(rb.owned);
    if (done) return done < 0 ? -1 : 0;
  }

  /* views: GEMM operands must flatten; the im2col source need not */
  if (mode == NK_CONV_FORWARD) {
    if (view_make(ctx, xo, nd, xt_, use_direct, 2, 0, 0, xv)) return -1;
    if (view_make(ctx, yo, nd, yt_, 1, 2, 1, 0, yv)) goto out_x;
  } else if (mode == NK_CONV_BACKWARD_INPUT) {
    if (view_make(ctx, xo, nd, xt_, 1, 2, 1, 0, xv)) return -1;
    if (view_make(ctx, yo, nd, yt_, 1, 2, 0, 0, yv)) goto out_x;
  } else {
    if (view_make(ctx, xo, nd, xt_, use_direct, 2, 0, 0, xv)) return -1;
    if (view_make(ctx, yo, nd, yt_, 1, 2, 0, 0, yv)) goto out_x;
  }
  if (view_make(ctx, wo, nd, wt_, 1, 1, mode == NK_CONV_BACKWARD_WEIGHT, 0, wv)) goto out_y;
  if (bo && bias_view(ctx, bo, ct, &j.b)) goto out_w;

  if (nk_conv_direct_applies(&g, mode, t)) {
    const int done = nk_conv_direct(ctx, mode, &g, xv, wv, yv, bo ? &j.b : NULL);
    if (done < 0) goto out_all;
    if (done) {
      rc = 0;
      goto out_all;
    }
  }
  if (!use_direct && implicit_pays(&g, mode)) {
    const int done = nk_conv_implicit(ctx, mode, &g, ct, ot, xv, wv, yv, bo ? &j.b : NULL);
    if (done < 0) goto out_all;
    if (done) {
      rc = 0;
      goto out_all;
    }
  }

  int64_t nb, lc;
  plan_chunks(&g, use_direct ? 0 : g.og * g.lprod, &nb, &lc);
  if (!use_direct && g.n && g.lprod) {
    j.col = nk_tmp_malloc((size_t)(nb * g.ck * lc * j.col_es + ces));
    j.ystack = nb > 1 ? nk_tmp_malloc((size_t)(nb * g.og * lc * j.ys_es + ces)) : NULL;
    if (!j.col || (nb > 1 && !j.ystack)) {
      nrt_exec_fail(ctx, "conv: out of host memory for a col buffer of %lld elements",
                    (long long)(nb * (g.ck + g.og) * lc));
      goto out_all;
    }
  }
  if (mode == NK_CONV_BACKWARD_WEIGHT) {
    j.acc = nk_tmp_calloc((size_t)(g.o * g.ck + 1), (size_t)ces);
    if (!j.acc) {
      nrt_exec_fail(ctx, "conv: out of host memory for the weight-gradient accumulator");
      goto out_all;
    }
  }
  if (mode == NK_CONV_FORWARD) {
    /* y <- bias (or nothing: beta 0), then y += w @ col */
    if (bo) nk_parallel_for(g.n * g.o, g.lprod >= 32768 ? 1 : 32768 / (g.lprod ? g.lprod : 1), bias_task, &j);
  }
  if (mode == NK_CONV_BACKWARD_INPUT && !use_direct && !xv->owned) zero_view(xv, ces);

  for (int64_t n0 = 0; n0 < g.n && g.lprod; n0 += nb) {
    const int64_t nbc = g.n - n0 < nb ? g.n - n0 : nb;
    for (int64_t l0 = 0; l0 < g.lprod; l0 += lc) {
      const int64_t lcc = g.lprod - l0 < lc ? g.lprod - l0 : lc;
      j.n0 = n0;
      j.nb = nbc;
      j.l0 = l0;
      j.lc = lcc;
      /* One (.., nbc * lcc) GEMM through ystack, or nbc per-sample products. */
      const int stacked = !use_direct && nbc > 1 && (mode == NK_CONV_BACKWARD_WEIGHT || lcc < 512);
      const int64_t cols = stacked ? nbc * lcc : lcc, batch = stacked ? 1 : nbc;
      for (int64_t grp = 0; grp < g.groups; grp++) {
        j.grp = grp;
        /* the input-side matrix (ck x cols per GEMM batch entry) */
        nrt_operand xm;
        if (use_direct)
          xm = mat3(xv->data + n0 * xv->sa + grp * g.cg * xv->sb + l0 * xv->sl, xt_, nbc, g.ck, lcc,
                    xv->sa, xv->sb, xv->sl);
        else
          xm = mat3(j.col, xt_, batch, g.ck, cols, lcc * j.col_es, nbc * lcc * j.col_es, j.col_es);
        const nrt_operand ym =
            stacked ? mat3(j.ystack, yt_, 1, g.og, cols, 0, cols * j.ys_es, j.ys_es)
                    : mat3(yv->data + n0 * yv->sa + grp * g.og * yv->sb + l0 * yv->sl, yt_, nbc,
                           g.og, lcc, yv->sa, yv->sb, yv->sl);
        const int64_t wstep = g.kprod > 1 ? wv->sl : wv->sb; /* stride along ck */
        const nrt_operand wm = mat3(wv->data + grp * g.og * wv->sa, wt_, batch, g.og, g.ck, 0, wv->sa, wstep);
        const int64_t stack_units = nbc * g.og, stack_grain = lcc >= 4096 ? 1 : 4096 / lcc;
        if (mode == NK_CONV_FORWARD) {
          if (!use_direct) nk_parallel_for(nbc * g.ck, 16, im2col_task, &j);
          if (run_gemm(ctx, ym, wm, xm, bo && !stacked ? 1.0 : 0.0)) goto out_all;
          if (stacked) {
            j.stack_dir = bo ? STACK_SCATTER_ADD : STACK_SCATTER;
            nk_parallel_for(stack_units, stack_grain, stack_task, &j);
          }
        } else if (mode == NK_CONV_BACKWARD_INPUT) {
          if (stacked) {
            j.stack_dir = STACK_GATHER;
            nk_parallel_for(stack_units, stack_grain, stack_task, &j);
          }
          const nrt_operand wt = mat3(wm.data, wt_, batch, g.ck, g.og, 0, wm.strides[2], wm.strides[1]);
          if (run_gemm(ctx, xm, wt, ym, 0.0)) goto out_all;
          if (!use_direct) nk_parallel_for(nbc * g.cg, 4, col2im_task, &j);
        } else {
          nk_parallel_for(nbc * g.ck, 16, im2col_task, &j);
          if (stacked) {
            j.stack_dir = STACK_GATHER;
            nk_parallel_for(stack_units, stack_grain, stack_task, &j);
          }
          /* acc[grp] += dy (og x cols) @ col^T (cols x ck), chunk after chunk */
          const nrt_operand xt = mat3(xm.data, xt_, 1, cols, g.ck, 0, xm.strides[2], xm.strides[1]);
          const nrt_operand am = mat3(j.acc + grp * g.og * g.ck * ces, ct, 1, g.og, g.ck, 0,
                                      g.ck * ces, ces);
          if (run_gemm(ctx, am, ym, xt, 1.0)) goto out_all;
        }
      }
    }
  }
  if (mode == NK_CONV_BACKWARD_WEIGHT) {
    /* dw <- acc (o x ck, contiguous): whole rows where dw's (C/g, K...)
     * are one run (a contiguous weight, every working copy), else element
     * by element (ResNet-50's 512-channel 3x3: 2.4M elements, 4/5 of the
     * weight gradient's time element by element) */
    const int rows = wv->sl == ces && (g.kprod == 1 ? wv->sb == ces : wv->sb == g.kprod * ces);
    for (int64_t o = 0; o < g.o; o++) {
      if (rows) {
        memcpy(wv->data + o * wv->sa, j.acc + o * g.ck * ces, (size_t)(g.ck * ces));
        continue;
      }
      for (int64_t r = 0; r < g.ck; r++) {
        char *dst = wv->data + o * wv->sa + (r / g.kprod) * wv->sb + (r % g.kprod) * wv->sl;
        memcpy(dst, j.acc + (o * g.ck + r) * ces, (size_t)ces);
      }
    }
  }
  rc = 0;
out_all:
  nk_tmp_free(j.col);
  nk_tmp_free(j.acc);
  nk_tmp_free(j.ystack);
  nk_tmp_free(j.b.owned);
out_w:
  if (rc == 0) view_finish(wo, nd, wt_, wv);
  else nk_tmp_free(wv->owned);
out_y:
  if (rc == 0) view_finish(yo, nd, yt_, yv);
  else nk_tmp_free(yv->owned);
out_x:
  if (rc == 0) view_finish(xo, nd, xt_, xv);
  else nk_tmp_free(xv->owned);
  return rc;
}
