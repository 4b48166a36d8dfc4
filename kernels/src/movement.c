/* movement.c — NK_KERNEL_TRIANGLE (tril/triu) and NK_KERNEL_PAD
 * (reflection/replication padding): copies whose source index is a
 * function of the destination index, so each walks the output row by row
 * (rows split over the compute pool) and moves raw element bytes.
 * cat, flip and roll need no kernel of their own: they are COPY launches
 * on narrowed views and negative-stride operands (ops_movement.cpp). */
#include <stdatomic.h>

#include "kernel_entries.h"
#include "nd_iter.h"
#include "neuron_kernels.h"
#include "sort_keys.h"
#include "validate.h"

/* ---------------------------------------------------------------- triangle */

typedef struct tri_job {
  const nrt_operand *out, *in;
  int64_t diagonal, cols;
  int upper;
  nk_walker rows; /* dims 0..ndim-2 */
} tri_job;

static void tri_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const tri_job *j = arg;
  nk_walker w = j->rows;
  nk_walker_seek(&w, begin);
  const size_t es = nk_dtype_size((nrt_dtype)j->out->dtype);
  const int nd = j->out->ndim;
  const int64_t so = j->out->strides[nd - 1], si = j->in->strides[nd - 1];
  for (int64_t r = begin; r < end; r++) {
    const int64_t i = w.idx[w.ndim - 1];
    char *o = (char *)j->out->data + w.off[0];
    const char *x = (const char *)j->in->data + w.off[1];
    /* kept columns: [keep_lo, keep_hi) */
    int64_t keep_lo, keep_hi;
    if (j->upper) {
      int64_t lo = i + j->diagonal;
      keep_lo = lo < 0 ? 0 : lo > j->cols ? j->cols : lo;
      keep_hi = j->cols;
    } else {
      int64_t hi = i + j->diagonal + 1;
      keep_lo = 0;
      keep_hi = hi < 0 ? 0 : hi > j->cols ? j->cols : hi;
    }
    for (int64_t c = 0; c < j->cols; c++) {
      if (c >= keep_lo && c < keep_hi) {
        if (o != x || so != si) memcpy(o + c * so, x + c * si, es);
      } else {
        memset(o + c * so, 0, es);
      }
    }
    nk_walker_next(&w);
  }
}

int nk_triangle_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_elementwise(task, ctx, "triangle", 2)) return -1;
  const nk_triangle_params *p = (const nk_triangle_params *)task->params;
  const nrt_operand *out = &task->operands[0], *in = &task->operands[1];
  if (out->ndim < 2 || out->dtype != in->dtype) {
    nrt_exec_fail(ctx, "triangle: expected operands of one dtype with at least 2 dims, got %d",
                  (int)out->ndim);
    return -1;
  }
  if (nk_numel(out) == 0) return 0;
  tri_job job = {.out = out, .in = in, .diagonal = p->diagonal,
                 .cols = out->sizes[out->ndim - 1], .upper = p->upper != 0};
  /* clamp so that i + diagonal never overflows: beyond +-cols/rows nothing changes */
  const int64_t lim = out->sizes[out->ndim - 1] + out->sizes[out->ndim - 2] + 1;
  if (job.diagonal > lim) job.diagonal = lim;
  if (job.diagonal < -lim) job.diagonal = -lim;
  job.rows.ndim = out->ndim - 1;
  job.rows.n_ops = 2;
  for (int d = 0; d < out->ndim - 1; d++) {
    job.rows.sizes[d] = out->sizes[d];
    job.rows.strides[0][d] = out->strides[d];
    job.rows.strides[1][d] = in->strides[d];
  }
  int64_t rows = nk_numel(out) / job.cols;
  nk_parallel_for(rows, job.cols >= NK_GRAIN_ELEMENTWISE ? 1 : NK_GRAIN_ELEMENTWISE / job.cols,
                  tri_range, &job);
  return 0;
}

/* --------------------------------------------------------------------- pad */

typedef struct pad_job {
  const nrt_operand *out, *in;
  int mode, nd, first; /* first padded dim */
  int64_t before[NRT_MAX_DIMS];
  nk_walker rows; /* out's dims 0..ndim-2 */
} pad_job;

NK_INLINE int64_t pad_map(int mode, int64_t o, int64_t before, int64_t n) {
  int64_t i = o - before;
  if (mode == NK_PAD_REFLECT) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
  } else {
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
  }
  return i;
}

static void pad_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const pad_job *j = arg;
  nk_walker w = j->rows;
  nk_walker_seek(&w, begin);
  const size_t es = nk_dtype_size((nrt_dtype)j->out->dtype);
  const int last = j->out->ndim - 1;
  const int64_t so = j->out->strides[last], si = j->in->strides[last];
  const int64_t n_out = j->out->sizes[last], n_in = j->in->sizes[last];
  for (int64_t r = begin; r < end; r++) {
    int64_t in_off = 0;
    for (int d = 0; d < last; d++) {
      int64_t i = d >= j->first ? pad_map(j->mode, w.idx[d], j->before[d], j->in->sizes[d]) : w.idx[d];
      in_off += i * j->in->strides[d];
    }
    char *o = (char *)j->out->data + w.off[0];
    const char *x = (const char *)j->in->data + in_off;
    for (int64_t c = 0; c < n_out; c++)
      memcpy(o + c * so, x + pad_map(j->mode, c, j->before[last], n_in) * si, es);
    nk_walker_next(&w);
  }
}

int nk_pad_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "pad", 2)) return -1;
  const nk_pad_params *p = (const nk_pad_params *)task->params;
  const nrt_operand *out = &task->operands[0], *in = &task->operands[1];
  if (p->mode < 0 || p->mode >= NK_PAD_MODE_COUNT || p->nd < 1 || p->nd > 3 ||
      out->ndim != in->ndim || out->ndim < p->nd || out->dtype != in->dtype) {
    nrt_exec_fail(ctx, "pad: expected a mode, 1..3 padded dims and operands of one dtype and rank");
    return -1;
  }
  pad_job job = {.out = out, .in = in, .mode = p->mode, .nd = p->nd, .first = out->ndim - p->nd};
  for (int d = 0; d < out->ndim; d++) {
    if (d < job.first) {
      if (out->sizes[d] != in->sizes[d]) {
        nrt_exec_fail(ctx, "pad: unpadded dim %d differs (%lld vs %lld)", d,
                      (long long)out->sizes[d], (long long)in->sizes[d]);
        return -1;
      }
      continue;
    }
    job.before[d] = p->before[d - job.first];
  }
  if (nk_numel(out) == 0) return 0;
  /* every output index of a padded dim must land inside the input */
  for (int d = job.first; d < out->ndim; d++) {
    for (int64_t o = 0; o < out->sizes[d]; o++) {
      int64_t i = in->sizes[d] > 0 ? pad_map(p->mode, o, job.before[d], in->sizes[d]) : -1;
      if (i < 0 || i >= in->sizes[d]) {
        nrt_exec_fail(ctx, "pad: output index %lld of dim %d maps to input index %lld, outside "
                           "[0, %lld)", (long long)o, d, (long long)i, (long long)in->sizes[d]);
        return -1;
      }
    }
  }
  job.rows.ndim = out->ndim - 1;
  job.rows.n_ops = 1;
  for (int d = 0; d < out->ndim - 1; d++) {
    job.rows.sizes[d] = out->sizes[d];
    job.rows.strides[0][d] = out->strides[d];
  }
  const int64_t cols = out->sizes[out->ndim - 1];
  nk_parallel_for(nk_numel(out) / cols, cols >= NK_GRAIN_ELEMENTWISE ? 1 : NK_GRAIN_ELEMENTWISE / cols,
                  pad_range, &job);
  return 0;
}
