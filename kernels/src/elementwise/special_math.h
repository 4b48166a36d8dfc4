/* special_math.h — the special functions of the unary and pointwise
 * kernels (i0, Bessel functions, ndtri, erfcx, igamma, zeta, the orthogonal
 * polynomial families, ...): one entry per compute class, one switch on the
 * op inside (special.c, special_math_t.h). */
#ifndef NK_SPECIAL_MATH_H
#define NK_SPECIAL_MATH_H

#include "neuron_kernels.h"

#define NK_UNARY_IS_SPECIAL(op) ((op) >= NK_UNARY_I0 && (op) <= NK_UNARY_SPHERICAL_BESSEL_J0)
#define NK_PW_IS_SPECIAL(op) ((op) >= NK_PW_IGAMMA && (op) <= NK_PW_LEGENDRE_P)

/* x in float (float32, and float16/bfloat16 computed in float32: tc says
 * which, for the few ops ATen rounds an intermediate in) or double */
float nk_special_unary_f32(nk_unary_op op, float x, nrt_dtype tc);
double nk_special_unary_f64(nk_unary_op op, double x);
float nk_special_binary_f32(nk_pointwise_op op, float a, float b);
double nk_special_binary_f64(nk_pointwise_op op, double a, double b);

/* static_cast<int64_t>(n) as x86 computes it (cvttsd2si: NaN and values
 * out of range give INT64_MIN), without C's undefined behaviour */
int64_t nk_special_degree(double n);

#endif /* NK_SPECIAL_MATH_H */
