/* binary_half_avx512_impl.h — float16/bfloat16 binary rows, AVX-512F, fused:
 * 16 lanes loaded and widened in registers, the float32 op, rounded and
 * stored, with no float32 buffer in between.
 *
 * The float-rows adapter (nd_iter.h) runs binary's float32 loop on widened
 * chunks; for the commonest 16-bit rows (out and both inputs contiguous in
 * one 16-bit dtype, or an input broadcast along the row, e.g. `x * 0.5`)
 * that costs three extra passes through L1 per element (widen a, widen b,
 * round out), and Zen 4's one store per cycle made it 1.5x slower than
 * ATen's in-register conversions.  binary.c hands such rows here first (the
 * adapter's raw-row hook); the arithmetic is the same float32 op and the
 * same rounding (half_simd_avx512.h), so the bits equal the chunked path's.
 * Instantiated as BH_NAME by binary_avx512_half.c (AVX-512F) and
 * binary_avx512bf16_half.c (with AVX512_BF16's rounding store); binary.c
 * calls the one nk_cpu_variant() names. */
#include "elementwise/binary_simd.h"
#include "common/half_simd_avx512.h"
#include "common/simd_avx512_f32.h"
#include "elementwise/binary_vec_op.h"

/* t, k, a_bc and b_bc are constants at each call: one loop each. */
NK_INLINE void half_run(nrt_dtype t, nk_binop k, bool a_bc, bool b_bc, int64_t n, uint16_t *o,
                        const uint16_t *a, float av, const uint16_t *b, float bv,
                        const nk_alpha *al) {
  const __m512 va = _mm512_set1_ps(av), vb = _mm512_set1_ps(bv), alpha = _mm512_set1_ps(al->f32);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 x0 = a_bc ? va : nk_h16_load_avx512(t, a + i);
    __m512 x1 = a_bc ? va : nk_h16_load_avx512(t, a + i + 16);
    __m512 y0 = b_bc ? vb : nk_h16_load_avx512(t, b + i);
    __m512 y1 = b_bc ? vb : nk_h16_load_avx512(t, b + i + 16);
    nk_h16_store_avx512(t, o + i, nk_binop_vec(k, x0, y0, alpha));
    nk_h16_store_avx512(t, o + i + 16, nk_binop_vec(k, x1, y1, alpha));
  }
  for (; i < n; i++) {
    float x = a_bc ? av : nk_load_f32(t, a + i), y = b_bc ? bv : nk_load_f32(t, b + i);
    nk_store_f32(t, o + i, nk_binop_f32(k, x, y, al));
  }
}

NK_INLINE void half_bcast(nrt_dtype t, nk_binop k, int64_t n, uint16_t *o, const uint16_t *a,
                          const float *a_bc, const uint16_t *b, const float *b_bc,
                          const nk_alpha *al) {
  const float av = a_bc ? *a_bc : 0, bv = b_bc ? *b_bc : 0;
  if (a_bc && b_bc) half_run(t, k, true, true, n, o, a, av, b, bv, al);
  else if (a_bc) half_run(t, k, true, false, n, o, a, av, b, bv, al);
  else if (b_bc) half_run(t, k, false, true, n, o, a, av, b, bv, al);
  else half_run(t, k, false, false, n, o, a, av, b, bv, al);
}

NK_INLINE void half_kinds(nrt_dtype t, nk_binop k, int64_t n, uint16_t *o, const uint16_t *a,
                          const float *a_bc, const uint16_t *b, const float *b_bc,
                          const nk_alpha *al) {
  switch (k) {
  case NK_BINOP_ADD: half_bcast(t, NK_BINOP_ADD, n, o, a, a_bc, b, b_bc, al); break;
  case NK_BINOP_AXPY: half_bcast(t, NK_BINOP_AXPY, n, o, a, a_bc, b, b_bc, al); break;
  case NK_BINOP_MUL: half_bcast(t, NK_BINOP_MUL, n, o, a, a_bc, b, b_bc, al); break;
  default: half_bcast(t, NK_BINOP_DIV, n, o, a, a_bc, b, b_bc, al); break;
  }
}

void BH_NAME(nrt_dtype t, nk_binop k, int64_t n, void *out, const void *a,
             const float *a_bcast, const void *b, const float *b_bcast, const nk_alpha *alpha) {
  if (n <= 0) return;
  if (t == NRT_BFLOAT16) half_kinds(NRT_BFLOAT16, k, n, out, a, a_bcast, b, b_bcast, alpha);
  else half_kinds(NRT_FLOAT16, k, n, out, a, a_bcast, b, b_bcast, alpha);
}
