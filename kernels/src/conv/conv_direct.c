/* conv_direct.c — 3x3 float32 convolutions of few channels (stride 1 or
 * 2, padding 1, no dilation, one group), computed straight from the operands.
 *
 * Why: the implicit path (conv_implicit.c) copies the input into a padded
 * grid, runs the GEMM over the grid's columns (12% of them garbage at
 * 16x16, 21% at 8x8) and scatters the result into y; at 16 or 32 channels
 * each input element feeds only that many multiply-adds, so the two copies
 * and the garbage are a third of the work.  The CNN example's layers (16
 * and 32 channels, 16x16 and 8x8) ran at 0.6-0.9x oneDNN's there.
 * How: conv_direct.h.  Output positions are vectorised along the flat
 * plane; each tap is one unaligned load of the input shifted by the tap,
 * the image border and the plane's end masked per (position vector, tap)
 * from one table.  Nothing is copied but the weight (packed for
 * broadcasting, KiBs) and nothing is computed that is not a product of the
 * convolution (the masked lanes multiply zeros, as the padding's zeros do
 * in the GEMM paths).
 *  - forward: tiles of output channels x position vectors (the register
 *    tile of conv_direct_impl.h), summing over taps and input channels.
 *  - stride 2 (per dim): the input is split once into its phase planes on
 *    the output grid (phase_task), and each tap reads one of them shifted
 *    by -1 or 0: the stride-1 form with per-tap planes, shifts and masks
 *    (the CNN example's 16->32 3x3/2 forward: 0.33 -> 0.20 ms, batch 32).
 *  - input gradient: with stride 1 and padding 1 it is the forward
 *    convolution of dy with the weight transposed and flipped (the same
 *    tiles; only the packing differs).  A strided one is a transposed
 *    convolution: left to the GEMM paths.
 *  - weight gradient: dot products along the positions of every sample,
 *    a tile of output channels x (input channel, tap) rows.
 * Taken for <= NK_CD_MAX_CHANNELS channels each side and planes of <=
 * NK_CD_MAX_PLANE positions, on AVX2 and AVX-512 (conv.c asks first;
 * TORCHNEURON_CONV_DIRECT=0 / 1 turns it off / on wherever the shape
 * allows, for tuning and tests of both paths). */
#include <stdlib.h>
#include <string.h>

#include "common/nd_iter.h"
#include "common/tmp_buffers.h"
#include "conv/conv.h"
#include "conv/conv_direct.h"

#define NK_CD_MAX_CHANNELS 32
#define NK_CD_MAX_PLANE 4096

/* One ISA's bodies and tile. */
typedef struct cd_isa {
  void (*forward)(const nk_cd_job *, int64_t, int64_t);
  void (*weight)(const nk_cd_job *, int64_t, int64_t);
  void (*masks)(const uint32_t *, int64_t, void *);
  int64_t vl, mask_bytes, fwd_mr, fwd_nr, dw_mr, dw_nr;
} cd_isa;

static const cd_isa *pick_isa(void) {
  static const cd_isa avx512 = {nk_cd_forward_avx512_f32, nk_cd_weight_avx512_f32,
                                nk_cd_masks_avx512_f32, NK_CD_AVX512_VL, NK_CD_AVX512_MASK_BYTES,
                                NK_CD_AVX512_FWD_MR, NK_CD_AVX512_FWD_NR, NK_CD_AVX512_DW_MR,
                                NK_CD_AVX512_DW_NR};
  static const cd_isa avx2 = {nk_cd_forward_avx2_f32, nk_cd_weight_avx2_f32, nk_cd_masks_avx2_f32,
                              NK_CD_AVX2_VL, NK_CD_AVX2_MASK_BYTES, NK_CD_AVX2_FWD_MR,
                              NK_CD_AVX2_FWD_NR, NK_CD_AVX2_DW_MR, NK_CD_AVX2_DW_NR};
  switch (nk_cpu_isa()) {
  case NK_ISA_AVX512: return &avx512;
  case NK_ISA_AVX2: return &avx2;
  default: return NULL;
  }
}

/* The plane of a view is contiguous: (1, H, W) positions one float apart. */
static int plane_contiguous(const cview *v) {
  return v->t == NRT_FLOAT32 && v->sp[2] == 4 && (v->size[3] == 1 || v->sp[1] == 4 * v->size[4]) &&
         v->sa % 4 == 0 && v->sb % 4 == 0;
}

int nk_conv_direct_applies(const conv_geom *g, int mode, nrt_dtype t) {
  const char *env = getenv("TORCHNEURON_CONV_DIRECT");
  if (env && *env == '0') return 0;
  if (t != NRT_FLOAT32 || !pick_isa() || g->groups != 1) return 0;
  if (g->in[0] != 1 || g->k[0] != 1 || g->k[1] != 3 || g->k[2] != 3) return 0;
  if (g->s[0] != 1 || g->p[0] != 0) return 0;
  for (int d = 1; d < 3; d++)
    if (g->s[d] < 1 || g->s[d] > 2 || g->d[d] != 1 || g->p[d] != 1) return 0;
  /* a strided input gradient is a transposed convolution: not this form */
  if (mode == NK_CONV_BACKWARD_INPUT && (g->s[1] > 1 || g->s[2] > 1)) return 0;
  if (g->lprod > NK_CD_MAX_PLANE || g->lprod < 1) return 0;
  if (env && *env) return 1;
  return g->c <= NK_CD_MAX_CHANNELS && g->o <= NK_CD_MAX_CHANNELS;
}

/* Lane bits of each (position vector, tap) of the output plane (h x w)
 * and the store mask: tap t reads the input plane it names at the output
 * position shifted by (sh[t], sw[t]). */
static void mask_bits(int64_t h, int64_t w, const int sh[9], const int sw[9], int64_t vl,
                      int64_t nvec, uint32_t *bits) {
  for (int64_t v = 0; v < nvec; v++)
    for (int t = 0; t < NK_CD_TAPS; t++) {
      uint32_t m = 0;
      for (int64_t l = 0; l < vl; l++) {
        const int64_t q = v * vl + l;
        if (q >= h * w) continue;
        const int64_t hh = q / w + (t < 9 ? sh[t] : 0), ww = q % w + (t < 9 ? sw[t] : 0);
        if (hh >= 0 && hh < h && ww >= 0 && ww < w) m |= 1u << l;
      }
      bits[v * NK_CD_TAPS + t] = m;
    }
}

/* Stride 2 (per dim): tap d of a dim reads input s o + d - 1, i.e. phase
 * (d - 1) mod s of that dim at o + (d - 1) div s.  The input is split once
 * into its phase planes, each on the output grid (ho x wo; an element past
 * the input is the padding's zero), so every tap reads one phase plane
 * shifted by -1 or 0: the stride-1 form, with per-tap planes and shifts.
 * xs: [n][c][phase][ho][wo], phase = ph * s_w + pw. */
typedef struct phase_job {
  const char *x;
  int64_t sa, sb, srow; /* bytes: sample, channel, input row */
  int64_t hi, wi, ho, wo, sh, sw, c;
  float *xs;
} phase_job;

static void phase_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const phase_job *p = arg;
  const int64_t plane = p->ho * p->wo;
  for (int64_t u = begin; u < end; u++) {
    const char *src = p->x + u / p->c * p->sa + u % p->c * p->sb;
    float *dst = p->xs + u * p->sh * p->sw * plane;
    for (int64_t ph = 0; ph < p->sh; ph++)
      for (int64_t pw = 0; pw < p->sw; pw++, dst += plane)
        for (int64_t i = 0; i < p->ho; i++) {
          const int64_t r = p->sh * i + ph;
          const float *row = (const float *)(const void *)(src + r * p->srow);
          float *out = dst + i * p->wo;
          for (int64_t k = 0; k < p->wo; k++) {
            const int64_t col = p->sw * k + pw;
            out[k] = r < p->hi && col < p->wi ? row[col] : 0.0f;
          }
        }
  }
}

/* wp[ob][t][c][i] = weight of output channel ob * mr + i, input channel c,
 * tap t; the input gradient's "output" channels are the weight's input
 * channels, its taps flipped. */
static void pack_weight(const cview *w, int transpose, int64_t cin, int64_t cout, int64_t mr,
                        float *wp) {
  const int64_t oblocks = (cout + mr - 1) / mr;
  for (int64_t ob = 0; ob < oblocks; ob++)
    for (int t = 0; t < 9; t++)
      for (int64_t c = 0; c < cin; c++)
        for (int64_t i = 0; i < mr; i++) {
          const int64_t o = ob * mr + i;
          float v = 0.0f;
          if (o < cout) {
            const char *p = transpose ? w->data + c * w->sa + o * w->sb + (8 - t) * w->sl
                                      : w->data + o * w->sa + c * w->sb + t * w->sl;
            memcpy(&v, p, sizeof v);
          }
          wp[((ob * 9 + t) * cin + c) * mr + i] = v;
        }
}

/* A job and the ISA body that runs its units. */
typedef struct cd_run {
  nk_cd_job j;
  void (*body)(const nk_cd_job *, int64_t, int64_t);
} cd_run;

static void run_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const cd_run *r = arg;
  r->body(&r->j, begin, end);
}

/* Units per chunk for about 64K multiply-adds a chunk. */
static int64_t grain_for(int64_t fma_per_unit) {
  return fma_per_unit >= 65536 ? 1 : 65536 / (fma_per_unit ? fma_per_unit : 1);
}

int nk_conv_direct(nrt_exec_ctx *ctx, int mode, const conv_geom *g, const cview *x, const cview *w,
                   const cview *y, const cview *b) {
  const cd_isa *isa = pick_isa();
  /* the weight's (c, t) read as one index r = 9 c + t (dw_sr) */
  if (!isa || !plane_contiguous(x) || !plane_contiguous(y) || w->t != NRT_FLOAT32 ||
      w->sb != 9 * w->sl || w->sa % 4 || w->sl % 4 || (b && (b->t != NRT_FLOAT32 || b->sa % 4)))
    return 0;
  /* the output plane; at stride 1 the input's too */
  const int64_t ho = g->out[1], wo = g->out[2], hw = ho * wo, vl = isa->vl;
  const int64_t sh = g->s[1], sw = g->s[2], phases = sh * sw;
  cd_run run;
  memset(&run, 0, sizeof run);
  nk_cd_job *j = &run.j;
  j->nvec = (hw + vl - 1) / vl;
  j->n = g->n;
  /* tap t = (dh, dw): phase plane (dh - 1) mod s per dim, shifted by
   * (dh - 1) div s (rounding down) */
  int shift_h[9], shift_w[9];
  for (int t = 0; t < 9; t++) {
    const int64_t ph = ((t / 3 - 1) % sh + sh) % sh, pw = ((t % 3 - 1) % sw + sw) % sw;
    shift_h[t] = (int)((t / 3 - 1 - ph) / sh);
    shift_w[t] = (int)((t % 3 - 1 - pw) / sw);
    j->off[t] = (ph * sw + pw) * hw + shift_h[t] * wo + shift_w[t];
  }
  uint32_t *bits = nk_tmp_malloc((size_t)(j->nvec * NK_CD_TAPS) * sizeof *bits);
  void *masks = nk_tmp_malloc((size_t)(j->nvec * NK_CD_TAPS * isa->mask_bytes));
  float *buf = NULL, *xs = NULL;
  int rc = -1;
  if (!bits || !masks) goto oom;
  mask_bits(ho, wo, shift_h, shift_w, vl, j->nvec, bits);
  isa->masks(bits, j->nvec * NK_CD_TAPS, masks);
  j->masks = masks;
  /* the input side of the forward and weight gradient: x itself, or its
   * phase planes */
  const float *xin = (const float *)(const void *)x->data;
  int64_t x_sn = x->sa / 4, x_sc = x->sb / 4;
  if (phases > 1) {
    xs = nk_tmp_malloc((size_t)(g->n * g->c * phases * hw + 1) * sizeof *xs);
    if (!xs) goto oom;
    phase_job pj = {x->data, x->sa, x->sb, x->sp[1], g->in[1], g->in[2], ho, wo, sh, sw, g->c, xs};
    nk_parallel_for(g->n * g->c, grain_for(phases * hw), phase_task, &pj);
    xin = xs;
    x_sc = phases * hw;
    x_sn = g->c * x_sc;
  }

  if (mode == NK_CONV_BACKWARD_WEIGHT) {
    /* dw (o, c, t) from x and dy; rows past cout or ck read zeros */
    buf = nk_tmp_calloc((size_t)(j->nvec * vl), sizeof *buf);
    if (!buf) goto oom;
    j->zeros = buf;
    j->in = xin;
    j->in_sn = x_sn;
    j->in_sc = x_sc;
    j->dy = (const float *)(const void *)y->data;
    j->dy_sn = y->sa / 4;
    j->dy_so = y->sb / 4;
    j->dw = (float *)(void *)w->data;
    j->dw_so = w->sa / 4;
    j->dw_sr = w->sl / 4;
    j->cin = g->c;
    j->cout = g->o;
    const int64_t units = (g->o + isa->dw_mr - 1) / isa->dw_mr * ((g->c * 9 + isa->dw_nr - 1) / isa->dw_nr);
    run.body = isa->weight;
    nk_parallel_for(units, grain_for(g->n * j->nvec * vl * isa->dw_mr * isa->dw_nr), run_task, &run);
    rc = 1;
    goto done;
  }
  /* forward: in = x, out = y; input gradient: in = dy (y), out = dx (x) */
  const int bwd = mode == NK_CONV_BACKWARD_INPUT;
  const cview *in = bwd ? y : x, *out = bwd ? x : y;
  j->cin = bwd ? g->o : g->c;
  j->cout = bwd ? g->c : g->o;
  j->oblocks = (j->cout + isa->fwd_mr - 1) / isa->fwd_mr;
  j->pblocks = (j->nvec + isa->fwd_nr - 1) / isa->fwd_nr;
  buf = nk_tmp_malloc((size_t)(j->oblocks * isa->fwd_mr * 9 * j->cin + (b ? j->cout : 0)) * sizeof *buf);
  if (!buf) goto oom;
  pack_weight(w, bwd, j->cin, j->cout, isa->fwd_mr, buf);
  j->wp = buf;
  if (b) {
    float *bias = buf + j->oblocks * isa->fwd_mr * 9 * j->cin;
    for (int64_t o = 0; o < j->cout; o++) memcpy(bias + o, b->data + o * b->sa, sizeof *bias);
    j->bias = bias;
  }
  j->in = bwd ? (const float *)(const void *)in->data : xin;
  j->in_sn = bwd ? in->sa / 4 : x_sn;
  j->in_sc = bwd ? in->sb / 4 : x_sc;
  j->out = (float *)(void *)out->data;
  j->out_sn = out->sa / 4;
  j->out_so = out->sb / 4;
  run.body = isa->forward;
  nk_parallel_for(g->n * j->oblocks * j->pblocks,
                  grain_for(9 * j->cin * isa->fwd_mr * isa->fwd_nr * vl), run_task, &run);
  rc = 1;
  goto done;
oom:
  nrt_exec_fail(ctx, "conv: out of host memory for the direct convolution's tables");
done:
  nk_tmp_free(bits);
  nk_tmp_free(masks);
  nk_tmp_free(buf);
  nk_tmp_free(xs);
  return rc;
}
