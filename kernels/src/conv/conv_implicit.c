/* conv_implicit.c — stride-1 convolution as implicit GEMMs: no col matrix.
 *
 * Why: conv.c's im2col writes a col matrix kprod times the input's size and
 * the GEMM packs it back.  With few output channels (16 or 32, the small
 * ResNet's layers) each col element feeds only that many multiply-adds and
 * the copy costs more than the products: 0.15-0.35x ATen's CPU forward.
 *
 * How: the input of a chunk of samples is copied once into a zero-padded
 * buffer xp, one region per channel holding the samples one after another
 * on a grid of period P = in + p per dim (the input at i + p): a sample's
 * bottom padding is the next one's top padding, a row's right padding the
 * next row's left padding, since both are zeros.  Output positions are
 * numbered over that same grid, q = ((b * P0 + o0) * P1 + o1) * P2 + o2.
 * With stride 1, the col matrix's row (c, tap) is then xp[c] shifted by the
 * tap: col[(c, t)][q] = xp[c][q + off(t)], off(t) = (t0 d0 P1 + t1 d1) P2
 * + t2 d2 (a read past a row's end lands in the next row's left padding,
 * which is what the padded input holds there).  The GEMM reads that
 * through a table of row offsets (nk_gemm_operands_indirect), unpacked.
 * Positions past a row's (or plane's) last valid output are garbage and
 * dropped: the price is 1 - out / P of the columns (12% at 16x16 with
 * padding 1, 4% at 56x56); conv.c sends a convolution here where that
 * costs less than the col matrix (implicit_pays).  The grid needs out <=
 * P, i.e. padding at most the kernel's extent (k - 1) d; larger paddings
 * stay with im2col.
 *  - forward: ys (Og, Q) = w_g (Og, CK) @ col, then y <- ys (+ bias).
 *  - weight gradient: acc (Og, CK) += dys (Og, Q) @ col^T, where dys holds
 *    dy at valid positions and exact zeros elsewhere, so garbage columns add
 *    nothing -- unless the input holds inf or NaN (0 * inf is NaN), so such
 *    inputs are left to im2col (the padded copy checks for them).
 *  - input gradient: with stride 1 it is the forward convolution of dy,
 *    padded by (K - 1) d - p, with the weight flipped and transposed,
 *    dx[c] = sum_o w[o, c, K - 1 - t] * dy_pad[o][. + t d], so it runs the
 *    forward routine on that problem (padding p > (K - 1) d is left to
 *    im2col).
 * Every product sums in the GEMM's fixed k-block order: results depend on
 * the shapes only, never on the thread count. */
#include <stdlib.h>
#include <string.h>

#include "conv/conv.h"
#include "common/dtype_convert.h"
#include "common/half_rows.h"
#include "gemm/gemm.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "common/tmp_buffers.h"

/* The largest stride taken here (pad_phases keeps a table per phase). */
#define NK_IMPLICIT_MAX_STRIDE 8

/* Elements of padded input plus output buffer per chunk (16 MiB float32). */
#define NK_IMPLICIT_CAP ((int64_t)1 << 22)

/* Strides above 1 (the phases).  Output o of a stride-s convolution reads
 * the padded input at s o + t d: phase r = t d mod s of that dim at o + t d
 * div s, where phase r holds every s-th padded element from r.  So each
 * channel's region of xp holds the phases one after another (phase-major
 * over the chunk), each a grid of period pd = ceil((in + 2p) / s) per dim
 * with the samples one after another, and col row (c, tap) is xp shifted
 * by the tap's phase and shift: the same implicit product, with pd - out
 * garbage columns per dim (16x16 inputs, 3x3 taps, stride 2: 8 of 9).
 * Since o + t d div s < pd, a read never leaves its row, so each phase
 * row is stored whole, padding included (no sharing between rows). */

/* One implicit product: an input (cin channels) padded by p, taps k with
 * dilation d and stride s, output (cout channels) of size out = (in + 2p -
 * (k - 1) d - 1) / s + 1. */
typedef struct igeom {
  int64_t in[3], out[3], k[3], d[3], p[3], s[3];
  int64_t pd[3];   /* the grid's period: in + p at stride 1, else ceil((in + 2p) / s) */
  int64_t cin, cout, kprod, ck;
  int64_t plane;   /* pd[0] * pd[1] * pd[2]: one sample's share of the grid */
  int64_t phases;  /* s[0] * s[1] * s[2] */
  int64_t nb;      /* samples per chunk */
} igeom;

/* Columns of a chunk of nb samples: up to its last valid output. */
static int64_t chunk_columns(const igeom *ig, int64_t nb) {
  return ((nb - 1) * ig->pd[0] + ig->out[0] - 1) * ig->pd[1] * ig->pd[2] +
         (ig->out[1] - 1) * ig->pd[2] + ig->out[2];
}

/* Elements of a channel's region of xp for nb samples: the last column's
 * farthest tap, and at least the samples themselves (strided: every
 * phase's grid of the nb samples). */
static int64_t channel_region(const igeom *ig, int64_t nb) {
  if (ig->phases > 1) return ig->phases * nb * ig->plane;
  const int64_t far = chunk_columns(ig, nb) +
                      ((ig->k[0] - 1) * ig->d[0] * ig->pd[1] + (ig->k[1] - 1) * ig->d[1]) * ig->pd[2] +
                      (ig->k[2] - 1) * ig->d[2];
  return far > nb * ig->plane ? far : nb * ig->plane;
}

static int igeom_make(igeom *ig, const int64_t in[3], const int64_t k[3], const int64_t d[3],
                      const int64_t p[3], const int64_t st[3], int64_t cin, int64_t cout, int64_t n) {
  memset(ig, 0, sizeof *ig);
  ig->plane = 1;
  ig->phases = st[0] * st[1] * st[2];
  for (int i = 0; i < 3; i++) {
    if (st[i] > NK_IMPLICIT_MAX_STRIDE) return 0; /* im2col (pad_phases' tables) */
    const int64_t len = in[i] + 2 * p[i], reach = (k[i] - 1) * d[i];
    ig->in[i] = in[i];
    ig->k[i] = k[i];
    ig->d[i] = d[i];
    ig->p[i] = p[i];
    ig->s[i] = st[i];
    /* stride 1: rows share their padding (period in + p); strided: each
     * phase row whole */
    ig->pd[i] = ig->phases > 1 ? (len + st[i] - 1) / st[i] : in[i] + p[i];
    ig->out[i] = len <= reach ? 0 : (len - reach - 1) / st[i] + 1;
    if (ig->out[i] < 1 || ig->out[i] > ig->pd[i]) return 0;
    ig->plane *= ig->pd[i];
  }
  ig->cin = cin;
  ig->cout = cout;
  ig->kprod = k[0] * k[1] * k[2];
  ig->ck = cin * ig->kprod;
  const int64_t per = (cin * ig->phases + cout) * ig->plane;
  ig->nb = NK_IMPLICIT_CAP / (per ? per : 1);
  if (ig->nb < 1) ig->nb = 1;
  if (ig->nb > n) ig->nb = n;
  return 1;
}

/* Byte offsets of the col matrix's rows (c, t) in xp: tap t's phase and
 * shift per dim (phase 0 and shift t d at stride 1). */
static void tap_offsets(const igeom *ig, int64_t nb, int64_t ces, int64_t *off) {
  const int64_t cplane = channel_region(ig, nb);
  int64_t r = 0;
  for (int64_t c = 0; c < ig->cin; c++)
    for (int64_t t0 = 0; t0 < ig->k[0]; t0++)
      for (int64_t t1 = 0; t1 < ig->k[1]; t1++)
        for (int64_t t2 = 0; t2 < ig->k[2]; t2++, r++) {
          const int64_t a0 = t0 * ig->d[0], a1 = t1 * ig->d[1], a2 = t2 * ig->d[2];
          const int64_t phase = ((a0 % ig->s[0]) * ig->s[1] + a1 % ig->s[1]) * ig->s[2] + a2 % ig->s[2];
          off[r] = (c * cplane + phase * nb * ig->plane +
                    ((a0 / ig->s[0]) * ig->pd[1] + a1 / ig->s[1]) * ig->pd[2] + a2 / ig->s[2]) * ces;
        }
}

/* A source or destination: sample n, channel c, spatial (i0, i1, i2) at
 * data + n * sa + c * sb + i0 * sp[0] + i1 * sp[1] + i2 * sp[2]. */
typedef struct side {
  char *data;
  nrt_dtype t; /* xp's / ys's type, or a 16-bit dtype they widen from and round to */
  int64_t sa, sb, sp[3];
} side;

typedef struct ijob {
  const igeom *ig;
  nrt_dtype xt;        /* xp's (and src's) type: the operand type */
  int64_t xes;         /* its size */
  int64_t ces, n0, nb, q, region; /* ces: ys's (and dst's) element size; region: channel_region(nb) */
  side src;            /* padded into xp */
  char *xp;
  int nonfinite;       /* set (racy, monotone) when xp got inf or NaN */
  side dst;            /* ys scattered to / dy gathered from */
  char *ys;            /* (cout, q): output rows */
  const char *bias;    /* per output channel, bias_stride apart, or NULL */
  int64_t bias_stride;
  int check_finite;
  nrt_dtype yst;       /* ys's type (dst's, unless dst is 16-bit and ys float32) */
} ijob;

/* 1 when one of n elements at p (es bytes apart) is inf or NaN (x * 0 is
 * not 0): its exponent bits are all ones.  An integer test, OR-ed over the
 * run, which vectorises; the float form (z += x * 0) was a serial chain of
 * adds, 4 cycles an element, and most of the weight gradient's padded copy
 * (8% of the CNN example's training step on Zen 4). */
#define NONFINITE_RUN(U, MASK)                                                                 \
  do {                                                                                       \
    U any = 0;                                                                               \
    if (es == (int64_t)sizeof(U)) {                                                          \
      const U *v = (const U *)(const void *)p;                                               \
      for (int64_t i = 0; i < n; i++) any |= (U)((v[i] & (MASK)) == (MASK));                 \
    } else {                                                                                 \
      for (int64_t i = 0; i < n; i++) {                                                      \
        U v;                                                                                 \
        memcpy(&v, p + i * es, sizeof v);                                                    \
        any |= (U)((v & (MASK)) == (MASK));                                                  \
      }                                                                                      \
    }                                                                                        \
    return any != 0;                                                                         \
  } while (0)

static int nonfinite_run(nrt_dtype t, const char *p, int64_t n, int64_t es) {
  if (t == NRT_FLOAT64) NONFINITE_RUN(uint64_t, UINT64_C(0x7FF0000000000000));
  if (t == NRT_BFLOAT16) NONFINITE_RUN(uint16_t, (uint16_t)0x7F80);
  NONFINITE_RUN(uint32_t, UINT32_C(0x7F800000));
}
#undef NONFINITE_RUN

/* Copies a run of bytes (a multiple of 2).  Rows of small convolutions
 * are short (32 bytes at 8x8 outputs) and memcpy of a run-time size is a
 * call and a size dispatch per row: at 32->32 channels 3x3 on 8x8, batch
 * 32, those calls took 17% of the forward. */
static inline void copy_run(char *restrict d, const char *restrict s, size_t bytes) {
  if (bytes > 256) {
    memcpy(d, s, bytes);
    return;
  }
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) __builtin_memcpy(d + i, s + i, 32);
  if (i + 16 <= bytes) __builtin_memcpy(d + i, s + i, 16), i += 16;
  if (i + 8 <= bytes) __builtin_memcpy(d + i, s + i, 8), i += 8;
  if (i + 4 <= bytes) __builtin_memcpy(d + i, s + i, 4), i += 4;
  if (i + 2 <= bytes) __builtin_memcpy(d + i, s + i, 2);
}

/* Zeroes a run of bytes (a multiple of 2), for the same reason. */
static inline void zero_run(char *d, size_t bytes) {
  if (bytes > 256) {
    memset(d, 0, bytes);
    return;
  }
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) __builtin_memset(d + i, 0, 32);
  if (i + 16 <= bytes) __builtin_memset(d + i, 0, 16), i += 16;
  if (i + 8 <= bytes) __builtin_memset(d + i, 0, 8), i += 8;
  if (i + 4 <= bytes) __builtin_memset(d + i, 0, 4), i += 4;
  if (i + 2 <= bytes) __builtin_memset(d + i, 0, 2);
}

/* A 16-bit row of n elements at s (byte stride ss) widened into the float32
 * row d.  Rows are short (16 elements at 16x16), so bfloat16 runs take an
 * inline loop (a shift, vectorised) rather than a call of the row
 * conversions per row, which cost more than the copies they replaced. */
static void widen_run(nrt_dtype t, float *restrict d, const char *restrict s, int64_t ss, int64_t n) {
  if (t == NRT_BFLOAT16 && ss == 2) {
    const uint16_t *v = (const uint16_t *)(const void *)s;
    uint32_t *o = (uint32_t *)(void *)d;
    for (int64_t i = 0; i < n; i++) o[i] = (uint32_t)v[i] << 16;
    return;
  }
  const float *v = nk_half_in(t, s, ss, n, d);
  if (v != d) memcpy(d, v, (size_t)n * sizeof *d);
}

/* A row of n float32 values (+ bv when bias) rounded into a 16-bit row at
 * dst (byte stride ds): the rounding of half_rows.h (c10's: to nearest
 * even, bfloat16 NaN as 0x7FC0), bfloat16 runs inline and branch-free. */
static void round_run(nrt_dtype t, char *restrict dst, int64_t ds, const float *restrict g, int64_t n,
                      int bias, float bv) {
  if (t == NRT_BFLOAT16 && ds == 2) {
    uint16_t *o = (uint16_t *)(void *)dst;
    for (int64_t i = 0; i < n; i++) {
      const float f = bias ? g[i] + bv : g[i];
      uint32_t u;
      memcpy(&u, &f, 4);
      const uint16_t r = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
      o[i] = (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)0x7FC0 : r;
    }
    return;
  }
  if (!bias) {
    nk_half_out(t, dst, ds, n, g);
    return;
  }
  float buf[256];
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    const int64_t m = n - i0 < 256 ? n - i0 : 256;
    for (int64_t i = 0; i < m; i++) buf[i] = g[i0 + i] + bv;
    nk_half_out(t, dst + i0 * ds, ds, m, buf);
  }
}

/* Strided: sample n0 + b's share of every phase of channel c's region <-
 * the padded sample's every s-th element (zeros around it); 1 when the
 * weight gradient's check found an inf or NaN. */
static int pad_phases(const ijob *j, int64_t c, int64_t b) {
  const igeom *ig = j->ig;
  const int64_t es = j->xes, span = j->nb * ig->plane;
  for (int64_t ph = 0; ph < ig->phases; ph++)
    memset(j->xp + (c * j->region + ph * span + b * ig->plane) * es, 0, (size_t)(ig->plane * es));
  const char *src = j->src.data + (j->n0 + b) * j->src.sa + c * j->src.sb;
  const int64_t n = ig->in[2], ss = j->src.sp[2], s2 = ig->s[2];
  char *base = j->xp + (c * j->region + b * ig->plane) * es;
  int bad = 0;
  /* dim 2's phases: where each begins in the row (i2) and in its phase
   * row; dims 0 and 1 step their phase r and place q with the index.  A
   * division per element, and then per row, had cost more than the
   * product (16->32 channels 3x3/2 at 16x16, batch 32: 0.38 -> 0.28 ms) */
  int64_t first[NK_IMPLICIT_MAX_STRIDE], at[NK_IMPLICIT_MAX_STRIDE];
  for (int64_t r2 = 0; r2 < s2; r2++) {
    first[r2] = ((r2 - ig->p[2]) % s2 + s2) % s2;
    at[r2] = (first[r2] + ig->p[2]) / s2;
  }
  const int deinterleave = s2 == 2 && j->xt == NRT_FLOAT32 &&
                           ((j->src.t == NRT_FLOAT32 && ss == 4) || (j->src.t == NRT_BFLOAT16 && ss == 2));
  int64_t r0 = ig->p[0] % ig->s[0], q0 = ig->p[0] / ig->s[0];
  for (int64_t i0 = 0; i0 < ig->in[0]; i0++) {
    int64_t r1 = ig->p[1] % ig->s[1], q1 = ig->p[1] / ig->s[1];
    for (int64_t i1 = 0; i1 < ig->in[1]; i1++) {
      const char *row = src + i0 * j->src.sp[0] + i1 * j->src.sp[1];
      char *drow = base + ((r0 * ig->s[1] + r1) * s2 * span + (q0 * ig->pd[1] + q1) * ig->pd[2]) * es;
      if (deinterleave) {
        /* stride 2 into float32: the row's even and odd elements to their
         * two phases in one pass (a vectorised de-interleave; two strided
         * gathers of 8 elements per row were a quarter of a 16->32 3x3/2
         * forward at 16x16) */
        const int e = first[0] == 0 ? 0 : 1; /* the phase of the even i2 */
        float *de = (float *)(void *)(drow + (e * span + at[e]) * es);
        float *dd = (float *)(void *)(drow + ((1 - e) * span + at[1 - e]) * es);
        const int64_t h = n / 2;
        if (ss == 4) {
          const float *v = (const float *)(const void *)row;
          for (int64_t q = 0; q < h; q++) de[q] = v[2 * q], dd[q] = v[2 * q + 1];
          if (n & 1) de[h] = v[n - 1];
        } else {
          const uint16_t *v = (const uint16_t *)(const void *)row;
          uint32_t *ue = (uint32_t *)(void *)de, *ud = (uint32_t *)(void *)dd;
          for (int64_t q = 0; q < h; q++) ue[q] = (uint32_t)v[2 * q] << 16, ud[q] = (uint32_t)v[2 * q + 1] << 16;
          if (n & 1) ue[h] = (uint32_t)v[n - 1] << 16;
        }
      } else for (int64_t r2 = 0; r2 < s2; r2++) {
        /* phase r2 holds padded elements r2, r2 + s2, ...: the row's i2 =
         * first, first + s2, ...; typed copies (memcpy of a run-time size
         * was a call per element), a gather gcc vectorises at unit stride */
        char *d = drow + (r2 * span + at[r2]) * es;
        const int64_t f = first[r2];
        if (j->src.t == NRT_BFLOAT16 && j->xt == NRT_FLOAT32) { /* widened: float32 xp */
          uint32_t *o = (uint32_t *)(void *)d;
          for (int64_t i2 = f, q = 0; i2 < n; i2 += s2, q++) o[q] = (uint32_t)nk_read_u16(row + i2 * ss) << 16;
        } else if (j->src.t != j->xt) { /* float16 */
          float *o = (float *)(void *)d;
          for (int64_t i2 = f, q = 0; i2 < n; i2 += s2, q++) o[q] = nk_load_f32(j->src.t, row + i2 * ss);
        } else if (es == 4 && ss == 4) {
          const float *v = (const float *)(const void *)row;
          float *o = (float *)(void *)d;
          for (int64_t i2 = f, q = 0; i2 < n; i2 += s2, q++) o[q] = v[i2];
        } else if (es == 4) {
          float *o = (float *)(void *)d;
          for (int64_t i2 = f, q = 0; i2 < n; i2 += s2, q++) o[q] = nk_read_f32(row + i2 * ss);
        } else if (es == 2) {
          uint16_t *o = (uint16_t *)(void *)d;
          for (int64_t i2 = f, q = 0; i2 < n; i2 += s2, q++) o[q] = nk_read_u16(row + i2 * ss);
        } else {
          double *o = (double *)(void *)d;
          for (int64_t i2 = f, q = 0; i2 < n; i2 += s2, q++) o[q] = nk_read_f64(row + i2 * ss);
        }
      }
      if (j->check_finite) bad |= nonfinite_run(j->src.t, row, n, ss);
      if (++r1 == ig->s[1]) r1 = 0, q1++;
    }
    if (++r0 == ig->s[0]) r0 = 0, q0++;
  }
  return bad;
}

/* Unit (c, b): sample n0 + b's share of channel c's region of xp <- the
 * sample's channel, zeros around it (the last sample's unit also zeroes the
 * region's tail). */
static void pad_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  ijob *j = arg;
  const igeom *ig = j->ig;
  const int64_t ces = j->xes;
  int bad = 0;
  for (int64_t u = begin; u < end; u++) {
    const int64_t c = u / j->nb, b = u % j->nb;
    if (ig->phases > 1) {
      bad |= pad_phases(j, c, b);
      continue;
    }
    /* every element written once: a padding row zeroed, a data row's left
     * padding zeroed and its data copied (a memset of the whole plane
     * first wrote most of it twice) */
    char *dst = j->xp + (c * j->region + b * ig->plane) * ces;
    const char *src = j->src.data + (j->n0 + b) * j->src.sa + c * j->src.sb;
    const int64_t n = ig->in[2], ss = j->src.sp[2], p2 = ig->p[2], row = ig->pd[2] * ces;
    for (int64_t g0 = 0; g0 < ig->pd[0]; g0++)
      for (int64_t g1 = 0; g1 < ig->pd[1]; g1++, dst += row) {
        const int64_t i0 = g0 - ig->p[0], i1 = g1 - ig->p[1];
        if (i0 < 0 || i1 < 0) {
          zero_run(dst, (size_t)row);
          continue;
        }
        zero_run(dst, (size_t)(p2 * ces));
        const char *s = src + i0 * j->src.sp[0] + i1 * j->src.sp[1];
        char *d = dst + p2 * ces;
        if (j->src.t != j->xt) /* widened as it is copied: float32 xp */
          widen_run(j->src.t, (float *)(void *)d, s, ss, n);
        else if (ss == ces) {
          copy_run(d, s, (size_t)(n * ces));
        } else {
          for (int64_t i = 0; i < n; i++) memcpy(d + i * ces, s + i * ss, (size_t)ces);
        }
        if (j->check_finite) bad |= nonfinite_run(j->xt, d, n, ces);
      }
    /* the last sample's unit also zeroes the region's tail */
    if (b == j->nb - 1) memset(dst, 0, (size_t)((j->region - (b + 1) * ig->plane) * ces));
  }
  if (bad) __atomic_store_n(&j->nonfinite, 1, __ATOMIC_RELAXED);
}

/* Position q of output (b, o0, o1, 0). */
static int64_t out_row_q(const igeom *ig, int64_t b, int64_t o0, int64_t o1) {
  return ((b * ig->pd[0] + o0) * ig->pd[1] + o1) * ig->pd[2];
}

/* Moves output channel o of sample b between its row of ys (the padded
 * grid's positions) and y (dst), output row by output row: to_y scatters
 * (adding the bias when there is one), else gathers.  A 16-bit dst is
 * rounded to / widened from ys's float32. */
static void move_rows(const ijob *j, int64_t o, int64_t b, int to_y) {
  const igeom *ig = j->ig;
  const int64_t ces = j->ces, n = ig->out[2], ds = j->dst.sp[2];
  const int wide = j->dst.t != j->yst;
  char *row = j->ys + o * j->q * ces;
  char *y = j->dst.data + (j->n0 + b) * j->dst.sa + o * j->dst.sb;
  for (int64_t o0 = 0; o0 < ig->out[0]; o0++)
    for (int64_t o1 = 0; o1 < ig->out[1]; o1++) {
      char *g = row + out_row_q(ig, b, o0, o1) * ces;
      char *t = y + o0 * j->dst.sp[0] + o1 * j->dst.sp[1];
      if (wide && to_y) {
        const float bv = j->bias ? nk_read_f32(j->bias + o * j->bias_stride) : 0.0f;
        round_run(j->dst.t, t, ds, (const float *)(const void *)g, n, j->bias != NULL, bv);
      } else if (wide) {
        widen_run(j->dst.t, (float *)(void *)g, t, ds, n);
      } else if (to_y && j->bias && ces == 8) {
        const double bv = nk_read_f64(j->bias + o * j->bias_stride);
        for (int64_t i = 0; i < n; i++) nk_write_f64(t + i * ds, nk_read_f64(g + i * ces) + bv);
      } else if (to_y && j->bias) {
        const float bv = nk_read_f32(j->bias + o * j->bias_stride);
        for (int64_t i = 0; i < n; i++) nk_write_f32(t + i * ds, nk_read_f32(g + i * ces) + bv);
      } else if (ds == ces) {
        copy_run(to_y ? t : g, to_y ? g : t, (size_t)(n * ces));
      } else {
        for (int64_t i = 0; i < n; i++)
          memcpy(to_y ? t + i * ds : g + i * ces, to_y ? g + i * ces : t + i * ds, (size_t)ces);
      }
    }
}

/* Unit (o, b): y[n0 + b, o] <- ys[o] at b's valid positions (+ bias). */
static void scatter_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const ijob *j = arg;
  for (int64_t u = begin; u < end; u++) move_rows(j, u / j->nb, u % j->nb, 1);
}

/* Unit (o, b): ys[o] at b's positions <- dy[n0 + b, o], zeros elsewhere. */
static void gather_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const ijob *j = arg;
  const igeom *ig = j->ig;
  for (int64_t u = begin; u < end; u++) {
    const int64_t o = u / j->nb, b = u % j->nb;
    const int64_t q0 = b * ig->plane, q1 = (b + 1) * ig->plane < j->q ? (b + 1) * ig->plane : j->q;
    memset(j->ys + (o * j->q + q0) * j->ces, 0, (size_t)((q1 - q0) * j->ces));
    move_rows(j, o, b, 0);
  }
}

/* Pads samples [n0, n0 + nb) of src into xp (parallel). */
static void pad_chunk(ijob *j) {
  const int64_t work = j->ig->plane, grain = work >= 16384 ? 1 : 16384 / (work ? work : 1);
  nk_parallel_for(j->ig->cin * j->nb, grain, pad_task, j);
}

static void rows_chunk(ijob *j, void (*task)(void *, int64_t, int64_t, int)) {
  const int64_t work = j->ig->plane, grain = work >= 16384 ? 1 : 16384 / (work ? work : 1);
  nk_parallel_for(j->ig->cout * j->nb, grain, task, j);
}

/* A forward chunk's product and scatter: ys (cout, q) = a @ b, b read
 * through the table(s) in ind, then y <- ys at the valid positions (+ the
 * bias, rounded to y's dtype). */
static int product_scatter(nrt_exec_ctx *ctx, ijob *j, nrt_dtype ct, nrt_operand a, nrt_operand b,
                           const nk_gemm_indirect *ind) {
  const int64_t ces = (int64_t)nk_dtype_size(ct);
  const nrt_operand ops[3] = {mat3(j->ys, ct, 1, j->ig->cout, j->q, 0, j->q * ces, ces), a, b};
  if (nk_gemm_operands_indirect(ctx, ops, (nk_scalar){1.0, 1}, (nk_scalar){0.0, 0}, ind)) return -1;
  rows_chunk(j, scatter_task);
  return 0;
}

/* ------------------------------------------------ bfloat16 channel pairs
 * bfloat16 operands on AVX512_BF16: the dot-product kernel reads the
 * padded input in place when xp holds channels in pairs, each
 * 32-bit word (channel 2p, channel 2p + 1) at one grid position: then the
 * col matrix's k pair (tap, channel pair) is a row of such words, xp
 * shifted by the tap (nk_gemm_indirect.b_pair_rows), and the weight is
 * reordered to the same k order (tap-major, channels inner, padded to an
 * even count with zeros).  Without it products of 16-32 rows widened
 * everything to float32 (the pair kernel packed B per call, which so few
 * row tiles do not amortise: conv.c, bf16_operands_pay), and larger ones
 * packed B through the tap table.  Up to 128 rows (like float32's unpacked
 * B, gemm.c): batch 32, 64->64 3x3 @16 forward 2.17 -> 1.83 ms, @32 8.9 ->
 * 7.2 ms, 128->128 @8 the same; 256 rows lost up to 5% at 14x14.  Strided
 * products pad into phase grids as usual and interleave the pairs after. */
#define NK_IMPLICIT_PAIR_MAX_ROWS 128

int nk_conv_pair_rows(int64_t rows) {
  return rows <= NK_IMPLICIT_PAIR_MAX_ROWS && nk_gemm_pair_rows();
}

/* Unit (cp, b): sample n0 + b's share of channel pair cp's region of xp
 * (words) <- channels 2cp and 2cp + 1 (zeros past the last channel), zeros
 * around them; the last sample's unit zeroes the region's tail. */
static void pad_pairs_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  ijob *j = arg;
  const igeom *ig = j->ig;
  for (int64_t u = begin; u < end; u++) {
    const int64_t cp = u / j->nb, b = u % j->nb;
    uint32_t *dst = (uint32_t *)(void *)j->xp + cp * j->region + b * ig->plane;
    const char *s0 = j->src.data + (j->n0 + b) * j->src.sa + 2 * cp * j->src.sb;
    const char *s1 = 2 * cp + 1 < ig->cin ? s0 + j->src.sb : NULL;
    const int64_t n = ig->in[2], ss = j->src.sp[2], p2 = ig->p[2];
    for (int64_t g0 = 0; g0 < ig->pd[0]; g0++)
      for (int64_t g1 = 0; g1 < ig->pd[1]; g1++, dst += ig->pd[2]) {
        const int64_t i0 = g0 - ig->p[0], i1 = g1 - ig->p[1];
        if (i0 < 0 || i1 < 0) {
          zero_run((char *)dst, (size_t)ig->pd[2] * 4);
          continue;
        }
        zero_run((char *)dst, (size_t)p2 * 4);
        const int64_t at = i0 * j->src.sp[0] + i1 * j->src.sp[1];
        uint32_t *d = dst + p2;
        if (ss == 2) {
          const uint16_t *a = (const uint16_t *)(const void *)(s0 + at);
          const uint16_t *c = s1 ? (const uint16_t *)(const void *)(s1 + at) : NULL;
          if (c) for (int64_t i = 0; i < n; i++) d[i] = (uint32_t)a[i] | (uint32_t)c[i] << 16;
          else for (int64_t i = 0; i < n; i++) d[i] = a[i];
        } else {
          for (int64_t i = 0; i < n; i++)
            d[i] = (uint32_t)nk_read_u16(s0 + at + i * ss) |
                   (s1 ? (uint32_t)nk_read_u16(s1 + at + i * ss) << 16 : 0);
        }
      }
    if (b == j->nb - 1) memset(dst, 0, (size_t)(j->region - (b + 1) * ig->plane) * 4);
  }
}

/* Byte offsets of the k pairs (tap, channel pair) in the pair-layout xp:
 * tap_offsets' positions (phase and shift per dim), in words. */
static void pair_tap_offsets(const igeom *ig, int64_t nb, int64_t *off) {
  const int64_t region = channel_region(ig, nb), cp_n = (ig->cin + 1) / 2;
  int64_t r = 0;
  for (int64_t t0 = 0; t0 < ig->k[0]; t0++)
    for (int64_t t1 = 0; t1 < ig->k[1]; t1++)
      for (int64_t t2 = 0; t2 < ig->k[2]; t2++) {
        const int64_t a0 = t0 * ig->d[0], a1 = t1 * ig->d[1], a2 = t2 * ig->d[2];
        const int64_t phase = ((a0 % ig->s[0]) * ig->s[1] + a1 % ig->s[1]) * ig->s[2] + a2 % ig->s[2];
        const int64_t at = phase * nb * ig->plane +
                           ((a0 / ig->s[0]) * ig->pd[1] + a1 / ig->s[1]) * ig->pd[2] + a2 / ig->s[2];
        for (int64_t cp = 0; cp < cp_n; cp++, r++) off[r] = (cp * region + at) * 4;
      }
}

/* Strided: the channels padded into their phase grids one by one (xp16,
 * pad_phases' layout), then interleaved in pairs: channel pair cp's words
 * [begin, end) of the region. */
typedef struct interleave_job {
  const uint16_t *xp16;
  uint32_t *xp;
  int64_t cin, region;
} interleave_job;

static void interleave_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const interleave_job *ij = arg;
  for (int64_t cp = begin; cp < end; cp++) {
    const uint16_t *a = ij->xp16 + 2 * cp * ij->region;
    const uint16_t *c = 2 * cp + 1 < ij->cin ? a + ij->region : NULL;
    uint32_t *d = ij->xp + cp * ij->region;
    if (c) for (int64_t i = 0; i < ij->region; i++) d[i] = (uint32_t)a[i] | (uint32_t)c[i] << 16;
    else for (int64_t i = 0; i < ij->region; i++) d[i] = a[i];
  }
}

/* The weight (cout, ck; ck = (c, tap)) in the pairs' k order (tap, c), c
 * padded to an even count with zeros: a (cout, kprod * 2 * cp_n) bfloat16
 * matrix. */
static void pair_weight(const igeom *ig, const char *w, int64_t wrs, int64_t wks, uint16_t *wr) {
  const int64_t c2 = (ig->cin + 1) / 2 * 2, kk = ig->kprod * c2;
  for (int64_t o = 0; o < ig->cout; o++)
    for (int64_t t = 0; t < ig->kprod; t++)
      for (int64_t c = 0; c < c2; c++)
        wr[o * kk + t * c2 + c] = c < ig->cin ? nk_read_u16(w + o * wrs + (c * ig->kprod + t) * wks) : 0;
}

/* implicit_forward for bfloat16 operands in the pair layout. */
static int pairs_forward(nrt_exec_ctx *ctx, const igeom *ig, nrt_dtype ct, int64_t n, side x,
                         const char *w, int64_t wrs, int64_t wks, side y, const char *bias,
                         int64_t bias_stride) {
  const int64_t ces = (int64_t)nk_dtype_size(ct), cp_n = (ig->cin + 1) / 2;
  const int64_t kk = ig->kprod * 2 * cp_n, pairs = ig->kprod * cp_n;
  int rc = -1;
  const int64_t xp_words = cp_n * channel_region(ig, ig->nb);
  uint32_t *xp = nk_tmp_malloc((size_t)(xp_words + NK_GEMM_ROWS_SLACK) * 4);
  char *ys = nk_tmp_malloc((size_t)(ig->cout * chunk_columns(ig, ig->nb) * ces + ces));
  int64_t *off = nk_tmp_malloc((size_t)(pairs + 1) * sizeof *off);
  uint16_t *wr = nk_tmp_malloc((size_t)(ig->cout * kk + 1) * 2);
  uint16_t *xp16 = ig->phases > 1 ? nk_tmp_malloc((size_t)(ig->cin * channel_region(ig, ig->nb) + 1) * 2) : NULL;
  if (!xp || !ys || !off || !wr || (ig->phases > 1 && !xp16)) {
    nrt_exec_fail(ctx, "conv: out of host memory for an implicit-GEMM chunk");
    goto done;
  }
  memset(xp + xp_words, 0, (size_t)NK_GEMM_ROWS_SLACK * 4);
  pair_weight(ig, w, wrs, wks, wr);
  for (int64_t n0 = 0; n0 < n; n0 += ig->nb) {
    const int64_t nb = n - n0 < ig->nb ? n - n0 : ig->nb, q = chunk_columns(ig, nb);
    ijob j = {ig, NRT_BFLOAT16, 2, ces, n0, nb, q, channel_region(ig, nb), x, (char *)xp, 0, y, ys, bias,
              bias_stride, 0, ct};
    const int64_t work = ig->plane, grain = work >= 16384 ? 1 : 16384 / (work ? work : 1);
    if (xp16) {
      j.xp = (char *)xp16;
      pad_chunk(&j);
      interleave_job ij = {xp16, xp, ig->cin, j.region};
      nk_parallel_for(cp_n, 1, interleave_task, &ij);
      j.xp = (char *)xp;
    } else {
      nk_parallel_for(cp_n * nb, grain, pad_pairs_task, &j);
    }
    pair_tap_offsets(ig, nb, off);
    const nk_gemm_indirect ind = {off, NULL, 1};
    if (product_scatter(ctx, &j, ct, mat3((char *)wr, NRT_BFLOAT16, 1, ig->cout, kk, 0, kk * 2, 2),
                        mat3((char *)xp, NRT_BFLOAT16, 1, kk, q, 0, 0, 4), &ind))
      goto done;
  }
  rc = 1;
done:
  nk_tmp_free(xp);
  nk_tmp_free(ys);
  nk_tmp_free(off);
  nk_tmp_free(wr);
  nk_tmp_free(xp16);
  return rc;
}

/* y = conv(x) (+ bias) for every sample: w is (cout, ck) with row stride
 * wrs and k stride wks; x and w in the operand type ot, y (and ys, the
 * GEMM's output) and the bias in ct. */
static int implicit_forward(nrt_exec_ctx *ctx, const igeom *ig, nrt_dtype ct, nrt_dtype ot, int64_t n,
                            side x, const char *w, int64_t wrs, int64_t wks, side y, const char *bias,
                            int64_t bias_stride) {
  if (ot == NRT_BFLOAT16 && nk_conv_pair_rows(ig->cout))
    return pairs_forward(ctx, ig, ct, n, x, w, wrs, wks, y, bias, bias_stride);
  const int64_t ces = (int64_t)nk_dtype_size(ct), oes = (int64_t)nk_dtype_size(ot);
  int rc = -1;
  /* xp ends in the slack the GEMM's unpacked B may read (gemm.h) */
  const int64_t xp_elems = ig->cin * channel_region(ig, ig->nb);
  char *xp = nk_tmp_malloc((size_t)((xp_elems + NK_GEMM_ROWS_SLACK) * oes));
  char *ys = nk_tmp_malloc((size_t)(ig->cout * chunk_columns(ig, ig->nb) * ces + ces));
  int64_t *off = nk_tmp_malloc((size_t)(ig->ck + 1) * sizeof *off);
  if (!xp || !ys || !off) {
    nrt_exec_fail(ctx, "conv: out of host memory for an implicit-GEMM chunk");
    goto done;
  }
  memset(xp + xp_elems * oes, 0, (size_t)(NK_GEMM_ROWS_SLACK * oes));
  for (int64_t n0 = 0; n0 < n; n0 += ig->nb) {
    const int64_t nb = n - n0 < ig->nb ? n - n0 : ig->nb, q = chunk_columns(ig, nb);
    ijob j = {ig, ot, oes, ces, n0, nb, q, channel_region(ig, nb), x, xp, 0, y, ys, bias, bias_stride, 0, ct};
    pad_chunk(&j);
    tap_offsets(ig, nb, oes, off);
    const nk_gemm_indirect ind = {off, NULL, 0};
    if (product_scatter(ctx, &j, ct, mat3((char *)w, ot, 1, ig->cout, ig->ck, 0, wrs, wks),
                        mat3(xp, ot, 1, ig->ck, q, 0, 0, oes), &ind))
      goto done;
  }
  rc = 1;
done:
  nk_tmp_free(xp);
  nk_tmp_free(ys);
  nk_tmp_free(off);
  return rc;
}

typedef struct dots_job {
  const char *dys;
  int64_t q;
  const char *xp;
  const int64_t *off;
  const float *zeros;
  int64_t og, ck;
  float *acc;
  int bf16; /* dys and xp in bfloat16 (the AVX512_BF16 dot products) */
} dots_job;

static void dots_task(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const dots_job *d = arg;
  if (d->bf16)
    nk_conv_dw_dots_avx512bf16((const uint16_t *)(const void *)d->dys, d->q, d->xp, d->off,
                               (const uint16_t *)(const void *)d->zeros, d->q, d->og, d->ck, d->acc,
                               begin, end);
  else
    nk_conv_dw_dots_avx512_f32((const float *)(const void *)d->dys, d->q, d->xp, d->off, d->zeros,
                               d->q, d->og, d->ck, d->acc, begin, end);
}

/* acc (cout, ck, contiguous, ct) += dy (cout channels) x col(x)^T over
 * every sample, x and dy in the operand type ot (so are xp and ys, the
 * gathered dy); 0 (acc unspecified) when x holds inf or NaN. */
static int implicit_weight_grad(nrt_exec_ctx *ctx, const igeom *ig, nrt_dtype ct, nrt_dtype ot,
                                int64_t n, side x, side dy, char *acc) {
  const int64_t ces = (int64_t)nk_dtype_size(ct), oes = (int64_t)nk_dtype_size(ot);
  int rc = -1;
  char *xp = nk_tmp_malloc((size_t)(ig->cin * channel_region(ig, ig->nb) * oes + oes));
  char *ys = nk_tmp_malloc((size_t)(ig->cout * chunk_columns(ig, ig->nb) * oes + oes));
  int64_t *off = nk_tmp_malloc((size_t)(ig->ck + 1) * sizeof *off);
  /* Few output channels on AVX-512: dot products, no packing (see
   * conv_dw_avx512_f32.c); zeros is their padding row.  float32 operands,
   * or bfloat16 ones on AVX512_BF16 (conv_dw_avx512bf16_f32.c). */
  const int dots_bf16 = ot == NRT_BFLOAT16 && ig->cout <= 32 && nk_gemm_bf16_dot();
  const int dots = (ot == NRT_FLOAT32 && ig->cout <= 32 && nk_cpu_isa() == NK_ISA_AVX512) || dots_bf16;
  float *zeros = dots ? nk_tmp_calloc((size_t)(chunk_columns(ig, ig->nb) + 16), sizeof(float)) : NULL;
  if (!xp || !ys || !off || (dots && !zeros)) {
    nrt_exec_fail(ctx, "conv: out of host memory for an implicit-GEMM chunk");
    goto done;
  }
  for (int64_t n0 = 0; n0 < n; n0 += ig->nb) {
    const int64_t nb = n - n0 < ig->nb ? n - n0 : ig->nb, q = chunk_columns(ig, nb);
    ijob j = {ig, ot, oes, oes, n0, nb, q, channel_region(ig, nb), x, xp, 0, dy, ys, NULL, 0, 1, ot};
    pad_chunk(&j);
    if (j.nonfinite) {
      rc = 0;
      goto done;
    }
    rows_chunk(&j, gather_task);
    tap_offsets(ig, nb, oes, off);
    if (zeros) {
      dots_job dj = {ys, q, xp, off, zeros, ig->cout, ig->ck, (float *)(void *)acc, dots_bf16};
      const int64_t tiles = (ig->cout + NK_CONV_DW_TILE_O - 1) / NK_CONV_DW_TILE_O *
                            ((ig->ck + NK_CONV_DW_TILE_R - 1) / NK_CONV_DW_TILE_R);
      nk_parallel_for(tiles, 1, dots_task, &dj);
      continue;
    }
    const nrt_operand ops[3] = {mat3(acc, ct, 1, ig->cout, ig->ck, 0, ig->ck * ces, ces),
                                mat3(ys, ot, 1, ig->cout, q, 0, q * oes, oes),
                                mat3(xp, ot, 1, q, ig->ck, 0, oes, 0)};
    const nk_gemm_indirect ind = {NULL, off, 0};
    if (nk_gemm_operands_indirect(ctx, ops, (nk_scalar){1.0, 1}, (nk_scalar){1.0, 1}, &ind)) goto done;
  }
  rc = 1;
done:
  nk_tmp_free(xp);
  nk_tmp_free(ys);
  nk_tmp_free(off);
  nk_tmp_free(zeros);
  return rc;
}

static side side_of(const cview *v, int64_t channel0) {
  side s = {v->data + channel0 * v->sb, v->t, v->sa, v->sb, {v->sp[0], v->sp[1], v->sp[2]}};
  return s;
}

static int same_out(const igeom *ig, const conv_geom *g) {
  return ig->out[0] == g->out[0] && ig->out[1] == g->out[1] && ig->out[2] == g->out[2];
}

int nk_conv_implicit(nrt_exec_ctx *ctx, int mode, const conv_geom *g, nrt_dtype ct, nrt_dtype ot,
                     const cview *x, const cview *w, const cview *y, const cview *b) {
  int strided = 0;
  for (int i = 0; i < 3; i++) strided |= g->s[i] != 1;
  if (strided && mode == NK_CONV_BACKWARD_INPUT) return 0; /* a transposed convolution: im2col */
  if (g->n == 0 || g->lprod == 0) return 0;
  const int64_t ces = (int64_t)nk_dtype_size(ct), oes = (int64_t)nk_dtype_size(ot);
  /* the weight as (O, CK) rows: conv.c's views flatten (C/g, K...) */
  const int64_t wks = g->kprod > 1 ? w->sl : w->sb;
  igeom ig;
  if (mode == NK_CONV_FORWARD) {
    if (!igeom_make(&ig, g->in, g->k, g->d, g->p, g->s, g->cg, g->og, g->n) || !same_out(&ig, g))
      return 0;
    for (int64_t grp = 0; grp < g->groups; grp++) {
      const int rc = implicit_forward(ctx, &ig, ct, ot, g->n, side_of(x, grp * g->cg),
                                      w->data + grp * g->og * w->sa, w->sa, wks,
                                      side_of(y, grp * g->og),
                                      b && b->data ? b->data + grp * g->og * b->sa : NULL, b ? b->sa : 0);
      if (rc != 1) return rc;
    }
    return 1;
  }
  if (mode == NK_CONV_BACKWARD_WEIGHT) {
    if (!igeom_make(&ig, g->in, g->k, g->d, g->p, g->s, g->cg, g->og, g->n) || !same_out(&ig, g))
      return 0;
    char *acc = nk_tmp_calloc((size_t)(g->og * g->ck + 1), (size_t)ces);
    if (!acc) {
      nrt_exec_fail(ctx, "conv: out of host memory for the weight-gradient accumulator");
      return -1;
    }
    for (int64_t grp = 0; grp < g->groups; grp++) {
      if (grp) memset(acc, 0, (size_t)(g->og * g->ck * ces));
      const int rc = implicit_weight_grad(ctx, &ig, ct, ot, g->n, side_of(x, grp * g->cg),
                                          side_of(y, grp * g->og), acc);
      if (rc != 1) {
        nk_tmp_free(acc);
        return rc;
      }
      /* dw[grp * og + o][c][t] <- acc[o][c * kprod + t]: whole rows where
       * dw's (C/g, K...) are one run */
      const int rows = wks == ces && w->sb == g->kprod * ces;
      for (int64_t o = 0; o < g->og; o++) {
        if (rows) {
          memcpy(w->data + (grp * g->og + o) * w->sa, acc + o * g->ck * ces, (size_t)(g->ck * ces));
          continue;
        }
        for (int64_t r = 0; r < g->ck; r++)
          memcpy(w->data + (grp * g->og + o) * w->sa + (r / g->kprod) * w->sb + (r % g->kprod) * wks,
                 acc + (o * g->ck + r) * ces, (size_t)ces);
      }
    }
    nk_tmp_free(acc);
    return 1;
  }
  if (mode != NK_CONV_BACKWARD_INPUT) return 0;
  /* dx = conv(dy padded by (K - 1) d - p, w flipped and transposed) */
  int64_t pp[3];
  for (int i = 0; i < 3; i++) {
    pp[i] = (g->k[i] - 1) * g->d[i] - g->p[i];
    if (pp[i] < 0) return 0;
  }
  static const int64_t unit[3] = {1, 1, 1};
  if (!igeom_make(&ig, g->out, g->k, g->d, pp, unit, g->og, g->cg, g->n)) return 0;
  if (ig.out[0] != g->in[0] || ig.out[1] != g->in[1] || ig.out[2] != g->in[2]) return 0;
  char *wt = nk_tmp_malloc((size_t)(g->cg * g->og * g->kprod * oes + oes));
  if (!wt) {
    nrt_exec_fail(ctx, "conv: out of host memory for a transposed weight");
    return -1;
  }
  int rc = 1;
  for (int64_t grp = 0; grp < g->groups && rc == 1; grp++) {
    /* wt[c][o * kprod + t] = w[grp * og + o][c][kprod - 1 - t], in blocks
     * of 32 o: each block's w rows stay in L1 while c walks them, and the
     * block's part of wt row c is written in order (o-outer order had
     * strided writes: at 512 x 512 channels the transpose cost as much as
     * the product) */
    for (int64_t ob = 0; ob < g->og; ob += 32) {
      const int64_t oe = ob + 32 < g->og ? ob + 32 : g->og;
      for (int64_t c = 0; c < g->cg; c++)
        for (int64_t o = ob; o < oe; o++) {
          const char *src = w->data + (grp * g->og + o) * w->sa + c * w->sb;
          char *dst = wt + ((c * g->og + o) * g->kprod + g->kprod - 1) * oes;
          if (oes == 4)
            for (int64_t t = 0; t < g->kprod; t++) nk_write_f32(dst - t * 4, nk_read_f32(src + t * wks));
          else if (oes == 2)
            for (int64_t t = 0; t < g->kprod; t++) memcpy(dst - t * 2, src + t * wks, 2);
          else
            for (int64_t t = 0; t < g->kprod; t++) nk_write_f64(dst - t * 8, nk_read_f64(src + t * wks));
        }
    }
    rc = implicit_forward(ctx, &ig, ct, ot, g->n, side_of(y, grp * g->og), wt, g->og * g->kprod * oes,
                          oes, side_of(x, grp * g->cg), NULL, 0);
  }
  nk_tmp_free(wt);
  return rc;
}
