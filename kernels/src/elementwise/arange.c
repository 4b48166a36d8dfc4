/* arange.c — NK_KERNEL_ARANGE: out[i] <- start + i * step on a 1-d output
 * of any stride, in ATen's CPU accumulate types: double for float32 and
 * float64, float for float16/bfloat16 (rounded once on store), int64 for
 * the integral types (wrapping).  bool is refused, as ATen does. */
#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

typedef struct arange_plan {
  char *data;
  int64_t stride;
  nrt_dtype t;
  nk_scalar start, step;
} arange_plan;

static void arange_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const arange_plan *p = arg;
  char *o = p->data;
  if (p->t == NRT_FLOAT16 || p->t == NRT_BFLOAT16) {
    float start = (float)p->start.f, step = (float)p->step.f;
    for (int64_t i = begin; i < end; i++) nk_store_f32(p->t, o + i * p->stride, start + step * (float)i);
  } else if (nk_dtype_is_floating(p->t)) {
    for (int64_t i = begin; i < end; i++)
      nk_store_f64(p->t, o + i * p->stride, p->start.f + p->step.f * (double)i);
  } else {
    uint64_t start = (uint64_t)p->start.i, step = (uint64_t)p->step.i;
    for (int64_t i = begin; i < end; i++)
      nk_store_i64(p->t, o + i * p->stride, (int64_t)(start + step * (uint64_t)i));
  }
}

int nk_arange_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "arange", 1)) return -1;
  const nrt_operand *out = &task->operands[0];
  if (out->ndim != 1) {
    nrt_exec_fail(ctx, "arange: output must be 1-d, got ndim %d", (int)out->ndim);
    return -1;
  }
  if (out->dtype == NRT_BOOL) {
    nrt_exec_fail(ctx, "arange: bool output is not supported");
    return -1;
  }
  const nk_arange_params *prm = (const nk_arange_params *)task->params;
  arange_plan plan = {out->data, out->strides[0], (nrt_dtype)out->dtype, prm->start, prm->step};
  nk_parallel_for(out->sizes[0], NK_GRAIN_ELEMENTWISE, arange_range, &plan);
  return 0;
}
