/* index_common.h — what the index kernels share: reading and checking an
 * index, recording the first bad one from any thread, and the scatter
 * reductions in each compute class. */
#ifndef NK_INDEX_COMMON_H
#define NK_INDEX_COMMON_H

#include <stdatomic.h>

#include "common/dtype_convert.h"
#include "neuron_kernels.h"

/* The first out-of-range index seen by any thread; workers stop early once
 * one is set.  The kernel reports it after the parallel region. */
typedef struct nk_index_error {
  atomic_int failed;
  int64_t index, dim, size;
} nk_index_error;

NK_INLINE void nk_index_error_init(nk_index_error *e) {
  atomic_init(&e->failed, 0);
  e->index = e->dim = e->size = 0;
}

NK_INLINE bool nk_index_failed(nk_index_error *e) {
  return atomic_load_explicit(&e->failed, memory_order_relaxed) != 0;
}

static inline void nk_index_error_set(nk_index_error *e, int64_t index, int64_t dim, int64_t size) {
  int expected = 0;
  /* the winner writes the details; the flag is only read after the join */
  if (atomic_compare_exchange_strong(&e->failed, &expected, 2)) {
    e->index = index;
    e->dim = dim;
    e->size = size;
    atomic_store(&e->failed, 1);
  }
}

/* Reports a recorded error; returns -1 if there was one. */
static inline int nk_index_error_report(nk_index_error *e, nrt_exec_ctx *ctx) {
  if (!atomic_load(&e->failed)) return 0;
  nrt_exec_fail(ctx, "index %lld is out of bounds for dimension %lld with size %lld",
                (long long)e->index, (long long)e->dim, (long long)e->size);
  return -1;
}

/* one element of es bytes (1, 2, 4 or 8): constant-size moves, not a call */
NK_INLINE void nk_copy_elem(void *dst, const void *src, size_t es) {
  switch (es) {
  case 1: memcpy(dst, src, 1); break;
  case 2: memcpy(dst, src, 2); break;
  case 4: memcpy(dst, src, 4); break;
  default: memcpy(dst, src, 8); break;
  }
}

NK_INLINE bool nk_index_dtype_ok(int32_t t) { return t == NRT_INT32 || t == NRT_INT64; }

NK_INLINE int64_t nk_read_index(nrt_dtype t, const void *p) {
  return t == NRT_INT64 ? nk_read_i64(p) : (int64_t)nk_read_i32(p);
}

/* idx checked against [0, size) (or [-size, size) wrapped when wrap);
 * false when out of range. */
NK_INLINE bool nk_index_in_range(int64_t *idx, int64_t size, bool wrap) {
  int64_t i = *idx;
  if (wrap && i < 0 && i >= -size) i += size;
  if (i < 0 || i >= size) return false;
  *idx = i;
  return true;
}

/* ------------------------------------------------------ scatter reductions */

/* the identity a reduction starts from when self is excluded */
NK_INLINE double nk_scatter_identity_f64(nk_scatter_op op) {
  switch (op) {
  case NK_SCATTER_MUL: return 1.0;
  case NK_SCATTER_AMAX: return -INFINITY;
  case NK_SCATTER_AMIN: return INFINITY;
  default: return 0.0;
  }
}

NK_INLINE int64_t nk_int_min(nrt_dtype t) {
  switch (t) {
  case NRT_BOOL: case NRT_UINT8: return 0;
  case NRT_INT8: return INT8_MIN;
  case NRT_INT16: return INT16_MIN;
  case NRT_INT32: return INT32_MIN;
  default: return INT64_MIN;
  }
}

NK_INLINE int64_t nk_int_max(nrt_dtype t) {
  switch (t) {
  case NRT_BOOL: return 1;
  case NRT_UINT8: return UINT8_MAX;
  case NRT_INT8: return INT8_MAX;
  case NRT_INT16: return INT16_MAX;
  case NRT_INT32: return INT32_MAX;
  default: return INT64_MAX;
  }
}

NK_INLINE int64_t nk_scatter_identity_i64(nk_scatter_op op, nrt_dtype t) {
  switch (op) {
  case NK_SCATTER_MUL: return 1;
  case NK_SCATTER_AMAX: return nk_int_min(t);
  case NK_SCATTER_AMIN: return nk_int_max(t);
  default: return 0;
  }
}

/* dst op= s in float (ATen: NaN in src wins for amax/amin; std::max keeps
 * a NaN already in dst) */
NK_INLINE float nk_reduce_f32(nk_scatter_op op, float d, float s, float alpha, bool has_alpha) {
  switch (op) {
  case NK_SCATTER_ADD: case NK_SCATTER_MEAN: return has_alpha ? d + alpha * s : d + s;
  case NK_SCATTER_MUL: return d * s;
  case NK_SCATTER_AMAX: return isnan(s) ? s : (d < s ? s : d);
  case NK_SCATTER_AMIN: return isnan(s) ? s : (s < d ? s : d);
  default: return s;
  }
}

NK_INLINE double nk_reduce_f64(nk_scatter_op op, double d, double s, double alpha, bool has_alpha) {
  switch (op) {
  case NK_SCATTER_ADD: case NK_SCATTER_MEAN: return has_alpha ? d + alpha * s : d + s;
  case NK_SCATTER_MUL: return d * s;
  case NK_SCATTER_AMAX: return isnan(s) ? s : (d < s ? s : d);
  case NK_SCATTER_AMIN: return isnan(s) ? s : (s < d ? s : d);
  default: return s;
  }
}

NK_INLINE int64_t nk_reduce_i64(nk_scatter_op op, int64_t d, int64_t s, int64_t alpha) {
  switch (op) {
  case NK_SCATTER_ADD: case NK_SCATTER_MEAN: return (int64_t)((uint64_t)d + (uint64_t)alpha * (uint64_t)s);
  case NK_SCATTER_MUL: return (int64_t)((uint64_t)d * (uint64_t)s);
  case NK_SCATTER_AMAX: return d < s ? s : d;
  case NK_SCATTER_AMIN: return s < d ? s : d;
  default: return s;
  }
}

NK_INLINE bool nk_reduce_bool(nk_scatter_op op, bool d, bool s, bool alpha) {
  switch (op) {
  case NK_SCATTER_ADD: case NK_SCATTER_MEAN: return d || (alpha && s);
  case NK_SCATTER_MUL: case NK_SCATTER_AMIN: return d && s;
  case NK_SCATTER_AMAX: return d || s;
  default: return s;
  }
}

/* One reduction step on memory: *dst (dtype td) op= *src (dtype ts),
 * computed in td's class and rounded on store, as ATen does per element. */
NK_INLINE void nk_reduce_at(nk_scatter_op op, nrt_dtype td, void *dst, nrt_dtype ts, const void *src,
                            const nk_scalar *alpha, bool has_alpha) {
  switch (nk_dtype_class(td)) {
  case NK_CLASS_FLOAT:
    nk_store_f32(td, dst, nk_reduce_f32(op, nk_load_f32(td, dst), nk_load_f32(ts, src),
                                        (float)alpha->f, has_alpha));
    break;
  case NK_CLASS_DOUBLE:
    nk_store_f64(td, dst, nk_reduce_f64(op, nk_load_f64(td, dst), nk_load_f64(ts, src), alpha->f,
                                        has_alpha));
    break;
  case NK_CLASS_INT:
    nk_store_i64(td, dst, nk_reduce_i64(op, nk_load_i64(td, dst), nk_load_i64(ts, src),
                                        has_alpha ? alpha->i : 1));
    break;
  case NK_CLASS_BOOL:
    nk_store_bool(td, dst, nk_reduce_bool(op, nk_load_bool(td, dst), nk_load_bool(ts, src),
                                          has_alpha ? alpha->i != 0 : true));
    break;
  }
}

/* Writes the identity of op into *dst (dtype t). */
NK_INLINE void nk_store_identity(nk_scatter_op op, nrt_dtype t, void *dst) {
  if (nk_dtype_is_floating(t))
    nk_store_f64(t, dst, nk_scatter_identity_f64(op));
  else
    nk_store_i64(t, dst, nk_scatter_identity_i64(op, t));
}

/* dst = dst / count (count > 0): true division for floating dtypes, floor
 * division for integers (ATen's div_(count, "floor")). */
NK_INLINE void nk_divide_at(nrt_dtype t, void *dst, int64_t count) {
  switch (nk_dtype_class(t)) {
  case NK_CLASS_FLOAT: nk_store_f32(t, dst, nk_load_f32(t, dst) / (float)count); break;
  case NK_CLASS_DOUBLE: nk_store_f64(t, dst, nk_load_f64(t, dst) / (double)count); break;
  case NK_CLASS_INT: {
    int64_t a = nk_load_i64(t, dst), q = a / count;
    if (a % count != 0 && a < 0) q--;
    nk_store_i64(t, dst, q);
    break;
  }
  case NK_CLASS_BOOL: break;
  }
}

#endif /* NK_INDEX_COMMON_H */
