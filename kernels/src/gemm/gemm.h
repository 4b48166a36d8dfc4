/* gemm.h — the GEMM engine's pieces (BLIS's layout: everything generic,
 * one micro-kernel per ISA and compute type).
 *
 * A micro-kernel multiplies a packed A sliver (kc steps of MR values,
 * column by column) by a packed B sliver (kc steps of NR values, row by
 * row), accumulating the MR x NR tile in registers across the whole kc, and
 * then updates the full tile of c (row-major, leading dimension ldc, in the
 * compute type) once:
 *     c[i * ldc + j] = alpha * sum_p a[p * MR + i] * b[p * NR + j] + beta * c[i * ldc + j]
 * alpha and beta point to compute-type values; beta == 0 never reads c.
 * Packed slivers are zero-padded to full MR / NR, so the kernel never has an
 * edge case; the caller hands edge tiles a scratch tile. */
#ifndef NK_GEMM_H
#define NK_GEMM_H

#include <stdint.h>

#include "neuron_kernels.h"

/* out <- alpha * (a @ b) + beta * out with operands as NK_KERNEL_GEMM's
 * ([0] out, [1] a, [2] b; 3-d (batch, rows, cols), any byte strides), in
 * one dtype, or with a and b bfloat16 (or float16) and out float32 (mixed
 * precision, as cuBLAS GemmEx with a 32F C: float32 accumulation, out
 * updated in place, no rounding to 16 bits; bfloat16 runs on the
 * AVX512_BF16 dot-product kernel where nk_gemm_bf16_dot()).  The entry for
 * kernels that lower to GEMM (convolution, attention): it runs on the
 * compute pool when called outside a parallel region and serially inside
 * one (nrt_parallel_for's rule).  Returns 0, or -1 after nrt_exec_fail. */
int nk_gemm_operands(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha, nk_scalar beta);

/* 1 when bfloat16 a and b run on the AVX512_BF16 dot-product kernel (the
 * CPU has it and TORCHNEURON_ISA allows avx512): callers that would
 * otherwise widen bfloat16 operands to float32 themselves (convolution)
 * then hand them to the GEMM as they are. */
int nk_gemm_bf16_dot(void);

/* Offset tables for nk_gemm_operands_indirect: byte offsets from b's data
 * (per batch entry) that replace index * stride for one index of b (NULL:
 * the stride): b's row (k index) p starts at b_rows[p], its column j at
 * b_cols[j].  b float32, float64 or bfloat16 (bfloat16 is always packed:
 * in k pairs, honouring the tables, or widened).  Implicit-GEMM convolution
 * (conv_implicit.c) reads its im2col matrix through them straight from a
 * zero-padded copy of the input: row (c, tap) of the matrix is the padded
 * input shifted by the tap, so no col matrix is ever written.
 * With b_rows, unit column stride and a float32/float64 b of out's dtype,
 * b is not packed at all: the rows form
 * of the micro-kernel (nk_gemm_ukr_rows) loads each k step's NR values at
 * that step's row offset, and may read up to NK_GEMM_ROWS_SLACK elements
 * past column n - 1 of any row (columns of an edge tile, never stored):
 * the caller provides that much readable memory after b's data. */
#define NK_GEMM_ROWS_SLACK 64
typedef struct nk_gemm_indirect {
  const int64_t *b_rows, *b_cols;
  /* bfloat16 b already in k pairs (nk_gemm_pair_rows() must be true):
   * b_rows[p] is the byte offset of pair p (rows 2p and 2p + 1), whose
   * column j is the 32-bit word at + 4 j (low half row 2p); b_cols NULL.
   * Read in place by the dot-product rows kernel, with the same slack. */
  int b_pair_rows;
} nk_gemm_indirect;

/* 1 when a bfloat16 product can read a B stored in k pairs in place
 * (nk_gemm_indirect.b_pair_rows): the AVX512_BF16 dot-product kernel
 * without AMX (whose tiles have no rows form). */
int nk_gemm_pair_rows(void);
int nk_gemm_operands_indirect(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha,
                              nk_scalar beta, const nk_gemm_indirect *ind);

typedef void (*nk_gemm_ukr)(int64_t kc, const void *a, const void *b, void *c, int64_t ldc,
                            const void *alpha, const void *beta);

/* The micro-kernel with an unpacked B: k step p's NR values at bbase +
 * boff[p] (gemm_simd.h). */
typedef void (*nk_gemm_ukr_rows)(int64_t kc, const void *a, const char *bbase, const int64_t *boff,
                                 void *c, int64_t ldc, const void *alpha, const void *beta);
void nk_gemm_ukr_rows_avx512_f32(int64_t, const void *, const char *, const int64_t *, void *, int64_t,
                                 const void *, const void *);
void nk_gemm_ukr_rows_avx512_f64(int64_t, const void *, const char *, const int64_t *, void *, int64_t,
                                 const void *, const void *);
void nk_gemm_ukr_rows_avx2_f32(int64_t, const void *, const char *, const int64_t *, void *, int64_t,
                               const void *, const void *);
void nk_gemm_ukr_rows_avx2_f64(int64_t, const void *, const char *, const int64_t *, void *, int64_t,
                               const void *, const void *);

/* AVX-512F float32 8x32 (gemm_avx512_f32_m8.c): for products of few rows. */
void nk_gemm_ukr_avx512_f32_m8(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_ukr_rows_avx512_f32_m8(int64_t, const void *, const char *, const int64_t *, void *, int64_t,
                                    const void *, const void *);

/* Micro-kernels (gemm_<isa>_<type>.c, from gemm_simd.h):
 *   AVX-512F float32 12x32, float64 12x16 (24 zmm accumulators);
 *   AVX2+FMA float32 6x16, float64 6x8 (12 ymm accumulators). */
void nk_gemm_ukr_avx512_f32(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_ukr_avx512_f64(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_ukr_avx2_f32(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_ukr_avx2_f64(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
/* AVX512_BF16 bfloat16 12x32: a and b packed in k pairs (two bfloat16 per
 * 32-bit word), kc counting pairs; c float32. */
void nk_gemm_ukr_avx512bf16_f32(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_ukr_avx512bf16_f32_m8(int64_t, const void *, const void *, void *, int64_t, const void *,
                                   const void *);
void nk_gemm_ukr_rows_avx512bf16_f32(int64_t, const void *, const char *, const int64_t *, void *, int64_t,
                                     const void *, const void *);
void nk_gemm_ukr_rows_avx512bf16_f32_m8(int64_t, const void *, const char *, const int64_t *, void *,
                                        int64_t, const void *, const void *);
/* AMX bfloat16 32x32 and 16x32 (gemm_amx_bf16.c): A packed in k pairs in
 * tile order, B as above, kc (pairs) a multiple of 16; called between
 * nk_gemm_amx_begin (loads the tile configuration) and nk_gemm_amx_end. */
void nk_gemm_ukr_amx_bf16_32x32(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_ukr_amx_bf16_16x32(int64_t, const void *, const void *, void *, int64_t, const void *, const void *);
void nk_gemm_amx_begin(void);
void nk_gemm_amx_end(void);
/* Matrix-vector helpers over contiguous vectors: dot = sum x[p] * y[p] in a
 * fixed order; axpy: y += s * x. */
float nk_gemm_dot_avx512_f32(int64_t n, const float *x, const float *y);
double nk_gemm_dot_avx512_f64(int64_t n, const double *x, const double *y);
float nk_gemm_dot_avx2_f32(int64_t n, const float *x, const float *y);
double nk_gemm_dot_avx2_f64(int64_t n, const double *x, const double *y);
void nk_gemm_axpy_avx512_f32(int64_t n, float s, const float *x, float *y);
void nk_gemm_axpy_avx512_f64(int64_t n, double s, const double *x, double *y);
void nk_gemm_axpy_avx2_f32(int64_t n, float s, const float *x, float *y);
void nk_gemm_axpy_avx2_f64(int64_t n, double s, const double *x, double *y);
/* ... and over a tile's rows (gemm_simd.h): y[i] += s * x[i], x's rows xrs
 * elements apart (0: one row for every row of y), y's ldy. */
void nk_gemm_axpy_avx512_f32_tile(int64_t, int64_t, float, const float *, int64_t, float *, int64_t);
void nk_gemm_axpy_avx512_f64_tile(int64_t, int64_t, double, const double *, int64_t, double *, int64_t);
void nk_gemm_axpy_avx2_f32_tile(int64_t, int64_t, float, const float *, int64_t, float *, int64_t);
void nk_gemm_axpy_avx2_f64_tile(int64_t, int64_t, double, const double *, int64_t, double *, int64_t);

/* Dot products of 16-bit float vectors with float32 sums
 * (gemm_dot16.h): matrix-vector products of bfloat16/float16 operands. */
typedef float (*nk_gemm_dot16)(int64_t n, const uint16_t *x, const uint16_t *y);
float nk_gemm_dot16_avx512_bf16(int64_t, const uint16_t *, const uint16_t *);
float nk_gemm_dot16_avx512_f16(int64_t, const uint16_t *, const uint16_t *);
float nk_gemm_dot16_avx2_bf16(int64_t, const uint16_t *, const uint16_t *);
float nk_gemm_dot16_avx2_f16(int64_t, const uint16_t *, const uint16_t *);

/* One sliver (`width` rows, the first `valid` real, `cols` k values) of a
 * float32 operand whose k stride is one element (row r at src + roff[r],
 * or src + r * rs when roff is NULL), packed as gemm.c's slivers:
 * dst[c * width + i] (gemm_pack_avx2_f32.c). */
void nk_gemm_pack_kmajor_avx2_f32(const char *src, const int64_t *roff, int64_t rs, int valid,
                                  int64_t cols, int width, float *dst);

/* The FMA peak probe (peak_<isa>.c, for bench/peak.py): runs `iters`
 * rounds of independent fused multiply-adds on registers of the type
 * (0 float32, 1 float64) and returns the number of floating-point
 * operations done (2 per lane per FMA), or 0 if the ISA is not built. */
int64_t nk_peak_fma_avx512(int64_t iters, int f64);
/* The machine's FMA peak probe (bench/peak.py, bound in module.cpp): `iters`
 * rounds in float32 (f64 = 0) or float64 with the widest ISA nk_cpu_isa()
 * allows, on this thread (threads <= 1) or on each of `threads` chunks of
 * the compute pool at once.  Returns the floating-point operations done. */
int64_t nk_peak_fma(int64_t iters, int f64, int threads);
int64_t nk_peak_fma_avx2(int64_t iters, int f64);

#endif /* NK_GEMM_H */
