/* gemm_pack_avx2_f32.c — packing a float32 GEMM operand whose k index is
 * the contiguous one (row-major A, or B given as its transpose: x @ W^T,
 * the linear layer), with 8x8 register transposes instead of one scalar
 * load and store per element.
 *
 * Such an operand is a transpose away from the sliver layout (gemm.c:
 * dst[c * width + i] = x[i][c]).  Element by element that is two memory
 * operations per value; at transformer training shapes (k = 192..768)
 * packing then costs a third of the micro-kernel's time.  Eight rows of
 * eight k values are loaded as eight vectors, transposed in registers (24
 * shuffles) and stored as eight runs of eight rows; four more rows (a
 * 12-row sliver's last third) as two 4x4 transposes, two more as
 * interleaved pairs; a 6-row sliver (AVX2) as one transpose stored in
 * overlapping runs.  The last odd row and k past the last multiple of
 * eight go element by element; padding rows are zeros.  AVX2 (every AVX-512 CPU has it), chosen
 * at run time by gemm.c. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "gemm/gemm.h"

static inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

void nk_gemm_pack_kmajor_avx2_f32(const char *src, const int64_t *roff, int64_t rs, int valid,
                                  int64_t cols, int width, float *dst) {
#define NK_ROW_AT(i) (src + (roff ? roff[i] : (int64_t)(i) * rs))
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    float *d = dst + c * width;
    int i = 0;
    if (width == 6 && valid == 6) {
      /* A full 6-row sliver (the AVX2 kernel's): its eight k steps are 48
       * contiguous values, so the 8x8 transpose (two zero rows) is stored
       * as eight 8-lane stores 6 values apart, each one's two zero lanes
       * overwritten by the next; the last one is stored as 4 + 2 values,
       * so nothing past the 48 is touched.  Rows 4 and 5 had gone element
       * by element: 12-20% of a 128^3 product's time. */
      __m256 r[8];
      for (int t = 0; t < 6; t++) r[t] = _mm256_loadu_ps((const float *)NK_ROW_AT(t) + c);
      r[6] = r[7] = _mm256_setzero_ps();
      transpose8(r);
      for (int t = 0; t < 7; t++) _mm256_storeu_ps(d + t * 6, r[t]);
      _mm_storeu_ps(d + 42, _mm256_castps256_ps128(r[7]));
      _mm_storel_pi((__m64 *)(void *)(d + 46), _mm256_extractf128_ps(r[7], 1));
      continue;
    }
    for (; i + 8 <= valid; i += 8) {
      __m256 r[8];
      for (int t = 0; t < 8; t++) r[t] = _mm256_loadu_ps((const float *)NK_ROW_AT(i + t) + c);
      transpose8(r);
      for (int t = 0; t < 8; t++) _mm256_storeu_ps(d + t * width + i, r[t]);
    }
    /* four more rows (a 12-row sliver's last third): two 4x4 transposes */
    for (; i + 4 <= valid; i += 4)
      for (int h = 0; h < 8; h += 4) {
        __m128 r0 = _mm_loadu_ps((const float *)NK_ROW_AT(i) + c + h);
        __m128 r1 = _mm_loadu_ps((const float *)NK_ROW_AT(i + 1) + c + h);
        __m128 r2 = _mm_loadu_ps((const float *)NK_ROW_AT(i + 2) + c + h);
        __m128 r3 = _mm_loadu_ps((const float *)NK_ROW_AT(i + 3) + c + h);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(d + (h + 0) * width + i, r0);
        _mm_storeu_ps(d + (h + 1) * width + i, r1);
        _mm_storeu_ps(d + (h + 2) * width + i, r2);
        _mm_storeu_ps(d + (h + 3) * width + i, r3);
      }
    for (; i + 2 <= valid; i += 2) /* two rows: interleaved, stored as pairs */
      for (int h = 0; h < 8; h += 4) {
        const __m128 r0 = _mm_loadu_ps((const float *)NK_ROW_AT(i) + c + h);
        const __m128 r1 = _mm_loadu_ps((const float *)NK_ROW_AT(i + 1) + c + h);
        const __m128 lo = _mm_unpacklo_ps(r0, r1), hi = _mm_unpackhi_ps(r0, r1);
        _mm_storel_pi((__m64 *)(void *)(d + (h + 0) * width + i), lo);
        _mm_storeh_pi((__m64 *)(void *)(d + (h + 1) * width + i), lo);
        _mm_storel_pi((__m64 *)(void *)(d + (h + 2) * width + i), hi);
        _mm_storeh_pi((__m64 *)(void *)(d + (h + 3) * width + i), hi);
      }
    for (; i < valid; i++) /* memcpy: rows of bfloat16 pairs are 2-byte aligned */
      for (int t = 0; t < 8; t++) memcpy(&d[t * width + i], NK_ROW_AT(i) + (c + t) * 4, 4);
    for (; i < width; i++)
      for (int t = 0; t < 8; t++) d[t * width + i] = 0;
  }
  for (; c < cols; c++) {
    float *d = dst + c * width;
    int i = 0;
    for (; i < valid; i++) memcpy(&d[i], NK_ROW_AT(i) + c * 4, 4);
    for (; i < width; i++) d[i] = 0;
  }
}
#undef NK_ROW_AT
