/* conv_direct_impl.h — the direct 3x3 convolution's register tiles, written
 * once over the vector width for conv_direct_avx512_f32.c and
 * conv_direct_avx2_f32.c (the plan and the packing: conv_direct.c; the
 * layout: conv_direct.h).  The including file defines
 *   CD_ISA                the name suffix (avx512_f32, avx2_f32),
 *   CD_VL, CD_V, CD_M     lanes, vector type, mask type,
 *   CD_FWD_MR/NR, CD_DW_MR/NR   the forward's and weight gradient's tiles,
 *   CD_ZERO(), CD_SET1(x), CD_BCAST(p), CD_ADD(a, b), CD_FMA(a, b, acc) = a * b + acc,
 *   CD_LOADM(m, p)        a load with the lanes outside m zero (and not read),
 *   CD_STOREM(p, m, v)    a store of the lanes in m,
 *   CD_HSUM(v)            the lanes' sum (a fixed order),
 *   CD_MASK(table, k)     mask k of a table,  CD_NOMASK  no lane,
 *   CD_MASK_STORE(out, k, bits)  the builder's store of mask k.
 * Every sum runs in an order fixed by the shapes (forward: taps major,
 * input channels minor; weight gradient: lanes over samples and positions,
 * then the lanes): results do not depend on the thread count. */
#include <immintrin.h>
#include <stdint.h>

#include "conv/conv_direct.h"

#define CD_CAT2(a, b) a##b
#define CD_CAT(a, b) CD_CAT2(a, b)

/* Forward units (n, oblock, pblock), pblock fastest: a tile of CD_FWD_MR
 * output channels x CD_FWD_NR position vectors, CD_FWD_NR masked loads and
 * CD_FWD_MR broadcasts for CD_FWD_MR * CD_FWD_NR multiply-adds per (tap,
 * input channel). */
void CD_CAT(nk_cd_forward_, CD_ISA)(const nk_cd_job *j, int64_t u0, int64_t u1) {
  const int64_t per_n = j->oblocks * j->pblocks;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t n = u / per_n, ob = u % per_n / j->pblocks, v0 = u % j->pblocks * CD_FWD_NR;
    const float *in = j->in + n * j->in_sn + v0 * CD_VL;
    const float *wb = j->wp + ob * 9 * j->cin * CD_FWD_MR;
    CD_V acc[CD_FWD_MR][CD_FWD_NR];
    _Pragma("GCC unroll 8") for (int i = 0; i < CD_FWD_MR; i++)
      _Pragma("GCC unroll 8") for (int k = 0; k < CD_FWD_NR; k++) acc[i][k] = CD_ZERO();
    for (int t = 0; t < 9; t++) {
      CD_M m[CD_FWD_NR];
      _Pragma("GCC unroll 8") for (int k = 0; k < CD_FWD_NR; k++)
        m[k] = v0 + k < j->nvec ? CD_MASK(j->masks, (v0 + k) * NK_CD_TAPS + t) : CD_NOMASK;
      const float *src = in + j->off[t];
      const float *w = wb + t * j->cin * CD_FWD_MR;
      for (int64_t c = 0; c < j->cin; c++, src += j->in_sc, w += CD_FWD_MR) {
        CD_V xv[CD_FWD_NR];
        _Pragma("GCC unroll 8") for (int k = 0; k < CD_FWD_NR; k++) xv[k] = CD_LOADM(m[k], src + k * CD_VL);
        _Pragma("GCC unroll 8") for (int i = 0; i < CD_FWD_MR; i++) {
          const CD_V wv = CD_BCAST(w + i);
          _Pragma("GCC unroll 8") for (int k = 0; k < CD_FWD_NR; k++) acc[i][k] = CD_FMA(wv, xv[k], acc[i][k]);
        }
      }
    }
    /* unrolled with constant indices, so that acc stays in registers */
    _Pragma("GCC unroll 8") for (int i = 0; i < CD_FWD_MR; i++) {
      const int64_t o = ob * CD_FWD_MR + i;
      if (o < j->cout) {
        float *dst = j->out + n * j->out_sn + o * j->out_so + v0 * CD_VL;
        const CD_V b = j->bias ? CD_SET1(j->bias[o]) : CD_ZERO();
        _Pragma("GCC unroll 8") for (int k = 0; k < CD_FWD_NR; k++) {
          if (v0 + k < j->nvec) {
            const CD_V r = j->bias ? CD_ADD(acc[i][k], b) : acc[i][k];
            CD_STOREM(dst + k * CD_VL, CD_MASK(j->masks, (v0 + k) * NK_CD_TAPS + 9), r);
          }
        }
      }
    }
  }
}

/* Weight-gradient units (oblock, rblock): a tile of CD_DW_MR output
 * channels x CD_DW_NR rows r = (c, t) of dw, as dot products over every
 * sample's positions; each step CD_DW_MR + CD_DW_NR loads for
 * CD_DW_MR * CD_DW_NR multiply-adds.  Rows past cout or ck read zeros. */
void CD_CAT(nk_cd_weight_, CD_ISA)(const nk_cd_job *j, int64_t u0, int64_t u1) {
  const int64_t ck = j->cin * 9, rblocks = (ck + CD_DW_NR - 1) / CD_DW_NR;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t o0 = u / rblocks * CD_DW_MR, r0 = u % rblocks * CD_DW_NR;
    int tap[CD_DW_NR];
    int64_t coff[CD_DW_NR];
    for (int k = 0; k < CD_DW_NR; k++) {
      const int64_t r = r0 + k;
      tap[k] = r < ck ? (int)(r % 9) : 9; /* a dead row reads zeros[0, hw) */
      coff[k] = r < ck ? r / 9 * j->in_sc + j->off[r % 9] : 0;
    }
    CD_V acc[CD_DW_MR][CD_DW_NR];
    _Pragma("GCC unroll 8") for (int i = 0; i < CD_DW_MR; i++)
      _Pragma("GCC unroll 8") for (int k = 0; k < CD_DW_NR; k++) acc[i][k] = CD_ZERO();
    for (int64_t n = 0; n < j->n; n++) {
      const float *d[CD_DW_MR], *x[CD_DW_NR];
      for (int i = 0; i < CD_DW_MR; i++)
        d[i] = o0 + i < j->cout ? j->dy + n * j->dy_sn + (o0 + i) * j->dy_so : j->zeros;
      for (int k = 0; k < CD_DW_NR; k++) x[k] = tap[k] < 9 ? j->in + n * j->in_sn + coff[k] : j->zeros;
      for (int64_t v = 0; v < j->nvec; v++) {
        const int64_t mk = v * NK_CD_TAPS, p = v * CD_VL;
        CD_V dv[CD_DW_MR];
        const CD_M live = CD_MASK(j->masks, mk + 9);
        _Pragma("GCC unroll 8") for (int i = 0; i < CD_DW_MR; i++) dv[i] = CD_LOADM(live, d[i] + p);
        _Pragma("GCC unroll 8") for (int k = 0; k < CD_DW_NR; k++) {
          const CD_V xv = CD_LOADM(CD_MASK(j->masks, mk + tap[k]), x[k] + p);
          _Pragma("GCC unroll 8") for (int i = 0; i < CD_DW_MR; i++) acc[i][k] = CD_FMA(dv[i], xv, acc[i][k]);
        }
      }
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < CD_DW_MR; i++)
      _Pragma("GCC unroll 8") for (int k = 0; k < CD_DW_NR; k++)
        if (o0 + i < j->cout && r0 + k < ck)
          j->dw[(o0 + i) * j->dw_so + (r0 + k) * j->dw_sr] = CD_HSUM(acc[i][k]);
  }
}

void CD_CAT(nk_cd_masks_, CD_ISA)(const uint32_t *bits, int64_t count, void *out) {
  for (int64_t k = 0; k < count; k++) CD_MASK_STORE(out, k, bits[k]);
}
