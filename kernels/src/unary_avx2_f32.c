/* unary_avx2_f32.c — AVX2+FMA float32 bodies of the hottest unary ops:
 * exp, sigmoid, silu, tanh, gelu (erf form and tanh form), relu, abs, neg.
 *
 * exp is Cephes' expf (range reduction by ln 2 in two parts, a degree-5
 * polynomial, the power of two applied in two halves so that results down
 * to the subnormals are kept); the others are built on it:
 *   sigmoid(x) = 1 / (1 + exp(-x)),  silu(x) = x / (1 + exp(-x)),
 *   tanh(x)    = sign(x) (1 - 2 / (exp(2|x|) + 1)), Cephes' odd polynomial
 *                below |x| < 0.625 where that form would cancel,
 *   gelu_tanh  = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 *                (= 0.5 x (1 + tanh u)),
 *   gelu       = 0.5 x erfc(-x / sqrt 2), with erfc(z) for z >= 0 from the
 *                Numerical Recipes Chebyshev fit (relative error < 1.2e-7)
 *                and 2 - erfc(z) on the other side.
 * Backward (grad a, input b): gelu (both forms), silu, sigmoid, tanh and
 * threshold (relu's backward), from the same pieces.
 * NaN and the infinities give what the scalar code gives.  Whole rows go
 * through the vector body (the tail with masked loads/stores), so results
 * never depend on how the row was split between threads. */
#include <immintrin.h>

#include "unary_simd.h"

#define V8(c) _mm256_set1_ps((float)(c))

static inline __m256 exp256(__m256 x) {
  const __m256 hi = V8(88.72283935546875), lo = V8(-103.97208404541016);
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, V8(1.44269504088896341)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, V8(0.693359375), xc);
  r = _mm256_fnmadd_ps(fx, V8(-2.12194440e-4), r);
  __m256 p = V8(1.9875691500E-4);
  p = _mm256_fmadd_ps(p, r, V8(1.3981999507E-3));
  p = _mm256_fmadd_ps(p, r, V8(8.3334519073E-3));
  p = _mm256_fmadd_ps(p, r, V8(4.1665795894E-2));
  p = _mm256_fmadd_ps(p, r, V8(1.6666665459E-1));
  p = _mm256_fmadd_ps(p, r, V8(5.0000001201E-1));
  __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, V8(1.0)));
  /* 2^n in two factors: n in [-150, 128] keeps both in the normal range */
  __m256i n = _mm256_cvtps_epi32(fx);
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  y = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  y = _mm256_blendv_ps(y, V8(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN stays */
}

static inline __m256 abs256(__m256 x) { return _mm256_andnot_ps(V8(-0.0f), x); }

static inline __m256 tanh256(__m256 x) {
  __m256 ax = abs256(x);
  /* |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1), sign restored */
  __m256 e = exp256(_mm256_add_ps(ax, ax));
  __m256 big = _mm256_sub_ps(V8(1.0), _mm256_div_ps(V8(2.0), _mm256_add_ps(e, V8(1.0))));
  big = _mm256_or_ps(big, _mm256_and_ps(x, V8(-0.0f)));
  /* |x| < 0.625: Cephes' odd polynomial */
  __m256 z = _mm256_mul_ps(x, x);
  __m256 p = V8(-5.70498872745E-3);
  p = _mm256_fmadd_ps(p, z, V8(2.06390887954E-2));
  p = _mm256_fmadd_ps(p, z, V8(-5.37397155531E-2));
  p = _mm256_fmadd_ps(p, z, V8(1.33314422036E-1));
  p = _mm256_fmadd_ps(p, z, V8(-3.33332819422E-1));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, V8(0.625), _CMP_LT_OQ));
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* 1 + erf(x / sqrt 2) */
static inline __m256 one_plus_erf256(__m256 x) {
  __m256 z = abs256(_mm256_mul_ps(x, V8(0.70710678118654752440)));
  __m256 t = _mm256_div_ps(V8(1.0), _mm256_fmadd_ps(V8(0.5), z, V8(1.0)));
  __m256 p = V8(0.17087277);
  p = _mm256_fmadd_ps(p, t, V8(-0.82215223));
  p = _mm256_fmadd_ps(p, t, V8(1.48851587));
  p = _mm256_fmadd_ps(p, t, V8(-1.13520398));
  p = _mm256_fmadd_ps(p, t, V8(0.27886807));
  p = _mm256_fmadd_ps(p, t, V8(-0.18628806));
  p = _mm256_fmadd_ps(p, t, V8(0.09678418));
  p = _mm256_fmadd_ps(p, t, V8(0.37409196));
  p = _mm256_fmadd_ps(p, t, V8(1.00002368));
  p = _mm256_fmadd_ps(p, t, V8(-1.26551223));
  __m256 erfc = _mm256_mul_ps(t, exp256(_mm256_fnmadd_ps(z, z, p))); /* erfc(|z|) */
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(_mm256_sub_ps(V8(2.0), erfc), erfc, neg);
}

static inline __m256 body(nk_unary_op op, __m256 x) {
  switch (op) {
  case NK_UNARY_EXP: return exp256(x);
  case NK_UNARY_SIGMOID: return _mm256_div_ps(V8(1.0), _mm256_add_ps(V8(1.0), exp256(_mm256_xor_ps(x, V8(-0.0f)))));
  case NK_UNARY_SILU: return _mm256_div_ps(x, _mm256_add_ps(V8(1.0), exp256(_mm256_xor_ps(x, V8(-0.0f)))));
  case NK_UNARY_TANH: return tanh256(x);
  case NK_UNARY_GELU: return _mm256_mul_ps(_mm256_mul_ps(x, V8(0.5)), one_plus_erf256(x));
  case NK_UNARY_GELU_TANH: {
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 u = _mm256_mul_ps(V8(0.7978845608028654), _mm256_fmadd_ps(V8(0.044715), x3, x));
    return _mm256_div_ps(x, _mm256_add_ps(V8(1.0), exp256(_mm256_mul_ps(u, V8(-2.0)))));
  }
  case NK_UNARY_RELU:
    return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  case NK_UNARY_ABS: return abs256(x);
  default: return _mm256_xor_ps(x, V8(-0.0f)); /* NEG */
  }
}

static inline void row(nk_unary_op op, int64_t n, float *out, const float *x) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, body(op, _mm256_loadu_ps(x + i)));
  if (i < n) {
    const int rem = (int)(n - i);
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(out + i, mask, body(op, _mm256_maskload_ps(x + i, mask)));
  }
}

bool nk_unary_avx2_f32(nk_unary_op op, int64_t n, float *out, const float *x, const nk_uprm *p) {
  (void)p;
  switch (op) {
#define NK_VEC_CASE(OP) case OP: row(OP, n, out, x); return true;
    NK_VEC_CASE(NK_UNARY_EXP)
    NK_VEC_CASE(NK_UNARY_SIGMOID)
    NK_VEC_CASE(NK_UNARY_SILU)
    NK_VEC_CASE(NK_UNARY_TANH)
    NK_VEC_CASE(NK_UNARY_GELU)
    NK_VEC_CASE(NK_UNARY_GELU_TANH)
    NK_VEC_CASE(NK_UNARY_RELU)
    NK_VEC_CASE(NK_UNARY_ABS)
    NK_VEC_CASE(NK_UNARY_NEG)
#undef NK_VEC_CASE
  default: return false;
  }
}

/* ------------------------------------------------------------------ backward */

static inline __m256 bw_body(nk_unary_backward_op op, __m256 a, __m256 b, const nk_uprm *p) {
  const __m256 one = V8(1.0);
  switch (op) {
  case NK_UNARY_BW_SIGMOID: return _mm256_mul_ps(_mm256_mul_ps(a, _mm256_sub_ps(one, b)), b);
  case NK_UNARY_BW_TANH: return _mm256_mul_ps(a, _mm256_fnmadd_ps(b, b, one));
  case NK_UNARY_BW_GELU: {
    __m256 cdf = _mm256_mul_ps(V8(0.5), one_plus_erf256(b));
    __m256 pdf = _mm256_mul_ps(V8(NK_2_SQRTPI * NK_SQRT1_2 * 0.5),
                               exp256(_mm256_mul_ps(_mm256_mul_ps(b, b), V8(-0.5))));
    return _mm256_mul_ps(a, _mm256_fmadd_ps(b, pdf, cdf));
  }
  case NK_UNARY_BW_GELU_TANH: {
    const __m256 kbeta = V8(NK_GELU_KBETA), kkappa = V8(NK_GELU_KKAPPA);
    __m256 x_sq = _mm256_mul_ps(b, b), x_cube = _mm256_mul_ps(x_sq, b);
    __m256 t = tanh256(_mm256_mul_ps(kbeta, _mm256_fmadd_ps(kkappa, x_cube, b)));
    __m256 left = _mm256_mul_ps(V8(0.5), b);
    __m256 left_d = _mm256_mul_ps(V8(0.5), _mm256_add_ps(one, t));
    __m256 tanh_d = _mm256_fnmadd_ps(t, t, one);
    __m256 inner_d = _mm256_mul_ps(kbeta, _mm256_fmadd_ps(V8(3.0 * NK_GELU_KKAPPA), x_sq, one));
    return _mm256_mul_ps(a, _mm256_fmadd_ps(_mm256_mul_ps(left, tanh_d), inner_d, left_d));
  }
  case NK_UNARY_BW_SILU: {
    __m256 sg = _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_xor_ps(b, V8(-0.0f)))));
    return _mm256_mul_ps(_mm256_mul_ps(a, sg), _mm256_fmadd_ps(b, _mm256_sub_ps(one, sg), one));
  }
  default: /* THRESHOLD: a = x, b = other */
    return _mm256_blendv_ps(b, _mm256_set1_ps(p->f[1]), _mm256_cmp_ps(a, _mm256_set1_ps(p->f[0]), _CMP_LE_OQ));
  }
}

static inline void bw_row(nk_unary_backward_op op, int64_t n, float *out, const float *a, const float *b,
                          const nk_uprm *p) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, bw_body(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), p));
  if (i < n) {
    const int rem = (int)(n - i);
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(out + i, mask,
                        bw_body(op, _mm256_maskload_ps(a + i, mask), _mm256_maskload_ps(b + i, mask), p));
  }
}

bool nk_unary_bw_avx2_f32(nk_unary_backward_op op, int64_t n, float *out, const float *a, const float *b,
                          const nk_uprm *p) {
  switch (op) {
#define NK_VEC_CASE(OP) case OP: bw_row(OP, n, out, a, b, p); return true;
    NK_VEC_CASE(NK_UNARY_BW_SIGMOID)
    NK_VEC_CASE(NK_UNARY_BW_TANH)
    NK_VEC_CASE(NK_UNARY_BW_GELU)
    NK_VEC_CASE(NK_UNARY_BW_GELU_TANH)
    NK_VEC_CASE(NK_UNARY_BW_SILU)
    NK_VEC_CASE(NK_UNARY_BW_THRESHOLD)
#undef NK_VEC_CASE
  default: return false;
  }
}
