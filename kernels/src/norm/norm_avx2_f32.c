/* norm_avx2_f32.c — norm_rows.h's float32 primitives compiled for avx2
 * (the flags come from kernels/CMakeLists.txt); norm.c picks them with
 * nk_cpu_isa(). */
#include "norm/norm_simd.h"

#define NR_T float
#define NR_NAME(x) avx2_##x
#define NR_VW 8 /* one ymm register of floats (norm_rows.h) */
#include "norm/norm_rows.h"

const nk_norm_f32_fns nk_norm_avx2_f32 = {avx2_sum, avx2_sumsq, avx2_dsums,
                                            avx2_apply, avx2_dx, avx2_colsums, avx2_msum,
                                            avx2_msumsq, avx2_mdsums, avx2_mapply, avx2_mdx};
