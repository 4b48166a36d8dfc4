/* gemm_avx512bf16_f32.c — the bfloat16 GEMM micro-kernel for CPUs with
 * AVX512_BF16 (12x32, float32 accumulators, from the template in
 * gemm_simd.h).
 *
 * A and B come packed in k pairs (gemm.c, pack_pairs): each 32-bit word
 * holds two bfloat16 values, k = 2q in the low half and 2q + 1 in the high.
 * One VDPBF16PS per accumulator vector adds both products of a pair, so a
 * k step does twice the work of a float32 FMA on the same ports: ATen's CPU
 * (oneDNN) uses the same instruction for bfloat16 matmul.  Like it, the
 * instruction treats denormal inputs and results as zero and rounds to
 * nearest even; the sum is float32 and is rounded to bfloat16 once, on
 * store (gemm.c's workspace path).
 *
 * The rows form reads B in place, a pair row at a time: b_rows[p] points at
 * pair p's words, column j's at + 4 j (gemm.h, nk_gemm_indirect's
 * b_pair_rows: an implicit convolution's input stored channel pairs
 * interleaved).  gemm_avx512bf16_f32_m8.c builds the same with 8 rows. */
#include "gemm/gemm_avx512bf16_f32_vec.h"

#define MR 12
#define UKR_NAME nk_gemm_ukr_avx512bf16_f32
#define UKR_ROWS_NAME nk_gemm_ukr_rows_avx512bf16_f32
#include "gemm/gemm_simd.h"
