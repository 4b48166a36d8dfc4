/* pointwise_float.h — the floating-class ops of NK_KERNEL_POINTWISE, written
 * once for float and double: pointwise.c includes it twice with PW_T (the
 * type) and PW_FN (the function's name) defined, and <tgmath.h> picks
 * fmodf/fmod etc. from the argument type.  The formulas are ATen CPU's
 * (BinaryOpsKernel.cpp, PowKernel.cpp, TensorCompareKernel.cpp, Lerp.h,
 * PointwiseOpsKernel.cpp): std::max(a, b) is (a < b ? b : a), and so on. */

NK_INLINE PW_T PW_FN(const pw_plan *p, nk_pointwise_op op, PW_T a, PW_T b, PW_T c) {
  const PW_T s0 = (PW_T)p->s0.f, s1 = (PW_T)p->s1.f, one = 1, zero = 0;
  switch (op) {
  case NK_PW_POW: return pow(a, b);
  case NK_PW_REMAINDER: {
    PW_T m = fmod(a, b);
    return m != 0 && (b < 0) != (m < 0) ? m + b : m;
  }
  case NK_PW_FMOD: return fmod(a, b);
  case NK_PW_DIV_TRUNC: /* ATen's CPU rounds a 16-bit quotient before truncating */
    if (p->compute == NRT_FLOAT16 || p->compute == NRT_BFLOAT16)
      return trunc((PW_T)nk_round_f32(p->compute, (float)(a / b)));
    return trunc(a / b);
  case NK_PW_DIV_FLOOR: { /* c10::div_floor_floating */
    if (b == 0) return a / b;
    PW_T m = fmod(a, b), d = (a - m) / b;
    if (m != 0 && (b < 0) != (m < 0)) d -= one;
    if (d == 0) return copysign(zero, a / b);
    PW_T f = floor(d);
    return d - f > (PW_T)0.5 ? f + one : f;
  }
  case NK_PW_MAXIMUM: return isnan(a) || isnan(b) ? (PW_T)NAN : a < b ? b : a;
  case NK_PW_MINIMUM: return isnan(a) || isnan(b) ? (PW_T)NAN : b < a ? b : a;
  case NK_PW_FMAX: return fmax(a, b);
  case NK_PW_FMIN: return fmin(a, b);
  case NK_PW_ATAN2: return atan2(a, b);
  case NK_PW_HYPOT: return hypot(a, b);
  case NK_PW_COPYSIGN: return copysign(a, b);
  case NK_PW_XLOGY: return isnan(b) ? (PW_T)NAN : a == 0 ? zero : a * log(b);
  case NK_PW_NEXTAFTER:
    if (p->compute == NRT_FLOAT16 || p->compute == NRT_BFLOAT16)
      return (PW_T)pw_nextafter16(p->compute, (float)a, (float)b);
    return nextafter(a, b);
  case NK_PW_EQ: return a == b;
  case NK_PW_NE: return a != b;
  case NK_PW_LT: return a < b;
  case NK_PW_LE: return a <= b;
  case NK_PW_GT: return a > b;
  case NK_PW_GE: return a >= b;
  case NK_PW_LOGICAL_AND: return a != 0 && b != 0; /* NaN is true */
  case NK_PW_LOGICAL_OR: return a != 0 || b != 0;
  case NK_PW_LOGICAL_XOR: return (a != 0) != (b != 0);
  case NK_PW_LOGADDEXP:
    if (isinf(a) && a == b) return a;
    return (a < b ? b : a) + log1p(exp(-fabs(a - b)));
  case NK_PW_LOGADDEXP2:
    if (isinf(a) && a == b) return a;
    return (a < b ? b : a) + log1p(exp2(-fabs(a - b))) * (PW_T)(1 / 0.69314718055994530942);
  case NK_PW_XLOG1PY: return isnan(b) ? (PW_T)NAN : a == 0 ? zero : a * log1p(b);
  case NK_PW_HEAVISIDE: return a == 0 ? b : a > 0;
  case NK_PW_LERP_SCALAR: c = s0; /* fall through */
  case NK_PW_LERP: /* ATen's vectorised lerp: one fma from the nearer end */
    return fabs(c) < (PW_T)0.5 ? fma(c, b - a, a) : fma(c - one, b - a, b);
  case NK_PW_POW_SCALAR: {
    const double e = p->s0.f;
    if (e == 2) return a * a;
    if (e == 3) return a * a * a;
    if (e == -2) return one / (a * a);
    if (p->compute != NRT_FLOAT16) { /* ATen sends these to sqrt/rsqrt/reciprocal */
      if (e == 0.5) return sqrt(a);
      if (e == -0.5) return one / sqrt(a);
      if (e == -1) return one / a;
    }
    /* float32/float64 take the exponent as a double (std::pow(float, double)) */
    if (p->compute == NRT_FLOAT16 || p->compute == NRT_BFLOAT16) return pow(a, s0);
    return (PW_T)pow((double)a, e);
  }
  case NK_PW_CLAMP_SCALAR: b = s0; c = s1; /* fall through */
  case NK_PW_CLAMP:
    if (isnan(b) || isnan(c)) return (PW_T)NAN;
    a = a < b ? b : a;
    return c < a ? c : a;
  case NK_PW_CLAMP_MIN_SCALAR: return a < s0 ? s0 : a;
  case NK_PW_CLAMP_MAX_SCALAR: return s0 < a ? s0 : a;
  case NK_PW_ADDCMUL: return a + s0 * b * c;
  case NK_PW_ADDCDIV: return a + s0 * b / c;
  default: /* the special functions (special.c); integral-only ops and WHERE never get here */
    if (NK_PW_IS_SPECIAL(op))
      return _Generic(a, float: nk_special_binary_f32, default: nk_special_binary_f64)(op, a, b);
    return 0;
  }
}
