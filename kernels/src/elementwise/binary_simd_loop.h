/* binary_simd_loop.h — the one body of every vectorised binary loop.
 *
 * Each binary_<isa>_<dtype>.c defines the vector vocabulary below and then
 * includes this file, which expands to that variant's entry point.  So an
 * ISA or dtype variant is a dozen lines of intrinsic names, and the loop
 * structure (broadcast cases, 4x unrolling, streaming-store alignment,
 * scalar tails) exists once.
 *
 *   NK_VEC, NK_SCALAR, NK_LANES       vector type, element type, lanes
 *   NK_SET1(x), NK_LOADU(p)           broadcast, unaligned load
 *   NK_STOREU(p, v), NK_STREAM(p, v)  store, non-temporal store
 *   NK_ADD, NK_MUL, NK_DIV, NK_FMADD  arithmetic (FMADD(a, b, c) = a*b+c),
 *                                     or NK_VEC_OP: the whole vector op
 *   NK_SCALAR_OP                      the scalar op of binary_ops.h for the
 *                                     head and tail, or NK_TAIL_MASK/LOAD/STORE:
 *                                     masked vectors of the vector op there
 *   NK_ALPHA                          the nk_alpha field of this dtype
 *   NK_ENTRY                          the entry point's name */
#include <immintrin.h>

#include "elementwise/binary_simd.h"

#ifdef NK_VEC_OP
#define nk_vec_op NK_VEC_OP
#else
NK_INLINE NK_VEC nk_vec_op(nk_binop k, NK_VEC a, NK_VEC b, NK_VEC alpha) {
  switch (k) {
  case NK_BINOP_ADD: return NK_ADD(a, b);
  case NK_BINOP_AXPY: return NK_FMADD(alpha, b, a);
  case NK_BINOP_MUL: return NK_MUL(a, b);
  default: return NK_DIV(a, b);
  }
}
#endif

#ifdef NK_TAIL_MASK
/* Elements [0, r) of a short stretch as one masked vector, so that they
 * take the vector op too (a variant that defines the mask macros: its
 * results then never depend on where a row starts or ends). */
NK_INLINE void nk_vec_part(nk_binop k, bool a_bcast, bool b_bcast, int r, NK_SCALAR *out,
                           const NK_SCALAR *a, const NK_SCALAR *b, NK_VEC va, NK_VEC vb,
                           NK_VEC alpha) {
  const __typeof__(NK_TAIL_MASK(1)) m = NK_TAIL_MASK(r);
  NK_VEC x = a_bcast ? va : NK_TAIL_LOAD(a, m), y = b_bcast ? vb : NK_TAIL_LOAD(b, m);
  NK_TAIL_STORE(out, m, nk_vec_op(k, x, y, alpha));
}
#endif

NK_INLINE void nk_vec_store(bool stream, NK_SCALAR *p, NK_VEC v) {
  if (stream) NK_STREAM(p, v);
  else NK_STOREU(p, v);
}

/* k, a_bcast, b_bcast and stream are constants at every call: one loop
 * each.  Streaming stores start at the first aligned element. */
NK_INLINE void nk_vec_run(nk_binop k, bool a_bcast, bool b_bcast, bool stream, int64_t n,
                          NK_SCALAR *out, const NK_SCALAR *a, const NK_SCALAR *b,
                          const nk_alpha *al) {
  const NK_VEC va = NK_SET1(a[0]), vb = NK_SET1(b[0]), alpha = NK_SET1(al->NK_ALPHA);
  int64_t i = 0;
#ifdef NK_TAIL_MASK
  if (stream && (uintptr_t)out % sizeof(NK_VEC)) {
    int64_t head = (int64_t)((sizeof(NK_VEC) - (uintptr_t)out % sizeof(NK_VEC)) / sizeof *out);
    if (head > n) head = n;
    if (head > 0) nk_vec_part(k, a_bcast, b_bcast, (int)head, out, a, b, va, vb, alpha);
    i = head;
  }
#else
  for (; stream && i < n && ((uintptr_t)(out + i) % sizeof(NK_VEC)); i++)
    out[i] = NK_SCALAR_OP(k, a[a_bcast ? 0 : i], b[b_bcast ? 0 : i], al);
#endif
  for (; i + 4 * NK_LANES <= n; i += 4 * NK_LANES)
    for (int u = 0; u < 4; u++) {
      int64_t j = i + u * NK_LANES;
      NK_VEC x = a_bcast ? va : NK_LOADU(a + j), y = b_bcast ? vb : NK_LOADU(b + j);
      nk_vec_store(stream, out + j, nk_vec_op(k, x, y, alpha));
    }
  for (; i + NK_LANES <= n; i += NK_LANES) {
    NK_VEC x = a_bcast ? va : NK_LOADU(a + i), y = b_bcast ? vb : NK_LOADU(b + i);
    nk_vec_store(stream, out + i, nk_vec_op(k, x, y, alpha));
  }
#ifdef NK_TAIL_MASK
  if (i < n)
    nk_vec_part(k, a_bcast, b_bcast, (int)(n - i), out + i, a_bcast ? a : a + i, b_bcast ? b : b + i,
                va, vb, alpha);
#else
  for (; i < n; i++) out[i] = NK_SCALAR_OP(k, a[a_bcast ? 0 : i], b[b_bcast ? 0 : i], al);
#endif
  if (stream) _mm_sfence(); /* order the streaming stores before the task completes */
}

NK_INLINE void nk_vec_run_stream(nk_binop k, bool a_bcast, bool b_bcast, int64_t n,
                                 NK_SCALAR *out, const NK_SCALAR *a, const NK_SCALAR *b,
                                 const nk_alpha *al) {
  if (n * (int64_t)sizeof *out >= NK_STREAM_STORE_BYTES) nk_vec_run(k, a_bcast, b_bcast, true, n, out, a, b, al);
  else nk_vec_run(k, a_bcast, b_bcast, false, n, out, a, b, al);
}

NK_INLINE void nk_vec_run_bcast(nk_binop k, int64_t n, NK_SCALAR *out, const NK_SCALAR *a,
                                bool a_bcast, const NK_SCALAR *b, bool b_bcast,
                                const nk_alpha *al) {
  if (a_bcast && b_bcast) nk_vec_run_stream(k, true, true, n, out, a, b, al);
  else if (a_bcast) nk_vec_run_stream(k, true, false, n, out, a, b, al);
  else if (b_bcast) nk_vec_run_stream(k, false, true, n, out, a, b, al);
  else nk_vec_run_stream(k, false, false, n, out, a, b, al);
}

void NK_ENTRY(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast, const void *b,
              bool b_bcast, const nk_alpha *alpha) {
  if (n <= 0) return;
  switch (k) {
  case NK_BINOP_ADD: nk_vec_run_bcast(NK_BINOP_ADD, n, out, a, a_bcast, b, b_bcast, alpha); break;
  case NK_BINOP_AXPY: nk_vec_run_bcast(NK_BINOP_AXPY, n, out, a, a_bcast, b, b_bcast, alpha); break;
  case NK_BINOP_MUL: nk_vec_run_bcast(NK_BINOP_MUL, n, out, a, a_bcast, b, b_bcast, alpha); break;
  default: nk_vec_run_bcast(NK_BINOP_DIV, n, out, a, a_bcast, b, b_bcast, alpha); break;
  }
}
