/* conv_dw_avx512_f32.c — the implicit convolution's weight gradient for
 * few output channels, as dot products along the positions.
 *
 * acc[o][r] += sum over q of dy[o][q] * x[r][q], where dy's rows are the
 * gathered output gradient (dys in conv_implicit.c) and x's row r is the
 * padded input shifted by tap r (x[r][q] = xp[off[r] + q]): both operands
 * have the positions contiguous.  As a GEMM (k = positions) one operand is
 * packed with transposes, and with 16 or 32 output rows each packed element
 * serves 16 or 32 multiply-adds: the packing costs as much as the products.
 * Here nothing is packed: a tile of 4 dy rows x 6 x rows keeps 24 vector
 * accumulators, each step loading 4 + 6 vectors for 24 FMAs, and reduces
 * the lanes once per tile at the end.  Rows past og or ck are read from a
 * zero row (zeros, >= q floats), so every tile is full.
 * The sum of each (o, r) runs in a fixed order (16 lanes over the positions,
 * then the lanes pairwise): results do not depend on the thread count. */
#define DW_NAME nk_conv_dw_dots_avx512_f32
#define DW_T float
#define DW_STEP_N 16
#define DW_MASK_T __mmask16
#define DW_LOAD(m, p) _mm512_castps_si512(_mm512_maskz_loadu_ps(m, p))
#define DW_KSTEP(acc, d, x) _mm512_fmadd_ps(_mm512_castsi512_ps(d), _mm512_castsi512_ps(x), acc)
#include "conv/conv_dw_impl.h"
