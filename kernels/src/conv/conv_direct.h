/* conv_direct.h — the direct 3x3 convolution of few channels (float32,
 * stride 1 or 2, padding 1): what conv_direct.c (planning, packing, threads)
 * shares with its ISA bodies (conv_direct_impl.h, included by
 * conv_direct_avx512_f32.c and conv_direct_avx2_f32.c).
 *
 * Output positions are vectorised along the flat plane (q = h * W + w, VL
 * lanes a vector; a vector may span rows).  Tap t = (dh, dw) of position q
 * reads the input at q + off[t] (stride 1: (dh - 1) W + (dw - 1); stride 2:
 * in one of the input's phase planes, conv_direct.c): one unaligned vector load
 * per (tap, position vector), with the lanes whose source falls outside the
 * image (the zero padding, and positions past the plane) masked to zero.
 * The masks depend on the plane's shape only: one table per call, NK_CD_TAPS
 * masks per position vector (the 9 taps, then the store mask q < H W). */
#ifndef NK_CONV_DIRECT_H
#define NK_CONV_DIRECT_H

#include <stdint.h>

#define NK_CD_TAPS 10 /* 9 taps + the store mask */

typedef struct nk_cd_job {
  /* forward (and the input gradient as a forward of dy): y[n][o][q] =
   * sum over taps t, input channels c of wp[ob][t][c][i] * in[n][c][q + off[t]] */
  const float *in;     /* input planes, float32, each plane contiguous */
  int64_t in_sn, in_sc; /* sample and channel strides (elements) */
  const float *wp;     /* packed weight [oblock][9][cin][MR], zero rows past cout */
  float *out;
  int64_t out_sn, out_so;
  const float *bias;   /* [cout] or NULL */
  int64_t cin, cout, n;
  /* weight gradient: dw[o][r] (r = c * 9 + t) = sum over n, q of
   * dy[n][o][q] * x[n][c][q + off[t]] */
  const float *dy;
  int64_t dy_sn, dy_so;
  float *dw;
  int64_t dw_so, dw_sr; /* (o, r) strides of dw (elements) */
  const float *zeros;   /* >= nvec * VL zero floats: rows past cout or ck */
  /* the plane */
  int64_t nvec, oblocks, pblocks; /* position vectors, and the forward's blocks */
  int64_t off[9];                  /* tap t's input offset (elements; stride 2: in its phase plane) */
  const void *masks;    /* [nvec][NK_CD_TAPS] in the ISA's mask type */
} nk_cd_job;

/* The ISA bodies: units [u0, u1) of the forward grid (n, oblock, pblock)
 * or of the weight-gradient grid (oblock, rblock); the mask table builder
 * (bits: lane l of vector v valid for tap t at bits[v * NK_CD_TAPS + t]);
 * each ISA's register tile. */
#define NK_CD_DECLARE(isa)                                                              \
  void nk_cd_forward_##isa(const nk_cd_job *j, int64_t u0, int64_t u1);                 \
  void nk_cd_weight_##isa(const nk_cd_job *j, int64_t u0, int64_t u1);                  \
  void nk_cd_masks_##isa(const uint32_t *bits, int64_t count, void *out);
NK_CD_DECLARE(avx512_f32)
NK_CD_DECLARE(avx2_f32)
#undef NK_CD_DECLARE

/* lanes, mask bytes, forward tile (MR output channels x NR position
 * vectors), weight tile (MR output channels x NR (c, t) rows) */
#define NK_CD_AVX512_VL 16
#define NK_CD_AVX512_MASK_BYTES 2
#define NK_CD_AVX512_FWD_MR 4
#define NK_CD_AVX512_FWD_NR 4
#define NK_CD_AVX512_DW_MR 4
#define NK_CD_AVX512_DW_NR 6
#define NK_CD_AVX2_VL 8
#define NK_CD_AVX2_MASK_BYTES 32
#define NK_CD_AVX2_FWD_MR 4
#define NK_CD_AVX2_FWD_NR 2
#define NK_CD_AVX2_DW_MR 4
#define NK_CD_AVX2_DW_NR 2

#endif /* NK_CONV_DIRECT_H */
