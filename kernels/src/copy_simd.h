/* copy_simd.h — vectorised contiguous float32 <-> float16/bfloat16 casts.
 * Bit-identical to the scalar conversions of dtype_convert.h (NaN lanes are
 * canonicalised the same way), so results never depend on the ISA. */
#ifndef NK_COPY_SIMD_H
#define NK_COPY_SIMD_H

#include <stdint.h>

typedef void (*nk_convert_vec_fn)(int64_t n, void *out, const void *in);

/* copy_avx2_half.c (AVX2 + F16C); AVX-512 machines use these too: the casts
 * are bound by memory bandwidth, not by vector width. */
void nk_convert_avx2_f32_to_f16(int64_t n, void *out, const void *in);
void nk_convert_avx2_f16_to_f32(int64_t n, void *out, const void *in);
void nk_convert_avx2_f32_to_bf16(int64_t n, void *out, const void *in);
void nk_convert_avx2_bf16_to_f32(int64_t n, void *out, const void *in);

#endif /* NK_COPY_SIMD_H */
