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

#include <stdbool.h>
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
/* nrt_parallel_for_each (one index per claim), refused while capturing
 * as nk_parallel_for is. */
void nk_parallel_for_each(int64_t n, nrt_range_fn fn, void *arg);

/* init + run with the elementwise grain. */
void nk_for_each(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *ctx);

/* ---- float rows: one float32 loop for float32, float16 and bfloat16 ----
 *
 * Floating kernels compute float16/bfloat16 in float32 and round once on
 * store (ATen's CPU does the same), so each has ONE float32 loop and this
 * adapter runs it over operands of any of the three dtypes (operand 0 the
 * output, the rest inputs).  Per row, in chunks of NK_FLOAT_CHUNK elements:
 *   - a 16-bit input is widened to float32 (half_rows.h: AVX-512/AVX2
 *     conversions) into a chunk buffer handed over with stride 4 (0 when the
 *     input is broadcast along the row: one value);
 *   - a float32 operand is handed over in place with its own stride;
 *   - a 16-bit output is computed into a chunk buffer and rounded back to
 *     its dtype (nearest even) once.
 * Rows with no 16-bit operand go to the loop whole, untouched.  So the
 * float32 loop sees only float32 data and must accept any stride on a
 * float32 operand (its vector path applies when strides are 4 or 0, which
 * is every widened operand).  In-place ops are safe: a chunk's inputs are
 * widened before its output is written.  At most NK_FLOAT_MAX_OPERANDS
 * operands, each float32, float16 or bfloat16 (nk_float_rows_ok).
 *
 * Chunk size: three buffers of 1024 floats (12 KiB) stay in L1 next to the
 * data streaming through; the per-chunk cost (one loop call per operand)
 * is then well under 1% of the chunk's work. */
#define NK_FLOAT_CHUNK 1024
#define NK_FLOAT_MAX_OPERANDS 4

/* true when every operand is float32, float16 or bfloat16 and there are at
 * most NK_FLOAT_MAX_OPERANDS of them */
bool nk_float_rows_ok(const nrt_operand *operands, int n_operands);

/* nk_for_each with `loop` a float32 loop, through the adapter above. */
void nk_for_each_float(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *ctx);

/* A row as nd_iter hands it over, before any widening; returns false to
 * let the adapter widen it.  A kernel with a loop that reads 16-bit rows
 * directly (binary's fused AVX-512 loop) tries it first this way. */
typedef bool (*nk_raw_row_fn)(void *ctx, int64_t n, char *const *data, const int64_t *strides);

/* nk_for_each_float, each row offered to `raw` first (NULL: none). */
void nk_for_each_float_raw(const nrt_operand *operands, int n_operands, nk_loop_fn loop,
                           nk_raw_row_fn raw, void *ctx);

/* ---- row capture: a fused group's per-row routine (adaptive eager) ----
 *
 * The runtime runs a fused group in short rows, calling each member's row
 * loop directly (nrt_row_entry, neuron_runtime.h).  It gets that loop by
 * running the member's kernel once in capture mode: the kernel plans as
 * always and hands its loop to nd_iter, which records it (and a copy of the
 * plan, so the kernel's stack may go) instead of running it.  A kernel opts
 * in by passing its plan's size (the _plan variants below); the plan must
 * hold no pointer into itself.  Any other nd_iter call made while capturing
 * runs nothing and makes the capture fail. */
bool nk_capture_rows(nrt_kernel_fn kernel, const nrt_task *task, nrt_exec_ctx *ctx,
                     nrt_row_entry *entry);

/* nk_for_each / nk_for_each_float_raw for a capturable kernel: `plan` is
 * the loop's ctx, `plan_size` its bytes. */
void nk_for_each_plan(const nrt_operand *operands, int n_operands, nk_loop_fn loop, void *plan,
                      size_t plan_size);
void nk_for_each_float_plan(const nrt_operand *operands, int n_operands, nk_loop_fn loop,
                            nk_raw_row_fn raw, void *plan, size_t plan_size);

/* The kernel's own loop and plan in a captured entry (through the float-rows
 * adapter's state when the kernel used it), for a kernel that describes its
 * captured routine (nrt_row_expr): compare the loop with your own to know
 * which path the plan took. */
nk_loop_fn nk_captured_loop(const nrt_row_entry *entry, const void **plan);

#endif /* NK_ND_ITER_H */
