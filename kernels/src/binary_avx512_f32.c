/* binary_avx512_f32.c — float32 binary loops, AVX-512F, 16 lanes, 4x unrolled.
 * Compiled with -mavx512f (kernels/CMakeLists.txt); called only when
 * nk_cpu_isa() >= NK_ISA_AVX512.  See binary_simd.h for the contract. */
#include <immintrin.h>

#include "binary_simd.h"

#define LANES 16

NK_INLINE __m512 vec_op(nk_binop k, __m512 a, __m512 b, __m512 alpha) {
  switch (k) {
  case NK_BINOP_ADD: return _mm512_add_ps(a, b);
  case NK_BINOP_AXPY: return _mm512_fmadd_ps(alpha, b, a);
  case NK_BINOP_MUL: return _mm512_mul_ps(a, b);
  default: return _mm512_div_ps(a, b);
  }
}

NK_INLINE void store(bool stream, float *p, __m512 v) {
  if (stream) _mm512_stream_ps(p, v);
  else _mm512_storeu_ps(p, v);
}

/* k, a_bcast, b_bcast and stream are constants at every call: one loop
 * each.  Streaming stores start at the first aligned element. */
NK_INLINE void run(nk_binop k, bool a_bcast, bool b_bcast, bool stream, int64_t n, float *out,
                   const float *a, const float *b, const nk_alpha *al) {
  const __m512 va = _mm512_set1_ps(a[0]), vb = _mm512_set1_ps(b[0]);
  const __m512 alpha = _mm512_set1_ps(al->f32);
  int64_t i = 0;
  for (; stream && i < n && ((uintptr_t)(out + i) % sizeof(__m512)); i++)
    out[i] = nk_binop_f32(k, a[a_bcast ? 0 : i], b[b_bcast ? 0 : i], al);
  for (; i + 4 * LANES <= n; i += 4 * LANES)
    for (int u = 0; u < 4; u++) {
      int64_t j = i + u * LANES;
      __m512 x = a_bcast ? va : _mm512_loadu_ps(a + j), y = b_bcast ? vb : _mm512_loadu_ps(b + j);
      store(stream, out + j, vec_op(k, x, y, alpha));
    }
  for (; i + LANES <= n; i += LANES) {
    __m512 x = a_bcast ? va : _mm512_loadu_ps(a + i), y = b_bcast ? vb : _mm512_loadu_ps(b + i);
    store(stream, out + i, vec_op(k, x, y, alpha));
  }
  for (; i < n; i++) out[i] = nk_binop_f32(k, a[a_bcast ? 0 : i], b[b_bcast ? 0 : i], al);
  if (stream) _mm_sfence(); /* order the streaming stores before the task completes */
}

NK_INLINE void run_stream(nk_binop k, bool a_bcast, bool b_bcast, int64_t n, float *out,
                          const float *a, const float *b, const nk_alpha *al) {
  if (n * (int64_t)sizeof *out >= NK_STREAM_STORE_BYTES) run(k, a_bcast, b_bcast, true, n, out, a, b, al);
  else run(k, a_bcast, b_bcast, false, n, out, a, b, al);
}

NK_INLINE void run_bcast(nk_binop k, int64_t n, float *out, const float *a, bool a_bcast,
                         const float *b, bool b_bcast, const nk_alpha *al) {
  if (a_bcast && b_bcast) run_stream(k, true, true, n, out, a, b, al);
  else if (a_bcast) run_stream(k, true, false, n, out, a, b, al);
  else if (b_bcast) run_stream(k, false, true, n, out, a, b, al);
  else run_stream(k, false, false, n, out, a, b, al);
}

void nk_binary_avx512_f32(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast,
                        const void *b, bool b_bcast, const nk_alpha *alpha) {
  if (n <= 0) return;
  switch (k) {
  case NK_BINOP_ADD: run_bcast(NK_BINOP_ADD, n, out, a, a_bcast, b, b_bcast, alpha); break;
  case NK_BINOP_AXPY: run_bcast(NK_BINOP_AXPY, n, out, a, a_bcast, b, b_bcast, alpha); break;
  case NK_BINOP_MUL: run_bcast(NK_BINOP_MUL, n, out, a, a_bcast, b, b_bcast, alpha); break;
  default: run_bcast(NK_BINOP_DIV, n, out, a, a_bcast, b, b_bcast, alpha); break;
  }
}
