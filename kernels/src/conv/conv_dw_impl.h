/* conv_dw_impl.h — the implicit convolution's weight-gradient dot-product
 * tiles, written once for conv_dw_avx512_f32.c (float32 operands, FMA) and
 * conv_dw_avx512bf16_f32.c (bfloat16 operands, VDPBF16PS on position
 * pairs): acc[o][r] += sum over q of dy[o][q] * x[r][q], a tile of DW_MO dy
 * rows x DW_NR x rows in float32 vector accumulators, lanes reduced once
 * per tile.  The including file defines
 *   DW_NAME        the function,  DW_T  the element type,
 *   DW_STEP_N      positions per step (a vector of DW_T),
 *   DW_MASK_T      the tail mask's type,
 *   DW_LOAD(m, p)  a masked vector load,  DW_KSTEP(acc, d, x)  one step. */
#include <immintrin.h>
#include <stdint.h>

#include "conv/conv.h"

#define DW_MO NK_CONV_DW_TILE_O
#define DW_NR NK_CONV_DW_TILE_R

/* One step of the tile: DW_MO + DW_NR loads (masked by m), DW_MO * DW_NR
 * vector multiply-adds. */
#define DW_STEP(p, m)                                                                 \
  do {                                                                                \
    __m512i dv[DW_MO];                                                                \
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++) dv[i] = DW_LOAD(m, d[i] + (p)); \
    _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) {                         \
      const __m512i xv = DW_LOAD(m, x[j] + (p));                                      \
      _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++) s[i][j] = DW_KSTEP(s[i][j], dv[i], xv); \
    }                                                                                 \
  } while (0)

/* Units [t0, t1) of the tile grid (o tiles major); a unit adds its tile to
 * acc (row stride ck).  Rows past og or ck read the zero row (zeros). */
void DW_NAME(const DW_T *dys, int64_t ldd, const char *xp, const int64_t *off, const DW_T *zeros,
             int64_t q, int64_t og, int64_t ck, float *acc, int64_t t0, int64_t t1) {
  const int64_t r_tiles = (ck + DW_NR - 1) / DW_NR;
  const DW_MASK_T tail = (DW_MASK_T)((UINT64_C(1) << (q % DW_STEP_N)) - 1u);
  const int64_t qs = q - q % DW_STEP_N;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t o0 = t / r_tiles * DW_MO, r0 = t % r_tiles * DW_NR;
    const DW_T *d[DW_MO], *x[DW_NR];
    for (int i = 0; i < DW_MO; i++) d[i] = o0 + i < og ? dys + (o0 + i) * ldd : zeros;
    for (int j = 0; j < DW_NR; j++) x[j] = r0 + j < ck ? (const DW_T *)(const void *)(xp + off[r0 + j]) : zeros;
    __m512 s[DW_MO][DW_NR];
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)
      _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) s[i][j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < qs; p += DW_STEP_N) DW_STEP(p, (DW_MASK_T)~(DW_MASK_T)0);
    if (tail) DW_STEP(qs, tail);
    float red[DW_MO][DW_NR];
    _Pragma("GCC unroll 4") for (int i = 0; i < DW_MO; i++)
      _Pragma("GCC unroll 6") for (int j = 0; j < DW_NR; j++) red[i][j] = _mm512_reduce_add_ps(s[i][j]);
    for (int i = 0; i < DW_MO && o0 + i < og; i++)
      for (int j = 0; j < DW_NR && r0 + j < ck; j++) acc[(o0 + i) * ck + r0 + j] += red[i][j];
  }
}
