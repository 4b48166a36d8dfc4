/* softmax_avx2_f32.c — the float32 softmax line with AVX2+FMA (see
 * softmax_simd.h).  Tails use the same vector code on a padded copy, so
 * every element of a line goes through one exp. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "softmax_simd.h"

static inline __m256 vexp(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365478515625f);
  __m256 big = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), small = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 c = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  __m256 n = _mm256_round_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.0f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), c);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), small);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), big);
  return _mm256_blendv_ps(y, x, nan);
}

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The tail of k < 8 elements as a vector: missing lanes read `fill`. */
static inline __m256 load_tail(const float *p, int64_t k, float fill) {
  float t[8];
  for (int j = 0; j < 8; j++) t[j] = j < k ? p[j] : fill;
  return _mm256_loadu_ps(t);
}
static inline void store_tail(float *p, int64_t k, __m256 v) {
  float t[8];
  _mm256_storeu_ps(t, v);
  memcpy(p, t, (size_t)k * sizeof(float));
}

int nk_softmax_avx2_f32(int log, int backward, int64_t n, char *o_, const char *a_, const char *b_) {
  float *o = (float *)o_;
  const float *a = (const float *)a_, *b = (const float *)b_;
  const int64_t nv = n & ~(int64_t)7, k = n - nv;
  if (!backward) {
    __m256 mx = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
    for (int64_t i = 0; i < nv; i += 8) {
      __m256 x = _mm256_loadu_ps(a + i);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
      mx = _mm256_max_ps(mx, x);
    }
    if (k) {
      __m256 x = load_tail(a + nv, k, -INFINITY);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
      mx = _mm256_max_ps(mx, x);
    }
    if (_mm256_movemask_ps(bad)) return 1;
    const __m256 m = _mm256_set1_ps(hmax(mx));
    __m256 acc = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    if (log) {
      for (int64_t i = 0; i < nv; i += 8) acc = _mm256_add_ps(acc, vexp(_mm256_sub_ps(_mm256_loadu_ps(a + i), m)));
      if (k) acc2 = vexp(_mm256_sub_ps(load_tail(a + nv, k, -INFINITY), m));
      const __m256 sh = _mm256_add_ps(m, _mm256_set1_ps(logf(hsum(_mm256_add_ps(acc, acc2)))));
      for (int64_t i = 0; i < nv; i += 8) _mm256_storeu_ps(o + i, _mm256_sub_ps(_mm256_loadu_ps(a + i), sh));
      if (k) store_tail(o + nv, k, _mm256_sub_ps(load_tail(a + nv, k, 0), sh));
      return 0;
    }
    for (int64_t i = 0; i < nv; i += 8) {
      __m256 e = vexp(_mm256_sub_ps(_mm256_loadu_ps(a + i), m));
      _mm256_storeu_ps(o + i, e);
      acc = _mm256_add_ps(acc, e);
    }
    if (k) {
      acc2 = vexp(_mm256_sub_ps(load_tail(a + nv, k, -INFINITY), m));
      store_tail(o + nv, k, acc2);
    }
    const __m256 r = _mm256_set1_ps(1.0f / hsum(_mm256_add_ps(acc, acc2)));
    for (int64_t i = 0; i < nv; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), r));
    if (k) store_tail(o + nv, k, _mm256_mul_ps(load_tail(o + nv, k, 0), r));
    return 0;
  }
  /* backward: a = grad_out, b = out */
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nv; i += 8) {
    __m256 g = _mm256_loadu_ps(a + i);
    acc = log ? _mm256_add_ps(acc, g) : _mm256_fmadd_ps(g, _mm256_loadu_ps(b + i), acc);
  }
  if (k) {
    __m256 g = load_tail(a + nv, k, 0);
    acc = log ? _mm256_add_ps(acc, g) : _mm256_fmadd_ps(g, load_tail(b + nv, k, 0), acc);
  }
  const __m256 s = _mm256_set1_ps(hsum(acc));
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t m = n - i < 8 ? n - i : 8;
    __m256 g = m == 8 ? _mm256_loadu_ps(a + i) : load_tail(a + i, m, 0);
    __m256 y = m == 8 ? _mm256_loadu_ps(b + i) : load_tail(b + i, m, 0);
    __m256 r = log ? _mm256_fnmadd_ps(vexp(y), s, g) : _mm256_mul_ps(y, _mm256_sub_ps(g, s));
    if (m == 8) _mm256_storeu_ps(o + i, r);
    else store_tail(o + i, m, r);
  }
  return 0;
}

/* T (a multiple of 8, at most 32) neighbouring float32 lines along an outer
 * dim: d[k] is operand k's first line, s[k] its byte step along the dim. */
int nk_softmax_tile_avx2_f32(int log, int backward, int64_t n, int64_t T, char *const *d,
                             const int64_t *s) {
  if (T % 8 || T > 32) return 1;
  const int nv = (int)(T / 8);
  __m256 m[4], sum[4];
  for (int v = 0; v < nv; v++) sum[v] = _mm256_setzero_ps();
  if (!backward) {
    __m256 bad = _mm256_setzero_ps();
    for (int v = 0; v < nv; v++) m[v] = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i++) {
      const float *x = (const float *)(d[1] + i * s[1]);
      for (int v = 0; v < nv; v++) {
        __m256 xv = _mm256_loadu_ps(x + 8 * v);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q));
        m[v] = _mm256_max_ps(m[v], xv);
      }
    }
    if (_mm256_movemask_ps(bad)) return 1;
    for (int64_t i = 0; i < n; i++) {
      const float *x = (const float *)(d[1] + i * s[1]);
      for (int v = 0; v < nv; v++) sum[v] = _mm256_add_ps(sum[v], vexp(_mm256_sub_ps(_mm256_loadu_ps(x + 8 * v), m[v])));
    }
    for (int v = 0; v < nv; v++) {
      if (log) {
        float t[8];
        _mm256_storeu_ps(t, sum[v]);
        for (int j = 0; j < 8; j++) t[j] = logf(t[j]);
        sum[v] = _mm256_loadu_ps(t);
      } else {
        sum[v] = _mm256_div_ps(_mm256_set1_ps(1.0f), sum[v]);
      }
    }
    for (int64_t i = 0; i < n; i++) {
      const float *x = (const float *)(d[1] + i * s[1]);
      float *o = (float *)(d[0] + i * s[0]);
      for (int v = 0; v < nv; v++) {
        __m256 xm = _mm256_sub_ps(_mm256_loadu_ps(x + 8 * v), m[v]);
        _mm256_storeu_ps(o + 8 * v, log ? _mm256_sub_ps(xm, sum[v]) : _mm256_mul_ps(vexp(xm), sum[v]));
      }
    }
    return 0;
  }
  for (int64_t i = 0; i < n; i++) {
    const float *g = (const float *)(d[1] + i * s[1]), *y = (const float *)(d[2] + i * s[2]);
    for (int v = 0; v < nv; v++) {
      __m256 gv = _mm256_loadu_ps(g + 8 * v);
      sum[v] = log ? _mm256_add_ps(sum[v], gv) : _mm256_fmadd_ps(gv, _mm256_loadu_ps(y + 8 * v), sum[v]);
    }
  }
  for (int64_t i = 0; i < n; i++) {
    const float *g = (const float *)(d[1] + i * s[1]), *y = (const float *)(d[2] + i * s[2]);
    float *o = (float *)(d[0] + i * s[0]);
    for (int v = 0; v < nv; v++) {
      __m256 gv = _mm256_loadu_ps(g + 8 * v), yv = _mm256_loadu_ps(y + 8 * v);
      _mm256_storeu_ps(o + 8 * v, log ? _mm256_fnmadd_ps(vexp(yv), sum[v], gv) : _mm256_mul_ps(yv, _mm256_sub_ps(gv, sum[v])));
    }
  }
  return 0;
}
