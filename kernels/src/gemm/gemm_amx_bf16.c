/* gemm_amx_bf16.c — the bfloat16 GEMM micro-kernels for CPUs with AMX
 * (AMX-TILE + AMX-BF16: Sapphire Rapids and later), float32 accumulators.
 *
 * One TDPBF16PS multiplies a 16 x 32 bfloat16 tile of A by a 32 x 16 tile
 * of B into a 16 x 16 float32 tile: 8192 multiply-adds, 16 times the work
 * of an AVX-512 VDPBF16PS.  ATen's CPU (oneDNN) runs bfloat16 matmul on the
 * same instruction on such CPUs, which made its products 7-15x faster than
 * our AVX512_BF16 kernel there.
 *
 * Layouts (gemm.c packs them; kp, the k pairs, is a multiple of 16):
 *  - A: k pairs (32-bit words: k = 2q in the low half, 2q + 1 in the
 *    high) in tile order: per 16 pairs, MR rows of 16 words, so each tile
 *    is 1 KiB contiguous (stride 64 bytes) and A is read in order;
 *  - B: the AVX512_BF16 kernel's sliver, pair-major, NR = 32 words per pair
 *    row: 16 pair rows x 16 columns is already AMX's "VNNI" layout for B,
 *    a strided load (stride 128 bytes) per 16 columns.
 * The MR x 32 block of C lives in MR / 16 x 2 accumulator tiles (tiles 0-3),
 * A in tiles 4-5 and B in tiles 6-7; one k step of 16 pairs is 4 loads and 4
 * (MR 32) or 2 (MR 16) products.  Like VDPBF16PS, TDPBF16PS treats denormal
 * inputs as zero and rounds its float32 sums to nearest even; the order of
 * the sums is a function of k alone (the k blocks are), never of threads.
 *
 * Tile configuration is per-thread state: nk_gemm_amx_begin loads it before
 * a run of micro-kernel calls and nk_gemm_amx_end releases the tiles after
 * (gemm.c's compute_range brackets its calls), so nothing else on the
 * thread (oneDNN, which configures its own) ever sees our configuration,
 * and a thread not using AMX does not carry its 8 KiB of tile state through
 * context switches. */
#include <immintrin.h>
#include <stdint.h>

#include "gemm/gemm.h"

typedef struct tile_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16]; /* bytes per row of tile i */
  uint8_t rows[16];
} tile_config;

/* Every tile 16 rows x 64 bytes.  A constant in memory: gcc 12 does not
 * model ldtilecfg's read of its operand, and dropped the stores that built
 * the configuration on the stack (a #GP on the invalid one left). */
static const _Alignas(64) tile_config config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

void nk_gemm_amx_begin(void) { _tile_loadconfig(&config); }

void nk_gemm_amx_end(void) { _tile_release(); }

/* c (MR x 32, leading dimension ldc) from the float32 block acc (stride
 * 32): the contract of gemm.h, as gemm_simd.h's kernels do it. */
static inline __attribute__((always_inline)) void update_c(int mr, const float *acc, float *c,
                                                           int64_t ldc, const void *alphap,
                                                           const void *betap) {
  const float alpha = *(const float *)alphap, beta = *(const float *)betap;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < mr; i++)
    for (int v = 0; v < 2; v++) {
      const __m512 s = _mm512_load_ps(acc + i * 32 + v * 16);
      float *o = c + i * ldc + v * 16;
      if (beta == 0)
        _mm512_storeu_ps(o, _mm512_mul_ps(va, s));
      else if (beta == 1)
        _mm512_storeu_ps(o, _mm512_fmadd_ps(va, s, _mm512_loadu_ps(o)));
      else
        _mm512_storeu_ps(o, _mm512_fmadd_ps(va, s, _mm512_mul_ps(vb, _mm512_loadu_ps(o))));
    }
}

/* The micro-kernel for MR = 16 * M2 rows.  With alpha 1 and beta 0 or 1
 * (every k block but a scaled product's: the workspace, and direct
 * outputs after the first block) C itself is the accumulators' start and
 * end, loaded and stored as tiles; otherwise the tiles go through acc and
 * update_c. */
static inline __attribute__((always_inline)) void ukr(int m2, int64_t kp, const char *a,
                                                      const char *b, float *c, int64_t ldc,
                                                      const void *alphap, const void *betap) {
  const float alpha = *(const float *)alphap, beta = *(const float *)betap;
  const int in_place = alpha == 1 && (beta == 0 || beta == 1);
  const int64_t cs = ldc * 4;
  if (in_place && beta == 1) {
    _tile_loadd(0, c, cs);
    _tile_loadd(1, c + 16, cs);
    if (m2 == 2) {
      _tile_loadd(2, c + 16 * ldc, cs);
      _tile_loadd(3, c + 16 * ldc + 16, cs);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if (m2 == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (int64_t q = 0; q < kp; q += 16) {
    const char *ak = a + q / 16 * m2 * 1024; /* this k step's A tiles, 1 KiB each */
    _tile_loadd(4, ak, 64);
    _tile_loadd(6, b + q * 128, 128);
    _tile_loadd(7, b + q * 128 + 64, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (m2 == 2) {
      _tile_loadd(5, ak + 1024, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (in_place) {
    _tile_stored(0, c, cs);
    _tile_stored(1, c + 16, cs);
    if (m2 == 2) {
      _tile_stored(2, c + 16 * ldc, cs);
      _tile_stored(3, c + 16 * ldc + 16, cs);
    }
    return;
  }
  _Alignas(64) float acc[32 * 32];
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
  if (m2 == 2) {
    _tile_stored(2, acc + 16 * 32, 128);
    _tile_stored(3, acc + 16 * 32 + 16, 128);
  }
  update_c(16 * m2, acc, c, ldc, alphap, betap);
}

void nk_gemm_ukr_amx_bf16_32x32(int64_t kp, const void *a, const void *b, void *c, int64_t ldc,
                                const void *alphap, const void *betap) {
  ukr(2, kp, a, b, c, ldc, alphap, betap);
}

void nk_gemm_ukr_amx_bf16_16x32(int64_t kp, const void *a, const void *b, void *c, int64_t ldc,
                                const void *alphap, const void *betap) {
  ukr(1, kp, a, b, c, ldc, alphap, betap);
}
