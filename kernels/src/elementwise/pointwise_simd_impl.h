/* pointwise_simd_impl.h — pointwise_simd.h's bodies, written once over the
 * vector width (pointwise_<isa>_f32.c define the vector macros and
 * POINTWISE_NAME).  The tail is a masked vector of the same op
 * (pointwise_vec_op.h), so every element takes it wherever a row ends. */
#include "elementwise/pointwise_simd.h"
#include "elementwise/pointwise_vec_op.h"

/* lerp as pointwise_float.h computes it (ATen's vectorised form): one fma
 * from the nearer end, |w| < 0.5 ? fma(w, b - a, a) : fma(w - 1, b - a, b).
 * An fma is exactly rounded wherever it runs, so these are the scalar
 * loop's bits -- which, built for the baseline ISA, calls libm's software
 * fma per element (lerp of 2^20 floats: 2.5 ms on 2 Zen 3 threads). */
static inline VT lerp_vec(VT a, VT b, VT w) {
  const VT d = VSUB(b, a);
  const VMASK near_a = VCMP(VANDNOT(VSET(-0.0f), w), VSET(0.5f), _CMP_LT_OQ);
  return VSEL(near_a, VFMADD(w, d, a), VFMADD(VSUB(w, VSET(1.0f)), d, b));
}

static bool lerp_rows(bool scalar_w, int64_t n, float *out, const float *a, const float *b,
                      const float *w, float v) {
  const VT vv = VSET(v);
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    VSTOREU(out + i, lerp_vec(VLOADU(a + i), VLOADU(b + i), scalar_w ? vv : VLOADU(w + i)));
  if (i < n) {
    const VTAIL m = TAIL_MASK((int)(n - i));
    TAIL_STORE(out + i, m, lerp_vec(TAIL_LOAD(a + i, m), TAIL_LOAD(b + i, m),
                                    scalar_w ? vv : TAIL_LOAD(w + i, m)));
  }
  return true;
}

bool POINTWISE_NAME(nk_pointwise_op op, int64_t n, float *out, const float *a, const float *b,
                    const float *c, float v) {
  if (op == NK_PW_LERP || op == NK_PW_LERP_SCALAR)
    return lerp_rows(op == NK_PW_LERP_SCALAR, n, out, a, b, c, v);
  if (op != NK_PW_ADDCMUL && op != NK_PW_ADDCDIV) return false;
  const VT vv = VSET(v);
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    VSTOREU(out + i, nk_pw_addc_vec(op, VLOADU(a + i), VLOADU(b + i), VLOADU(c + i), vv));
  if (i < n) {
    const VTAIL m = TAIL_MASK((int)(n - i));
    TAIL_STORE(out + i, m, nk_pw_addc_vec(op, TAIL_LOAD(a + i, m), TAIL_LOAD(b + i, m),
                                          TAIL_LOAD(c + i, m), vv));
  }
  return true;
}
