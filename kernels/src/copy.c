/* copy.c — NK_KERNEL_COPY: out <- cast(in), any of the 10x10 dtype pairs,
 * any strides (a broadcast input has stride 0).
 *
 * Per row: same dtype and both contiguous is a memmove; contiguous float32
 * <-> float16/bfloat16 uses the vectorised casts; every other row runs the
 * loop specialised for its (from, to) pair, with constant strides when both
 * sides are contiguous so the compiler can vectorise it.  A same-dtype
 * element is copied as raw bytes, so NaN payloads survive. */
#include <string.h>

#include "copy_simd.h"
#include "dtype_convert.h"
#include "kernel_entries.h"
#include "nd_iter.h"
#include "neuron_kernels.h"
#include "validate.h"

typedef struct copy_plan {
  nrt_dtype from, to;
  nk_convert_vec_fn vec; /* contiguous cast of this pair, or NULL */
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
  if (s[0] == eo && s[1] == ex) {
    if (p->from == p->to) { memmove(o, x, (size_t)(n * eo)); return; }
    if (p->vec) { p->vec(n, o, x); return; }
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

static nk_convert_vec_fn pick_vec(nrt_dtype from, nrt_dtype to) {
  if (nk_cpu_isa() < NK_ISA_AVX2) return NULL;
  if (from == NRT_FLOAT32 && to == NRT_FLOAT16) return nk_convert_avx2_f32_to_f16;
  if (from == NRT_FLOAT16 && to == NRT_FLOAT32) return nk_convert_avx2_f16_to_f32;
  if (from == NRT_FLOAT32 && to == NRT_BFLOAT16) return nk_convert_avx2_f32_to_bf16;
  if (from == NRT_BFLOAT16 && to == NRT_FLOAT32) return nk_convert_avx2_bf16_to_f32;
  return NULL;
}

int nk_copy_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_elementwise(task, ctx, "copy", 2)) return -1;
  copy_plan plan = {(nrt_dtype)task->operands[1].dtype, (nrt_dtype)task->operands[0].dtype, NULL};
  plan.vec = pick_vec(plan.from, plan.to);
  nk_for_each(task->operands, 2, copy_loop, &plan);
  return 0;
}
