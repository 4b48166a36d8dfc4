/* copy.c — NK_KERNEL_COPY: out <- cast(in), any of the 10x10 dtype pairs,
 * any strides (a broadcast input has stride 0).
 *
 * Per row: same dtype and both contiguous is a memmove; a cast between two
 * of float32/float16/bfloat16 (the casts autocast makes, contiguous or
 * strided, e.g. a transposed weight) goes through the vectorised row
 * conversions of half_rows.h -- straight into the output when one side is
 * contiguous float32, else through a float32 chunk (the same conversions
 * the float-rows adapter of nd_iter.h uses, so there is one copy of them);
 * every other row runs the loop specialised for its (from, to) pair, with
 * constant strides when both sides are contiguous so the compiler can
 * vectorise it.  A same-dtype element is copied as raw bytes, so NaN
 * payloads survive. */
#include <string.h>

#include "common/dtype_convert.h"
#include "common/half_rows.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

typedef struct copy_plan {
  nrt_dtype from, to;
  bool float_cast; /* two different dtypes of float32, float16, bfloat16 */
} copy_plan;

NK_INLINE void cast_row(nrt_dtype from, nrt_dtype to, int64_t n, char *o, int64_t so,
                        const char *x, int64_t sx) {
  const int64_t eo = (int64_t)nk_dtype_size(to), ex = (int64_t)nk_dtype_size(from);
  if (from == to)
    for (int64_t i = 0; i < n; i++) memcpy(o + i * so, x + i * sx, (size_t)eo);
  else if (so == eo && sx == ex)
    for (int64_t i = 0; i < n; i++) nk_convert(from, to, o + i * eo, x + i * ex);
  else
    for (int64_t i = 0; i < n; i++) nk_convert(from, to, o + i * so, x + i * sx);
}

NK_INLINE void cast_from(nrt_dtype from, nrt_dtype to, int64_t n, char *o, int64_t so,
                         const char *x, int64_t sx) {
  switch (to) {
  case NRT_BOOL: cast_row(from, NRT_BOOL, n, o, so, x, sx); break;
  case NRT_UINT8: cast_row(from, NRT_UINT8, n, o, so, x, sx); break;
  case NRT_INT8: cast_row(from, NRT_INT8, n, o, so, x, sx); break;
  case NRT_INT16: cast_row(from, NRT_INT16, n, o, so, x, sx); break;
  case NRT_INT32: cast_row(from, NRT_INT32, n, o, so, x, sx); break;
  case NRT_INT64: cast_row(from, NRT_INT64, n, o, so, x, sx); break;
  case NRT_FLOAT16: cast_row(from, NRT_FLOAT16, n, o, so, x, sx); break;
  case NRT_BFLOAT16: cast_row(from, NRT_BFLOAT16, n, o, so, x, sx); break;
  case NRT_FLOAT32: cast_row(from, NRT_FLOAT32, n, o, so, x, sx); break;
  case NRT_FLOAT64: cast_row(from, NRT_FLOAT64, n, o, so, x, sx); break;
  case NRT_DTYPE_COUNT: break;
  }
}

static void copy_loop(void *ctx, int64_t n, char *const *data, const int64_t *s) {
  const copy_plan *p = ctx;
  char *o = data[0];
  const char *x = data[1];
  const int64_t eo = (int64_t)nk_dtype_size(p->to), ex = (int64_t)nk_dtype_size(p->from);
  if (s[0] == eo && s[1] == ex && p->from == p->to) {
    memmove(o, x, (size_t)(n * eo));
    return;
  }
  if (p->float_cast && s[1] != 0) {
    const nk_half_fns *h = nk_half_pick();
    if (p->to == NRT_FLOAT32 && s[0] == 4) { /* widen straight into out */
      h->in(p->from, x, s[1], n, (float *)(void *)o);
      return;
    }
    if (p->from == NRT_FLOAT32 && s[1] == 4) { /* round straight from in */
      h->out(p->to, o, s[0], n, (const float *)(const void *)x);
      return;
    }
    float buf[NK_FLOAT_CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += NK_FLOAT_CHUNK) {
      const int64_t m = n - i0 < NK_FLOAT_CHUNK ? n - i0 : NK_FLOAT_CHUNK;
      h->out(p->to, o + i0 * s[0], s[0], m, h->in(p->from, x + i0 * s[1], s[1], m, buf));
    }
    return;
  }
  switch (p->from) {
  case NRT_BOOL: cast_from(NRT_BOOL, p->to, n, o, s[0], x, s[1]); break;
  case NRT_UINT8: cast_from(NRT_UINT8, p->to, n, o, s[0], x, s[1]); break;
  case NRT_INT8: cast_from(NRT_INT8, p->to, n, o, s[0], x, s[1]); break;
  case NRT_INT16: cast_from(NRT_INT16, p->to, n, o, s[0], x, s[1]); break;
  case NRT_INT32: cast_from(NRT_INT32, p->to, n, o, s[0], x, s[1]); break;
  case NRT_INT64: cast_from(NRT_INT64, p->to, n, o, s[0], x, s[1]); break;
  case NRT_FLOAT16: cast_from(NRT_FLOAT16, p->to, n, o, s[0], x, s[1]); break;
  case NRT_BFLOAT16: cast_from(NRT_BFLOAT16, p->to, n, o, s[0], x, s[1]); break;
  case NRT_FLOAT32: cast_from(NRT_FLOAT32, p->to, n, o, s[0], x, s[1]); break;
  case NRT_FLOAT64: cast_from(NRT_FLOAT64, p->to, n, o, s[0], x, s[1]); break;
  case NRT_DTYPE_COUNT: break;
  }
}

static bool is_float(nrt_dtype t) {
  return t == NRT_FLOAT32 || t == NRT_FLOAT16 || t == NRT_BFLOAT16;
}

int nk_copy_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_elementwise(task, ctx, "copy", 2)) return -1;
  copy_plan plan = {(nrt_dtype)task->operands[1].dtype, (nrt_dtype)task->operands[0].dtype, false};
  plan.float_cast = plan.from != plan.to && is_float(plan.from) && is_float(plan.to);
  nk_for_each_plan(task->operands, 2, copy_loop, &plan, sizeof plan);
  return 0;
}
