/* pointwise_simd_impl.h — pointwise_simd.h's bodies, written once over the
 * vector width (pointwise_<isa>_f32.c define the vector macros and
 * POINTWISE_NAME).  The tail is a masked vector of the same op
 * (pointwise_vec_op.h), so every element takes it wherever a row ends. */
#include "elementwise/pointwise_simd.h"
#include "elementwise/pointwise_vec_op.h"

bool POINTWISE_NAME(nk_pointwise_op op, int64_t n, float *out, const float *a, const float *b,
                    const float *c, float v) {
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
