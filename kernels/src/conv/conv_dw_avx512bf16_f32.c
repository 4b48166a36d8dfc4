/* conv_dw_avx512bf16_f32.c — conv_dw_avx512_f32.c's weight-gradient dot
 * products for bfloat16 operands on AVX512_BF16: the same 4 x 6 tiles of
 * float32 accumulators, each step loading 32 positions of every row (16
 * position pairs) and adding both products of a pair with one VDPBF16PS.
 * Both operands hold the positions contiguously, so a pair is two
 * neighbouring positions of one row -- the layout the instruction reads,
 * with no packing.  Like the GEMM's dot-product kernel (and oneDNN), it
 * treats denormal inputs as zero; the sums are float32.  Results depend on
 * the shapes only. */
#include <immintrin.h>
#include <stdint.h>

#include "conv/conv.h"

#define DW_MO 4
#define DW_NR 6

#define DW_STEP(p, m)                                                                 \
  do {                                                                                \
    __m512i dv[DW_MO];                                                                \
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++) dv[i] = _mm512_maskz_loadu_epi16(m, d[i] + (p)); \
    _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) {                         \
      const __m512i xv = _mm512_maskz_loadu_epi16(m, x[j] + (p));                     \
      _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)                         \
        s[i][j] = _mm512_dpbf16_ps(s[i][j], (__m512bh)dv[i], (__m512bh)xv);           \
    }                                                                                 \
  } while (0)

void nk_conv_dw_dots_avx512bf16(const uint16_t *dys, int64_t ldd, const char *xp, const int64_t *off,
                                const uint16_t *zeros, int64_t q, int64_t og, int64_t ck, float *acc,
                                int64_t t0, int64_t t1) {
  const int64_t r_tiles = (ck + DW_NR - 1) / DW_NR;
  const __mmask32 tail = (__mmask32)((UINT64_C(1) << (q % 32)) - 1u);
  const int64_t q32 = q - q % 32;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t o0 = t / r_tiles * DW_MO, r0 = t % r_tiles * DW_NR;
    const uint16_t *d[DW_MO], *x[DW_NR];
    for (int i = 0; i < DW_MO; i++) d[i] = o0 + i < og ? dys + (o0 + i) * ldd : zeros;
    for (int j = 0; j < DW_NR; j++)
      x[j] = r0 + j < ck ? (const uint16_t *)(const void *)(xp + off[r0 + j]) : zeros;
    __m512 s[DW_MO][DW_NR];
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)
      _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) s[i][j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < q32; p += 32) DW_STEP(p, (__mmask32)0xFFFFFFFFu);
    if (tail) DW_STEP(q32, tail);
    float red[DW_MO][DW_NR];
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)
      _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) red[i][j] = _mm512_reduce_add_ps(s[i][j]);
    for (int i = 0; i < DW_MO && o0 + i < og; i++)
      for (int j = 0; j < DW_NR && r0 + j < ck; j++) acc[(o0 + i) * ck + r0 + j] += red[i][j];
  }
}
