/* reduce_block_avx2_f32.c — reduce_block.h's float32 block sum under
 * avx2's flags. */
#include "reduce/reduce_block.h"

float nk_reduce_block_f32_avx2(const float *p, int64_t n) { return nk_reduce_block_f32_body(p, n); }
