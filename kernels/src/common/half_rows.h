/* half_rows.h — float16/bfloat16 (and other float) rows widened to float32
 * and rounded back, in loops vectorised per ISA (half_rows_impl.h: AVX-512F,
 * AVX2 + F16C, portable C; strided rows gathered into a contiguous block).
 *
 * The elementwise kernels compute 16-bit dtypes in float32 and round once on
 * store (ATen's CPU does the same).  Their vectorised loops are float32
 * only, so 16-bit rows go through them in chunks -- widen a chunk, run the
 * float32 loop, round back -- in ONE place, nd_iter's float-rows adapter
 * (nk_for_each_float); the copy kernel's float casts, norm, gemm and conv
 * call these conversions directly.  The same arithmetic as the per-element
 * path, without a dtype switch per element. */
#ifndef NK_HALF_ROWS_H
#define NK_HALF_ROWS_H

#include "common/dtype_convert.h"

/* in: m elements of dtype t from x (byte stride st; 0: one broadcast value,
 * buf[0]) as float; returns buf, or x itself when it already is contiguous
 * float32.  out: m floats stored as dtype t at o (byte stride st), 16-bit
 * types rounded to nearest even (bfloat16 NaN as 0x7FC0, like ATen). */
typedef struct nk_half_fns {
  const float *(*in)(nrt_dtype t, const char *x, int64_t st, int64_t m, float *buf);
  void (*out)(nrt_dtype t, char *o, int64_t st, int64_t m, const float *v);
} nk_half_fns;

/* The instantiation for this CPU (half_rows.c; one per ISA). */
const nk_half_fns *nk_half_pick(void);
#define NK_HALF_DECLARE(isa)                                                                      \
  const float *nk_half_in_##isa(nrt_dtype t, const char *x, int64_t st, int64_t m, float *buf); \
  void nk_half_out_##isa(nrt_dtype t, char *o, int64_t st, int64_t m, const float *v);
NK_HALF_DECLARE(portable)
NK_HALF_DECLARE(avx2)
NK_HALF_DECLARE(avx512)
NK_HALF_DECLARE(avx512bf16)
#undef NK_HALF_DECLARE

NK_INLINE const float *nk_half_in(nrt_dtype t, const char *x, int64_t st, int64_t m, float *buf) {
  return nk_half_pick()->in(t, x, st, m, buf);
}

NK_INLINE void nk_half_out(nrt_dtype t, char *o, int64_t st, int64_t m, const float *v) {
  nk_half_pick()->out(t, o, st, m, v);
}

#endif /* NK_HALF_ROWS_H */
