/* conv_dw_avx512_f32.c — the implicit convolution's weight gradient for
 * few output channels, as dot products along the positions.
 *
 * acc[o][r] += sum over q of dy[o][q] * x[r][q], where dy's rows are the
 * gathered output gradient (dys in conv_implicit.c) and x's row r is the
 * padded input shifted by tap r (x[r][q] = xp[off[r] + q]): both operands
 * have the positions contiguous.  As a GEMM (k = positions) one operand is
 * packed with transposes, and with 16 or 32 output rows each packed element
 * serves 16 or 32 multiply-adds: the packing costs as much as the products.
 * Here nothing is packed: a tile of 4 dy rows x 6 x rows keeps 24 vector
 * accumulators, each step loading 4 + 6 vectors for 24 FMAs, and reduces
 * the lanes once per tile at the end.  Rows past og or ck are read from a
 * zero row (zeros, >= q floats), so every tile is full.
 * The sum of each (o, r) runs in a fixed order (16 lanes over the positions,
 * then the lanes pairwise): results do not depend on the thread count. */
#include <immintrin.h>
#include <stdint.h>

#include "conv/conv.h"

#define DW_MO 4
#define DW_NR 6

/* Units [t0, t1) of the tile grid (o tiles major); a unit adds its tile to
 * acc (row stride ck). */
/* One k step of the tile: 4 + 6 loads (masked by m), 24 FMAs. */
#define DW_STEP(p, m)                                                                 \
  do {                                                                                \
    __m512 dv[DW_MO];                                                                 \
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++) dv[i] = _mm512_maskz_loadu_ps(m, d[i] + (p)); \
    _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) {                         \
      const __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + (p));                         \
      _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++) s[i][j] = _mm512_fmadd_ps(dv[i], xv, s[i][j]); \
    }                                                                                 \
  } while (0)

/* Units [t0, t1) of the tile grid (o tiles major); a unit adds its tile to
 * acc (row stride ck). */
void nk_conv_dw_dots_avx512_f32(const float *dys, int64_t ldd, const char *xp, const int64_t *off,
                                const float *zeros, int64_t q, int64_t og, int64_t ck, float *acc,
                                int64_t t0, int64_t t1) {
  const int64_t r_tiles = (ck + DW_NR - 1) / DW_NR;
  const __mmask16 tail = (__mmask16)((1u << (q % 16)) - 1u);
  const int64_t q16 = q - q % 16;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t o0 = t / r_tiles * DW_MO, r0 = t % r_tiles * DW_NR;
    const float *d[DW_MO], *x[DW_NR];
    for (int i = 0; i < DW_MO; i++) d[i] = o0 + i < og ? dys + (o0 + i) * ldd : zeros;
    for (int j = 0; j < DW_NR; j++)
      x[j] = r0 + j < ck ? (const float *)(const void *)(xp + off[r0 + j]) : zeros;
    __m512 s[DW_MO][DW_NR];
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)
      _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) s[i][j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < q16; p += 16) DW_STEP(p, (__mmask16)0xFFFF);
    if (tail) DW_STEP(q16, tail);
    float red[DW_MO][DW_NR];
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)
      _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) red[i][j] = _mm512_reduce_add_ps(s[i][j]);
    for (int i = 0; i < DW_MO && o0 + i < og; i++)
      for (int j = 0; j < DW_NR && r0 + j < ck; j++) acc[(o0 + i) * ck + r0 + j] += red[i][j];
  }
}
