/* simd_avx2_f32.h — the float32 vector macros of AVX2+FMA: 8 lanes, masks as vectors, shared by the
 * vector bodies written over them (unary_simd_impl.h, simd_exp_f32.h,
 * softmax_simd_impl.h).  Include from a *_avx2_*.c file only (its flags). */
#ifndef NK_SIMD_AVX2_F32_H
#define NK_SIMD_AVX2_F32_H

#include <immintrin.h>

#define VT __m256
#define VI __m256i
#define VTAIL __m256i
#define VMASK __m256 /* a compare's result */
#define LANES 8
#define VSET(c) _mm256_set1_ps((float)(c))
#define VZERO() _mm256_setzero_ps()
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VSQRT _mm256_sqrt_ps
#define VMIN _mm256_min_ps
#define VMAX _mm256_max_ps
#define VFMADD _mm256_fmadd_ps
#define VFNMADD _mm256_fnmadd_ps
#define VFMSUB _mm256_fmsub_ps
#define VAND _mm256_and_ps
#define VOR _mm256_or_ps
#define VXOR _mm256_xor_ps
#define VANDNOT _mm256_andnot_ps
#define VROUND_NEAREST(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VCVT_I _mm256_cvtps_epi32
#define ISET _mm256_set1_epi32
#define IADD _mm256_add_epi32
#define ISUB _mm256_sub_epi32
#define ISRAI1(i) _mm256_srai_epi32(i, 1)
#define ISLLI _mm256_slli_epi32
#define ICAST_F _mm256_castsi256_ps
#define VCAST_I _mm256_castps_si256
#define VCVT_F _mm256_cvtepi32_ps
#define IAND _mm256_and_si256
#define IMIN _mm256_min_epi32
#define ISRAI _mm256_srai_epi32
#define GT _CMP_GT_OQ
#define LT _CMP_LT_OQ
#define LE _CMP_LE_OQ
#define EQ _CMP_EQ_OQ
#define NLT _CMP_NLT_UQ /* not less than: also true for NaN */
#define NGT _CMP_NGT_UQ
#define UNORD _CMP_UNORD_Q
#define VCMP(a, b, pred) _mm256_cmp_ps(a, b, pred)
#define VSEL(m, t, f) _mm256_blendv_ps(f, t, m)
#define VMOR _mm256_or_ps
#define VANY(m) (_mm256_movemask_ps(m) != 0)
#define VLOADU _mm256_loadu_ps
#define VSTOREU _mm256_storeu_ps
#define TAIL_MASK(rem) _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define TAIL_LOAD(p, m) _mm256_maskload_ps(p, m)
#define TAIL_STORE(p, m, v) _mm256_maskstore_ps(p, m, v)

/* y * 2^n for integral n (as float) in [-160, 160], rounded once: two
 * factors 2^(n/2), each a normal float, so that results down to the
 * subnormals are kept and large n overflows to inf. */
static inline VT vldexp(VT y, VT n) {
  VI k = VCVT_I(n);
  VI k1 = ISRAI1(k), k2 = ISUB(k, k1);
  VT s1 = ICAST_F(ISLLI(IADD(k1, ISET(127)), 23));
  VT s2 = ICAST_F(ISLLI(IADD(k2, ISET(127)), 23));
  return VMUL(VMUL(y, s1), s2);
}

/* a / b (simd_avx512_f32.h's reciprocal form needs rcp14's 14 bits;
 * AVX2's 12-bit rcpps would need a second Newton step, and its divider
 * takes 8 lanes per ~5 cycles: the division stays). */
static inline VT vdiv_fast(VT a, VT b) { return VDIV(a, b); }

/* the sum of the lanes (pairwise halves) */
static inline float vreduce_add(VT v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#endif /* NK_SIMD_AVX2_F32_H */
