/* gemm_simd.h — one template for the GEMM micro-kernels and the
 * matrix-vector helpers of every ISA / compute type (included by
 * gemm_<isa>_<dtype>.c, which define the vector macros and get their ISA's
 * flags from kernels/CMakeLists.txt).
 *
 * The micro-kernel (contract in gemm.h) keeps an MR x NR tile of
 * accumulators in registers (MR rows of NV vectors) across the whole kc,
 * loading NV vectors of the packed B sliver and broadcasting MR values of
 * the packed A sliver per step, then updates C once:
 *     c = alpha * acc            (beta == 0: c is never read)
 *     c = alpha * acc + c        (beta == 1: the later k blocks)
 *     c = alpha * acc + beta * c
 *
 * Needs: ET (element), VT (vector), LANES, MR, NV, V_LOAD, V_STORE, V_SET1,
 * V_ZERO, V_FMA(a, b, c) = a * b + c, V_MUL, V_ADD, V_REDUCE (sum of lanes),
 * UKR_NAME; optionally UKR_ROWS_NAME (the unpacked-B form, gemm.h), DOT_NAME and AXPY_NAME (the matrix-vector helpers)
 * and V_KSTEP(a, b, acc), the k step (default V_FMA; the bfloat16 kernel's
 * is a two-term dot product, a and b holding k pairs, not elements). */
#include <immintrin.h>
#include <stdint.h>

#include "gemm/gemm.h"

#define NR (NV * LANES)
#ifndef V_KSTEP
#define V_KSTEP(a, b, acc) V_FMA(a, b, acc)
#endif

/* The kernel's body for both B forms: packed (b, NR values per k step) or
 * rows (k step p's NR values at bbase + boff[p], unpacked); the wrappers
 * below inline it with one form each, so neither pays for the other. */
static inline __attribute__((always_inline)) void ukr_body(int64_t kc, const ET *a, const ET *b,
                                                           const char *bbase, const int64_t *boff,
                                                           ET *c, int64_t ldc, const void *alphap,
                                                           const void *betap) {
  VT acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = V_ZERO();
#pragma GCC unroll 32
  for (int i = 0; i < MR; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
  /* The first MR steps also prefetch the next tile's rows of C (MR rows
   * down: the next micro-tile of the ir loop) into L2, well before that
   * tile's update needs them. */
  int64_t p = 0;
  for (; p < kc && p < MR; p++, a += MR) {
    const ET *bp = boff ? (const ET *)(bbase + boff[p]) : b + p * NR;
    VT bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = V_LOAD(bp + v * LANES);
    _mm_prefetch((const char *)(c + (MR + p) * ldc), _MM_HINT_T1);
    _mm_prefetch((const char *)(c + (MR + p) * ldc + NR - 1), _MM_HINT_T1);
#pragma GCC unroll 32
    for (int i = 0; i < MR; i++) {
      const VT ai = V_SET1(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = V_KSTEP(ai, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 2
  for (; p < kc; p++, a += MR) {
    const ET *bp = boff ? (const ET *)(bbase + boff[p]) : b + p * NR;
    VT bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = V_LOAD(bp + v * LANES);
    _mm_prefetch((const char *)(a + 8 * MR), _MM_HINT_T0);
#pragma GCC unroll 32
    for (int i = 0; i < MR; i++) {
      const VT ai = V_SET1(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = V_KSTEP(ai, bv[v], acc[i][v]);
    }
  }
  const ET alpha = *(const ET *)alphap, beta = *(const ET *)betap;
  const VT va = V_SET1(alpha);
  if (beta == 0) {
#pragma GCC unroll 32
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) V_STORE(c + i * ldc + v * LANES, V_MUL(va, acc[i][v]));
  } else if (beta == 1) {
#pragma GCC unroll 32
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) {
        ET *o = c + i * ldc + v * LANES;
        V_STORE(o, V_FMA(va, acc[i][v], V_LOAD(o)));
      }
  } else {
    const VT vb = V_SET1(beta);
#pragma GCC unroll 32
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) {
        ET *o = c + i * ldc + v * LANES;
        V_STORE(o, V_FMA(va, acc[i][v], V_MUL(vb, V_LOAD(o))));
      }
  }
}

void UKR_NAME(int64_t kc, const void *ap, const void *bp, void *cp, int64_t ldc,
              const void *alphap, const void *betap) {
  ukr_body(kc, (const ET *)ap, (const ET *)bp, NULL, NULL, (ET *)cp, ldc, alphap, betap);
}

#ifdef UKR_ROWS_NAME
void UKR_ROWS_NAME(int64_t kc, const void *ap, const char *bbase, const int64_t *boff, void *cp,
                   int64_t ldc, const void *alphap, const void *betap) {
  ukr_body(kc, (const ET *)ap, NULL, bbase, boff, (ET *)cp, ldc, alphap, betap);
}
#endif

#ifdef DOT_NAME
/* sum_p x[p] * y[p] over contiguous vectors, in a fixed order (4 vector
 * accumulators, then the tail in order). */
ET DOT_NAME(int64_t n, const ET *x, const ET *y) {
  VT s0 = V_ZERO(), s1 = V_ZERO(), s2 = V_ZERO(), s3 = V_ZERO();
  int64_t p = 0;
  for (; p + 4 * LANES <= n; p += 4 * LANES) {
    s0 = V_FMA(V_LOAD(x + p), V_LOAD(y + p), s0);
    s1 = V_FMA(V_LOAD(x + p + LANES), V_LOAD(y + p + LANES), s1);
    s2 = V_FMA(V_LOAD(x + p + 2 * LANES), V_LOAD(y + p + 2 * LANES), s2);
    s3 = V_FMA(V_LOAD(x + p + 3 * LANES), V_LOAD(y + p + 3 * LANES), s3);
  }
  for (; p + LANES <= n; p += LANES) s0 = V_FMA(V_LOAD(x + p), V_LOAD(y + p), s0);
  ET s = V_REDUCE(V_ADD(V_ADD(s0, s1), V_ADD(s2, s3)));
  for (; p < n; p++) s += x[p] * y[p];
  return s;
}

/* y[i] += s * x[i] over contiguous vectors. */
void AXPY_NAME(int64_t n, ET s, const ET *x, ET *y) {
  const VT vs = V_SET1(s);
  int64_t i = 0;
  for (; i + 2 * LANES <= n; i += 2 * LANES) {
    V_STORE(y + i, V_FMA(vs, V_LOAD(x + i), V_LOAD(y + i)));
    V_STORE(y + i + LANES, V_FMA(vs, V_LOAD(x + i + LANES), V_LOAD(y + i + LANES)));
  }
  for (; i + LANES <= n; i += LANES) V_STORE(y + i, V_FMA(vs, V_LOAD(x + i), V_LOAD(y + i)));
  for (; i < n; i++) y[i] += s * x[i];
}

/* AXPY_NAME over a tile's rows: y[i][:cols] += s * x[i][:cols], x's rows
 * xrs elements apart (0: one row for all, a Linear's bias), y's ldy.  The
 * GEMM adds its addend to each finished tile with it: a call per row had
 * been 6 calls per 6 x 16 tile, 40% of a 1024 x 64 @ 64 x 256 addmm's time
 * on Zen 3 (its k of 64 leaves ~130 ns of multiply-adds per tile).  A full
 * tile's broadcast row is loaded once; every element takes AXPY_NAME's
 * V_FMA, so the bits are a call per row's. */
#define NK_GEMM_CAT2(a, b) a##b
#define NK_GEMM_CAT(a, b) NK_GEMM_CAT2(a, b)
void NK_GEMM_CAT(AXPY_NAME, _tile)(int64_t rows, int64_t cols, ET s, const ET *x, int64_t xrs, ET *y,
                                   int64_t ldy) {
  if (xrs == 0 && cols == NR) {
    const VT vs = V_SET1(s);
    VT xv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) xv[v] = V_LOAD(x + v * LANES);
    for (int64_t i = 0; i < rows; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) {
        ET *o = y + i * ldy + v * LANES;
        V_STORE(o, V_FMA(vs, xv[v], V_LOAD(o)));
      }
    return;
  }
  for (int64_t i = 0; i < rows; i++) AXPY_NAME(cols, s, x + i * xrs, y + i * ldy);
}
#undef NK_GEMM_CAT
#undef NK_GEMM_CAT2
#endif /* DOT_NAME */
