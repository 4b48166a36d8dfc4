/* half_rows_impl.h — the bodies of the 16-bit row conversions (half_rows.h),
 * included once per ISA (half_rows.c portable, half_rows_<isa>_f32.c under
 * their ISA's flags) with HR_NAME(x) naming the instantiation.
 *
 * The contiguous float16/bfloat16 <-> float32 loops are written with the
 * ISA's intrinsics (16 lanes under AVX-512F, 8 under AVX2 + F16C): left to
 * the compiler they ran 8 lanes wide for bfloat16 and one element at a time
 * for float16 (nk_f16_to_f32's branches do not vectorise: float16 rows cost
 * 40x bfloat16 ones).  Strided rows are gathered into (scattered from) a
 * small contiguous block of 16-bit values and converted with the same
 * vector loop.  Every path gives the bits of dtype_convert.h's scalar
 * conversions: bfloat16 rounds to nearest even with NaN -> 0x7FC0, float16
 * NaN -> sign | 0x7E00 (lanes canonicalised before the F16C conversion, as
 * copy_avx2_half.c does), float16 -> float32 quiets NaNs as the FPU does. */
#include <string.h>

#include "common/dtype_convert.h"

#if defined(__AVX512F__)
#include "common/half_simd_avx512.h"
#elif defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif

/* contiguous 16-bit -> float32 */
static void HR_NAME(widen)(nrt_dtype t, const uint16_t *h, int64_t m, float *buf) {
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= m; j += 16) _mm512_storeu_ps(buf + j, nk_h16_load_avx512(t, h + j));
#elif defined(__AVX2__) && defined(__F16C__)
  if (t == NRT_BFLOAT16)
    for (; j + 8 <= m; j += 8) {
      __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + j)));
      _mm256_storeu_ps(buf + j, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
  else
    for (; j + 8 <= m; j += 8)
      _mm256_storeu_ps(buf + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
#endif
  if (t == NRT_BFLOAT16)
    for (; j < m; j++) buf[j] = nk_bf16_to_f32(h[j]);
  else
    for (; j < m; j++) buf[j] = nk_f16_to_f32(h[j]);
}

/* float32 -> contiguous 16-bit */
static void HR_NAME(narrow)(nrt_dtype t, uint16_t *d, int64_t m, const float *v) {
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= m; j += 16) nk_h16_store_avx512(t, d + j, _mm512_loadu_ps(v + j));
#elif defined(__AVX2__) && defined(__F16C__)
  if (t == NRT_BFLOAT16) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
    const __m256i qnan = _mm256_set1_epi32(0x7FC0);
    for (; j + 16 <= m; j += 16) {
      __m256i r2[2];
      for (int k = 0; k < 2; k++) {
        __m256 x = _mm256_loadu_ps(v + j + 8 * k);
        __m256i u = _mm256_castps_si256(x);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, bias)), 16);
        r2[k] = _mm256_blendv_epi8(r, qnan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
      }
      __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r2[0], r2[1]), 0xD8);
      _mm256_storeu_si256((__m256i *)(d + j), packed);
    }
  } else {
    const __m256 signmask = _mm256_set1_ps(-0.0f);
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
    for (; j + 8 <= m; j += 8) {
      __m256 x = _mm256_loadu_ps(v + j);
      __m256 c = _mm256_or_ps(_mm256_and_ps(x, signmask), qnan);
      x = _mm256_blendv_ps(x, c, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
      _mm_storeu_si128((__m128i *)(d + j), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
#endif
  if (t == NRT_BFLOAT16)
    for (; j < m; j++) d[j] = nk_f32_to_bf16(v[j]);
  else
    for (; j < m; j++) d[j] = nk_f32_to_f16(v[j]);
}

#define HR_BLOCK 256 /* 16-bit values gathered per step of a strided row */

const float *HR_NAME(in)(nrt_dtype t, const char *x, int64_t st, int64_t m, float *buf) {
  if (st == 0) {
    buf[0] = nk_load_f32(t, x);
  } else if (t == NRT_FLOAT32 && st == 4) {
    return (const float *)(const void *)x; /* already float: read in place */
  } else if ((t == NRT_BFLOAT16 || t == NRT_FLOAT16) && st == 2) {
    HR_NAME(widen)(t, (const uint16_t *)(const void *)x, m, buf);
  } else if (t == NRT_BFLOAT16 || t == NRT_FLOAT16) {
    uint16_t tmp[HR_BLOCK];
    for (int64_t j0 = 0; j0 < m; j0 += HR_BLOCK) {
      const int64_t b = m - j0 < HR_BLOCK ? m - j0 : HR_BLOCK;
      const char *p = x + j0 * st;
      for (int64_t j = 0; j < b; j++) tmp[j] = nk_read_u16(p + j * st);
      HR_NAME(widen)(t, tmp, b, buf + j0);
    }
  } else {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_load_f32(t, x + j * st);
  }
  return buf;
}

void HR_NAME(out)(nrt_dtype t, char *o, int64_t st, int64_t m, const float *v) {
  if ((t == NRT_BFLOAT16 || t == NRT_FLOAT16) && st == 2) {
    HR_NAME(narrow)(t, (uint16_t *)(void *)o, m, v);
  } else if (t == NRT_BFLOAT16 || t == NRT_FLOAT16) {
    uint16_t tmp[HR_BLOCK];
    for (int64_t j0 = 0; j0 < m; j0 += HR_BLOCK) {
      const int64_t b = m - j0 < HR_BLOCK ? m - j0 : HR_BLOCK;
      HR_NAME(narrow)(t, tmp, b, v + j0);
      char *p = o + j0 * st;
      for (int64_t j = 0; j < b; j++) nk_write_u16(p + j * st, tmp[j]);
    }
  } else if (t == NRT_FLOAT32 && st == 4) {
    if ((const char *)v != o) memcpy(o, v, (size_t)m * 4);
  } else {
    for (int64_t j = 0; j < m; j++) nk_store_f32(t, o + j * st, v[j]);
  }
}

#undef HR_BLOCK
