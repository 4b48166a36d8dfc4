/* jit_prelude.h — what every compiled adaptive-eager group includes
 * (runtime/src/fusion_jit.c generates the rest): the vector macros of the
 * kernel variant in use (NK_JIT_AVX512 set by the flags that
 * nk_register_fusion hands the runtime, the variant's own target flags),
 * the kernels' own per-element code that row expressions name
 * (nk_binop_vec, nk_unary_vec_body, nk_pw_addc_vec), and loads, stores and roundings per
 * dtype (float32, float16, bfloat16).  A group's code is
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
 * and the independent vectors of a block fill the pipelines.  AVX-512's 32
 * registers hold twice AVX2's blocks.  Measured on one core, L1-resident
 * rows unless said:
 * - float32 groups (NK_JIT_BLOCK): on AVX2 (Zen 3) blocks of two beat one
 *   vector at a time (a bfloat16 6-op chain 1.38 against 1.59 ns per element) and
 *   four (GELU from primitives 7.7 against 10.6 ms over 2^24 floats); on
 *   AVX-512 (Zen 5) four beat two: GELU from primitives 0.44 against 0.48
 *   ns, the sigmoid chain 0.34 against 0.36 (0.36 against 0.40 over 2^23
 *   floats, from memory).
 * - a group that rounds to a 16-bit dtype (NK_JIT_BLOCK_ROUNDING) adds ~5
 *   dependent integer operations per rounding member to each vector's
 *   chain, and more vectors per block hide them.  The bfloat16 sigmoid
 *   chain of bench/adaptive.py (6 roundings): Zen 3 (AVX2) 2.48 ns a vector
 *   at a time, 2.19 in blocks of two, 1.57 of four, 1.54 of eight (float32
 *   without the roundings: 0.77); Zen 5 (AVX-512) 0.71 in blocks of four,
 *   0.60 of eight, 0.57 of sixteen (eight kept: a larger group's live
 *   values must still fit in the registers).  There, the sigmoid is half of
 *   the time and the six roundings a third.
 * NK_JIT_LANES_LOOP runs a statement per vector of the block (u), unrolled
 * up to the larger block so that the block lives in registers; NK_JIT_AT
 * is that vector's first element. */
#if NK_JIT_AVX512
#define NK_JIT_BLOCK 4
#define NK_JIT_BLOCK_ROUNDING 8
#else
#define NK_JIT_BLOCK 2
#define NK_JIT_BLOCK_ROUNDING 4
#endif
#define NK_JIT_PRAGMA(x) _Pragma(#x)
#define NK_JIT_UNROLL(n) NK_JIT_PRAGMA(GCC unroll n) /* n expanded first */
#define NK_JIT_LANES_LOOP NK_JIT_UNROLL(NK_JIT_BLOCK_ROUNDING) for (int u = 0; u < NK_U; u++)
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

/* Each dense input asks for its line NK_JIT_PREFETCH_AHEAD elements ahead,
 * once per block (a block of float32 is one 64-byte line at AVX2, four at
 * AVX-512, where a prefetch per line measured the same on a Zen 5: 0.359
 * against 0.364 ns per element over 2^23 floats).  A segment
 * reads its streams in whole-tile runs, but a group over several inputs
 * still waited on memory: paired in one process on a Zen 3 (2 threads),
 * the sigmoid chain over four 2^24-float tensors took 8.1 ms against 8.7
 * without, an Adam step from plain ops over 10 parameters 8.0 against
 * 8.8; one input and compute-bound chains (GELU) the same.  256 elements
 * ahead beat 128, 512 and 1024; into every cache level (T0) beat the
 * non-temporal hint (Adam 8.1 against 8.5).  A prefetch never faults, so
 * one past the row's end is harmless. */
#define NK_JIT_PREFETCH_AHEAD 256
#define NK_JIT_PREFETCH(p, esize) \
  __builtin_prefetch((const void *)((uintptr_t)(p) + (uintptr_t)(i + NK_JIT_PREFETCH_AHEAD) * (esize)), 0, 3)

/* one value for every lane: a row-invariant operand, read as its dtype */
NK_JIT_INLINE VT nk_jit_bcast(nrt_dtype t, const char *p) { return VSET(nk_load_f32(t, p)); }

#define NK_JIT_LD_FLOAT32(p, i, rem) nk_jit_ld_f32(p, i, rem)
#define NK_JIT_ST_FLOAT32(p, i, v, rem) nk_jit_st_f32(p, i, v, rem)
#define NK_JIT_NT_FLOAT32(p, i, v, rem) nk_jit_nt_f32(p, i, v, rem)
#define NK_JIT_ROUND_FLOAT32(v) (v)

/* ---- float16 / bfloat16 ----
 * A 16-bit value lives in a register as the float32 it widens to (exactly),
 * which is what the next member of an unfused chain loads: a member's
 * float32 result is rounded to its dtype there (NK_JIT_ROUND_*), with
 * dtype_convert.h's bits -- bfloat16 to nearest even with NaN -> 0x7FC0,
 * float16 through F16C with NaN lanes made sign | 0x7FC00000 first (c10's
 * sign | 0x7E00) -- and a store only narrows a value that is already
 * exact.  The bfloat16 rounding is integer arithmetic on the float's bits
 * (5 operations and a NaN select), so that a chain of 16-bit members costs
 * a few operations per member beyond its float32 code. */
#if NK_JIT_AVX512
#include "common/half_simd_avx512.h"
typedef __m256i nk_jit_h16; /* a vector's 16-bit values */
#define NK_JIT_H16_WIDEN(t, h) nk_h16_load_avx512(t, h)
#define NK_JIT_H16_STORE(h, x) _mm256_storeu_si256((__m256i *)(void *)(h), x)
#define NK_JIT_H16_STREAM(h, x) _mm256_stream_si256((__m256i *)(void *)(h), x)
#define NK_JIT_BF16_NARROW(v) _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16))
#define NK_JIT_F16_WIDEN(x) _mm512_cvtph_ps(x) /* a register's values */
#define NK_JIT_F16_NARROW(v) _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define NK_JIT_SRLI(u, n) _mm512_srli_epi32(u, n)
#else
#include "common/half_simd_avx2.h"
typedef __m128i nk_jit_h16;
#define NK_JIT_H16_WIDEN(t, h) nk_h16_load_avx2(t, h)
#define NK_JIT_H16_STORE(h, x) _mm_storeu_si128((__m128i *)(void *)(h), x)
#define NK_JIT_H16_STREAM(h, x) _mm_stream_si128((__m128i *)(void *)(h), x)
NK_JIT_INLINE __m128i nk_jit_bf16_narrow_avx2(__m256 v) {
  const __m256i w = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
#define NK_JIT_BF16_NARROW(v) nk_jit_bf16_narrow_avx2(v)
#define NK_JIT_F16_WIDEN(x) _mm256_cvtph_ps(x)
#define NK_JIT_F16_NARROW(v) _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define NK_JIT_SRLI(u, n) _mm256_srli_epi32(u, n)
#endif

NK_JIT_INLINE VT nk_jit_round_bf16(VT x) {
  const VI u = VCAST_I(x);
  const VI lsb = IAND(NK_JIT_SRLI(u, 16), ISET(1));
  const VI r = IAND(IADD(u, IADD(lsb, ISET(0x7FFF))), ISET((int)0xFFFF0000u));
  return VSEL(VCMP(x, x, UNORD), ICAST_F(ISET(0x7FC00000)), ICAST_F(r));
}

NK_JIT_INLINE VT nk_jit_round_f16(VT x) {
  const VT quiet = VOR(VAND(x, ICAST_F(ISET((int)0x80000000u))), ICAST_F(ISET(0x7FC00000)));
  return NK_JIT_F16_WIDEN(NK_JIT_F16_NARROW(VSEL(VCMP(x, x, UNORD), quiet, x)));
}

/* rem < LANES: the row's last values through a zeroed block (the unused
 * lanes compute on zeros and are never stored) */
#define NK_JIT_H16_DEFINE(name, T, NARROW)                                                \
  NK_JIT_INLINE VT nk_jit_ld_##name(const char *p, int64_t i, int rem) {                   \
    const uint16_t *h = (const uint16_t *)(const void *)p + i;                              \
    if (rem == LANES) return NK_JIT_H16_WIDEN(T, h);                                        \
    uint16_t tmp[LANES] = {0};                                                              \
    memcpy(tmp, h, (size_t)rem * 2);                                                        \
    return NK_JIT_H16_WIDEN(T, tmp);                                                        \
  }                                                                                         \
  NK_JIT_INLINE void nk_jit_st_##name(char *p, int64_t i, VT v, int rem) {                 \
    uint16_t *h = (uint16_t *)(void *)p + i;                                                \
    if (rem == LANES) {                                                                     \
      NK_JIT_H16_STORE(h, NARROW(v));                                                       \
      return;                                                                               \
    }                                                                                       \
    uint16_t tmp[LANES];                                                                    \
    NK_JIT_H16_STORE(tmp, NARROW(v));                                                       \
    memcpy(h, tmp, (size_t)rem * 2);                                                        \
  }                                                                                         \
  NK_JIT_INLINE void nk_jit_nt_##name(char *p, int64_t i, VT v, int rem) {                 \
    uint16_t *h = (uint16_t *)(void *)p + i;                                                \
    if (rem == LANES && (uintptr_t)h % sizeof(nk_jit_h16) == 0) NK_JIT_H16_STREAM(h, NARROW(v)); \
    else nk_jit_st_##name(p, i, v, rem);                                                    \
  }
NK_JIT_H16_DEFINE(bf16, NRT_BFLOAT16, NK_JIT_BF16_NARROW)
NK_JIT_H16_DEFINE(f16, NRT_FLOAT16, NK_JIT_F16_NARROW)
#undef NK_JIT_H16_DEFINE

#define NK_JIT_LD_BFLOAT16(p, i, rem) nk_jit_ld_bf16(p, i, rem)
#define NK_JIT_ST_BFLOAT16(p, i, v, rem) nk_jit_st_bf16(p, i, v, rem)
#define NK_JIT_NT_BFLOAT16(p, i, v, rem) nk_jit_nt_bf16(p, i, v, rem)
#define NK_JIT_ROUND_BFLOAT16(v) nk_jit_round_bf16(v)
#define NK_JIT_LD_FLOAT16(p, i, rem) nk_jit_ld_f16(p, i, rem)
#define NK_JIT_ST_FLOAT16(p, i, v, rem) nk_jit_st_f16(p, i, v, rem)
#define NK_JIT_NT_FLOAT16(p, i, v, rem) nk_jit_nt_f16(p, i, v, rem)
#define NK_JIT_ROUND_FLOAT16(v) nk_jit_round_f16(v)

#endif /* NK_JIT_PRELUDE_H */
