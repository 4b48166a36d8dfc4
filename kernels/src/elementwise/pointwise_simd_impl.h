/* pointwise_simd_impl.h — pointwise_simd.h's bodies, written once over the
 * vector width (pointwise_<isa>_f32.c define the vector macros and
 * POINTWISE_NAME).  The tail goes through the scalar expression: IEEE
 * multiply, divide and add round the same in a lane and in a scalar. */
#include "elementwise/pointwise_simd.h"

bool POINTWISE_NAME(nk_pointwise_op op, int64_t n, float *out, const float *a, const float *b,
                    const float *c, float v) {
  const VT vv = VSET(v);
  int64_t i = 0;
  switch (op) {
  case NK_PW_ADDCMUL:
    for (; i + LANES <= n; i += LANES)
      VSTOREU(out + i, VADD(VLOADU(a + i), VMUL(VMUL(vv, VLOADU(b + i)), VLOADU(c + i))));
    for (; i < n; i++) out[i] = a[i] + v * b[i] * c[i];
    return true;
  case NK_PW_ADDCDIV:
    for (; i + LANES <= n; i += LANES)
      VSTOREU(out + i, VADD(VLOADU(a + i), VDIV(VMUL(vv, VLOADU(b + i)), VLOADU(c + i))));
    for (; i < n; i++) out[i] = a[i] + v * b[i] / c[i];
    return true;
  default:
    return false;
  }
}
