/* nd_iter.c — dim ordering, coalescing, parallel split and the row walk. */
#include "common/nd_iter.h"

#include <string.h>

#include "common/half_rows.h"

/* The capture in progress on this thread (nk_capture_rows), or NULL. */
typedef struct capture {
  nrt_row_entry *entry;
  const nrt_task *task;
  bool taken, refused;
} capture;
static _Thread_local capture *capturing;

/* An nd_iter call a capture cannot record: run nothing, fail the capture. */
static bool refuse_while_capturing(void) {
  if (!capturing) return false;
  capturing->refused = true;
  return true;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

/* ATen's rule (TensorIterator::reorder_dimensions): dim a should be inner
 * to dim b when the first operand that tells them apart (ignoring stride-0,
 * broadcast, dims) has the smaller stride in a; on equal strides a larger
 * size in a moves b inner.  > 0: b should be inner; < 0: a; 0: no preference. */
static int compare_dims(const nrt_operand *ops, int n_ops, int a, int b) {
  for (int k = 0; k < n_ops; k++) {
    int64_t sa = abs64(ops[k].strides[a]), sb = abs64(ops[k].strides[b]);
    if (sa == 0 || sb == 0) continue;
    if (sa != sb) return sa < sb ? -1 : 1;
    if (ops[0].sizes[a] > ops[0].sizes[b]) return 1;
  }
  return 0;
}

void nk_nd_iter_init(nk_nd_iter *it, const nrt_operand *ops, int n_ops) {
  int nd = ops[0].ndim;
  it->n_operands = n_ops;
  it->numel = 1;
  for (int k = 0; k < n_ops; k++) it->data[k] = ops[k].data;

  /* perm[0] is the innermost dim; start from the given (row-major) order
   * and insertion-sort stably, as ATen does, so ties keep it. */
  int perm[NRT_MAX_DIMS];
  for (int d = 0; d < nd; d++) perm[d] = nd - 1 - d;
  for (int i = 1; i < nd; i++) {
    for (int j = i; j > 0; j--) {
      int c = compare_dims(ops, n_ops, perm[j - 1], perm[j]);
      if (c <= 0) break;
      int t = perm[j - 1]; perm[j - 1] = perm[j]; perm[j] = t;
    }
  }

  /* Coalesce from the inside out into inner-first arrays: dim `outer` joins
   * the current dim when, for every operand, stepping it equals stepping the
   * current dim past its end (or either has size 1). */
  int64_t sizes[NRT_MAX_DIMS], strides[NRT_MAX_DIMS][NRT_MAX_OPERANDS];
  int n = 0;
  sizes[0] = 1;
  for (int k = 0; k < n_ops; k++) strides[0][k] = 0;
  for (int i = 0; i < nd; i++) {
    int d = perm[i];
    int64_t size = ops[0].sizes[d];
    it->numel *= size;
    if (size == 1) continue;
    int joins = 1;
    if (sizes[n] != 1)
      for (int k = 0; k < n_ops; k++)
        if (strides[n][k] * sizes[n] != ops[k].strides[d]) { joins = 0; break; }
    if (!joins) {
      n++;
      sizes[n] = 1;
    }
    if (sizes[n] == 1)
      for (int k = 0; k < n_ops; k++) strides[n][k] = ops[k].strides[d];
    sizes[n] *= size;
  }
  it->ndim = n + 1;
  for (int i = 0; i < it->ndim; i++) {
    int d = it->ndim - 1 - i; /* innermost last */
    it->sizes[d] = sizes[i];
    for (int k = 0; k < n_ops; k++) it->strides[d][k] = strides[i][k];
  }
}

typedef struct run_args {
  const nk_nd_iter *it;
  nk_loop_fn loop;
  void *ctx;
} run_args;

/* Walks flat indices [begin, end): the first and last rows may be partial. */
static void run_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const run_args *a = arg;
  const nk_nd_iter *it = a->it;
  const int nd = it->ndim, n_ops = it->n_operands, inner = nd - 1;
  int64_t idx[NRT_MAX_DIMS];
  char *ptr[NRT_MAX_OPERANDS];
  for (int k = 0; k < n_ops; k++) ptr[k] = it->data[k];
  int64_t rest = begin;
  for (int d = inner; d >= 0; d--) {
    idx[d] = rest % it->sizes[d];
    rest /= it->sizes[d];
    for (int k = 0; k < n_ops; k++) ptr[k] += idx[d] * it->strides[d][k];
  }
  for (int64_t pos = begin; pos < end;) {
    int64_t n = it->sizes[inner] - idx[inner];
    if (n > end - pos) n = end - pos;
    a->loop(a->ctx, n, ptr, it->strides[inner]);
    pos += n;
    if (pos >= end) break;
    /* back to the row's start, then carry into the outer dims */
    for (int k = 0; k < n_ops; k++) ptr[k] -= idx[inner] * it->strides[inner][k];
    idx[inner] = 0;
    for (int d = inner - 1; d >= 0; d--) {
      for (int k = 0; k < n_ops; k++) ptr[k] += it->strides[d][k];
      if (++idx[d] < it->sizes[d]) break;
      for (int k = 0; k < n_ops; k++) ptr[k] -= it->sizes[d] * it->strides[d][k];
      idx[d] = 0;
    }
  }
}

void nk_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *arg) {
  if (n <= 0 || refuse_while_capturing()) return;
  if (n <= grain)
    fn(arg, 0, n, 0);
  else
    nrt_parallel_for(n, grain, fn, arg);
}

void nk_parallel_for_each(int64_t n, nrt_range_fn fn, void *arg) {
  if (n <= 0 || refuse_while_capturing()) return;
  nrt_parallel_for_each(n, fn, arg);
}

void nk_nd_iter_run(const nk_nd_iter *it, int64_t grain, nk_loop_fn loop, void *ctx) {
  if (refuse_while_capturing()) return;
  run_args a = {it, loop, ctx};
  nk_parallel_for(it->numel, grain, run_range, &a);
}

void nk_for_each(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *ctx) {
  nk_nd_iter it;
  nk_nd_iter_init(&it, operands, n_operands);
  nk_nd_iter_run(&it, NK_GRAIN_ELEMENTWISE, loop, ctx);
}

/* ------------------------------------------------------------ float rows */

typedef struct float_rows {
  nk_loop_fn loop;
  nk_raw_row_fn raw;
  void *ctx;
  int n_operands;
  bool any_half; /* some operand is 16-bit: else rows go straight to loop */
  nrt_dtype dtype[NK_FLOAT_MAX_OPERANDS];
} float_rows;

static bool is_half(nrt_dtype t) { return t == NRT_FLOAT16 || t == NRT_BFLOAT16; }

static void float_rows_loop(void *arg, int64_t n, char *const *data, const int64_t *s) {
  const float_rows *f = arg;
  const int n_ops = f->n_operands;
  if (!f->any_half) {
    f->loop(f->ctx, n, data, s);
    return;
  }
  if (f->raw && f->raw(f->ctx, n, data, s)) return;
  const nk_half_fns *h = nk_half_pick();
  float buf[NK_FLOAT_MAX_OPERANDS][NK_FLOAT_CHUNK];
  char *cd[NK_FLOAT_MAX_OPERANDS];
  int64_t cs[NK_FLOAT_MAX_OPERANDS];
  for (int k = 0; k < n_ops; k++)
    cs[k] = !is_half(f->dtype[k]) ? s[k] : s[k] == 0 && k > 0 ? 0 : 4;
  const bool out_half = is_half(f->dtype[0]);
  for (int64_t i0 = 0; i0 < n; i0 += NK_FLOAT_CHUNK) {
    const int64_t m = n - i0 < NK_FLOAT_CHUNK ? n - i0 : NK_FLOAT_CHUNK;
    for (int k = 1; k < n_ops; k++) {
      if (!is_half(f->dtype[k])) cd[k] = data[k] + i0 * s[k];
      else if (s[k] == 0 && i0 > 0) cd[k] = (char *)buf[k]; /* widened at the first chunk */
      else cd[k] = (char *)(void *)h->in(f->dtype[k], data[k] + i0 * s[k], s[k], m, buf[k]);
    }
    cd[0] = out_half ? (char *)buf[0] : data[0] + i0 * s[0];
    f->loop(f->ctx, m, cd, cs);
    if (out_half) h->out(f->dtype[0], data[0] + i0 * s[0], s[0], m, buf[0]);
  }
}

bool nk_float_rows_ok(const nrt_operand *operands, int n_operands) {
  if (n_operands < 1 || n_operands > NK_FLOAT_MAX_OPERANDS) return false;
  for (int k = 0; k < n_operands; k++) {
    nrt_dtype t = (nrt_dtype)operands[k].dtype;
    if (t != NRT_FLOAT32 && !is_half(t)) return false;
  }
  return true;
}

void nk_for_each_float(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *ctx) {
  nk_for_each_float_raw(operands, n_operands, loop, NULL, ctx);
}

static float_rows make_float_rows(const nrt_operand *operands, int n_operands, nk_loop_fn loop,
                                  nk_raw_row_fn raw, void *ctx) {
  float_rows f = {loop, raw, ctx, n_operands, false, {NRT_FLOAT32}};
  for (int k = 0; k < n_operands; k++) {
    f.dtype[k] = (nrt_dtype)operands[k].dtype;
    f.any_half |= is_half(f.dtype[k]);
  }
  return f;
}

void nk_for_each_float_raw(const nrt_operand *operands, int n_operands, nk_loop_fn loop,
                           nk_raw_row_fn raw, void *ctx) {
  float_rows f = make_float_rows(operands, n_operands, loop, raw, ctx);
  nk_for_each(operands, n_operands, float_rows_loop, &f);
}

/* ------------------------------------------------------------ row capture */

bool nk_capture_rows(nrt_kernel_fn kernel, const nrt_task *task, nrt_exec_ctx *ctx,
                     nrt_row_entry *entry) {
  memset(entry, 0, offsetof(nrt_row_entry, storage));
  capture c = {.entry = entry, .task = task};
  capturing = &c;
  const int rc = kernel(task, ctx);
  capturing = NULL;
  return rc == 0 && c.taken && !c.refused;
}

/* Records loop and a copy of its plan (at the start of storage, after
 * `skip` bytes), and each operand the kernel substituted; false when it
 * does not fit or an operand is re-described in a way the executor's rows
 * would not reproduce. */
static bool record(const nrt_operand *ops, int n_ops, nk_loop_fn loop, const void *plan,
                   size_t plan_size, size_t skip) {
  capture *c = capturing;
  nrt_row_entry *e = c->entry;
  unsigned char *store = (unsigned char *)e->storage;
  if (c->taken || n_ops != c->task->n_operands) return false;
  size_t used = (skip + plan_size + 15) & ~(size_t)15;
  if (used > sizeof e->storage) return false;
  memcpy(store + skip, plan, plan_size);
  for (int k = 0; k < n_ops; k++) {
    const nrt_operand *mine = &c->task->operands[k], *o = &ops[k];
    if (o->data == mine->data) {
      /* followed: the executor hands the task's own rows over */
      if (o->ndim != mine->ndim) return false;
      for (int d = 0; d < o->ndim; d++)
        if (o->sizes[d] != mine->sizes[d] || o->strides[d] != mine->strides[d]) return false;
      continue;
    }
    /* substituted: a broadcast value the kernel converted (one element) */
    for (int d = 0; d < o->ndim; d++)
      if (o->strides[d] != 0) return false;
    const size_t esize = nrt_dtype_size((nrt_dtype)o->dtype);
    if (!esize || used + esize > sizeof e->storage) return false;
    memcpy(store + used, o->data, esize);
    e->fixed[k] = store + used;
    used = (used + esize + 15) & ~(size_t)15;
  }
  e->fn = loop;
  e->ctx = store + skip;
  c->taken = true;
  return true;
}

void nk_for_each_plan(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *plan,
                      size_t plan_size) {
  if (!capturing) {
    nk_for_each(operands, n_operands, loop, plan);
    return;
  }
  if (!record(operands, n_operands, loop, plan, plan_size, 0)) capturing->refused = true;
}

void nk_for_each_float_plan(const nrt_operand *operands, int n_operands, nk_loop_fn loop,
                            nk_raw_row_fn raw, void *plan, size_t plan_size) {
  if (!capturing) {
    nk_for_each_float_raw(operands, n_operands, loop, raw, plan);
    return;
  }
  /* the adapter's state first, then the kernel's plan, which it points at */
  const size_t skip = (sizeof(float_rows) + 15) & ~(size_t)15;
  nrt_row_entry *e = capturing->entry;
  if (!nk_float_rows_ok(operands, n_operands) ||
      !record(operands, n_operands, float_rows_loop, plan, plan_size, skip)) {
    capturing->refused = true;
    return;
  }
  float_rows f = make_float_rows(operands, n_operands, loop, raw, (unsigned char *)e->storage + skip);
  memcpy(e->storage, &f, sizeof f);
  e->ctx = e->storage;
}

nk_loop_fn nk_captured_loop(const nrt_row_entry *entry, const void **plan) {
  if (entry->fn == float_rows_loop) {
    const float_rows *f = entry->ctx;
    *plan = f->ctx;
    return f->loop;
  }
  *plan = entry->ctx;
  return entry->fn;
}
