/* half_rows.h — float16/bfloat16 rows widened to float32 and rounded back,
 * in loops the compiler vectorises.
 *
 * The elementwise kernels compute 16-bit dtypes in float32 and round once on
 * store (ATen's CPU does the same).  Their vectorised loops are float32
 * only, so 16-bit rows go through them in chunks: widen a chunk, run the
 * float32 loop, round back.  The same arithmetic as the per-element path,
 * without a dtype switch per element. */
#ifndef NK_HALF_ROWS_H
#define NK_HALF_ROWS_H

#include "dtype_convert.h"

#define NK_HALF_CHUNK 512 /* elements per chunk: three chunks fit in L1 */

/* m elements of dtype t from x (byte stride st; 0: one broadcast value,
 * buf[0]) into buf as float; returns buf. */
NK_INLINE const float *nk_half_in(nrt_dtype t, const char *x, int64_t st, int64_t m, float *buf) {
  if (st == 0) {
    buf[0] = nk_load_f32(t, x);
  } else if (t == NRT_BFLOAT16 && st == 2) {
    const uint16_t *h = (const uint16_t *)(const void *)x; /* a widening shift */
    for (int64_t j = 0; j < m; j++) {
      const uint32_t u = (uint32_t)h[j] << 16;
      memcpy(&buf[j], &u, 4);
    }
  } else if (t == NRT_BFLOAT16) {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_bf16_to_f32(nk_read_u16(x + j * st));
  } else if (t == NRT_FLOAT16) {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_f16_to_f32(nk_read_u16(x + j * st));
  } else {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_load_f32(t, x + j * st);
  }
  return buf;
}

/* m floats rounded to dtype t (float16 or bfloat16) at o (byte stride st). */
NK_INLINE void nk_half_out(nrt_dtype t, char *o, int64_t st, int64_t m, const float *v) {
  if (t == NRT_BFLOAT16 && st == 2) {
    /* nk_f32_to_bf16 without its branch: round to nearest even, NaN to 0x7FC0 */
    uint16_t *d = (uint16_t *)(void *)o;
    for (int64_t j = 0; j < m; j++) {
      uint32_t u;
      memcpy(&u, &v[j], 4);
      const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
      d[j] = (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : r);
    }
  } else if (t == NRT_BFLOAT16) {
    for (int64_t j = 0; j < m; j++) nk_write_u16(o + j * st, nk_f32_to_bf16(v[j]));
  } else {
    for (int64_t j = 0; j < m; j++) nk_write_u16(o + j * st, nk_f32_to_f16(v[j]));
  }
}

#endif /* NK_HALF_ROWS_H */
