/* unary_simd_impl.h — the float32 vector bodies of the hot unary ops,
 * written once over a vector width (unary_<isa>_f32.c define the vector
 * macros: AVX2 8 lanes, AVX-512 16):
 * exp, exp2, expm1, log, log2, log10, log1p, erf, erfc, sin, cos, atan
 * (common/simd_exp_f32.h, simd_log_f32.h, simd_erf_f32.h, simd_trig_f32.h:
 * about 1-1.6 ulp; erfc up to 3.4, atan up to 2.3),
 * sigmoid, silu, tanh, gelu (erf form and tanh form), relu, abs, neg,
 * log_sigmoid (min(x, 0) - log1p(exp(-|x|)), the scalar formula),
 * and the correctly rounded sqrt, rsqrt (1 / sqrt) and reciprocal.
 * The activations divide with vdiv_fast (the ISA header's: a reciprocal
 * and a corrected quotient on AVX-512, the division on AVX2), which is the
 * divider's quotient but for rare one-ulp cases and takes no divider.
 *
 * Built on exp:
 *   sigmoid(x) = 1 / (1 + exp(-x)),  silu(x) = x / (1 + exp(-x)) (ATen's
 *                float formulas, so they saturate where ATen's do),
 *   tanh(|x|)  = 1 - 2 / (exp(2|x|) + 1), Cephes' odd polynomial below
 *                |x| < 0.625 where that form would cancel; both on |x| and
 *                the sign put back last, so -0 and NaN need no selects,
 *   gelu_tanh  = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
 *                (= 0.5 x (1 + tanh u)),
 *   gelu       = 0.5 x erfc(-x / sqrt 2), with erfc(z) for z >= 0 from the
 *                Numerical Recipes Chebyshev fit (relative error < 1.2e-7)
 *                and 2 - erfc(z) on the other side.
 * Backward (grad a, input b): gelu (both forms), silu, sigmoid, tanh,
 * log_sigmoid and threshold (relu's backward), from the same pieces.
 * NaN and the infinities give what the scalar code gives.  Whole rows go
 * through the vector body (the tail with masked loads/stores), so results
 * never depend on how the row was split between threads. */
#include "elementwise/unary_simd.h"
#include "elementwise/unary_vec_body.h"
#ifdef UNARY_HALF_NAME
#include <string.h>

#include "common/half_simd_avx512.h"
#endif


static inline void row(nk_unary_op op, int64_t n, float *out, const float *x) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES) VSTOREU(out + i, nk_unary_vec_body(op, VLOADU(x + i)));
  if (i < n) {
    const int rem = (int)(n - i);
    const VTAIL mask = TAIL_MASK(rem);
    TAIL_STORE(out + i, mask, nk_unary_vec_body(op, TAIL_LOAD(x + i, mask)));
  }
}

#ifdef UNARY_NAME
bool UNARY_NAME(nk_unary_op op, int64_t n, float *out, const float *x, const nk_uprm *p) {
  (void)p;
  switch (op) {
#define NK_VEC_CASE(OP) case OP: row(OP, n, out, x); return true;
    NK_UNARY_VEC_OPS(NK_VEC_CASE)
#undef NK_VEC_CASE
  default: return false;
  }
}
#endif

#ifdef UNARY_HALF_NAME
/* float16/bfloat16 rows, AVX-512 only: 16 lanes widened in registers, the
 * float32 body, rounded and stored -- the bits of the widened-chunk path
 * (body is lane-wise; the tail runs as a zero-padded vector, as the
 * float32 row's masked tail does), without its float32 buffers. */
static inline void half_row(nk_unary_op op, nrt_dtype t, int64_t n, uint16_t *out,
                            const uint16_t *x) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES) nk_h16_store_avx512(t, out + i, nk_unary_vec_body(op, nk_h16_load_avx512(t, x + i)));
  if (i < n) {
    uint16_t in[LANES] = {0}, res[LANES];
    memcpy(in, x + i, (size_t)(n - i) * sizeof *in);
    nk_h16_store_avx512(t, res, nk_unary_vec_body(op, nk_h16_load_avx512(t, in)));
    memcpy(out + i, res, (size_t)(n - i) * sizeof *res);
  }
}

bool UNARY_HALF_NAME(nk_unary_op op, nrt_dtype t, int64_t n, void *out, const void *x) {
  if (t != NRT_BFLOAT16 && t != NRT_FLOAT16) return false;
  switch (op) {
#define NK_VEC_CASE(OP)                                                                           \
  case OP:                                                                                        \
    if (t == NRT_BFLOAT16) half_row(OP, NRT_BFLOAT16, n, out, x);                                 \
    else half_row(OP, NRT_FLOAT16, n, out, x);                                                    \
    return true;
    NK_UNARY_VEC_OPS(NK_VEC_CASE)
#undef NK_VEC_CASE
  default: return false;
  }
}
#endif

#ifdef UNARY_BW_NAME
/* ------------------------------------------------------------------ backward */

static inline VT bw_body(nk_unary_backward_op op, VT a, VT b, const nk_uprm *p) {
  const VT one = VSET(1.0);
  switch (op) {
  case NK_UNARY_BW_SIGMOID: return VMUL(VMUL(a, VSUB(one, b)), b);
  case NK_UNARY_BW_TANH: return VMUL(a, VFNMADD(b, b, one));
  case NK_UNARY_BW_GELU: {
    VT cdf = VMUL(VSET(0.5), one_plus_erf(b));
    VT pdf = VMUL(VSET(NK_2_SQRTPI * NK_SQRT1_2 * 0.5),
                               vexp(VMUL(VMUL(b, b), VSET(-0.5))));
    return VMUL(a, VFMADD(b, pdf, cdf));
  }
  case NK_UNARY_BW_GELU_TANH: {
    const VT kbeta = VSET(NK_GELU_KBETA), kkappa = VSET(NK_GELU_KKAPPA);
    VT x_sq = VMUL(b, b), x_cube = VMUL(x_sq, b);
    VT t = vtanh(VMUL(kbeta, VFMADD(kkappa, x_cube, b)));
    VT left = VMUL(VSET(0.5), b);
    VT left_d = VMUL(VSET(0.5), VADD(one, t));
    VT tanh_d = VFNMADD(t, t, one);
    VT inner_d = VMUL(kbeta, VFMADD(VSET(3.0 * NK_GELU_KKAPPA), x_sq, one));
    return VMUL(a, VFMADD(VMUL(left, tanh_d), inner_d, left_d));
  }
  case NK_UNARY_BW_SILU: {
    VT sg = vdiv_fast(one, VADD(one, vexp(VXOR(b, VSET(-0.0f)))));
    return VMUL(VMUL(a, sg), VFMADD(b, VSUB(one, sg), one));
  }
  case NK_UNARY_BW_LOG_SIGMOID: { /* z = exp(-|b|): a * (b < 0 ? 1 - z/(1+z) : z/(1+z)) */
    VT z = vexp(VXOR(vabs(b), VSET(-0.0f)));
    VT q = VDIV(z, VADD(one, z));
    return VMUL(a, VSEL(VCMP(b, VZERO(), LT), VSUB(one, q), q));
  }
  default: /* THRESHOLD: a = x, b = other */
    return VSEL(VCMP(a, VSET(p->f[0]), LE), VSET(p->f[1]), b);
  }
}

static inline void bw_row(nk_unary_backward_op op, int64_t n, float *out, const float *a, const float *b,
                          const nk_uprm *p) {
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    VSTOREU(out + i, bw_body(op, VLOADU(a + i), VLOADU(b + i), p));
  if (i < n) {
    const int rem = (int)(n - i);
    const VTAIL mask = TAIL_MASK(rem);
    TAIL_STORE(out + i, mask, bw_body(op, TAIL_LOAD(a + i, mask), TAIL_LOAD(b + i, mask), p));
  }
}

bool UNARY_BW_NAME(nk_unary_backward_op op, int64_t n, float *out, const float *a, const float *b,
                          const nk_uprm *p) {
  switch (op) {
#define NK_VEC_CASE(OP) case OP: bw_row(OP, n, out, a, b, p); return true;
    NK_VEC_CASE(NK_UNARY_BW_SIGMOID)
    NK_VEC_CASE(NK_UNARY_BW_TANH)
    NK_VEC_CASE(NK_UNARY_BW_GELU)
    NK_VEC_CASE(NK_UNARY_BW_GELU_TANH)
    NK_VEC_CASE(NK_UNARY_BW_SILU)
    NK_VEC_CASE(NK_UNARY_BW_THRESHOLD)
    NK_VEC_CASE(NK_UNARY_BW_LOG_SIGMOID)
#undef NK_VEC_CASE
  default: return false;
  }
}
#endif /* UNARY_BW_NAME */
