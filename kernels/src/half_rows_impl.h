/* half_rows_impl.h — the bodies of the 16-bit row conversions (half_rows.h),
 * included once per ISA (half_rows.c portable, half_rows_<isa>_f32.c under
 * their ISA's flags) with HR_NAME(x) naming the instantiation: the same
 * loops, vectorised as wide as the ISA allows.  In binary.c's own baseline
 * build they had run 4 lanes wide and cost more than the arithmetic. */
#include <string.h>

#include "dtype_convert.h"

const float *HR_NAME(in)(nrt_dtype t, const char *x, int64_t st, int64_t m, float *buf) {
  if (st == 0) {
    buf[0] = nk_load_f32(t, x);
  } else if (t == NRT_FLOAT32 && st == 4) {
    return (const float *)(const void *)x; /* already float: read in place */
  } else if (t == NRT_BFLOAT16 && st == 2) {
    const uint16_t *h = (const uint16_t *)(const void *)x; /* a widening shift */
    uint32_t *u = (uint32_t *)(void *)buf;
    for (int64_t j = 0; j < m; j++) u[j] = (uint32_t)h[j] << 16;
  } else if (t == NRT_BFLOAT16) {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_bf16_to_f32(nk_read_u16(x + j * st));
  } else if (t == NRT_FLOAT16) {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_f16_to_f32(nk_read_u16(x + j * st));
  } else {
    for (int64_t j = 0; j < m; j++) buf[j] = nk_load_f32(t, x + j * st);
  }
  return buf;
}

void HR_NAME(out)(nrt_dtype t, char *o, int64_t st, int64_t m, const float *v) {
  if (t == NRT_BFLOAT16 && st == 2) {
    /* nk_f32_to_bf16 without its branch: round to nearest even, NaN to 0x7FC0 */
    uint16_t *d = (uint16_t *)(void *)o;
    const uint32_t *u = (const uint32_t *)(const void *)v;
    for (int64_t j = 0; j < m; j++) {
      const uint32_t r = (u[j] + 0x7FFFu + ((u[j] >> 16) & 1u)) >> 16;
      d[j] = (uint16_t)((u[j] & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FC0u : r);
    }
  } else if (t == NRT_FLOAT32 && st == 4) {
    if ((const char *)v != o) memcpy(o, v, (size_t)m * 4);
  } else {
    for (int64_t j = 0; j < m; j++) nk_store_f32(t, o + j * st, v[j]);
  }
}
