/* softmax_avx512_f32.c — the float32 softmax line (softmax_simd_impl.h)
 * with AVX-512F: 16 lanes, masked tails. */
#include "common/simd_avx512_f32.h"

#define SM_LINE_NAME nk_softmax_avx512_f32
#define SM_HSUM(v) _mm512_reduce_add_ps(v)
#define SM_HMAX(v) _mm512_reduce_max_ps(v)
#define SM_TAIL_LOAD(p, m, fill) _mm512_mask_loadu_ps(_mm512_set1_ps(fill), m, p)
#include "reduce/softmax_simd_impl.h"
