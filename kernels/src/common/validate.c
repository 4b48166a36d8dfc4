/* validate.c — operand checks shared by all kernels. */
#include "common/validate.h"

#include "common/dtype_convert.h"

static int check_operand(const nrt_operand *op, int index, nrt_exec_ctx *ctx, const char *kernel) {
  if (!nk_dtype_valid(op->dtype)) {
    nrt_exec_fail(ctx, "%s: operand %d has invalid dtype %d", kernel, index, (int)op->dtype);
    return -1;
  }
  if (op->ndim < 0 || op->ndim > NRT_MAX_DIMS) {
    nrt_exec_fail(ctx, "%s: operand %d has ndim %d, expected 0..%d", kernel, index,
                  (int)op->ndim, NRT_MAX_DIMS);
    return -1;
  }
  int empty = 0;
  for (int d = 0; d < op->ndim; d++) {
    if (op->sizes[d] < 0) {
      nrt_exec_fail(ctx, "%s: operand %d has negative size %lld in dim %d", kernel, index,
                    (long long)op->sizes[d], d);
      return -1;
    }
    empty |= op->sizes[d] == 0;
  }
  if (empty) return 0; /* nothing is ever addressed */
  int64_t numel = 1, extent = 0; /* extent: largest |byte offset| reached */
  for (int d = 0; d < op->ndim; d++) {
    int64_t size = op->sizes[d], stride = op->strides[d], step;
    if (stride == INT64_MIN || __builtin_mul_overflow(size - 1, stride < 0 ? -stride : stride, &step) ||
        __builtin_add_overflow(extent, step, &extent) || __builtin_mul_overflow(numel, size, &numel)) {
      nrt_exec_fail(ctx, "%s: operand %d: element count or byte offsets overflow int64", kernel,
                    index);
      return -1;
    }
  }
  if (__builtin_add_overflow(extent, (int64_t)nk_dtype_size((nrt_dtype)op->dtype), &extent)) {
    nrt_exec_fail(ctx, "%s: operand %d: byte offsets overflow int64", kernel, index);
    return -1;
  }
  if (!op->data) {
    nrt_exec_fail(ctx, "%s: operand %d has a null data pointer", kernel, index);
    return -1;
  }
  return 0;
}

int nk_check_operands(const nrt_task *task, nrt_exec_ctx *ctx, const char *kernel, int expected) {
  if (task->n_operands != expected) {
    nrt_exec_fail(ctx, "%s: expected %d operands, got %d", kernel, expected, (int)task->n_operands);
    return -1;
  }
  for (int k = 0; k < expected; k++)
    if (check_operand(&task->operands[k], k, ctx, kernel)) return -1;
  return 0;
}

int nk_check_elementwise(const nrt_task *task, nrt_exec_ctx *ctx, const char *kernel, int expected) {
  if (nk_check_operands(task, ctx, kernel, expected)) return -1;
  const nrt_operand *out = &task->operands[0];
  for (int k = 1; k < expected; k++) {
    const nrt_operand *op = &task->operands[k];
    int same = op->ndim == out->ndim;
    for (int d = 0; same && d < out->ndim; d++) same = op->sizes[d] == out->sizes[d];
    if (!same) {
      nrt_exec_fail(ctx, "%s: operand %d's shape differs from the output's (ndim %d vs %d)",
                    kernel, k, (int)op->ndim, (int)out->ndim);
      return -1;
    }
  }
  return 0;
}
