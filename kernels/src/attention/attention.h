/* attention.h — the attention engine's pieces shared by its variants.
 *
 * attention.c validates a task and fills one nk_attn_problem; the tiled
 * algorithm itself is attention_impl.h, compiled once per ISA and compute
 * type (attention_f32.c portable, attention_avx2_f32.c,
 * attention_avx512_f32.c, attention_f64.c) and picked at run time. */
#ifndef NK_ATTENTION_H
#define NK_ATTENTION_H

#include <stdint.h>

#include "neuron_kernels.h"

/* A 4-d operand (batch, head, row, col) as the tiles read it; byte strides
 * (0 along broadcast dims).  data == NULL: absent. */
typedef struct nk_attn_view {
  char *data;
  int32_t dtype;
  int64_t st[4];
} nk_attn_view;

typedef struct nk_attn_problem {
  int32_t mode; /* nk_attention_mode */
  int32_t causal;
  int64_t B, Hq, Hkv, L, S, D, Dv;
  double scale, dropout_p;
  uint64_t seed, offset;
  /* forward: o, lse (st[3] unused), q, k, v, mask
   * backward: dq|dk,dv, dbias, dout, q, k, v, lse, delta, mask */
  nk_attn_view o, lse, q, k, v, mask;
  nk_attn_view dq, dk, dv, dbias, dout, delta;
} nk_attn_problem;

/* One variant: runs the whole problem on the compute pool.  Returns 0, or
 * -1 after nrt_exec_fail (out of memory for the tiles). */
typedef int (*nk_attn_fn)(const nk_attn_problem *p, nrt_exec_ctx *ctx);

int nk_attention_portable_f32(const nk_attn_problem *p, nrt_exec_ctx *ctx);
int nk_attention_portable_f64(const nk_attn_problem *p, nrt_exec_ctx *ctx);
int nk_attention_avx2_f32(const nk_attn_problem *p, nrt_exec_ctx *ctx);
int nk_attention_avx512_f32(const nk_attn_problem *p, nrt_exec_ctx *ctx);

/* Dropout: element (b, h, i, j) of the attention matrix is kept iff word
 * w of Philox block offset/4 + idx/4 (idx = ((b*Hq + h)*L + i)*S + j,
 * w = idx % 4) is >= p * 2^32. */
static inline uint32_t nk_attn_drop_threshold(double p) {
  double t = p * 4294967296.0;
  if (!(t > 0)) return 0;
  if (t >= 4294967295.0) return 0xFFFFFFFFu;
  return (uint32_t)t;
}

#endif /* NK_ATTENTION_H */
