/* norm_avx512_f32.c — norm_rows.h's float32 primitives compiled for avx512
 * (the flags come from kernels/CMakeLists.txt); norm.c picks them with
 * nk_cpu_isa(). */
#include "norm/norm_simd.h"

#define NR_T float
#define NR_NAME(x) avx512_##x
#include "norm/norm_rows.h"

const nk_norm_f32_fns nk_norm_avx512_f32 = {avx512_sum, avx512_sumsq, avx512_dsums,
                                            avx512_apply, avx512_dx, avx512_colsums, avx512_msum,
                                            avx512_msumsq, avx512_mdsums, avx512_mapply, avx512_mdx};
