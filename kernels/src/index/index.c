/* index.c — NK_KERNEL_INDEX: ATen's advanced-index form (index, index_put,
 * take, put; see neuron_kernels.h).
 *
 * Elementwise over out/src/indices (nd_iter); each element's offset into
 * the indexed tensor is the sum of its checked indices times the indexed
 * strides.  Reads (index) run in parallel; writes (index_put, put) run on
 * one thread in the iteration's fixed order, so duplicate indices give the
 * same result (the last write, or the same sum) whatever the thread count. */
#include "index/index_common.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "common/validate.h"

typedef struct index_plan {
  const nk_index_params *p;
  nrt_dtype out, src;
  int n;
  nk_index_error err;
  nrt_dtype idx[NK_INDEX_MAX_INDICES];
} index_plan;

/* the byte offset of element i of a row; false when an index is bad */
NK_INLINE bool element_offset(index_plan *x, char *const *data, const int64_t *s, int64_t i,
                              int64_t *offset) {
  int64_t off = 0;
  for (int k = 0; k < x->n; k++) {
    int64_t v = nk_read_index(x->idx[k], data[2 + k] + i * s[2 + k]);
    if (!nk_index_in_range(&v, x->p->sizes[k], !x->p->nowrap)) {
      nk_index_error_set(&x->err, v, k, x->p->sizes[k]);
      return false;
    }
    off += v * x->p->strides[k];
  }
  *offset = off;
  return true;
}

static void index_loop(void *arg, int64_t n, char *const *data, const int64_t *s) {
  index_plan *x = arg;
  if (nk_index_failed(&x->err)) return;
  const size_t es = nk_dtype_size(x->out);
  for (int64_t i = 0; i < n; i++) {
    int64_t off;
    if (!element_offset(x, data, s, i, &off)) return;
    const char *from = data[1] + i * s[1] + off;
    if (x->out == x->src) nk_copy_elem(data[0] + i * s[0], from, es);
    else nk_convert(x->src, x->out, data[0] + i * s[0], from);
  }
}

static void put_loop(void *arg, int64_t n, char *const *data, const int64_t *s) {
  index_plan *x = arg;
  if (nk_index_failed(&x->err)) return;
  const size_t es = nk_dtype_size(x->out);
  static const nk_scalar one = {1.0, 1};
  for (int64_t i = 0; i < n; i++) {
    int64_t off;
    if (!element_offset(x, data, s, i, &off)) return;
    char *to = data[0] + i * s[0] + off;
    const char *v = data[1] + i * s[1];
    if (x->p->accumulate) nk_reduce_at(NK_SCATTER_ADD, x->out, to, x->src, v, &one, false);
    else if (x->out == x->src) nk_copy_elem(to, v, es);
    else nk_convert(x->src, x->out, to, v);
  }
}

int nk_index_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_index_params *p = (const nk_index_params *)task->params;
  if (p->n_indices < 1 || p->n_indices > NK_INDEX_MAX_INDICES) {
    nrt_exec_fail(ctx, "index: %d index operands, expected 1..%d", (int)p->n_indices,
                  NK_INDEX_MAX_INDICES);
    return -1;
  }
  if (nk_check_elementwise(task, ctx, "index", 2 + p->n_indices)) return -1;
  index_plan x;
  x.p = p;
  x.n = p->n_indices;
  x.out = (nrt_dtype)task->operands[0].dtype;
  x.src = (nrt_dtype)task->operands[1].dtype;
  for (int k = 0; k < x.n; k++) {
    if (!nk_index_dtype_ok(task->operands[2 + k].dtype)) {
      nrt_exec_fail(ctx, "index: index operand %d has dtype %d, expected int32 or int64", k,
                    (int)task->operands[2 + k].dtype);
      return -1;
    }
    if (p->sizes[k] < 0) {
      nrt_exec_fail(ctx, "index: negative indexed size %lld", (long long)p->sizes[k]);
      return -1;
    }
    x.idx[k] = (nrt_dtype)task->operands[2 + k].dtype;
  }
  nk_index_error_init(&x.err);
  nk_nd_iter it;
  nk_nd_iter_init(&it, task->operands, 2 + x.n);
  if (it.numel > 0) {
    if (p->put) nk_nd_iter_run(&it, INT64_MAX, put_loop, &x); /* serial: deterministic */
    else nk_nd_iter_run(&it, NK_GRAIN_ELEMENTWISE, index_loop, &x);
  }
  return nk_index_error_report(&x.err, ctx);
}
