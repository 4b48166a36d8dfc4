/* softmax_simd_impl.h — the float32 softmax line (see softmax_simd.h),
 * written once over the vector macros of simd_<isa>_f32.h (AVX2: 8 lanes,
 * AVX-512: 16) with the shared vector exp (simd_exp_f32.h).  The including
 * file also defines
 *   SM_LINE_NAME              the exported function's name,
 *   SM_HSUM(v), SM_HMAX(v)    horizontal sum / max to a float,
 *   SM_TAIL_LOAD(p, m, fill)  the first lanes of m from p, `fill` elsewhere.
 * Whole lines go through the vector code, the tail with masked loads and
 * stores, so results never depend on how the lines are split over threads.
 * log: 1 plain log_softmax, 2 / 3 log_softmax of a bfloat16 / float16
 * line widened to float32, rounding the sum and its log to that dtype as
 * ATen's CPU kernel does ((x - max) - round(log(round(sum)))). */
#include <math.h>
#include <stdint.h>

#include "common/dtype_convert.h"
#include "common/simd_exp_f32.h"
#include "reduce/softmax_simd.h"

int SM_LINE_NAME(int log, int backward, int64_t n, char *o_, const char *a_, const char *b_) {
  float *o = (float *)o_;
  const float *a = (const float *)a_, *b = (const float *)b_;
  const int64_t nv = n - n % LANES;
  const int rem = (int)(n - nv);
  const VTAIL tm = TAIL_MASK(rem);
  if (!backward) {
    VT mx = VSET(-INFINITY), bad = VZERO();
    for (int64_t i = 0; i < nv; i += LANES) {
      const VT x = VLOADU(a + i);
      bad = VSEL(VCMP(x, x, UNORD), VSET(1.0f), bad);
      mx = VMAX(mx, x);
    }
    if (rem) {
      const VT x = SM_TAIL_LOAD(a + nv, tm, -INFINITY);
      bad = VSEL(VCMP(x, x, UNORD), VSET(1.0f), bad);
      mx = VMAX(mx, x);
    }
    if (SM_HMAX(bad) > 0) return 1;
    const float mf = SM_HMAX(mx);
    const VT m = VSET(mf);
    VT acc = VZERO(), acc2 = VZERO();
    if (log) {
      for (int64_t i = 0; i < nv; i += LANES) acc = VADD(acc, vexp(VSUB(VLOADU(a + i), m)));
      if (rem) acc2 = vexp(VSUB(SM_TAIL_LOAD(a + nv, tm, -INFINITY), m));
      const float sum = SM_HSUM(VADD(acc, acc2));
      if (log == 1) {
        const VT sh = VADD(m, VSET(logf(sum)));
        for (int64_t i = 0; i < nv; i += LANES) VSTOREU(o + i, VSUB(VLOADU(a + i), sh));
        if (rem) TAIL_STORE(o + nv, tm, VSUB(SM_TAIL_LOAD(a + nv, tm, 0), sh));
        return 0;
      }
      const nrt_dtype t = log == 2 ? NRT_BFLOAT16 : NRT_FLOAT16;
      const VT ls = VSET(nk_round_f32(t, logf(nk_round_f32(t, sum))));
      for (int64_t i = 0; i < nv; i += LANES) VSTOREU(o + i, VSUB(VSUB(VLOADU(a + i), m), ls));
      if (rem) TAIL_STORE(o + nv, tm, VSUB(VSUB(SM_TAIL_LOAD(a + nv, tm, 0), m), ls));
      return 0;
    }
    for (int64_t i = 0; i < nv; i += LANES) {
      const VT e = vexp(VSUB(VLOADU(a + i), m));
      VSTOREU(o + i, e);
      acc = VADD(acc, e);
    }
    if (rem) {
      acc2 = vexp(VSUB(SM_TAIL_LOAD(a + nv, tm, -INFINITY), m));
      TAIL_STORE(o + nv, tm, acc2);
    }
    const VT r = VSET(1.0f / SM_HSUM(VADD(acc, acc2)));
    for (int64_t i = 0; i < nv; i += LANES) VSTOREU(o + i, VMUL(VLOADU(o + i), r));
    if (rem) TAIL_STORE(o + nv, tm, VMUL(SM_TAIL_LOAD(o + nv, tm, 0), r));
    return 0;
  }
  /* backward: a = grad_out, b = out */
  VT acc = VZERO();
  for (int64_t i = 0; i < nv; i += LANES) {
    const VT g = VLOADU(a + i);
    acc = log ? VADD(acc, g) : VFMADD(g, VLOADU(b + i), acc);
  }
  if (rem) {
    const VT g = SM_TAIL_LOAD(a + nv, tm, 0);
    acc = log ? VADD(acc, g) : VFMADD(g, SM_TAIL_LOAD(b + nv, tm, 0), acc);
  }
  const VT s = VSET(SM_HSUM(acc));
  for (int64_t i = 0; i < nv; i += LANES) {
    const VT g = VLOADU(a + i), y = VLOADU(b + i);
    VSTOREU(o + i, log ? VFNMADD(vexp(y), s, g) : VMUL(y, VSUB(g, s)));
  }
  if (rem) {
    const VT g = SM_TAIL_LOAD(a + nv, tm, 0), y = SM_TAIL_LOAD(b + nv, tm, 0);
    TAIL_STORE(o + nv, tm, log ? VFNMADD(vexp(y), s, g) : VMUL(y, VSUB(g, s)));
  }
  return 0;
}
