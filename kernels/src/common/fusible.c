/* fusible.c — which tasks adaptive eager may run tile by tile.
 *
 * The runtime (fusion_plan.c) fuses a chain of queued tasks by running
 * each one's own kernel on tiles of the common index space, so a kernel
 * qualifies when it keeps the contract of NRT_FUSE_ELEMENTWISE
 * (neuron_runtime.h): operand 0 its only output, inputs of the same
 * sizes, each element from the same element of the inputs, the same bits
 * on any sub-box (its rows are picked by dtype and stride, and its vector
 * bodies give what its scalar tails give), and no failure that depends on
 * the data.  Checks of the descriptor and parameters need no copy here:
 * the planner runs the kernel on an empty tile, and a task its kernel
 * refuses is left to fail on its own.
 *
 * A reduction joins as a group's sink (NRT_FUSE_REDUCTION, reduce.c says
 * when).  Not here, on purpose: random (draws by position in the whole
 * task), scans, indexing, GEMM and the like (not elementwise),
 * integer division and remainder (a zero divisor fails the task), and the
 * multi-output tail ops (frexp). */
#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"

static nrt_fuse_kind elementwise(const nrt_task *t) {
  (void)t;
  return NRT_FUSE_ELEMENTWISE;
}

static nrt_fuse_kind pointwise(const nrt_task *t) {
  const nk_pointwise_params *p = (const nk_pointwise_params *)t->params;
  const bool divides = p->op == NK_PW_REMAINDER || p->op == NK_PW_FMOD ||
                       p->op == NK_PW_DIV_TRUNC || p->op == NK_PW_DIV_FLOOR;
  if (divides && !(nk_dtype_valid(p->compute) && nk_dtype_is_floating((nrt_dtype)p->compute)))
    return NRT_FUSE_NONE;
  return NRT_FUSE_ELEMENTWISE;
}

/* rows: the kernel whose row loop a fused group may call directly
 * (nk_capture_rows: its plan goes to nd_iter through the _plan calls, and
 * every path it takes for a fusible task is an nd_iter row loop); NULL: the
 * group calls the kernel once per tile. */
static const struct {
  nk_kernel_id id;
  nrt_fuse_classify_fn classify;
  nrt_kernel_fn rows;
} fusible[] = {
    {NK_KERNEL_COPY, elementwise, nk_copy_kernel}, /* casts on the device */
    {NK_KERNEL_FILL, elementwise, nk_fill_kernel}, /* full fills, and device scalars */
    {NK_KERNEL_BINARY, elementwise, nk_binary_kernel},
    {NK_KERNEL_POINTWISE, pointwise, nk_pointwise_kernel},
    {NK_KERNEL_UNARY, elementwise, nk_unary_kernel},
    {NK_KERNEL_UNARY_BACKWARD, elementwise, nk_unary_backward_kernel},
    {NK_KERNEL_REDUCE, nk_reduce_fusion, NULL}, /* a group's last member, on whole rows */
};
#define N_FUSIBLE (sizeof fusible / sizeof fusible[0])

static bool capture(const nrt_task *task, nrt_exec_ctx *ctx, nrt_row_entry *entry) {
  for (size_t i = 0; i < N_FUSIBLE; i++)
    if ((uint32_t)fusible[i].id == task->kernel && fusible[i].rows)
      return nk_capture_rows(fusible[i].rows, task, ctx, entry);
  return false;
}

nrt_status nk_register_fusion(void) {
  for (size_t i = 0; i < N_FUSIBLE; i++) {
    nrt_status s = nrt_kernel_set_fusion(fusible[i].id, fusible[i].classify);
    if (s == NRT_SUCCESS && fusible[i].rows) s = nrt_kernel_set_row_capture(fusible[i].id, capture);
    if (s != NRT_SUCCESS) return s;
  }
  return NRT_SUCCESS;
}
