/* half_simd_avx512.h — 16 float16/bfloat16 lanes <-> one __m512 of float32,
 * for code compiled with -mavx512f (half_rows_avx512_f32.c's conversions
 * and the fused 16-bit binary loop, binary_avx512_half.c).  Bit-identical
 * to dtype_convert.h's scalar conversions: bfloat16 rounds to nearest even
 * with NaN -> 0x7FC0; float16 NaN lanes are made sign | 0x7FC00000 before
 * the conversion, which gives c10's sign | 0x7E00; float16 -> float32 quiets
 * NaNs as the FPU (and nk_f16_to_f32) does.
 *
 * Compiled with AVX512_BF16 (the *_avx512bf16_* files), the bfloat16 store
 * uses the instruction that rounds to nearest even (vcvtneps2bf16) for
 * vectors with no NaN and no subnormal lane: for every other float it
 * gives c10's bits (the test sweeps all 2^32), but it quiets NaNs keeping
 * sign and payload (c10: 0x7FC0) and flushes subnormals to zero, so such
 * vectors (one fpclass test) take the integer rounding.  3 instructions
 * instead of 9, and rounding is most of a 16-bit elementwise op's work. */
#ifndef NK_HALF_SIMD_AVX512_H
#define NK_HALF_SIMD_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "neuron_runtime.h"

static inline __m512 nk_h16_load_avx512(nrt_dtype t, const uint16_t *h) {
  __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)h);
  if (t == NRT_BFLOAT16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  return _mm512_cvtph_ps(raw);
}

static inline void nk_h16_store_avx512(nrt_dtype t, uint16_t *d, __m512 x) {
#if defined(__AVX512BF16__) && defined(__AVX512DQ__)
  /* fpclass 0x81: quiet or signalling NaN; 0x20: subnormal */
  if (t == NRT_BFLOAT16 && !_mm512_fpclass_ps_mask(x, 0x81 | 0x20)) {
    _mm256_storeu_si256((__m256i *)(void *)d, (__m256i)_mm512_cvtneps_pbh(x));
    return;
  }
#endif
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  if (t == NRT_BFLOAT16) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
    _mm256_storeu_si256((__m256i *)(void *)d, _mm512_cvtepi32_epi16(r));
  } else {
    __m512i c = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)),
                                _mm512_set1_epi32(0x7FC00000));
    x = _mm512_mask_mov_ps(x, nan, _mm512_castsi512_ps(c));
    _mm256_storeu_si256((__m256i *)(void *)d, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

#endif /* NK_HALF_SIMD_AVX512_H */
