/* reduce_block.h — the sum of one block (at most RED_BLOCK) of contiguous
 * float32 values, the plain sum's hot loop (reduce.c, block_f32): 16
 * independent accumulators, lane j taking elements j, j + 16, ..., folded
 * in halves (lanes + 8, + 4, + 2, then 0 + 1), then the tail in order; a
 * block shorter than 16 is summed in order.  Only additions, each lane in
 * its own order, so every instantiation gives the same bits: reduce.c's
 * portable one, and reduce_block_<isa>_f32.c's, whose wider loads read
 * memory faster (one Zen 3 core streaming 64 MiB: ~15.5 GB/s with SSE
 * loads, ~18.5 with AVX2 ones). */
#ifndef NK_REDUCE_BLOCK_H
#define NK_REDUCE_BLOCK_H

#include <stdint.h>

#define NK_RED_LANES 16 /* the folds below assume 16 */

/* The 16 lanes' sum, folded in halves: reduce.c's blocks (every transform)
 * and the plain block below end the same way. */
static inline float nk_red_fold16_f32(float *acc) {
  for (int j = 0; j < 8; j++) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; j++) acc[j] += acc[j + 4];
  for (int j = 0; j < 2; j++) acc[j] += acc[j + 2];
  return acc[0] + acc[1];
}

static inline float nk_reduce_block_f32_body(const float *p, int64_t n) {
  if (n < NK_RED_LANES) {
    float r = 0;
    for (int64_t i = 0; i < n; i++) r += p[i];
    return r;
  }
  float acc[NK_RED_LANES] = {0};
  int64_t i = 0;
  for (; i + NK_RED_LANES <= n; i += NK_RED_LANES)
    for (int j = 0; j < NK_RED_LANES; j++) acc[j] += p[i + j];
  float r = nk_red_fold16_f32(acc);
  for (; i < n; i++) r += p[i];
  return r;
}

typedef float (*nk_reduce_block_f32_fn)(const float *p, int64_t n);
float nk_reduce_block_f32_avx2(const float *p, int64_t n);
float nk_reduce_block_f32_avx512(const float *p, int64_t n);

#endif /* NK_REDUCE_BLOCK_H */
