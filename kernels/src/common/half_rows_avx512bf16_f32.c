/* half_rows_avx512bf16_f32.c — the 16-bit row conversions (half_rows_impl.h)
 * under avx512bf16's flags: bfloat16 rounds with the instruction
 * (half_simd_avx512.h). */
#include "common/half_rows.h"

#define HR_NAME(x) nk_half_##x##_avx512bf16
#include "common/half_rows_impl.h"
