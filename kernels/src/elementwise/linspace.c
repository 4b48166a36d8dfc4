/* linspace.c — NK_KERNEL_LINSPACE: `steps` evenly spaced values from start
 * to end on a 1-d output, ATen's CPU formula: step = (end - start) /
 * (steps - 1); index i < steps / 2 is start + step * i, the rest
 * end - step * (steps - 1 - i), so both ends are exact.  start and end are
 * first converted to the out dtype, as ATen's Scalar::to<scalar_t> does;
 * the arithmetic is in float for float32/float16/bfloat16 (ATen does
 * float16/bfloat16 in Half arithmetic, rounding each step; we round once),
 * double for float64, and double (then truncation) for integral outputs.
 * steps == 1 gives start.  bool is refused, as ATen does. */
#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

typedef struct linspace_plan {
  char *data;
  int64_t stride, steps, halfway;
  nrt_dtype t;
  double start, end, step; /* already in the out dtype's precision */
} linspace_plan;

static void linspace_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const linspace_plan *p = arg;
  char *o = p->data;
  if (nk_dtype_class(p->t) == NK_CLASS_FLOAT) {
    float start = (float)p->start, last = (float)p->end, step = (float)p->step;
    for (int64_t i = begin; i < end; i++)
      nk_store_f32(p->t, o + i * p->stride,
                   i < p->halfway ? start + step * (float)i : last - step * (float)(p->steps - i - 1));
  } else {
    for (int64_t i = begin; i < end; i++)
      nk_store_f64(p->t, o + i * p->stride,
                   i < p->halfway ? p->start + p->step * (double)i
                                  : p->end - p->step * (double)(p->steps - i - 1));
  }
}

/* v in the precision (and, for integers, the range) of dtype t */
static double to_dtype(nrt_dtype t, double v) {
  if (nk_dtype_class(t) == NK_CLASS_FLOAT) return nk_round_f32(t, (float)v);
  if (t == NRT_FLOAT64) return v;
  return (double)nk_wrap_i64(t, nk_f64_to_integral(t, v));
}

int nk_linspace_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "linspace", 1)) return -1;
  const nrt_operand *out = &task->operands[0];
  const nk_linspace_params *prm = (const nk_linspace_params *)task->params;
  if (out->ndim != 1 || out->sizes[0] != prm->steps) {
    nrt_exec_fail(ctx, "linspace: output must be 1-d with %lld elements", (long long)prm->steps);
    return -1;
  }
  if (out->dtype == NRT_BOOL) {
    nrt_exec_fail(ctx, "linspace: bool output is not supported");
    return -1;
  }
  nrt_dtype t = (nrt_dtype)out->dtype;
  linspace_plan plan = {out->data, out->strides[0], prm->steps, prm->steps / 2, t,
                        to_dtype(t, prm->start), to_dtype(t, prm->end), 0};
  if (prm->steps == 1) plan.halfway = 1; /* the single element is start */
  else if (nk_dtype_class(t) == NK_CLASS_FLOAT)
    plan.step = ((float)plan.end - (float)plan.start) / (float)(prm->steps - 1);
  else if (prm->steps > 1)
    plan.step = (plan.end - plan.start) / (double)(prm->steps - 1);
  nk_parallel_for(prm->steps, NK_GRAIN_ELEMENTWISE, linspace_range, &plan);
  return 0;
}
