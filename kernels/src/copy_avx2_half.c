/* copy_avx2_half.c — contiguous float32 <-> float16/bfloat16, AVX2 + F16C.
 * Compiled with -mavx2 -mfma -mf16c; called only when nk_cpu_isa() >=
 * NK_ISA_AVX2.  Tails use the scalar conversions. */
#include <immintrin.h>

#include "copy_simd.h"
#include "dtype_convert.h"

/* NaN lanes become sign | 0x7FC00000, which converts to c10's sign | 0x7E00
 * (F16C alone would keep the payload's top bits). */
static inline __m256 canonical_nan(__m256 v) {
  __m256 nan = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)),
                            _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
  return _mm256_blendv_ps(v, nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

void nk_convert_avx2_f32_to_f16(int64_t n, void *out, const void *in) {
  uint16_t *o = out;
  const float *x = in;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = canonical_nan(_mm256_loadu_ps(x + i));
    _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; i++) o[i] = nk_f32_to_f16(x[i]);
}

void nk_convert_avx2_f16_to_f32(int64_t n, void *out, const void *in) {
  float *o = out;
  const uint16_t *x = in;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
  for (; i < n; i++) o[i] = nk_f16_to_f32(x[i]);
}

/* c10's round_to_nearest_even on 8 lanes: (u + 0x7FFF + lsb) >> 16, NaN ->
 * 0x7FC0; the result sits in the low half of each 32-bit lane. */
static inline __m256i bf16_round(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), is_nan);
}

void nk_convert_avx2_f32_to_bf16(int64_t n, void *out, const void *in) {
  uint16_t *o = out;
  const float *x = in;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    /* packus interleaves 128-bit halves; permute restores element order */
    __m256i lo = bf16_round(_mm256_loadu_ps(x + i)), hi = bf16_round(_mm256_loadu_ps(x + i + 8));
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256((__m256i *)(o + i), packed);
  }
  for (; i < n; i++) o[i] = nk_f32_to_bf16(x[i]);
}

void nk_convert_avx2_bf16_to_f32(int64_t n, void *out, const void *in) {
  float *o = out;
  const uint16_t *x = in;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
    _mm256_storeu_ps(o + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; i++) o[i] = nk_bf16_to_f32(x[i]);
}
