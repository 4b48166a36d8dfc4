/* tail_embedding_bag.c — NK_KERNEL_EMBEDDING_BAG (see neuron_kernels.h).
 *
 * Why this shape: the forward parallelises over bags (each bag's output
 * row is written by one thread); the backward is a scatter into weight
 * rows, so it parallelises over column ranges instead, each thread walking
 * every index in order for its columns: no atomics, and the sums run in the
 * same order whatever the thread count.  Indices, offsets and bag numbers
 * are validated in a serial pre-pass before any row is touched; a bad one
 * fails the task naming the index and the bound. */
#include <stdlib.h>
#include <string.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

typedef struct eb_job {
  const nrt_task *task;
  const nk_embedding_bag_params *p;
  int64_t V, D, n, B;
  int is_double;
  const int64_t *counts; /* scale_grad_by_freq: occurrences of each row */
} eb_job;

#define OP(k) (&j->task->operands[k])
#define E1(o, i) ((char *)(o)->data + (i) * (o)->strides[0])
#define E2(o, i, d) ((char *)(o)->data + (i) * (o)->strides[0] + (d) * (o)->strides[1])

static int64_t ld_i(const nrt_operand *o, int64_t i) { return nk_load_i64((nrt_dtype)o->dtype, E1(o, i)); }

/* bag b's index range */
static void eb_bounds(const eb_job *j, const nrt_operand *offsets, int64_t b, int64_t *start, int64_t *end) {
  *start = ld_i(offsets, b);
  *end = b + 1 < offsets->sizes[0] ? ld_i(offsets, b + 1) : j->n;
  if (*end < *start) *end = *start; /* decreasing offsets: an empty bag */
}

static void eb_forward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const eb_job *j = arg;
  const nrt_operand *out = OP(0), *o2b = OP(1), *bag_size = OP(2), *maxi = OP(3), *w = OP(4), *idx = OP(5),
                    *off = OP(6), *psw = j->task->n_operands > 7 ? OP(7) : NULL;
  const nrt_dtype tw = (nrt_dtype)w->dtype, to = (nrt_dtype)out->dtype;
  const int mode = j->p->mode;
  for (int64_t b = begin; b < end; b++) {
    int64_t s, e, count = 0;
    eb_bounds(j, off, b, &s, &e);
    for (int64_t i = s; i < e; i++) {
      nk_store_i64(NRT_INT64, E1(o2b, i), b);
      if (ld_i(idx, i) != j->p->padding_idx) count++;
    }
    nk_store_i64(NRT_INT64, E1(bag_size, b), count);
    for (int64_t d = 0; d < j->D; d++) {
      double acc = 0;
      float accf = 0;
      int64_t arg_row = -1;
      for (int64_t i = s; i < e; i++) {
        const int64_t r = ld_i(idx, i);
        if (r == j->p->padding_idx) continue;
        const double v = nk_load_f64(tw, E2(w, r, d));
        if (mode == NK_EMBAG_MAX) {
          if (arg_row < 0 || v > acc) { acc = v; arg_row = r; }
        } else {
          const double sw = psw ? nk_load_f64((nrt_dtype)psw->dtype, E1(psw, i)) : 1.0;
          if (j->is_double) acc += psw ? sw * v : v;
          else accf += psw ? (float)sw * (float)v : (float)v;
        }
      }
      double res = mode == NK_EMBAG_MAX || j->is_double ? acc : (double)accf;
      if (mode == NK_EMBAG_MEAN && count > 0)
        res = j->is_double ? res / (double)count : (double)((float)res / (float)count);
      if (mode == NK_EMBAG_MAX) nk_store_i64(NRT_INT64, E2(maxi, b, d), arg_row);
      nk_store_f64(to, E2(out, b, d), res);
    }
  }
}

static void eb_dense_backward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const eb_job *j = arg;
  const nrt_operand *gw = OP(0), *g = OP(1), *idx = OP(2), *o2b = OP(3), *bag_size = OP(4), *maxi = OP(5),
                    *psw = j->task->n_operands > 6 ? OP(6) : NULL;
  const nrt_dtype tg = (nrt_dtype)gw->dtype, tgr = (nrt_dtype)g->dtype;
  for (int64_t r = 0; r < j->V; r++)
    for (int64_t d = begin; d < end; d++) nk_store_f64(tg, E2(gw, r, d), 0);
  if (j->p->mode == NK_EMBAG_MAX) {
    for (int64_t b = 0; b < j->B; b++)
      for (int64_t d = begin; d < end; d++) {
        const int64_t r = nk_load_i64(NRT_INT64, E2(maxi, b, d));
        if (r < 0) continue;
        char *dst = E2(gw, r, d);
        nk_store_f64(tg, dst, nk_load_f64(tg, dst) + nk_load_f64(tgr, E2(g, b, d)));
      }
    return;
  }
  for (int64_t i = 0; i < j->n; i++) {
    const int64_t r = ld_i(idx, i), b = nk_load_i64(NRT_INT64, E1(o2b, i));
    if (r == j->p->padding_idx || b < 0) continue;
    double scale = psw ? nk_load_f64((nrt_dtype)psw->dtype, E1(psw, i)) : 1.0;
    if (j->p->mode == NK_EMBAG_MEAN) {
      const int64_t c = nk_load_i64(NRT_INT64, E1(bag_size, b));
      if (c > 0) scale /= (double)c;
    }
    if (j->counts) scale /= (double)j->counts[r];
    for (int64_t d = begin; d < end; d++) {
      char *dst = E2(gw, r, d);
      const double gv = nk_load_f64(tgr, E2(g, b, d));
      if (j->is_double) nk_store_f64(tg, dst, nk_load_f64(tg, dst) + gv * scale);
      else nk_store_f32(tg, dst, nk_load_f32(tg, dst) + (float)gv * (float)scale);
    }
  }
}

static void eb_psw_backward_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const eb_job *j = arg;
  const nrt_operand *out = OP(0), *g = OP(1), *w = OP(2), *idx = OP(3), *o2b = OP(4);
  for (int64_t i = begin; i < end; i++) {
    const int64_t r = ld_i(idx, i), b = nk_load_i64(NRT_INT64, E1(o2b, i));
    double acc = 0;
    float accf = 0;
    if (r != j->p->padding_idx && b >= 0) {
      for (int64_t d = 0; d < j->D; d++) {
        const double x = nk_load_f64((nrt_dtype)g->dtype, E2(g, b, d)), y = nk_load_f64((nrt_dtype)w->dtype, E2(w, r, d));
        if (j->is_double) acc += x * y;
        else accf += (float)x * (float)y;
      }
    }
    nk_store_f64((nrt_dtype)out->dtype, E1(out, i), j->is_double ? acc : (double)accf);
  }
}

static int eb_cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int is_index_dtype(int32_t t) { return t == NRT_INT32 || t == NRT_INT64; }

/* every index in [0, V) (or padding) and, for offsets, monotonic within [0, n] */
static int eb_check_indices(nrt_exec_ctx *ctx, const nrt_operand *idx, int64_t V) {
  for (int64_t i = 0; i < idx->sizes[0]; i++) {
    const int64_t r = ld_i(idx, i);
    if (r < 0 || r >= V) {
      nrt_exec_fail(ctx, "embedding_bag: index %lld out of range [0, %lld) at position %lld", (long long)r,
                    (long long)V, (long long)i);
      return -1;
    }
  }
  return 0;
}

int nk_embedding_bag_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_embedding_bag_params *p = (const nk_embedding_bag_params *)task->params;
  if (p->op < 0 || p->op >= NK_EMBAG_OP_COUNT || p->mode < NK_EMBAG_SUM || p->mode > NK_EMBAG_MAX) {
    nrt_exec_fail(ctx, "embedding_bag: unknown op %d or mode %d", (int)p->op, (int)p->mode);
    return -1;
  }
  static const int base_ops[NK_EMBAG_OP_COUNT] = {7, 6, 5};
  const int n_ops = task->n_operands, base = base_ops[p->op];
  if (n_ops != base && !(p->op != NK_EMBAG_PSW_BACKWARD && n_ops == base + 1)) {
    nrt_exec_fail(ctx, "embedding_bag: %d operands, expected %d", n_ops, base);
    return -1;
  }
  if (nk_check_operands(task, ctx, "embedding_bag", n_ops)) return -1;
  const nrt_operand *o = task->operands;
  eb_job jb = {task, p, 0, 0, 0, 0, 0, NULL};
  eb_job *j = &jb;
  const nrt_operand *weight = NULL, *idx, *o2b = NULL, *grad = NULL, *psw = NULL, *out = &o[0];
  switch (p->op) {
  case NK_EMBAG_FORWARD: weight = &o[4]; idx = &o[5]; o2b = &o[1]; psw = n_ops > 7 ? &o[7] : NULL; break;
  case NK_EMBAG_DENSE_BACKWARD: idx = &o[2]; o2b = &o[3]; grad = &o[1]; psw = n_ops > 6 ? &o[6] : NULL; break;
  default: weight = &o[2]; idx = &o[3]; o2b = &o[4]; grad = &o[1]; break;
  }
  const nrt_operand *rows = p->op == NK_EMBAG_DENSE_BACKWARD ? out : weight;
  int ok = rows->ndim == 2 && idx->ndim == 1 && is_index_dtype(idx->dtype) && o2b->ndim == 1 &&
           o2b->sizes[0] == idx->sizes[0] && o2b->dtype == NRT_INT64;
  if (ok) {
    j->V = rows->sizes[0];
    j->D = rows->sizes[1];
    j->n = idx->sizes[0];
    j->is_double = rows->dtype == NRT_FLOAT64;
    ok = nk_dtype_is_floating((nrt_dtype)rows->dtype) && (!psw || (psw->ndim == 1 && psw->sizes[0] == j->n));
  }
  if (ok && p->op == NK_EMBAG_FORWARD) {
    const nrt_operand *off = &o[6];
    ok = off->ndim == 1 && off->dtype == idx->dtype && out->ndim == 2 && out->sizes[1] == j->D &&
         out->dtype == weight->dtype;
    if (ok) {
      j->B = out->sizes[0];
      ok = off->sizes[0] == j->B + (p->include_last_offset ? 1 : 0) && o[2].ndim == 1 && o[2].sizes[0] == j->B &&
           o[2].dtype == NRT_INT64 &&
           (p->mode != NK_EMBAG_MAX ||
            (o[3].ndim == 2 && o[3].sizes[0] == j->B && o[3].sizes[1] == j->D && o[3].dtype == NRT_INT64)) &&
           (!psw || p->mode == NK_EMBAG_SUM);
    }
    if (ok) {
      int64_t prev = 0;
      for (int64_t b = 0; b < off->sizes[0]; b++) {
        const int64_t v = ld_i(off, b);
        if (v < 0 || v > j->n) {
          nrt_exec_fail(ctx, "embedding_bag: offset %lld out of range [0, %lld] at position %lld", (long long)v,
                        (long long)j->n, (long long)b);
          return -1;
        }
        prev = v;
      }
      (void)prev;
    }
  } else if (ok) {
    ok = grad->ndim == 2 && grad->sizes[1] == j->D;
    if (ok) j->B = grad->sizes[0];
    if (ok && p->op == NK_EMBAG_DENSE_BACKWARD)
      ok = o[4].ndim == 1 && o[4].sizes[0] == j->B && o[4].dtype == NRT_INT64 &&
           (p->mode != NK_EMBAG_MAX ||
            (o[5].ndim == 2 && o[5].sizes[0] == j->B && o[5].sizes[1] == j->D && o[5].dtype == NRT_INT64));
    if (ok && p->op == NK_EMBAG_PSW_BACKWARD) ok = out->ndim == 1 && out->sizes[0] == j->n;
  }
  if (!ok) {
    nrt_exec_fail(ctx, "embedding_bag: operand shapes or dtypes do not match op %d mode %d", (int)p->op,
                  (int)p->mode);
    return -1;
  }
  if (eb_check_indices(ctx, idx, j->V)) return -1;
  if (p->op != NK_EMBAG_FORWARD) {
    for (int64_t i = 0; i < j->n; i++) {
      const int64_t b = nk_load_i64(NRT_INT64, E1(o2b, i));
      if (b < -1 || b >= j->B) {
        nrt_exec_fail(ctx, "embedding_bag: offset2bag %lld out of range [-1, %lld) at position %lld", (long long)b,
                      (long long)j->B, (long long)i);
        return -1;
      }
    }
  }
  if (p->op == NK_EMBAG_FORWARD) {
    for (int64_t i = 0; i < j->n; i++) nk_store_i64(NRT_INT64, E1(o2b, i), -1);
    if (j->B > 0) nk_parallel_for(j->B, 1 + 16384 / (j->D * (j->n / (j->B ? j->B : 1) + 1) + 1), eb_forward_range, j);
    return 0;
  }
  if (p->op == NK_EMBAG_DENSE_BACKWARD) {
    if (p->mode == NK_EMBAG_MAX) {
      for (int64_t b = 0; b < j->B; b++)
        for (int64_t d = 0; d < j->D; d++) {
          const int64_t r = nk_load_i64(NRT_INT64, E2(&o[5], b, d));
          if (r < -1 || r >= j->V) {
            nrt_exec_fail(ctx, "embedding_bag: max index %lld out of range [0, %lld)", (long long)r, (long long)j->V);
            return -1;
          }
        }
    }
    int64_t *counts = NULL;
    if (p->scale_grad_by_freq && p->mode != NK_EMBAG_MAX) {
      counts = calloc((size_t)(j->V ? j->V : 1), sizeof *counts);
      if (!counts) {
        nrt_exec_fail(ctx, "embedding_bag: out of host memory");
        return -1;
      }
      for (int64_t i = 0; i < j->n; i++) counts[ld_i(idx, i)]++;
      /* ATen CPU (_embedding_bag_dense_backward_cpu_sum_mean) divides the rows of
       * the g-th distinct index (ascending) by counts[sorted_indices[g]], not by
       * their own count; reproduced so gradients match the CPU's exactly. */
      int64_t *sorted = malloc((size_t)(j->n ? j->n : 1) * sizeof *sorted);
      int64_t *div = calloc((size_t)(j->V ? j->V : 1), sizeof *div);
      if (!sorted || !div) {
        free(sorted);
        free(div);
        free(counts);
        nrt_exec_fail(ctx, "embedding_bag: out of host memory");
        return -1;
      }
      for (int64_t i = 0; i < j->n; i++) sorted[i] = ld_i(idx, i);
      qsort(sorted, (size_t)j->n, sizeof *sorted, eb_cmp_i64);
      for (int64_t i = 0, g = 0; i < j->n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) div[sorted[i]] = counts[sorted[g++]];
      free(sorted);
      free(counts);
      counts = div;
      j->counts = counts;
    }
    if (j->D > 0) nk_parallel_for(j->D, 1 + 16384 / (j->n + j->V + 1), eb_dense_backward_range, j);
    free(counts);
    return 0;
  }
  if (j->n > 0) nk_parallel_for(j->n, 1 + 16384 / (j->D + 1), eb_psw_backward_range, j);
  return 0;
}
