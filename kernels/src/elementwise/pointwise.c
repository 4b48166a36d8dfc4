/* pointwise.c — NK_KERNEL_POINTWISE: out <- op(a[, b[, c]]) over strided,
 * broadcast, mixed-dtype operands, for every op of nk_pointwise_op.
 *
 * One plan per task (op, dtypes, scalar params in every class), one table
 * of what each op accepts, and one row loop per compute class:
 *   - float (float32, float16, bfloat16) and double: pointwise_float.h;
 *   - int64 (every integral dtype, and bool, whose inputs load as bool):
 *     pw_int below, in uint64 where it could overflow, the result wrapped
 *     to the compute dtype's width;
 *   - WHERE moves the chosen element straight to out (nk_convert).
 * Inputs are rounded to the compute dtype on load, which is what ATen's
 * CPU does when it casts them to the common dtype; a broadcast scalar input
 * (a Python number arrives as a float64 0-dim tensor) is converted once,
 * before the loop.  Rows whose operands all have the compute dtype (out
 * too, or out bool for the predicates) get loops with constant dtypes and
 * op, which the compiler vectorises where the op allows.
 *
 * Integer division by zero sets a flag (the loops run on the compute pool's
 * threads); the task then fails with "ZeroDivisionError", as ATen's CPU
 * raises. */
#include <stdio.h>
#include <tgmath.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "elementwise/pointwise_simd.h"
#include "elementwise/special_math.h"
#include "common/validate.h"

typedef struct pw_plan {
  nk_pointwise_op op;
  int n_inputs;
  nrt_dtype out, in[3], compute;
  nk_scalar s0, s1;
  int bits;          /* compute's width: the shifts' limit */
  int zero_division; /* set (atomically) by the loops */
  uint64_t scalars[3]; /* broadcast scalar inputs, converted (hoist_scalars) */
} pw_plan;

/* What each op accepts: its inputs and the compute classes it is defined
 * for (ATen's dispatch sets; the glue raises ATen's error for the rest). */
enum { PW_FLOATING = 1, PW_INTEGRAL = 2, PW_BOOL = 4, PW_ALL = 7, PW_NUMBER = 3 };
static const struct {
  const char *name;
  unsigned char inputs, classes;
} pw_ops[NK_PW_OP_COUNT] = {
    [NK_PW_POW] = {"pow", 2, PW_NUMBER},
    [NK_PW_REMAINDER] = {"remainder", 2, PW_NUMBER},
    [NK_PW_FMOD] = {"fmod", 2, PW_NUMBER},
    [NK_PW_DIV_TRUNC] = {"div_trunc", 2, PW_NUMBER},
    [NK_PW_DIV_FLOOR] = {"div_floor", 2, PW_NUMBER},
    [NK_PW_MAXIMUM] = {"maximum", 2, PW_ALL},
    [NK_PW_MINIMUM] = {"minimum", 2, PW_ALL},
    [NK_PW_FMAX] = {"fmax", 2, PW_ALL},
    [NK_PW_FMIN] = {"fmin", 2, PW_ALL},
    [NK_PW_ATAN2] = {"atan2", 2, PW_FLOATING},
    [NK_PW_HYPOT] = {"hypot", 2, PW_FLOATING},
    [NK_PW_COPYSIGN] = {"copysign", 2, PW_FLOATING},
    [NK_PW_XLOGY] = {"xlogy", 2, PW_FLOATING},
    [NK_PW_NEXTAFTER] = {"nextafter", 2, PW_FLOATING},
    [NK_PW_EQ] = {"eq", 2, PW_ALL},
    [NK_PW_NE] = {"ne", 2, PW_ALL},
    [NK_PW_LT] = {"lt", 2, PW_ALL},
    [NK_PW_LE] = {"le", 2, PW_ALL},
    [NK_PW_GT] = {"gt", 2, PW_ALL},
    [NK_PW_GE] = {"ge", 2, PW_ALL},
    [NK_PW_LOGICAL_AND] = {"logical_and", 2, PW_ALL},
    [NK_PW_LOGICAL_OR] = {"logical_or", 2, PW_ALL},
    [NK_PW_LOGICAL_XOR] = {"logical_xor", 2, PW_ALL},
    [NK_PW_BITWISE_AND] = {"bitwise_and", 2, PW_INTEGRAL | PW_BOOL},
    [NK_PW_BITWISE_OR] = {"bitwise_or", 2, PW_INTEGRAL | PW_BOOL},
    [NK_PW_BITWISE_XOR] = {"bitwise_xor", 2, PW_INTEGRAL | PW_BOOL},
    [NK_PW_LSHIFT] = {"lshift", 2, PW_INTEGRAL},
    [NK_PW_RSHIFT] = {"rshift", 2, PW_INTEGRAL},
    [NK_PW_LERP_SCALAR] = {"lerp", 2, PW_FLOATING},
    [NK_PW_LOGADDEXP] = {"logaddexp", 2, PW_FLOATING},
    [NK_PW_LOGADDEXP2] = {"logaddexp2", 2, PW_FLOATING},
    [NK_PW_XLOG1PY] = {"xlog1py", 2, PW_FLOATING},
    [NK_PW_HEAVISIDE] = {"heaviside", 2, PW_ALL},
    [NK_PW_GCD] = {"gcd", 2, PW_INTEGRAL},
    [NK_PW_LCM] = {"lcm", 2, PW_INTEGRAL},
    [NK_PW_IGAMMA] = {"igamma", 2, PW_FLOATING},
    [NK_PW_IGAMMAC] = {"igammac", 2, PW_FLOATING},
    [NK_PW_ZETA] = {"zeta", 2, PW_FLOATING},
    [NK_PW_CHEBYSHEV_T] = {"chebyshev_polynomial_t", 2, PW_FLOATING},
    [NK_PW_CHEBYSHEV_U] = {"chebyshev_polynomial_u", 2, PW_FLOATING},
    [NK_PW_CHEBYSHEV_V] = {"chebyshev_polynomial_v", 2, PW_FLOATING},
    [NK_PW_CHEBYSHEV_W] = {"chebyshev_polynomial_w", 2, PW_FLOATING},
    [NK_PW_SHIFTED_CHEBYSHEV_T] = {"shifted_chebyshev_polynomial_t", 2, PW_FLOATING},
    [NK_PW_SHIFTED_CHEBYSHEV_U] = {"shifted_chebyshev_polynomial_u", 2, PW_FLOATING},
    [NK_PW_SHIFTED_CHEBYSHEV_V] = {"shifted_chebyshev_polynomial_v", 2, PW_FLOATING},
    [NK_PW_SHIFTED_CHEBYSHEV_W] = {"shifted_chebyshev_polynomial_w", 2, PW_FLOATING},
    [NK_PW_HERMITE_H] = {"hermite_polynomial_h", 2, PW_FLOATING},
    [NK_PW_HERMITE_HE] = {"hermite_polynomial_he", 2, PW_FLOATING},
    [NK_PW_LAGUERRE_L] = {"laguerre_polynomial_l", 2, PW_FLOATING},
    [NK_PW_LEGENDRE_P] = {"legendre_polynomial_p", 2, PW_FLOATING},
    [NK_PW_POW_SCALAR] = {"pow", 1, PW_NUMBER},
    [NK_PW_CLAMP_SCALAR] = {"clamp", 1, PW_NUMBER},
    [NK_PW_CLAMP_MIN_SCALAR] = {"clamp_min", 1, PW_NUMBER},
    [NK_PW_CLAMP_MAX_SCALAR] = {"clamp_max", 1, PW_NUMBER},
    [NK_PW_WHERE] = {"where", 3, PW_ALL},
    [NK_PW_CLAMP] = {"clamp", 3, PW_NUMBER},
    [NK_PW_LERP] = {"lerp", 3, PW_FLOATING},
    [NK_PW_ADDCMUL] = {"addcmul", 3, PW_NUMBER},
    [NK_PW_ADDCDIV] = {"addcdiv", 3, PW_FLOATING},
};

static bool pw_is_predicate(nk_pointwise_op op) {
  return op >= NK_PW_EQ && op <= NK_PW_LOGICAL_XOR;
}

/* c10's nextafter for float16/bfloat16: one step in the 16-bit format. */
static float pw_nextafter16(nrt_dtype t, float from, float to) {
  if (isnan(from) || isnan(to)) return from + to;
  uint16_t f = t == NRT_FLOAT16 ? nk_f32_to_f16(from) : nk_f32_to_bf16(from);
  uint16_t g = t == NRT_FLOAT16 ? nk_f32_to_f16(to) : nk_f32_to_bf16(to);
  if (f == g) return from;
  uint16_t af = f & 0x7FFFu, ag = g & 0x7FFFu;
  if (af == 0) {
    if (ag == 0) return to;
    f = (uint16_t)((g & 0x8000u) | 1u);
  } else if (af > ag || ((f ^ g) & 0x8000u)) {
    f--;
  } else {
    f++;
  }
  return t == NRT_FLOAT16 ? nk_f16_to_f32(f) : nk_bf16_to_f32(f);
}

#define PW_T float
#define PW_FN pw_float
#include "elementwise/pointwise_float.h"
#undef PW_T
#undef PW_FN
#define PW_T double
#define PW_FN pw_double
#include "elementwise/pointwise_float.h"
#undef PW_T
#undef PW_FN

/* ATen's powi: b < 0 gives 0 except for a == +-1. */
NK_INLINE int64_t pw_powi(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return (int64_t)r;
}

NK_INLINE int64_t pw_zero_division(pw_plan *p) {
  __atomic_store_n(&p->zero_division, 1, __ATOMIC_RELAXED);
  return 0;
}

/* ATen's calc_gcd on magnitudes (|INT64_MIN| as 2^63, wrapped back). */
NK_INLINE int64_t pw_gcd(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, y = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
  while (x != 0) {
    uint64_t t = x;
    x = y % x;
    y = t;
  }
  return (int64_t)y;
}

/* The integral and bool ops on values already in the compute dtype; the
 * caller wraps the result to it. */
NK_INLINE int64_t pw_int(pw_plan *p, nk_pointwise_op op, int64_t a, int64_t b, int64_t c) {
  const uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case NK_PW_POW: return pw_powi(a, b);
  case NK_PW_REMAINDER: {
    if (b == 0) return pw_zero_division(p);
    if (b == -1) return 0; /* INT64_MIN % -1 would trap */
    int64_t r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
  }
  case NK_PW_FMOD:
    if (b == 0) return pw_zero_division(p);
    return b == -1 ? 0 : a % b;
  case NK_PW_DIV_TRUNC:
  case NK_PW_DIV_FLOOR: {
    if (b == 0) return pw_zero_division(p);
    if (b == -1) return (int64_t)(0 - ua); /* INT64_MIN / -1 wraps */
    int64_t q = a / b;
    return op == NK_PW_DIV_FLOOR && (a < 0) != (b < 0) && a % b != 0 ? q - 1 : q;
  }
  case NK_PW_MAXIMUM: case NK_PW_FMAX: return a < b ? b : a;
  case NK_PW_MINIMUM: case NK_PW_FMIN: return b < a ? b : a;
  case NK_PW_EQ: return a == b;
  case NK_PW_NE: return a != b;
  case NK_PW_LT: return a < b;
  case NK_PW_LE: return a <= b;
  case NK_PW_GT: return a > b;
  case NK_PW_GE: return a >= b;
  case NK_PW_LOGICAL_AND: return a != 0 && b != 0;
  case NK_PW_LOGICAL_OR: return a != 0 || b != 0;
  case NK_PW_LOGICAL_XOR: return (a != 0) != (b != 0);
  case NK_PW_BITWISE_AND: return a & b;
  case NK_PW_BITWISE_OR: return a | b;
  case NK_PW_BITWISE_XOR: return a ^ b;
  case NK_PW_LSHIFT: return b < 0 || b >= p->bits ? 0 : (int64_t)(ua << b);
  case NK_PW_RSHIFT: { /* arithmetic shift of the sign-extended value */
    const int max_shift = p->compute == NRT_UINT8 ? p->bits : p->bits - 1;
    return a >> (b < 0 || b >= max_shift ? max_shift : b);
  }
  case NK_PW_POW_SCALAR: return pw_powi(a, p->s0.i);
  case NK_PW_CLAMP_SCALAR: b = p->s0.i; c = p->s1.i; /* fall through */
  case NK_PW_CLAMP:
    a = a < b ? b : a;
    return c < a ? c : a;
  case NK_PW_CLAMP_MIN_SCALAR: return a < p->s0.i ? p->s0.i : a;
  case NK_PW_CLAMP_MAX_SCALAR: return p->s0.i < a ? p->s0.i : a;
  case NK_PW_ADDCMUL: return (int64_t)(ua + (uint64_t)p->s0.i * ub * (uint64_t)c);
  case NK_PW_HEAVISIDE: return a == 0 ? b : a > 0;
  case NK_PW_GCD: return pw_gcd(a, b);
  case NK_PW_LCM: { /* |a / g * b|: C++ multiplies int8/int16 in int, so abs comes before the wrap there */
    const int64_t g = pw_gcd(a, b);
    if (g == 0) return 0;
    int64_t r = (int64_t)((uint64_t)(a / g) * ub);
    if (p->bits >= 32) r = nk_wrap_i64(p->compute, r);
    return r < 0 ? (int64_t)(0 - (uint64_t)r) : r;
  }
  default: return 0; /* floating-only ops never get here (plan_pointwise) */
  }
}

/* ------------------------------------------------------------ loads, stores */

NK_INLINE float pw_load_float(nrt_dtype t, nrt_dtype compute, const char *ptr) {
  float v = nk_load_f32(t, ptr);
  return t == compute ? v : nk_round_f32(compute, v);
}

NK_INLINE int64_t pw_load_int(nrt_dtype t, nrt_dtype compute, const char *ptr) {
  if (compute == NRT_BOOL) return nk_load_bool(t, ptr);
  int64_t v = nk_load_i64(t, ptr);
  return t == compute ? v : nk_wrap_i64(compute, v);
}

/* One element of the class of `compute`; every dtype argument is a
 * constant in the specialised loops. */
NK_INLINE void pw_elem(pw_plan *p, nk_pointwise_op op, nrt_dtype to, const nrt_dtype *ti,
                       nrt_dtype tc, int n_in, char *o, const char *a, const char *b,
                       const char *c) {
  switch (nk_dtype_class(tc)) {
  case NK_CLASS_FLOAT: {
    float x = pw_load_float(ti[0], tc, a);
    float y = n_in > 1 ? pw_load_float(ti[1], tc, b) : 0;
    float z = n_in > 2 ? pw_load_float(ti[2], tc, c) : 0;
    float r = pw_float(p, op, x, y, z);
    nk_store_f32(to, o, to == tc ? r : nk_round_f32(tc, r));
    break;
  }
  case NK_CLASS_DOUBLE: {
    double x = nk_load_f64(ti[0], a);
    double y = n_in > 1 ? nk_load_f64(ti[1], b) : 0;
    double z = n_in > 2 ? nk_load_f64(ti[2], c) : 0;
    nk_store_f64(to, o, pw_double(p, op, x, y, z));
    break;
  }
  default: {
    int64_t x = pw_load_int(ti[0], tc, a);
    int64_t y = n_in > 1 ? pw_load_int(ti[1], tc, b) : 0;
    int64_t z = n_in > 2 ? pw_load_int(ti[2], tc, c) : 0;
    int64_t r = pw_int(p, op, x, y, z);
    nk_store_i64(to, o, to == tc ? r : nk_wrap_i64(tc, r));
    break;
  }
  }
}

/* operand k's element i of the row */
#define PW_AT(k, i) (data[k] + (i) * s[k])

static void mixed_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  pw_plan *p = ctx;
  const int n_in = p->n_inputs;
  char *o = data[0];
  const char *a = data[1], *b = n_in > 1 ? data[2] : o, *c = n_in > 2 ? data[3] : o;
  const int64_t so = s[0], sa = s[1], sb = n_in > 1 ? s[2] : 0, sc = n_in > 2 ? s[3] : 0;
  for (int64_t i = 0; i < n; i++)
    pw_elem(p, p->op, p->out, p->in, p->compute, n_in, o + i * so, a + i * sa, b + i * sb,
            c + i * sc);
}

/* where with b, c and out of one dtype: a select of elements of one width
 * (an integer type of that size); contiguous rows with a bool condition
 * vectorise. */
#define PW_WHERE_ROW(NAME, U, READ, WRITE)                                                 \
  static void NAME(nrt_dtype tc, int64_t n, char *const *data, const int64_t *s) {         \
    char *o = data[0];                                                                     \
    const char *c = data[1], *a = data[2], *b = data[3];                                   \
    const int64_t es = (int64_t)sizeof(U);                                                 \
    if (tc == NRT_BOOL && s[0] == es && s[1] == 1 && s[2] == es && s[3] == es) {           \
      for (int64_t i = 0; i < n; i++) {                                                    \
        U x = READ(a + i * es), y = READ(b + i * es);                                      \
        WRITE(o + i * es, c[i] ? x : y);                                                   \
      }                                                                                    \
      return;                                                                              \
    }                                                                                      \
    for (int64_t i = 0; i < n; i++)                                                        \
      WRITE(o + i * s[0], READ(nk_load_bool(tc, c + i * s[1]) ? a + i * s[2] : b + i * s[3])); \
  }
PW_WHERE_ROW(where_row8, uint8_t, nk_read_u8, nk_write_u8)
PW_WHERE_ROW(where_row16, uint16_t, nk_read_u16, nk_write_u16)
PW_WHERE_ROW(where_row32, int32_t, nk_read_i32, nk_write_i32)
PW_WHERE_ROW(where_row64, int64_t, nk_read_i64, nk_write_i64)
#undef PW_WHERE_ROW

static void where_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const pw_plan *p = ctx;
  if (p->in[1] == p->out && p->in[2] == p->out) {
    switch (nk_dtype_size(p->out)) {
    case 1: where_row8(p->in[0], n, data, s); return;
    case 2: where_row16(p->in[0], n, data, s); return;
    case 4: where_row32(p->in[0], n, data, s); return;
    default: where_row64(p->in[0], n, data, s); return;
    }
  }
  for (int64_t i = 0; i < n; i++) {
    int pick = nk_load_bool(p->in[0], PW_AT(1, i)) ? 2 : 3;
    nk_convert(p->in[pick - 1], p->out, PW_AT(0, i), PW_AT(pick, i));
  }
}

/* Same-dtype rows: inputs in the compute dtype T, out in T (or bool for
 * the predicates); op a constant.  Contiguous rows (and contiguous rows
 * with a broadcast scalar b, `x > 0`) get constant strides, which the
 * compiler vectorises where the op allows. */
NK_INLINE void same_row_strided(pw_plan *p, nk_pointwise_op op, nrt_dtype t, int64_t n,
                                char *const *data, const int64_t *s0, const int64_t *s1,
                                const int64_t *s2, const int64_t *s3) {
  const nrt_dtype to = pw_is_predicate(op) ? NRT_BOOL : t;
  const nrt_dtype ti[3] = {t, t, t};
  const int n_in = pw_ops[op].inputs;
  /* locals: a store through char * could otherwise change data[] */
  char *o = data[0];
  const char *a = data[1], *b = n_in > 1 ? data[2] : o, *c = n_in > 2 ? data[3] : o;
  const int64_t so = *s0, sa = *s1, sb = n_in > 1 ? *s2 : 0, sc = n_in > 2 ? *s3 : 0;
  for (int64_t i = 0; i < n; i++)
    pw_elem(p, op, to, ti, t, n_in, o + i * so, a + i * sa, b + i * sb, c + i * sc);
}

NK_INLINE void same_row(pw_plan *p, nk_pointwise_op op, nrt_dtype t, int64_t n,
                        char *const *data, const int64_t *s) {
  static const int64_t zero = 0;
  const int64_t eo = (int64_t)nk_dtype_size(pw_is_predicate(op) ? NRT_BOOL : t);
  const int64_t ei = (int64_t)nk_dtype_size(t);
  const int n_in = pw_ops[op].inputs;
  const bool a_dense = s[0] == eo && s[1] == ei && (n_in < 3 || s[3] == ei);
  if (a_dense && (n_in < 2 || s[2] == ei))
    same_row_strided(p, op, t, n, data, &eo, &ei, &ei, &ei);
  else if (a_dense && n_in == 2 && s[2] == 0)
    same_row_strided(p, op, t, n, data, &eo, &ei, &zero, &ei);
  else
    same_row_strided(p, op, t, n, data, &s[0], &s[1], &s[2], &s[3]);
}

/* x ** e for the exponents 2 and 3 on dense float rows, as loops that
 * vectorise (the per-element form re-tests the exponent at each element):
 * the same products pw_float computes.  Returns false for anything else. */
static bool pow_small_rows(const pw_plan *p, nrt_dtype t, int64_t n, char *const *data,
                           const int64_t *s) {
  const double e = p->s0.f;
  const int64_t es = (int64_t)nk_dtype_size(t);
  if ((e != 2 && e != 3) || s[0] != es || s[1] != es) return false;
#define PW_POW_SMALL(T)                                                                    \
  {                                                                                        \
    T *o = (T *)(void *)data[0];                                                           \
    const T *a = (const T *)(const void *)data[1];                                         \
    if (e == 2) for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i];                        \
    else for (int64_t i = 0; i < n; i++) o[i] = a[i] * a[i] * a[i];                        \
    return true;                                                                           \
  }
  if (t == NRT_FLOAT32) PW_POW_SMALL(float)
  if (t == NRT_FLOAT64) PW_POW_SMALL(double)
#undef PW_POW_SMALL
  return false;
}

/* addcmul / addcdiv on dense float rows: the same expression pw_float
 * evaluates (a + (s0 * b) * c, a + (s0 * b) / c), with the scalar converted
 * once -- float32 through the ISA's vector body (pointwise_simd.h), the
 * rest as loops the compiler may vectorise.  Returns false for anything
 * else. */
static bool addc_rows(const pw_plan *p, nrt_dtype t, int64_t n, char *const *data,
                      const int64_t *s) {
  const int64_t es = (int64_t)nk_dtype_size(t);
  if (s[0] != es || s[1] != es || s[2] != es || s[3] != es) return false;
  const bool mul = p->op == NK_PW_ADDCMUL;
  const nk_pointwise_vec_fn vec = t == NRT_FLOAT32 ? nk_pointwise_pick_vec() : NULL;
  if (vec && vec(p->op, n, (float *)(void *)data[0], (const float *)(const void *)data[1],
                 (const float *)(const void *)data[2], (const float *)(const void *)data[3],
                 (float)p->s0.f))
    return true;
#define PW_ADDC(T)                                                                         \
  {                                                                                        \
    T *o = (T *)(void *)data[0];                                                           \
    const T *a = (const T *)(const void *)data[1], *b = (const T *)(const void *)data[2];  \
    const T *c = (const T *)(const void *)data[3];                                         \
    const T v = (T)p->s0.f;                                                                \
    if (mul) for (int64_t i = 0; i < n; i++) o[i] = a[i] + v * b[i] * c[i];                \
    else for (int64_t i = 0; i < n; i++) o[i] = a[i] + v * b[i] / c[i];                    \
    return true;                                                                           \
  }
  if (t == NRT_FLOAT32) PW_ADDC(float)
  if (t == NRT_FLOAT64) PW_ADDC(double)
#undef PW_ADDC
  return false;
}

/* clamp with scalar bounds on dense float rows, as loops that vectorise
 * (through pw_elem the loop kept the op's NaN tests and switch: clamp of
 * 2^20 floats 0.41 ms on 2 Zen 3 threads, torch CPU 0.11): the same
 * compares pw_float makes, in its order, so a NaN input stays NaN and a NaN
 * bound gives NaN.  Returns false for anything else. */
static bool clamp_rows(const pw_plan *p, nrt_dtype t, int64_t n, char *const *data,
                       const int64_t *s) {
  const int64_t es = (int64_t)nk_dtype_size(t);
  if (s[0] != es || s[1] != es) return false;
#define PW_CLAMP_ROWS(T)                                                                   \
  {                                                                                        \
    T *o = (T *)(void *)data[0];                                                           \
    const T *a = (const T *)(const void *)data[1];                                         \
    const T lo = (T)p->s0.f, hi = (T)p->s1.f;                                              \
    switch (p->op) {                                                                       \
    case NK_PW_CLAMP_SCALAR:                                                               \
      if (isnan(lo) || isnan(hi)) {                                                        \
        for (int64_t i = 0; i < n; i++) o[i] = (T)NAN;                                     \
      } else {                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                  \
          const T x = a[i] < lo ? lo : a[i];                                               \
          o[i] = hi < x ? hi : x;                                                          \
        }                                                                                  \
      }                                                                                    \
      return true;                                                                         \
    case NK_PW_CLAMP_MIN_SCALAR: for (int64_t i = 0; i < n; i++) o[i] = a[i] < lo ? lo : a[i]; return true; \
    case NK_PW_CLAMP_MAX_SCALAR: for (int64_t i = 0; i < n; i++) o[i] = lo < a[i] ? lo : a[i]; return true; \
    default: return false;                                                                 \
    }                                                                                      \
  }
  if (t == NRT_FLOAT32) PW_CLAMP_ROWS(float)
  if (t == NRT_FLOAT64) PW_CLAMP_ROWS(double)
#undef PW_CLAMP_ROWS
  return false;
}

/* lerp on dense float32 rows through the ISA's vector body (FMA in
 * hardware, the same bits).  Returns false for anything else. */
static bool lerp_rows(const pw_plan *p, nrt_dtype t, int64_t n, char *const *data,
                      const int64_t *s) {
  const bool scalar_w = p->op == NK_PW_LERP_SCALAR;
  const nk_pointwise_vec_fn vec = t == NRT_FLOAT32 ? nk_pointwise_pick_vec() : NULL;
  if (!vec || s[0] != 4 || s[1] != 4 || s[2] != 4 || (!scalar_w && s[3] != 4)) return false;
  return vec(p->op, n, (float *)(void *)data[0], (const float *)(const void *)data[1],
             (const float *)(const void *)data[2],
             scalar_w ? NULL : (const float *)(const void *)data[3], (float)p->s0.f);
}

/* Dense rows that have loops of their own (each declines rows it does not
 * take: strides, dtypes, exponents), tried before the op's same_row. */
static bool dense_rows(const pw_plan *p, nrt_dtype t, int64_t n, char *const *data,
                       const int64_t *s) {
  switch (p->op) {
  case NK_PW_ADDCMUL: case NK_PW_ADDCDIV: return addc_rows(p, t, n, data, s);
  case NK_PW_POW_SCALAR: return pow_small_rows(p, t, n, data, s);
  case NK_PW_CLAMP_SCALAR: case NK_PW_CLAMP_MIN_SCALAR: case NK_PW_CLAMP_MAX_SCALAR:
    return clamp_rows(p, t, n, data, s);
  case NK_PW_LERP: case NK_PW_LERP_SCALAR: return lerp_rows(p, t, n, data, s);
  default: return false;
  }
}

#define PW_SAME_CASE(OP, T) case OP: same_row(p, OP, T, n, data, s); break;
#define PW_SAME_OPS(T, OTHER)                                                               \
  if (!dense_rows(p, T, n, data, s)) switch (p->op) {                                      \
    PW_SAME_CASE(NK_PW_MAXIMUM, T) PW_SAME_CASE(NK_PW_MINIMUM, T) PW_SAME_CASE(NK_PW_EQ, T)   \
    PW_SAME_CASE(NK_PW_NE, T) PW_SAME_CASE(NK_PW_LT, T) PW_SAME_CASE(NK_PW_LE, T)             \
    PW_SAME_CASE(NK_PW_GT, T) PW_SAME_CASE(NK_PW_GE, T) PW_SAME_CASE(NK_PW_CLAMP_SCALAR, T)   \
    PW_SAME_CASE(NK_PW_CLAMP_MIN_SCALAR, T) PW_SAME_CASE(NK_PW_CLAMP_MAX_SCALAR, T)           \
    PW_SAME_CASE(NK_PW_ADDCMUL, T) PW_SAME_CASE(NK_PW_LERP_SCALAR, T)                         \
    PW_SAME_CASE(NK_PW_POW_SCALAR, T) PW_SAME_CASE(NK_PW_CLAMP, T) PW_SAME_CASE(NK_PW_LERP, T) \
    PW_SAME_CASE(NK_PW_ADDCDIV, T)                                                          \
  default: OTHER; break;                                                                    \
  }


/* Rows of float32 values under the plan's op (whatever its compute dtype):
 * float16/bfloat16 rows (out and inputs of the compute dtype, not a
 * predicate) come here through nd_iter's float-rows adapter, widened to
 * float32 chunks and rounded back once -- element for element what the
 * mixed loop computes (load to float, op in float with the plan's 16-bit
 * compute semantics, round), without its dtype switches per element. */
static void float_rows(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  pw_plan *p = ctx;
  PW_SAME_OPS(NRT_FLOAT32, same_row_strided(p, p->op, NRT_FLOAT32, n, data, &s[0], &s[1], &s[2], &s[3]))
}

/* Binary ops over bool values into bool (masks: a & b, a | ~b, a == b,
 * logical_and, ...) on dense rows, b dense or broadcast: byte loops that
 * vectorise, on the 0/1 truth of each byte as pw_load_int reads it.  The
 * mixed loop took ~9 ns per element (a & b over 2^20 masks: 9 ms on 2 Zen
 * 3 threads, torch CPU 0.05 ms).  Returns false for anything else. */
static bool bool_rows(const pw_plan *p, int64_t n, char *const *data, const int64_t *s) {
  if (p->n_inputs != 2 || s[0] != 1 || s[1] != 1 || (s[2] != 1 && s[2] != 0)) return false;
  unsigned char *o = (unsigned char *)data[0];
  const unsigned char *a = (const unsigned char *)data[1], *b = (const unsigned char *)data[2];
  const int64_t sb = s[2];
#define PW_BOOL_ROW(EXPR)                                                                  \
  do {                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                      \
      const unsigned x = a[i] != 0, y = b[i * sb] != 0;                                    \
      o[i] = (unsigned char)(EXPR);                                                        \
    }                                                                                      \
    return true;                                                                           \
  } while (0)
  switch (p->op) {
  case NK_PW_BITWISE_AND: case NK_PW_LOGICAL_AND: case NK_PW_MINIMUM: case NK_PW_FMIN: PW_BOOL_ROW(x & y);
  case NK_PW_BITWISE_OR: case NK_PW_LOGICAL_OR: case NK_PW_MAXIMUM: case NK_PW_FMAX: PW_BOOL_ROW(x | y);
  case NK_PW_BITWISE_XOR: case NK_PW_LOGICAL_XOR: case NK_PW_NE: PW_BOOL_ROW(x ^ y);
  case NK_PW_EQ: PW_BOOL_ROW(x == y);
  case NK_PW_LT: PW_BOOL_ROW(x < y);
  case NK_PW_LE: PW_BOOL_ROW(x <= y);
  case NK_PW_GT: PW_BOOL_ROW(x > y);
  case NK_PW_GE: PW_BOOL_ROW(x >= y);
  default: return false;
  }
#undef PW_BOOL_ROW
}

static void same_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  pw_plan *p = ctx;
  switch (p->compute) {
  case NRT_BOOL:
    if (!bool_rows(p, n, data, s)) mixed_loop(p, n, data, s);
    break;
  case NRT_FLOAT32: PW_SAME_OPS(NRT_FLOAT32, mixed_loop(p, n, data, s)) break;
  case NRT_FLOAT64: PW_SAME_OPS(NRT_FLOAT64, mixed_loop(p, n, data, s)) break;
  case NRT_INT64: PW_SAME_OPS(NRT_INT64, mixed_loop(p, n, data, s)) break;
  default: mixed_loop(p, n, data, s); break;
  }
}

static int plan_pointwise(const nrt_task *task, nrt_exec_ctx *ctx, pw_plan *p) {
  const nk_pointwise_params *prm = (const nk_pointwise_params *)task->params;
  if (prm->op < 0 || prm->op >= NK_PW_OP_COUNT) {
    nrt_exec_fail(ctx, "pointwise: invalid op %d", (int)prm->op);
    return -1;
  }
  p->op = (nk_pointwise_op)prm->op;
  const char *name = pw_ops[p->op].name;
  if (!nk_dtype_valid(prm->compute)) {
    nrt_exec_fail(ctx, "pointwise %s: invalid compute dtype %d", name, (int)prm->compute);
    return -1;
  }
  p->compute = (nrt_dtype)prm->compute;
  const nk_class cls = nk_dtype_class(p->compute);
  const unsigned need = cls == NK_CLASS_BOOL ? PW_BOOL : cls == NK_CLASS_INT ? PW_INTEGRAL : PW_FLOATING;
  if (p->op != NK_PW_WHERE && !(pw_ops[p->op].classes & need)) {
    nrt_exec_fail(ctx, "pointwise %s: not defined for compute dtype %d", name, (int)p->compute);
    return -1;
  }
  p->n_inputs = pw_ops[p->op].inputs;
  if (task->n_operands != p->n_inputs + 1) {
    nrt_exec_fail(ctx, "pointwise %s: %d operands, expected %d", name, (int)task->n_operands,
                  p->n_inputs + 1);
    return -1;
  }
  p->out = (nrt_dtype)task->operands[0].dtype;
  for (int k = 0; k < p->n_inputs; k++) p->in[k] = (nrt_dtype)task->operands[k + 1].dtype;
  p->s0 = prm->s0;
  p->s1 = prm->s1;
  p->bits = 8 * (int)nk_dtype_size(p->compute);
  p->zero_division = 0;
  return 0;
}

/* An input that is one element broadcast everywhere (a Python number,
 * usually a double) is converted to the compute dtype once, so `x > 0.5`
 * runs the same-dtype loop. */
static void hoist_scalars(pw_plan *p, nrt_operand *ops) {
  if (p->op == NK_PW_WHERE) return;
  for (int k = 0; k < p->n_inputs; k++) {
    nrt_operand *op = &ops[k + 1];
    bool scalar = op->dtype != (int32_t)p->compute;
    for (int d = 0; d < op->ndim && scalar; d++) scalar = op->strides[d] == 0 && op->sizes[d] > 0;
    if (!scalar) continue;
    nk_convert(p->in[k], p->compute, &p->scalars[k], op->data);
    op->data = &p->scalars[k];
    op->dtype = p->compute;
    p->in[k] = p->compute;
  }
}

static bool all_same(const pw_plan *p) {
  const nrt_dtype want_out = pw_is_predicate(p->op) ? NRT_BOOL : p->compute;
  if (p->out != want_out) return false;
  for (int k = 0; k < p->n_inputs; k++)
    if (p->in[k] != p->compute) return false;
  return true;
}

/* The captured routine as one expression, for adaptive eager's compiled
 * groups (nrt_row_expr): addcmul and addcdiv on dense rows of float32, or
 * of one 16-bit dtype widened by the float-rows adapter (float_rows), which
 * addc_rows hands to the vector body (pointwise_vec_op.h's op). */
bool nk_pointwise_row_expr(const nrt_row_entry *entry, nrt_row_expr *x) {
  const void *pv;
  const nk_loop_fn loop = nk_captured_loop(entry, &pv);
  const pw_plan *p = pv;
  const bool f32 = loop == same_loop && p->compute == NRT_FLOAT32;
  const bool half = loop == float_rows && (p->compute == NRT_FLOAT16 || p->compute == NRT_BFLOAT16);
  if ((p->op != NK_PW_ADDCMUL && p->op != NK_PW_ADDCDIV) || !(f32 || half) || !all_same(p) ||
      !nk_pointwise_pick_vec())
    return false;
  snprintf(x->code, sizeof x->code, "nk_pw_addc_vec((nk_pointwise_op)%d, $1, $2, $3, #0)",
           (int)p->op);
  for (int k = 1; k <= 3; k++) x->in_dtype[k] = (uint8_t)p->compute;
  x->dense_inputs = true; /* addc_rows takes dense rows only */
  x->n_scalars = 1;
  x->scalars[0] = (float)p->s0.f;
  return true;
}

int nk_pointwise_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  pw_plan plan;
  if (task->n_operands < 2 || task->n_operands > 4) {
    nrt_exec_fail(ctx, "pointwise: %d operands, expected 2 to 4", (int)task->n_operands);
    return -1;
  }
  if (nk_check_elementwise(task, ctx, "pointwise", task->n_operands) ||
      plan_pointwise(task, ctx, &plan))
    return -1;
  nrt_operand ops[4];
  memcpy(ops, task->operands, sizeof ops[0] * (size_t)task->n_operands);
  hoist_scalars(&plan, ops);
  const bool half = plan.compute == NRT_FLOAT16 || plan.compute == NRT_BFLOAT16;
  if (plan.op != NK_PW_WHERE && half && !pw_is_predicate(plan.op) && all_same(&plan)) {
    nk_for_each_float_plan(ops, task->n_operands, float_rows, NULL, &plan, sizeof plan); /* widened to float32 */
  } else {
    nk_loop_fn loop = plan.op == NK_PW_WHERE ? where_loop : all_same(&plan) ? same_loop : mixed_loop;
    nk_for_each_plan(ops, task->n_operands, loop, &plan, sizeof plan);
  }
  if (__atomic_load_n(&plan.zero_division, __ATOMIC_RELAXED)) {
    nrt_exec_fail(ctx, "ZeroDivisionError (integer %s by zero)", pw_ops[plan.op].name);
    return -1;
  }
  return 0;
}
