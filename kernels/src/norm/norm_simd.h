/* norm_simd.h — the float32 run primitives of the normalisation kernels
 * (norm_rows.h) per ISA, chosen at run time (norm.c). */
#ifndef NK_NORM_SIMD_H
#define NK_NORM_SIMD_H

#include <stdint.h>

typedef struct nk_norm_f32_fns {
  double (*sum)(const float *x, int64_t n);
  double (*sumsq)(const float *x, int64_t n, float m);
  void (*dsums)(const float *dy, const float *x, const float *w, int64_t n, float m, double *s1,
                double *s2);
  void (*apply)(float *y, const float *x, int64_t n, float scale, float shift, const float *w,
                const float *b);
  void (*dx)(float *dx, const float *dy, const float *x, const float *w, int64_t n, float a, float b,
             float c);
  void (*colsums)(double *gw, double *gb, const float *const *dy, const float *const *x, int k,
                  int64_t n, const float *m, const float *r);
  /* batch norm: rows runs of n at x + r * ld (norm_rows.h) */
  double (*msum)(const float *x, int64_t rows, int64_t ld, int64_t n);
  double (*msumsq)(const float *x, int64_t rows, int64_t ld, int64_t n, float m);
  void (*mdsums)(const float *dy, int64_t lddy, const float *x, int64_t ldx, int64_t rows, int64_t n,
                 float m, double *s1, double *s2);
  void (*mapply)(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows, int64_t n, float scale,
                 float shift);
  void (*mdx)(float *dx, int64_t lddx, const float *dy, int64_t lddy, const float *x, int64_t ldx,
              int64_t rows, int64_t n, float a, float b, float c);
} nk_norm_f32_fns;

extern const nk_norm_f32_fns nk_norm_avx2_f32;
extern const nk_norm_f32_fns nk_norm_avx512_f32;

#endif /* NK_NORM_SIMD_H */
