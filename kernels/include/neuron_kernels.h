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
  /* sort */
  NK_KERNEL_SORT,         /* values, indices <- first k of each slice, sorted */
  NK_KERNEL_SEARCHSORTED, /* out <- insertion points of values in boundaries  */
  NK_KERNEL_UNIQUE,       /* runs of equal values: unique, inverse, counts    */
  NK_KERNEL_BERNOULLI_TENSOR, /* out <- 1 with probability p[i] (Philox)      */
  NK_KERNEL_MULTINOMIAL,  /* out <- category samples of each row of probs     */
  NK_KERNEL_UNIQUE_ROWS,  /* unique rows of a matrix (unique with dim)        */
  /* movement */
  NK_KERNEL_TRIANGLE,     /* out <- tril/triu(in, diagonal)                   */
  NK_KERNEL_PAD,          /* out <- reflection/replication pad of in          */
  NK_KERNEL_PAD_BACKWARD, /* grad_in <- sum of grad_out over each index's preimage */
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

/* sort ------------------------------------------------------------------
 *
 * NK_KERNEL_SORT: operands [0] values, [1] indices (int64), [2] in.  Each
 * slice of `in` along `dim` is sorted stably (ascending, or descending);
 * values and indices get the first k sorted elements of the slice (their
 * size along dim is k, the other sizes are in's).  NaN sorts as the largest
 * value (last ascending, first descending), -0.0 equals 0.0, equal keys keep
 * their order, as ATen's stable sort.  Values are copied as raw bytes.
 * k == size along dim is a full sort (sort), k < size is topk.
 * `order` picks how equal keys are ordered: stably, or exactly as ATen's
 * CPU kernels do (libstdc++'s std::sort for sort(stable=False); for topk
 * std::partial_sort when 64 * k <= size, else std::nth_element and, when
 * sorted, std::sort of the first k - 1), so ties match the CPU. */
typedef enum nk_sort_order {
  NK_SORT_STABLE = 0,
  NK_SORT_CPU_SORT,
  NK_SORT_CPU_TOPK,
  NK_SORT_CPU_TOPK_UNSORTED,
  /* selections: values/indices have size 1 along dim */
  NK_SORT_CPU_KTH,  /* the k-th smallest (1-based), ATen's CPU quickselect */
  NK_SORT_MEDIAN,   /* the lower median of the (value, index) order; a NaN
                       in the slice gives its first NaN (torch.median) */
  NK_SORT_CPU_MODE, /* the most frequent value (the smallest on a tie) and
                       the index ATen's CPU mode reports (std::sort order) */
  NK_SORT_ORDER_COUNT
} nk_sort_order;
typedef struct nk_sort_params {
  int32_t dim;
  int32_t descending;
  int64_t k;
  int32_t order; /* nk_sort_order */
  int32_t reserved;
} nk_sort_params;

/* NK_KERNEL_SEARCHSORTED: operands [0] out (int64 or int32, values' shape),
 * [1] values, [2] boundaries (same dtype as values), optional [3] sorter
 * (int64, boundaries' shape).  boundaries is 1-d (shared by every value) or
 * has values' leading dims and the sequence in its last dim.  out is the
 * first position i with !(b[i] < v) (left) or !(b[i] <= v) (right), ATen's
 * comparisons, so NaN behaves as in ATen. */
typedef struct nk_searchsorted_params {
  int32_t right;
  int32_t reserved;
} nk_searchsorted_params;

/* NK_KERNEL_UNIQUE: operands [0] unique values (1-d, n), [1] inverse (int64,
 * n), [2] counts (int64, n), [3] number of runs (int64, 0-dim), [4] in (1-d,
 * n, in run order: sorted for unique, as given for unique_consecutive),
 * optional [5] perm (int64, n): in[i] came from position perm[i], so
 * inverse[perm[i]] = run of i (without perm, inverse[i]).  Runs are maximal
 * sequences of equal values (==, so NaNs never join).  Only the first
 * `number of runs` entries of unique/counts are written. */

/* NK_KERNEL_UNIQUE_ROWS: operands [0] unique rows (n x m), [1] inverse
 * (int64, n), [2] counts (int64, n), [3] number of unique rows (int64,
 * 0-dim), [4] in (n x m).  With `sort`, rows are first ordered
 * lexicographically (elements compared as the sort keys, stably); runs of
 * equal rows (every element ==) become one row.  inverse[r] = the run of
 * input row r.  Only the first `number` rows of [0] and [2] are written. */
typedef struct nk_unique_rows_params {
  int32_t sort;
  int32_t reserved;
} nk_unique_rows_params;

/* NK_KERNEL_BERNOULLI_TENSOR: operands [0] out, [1] p (out's shape, float
 * dtype, broadcast by stride 0).  Element i (row-major) draws Philox block
 * offset/4 + i: out = (53-bit uniform < p).  p outside [0, 1] is an error. */
typedef struct nk_philox_params {
  uint64_t seed, offset;
} nk_philox_params;

/* NK_KERNEL_MULTINOMIAL: operands [0] out (int64, rows x n_sample), [1]
 * probs (rows x categories, floating).  With replacement: sample s of row r
 * draws block offset/4 + r * n_sample + s and inverts the row's cumulative
 * distribution; without: category j of row r draws block offset/4 +
 * r * categories + j, an Exp(1) variate q, and the row's n_sample largest
 * p/q are taken (the exponential race, as ATen).  Rows with a negative,
 * non-finite or all-zero probability are errors. */
typedef struct nk_multinomial_params {
  uint64_t seed, offset;
  int32_t replacement;
  int32_t reserved;
} nk_multinomial_params;

/* movement --------------------------------------------------------------
 *
 * NK_KERNEL_TRIANGLE: operands [0] out, [1] in (same shape, ndim >= 2; may
 * be the same memory).  Element (..., i, j) is kept when j - i <= diagonal
 * (lower) or j - i >= diagonal (upper), else zero. */
typedef struct nk_triangle_params {
  int64_t diagonal;
  int32_t upper;
  int32_t reserved;
} nk_triangle_params;

/* NK_KERNEL_PAD: operands [0] out, [1] in (same dtype and ndim; the last
 * `nd` (1..3) dims padded, the others equal).  Output index o of padded dim
 * d reads input index o - before[d'] (d' = d - (ndim - nd)), mapped back
 * into [0, n): reflected (-1 -> 1, n -> n - 2) or clamped (replicate). */
/* NK_KERNEL_PAD_BACKWARD: operands [0] grad_in (the input's shape), [1]
 * grad_out (the padded shape); nk_pad_params as the forward.  grad_in is
 * overwritten: each element gets the sum (in double, rounded once) of the
 * grad_out elements the forward copied from it. */
typedef enum nk_pad_mode { NK_PAD_REFLECT = 0, NK_PAD_REPLICATE, NK_PAD_MODE_COUNT } nk_pad_mode;
typedef struct nk_pad_params {
  int32_t mode; /* nk_pad_mode */
  int32_t nd;
  int64_t before[3];
} nk_pad_params;

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
