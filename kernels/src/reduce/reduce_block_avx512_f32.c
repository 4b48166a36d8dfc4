/* reduce_block_avx512_f32.c — reduce_block.h's float32 block sum under
 * avx512's flags. */
#include "reduce/reduce_block.h"

float nk_reduce_block_f32_avx512(const float *p, int64_t n) { return nk_reduce_block_f32_body(p, n); }
