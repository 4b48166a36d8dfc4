/* validate.h — the checks every kernel runs before touching memory.
 *
 * Each returns 0 when the task is well formed; otherwise it reports through
 * nrt_exec_fail (the stream raises it, prefixed with the task name, at the
 * next synchronisation) and returns -1, and the kernel returns at once. */
#ifndef NK_VALIDATE_H
#define NK_VALIDATE_H

#include <stdint.h>

#include "neuron_runtime.h"

/* n_operands equals `expected`, and every operand is well formed: dtype in
 * range, 0 <= ndim <= NRT_MAX_DIMS, sizes >= 0, element count and largest
 * byte offset representable in int64, data non-null unless empty. */
int nk_check_operands(const nrt_task *task, nrt_exec_ctx *ctx, const char *kernel, int expected);

/* nk_check_operands, plus every operand has operand 0's ndim and sizes. */
int nk_check_elementwise(const nrt_task *task, nrt_exec_ctx *ctx, const char *kernel, int expected);

#endif /* NK_VALIDATE_H */
