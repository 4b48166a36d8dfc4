/* conv.h — what conv.c (im2col lowering) and conv_implicit.c (implicit
 * GEMM for stride 1) share: the geometry, the compute-typed views of the
 * operands and a 3-d matrix operand constructor. */
#ifndef NK_CONV_H
#define NK_CONV_H

#include <stdint.h>
#include <string.h>

#include "neuron_kernels.h"

typedef struct conv_geom {
  int64_t n, c, o, groups, cg, og; /* samples, in/out channels, per group */
  int64_t in[3], out[3], k[3], s[3], p[3], d[3];
  int64_t kprod, lprod, iprod, ck; /* ck = cg * kprod */
} conv_geom;

/* A tensor (A, B, spatial...) in the compute dtype: per-dim byte strides,
 * the flat spatial stride when the spatial dims flatten (else -1), and the
 * malloc'ed copy it lives in when it had to be copied. */
typedef struct cview {
  char *data;
  nrt_dtype t; /* the dtype data holds: the operand's, or the copy's */
  int64_t sa, sb, sp[3], sl;
  int64_t size[5];
  void *owned;
  int writeback; /* an output copy that must be stored back */
} cview;

static inline nrt_operand mat3(char *data, nrt_dtype t, int64_t b, int64_t r, int64_t c, int64_t sb,
                        int64_t sr, int64_t sc) {
  nrt_operand op;
  memset(&op, 0, sizeof op);
  op.data = data;
  op.dtype = t;
  op.ndim = 3;
  op.sizes[0] = b;
  op.sizes[1] = r;
  op.sizes[2] = c;
  op.strides[0] = sb;
  op.strides[1] = sr;
  op.strides[2] = sc;
  return op;
}

/* The stride-1 convolution of every mode but the weight gradient's inputs
 * with non-finite values, as implicit GEMMs (conv_implicit.c).  x, w, y
 * (and b, bias, may have data NULL) are views as conv.c makes them: the
 * mode's inputs in the operand type ot (ct, or bfloat16 for the
 * dot-product GEMM), its output and the bias in the accumulation type ct;
 * or, with ot == ct == float32, x and y in their own 16-bit dtype (cview.t),
 * which the padded copy widens and the output scatter rounds.
 * Returns 1 when done, 0 when the shape or the values are not for it
 * (nothing written then, conv.c goes on with im2col), -1 after
 * nrt_exec_fail. */
int nk_conv_implicit(nrt_exec_ctx *ctx, int mode, const conv_geom *g, nrt_dtype ct, nrt_dtype ot,
                     const cview *x, const cview *w, const cview *y, const cview *b);

/* The direct 3x3 convolution of few channels (conv_direct.c): whether the
 * geometry, mode and dtype t are for it, and the convolution itself over views
 * as conv.c makes them (float32; every plane contiguous).  Returns 1 when
 * done, 0 when the views are not for it (nothing written), -1 after
 * nrt_exec_fail. */
int nk_conv_direct_applies(const conv_geom *g, int mode, nrt_dtype t);
int nk_conv_direct(nrt_exec_ctx *ctx, int mode, const conv_geom *g, const cview *x, const cview *w,
                   const cview *y, const cview *b);

/* 1 when a stride-1 implicit product of `rows` output rows reads
 * bfloat16 operands in place as channel pairs (conv_implicit.c): <= 128 rows,
 * and the dot-product kernel without AMX (nk_gemm_pair_rows). */
int nk_conv_pair_rows(int64_t rows);

/* The weight gradient's dot products for few output channels
 * (conv_dw_avx512_f32.c): tiles [t0, t1) of the (ceil(og / 4), ceil(ck / 6))
 * grid add acc[o][r] += sum_p dys[o * ldd + p] * x_r[p] over p < q, x_r at
 * xp + off[r] (bytes); zeros holds >= q zero floats. */
void nk_conv_dw_dots_avx512_f32(const float *dys, int64_t ldd, const char *xp, const int64_t *off,
                                const float *zeros, int64_t q, int64_t og, int64_t ck, float *acc,
                                int64_t t0, int64_t t1);
/* The same over bfloat16 dys and xp (conv_dw_avx512bf16_f32.c, AVX512_BF16);
 * zeros holds >= q + 32 zero bfloat16 values. */
void nk_conv_dw_dots_avx512bf16(const uint16_t *dys, int64_t ldd, const char *xp, const int64_t *off,
                                const uint16_t *zeros, int64_t q, int64_t og, int64_t ck, float *acc,
                                int64_t t0, int64_t t1);
#define NK_CONV_DW_TILE_O 4
#define NK_CONV_DW_TILE_R 6

#endif /* NK_CONV_H */
