/* sort.c — NK_KERNEL_SORT (sort, argsort, topk), NK_KERNEL_SEARCHSORTED
 * (searchsorted, bucketize) and NK_KERNEL_UNIQUE (unique,
 * unique_consecutive).
 *
 * Sort: each slice along `dim` becomes (key, index) pairs (sort_keys.h),
 * sorted stably by a merge sort; values are gathered back as raw bytes
 * (NaN payloads and -0.0 survive), indices written as int64.  Slices are
 * split over the compute pool, each chunk with its own scratch, so results
 * never depend on the thread count.  topk takes the first k of the same
 * sort (largest = descending).  The order of equal keys is stable, or, on
 * request, exactly the CPU's (sort_keys.h replays libstdc++'s algorithms).
 *
 * Searchsorted: a binary search per value with ATen's exact comparisons
 * (lower bound: advance while !(b >= v); upper: while !(b > v)), in double
 * for floating dtypes and int64 for the others, through the sorter when one
 * is given (every sorter index is checked).
 *
 * Unique: one pass over the run-ordered input on one thread (the output
 * size is data dependent; the glue reads the run count back).  Unique rows
 * (unique with dim): a stable merge sort of row indices, comparing rows by
 * their elements' sort keys, then the same run pass over whole rows. */
#include <stdatomic.h>

#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "sort/sort_keys.h"
#include "common/validate.h"

/* ------------------------------------------------------------------ sort */

typedef struct sort_job {
  const nrt_operand *values, *indices, *in;
  int dim, descending, order;
  int64_t n, k;
  nk_walker outer; /* the dims other than dim; operands values, indices, in */
  atomic_int oom;
} sort_job;

static void sort_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  sort_job *j = arg;
  const int64_t n = j->n, k = j->k;
  const nrt_dtype t = (nrt_dtype)j->in->dtype;
  const size_t es = nk_dtype_size(t);
  nk_pair *pairs = malloc((size_t)(2 * n) * sizeof *pairs);
  if (!pairs) { atomic_store(&j->oom, 1); return; }
  const int64_t sv = j->values->strides[j->dim], si = j->indices->strides[j->dim],
                sx = j->in->strides[j->dim];
  nk_walker w = j->outer;
  nk_walker_seek(&w, begin);
  for (int64_t s = begin; s < end; s++) {
    const char *x = (const char *)j->in->data + w.off[2];
    for (int64_t e = 0; e < n; e++) {
      uint64_t key = nk_sort_key(t, x + e * sx);
      pairs[e].key = j->descending ? ~key : key;
      pairs[e].index = e;
    }
    int64_t pick = -1; /* a selection's position, else the first k are written */
    switch (j->order) {
    case NK_SORT_CPU_SORT: nk_sort_pairs_unstable(pairs, n); break;
    case NK_SORT_CPU_KTH:
      nk_cpu_quickselect(pairs, n, k - 1);
      pick = k - 1;
      break;
    case NK_SORT_CPU_MODE: { /* first longest run; the index of its last element */
      nk_sort_pairs_unstable(pairs, n);
      int64_t run = 0, best = 0;
      for (int64_t e = 0; e < n; e++) {
        run++;
        if (e == n - 1 || pairs[e].key != pairs[e + 1].key) {
          if (run > best) { best = run; pick = e; }
          run = 0;
        }
      }
      break;
    }
    case NK_SORT_MEDIAN:
      nk_sort_pairs(pairs, pairs + n, n);
      pick = (n - 1) / 2;
      if (nk_dtype_is_floating(t) && isnan(nk_load_f64(t, x + pairs[n - 1].index * sx))) {
        pick = n - 1; /* NaNs sort last, in index order: find the first */
        while (pick > 0 && isnan(nk_load_f64(t, x + pairs[pick - 1].index * sx))) pick--;
      }
      break;
    case NK_SORT_NANMEDIAN: { /* NaNs sort last: the median of the rest */
      nk_sort_pairs(pairs, pairs + n, n);
      int64_t valid = n;
      if (nk_dtype_is_floating(t))
        while (valid > 0 && isnan(nk_load_f64(t, x + pairs[valid - 1].index * sx))) valid--;
      pick = valid > 0 ? (valid - 1) / 2 : 0;
      break;
    }
    case NK_SORT_CPU_TOPK: case NK_SORT_CPU_TOPK_UNSORTED:
      if (k * 64 <= n) {
        nk_partial_sort(pairs, k, n);
      } else if (k > 0) {
        nk_nth_element(pairs, k - 1, n);
        if (j->order == NK_SORT_CPU_TOPK) nk_sort_pairs_unstable(pairs, k - 1);
      }
      break;
    default: nk_sort_pairs(pairs, pairs + n, n); break;
    }
    char *v = (char *)j->values->data + w.off[0];
    char *ix = (char *)j->indices->data + w.off[1];
    if (pick >= 0) {
      memcpy(v, x + pairs[pick].index * sx, es);
      nk_write_i64(ix, pairs[pick].index);
    } else {
      for (int64_t e = 0; e < k; e++) {
        memcpy(v + e * sv, x + pairs[e].index * sx, es);
        nk_write_i64(ix + e * si, pairs[e].index);
      }
    }
    nk_walker_next(&w);
  }
  free(pairs);
}

int nk_sort_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "sort", 3)) return -1;
  const nk_sort_params *p = (const nk_sort_params *)task->params;
  const nrt_operand *values = &task->operands[0], *indices = &task->operands[1],
                    *in = &task->operands[2];
  const int nd = in->ndim == 0 ? 1 : in->ndim; /* a 0-dim tensor is one slice of 1 */
  if (p->dim < 0 || p->dim >= nd) {
    nrt_exec_fail(ctx, "sort: dim %d out of range for %d dims", (int)p->dim, (int)in->ndim);
    return -1;
  }
  const int64_t n = in->ndim ? in->sizes[p->dim] : 1;
  const int select = p->order == NK_SORT_CPU_KTH || p->order == NK_SORT_MEDIAN ||
                     p->order == NK_SORT_NANMEDIAN ||
                     p->order == NK_SORT_CPU_MODE;
  if (p->k < (p->order == NK_SORT_CPU_KTH) || p->k > n) {
    nrt_exec_fail(ctx, "sort: k %lld out of range [0, %lld]", (long long)p->k, (long long)n);
    return -1;
  }
  if (p->order < 0 || p->order >= NK_SORT_ORDER_COUNT) {
    nrt_exec_fail(ctx, "sort: unknown order %d", (int)p->order);
    return -1;
  }
  if (indices->dtype != NRT_INT64 || values->dtype != in->dtype) {
    nrt_exec_fail(ctx, "sort: values must have the input's dtype and indices int64");
    return -1;
  }
  for (int op = 0; op < 2; op++) {
    const nrt_operand *o = &task->operands[op];
    int ok = o->ndim == in->ndim;
    for (int d = 0; ok && d < in->ndim; d++)
      ok = o->sizes[d] == (d == p->dim ? (select ? 1 : p->k) : in->sizes[d]);
    if (!ok) {
      nrt_exec_fail(ctx, "sort: operand %d must have the input's shape with %lld along dim %d",
                    op, (long long)(select ? 1 : p->k), (int)p->dim);
      return -1;
    }
  }
  if ((!select && p->k == 0) || nk_numel(in) == 0) return 0;

  sort_job job = {.values = values, .indices = indices, .in = in, .dim = p->dim,
                  .descending = p->descending != 0, .order = p->order,
                  .n = n, .k = p->k};
  nk_walker *w = &job.outer;
  w->n_ops = 3;
  for (int d = 0; d < in->ndim; d++) {
    if (d == p->dim) continue;
    w->sizes[w->ndim] = in->sizes[d];
    for (int op = 0; op < 3; op++) w->strides[op][w->ndim] = task->operands[op].strides[d];
    w->ndim++;
  }
  atomic_init(&job.oom, 0);
  int64_t slices = nk_numel(in) / n;
  int64_t grain = n >= 4096 ? 1 : 4096 / n;
  nk_parallel_for(slices, grain, sort_range, &job);
  if (atomic_load(&job.oom)) {
    nrt_exec_fail(ctx, "sort: out of host memory for %lld-element scratch", (long long)n);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------- searchsorted */

typedef struct search_job {
  const nrt_operand *out, *values, *bounds, *sorter;
  int right, wide_out, row_bounds;
  int64_t m;         /* sequence length */
  int64_t bs, ss;    /* byte strides along the sequence (boundaries, sorter) */
  nk_walker w;       /* over values' shape: out, values, boundaries row, sorter row */
  atomic_int bad_sorter;
} search_job;

NK_INLINE int64_t search_one(const search_job *j, const char *b, const char *srt, const void *v,
                             int *bad) {
  const nrt_dtype t = (nrt_dtype)j->values->dtype;
  const int fp = nk_dtype_is_floating(t);
  const double vf = fp ? nk_load_f64(t, v) : 0;
  const int64_t vi = fp ? 0 : nk_load_integral(t, v);
  int64_t lo = 0, hi = j->m;
  while (lo < hi) {
    int64_t mid = lo + ((hi - lo) >> 1), at = mid;
    if (srt) {
      at = nk_read_i64(srt + mid * j->ss);
      if (at < 0 || at >= j->m) { *bad = 1; return 0; }
    }
    const char *bp = b + at * j->bs;
    int advance;
    if (fp) {
      double bv = nk_load_f64(t, bp);
      advance = j->right ? !(bv > vf) : !(bv >= vf);
    } else {
      int64_t bv = nk_load_integral(t, bp);
      advance = j->right ? !(bv > vi) : !(bv >= vi);
    }
    if (advance) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void search_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  search_job *j = arg;
  nk_walker w = j->w;
  nk_walker_seek(&w, begin);
  int bad = 0;
  for (int64_t i = begin; i < end && !bad; i++) {
    const char *b = (const char *)j->bounds->data + w.off[2];
    const char *srt = j->sorter ? (const char *)j->sorter->data + w.off[3] : NULL;
    int64_t pos = search_one(j, b, srt, (const char *)j->values->data + w.off[1], &bad);
    char *o = (char *)j->out->data + w.off[0];
    if (j->wide_out) nk_write_i64(o, pos);
    else nk_write_i32(o, (int32_t)pos);
    nk_walker_next(&w);
  }
  if (bad) atomic_store(&j->bad_sorter, 1);
}

int nk_searchsorted_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const int nops = task->n_operands == 4 ? 4 : 3;
  if (nk_check_operands(task, ctx, "searchsorted", nops)) return -1;
  const nk_searchsorted_params *p = (const nk_searchsorted_params *)task->params;
  const nrt_operand *out = &task->operands[0], *values = &task->operands[1],
                    *bounds = &task->operands[2], *sorter = nops == 4 ? &task->operands[3] : NULL;
  if (out->dtype != NRT_INT64 && out->dtype != NRT_INT32) {
    nrt_exec_fail(ctx, "searchsorted: out must be int64 or int32");
    return -1;
  }
  if (bounds->dtype != values->dtype) {
    nrt_exec_fail(ctx, "searchsorted: boundaries and values must share a dtype");
    return -1;
  }
  int ok = out->ndim == values->ndim && bounds->ndim >= 1;
  for (int d = 0; ok && d < out->ndim; d++) ok = out->sizes[d] == values->sizes[d];
  const int row_bounds = bounds->ndim > 1;
  if (ok && row_bounds) {
    ok = bounds->ndim == values->ndim;
    for (int d = 0; ok && d < values->ndim - 1; d++) ok = bounds->sizes[d] == values->sizes[d];
  }
  if (ok && sorter) {
    ok = sorter->dtype == NRT_INT64 && sorter->ndim == bounds->ndim;
    for (int d = 0; ok && d < bounds->ndim; d++) ok = sorter->sizes[d] == bounds->sizes[d];
  }
  if (!ok) {
    nrt_exec_fail(ctx, "searchsorted: operand shapes do not fit (out = values' shape; boundaries "
                       "1-d or values' leading dims; sorter int64 of boundaries' shape)");
    return -1;
  }
  const int64_t numel = nk_numel(values);
  if (numel == 0) return 0;
  search_job job = {.out = out, .values = values, .bounds = bounds, .sorter = sorter,
                    .right = p->right != 0, .wide_out = out->dtype == NRT_INT64,
                    .row_bounds = row_bounds};
  job.m = bounds->sizes[bounds->ndim - 1];
  job.bs = bounds->strides[bounds->ndim - 1];
  job.ss = sorter ? sorter->strides[sorter->ndim - 1] : 0;
  nk_walker *w = &job.w;
  w->ndim = values->ndim;
  w->n_ops = 4;
  for (int d = 0; d < values->ndim; d++) {
    w->sizes[d] = values->sizes[d];
    w->strides[0][d] = out->strides[d];
    w->strides[1][d] = values->strides[d];
    int leading = row_bounds && d < values->ndim - 1;
    w->strides[2][d] = leading ? bounds->strides[d] : 0;
    w->strides[3][d] = leading && sorter ? sorter->strides[d] : 0;
  }
  atomic_init(&job.bad_sorter, 0);
  nk_parallel_for(numel, 4096, search_range, &job);
  if (atomic_load(&job.bad_sorter)) {
    nrt_exec_fail(ctx, "searchsorted: sorter index out of range [0, %lld)", (long long)job.m);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- unique */

NK_INLINE int same_value(nrt_dtype t, const void *a, const void *b) {
  switch (nk_dtype_class(t)) {
  case NK_CLASS_FLOAT: return nk_load_f32(t, a) == nk_load_f32(t, b);
  case NK_CLASS_DOUBLE: return nk_read_f64(a) == nk_read_f64(b);
  default: return nk_load_integral(t, a) == nk_load_integral(t, b);
  }
}

int nk_unique_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const int nops = task->n_operands == 6 ? 6 : 5;
  if (nk_check_operands(task, ctx, "unique", nops)) return -1;
  const nrt_operand *uniq = &task->operands[0], *inverse = &task->operands[1],
                    *counts = &task->operands[2], *num = &task->operands[3],
                    *in = &task->operands[4], *perm = nops == 6 ? &task->operands[5] : NULL;
  const int64_t n = in->ndim == 1 ? in->sizes[0] : -1;
  int ok = n >= 0 && uniq->ndim == 1 && uniq->sizes[0] == n && uniq->dtype == in->dtype &&
           inverse->ndim == 1 && inverse->sizes[0] == n && inverse->dtype == NRT_INT64 &&
           counts->ndim == 1 && counts->sizes[0] == n && counts->dtype == NRT_INT64 &&
           num->ndim == 0 && num->dtype == NRT_INT64;
  if (ok && perm) ok = perm->ndim == 1 && perm->sizes[0] == n && perm->dtype == NRT_INT64;
  if (!ok) {
    nrt_exec_fail(ctx, "unique: expected 1-d operands of one length (int64 inverse, counts, "
                       "perm) and a 0-dim int64 count");
    return -1;
  }
  const nrt_dtype t = (nrt_dtype)in->dtype;
  const size_t es = nk_dtype_size(t);
  const char *x = in->data;
  const int64_t sx = in->strides[0];
  int64_t runs = 0, run_start = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || !same_value(t, x + i * sx, x + (i - 1) * sx)) {
      if (i > 0) nk_write_i64((char *)counts->data + (runs - 1) * counts->strides[0], i - run_start);
      memcpy((char *)uniq->data + runs * uniq->strides[0], x + i * sx, es);
      runs++;
      run_start = i;
    }
    int64_t at = i;
    if (perm) {
      at = nk_read_i64((const char *)perm->data + i * perm->strides[0]);
      if (at < 0 || at >= n) {
        nrt_exec_fail(ctx, "unique: permutation index %lld out of range [0, %lld)", (long long)at,
                      (long long)n);
        return -1;
      }
    }
    nk_write_i64((char *)inverse->data + at * inverse->strides[0], runs - 1);
  }
  if (n > 0) nk_write_i64((char *)counts->data + (runs - 1) * counts->strides[0], n - run_start);
  nk_write_i64(num->data, runs);
  return 0;
}

/* ----------------------------------------------------------- unique rows */

typedef struct rows_ctx {
  const char *base;
  int64_t rs, cs, m;
  nrt_dtype t;
} rows_ctx;

/* -1, 0, 1: row a against row b, lexicographically by sort key */
static int row_cmp(const rows_ctx *c, int64_t a, int64_t b) {
  for (int64_t j = 0; j < c->m; j++) {
    uint64_t ka = nk_sort_key(c->t, c->base + a * c->rs + j * c->cs);
    uint64_t kb = nk_sort_key(c->t, c->base + b * c->rs + j * c->cs);
    if (ka != kb) return ka < kb ? -1 : 1;
  }
  return 0;
}

static int row_equal(const rows_ctx *c, int64_t a, int64_t b) {
  for (int64_t j = 0; j < c->m; j++)
    if (!same_value(c->t, c->base + a * c->rs + j * c->cs, c->base + b * c->rs + j * c->cs)) return 0;
  return 1;
}

/* stable bottom-up merge sort of row indices */
static void sort_rows(const rows_ctx *c, int64_t *a, int64_t *tmp, int64_t n) {
  int64_t *src = a, *dst = tmp;
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) dst[o++] = row_cmp(c, src[j], src[i]) < 0 ? src[j++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    int64_t *t = src; src = dst; dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

int nk_unique_rows_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "unique_rows", 5)) return -1;
  const nk_unique_rows_params *p = (const nk_unique_rows_params *)task->params;
  const nrt_operand *uniq = &task->operands[0], *inverse = &task->operands[1],
                    *counts = &task->operands[2], *num = &task->operands[3], *in = &task->operands[4];
  const int64_t n = in->ndim == 2 ? in->sizes[0] : -1, m = in->ndim == 2 ? in->sizes[1] : -1;
  int ok = n >= 0 && uniq->ndim == 2 && uniq->sizes[0] == n && uniq->sizes[1] == m &&
           uniq->dtype == in->dtype && inverse->ndim == 1 && inverse->sizes[0] == n &&
           inverse->dtype == NRT_INT64 && counts->ndim == 1 && counts->sizes[0] == n &&
           counts->dtype == NRT_INT64 && num->ndim == 0 && num->dtype == NRT_INT64;
  if (!ok) {
    nrt_exec_fail(ctx, "unique_rows: expected an (n, m) input and output, int64 inverse and counts "
                       "of n, a 0-dim int64 count");
    return -1;
  }
  rows_ctx c = {in->data, in->strides[0], in->strides[1], m, (nrt_dtype)in->dtype};
  int64_t *order = malloc((size_t)(2 * (n ? n : 1)) * sizeof *order);
  if (!order) {
    nrt_exec_fail(ctx, "unique_rows: out of host memory for %lld rows", (long long)n);
    return -1;
  }
  for (int64_t r = 0; r < n; r++) order[r] = r;
  if (p->sort) sort_rows(&c, order, order + n, n);
  const size_t es = nk_dtype_size(c.t);
  int64_t runs = 0, run_start = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || !row_equal(&c, order[i], order[i - 1])) {
      if (i > 0) nk_write_i64((char *)counts->data + (runs - 1) * counts->strides[0], i - run_start);
      char *dst = (char *)uniq->data + runs * uniq->strides[0];
      const char *src = c.base + order[i] * c.rs;
      for (int64_t j = 0; j < m; j++) memcpy(dst + j * uniq->strides[1], src + j * c.cs, es);
      runs++;
      run_start = i;
    }
    nk_write_i64((char *)inverse->data + order[i] * inverse->strides[0], runs - 1);
  }
  if (n > 0) nk_write_i64((char *)counts->data + (runs - 1) * counts->strides[0], n - run_start);
  nk_write_i64(num->data, runs);
  free(order);
  return 0;
}
