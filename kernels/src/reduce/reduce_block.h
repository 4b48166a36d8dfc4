/* reduce_block.h — the sum of one block (at most RED_BLOCK) of float32
 * values in a fixed order, the float sums' hot loop (reduce.c: block_f32
 * for every transform and input dtype, and the plain contiguous sum's
 * per-ISA instantiations below):
 *   - fewer than 16 values: in order;
 *   - else, with 64 or more, 64 independent accumulators (lane j takes
 *     elements j, j + 64, ...) while 64 remain, folded into 16 (lanes + 32,
 *     then + 16); then 16 accumulators while 16 remain, folded in halves
 *     (lanes + 8, + 4, + 2, then 0 + 1); then the tail (< 16) in order.
 * Only additions, each lane in its own order, so every instantiation gives
 * the same bits (reduce.c's portable one and reduce_block_<isa>_f32.c's)
 * and a block's result depends on its length only.  Why 64: each lane is
 * a chain of dependent additions, and 16 lanes are two AVX2 vectors, two
 * chains of a 3-cycle add: one Zen 3 core summed 64 MiB at 15.4 GB/s that
 * way (torch CPU: 20), 18.5-19 with 64 lanes (eight vectors keep both add
 * ports busy; software prefetch 1-8 KiB ahead made it slower).  The
 * 16-lane steps keep a 16..63-element row vectorised and the in-order
 * tail under 16. */
#ifndef NK_REDUCE_BLOCK_H
#define NK_REDUCE_BLOCK_H

#include <stdint.h>

#define NK_RED_LANES 16      /* the folds below assume 16 */
#define NK_RED_WIDE_LANES 64 /* and 64 */

/* The 16 lanes' sum, folded in halves. */
static inline float nk_red_fold16_f32(float *acc) {
  for (int j = 0; j < 8; j++) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; j++) acc[j] += acc[j + 4];
  for (int j = 0; j < 2; j++) acc[j] += acc[j + 2];
  return acc[0] + acc[1];
}

/* 64 lanes into the first 16. */
static inline void nk_red_fold64_f32(float *acc) {
  for (int j = 0; j < 32; j++) acc[j] += acc[j + 32];
  for (int j = 0; j < 16; j++) acc[j] += acc[j + 16];
}

/* The block order above over n values, LOAD(i) the i-th (a float
 * expression), into the float lvalue `result`: one text for every caller,
 * so their orders cannot drift apart. */
#define NK_RED_BLOCK_F32(n, LOAD, result)                                              \
  do {                                                                                 \
    const int64_t nk_n_ = (n);                                                         \
    if (nk_n_ < NK_RED_LANES) {                                                        \
      float nk_r_ = 0;                                                                 \
      for (int64_t i_ = 0; i_ < nk_n_; i_++) nk_r_ += LOAD(i_);                        \
      (result) = nk_r_;                                                                \
      break;                                                                           \
    }                                                                                  \
    float nk_acc_[NK_RED_WIDE_LANES] = {0};                                            \
    int64_t nk_i_ = 0;                                                                 \
    if (nk_n_ >= NK_RED_WIDE_LANES) {                                                  \
      for (; nk_i_ + NK_RED_WIDE_LANES <= nk_n_; nk_i_ += NK_RED_WIDE_LANES)           \
        for (int j_ = 0; j_ < NK_RED_WIDE_LANES; j_++) nk_acc_[j_] += LOAD(nk_i_ + j_); \
      nk_red_fold64_f32(nk_acc_);                                                      \
    }                                                                                  \
    for (; nk_i_ + NK_RED_LANES <= nk_n_; nk_i_ += NK_RED_LANES)                       \
      for (int j_ = 0; j_ < NK_RED_LANES; j_++) nk_acc_[j_] += LOAD(nk_i_ + j_);        \
    float nk_r_ = nk_red_fold16_f32(nk_acc_);                                          \
    for (; nk_i_ < nk_n_; nk_i_++) nk_r_ += LOAD(nk_i_);                               \
    (result) = nk_r_;                                                                  \
  } while (0)

static inline float nk_reduce_block_f32_body(const float *p, int64_t n) {
  float r;
#define NK_RED_PLAIN_LOAD(i) p[i]
  NK_RED_BLOCK_F32(n, NK_RED_PLAIN_LOAD, r);
#undef NK_RED_PLAIN_LOAD
  return r;
}

typedef float (*nk_reduce_block_f32_fn)(const float *p, int64_t n);
float nk_reduce_block_f32_avx2(const float *p, int64_t n);
float nk_reduce_block_f32_avx512(const float *p, int64_t n);

#endif /* NK_REDUCE_BLOCK_H */
