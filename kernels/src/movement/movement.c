/* movement.c — NK_KERNEL_TRIANGLE (tril/triu), NK_KERNEL_PAD
 * (reflection/replication padding) and NK_KERNEL_PAD_BACKWARD: copies
 * whose source index is a function of the destination index, so each walks
 * the output row by row (rows split over the compute pool) and moves raw
 * element bytes; the pad's backward sums each input's preimage per plane.
 * cat, flip and roll need no kernel of their own: they are COPY launches
 * on narrowed views and negative-stride operands (ops_movement.cpp). */
#include <stdatomic.h>

#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "sort/sort_keys.h"
#include "common/validate.h"

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

/* Checks params and shapes (padded: the operand with the padded shape,
 * plain: the one with the input's) and fills job's mode, dims and before. */
static int pad_plan(const nrt_task *task, nrt_exec_ctx *ctx, const char *name,
                    const nrt_operand *padded, const nrt_operand *plain, pad_job *job) {
  const nk_pad_params *p = (const nk_pad_params *)task->params;
  if (p->mode < 0 || p->mode >= NK_PAD_MODE_COUNT || p->nd < 1 || p->nd > 3 ||
      padded->ndim != plain->ndim || padded->ndim < p->nd || padded->dtype != plain->dtype) {
    nrt_exec_fail(ctx, "%s: expected a mode, 1..3 padded dims and operands of one dtype and rank", name);
    return -1;
  }
  job->mode = p->mode;
  job->nd = p->nd;
  job->first = padded->ndim - p->nd;
  for (int d = 0; d < padded->ndim; d++) {
    if (d < job->first) {
      if (padded->sizes[d] != plain->sizes[d]) {
        nrt_exec_fail(ctx, "%s: unpadded dim %d differs (%lld vs %lld)", name, d,
                      (long long)padded->sizes[d], (long long)plain->sizes[d]);
        return -1;
      }
      continue;
    }
    job->before[d] = p->before[d - job->first];
  }
  if (nk_numel(padded) == 0) return 0;
  /* every padded index must land inside the input */
  for (int d = job->first; d < padded->ndim; d++) {
    for (int64_t o = 0; o < padded->sizes[d]; o++) {
      int64_t i = plain->sizes[d] > 0 ? pad_map(p->mode, o, job->before[d], plain->sizes[d]) : -1;
      if (i < 0 || i >= plain->sizes[d]) {
        nrt_exec_fail(ctx, "%s: output index %lld of dim %d maps to input index %lld, outside "
                           "[0, %lld)", name, (long long)o, d, (long long)i, (long long)plain->sizes[d]);
        return -1;
      }
    }
  }
  return 0;
}

int nk_pad_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "pad", 2)) return -1;
  const nrt_operand *out = &task->operands[0], *in = &task->operands[1];
  pad_job job = {.out = out, .in = in};
  if (pad_plan(task, ctx, "pad", out, in, &job)) return -1;
  if (nk_numel(out) == 0) return 0;
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

/* ------------------------------------------------------------ pad backward */

/* One plane (the padded dims at one index of the others) per step: its
 * gradients accumulate in a double scratch, then are stored once, so the
 * sums do not depend on how planes are split over threads. */
typedef struct padb_job {
  pad_job pad; /* .out = grad_in, .in = grad_out */
  int64_t osz[3], isz[3], ost[3], ist[3], before[3];
  nk_walker planes; /* dims before the padded ones: grad_in, grad_out */
  int64_t plane_numel;
  atomic_int oom;
} padb_job;

static void padb_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  padb_job *j = arg;
  const nrt_dtype t = (nrt_dtype)j->pad.out->dtype;
  double *acc = malloc((size_t)j->plane_numel * sizeof *acc);
  if (!acc) { atomic_store(&j->oom, 1); return; }
  nk_walker w = j->planes;
  nk_walker_seek(&w, begin);
  const int mode = j->pad.mode;
  for (int64_t pl = begin; pl < end; pl++) {
    memset(acc, 0, (size_t)j->plane_numel * sizeof *acc);
    const char *go = (const char *)j->pad.in->data + w.off[1];
    for (int64_t a = 0; a < j->osz[0]; a++) {
      int64_t ia = pad_map(mode, a, j->before[0], j->isz[0]);
      for (int64_t b = 0; b < j->osz[1]; b++) {
        int64_t ib = pad_map(mode, b, j->before[1], j->isz[1]);
        const char *row = go + a * j->ost[0] + b * j->ost[1];
        double *arow = acc + (ia * j->isz[1] + ib) * j->isz[2];
        for (int64_t c = 0; c < j->osz[2]; c++)
          arow[pad_map(mode, c, j->before[2], j->isz[2])] += nk_load_f64(t, row + c * j->ost[2]);
      }
    }
    char *gi = (char *)j->pad.out->data + w.off[0];
    int64_t k = 0;
    for (int64_t a = 0; a < j->isz[0]; a++)
      for (int64_t b = 0; b < j->isz[1]; b++)
        for (int64_t c = 0; c < j->isz[2]; c++)
          nk_store_f64(t, gi + a * j->ist[0] + b * j->ist[1] + c * j->ist[2], acc[k++]);
    nk_walker_next(&w);
  }
  free(acc);
}

int nk_pad_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "pad_backward", 2)) return -1;
  const nrt_operand *gin = &task->operands[0], *gout = &task->operands[1];
  padb_job job = {.pad = {.out = gin, .in = gout}};
  if (pad_plan(task, ctx, "pad_backward", gout, gin, &job.pad)) return -1;
  if (nk_numel(gin) == 0) return 0;
  /* the padded dims, right-aligned into 3 (missing ones of size 1) */
  for (int k = 0; k < 3; k++) {
    int d = gin->ndim - 3 + k;
    int padded = d >= job.pad.first;
    job.osz[k] = padded ? gout->sizes[d] : 1;
    job.isz[k] = padded ? gin->sizes[d] : 1;
    job.ost[k] = padded ? gout->strides[d] : 0;
    job.ist[k] = padded ? gin->strides[d] : 0;
    job.before[k] = padded ? job.pad.before[d] : 0;
  }
  job.plane_numel = job.isz[0] * job.isz[1] * job.isz[2];
  job.planes.ndim = job.pad.first;
  job.planes.n_ops = 2;
  for (int d = 0; d < job.pad.first; d++) {
    job.planes.sizes[d] = gin->sizes[d];
    job.planes.strides[0][d] = gin->strides[d];
    job.planes.strides[1][d] = gout->strides[d];
  }
  atomic_init(&job.oom, 0);
  const int64_t planes = nk_numel(gin) / job.plane_numel;
  const int64_t work = nk_numel(gout) / (planes ? planes : 1) + job.plane_numel;
  nk_parallel_for(planes, work >= 4096 ? 1 : 4096 / work, padb_range, &job);
  if (atomic_load(&job.oom)) {
    nrt_exec_fail(ctx, "pad_backward: out of host memory for a plane of %lld", (long long)job.plane_numel);
    return -1;
  }
  return 0;
}
