/* pointwise_avx512_f32.c — the pointwise vector bodies (pointwise_simd_impl.h)
 * with AVX-512F: 16 lanes. */
#include "common/simd_avx512_f32.h"
#define POINTWISE_NAME nk_pointwise_avx512_f32
#include "elementwise/pointwise_simd_impl.h"
