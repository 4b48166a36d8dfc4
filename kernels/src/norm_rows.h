/* norm_rows.h — the contiguous-run primitives of the normalisation kernels,
 * written once as a template over the element type.
 *
 * Include with NR_T (float or double) and NR_NAME(x) (the names to give)
 * defined.  norm.c includes it for float and double (portable C); each
 * norm_<isa>_f32.c includes it for float under its ISA's target flags, so
 * the same loops come out as AVX2 or AVX-512 code.  Sums run over NR_LANES
 * independent accumulators (each a plain loop the compiler vectorises
 * without reassociating anything) that are added in a fixed order at the
 * end, so a result depends only on the data and never on the thread count.
 * A NULL w means weight 1, a NULL b bias 0. */
#include <stdint.h>

#ifndef NR_LANES
#define NR_LANES 16
#endif

/* lanes added pairwise, in double */
static inline double NR_NAME(fold)(const NR_T *acc) {
  double a[NR_LANES];
  for (int k = 0; k < NR_LANES; k++) a[k] = (double)acc[k];
  for (int w = NR_LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; k++) a[k] += a[k + w];
  return a[0];
}

/* sum of x, accumulated in double (the mean of data far from 0 stays exact) */
static double NR_NAME(sum)(const NR_T *x, int64_t n) {
  double acc[NR_LANES] = {0};
  int64_t i = 0;
  for (; i + NR_LANES <= n; i += NR_LANES)
    for (int k = 0; k < NR_LANES; k++) acc[k] += (double)x[i + k];
  for (int k = 0; i < n; i++, k++) acc[k] += (double)x[i];
  for (int w = NR_LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; k++) acc[k] += acc[k + w];
  return acc[0];
}

/* sum of (x - m)^2 */
static double NR_NAME(sumsq)(const NR_T *x, int64_t n, NR_T m) {
  NR_T acc[NR_LANES] = {0};
  int64_t i = 0;
  for (; i + NR_LANES <= n; i += NR_LANES)
    for (int k = 0; k < NR_LANES; k++) {
      NR_T d = x[i + k] - m;
      acc[k] += d * d;
    }
  for (int k = 0; i < n; i++, k++) {
    NR_T d = x[i] - m;
    acc[k] += d * d;
  }
  return NR_NAME(fold)(acc);
}

/* *s1 += sum of dy * w, *s2 += sum of dy * w * (x - m) */
static void NR_NAME(dsums)(const NR_T *dy, const NR_T *x, const NR_T *w, int64_t n, NR_T m,
                           double *s1, double *s2) {
  NR_T a1[NR_LANES] = {0}, a2[NR_LANES] = {0};
  int64_t i = 0;
  if (w) {
    for (; i + NR_LANES <= n; i += NR_LANES)
      for (int k = 0; k < NR_LANES; k++) {
        NR_T g = dy[i + k] * w[i + k];
        a1[k] += g;
        a2[k] += g * (x[i + k] - m);
      }
    for (int k = 0; i < n; i++, k++) {
      NR_T g = dy[i] * w[i];
      a1[k] += g;
      a2[k] += g * (x[i] - m);
    }
  } else {
    for (; i + NR_LANES <= n; i += NR_LANES)
      for (int k = 0; k < NR_LANES; k++) {
        a1[k] += dy[i + k];
        a2[k] += dy[i + k] * (x[i + k] - m);
      }
    for (int k = 0; i < n; i++, k++) {
      a1[k] += dy[i];
      a2[k] += dy[i] * (x[i] - m);
    }
  }
  *s1 += NR_NAME(fold)(a1);
  *s2 += NR_NAME(fold)(a2);
}

/* y = (x * scale + shift) * w + b (ATen's CPU form) */
static void NR_NAME(apply)(NR_T *y, const NR_T *x, int64_t n, NR_T scale, NR_T shift,
                           const NR_T *w, const NR_T *b) {
  if (w && b) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale + shift) * w[i] + b[i];
  } else if (w) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale + shift) * w[i];
  } else if (b) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale + shift) + b[i];
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;
  }
}

/* dx = a * dy * w + b * x + c */
static void NR_NAME(dx)(NR_T *dx, const NR_T *dy, const NR_T *x, const NR_T *w, int64_t n, NR_T a,
                        NR_T b, NR_T c) {
  if (w) {
    for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] * w[i] + b * x[i] + c;
  } else {
    for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] + b * x[i] + c;
  }
}

/* column sums over rows (in double): gw[j] += dy[j] * (x[j] - m) * r, gb[j] += dy[j] */
static void NR_NAME(colsums)(double *gw, double *gb, const NR_T *dy, const NR_T *x, int64_t n,
                             NR_T m, NR_T r) {
  if (gw)
    for (int64_t j = 0; j < n; j++) gw[j] += (double)(dy[j] * ((x[j] - m) * r));
  if (gb)
    for (int64_t j = 0; j < n; j++) gb[j] += (double)dy[j];
}
