/* sort_keys.h — what the sort family shares: order-preserving uint64 keys
 * for every dtype, a stable merge sort of (key, index) pairs, and a strided
 * walker over the elements of up to four operands in row-major order.
 *
 * Keys: one unsigned comparison orders every dtype as ATen's comparisons do
 * (ints by value, floats by value with -0.0 == 0.0 and every NaN equal to
 * every other and above +inf), so a single sort routine serves all dtypes
 * and descending order is the bitwise complement of the key (a stable sort
 * of complemented keys keeps equal elements in their original order, as
 * ATen's stable descending sort does). */
#ifndef NK_SORT_KEYS_H
#define NK_SORT_KEYS_H

#include <stdint.h>
#include <stdlib.h>

#include "dtype_convert.h"

typedef struct nk_pair {
  uint64_t key;
  int64_t index;
} nk_pair;

NK_INLINE uint64_t nk_sort_key(nrt_dtype t, const void *p) {
  switch (t) {
  case NRT_BOOL: return nk_read_u8(p) != 0;
  case NRT_UINT8: return nk_read_u8(p);
  case NRT_INT8: case NRT_INT16: case NRT_INT32: case NRT_INT64:
    return (uint64_t)nk_load_integral(t, p) ^ ((uint64_t)1 << 63);
  case NRT_FLOAT64: {
    double d = nk_read_f64(p);
    if (isnan(d)) return UINT64_MAX;
    if (d == 0) d = 0; /* -0.0 sorts with 0.0 */
    uint64_t u;
    memcpy(&u, &d, 8);
    return (u >> 63) ? ~u : (u | ((uint64_t)1 << 63));
  }
  default: { /* float16, bfloat16, float32: exact in float32 */
    float f = nk_load_f32(t, p);
    if (isnan(f)) return UINT64_MAX;
    if (f == 0) f = 0;
    uint32_t u = nk_f32_bits(f);
    return (u >> 31) ? (uint64_t)(uint32_t)~u : (uint64_t)(u | 0x80000000u);
  }
  }
}

/* Stable sort of a[0..n) by key; tmp has room for n pairs. */
static inline void nk_sort_pairs(nk_pair *a, nk_pair *tmp, int64_t n) {
  const int64_t run = 16;
  for (int64_t lo = 0; lo < n; lo += run) { /* insertion sort of short runs */
    int64_t hi = lo + run < n ? lo + run : n;
    for (int64_t i = lo + 1; i < hi; i++) {
      nk_pair x = a[i];
      int64_t j = i;
      while (j > lo && a[j - 1].key > x.key) { a[j] = a[j - 1]; j--; }
      a[j] = x;
    }
  }
  nk_pair *src = a, *dst = tmp;
  for (int64_t width = run; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, o = lo;
      if (mid >= hi || src[mid - 1].key <= src[mid].key) { /* already in order */
        memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *a);
        continue;
      }
      while (i < mid && j < hi) dst[o++] = src[j].key < src[i].key ? src[j++] : src[i++];
      while (i < mid) dst[o++] = src[i++];
      while (j < hi) dst[o++] = src[j++];
    }
    nk_pair *t = src; src = dst; dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Row-major walk over `sizes` (ndim dims), keeping byte offsets of up to
 * four operands with their own strides. */
typedef struct nk_walker {
  int ndim, n_ops;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t strides[4][NRT_MAX_DIMS];
  int64_t idx[NRT_MAX_DIMS];
  int64_t off[4];
} nk_walker;

/* Positions the walker at flat (row-major) index `start`. */
static inline void nk_walker_seek(nk_walker *w, int64_t start) {
  for (int k = 0; k < w->n_ops; k++) w->off[k] = 0;
  for (int d = w->ndim - 1; d >= 0; d--) {
    w->idx[d] = w->sizes[d] ? start % w->sizes[d] : 0;
    start = w->sizes[d] ? start / w->sizes[d] : 0;
    for (int k = 0; k < w->n_ops; k++) w->off[k] += w->idx[d] * w->strides[k][d];
  }
}

static inline void nk_walker_next(nk_walker *w) {
  for (int d = w->ndim - 1; d >= 0; d--) {
    for (int k = 0; k < w->n_ops; k++) w->off[k] += w->strides[k][d];
    if (++w->idx[d] < w->sizes[d]) return;
    for (int k = 0; k < w->n_ops; k++) w->off[k] -= w->idx[d] * w->strides[k][d];
    w->idx[d] = 0;
  }
}

static inline int64_t nk_numel(const nrt_operand *op) {
  int64_t n = 1;
  for (int d = 0; d < op->ndim; d++) n *= op->sizes[d];
  return n;
}

#endif /* NK_SORT_KEYS_H */
