/* conv_direct_avx2_f32.c — the direct 3x3 convolution's tiles on AVX2
 * (conv_direct_impl.h): 8 lanes, masks as vectors (VMASKMOVPS), 4 x 2
 * forward and 4 x 2 weight-gradient accumulators (16 registers hold the
 * tile, its loads and masks; the weight gradient's 2 x 3 tile was load
 * bound, 8 loads for 6 multiply-adds: 16->16 @16, batch 32, 0.44 -> 0.35
 * ms; a 6 x 2 forward tile measured no faster than 4 x 2). */
#include "conv/conv_direct.h"

#include <immintrin.h>

static inline float cd_hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline void cd_mask_store_avx2(void *out, int64_t k, uint32_t bits) {
  int32_t lanes[8];
  for (int l = 0; l < 8; l++) lanes[l] = (bits >> l) & 1u ? -1 : 0;
  _mm256_storeu_si256((__m256i *)out + k, _mm256_loadu_si256((const __m256i *)lanes));
}

#define CD_ISA avx2_f32
#define CD_VL NK_CD_AVX2_VL
#define CD_V __m256
#define CD_M __m256i
#define CD_FWD_MR NK_CD_AVX2_FWD_MR
#define CD_FWD_NR NK_CD_AVX2_FWD_NR
#define CD_DW_MR NK_CD_AVX2_DW_MR
#define CD_DW_NR NK_CD_AVX2_DW_NR
#define CD_ZERO() _mm256_setzero_ps()
#define CD_SET1(x) _mm256_set1_ps(x)
#define CD_BCAST(p) _mm256_broadcast_ss(p)
#define CD_ADD(a, b) _mm256_add_ps(a, b)
#define CD_FMA(a, b, acc) _mm256_fmadd_ps(a, b, acc)
#define CD_LOADM(m, p) _mm256_maskload_ps(p, m)
#define CD_STOREM(p, m, v) _mm256_maskstore_ps(p, m, v)
#define CD_HSUM(v) cd_hsum_avx2(v)
#define CD_MASK(table, k) _mm256_loadu_si256((const __m256i *)(table) + (k))
#define CD_NOMASK _mm256_setzero_si256()
#define CD_MASK_STORE(out, k, bits) cd_mask_store_avx2(out, k, bits)
#include "conv/conv_direct_impl.h"
