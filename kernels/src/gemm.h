/* gemm.h — the GEMM engine's pieces (BLIS's layout: everything generic,
 * one micro-kernel per ISA and compute type).
 *
 * A micro-kernel adds an MR x NR tile of a packed A sliver (kc steps of MR
 * values, column by column) times a packed B sliver (kc steps of NR values,
 * row by row) into c (row-major, leading dimension ldc, in the compute type):
 *     c[i * ldc + j] += sum_p a[p * MR + i] * b[p * NR + j]
 * Packed slivers are zero-padded to full MR / NR, so the kernel never has an
 * edge case; the caller stores only the valid part of the tile. */
#ifndef NK_GEMM_H
#define NK_GEMM_H

#include <stdint.h>

#include "neuron_kernels.h"

/* out <- alpha * (a @ b) + beta * out with operands as NK_KERNEL_GEMM's
 * ([0] out, [1] a, [2] b; 3-d (batch, rows, cols), one dtype, any byte
 * strides).  The entry for kernels that lower to GEMM (convolution,
 * attention): it runs on the compute pool when called outside a parallel
 * region and serially inside one (nrt_parallel_for's rule).  Returns 0, or
 * -1 after nrt_exec_fail. */
int nk_gemm_operands(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha, nk_scalar beta);

typedef void (*nk_gemm_ukr)(int64_t kc, const void *a, const void *b, void *c, int64_t ldc);

/* AVX2+FMA float32 6x16: 12 accumulators of 8 lanes, two B vectors, one A
 * broadcast (15 of the 16 ymm registers). */
void nk_gemm_avx2_f32_6x16(int64_t kc, const void *a, const void *b, void *c, int64_t ldc);
/* AVX-512F float32 6x32: the same shape on 16-lane registers. */
void nk_gemm_avx512_f32_6x32(int64_t kc, const void *a, const void *b, void *c, int64_t ldc);

#endif /* NK_GEMM_H */
