/* softmax_avx2_f32.c — the float32 softmax line (softmax_simd_impl.h) with
 * AVX2+FMA, and the tiles of neighbouring lines along an outer dim (see
 * softmax_simd.h).  exp is the shared vector exp (simd_exp_f32.h). */
#include <math.h>
#include <string.h>

#include "common/simd_avx2_f32.h"
#include "common/simd_exp_f32.h"
#include "reduce/softmax_simd.h"

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

#define SM_LINE_NAME nk_softmax_avx2_f32
#define SM_HSUM(v) hsum(v)
#define SM_HMAX(v) hmax(v)
#define SM_TAIL_LOAD(p, m, fill) _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m))
#include "reduce/softmax_simd_impl.h"

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
