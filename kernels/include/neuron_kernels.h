/*
 * neuron_kernels.h — the virtual NeuronCore's engines (C11, no PyTorch).
 *
 * A kernel is launched as an nrt_task (see neuron_runtime.h): the task's
 * `kernel` is one of the ids below, its operands are strided descriptors
 * (strides in BYTES, data already offset), and its params hold the kernel's
 * own struct from this header.  nk_register_kernels() tells the runtime how
 * to execute every id.
 *
 * Operand conventions shared by every kernel:
 *   - operands[0] is the output (written), the rest are inputs, unless a
 *     kernel says otherwise;
 *   - elementwise kernels take operands that all have the same ndim and
 *     sizes (the iteration shape, as ATen's TensorIterator gives it); a
 *     broadcast input has stride 0 in the broadcast dims;
 *   - each operand has its own dtype: inputs are converted on load and the
 *     result on store, so mixed-dtype ops need no temporary copies;
 *   - float16/bfloat16 are computed in float32 and rounded to nearest even
 *     on store, as PyTorch's CPU does; float->int conversion truncates like
 *     a C cast (values out of range are implementation-defined in PyTorch
 *     too, but never undefined behaviour here); any -> bool is (x != 0).
 *   - 0-size operands launch no work; ndim == 0 is one element.
 *
 * CPU features are detected once at run time (AVX-512F / AVX2+FMA /
 * portable C) and each kernel picks its variant from nk_cpu_isa().
 */
#ifndef NEURON_KERNELS_H
#define NEURON_KERNELS_H

#include "neuron_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nk_kernel_id {
  NK_KERNEL_COPY = NRT_KERNEL_FIRST_USER, /* out <- cast(in)              */
  NK_KERNEL_FILL,                         /* out <- value                 */
  NK_KERNEL_ARANGE,  /* out (1-d) [i] <- start + i * step                 */
  NK_KERNEL_LINSPACE, /* out (1-d) evenly spaced, PyTorch's formula       */
  NK_KERNEL_BINARY,   /* out <- op(a, b)                                  */
  NK_KERNEL_RANDOM,   /* out <- samples of a distribution (Philox4x32-10)  */
  /* index */
  NK_KERNEL_GATHER_SCATTER, /* along one dim with an index operand (gather,
                               scatter*, index_select/add/copy/fill)     */
  NK_KERNEL_INDEX,          /* advanced indexing: index / index_put / take / put */
  NK_KERNEL_MASKED,         /* masked_fill, masked_scatter, masked_select,
                               nonzero (count and coordinates)           */
  NK_KERNEL_END
} nk_kernel_id;

/* A scalar in both forms: floating dtypes read f, integral and bool read i.
 * The launcher fills both (i exact for int64 values). */
typedef struct nk_scalar {
  double f;
  int64_t i;
} nk_scalar;

typedef struct nk_fill_params {
  nk_scalar value;
} nk_fill_params;

typedef struct nk_arange_params {
  nk_scalar start, step;
} nk_arange_params;

/* step = (end - start) / (steps - 1); the first half counts up from start,
 * the second half down from end, exactly as ATen's CPU linspace. */
typedef struct nk_linspace_params {
  double start, end;
  int64_t steps;
} nk_linspace_params;

typedef enum nk_binary_op {
  NK_BINARY_ADD = 0, /* a + alpha * b */
  NK_BINARY_SUB,     /* a - alpha * b */
  NK_BINARY_MUL,
  NK_BINARY_DIV,     /* true division */
  NK_BINARY_OP_COUNT
} nk_binary_op;

/* operands: [0] out, [1] a, [2] b.  compute is the nrt_dtype the math is
 * done in (ATen's common dtype; float16/bfloat16 compute in float32). */
typedef struct nk_binary_params {
  int32_t op;      /* nk_binary_op */
  int32_t compute; /* nrt_dtype    */
  nk_scalar alpha;
} nk_binary_params;

/* Random numbers are counter based: element i of out, counted in row-major
 * order of its sizes whatever its strides, takes the Philox4x32-10 block
 * (key = seed, counter = offset / 4 + i) of four 32-bit words.  So results
 * depend on (seed, offset, shape) only, never on threads or tiling; the
 * launcher advances the generator's offset by 4 * numel. */
typedef enum nk_distribution {
  NK_DIST_UNIFORM = 0, /* [a, b)                                          */
  NK_DIST_NORMAL,      /* mean a, std b (Box-Muller)                       */
  NK_DIST_BERNOULLI,   /* 1 with probability a                             */
  NK_DIST_RANGE,       /* base + (64 random bits mod range), range > 0     */
  NK_DIST_FULL_RANGE,  /* 64 random bits as int64                          */
  NK_DIST_EXPONENTIAL, /* rate a                                           */
  NK_DIST_COUNT
} nk_distribution;

typedef struct nk_random_params {
  int32_t dist; /* nk_distribution */
  int32_t reserved;
  uint64_t seed, offset;
  double a, b;
  uint64_t range;
  int64_t base;
} nk_random_params;

/* ---------------------------------------------------------------- index
 * Every index is checked before any memory is touched through it; an index
 * out of range fails the task with "index I is out of bounds for dimension
 * D with size S" (raised at the next synchronisation).  Index operands are
 * int32 or int64. */

typedef enum nk_scatter_op {
  NK_SCATTER_ASSIGN = 0, /* dst = src (last in order wins)               */
  NK_SCATTER_ADD,        /* dst += alpha * src (bool: or)                 */
  NK_SCATTER_MUL,        /* dst *= src (bool: and)                        */
  NK_SCATTER_MEAN,       /* sum, then divided by the count (floor for ints) */
  NK_SCATTER_AMAX,       /* NaN propagates, as ATen's CPU                 */
  NK_SCATTER_AMIN,
  NK_SCATTER_OP_COUNT
} nk_scatter_op;

/* Along dimension `dim`, over the iteration shape of the index operand:
 *   gather:  operands [0] out, [1] index, [2] self
 *            out[p] = self[p with p[dim] = index[p]]
 *   scatter: operands [0] self, [1] index, [2] src (absent with has_value),
 *            [3] count (MEAN only: int64, self's sizes, zeroed)
 *            self[p with p[dim] = index[p]] op= src[p] (or value)
 * Every operand has the index's ndim (0-dim operands count as 1-d of one
 * element); out/src have the index's sizes (larger src sizes are allowed,
 * as ATen allows), self has sizes >= the index's in every dim but `dim`.
 * Determinism: the work is split over the positions outside `dim` only;
 * each such line is walked serially in index order, and two lines never
 * write the same element, so accumulation order never depends on threads.
 * index_select/index_add/index_copy/index_fill are this kernel with the
 * 1-d index given stride 0 in every dim but `dim`. */
typedef struct nk_gather_scatter_params {
  int32_t gather;       /* 1 gather, 0 scatter                              */
  int32_t dim;
  int32_t op;           /* nk_scatter_op (scatter)                          */
  int32_t has_value;    /* scatter reads `value` instead of a src operand   */
  int32_t include_self; /* 0: touched elements start at the op's identity   */
  int32_t wrap;         /* negative indices count from the end              */
  int32_t has_skip;     /* elements whose index == skip are ignored (padding_idx) */
  int32_t reserved;
  int64_t skip;
  nk_scalar value;
  nk_scalar alpha;      /* ADD: dst += alpha * src                          */
} nk_gather_scatter_params;

#define NK_INDEX_MAX_INDICES 6

/* ATen's advanced-index form: every operand has the iteration shape;
 *   index: [0] out, [1] src (stride 0 in the indexed dims), [2..] indices
 *          out[p] = *(src[p] + sum_k wrap(index_k[p]) * strides[k])
 *   put:   [0] self (stride 0 in the indexed dims), [1] values, [2..] indices
 *          *(self[p] + offset) = values[p]   (+= with accumulate)
 * Negative indices wrap (index >= -size) unless nowrap; put runs serially in one fixed
 * order so duplicates give the same result whatever the thread count. */
typedef struct nk_index_params {
  int32_t put;
  int32_t accumulate;
  int32_t n_indices;
  int32_t nowrap; /* negative indices are out of range (index_copy) */
  int64_t sizes[NK_INDEX_MAX_INDICES];
  int64_t strides[NK_INDEX_MAX_INDICES]; /* bytes */
} nk_index_params;

typedef enum nk_masked_mode {
  NK_MASKED_FILL = 0, /* [0] self, [1] mask (self's sizes): self = value where mask */
  NK_MASKED_COUNT,    /* [0] int64 (one element), [1] x: number of x != 0          */
  NK_MASKED_NONZERO,  /* [0] int64 (count, ndim), [1] x: coordinates of x != 0    */
  NK_MASKED_SELECT,   /* [0] out (count), [1] mask, [2] src (mask's sizes)          */
  NK_MASKED_SCATTER,  /* [0] self, [1] mask (self's sizes), [2] source (1-d)        */
  NK_MASKED_MODE_COUNT
} nk_masked_mode;

/* Compactions walk their input in row-major order (as ATen's results are
 * ordered): each fixed-size chunk is counted, then written at its prefix
 * offset, so the result never depends on the thread count.  `count` is the
 * number of rows/elements the output holds (from an earlier COUNT); finding
 * more or fewer set elements fails the task. */
typedef struct nk_masked_params {
  int32_t mode;
  int32_t reserved;
  int64_t count;
  nk_scalar value;
} nk_masked_params;

/* One Philox4x32-10 block (exposed for the tests). */
void nk_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);

typedef enum nk_isa { NK_ISA_PORTABLE = 0, NK_ISA_AVX2, NK_ISA_AVX512 } nk_isa;
nk_isa nk_cpu_isa(void);               /* detected once; TORCHNEURON_ISA=portable|avx2|avx512 caps it */
const char *nk_isa_name(nk_isa isa);

/* Registers every kernel id above with the runtime.  Idempotent. */
nrt_status nk_register_kernels(void);

#ifdef __cplusplus
}
#endif
#endif /* NEURON_KERNELS_H */
