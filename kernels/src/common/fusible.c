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
 * when), and foreach ops form multi-tensor groups of their own
 * (NRT_FUSE_MULTI: optim.c's nk_foreach_multi).  Not here, on purpose: random (draws by position in the whole
 * task), scans, indexing, GEMM and the like (not elementwise),
 * integer division and remainder (a zero divisor fails the task), and the
 * multi-output tail ops (frexp). */
#include <string.h>

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
 * group calls the kernel once per tile.
 * expr: says a captured routine as one expression (nrt_row_expr), so that
 * a group of such members can be compiled (fusion/jit_prelude.h); NULL:
 * never. */
typedef bool (*row_expr_fn)(const nrt_row_entry *entry, nrt_row_expr *expr);
static const struct {
  nk_kernel_id id;
  nrt_fuse_classify_fn classify;
  nrt_kernel_fn rows;
  row_expr_fn expr;
} fusible[] = {
    {NK_KERNEL_COPY, elementwise, nk_copy_kernel, NULL}, /* casts on the device */
    {NK_KERNEL_FILL, elementwise, nk_fill_kernel, NULL}, /* full fills, and device scalars */
    {NK_KERNEL_BINARY, elementwise, nk_binary_kernel, nk_binary_row_expr},
    {NK_KERNEL_POINTWISE, pointwise, nk_pointwise_kernel, nk_pointwise_row_expr},
    {NK_KERNEL_UNARY, elementwise, nk_unary_kernel, nk_unary_row_expr},
    {NK_KERNEL_UNARY_BACKWARD, elementwise, nk_unary_backward_kernel, NULL},
    {NK_KERNEL_REDUCE, nk_reduce_fusion, NULL, NULL}, /* a group's last member, on whole rows */
    {NK_KERNEL_FOREACH, nk_foreach_fusion, NULL, NULL}, /* multi-tensor groups (nk_foreach_multi) */
};
#define N_FUSIBLE (sizeof fusible / sizeof fusible[0])

static bool capture(const nrt_task *task, nrt_exec_ctx *ctx, nrt_row_entry *entry) {
  for (size_t i = 0; i < N_FUSIBLE; i++)
    if ((uint32_t)fusible[i].id == task->kernel && fusible[i].rows) {
      memset(&entry->expr, 0, sizeof entry->expr);
      if (!nk_capture_rows(fusible[i].rows, task, ctx, entry)) return false;
      if (!fusible[i].expr || !fusible[i].expr(entry, &entry->expr))
        entry->expr.code[0] = '\0';
      return true;
    }
  return false;
}

/* The compiled groups' target: each variant's own flags (kernels/
 * CMakeLists.txt), so generated code and kernels pick the same conversions
 * (the bfloat16 rounding store needs AVX512_BF16 and DQ). */
static void register_jit_target(void) {
  static const char *const flags[NK_VARIANTS] = {
      NULL, /* portable: no vector prelude */
      "-DNK_JIT_AVX512=0 -mavx2 -mfma -mf16c",
      "-DNK_JIT_AVX512=1 -mavx512f -mavx2 -mfma -mf16c",
      "-DNK_JIT_AVX512=1 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx2 -mfma "
      "-mf16c",
  };
  const char *f = flags[nk_cpu_variant()];
  nrt_fusion_jit_set_target(f ? "fusion/jit_prelude.h" : NULL, f);
}

nrt_status nk_register_fusion(void) {
  register_jit_target();
  for (size_t i = 0; i < N_FUSIBLE; i++) {
    nrt_status s = nrt_kernel_set_fusion(fusible[i].id, fusible[i].classify);
    if (s == NRT_SUCCESS && fusible[i].rows) s = nrt_kernel_set_row_capture(fusible[i].id, capture);
    if (s != NRT_SUCCESS) return s;
  }
  return nrt_kernel_set_multi(NK_KERNEL_FOREACH, &nk_foreach_multi);
}
