/* optim_avx2_f32.c — the multi-tensor row loops compiled for AVX2+FMA
 * (kernels/CMakeLists.txt gives files named *_avx2_* those flags); optim.c
 * calls them only when nk_cpu_isa() allows.  Square roots use the vector
 * instruction directly: gcc will not vectorise sqrtf while errno is on. */
#include <immintrin.h>

/* Selects between two computed values (lerp's two ends, maximum's NaN
 * rule) vectorise only if gcc may evaluate both sides' arithmetic, which
 * -ftrapping-math (the default) forbids; nothing here reads the floating-
 * point exception flags, and the values computed are the same. */
#pragma GCC optimize("no-trapping-math")

#define OPT_SQRT_TILE_F
#define OPT_SQRT_TILE_D
static void sqrt_tile_f(int n, float *r, const float *a) {
  int j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(r + j, _mm256_sqrt_ps(_mm256_loadu_ps(a + j)));
  for (; j < n; j++) _mm_store_ss(r + j, _mm_sqrt_ss(_mm_load_ss(a + j)));
}
static void sqrt_tile_d(int n, double *r, const double *a) {
  int j = 0;
  for (; j + 4 <= n; j += 4) _mm256_storeu_pd(r + j, _mm256_sqrt_pd(_mm256_loadu_pd(a + j)));
  for (; j < n; j++) _mm_store_sd(r + j, _mm_sqrt_sd(_mm_setzero_pd(), _mm_load_sd(a + j)));
}

#define OPT_ISA(name) name##_avx2
#include "optim/optim_impl.h"
