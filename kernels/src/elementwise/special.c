/* special.c — the special functions (ATen's Math.h) for NK_KERNEL_UNARY and
 * NK_KERNEL_POINTWISE.
 *
 * Why here and like this:
 *  - The ops are elementwise with at most two inputs, so they are ops of the
 *    unary and pointwise kernels (their iteration, dtype conversion, mixed
 *    and broadcast operands, validation) rather than a kernel of their own;
 *    those kernels call one function per compute class, which switches on
 *    the op.  Nothing here is per element hot enough to want the kernels'
 *    constant-op loops: a Bessel function costs far more than the switch.
 *  - The math is ATen's own (ported from the wheel's ATen/native/Math.h,
 *    special_math_t.h), written once and instantiated for float and double
 *    with <tgmath.h>, so float32 runs ATen's float algorithm and float64
 *    its double one, and results agree with the CPU to an ulp or so rather
 *    than to an algorithm's error.
 *  - float16/bfloat16 compute in float32 and round once on store, which is
 *    what ATen's vectorised CPU path does for i0/i0e/i1/i1e/igamma(c);
 *    entr rounds log(x) to the 16-bit type first, as ATen's scalar code
 *    does.  The other special ops have no 16-bit CPU kernel; the glue
 *    refuses those dtypes with ATen's error.
 *  - The polynomial families take their degree n as a floating tensor and
 *    convert it as ATen's static_cast<int64_t> does on x86 (NaN, inf and
 *    huge values become INT64_MIN, a negative degree, so the result is 0),
 *    without the undefined behaviour of that cast in C. */
#include <stdint.h>
#include <float.h>
#include <tgmath.h>

#include "common/dtype_convert.h"
#include "elementwise/special_math.h"

int64_t nk_special_degree(double n) {
  if (!(n >= -9223372036854775808.0 && n < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)n;
}

/* glibc's reentrant lgamma (math.h shows it only to _DEFAULT_SOURCE builds;
 * the kernels are strict C11) */
double lgamma_r(double x, int *sign);
float lgammaf_r(float x, int *sign);

/* lgamma without the global signgam (these run on the pool's threads) */
static float sp_lgammaf(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}
static double sp_lgamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}

#define NK_SP_PI 3.14159265358979323846
#define NK_SP_FRAC_SQRT_2 0.70710678118654752440

#define T float
#define SP(name) name##_f
#define SP_DOUBLE 0
#define SP_EPS FLT_EPSILON
#define SP_LGAMMA sp_lgammaf
#define SP_HERMITE_LIMIT 128
#include "elementwise/special_math_t.h"
#undef T
#undef SP
#undef SP_DOUBLE
#undef SP_EPS
#undef SP_LGAMMA
#undef SP_HERMITE_LIMIT

#define T double
#define SP(name) name##_d
#define SP_DOUBLE 1
#define SP_EPS DBL_EPSILON
#define SP_LGAMMA sp_lgamma
#define SP_HERMITE_LIMIT 512
#include "elementwise/special_math_t.h"
#undef T
#undef SP
#undef SP_DOUBLE
#undef SP_EPS
#undef SP_LGAMMA
#undef SP_HERMITE_LIMIT

float nk_special_unary_f32(nk_unary_op op, float x, nrt_dtype tc) {
  if (op == NK_UNARY_ENTR && (tc == NRT_FLOAT16 || tc == NRT_BFLOAT16) && x > 0)
    return -x * nk_round_f32(tc, logf(x));
  return special_unary_f(op, x);
}

double nk_special_unary_f64(nk_unary_op op, double x) { return special_unary_d(op, x); }

float nk_special_binary_f32(nk_pointwise_op op, float a, float b) {
  return special_binary_f(op, a, b);
}

double nk_special_binary_f64(nk_pointwise_op op, double a, double b) {
  return special_binary_d(op, a, b);
}
