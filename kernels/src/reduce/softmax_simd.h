/* softmax_simd.h — the vectorised float32 softmax line.
 *
 * One contiguous float32 line of n elements in every operand (forward:
 * out, in; backward: grad_in, grad_out, out).  Returns 0 when done, 1 when
 * the line holds a NaN in the forward input (the caller then runs the
 * portable line, which gives ATen's all-NaN result).  log: 0 softmax,
 * 1 log_softmax, 2 / 3 log_softmax rounding its sum and log to bfloat16 /
 * float16 (a widened 16-bit line, as ATen's CPU).  exp is a
 * Cephes-style polynomial (about 1 ulp), exact at 0, 0 below the float
 * range and -inf, inf above it. */
#ifndef NK_SOFTMAX_SIMD_H
#define NK_SOFTMAX_SIMD_H

#include <stdint.h>

typedef int (*nk_softmax_vec_fn)(int log, int backward, int64_t n, char *o, const char *a,
                                 const char *b);

int nk_softmax_avx2_f32(int log, int backward, int64_t n, char *o, const char *a, const char *b);
int nk_softmax_avx512_f32(int log, int backward, int64_t n, char *o, const char *a, const char *b);

/* T neighbouring float32 lines along an outer dim (softmax.c's tiles);
 * returns 1 when it does not take them (T not a multiple of 8, a NaN). */
int nk_softmax_tile_avx2_f32(int log, int backward, int64_t n, int64_t T, char *const *d,
                             const int64_t *s);

/* The variant for this machine's ISA, or NULL. */
nk_softmax_vec_fn nk_softmax_vec_pick(void);

#endif /* NK_SOFTMAX_SIMD_H */
