/* jit_prelude.h — what every compiled adaptive-eager group includes
 * (runtime/src/fusion_jit.c generates the rest): the vector macros of the
 * kernel variant in use (NK_JIT_AVX512 set by the flags that
 * nk_register_fusion hands the runtime, the variant's own target flags),
 * the kernels' own per-element code that row expressions name
 * (nk_binop_vec, nk_unary_vec_body, nk_pw_addc_vec), and loads, stores and roundings per
 * dtype (float32 so far: nk_binary_row_expr says why).  A group's code is
 * then each member's routine applied to registers instead of rows: the
 * same operations on the same values, so the same bits.
 *
 * Loads and stores take the element index i and rem, the lanes in use:
 * NK_JIT_LANES in the loop (the masks fold away), fewer in the tail, where
 * the unused lanes compute on zeros and are never stored -- what the unary
 * rows' masked tails do; the binary rows' scalar tails give the same bits. */
#ifndef NK_JIT_PRELUDE_H
#define NK_JIT_PRELUDE_H

#include <stdint.h>
#include <string.h>

#if NK_JIT_AVX512
#include "common/simd_avx512_f32.h"
#else
#include "common/simd_avx2_f32.h"
#endif
#include "common/dtype_convert.h"
#include "elementwise/binary_vec_op.h"
#include "elementwise/pointwise_vec_op.h"
#include "elementwise/unary_vec_body.h"

#define NK_JIT_LANES LANES
/* The generated loop works on blocks of NK_JIT_BLOCK vectors, each member
 * applied to every vector of the block before the next member: a group's
 * code per vector is one long dependent chain (the transcendental bodies),
 * and the independent vectors of a block fill the pipelines (a bfloat16
 * 6-op chain on one core, L1-resident: 1.59 ns per element a vector at a
 * time, 1.38 in blocks of two; in blocks of four GELU from primitives took
 * 10.6 ms against 7.7 over 2^24 floats, one run).  NK_JIT_LANES_LOOP runs a statement per vector of the
 * block (u), NK_JIT_AT is that vector's first element. */
#define NK_JIT_BLOCK 2
#define NK_JIT_PRAGMA(x) _Pragma(#x)
#define NK_JIT_LANES_LOOP NK_JIT_PRAGMA(GCC unroll 4) for (int u = 0; u < NK_U; u++)
#define NK_JIT_AT (i + (int64_t)u * NK_JIT_LANES)
#define NK_JIT_INLINE static inline __attribute__((always_inline))

NK_JIT_INLINE VT nk_jit_ld_f32(const char *p, int64_t i, int rem) {
  const float *f = (const float *)(const void *)p + i;
  return rem == LANES ? VLOADU(f) : TAIL_LOAD(f, TAIL_MASK(rem));
}

NK_JIT_INLINE void nk_jit_st_f32(char *p, int64_t i, VT v, int rem) {
  float *f = (float *)(void *)p + i;
  if (rem == LANES) VSTOREU(f, v);
  else TAIL_STORE(f, TAIL_MASK(rem), v);
}

/* A large output (the planner stages it in row mode, FUSE_STREAM_BYTES)
 * is written with non-temporal stores where a whole aligned vector goes,
 * for row mode's reason: a store that misses the cache first reads the
 * line.  The bytes are the same; the executor fences after the tile. */
#if NK_JIT_AVX512
#define NK_JIT_STREAM_PS _mm512_stream_ps
#else
#define NK_JIT_STREAM_PS _mm256_stream_ps
#endif
NK_JIT_INLINE void nk_jit_nt_f32(char *p, int64_t i, VT v, int rem) {
  float *f = (float *)(void *)p + i;
  if (rem == LANES && (uintptr_t)f % sizeof(VT) == 0) NK_JIT_STREAM_PS(f, v);
  else nk_jit_st_f32(p, i, v, rem);
}

/* one value for every lane: a row-invariant operand, read as its dtype */
NK_JIT_INLINE VT nk_jit_bcast(nrt_dtype t, const char *p) { return VSET(nk_load_f32(t, p)); }

#define NK_JIT_LD_FLOAT32(p, i, rem) nk_jit_ld_f32(p, i, rem)
#define NK_JIT_ST_FLOAT32(p, i, v, rem) nk_jit_st_f32(p, i, v, rem)
#define NK_JIT_NT_FLOAT32(p, i, v, rem) nk_jit_nt_f32(p, i, v, rem)
#define NK_JIT_ROUND_FLOAT32(v) (v)

#endif /* NK_JIT_PRELUDE_H */
