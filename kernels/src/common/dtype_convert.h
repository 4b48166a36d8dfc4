/* dtype_convert.h — loading and storing one element of any nrt_dtype.
 *
 * Every elementwise kernel computes in one of four classes (float, double,
 * int64, bool) and reaches memory only through the functions here, so the
 * conversion rules live in one place:
 *   - float16/bfloat16 <-> float32 are bit-exact with PyTorch's c10::Half /
 *     c10::BFloat16 (round to nearest even, subnormals kept, NaN becomes the
 *     canonical quiet NaN 0x7E00|sign resp. 0x7FC0);
 *   - double -> float16/bfloat16 goes through float32, as c10 does;
 *   - floating -> integral truncates like PyTorch's x86 build, never with
 *     undefined behaviour: int8/int16/int32 go through int32 and uint8/int64
 *     through int64 (c10::convert's rule for uint8); NaN and values outside
 *     that int give its minimum (what cvttss2si gives); then the result
 *     wraps to the narrower width;
 *   - anything -> bool is (x != 0); a bool byte reads as (byte != 0).
 * Elements are read and written with memcpy, so a misaligned view is safe;
 * compilers turn it into a single move.
 *
 * The dtype arguments are compile-time constants in the specialised loops
 * (always-inlined templates), so the switches fold away there. */
#ifndef NK_DTYPE_CONVERT_H
#define NK_DTYPE_CONVERT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "neuron_runtime.h"

#define NK_INLINE static inline __attribute__((always_inline))

typedef enum nk_class { NK_CLASS_BOOL, NK_CLASS_INT, NK_CLASS_FLOAT, NK_CLASS_DOUBLE } nk_class;

NK_INLINE bool nk_dtype_valid(int32_t t) { return t >= 0 && t < NRT_DTYPE_COUNT; }
NK_INLINE bool nk_dtype_is_floating(nrt_dtype t) { return t >= NRT_FLOAT16; }

/* The class a value of dtype t is computed in (float16/bfloat16 in float). */
NK_INLINE nk_class nk_dtype_class(nrt_dtype t) {
  switch (t) {
  case NRT_BOOL: return NK_CLASS_BOOL;
  case NRT_FLOAT64: return NK_CLASS_DOUBLE;
  case NRT_FLOAT16: case NRT_BFLOAT16: case NRT_FLOAT32: return NK_CLASS_FLOAT;
  default: return NK_CLASS_INT;
  }
}

NK_INLINE size_t nk_dtype_size(nrt_dtype t) {
  static const unsigned char sizes[NRT_DTYPE_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[t];
}

/* ------------------------------------------------------- bit reinterpretation */

NK_INLINE uint32_t nk_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
NK_INLINE float nk_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ----------------------------------------------------------------- float16 */

NK_INLINE float nk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0x1F) /* inf, or NaN made quiet (as the FPU does in c10) */
    return nk_f32_from_bits(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0));
  if (exp == 0) /* zero or subnormal: mant * 2^-24 is exact in float */
    return nk_f32_from_bits(sign | nk_f32_bits((float)mant * 0x1p-24f));
  return nk_f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

NK_INLINE uint16_t nk_f32_to_f16(float f) {
  uint32_t x = nk_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u;  /* NaN */
  if (x >= 0x477FF000u) return sign | 0x7C00u; /* >= 65520 rounds to inf */
  if (x >= 0x38800000u) {                      /* normal half: rebias, round */
    uint32_t m = x - 0x38000000u;
    return sign | (uint16_t)((m + 0x0FFFu + ((m >> 13) & 1u)) >> 13);
  }
  if (x < 0x33000000u) return sign; /* below 2^-25: rounds to zero */
  /* Subnormal half: k * 2^-24 with k = mantissa >> shift, rounded to even
   * (k may round up to 0x400, the smallest normal, which is the right bits). */
  uint32_t mant = (x & 0x7FFFFFu) | 0x800000u;
  uint32_t shift = 126u - (x >> 23);
  uint32_t k = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (k & 1u))) k++;
  return sign | (uint16_t)k;
}

/* ---------------------------------------------------------------- bfloat16 */

NK_INLINE float nk_bf16_to_f32(uint16_t b) { return nk_f32_from_bits((uint32_t)b << 16); }

NK_INLINE uint16_t nk_f32_to_bf16(float f) {
  if (isnan(f)) return 0x7FC0u;
  uint32_t u = nk_f32_bits(f);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------ floating -> integral, defined */

NK_INLINE int64_t nk_f64_to_i64(double d) {
  /* -2^63 <= d < 2^63, written so that NaN fails the test */
  if (d >= -0x1p63 && d < 0x1p63) return (int64_t)d;
  return INT64_MIN;
}

NK_INLINE int64_t nk_f64_to_i32(double d) {
  if (d > -0x1p31 - 1 && d < 0x1p31) return (int32_t)d;
  return INT32_MIN;
}

/* floating -> integral dtype t, before wrapping to t's width */
NK_INLINE int64_t nk_f64_to_integral(nrt_dtype t, double d) {
  if (t == NRT_INT8 || t == NRT_INT16 || t == NRT_INT32) return nk_f64_to_i32(d);
  return nk_f64_to_i64(d);
}

/* Wraps an int64 to the width of integral dtype t (two's complement). */
NK_INLINE int64_t nk_wrap_i64(nrt_dtype t, int64_t v) {
  switch (t) {
  case NRT_BOOL: return v != 0;
  case NRT_UINT8: return (uint8_t)v;
  case NRT_INT8: return (int8_t)(uint8_t)v;
  case NRT_INT16: return (int16_t)(uint16_t)v;
  case NRT_INT32: return (int32_t)(uint32_t)v;
  default: return v;
  }
}

/* Rounds a float to the precision of floating dtype t (identity for f32). */
NK_INLINE float nk_round_f32(nrt_dtype t, float v) {
  if (t == NRT_FLOAT16) return nk_f16_to_f32(nk_f32_to_f16(v));
  if (t == NRT_BFLOAT16) return nk_bf16_to_f32(nk_f32_to_bf16(v));
  return v;
}

/* ------------------------------------------------------------------- loads */

#define NK_DEFINE_RAW(T, name)                                              \
  NK_INLINE T nk_read_##name(const void *p) { T v; memcpy(&v, p, sizeof v); return v; } \
  NK_INLINE void nk_write_##name(void *p, T v) { memcpy(p, &v, sizeof v); }
NK_DEFINE_RAW(uint8_t, u8)
NK_DEFINE_RAW(int8_t, i8)
NK_DEFINE_RAW(int16_t, i16)
NK_DEFINE_RAW(uint16_t, u16)
NK_DEFINE_RAW(int32_t, i32)
NK_DEFINE_RAW(int64_t, i64)
NK_DEFINE_RAW(float, f32)
NK_DEFINE_RAW(double, f64)
#undef NK_DEFINE_RAW

/* bool and the integral dtypes only */
NK_INLINE int64_t nk_load_integral(nrt_dtype t, const void *p) {
  switch (t) {
  case NRT_BOOL: return nk_read_u8(p) != 0;
  case NRT_UINT8: return nk_read_u8(p);
  case NRT_INT8: return nk_read_i8(p);
  case NRT_INT16: return nk_read_i16(p);
  case NRT_INT32: return nk_read_i32(p);
  case NRT_INT64: return nk_read_i64(p);
  default: return 0;
  }
}

NK_INLINE float nk_load_f32(nrt_dtype t, const void *p) {
  switch (t) {
  case NRT_FLOAT16: return nk_f16_to_f32(nk_read_u16(p));
  case NRT_BFLOAT16: return nk_bf16_to_f32(nk_read_u16(p));
  case NRT_FLOAT32: return nk_read_f32(p);
  case NRT_FLOAT64: return (float)nk_read_f64(p);
  default: return (float)nk_load_integral(t, p); /* int64 -> float rounds once */
  }
}

NK_INLINE double nk_load_f64(nrt_dtype t, const void *p) {
  if (t == NRT_FLOAT64) return nk_read_f64(p);
  if (nk_dtype_is_floating(t)) return nk_load_f32(t, p);
  return (double)nk_load_integral(t, p);
}

NK_INLINE int64_t nk_load_i64(nrt_dtype t, const void *p) {
  if (nk_dtype_is_floating(t)) return nk_f64_to_i64(nk_load_f64(t, p));
  return nk_load_integral(t, p);
}

NK_INLINE bool nk_load_bool(nrt_dtype t, const void *p) {
  if (nk_dtype_is_floating(t)) return nk_load_f64(t, p) != 0; /* NaN is true */
  return nk_load_integral(t, p) != 0;
}

/* ------------------------------------------------------------------ stores */

NK_INLINE void nk_store_i64(nrt_dtype t, void *p, int64_t v) {
  switch (t) {
  case NRT_BOOL: nk_write_u8(p, v != 0); break;
  case NRT_UINT8: nk_write_u8(p, (uint8_t)v); break;
  case NRT_INT8: nk_write_i8(p, (int8_t)nk_wrap_i64(t, v)); break;
  case NRT_INT16: nk_write_i16(p, (int16_t)nk_wrap_i64(t, v)); break;
  case NRT_INT32: nk_write_i32(p, (int32_t)nk_wrap_i64(t, v)); break;
  case NRT_INT64: nk_write_i64(p, v); break;
  case NRT_FLOAT16: nk_write_u16(p, nk_f32_to_f16((float)v)); break;
  case NRT_BFLOAT16: nk_write_u16(p, nk_f32_to_bf16((float)v)); break;
  case NRT_FLOAT32: nk_write_f32(p, (float)v); break;
  case NRT_FLOAT64: nk_write_f64(p, (double)v); break;
  case NRT_DTYPE_COUNT: break;
  }
}

NK_INLINE void nk_store_f32(nrt_dtype t, void *p, float v) {
  switch (t) {
  case NRT_BOOL: nk_write_u8(p, v != 0); break;
  case NRT_FLOAT16: nk_write_u16(p, nk_f32_to_f16(v)); break;
  case NRT_BFLOAT16: nk_write_u16(p, nk_f32_to_bf16(v)); break;
  case NRT_FLOAT32: nk_write_f32(p, v); break;
  case NRT_FLOAT64: nk_write_f64(p, v); break;
  default: nk_store_i64(t, p, nk_f64_to_integral(t, v)); break;
  }
}

NK_INLINE void nk_store_f64(nrt_dtype t, void *p, double v) {
  switch (t) {
  case NRT_BOOL: nk_write_u8(p, v != 0); break;
  case NRT_FLOAT16: case NRT_BFLOAT16: case NRT_FLOAT32: nk_store_f32(t, p, (float)v); break;
  case NRT_FLOAT64: nk_write_f64(p, v); break;
  default: nk_store_i64(t, p, nk_f64_to_integral(t, v)); break;
  }
}

NK_INLINE void nk_store_bool(nrt_dtype t, void *p, bool v) { nk_store_i64(t, p, v); }

/* One element from dtype `from` at src to dtype `to` at dst, through the
 * class that loses nothing PyTorch keeps: float32 for the float32-or-narrower
 * targets (so double -> half rounds twice, as c10 does), double for float64,
 * int64 between integral types, double from floating to integral. */
NK_INLINE void nk_convert(nrt_dtype from, nrt_dtype to, void *dst, const void *src) {
  if (to == NRT_BOOL)
    nk_store_bool(to, dst, nk_load_bool(from, src));
  else if (nk_dtype_class(to) == NK_CLASS_FLOAT)
    nk_store_f32(to, dst, nk_load_f32(from, src));
  else if (to == NRT_FLOAT64 || nk_dtype_is_floating(from))
    nk_store_f64(to, dst, nk_load_f64(from, src));
  else
    nk_store_i64(to, dst, nk_load_i64(from, src));
}

#endif /* NK_DTYPE_CONVERT_H */
