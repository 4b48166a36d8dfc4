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

#include "common/dtype_convert.h"

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

/* Unstable sort of a[0..n) by key, step for step the algorithm of
 * libstdc++'s std::sort (introsort: median-of-three quicksort down to runs
 * of 16, heapsort past 2*floor(log2 n) levels, a final insertion sort), so
 * that equal keys end in the same order as on ATen's CPU, whose unstable
 * sort is std::sort over (value, index) pairs. */
#define NK_LESS(x, y) ((x).key < (y).key)

static inline void nk_swap_pairs(nk_pair *a, nk_pair *b) { nk_pair t = *a; *a = *b; *b = t; }

static inline void nk_push_heap(nk_pair *first, int64_t hole, int64_t top, nk_pair value) {
  int64_t parent = (hole - 1) / 2;
  while (hole > top && NK_LESS(first[parent], value)) {
    first[hole] = first[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  first[hole] = value;
}

static inline void nk_adjust_heap(nk_pair *first, int64_t hole, int64_t len, nk_pair value) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (NK_LESS(first[child], first[child - 1])) child--;
    first[hole] = first[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    first[hole] = first[child - 1];
    hole = child - 1;
  }
  nk_push_heap(first, hole, top, value);
}

static inline void nk_heap_sort(nk_pair *first, int64_t len) {
  if (len < 2) return;
  for (int64_t parent = (len - 2) / 2;; parent--) {
    nk_adjust_heap(first, parent, len, first[parent]);
    if (parent == 0) break;
  }
  for (int64_t last = len - 1; last > 0; last--) {
    nk_pair value = first[last];
    first[last] = first[0];
    nk_adjust_heap(first, 0, last, value);
  }
}

/* std::__heap_select(first, middle, last) then std::__sort_heap(first,
 * middle): std::partial_sort, the first m sorted. */
static inline void nk_partial_sort(nk_pair *first, int64_t m, int64_t n) {
  if (m == 0) return;
  if (m >= 2)
    for (int64_t parent = (m - 2) / 2;; parent--) {
      nk_adjust_heap(first, parent, m, first[parent]);
      if (parent == 0) break;
    }
  for (int64_t i = m; i < n; i++) {
    if (NK_LESS(first[i], first[0])) {
      nk_pair value = first[i];
      first[i] = first[0];
      nk_adjust_heap(first, 0, m, value);
    }
  }
  for (int64_t last = m - 1; last > 0; last--) {
    nk_pair value = first[last];
    first[last] = first[0];
    nk_adjust_heap(first, 0, last, value);
  }
}

static inline void nk_median_to_first(nk_pair *result, nk_pair *a, nk_pair *b, nk_pair *c) {
  if (NK_LESS(*a, *b)) {
    if (NK_LESS(*b, *c)) nk_swap_pairs(result, b);
    else if (NK_LESS(*a, *c)) nk_swap_pairs(result, c);
    else nk_swap_pairs(result, a);
  } else if (NK_LESS(*a, *c)) nk_swap_pairs(result, a);
  else if (NK_LESS(*b, *c)) nk_swap_pairs(result, c);
  else nk_swap_pairs(result, b);
}

/* std::__unguarded_partition_pivot: median of three to the front, then
 * the unguarded partition around it; returns the cut. */
static inline nk_pair *nk_partition_pivot(nk_pair *first, nk_pair *last) {
  nk_pair *mid = first + (last - first) / 2;
  nk_median_to_first(first, first + 1, mid, last - 1);
  nk_pair *lo = first + 1, *hi = last;
  for (;;) {
    while (NK_LESS(*lo, *first)) lo++;
    hi--;
    while (NK_LESS(*first, *hi)) hi--;
    if (!(lo < hi)) return lo;
    nk_swap_pairs(lo, hi);
    lo++;
  }
}

static inline void nk_introsort_loop(nk_pair *first, nk_pair *last, int64_t depth) {
  while (last - first > 16) {
    if (depth == 0) { nk_heap_sort(first, last - first); return; }
    depth--;
    nk_pair *cut = nk_partition_pivot(first, last);
    nk_introsort_loop(cut, last, depth);
    last = cut;
  }
}

static inline void nk_linear_insert(nk_pair *last) {
  nk_pair value = *last, *next = last - 1;
  while (NK_LESS(value, *next)) { *last = *next; last = next; next--; }
  *last = value;
}

static inline void nk_insertion_sort(nk_pair *first, nk_pair *last) {
  if (first == last) return;
  for (nk_pair *i = first + 1; i != last; i++) {
    if (NK_LESS(*i, *first)) {
      nk_pair value = *i;
      memmove(first + 1, first, (size_t)(i - first) * sizeof *first);
      *first = value;
    } else {
      nk_linear_insert(i);
    }
  }
}

static inline void nk_sort_pairs_unstable(nk_pair *a, int64_t n) {
  if (n < 2) return;
  int64_t lg = 63 - __builtin_clzll((unsigned long long)n);
  nk_introsort_loop(a, a + n, 2 * lg);
  if (n > 16) {
    nk_insertion_sort(a, a + 16);
    for (nk_pair *i = a + 16; i != a + n; i++) nk_linear_insert(i);
  } else {
    nk_insertion_sort(a, a + n);
  }
}
/* std::nth_element(a, a + nth, a + n) (introselect). */
static inline void nk_nth_element(nk_pair *a, int64_t nth, int64_t n) {
  if (n < 2) return;
  nk_pair *first = a, *last = a + n, *pnth = a + nth;
  int64_t depth = 2 * (63 - __builtin_clzll((unsigned long long)n));
  while (last - first > 3) {
    if (depth == 0) {
      /* __heap_select(first, nth + 1, last) then swap(first, nth) */
      int64_t m = pnth + 1 - first, len = last - first;
      if (m >= 2)
        for (int64_t parent = (m - 2) / 2;; parent--) {
          nk_adjust_heap(first, parent, m, first[parent]);
          if (parent == 0) break;
        }
      for (int64_t i = m; i < len; i++) {
        if (NK_LESS(first[i], first[0])) {
          nk_pair value = first[i];
          first[i] = first[0];
          nk_adjust_heap(first, 0, m, value);
        }
      }
      nk_swap_pairs(first, pnth);
      return;
    }
    depth--;
    nk_pair *cut = nk_partition_pivot(first, last);
    if (cut <= pnth) first = cut;
    else last = cut;
  }
  nk_insertion_sort(first, last);
}

/* ATen's CPU quick_select_template (Sorting.cpp): a[k] gets the k-th
 * smallest, with its exact swaps, so ties pick the CPU's index. */
static inline void nk_cpu_quickselect(nk_pair *a, int64_t n, int64_t k) {
#define NK_GT(x, y) ((x).key > (y).key)
  int64_t L = 0, R = n - 1;
  for (;;) {
    if (R <= L) return;
    if (R == L + 1) {
      if (NK_GT(a[L], a[R])) nk_swap_pairs(&a[L], &a[R]);
      return;
    }
    int64_t P = L + (R - L) / 2;
    nk_swap_pairs(&a[P], &a[L + 1]);
    if (NK_GT(a[L + 1], a[R])) nk_swap_pairs(&a[L + 1], &a[R]);
    if (NK_GT(a[L], a[R])) nk_swap_pairs(&a[L], &a[R]);
    if (NK_GT(a[L + 1], a[L])) nk_swap_pairs(&a[L + 1], &a[L]);
    int64_t i = L + 1, j = R;
    nk_pair piv = a[L];
    for (;;) {
      do i++; while (NK_GT(piv, a[i]));
      do j--; while (NK_GT(a[j], piv));
      if (j < i) break;
      nk_swap_pairs(&a[i], &a[j]);
    }
    nk_swap_pairs(&a[L], &a[j]);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
#undef NK_GT
}

#undef NK_LESS

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
