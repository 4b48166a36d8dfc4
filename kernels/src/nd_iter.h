/* nd_iter.h — the strided N-d iteration every elementwise kernel shares.
 *
 * A kernel supplies only an inner 1-d loop; nk_nd_iter_run does the rest,
 * as ATen's TensorIterator does:
 *   1. orders the dims so that the one with the smallest strides (operand 0
 *      first) is innermost (last),
 *   2. coalesces neighbouring dims whose strides allow it, so a contiguous
 *      (or uniformly broadcast) tensor becomes a single long row,
 *   3. splits the flat index space [0, numel) over the runtime's compute
 *      pool, inline on the calling thread when it is at most one grain,
 *   4. walks each chunk row by row, calling the loop with byte strides.
 * Operands must already be validated (nk_check_elementwise). */
#ifndef NK_ND_ITER_H
#define NK_ND_ITER_H

#include <stdint.h>

#include "neuron_runtime.h"

/* n elements; data[k] points at operand k's first element of the row and
 * strides[k] is its byte stride along the row. */
typedef void (*nk_loop_fn)(void *ctx, int64_t n, char *const *data, const int64_t *strides);

/* Below this many elements an elementwise op runs on the calling thread:
 * dispatching to the pool costs more than a memory-bound pass over 32K
 * elements (ATen's GRAIN_SIZE). */
#define NK_GRAIN_ELEMENTWISE 32768

typedef struct nk_nd_iter {
  int n_operands;
  int ndim;                                         /* >= 1; innermost last */
  int64_t numel;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_DIMS][NRT_MAX_OPERANDS]; /* bytes, [dim][operand] */
  char *data[NRT_MAX_OPERANDS];
} nk_nd_iter;

/* Builds the iteration over operands that share ndim and sizes. */
void nk_nd_iter_init(nk_nd_iter *it, const nrt_operand *operands, int n_operands);

/* Runs loop over every element; chunks of at least `grain` elements go to
 * the pool. */
void nk_nd_iter_run(const nk_nd_iter *it, int64_t grain, nk_loop_fn loop, void *ctx);

/* nrt_parallel_for, but a range of at most one grain runs here, directly
 * (the 1-d index-space kernels, arange and linspace, use it). */
void nk_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *arg);

/* init + run with the elementwise grain. */
void nk_for_each(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *ctx);

#endif /* NK_ND_ITER_H */
