/* half_rows_avx2_f32.c — the 16-bit row conversions (half_rows_impl.h)
 * under avx2's flags. */
#include "common/half_rows.h"

#define HR_NAME(x) nk_half_##x##_avx2
#include "common/half_rows_impl.h"
