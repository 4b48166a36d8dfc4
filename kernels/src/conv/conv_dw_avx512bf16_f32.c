/* conv_dw_avx512bf16_f32.c — conv_dw_avx512_f32.c's weight-gradient dot
 * products for bfloat16 operands on AVX512_BF16: the same 4 x 6 tiles of
 * float32 accumulators, each step loading 32 positions of every row (16
 * position pairs) and adding both products of a pair with one VDPBF16PS.
 * Both operands hold the positions contiguously, so a pair is two
 * neighbouring positions of one row -- the layout the instruction reads,
 * with no packing.  Like the GEMM's dot-product kernel (and oneDNN), it
 * treats denormal inputs as zero; the sums are float32.  Results depend on
 * the shapes only. */
#define DW_NAME nk_conv_dw_dots_avx512bf16
#define DW_T uint16_t
#define DW_STEP_N 32
#define DW_MASK_T __mmask32
#define DW_LOAD(m, p) _mm512_maskz_loadu_epi16(m, p)
#define DW_KSTEP(acc, d, x) _mm512_dpbf16_ps(acc, (__m512bh)(d), (__m512bh)(x))
#include "conv/conv_dw_impl.h"
