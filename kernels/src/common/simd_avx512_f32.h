/* simd_avx512_f32.h — the float32 vector macros of AVX-512F: 16 lanes, compare masks in k registers, shared by the
 * vector bodies written over them (unary_simd_impl.h, simd_exp_f32.h,
 * softmax_simd_impl.h).  Include from a *_avx512_*.c file only (its flags). */
#ifndef NK_SIMD_AVX512_F32_H
#define NK_SIMD_AVX512_F32_H

#include <immintrin.h>

#define VT __m512
#define VI __m512i
#define VTAIL __mmask16
#define VMASK __mmask16 /* a compare's result */
#define LANES 16
#define VSET(c) _mm512_set1_ps((float)(c))
#define VZERO() _mm512_setzero_ps()
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VSQRT _mm512_sqrt_ps
#define VMIN _mm512_min_ps
#define VMAX _mm512_max_ps
#define VFMADD _mm512_fmadd_ps
#define VFNMADD _mm512_fnmadd_ps
#define VFMSUB _mm512_fmsub_ps
/* AVX-512F has the bitwise ops on integers only (the _ps forms are DQ) */
#define VAND(a, b) _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define VOR(a, b) _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define VXOR(a, b) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define VANDNOT(a, b) _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define VROUND_NEAREST(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VCVT_I _mm512_cvtps_epi32
#define ISET _mm512_set1_epi32
#define IADD _mm512_add_epi32
#define ISUB _mm512_sub_epi32
#define ISRAI1(i) _mm512_srai_epi32(i, 1)
#define ISLLI _mm512_slli_epi32
#define ICAST_F _mm512_castsi512_ps
#define VCAST_I _mm512_castps_si512
#define VCVT_F _mm512_cvtepi32_ps
#define IAND _mm512_and_si512
#define IMIN _mm512_min_epi32
#define ISRAI _mm512_srai_epi32
#define GT _CMP_GT_OQ
#define LT _CMP_LT_OQ
#define LE _CMP_LE_OQ
#define EQ _CMP_EQ_OQ
#define NLT _CMP_NLT_UQ /* not less than: also true for NaN */
#define NGT _CMP_NGT_UQ
#define UNORD _CMP_UNORD_Q
#define VCMP(a, b, pred) _mm512_cmp_ps_mask(a, b, pred)
#define VSEL(m, t, f) _mm512_mask_blend_ps(m, f, t)
#define VMOR(a, b) ((__mmask16)((a) | (b)))
#define VANY(m) ((m) != 0)
#define VLOADU _mm512_loadu_ps
#define VSTOREU _mm512_storeu_ps
#define TAIL_MASK(rem) ((__mmask16)((1u << (rem)) - 1u))
#define TAIL_LOAD(p, m) _mm512_maskz_loadu_ps(m, p)
#define TAIL_STORE(p, m, v) _mm512_mask_storeu_ps(p, m, v)

/* y * 2^n for integral n (as float) in [-160, 160], rounded once: scalef
 * does in one instruction what AVX2 needs two integer-built factors for,
 * and keeps subnormal results and overflow to inf. */
static inline VT vldexp(VT y, VT n) { return _mm512_scalef_ps(y, n); }

/* a / b without the divider, for the activations' 1/(1+e) forms: a 14-bit
 * reciprocal, one Newton step, then one correction of the quotient
 * (Markstein): six pipelined FMA-port instructions where vdivps holds the
 * divider for ~16 cycles per vector.  The quotient is the correctly rounded
 * one but in rare cases, which are one ulp off (test_kernels_unary_ulp
 * bounds the ops built on it).  Every special operand (b zero, subnormal
 * below 2^-128, infinite or NaN; a infinite or NaN) and an overflowing
 * quotient make q NaN here, and those lanes alone are divided exactly, so
 * the special values are vdivps's own.  Only those lanes: dividing the
 * whole vector again would give its other lanes the correctly rounded
 * quotient where q is one ulp off, so a lane's bits would depend on
 * whether a neighbour is NaN, i.e. on where the vectors start (a view's
 * offset, a thread's share, a fused tile).  The divide stays behind the
 * branch, off the common path. */
static inline VT vdiv_fast(VT a, VT b) {
  const VT y0 = _mm512_rcp14_ps(b);
  const VT y1 = VFMADD(y0, VFNMADD(b, y0, VSET(1.0f)), y0);
  const VT q0 = VMUL(a, y1);
  const VT q = VFMADD(VFNMADD(b, q0, a), y1, q0);
  const __mmask16 special = _mm512_cmp_ps_mask(q, q, _CMP_UNORD_Q);
  if (__builtin_expect(special != 0, 0)) return _mm512_mask_div_ps(q, special, a, b);
  return q;
}

/* the sum of the lanes */
static inline float vreduce_add(VT v) { return _mm512_reduce_add_ps(v); }

#endif /* NK_SIMD_AVX512_F32_H */
