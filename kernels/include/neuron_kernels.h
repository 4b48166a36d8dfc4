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
  NK_KERNEL_GEMM,     /* out <- alpha * a @ b + beta * out (batched)       */
  /* pointwise */
  NK_KERNEL_POINTWISE, /* out <- op(a[, b[, c]]) with scalar params       */
  /* unary */
  NK_KERNEL_UNARY,          /* out <- op(x)      (nk_unary_op)             */
  NK_KERNEL_UNARY_BACKWARD, /* out <- op(a, b)   (nk_unary_backward_op)    */
  /* reduce */
  NK_KERNEL_REDUCE,   /* out(s) <- reduction of in over out's stride-0 dims */
  NK_KERNEL_SCAN,     /* out(s) <- cumulative op of in along one dim      */
  NK_KERNEL_SOFTMAX,  /* (log_)softmax forward/backward along one dim     */
  /* index */
  NK_KERNEL_GATHER_SCATTER, /* along one dim with an index operand (gather,
                               scatter*, index_select/add/copy/fill)     */
  NK_KERNEL_INDEX,          /* advanced indexing: index / index_put / take / put */
  NK_KERNEL_MASKED,         /* masked_fill, masked_scatter, masked_select,
                               nonzero (count and coordinates)           */
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

  /* convolution */

  /* pooling and upsampling */

  /* normalisation */
  NK_KERNEL_NORM,          /* layer/rms/group norm over rows, batch norm over channels */
  NK_KERNEL_NORM_BACKWARD, /* their input, weight and bias gradients            */

  /* attention */

  /* losses */

  /* special functions */

  /* long tail */

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

/* GEMM.  operands: [0] out (batch, m, n), [1] a (batch, m, k), [2] b
 * (batch, k, n): 3-d, one dtype, any byte strides (a transposed or
 * broadcast matrix is only strides, never a copy).
 * out <- alpha * (a @ b) + beta * out; beta == 0 does not read out (BLAS's
 * rule: NaN in out does not propagate).  Accumulates in float32 for
 * float16/bfloat16/float32, float64 for float64, wrapping int64 for the
 * integer dtypes; bool is refused.  The result does not depend on the thread
 * count. */
typedef struct nk_gemm_params {
  nk_scalar alpha, beta;
} nk_gemm_params;
/* pointwise: the elementwise ops beyond add/sub/mul/div, one kernel.
 *
 * operands: [0] out, then the op's inputs (1, 2 or 3 of them, as listed).
 * Each input is converted on load to `compute` (ATen's common dtype) --
 * integers wrapped to its width, floats rounded to its precision -- so a
 * mixed-dtype or wrapped-scalar operand behaves as if ATen had cast it; the
 * op runs in compute's class (float16/bfloat16 in float32) and the result,
 * rounded to compute, is stored in out's dtype.  Predicates (comparisons,
 * logical ops) give 0/1 in compute, so a bool out reads them as bool.
 * Integer division/remainder by zero fails the task with
 * "ZeroDivisionError" (what ATen's CPU raises); INT64_MIN / -1 wraps. */
typedef enum nk_pointwise_op {
  /* a, b */
  NK_PW_POW = 0,     /* integers: ATen's powi (negative exponents give 0, +-1) */
  NK_PW_REMAINDER,   /* Python's %: sign of b                                 */
  NK_PW_FMOD,        /* C's fmod / %: sign of a                               */
  NK_PW_DIV_TRUNC,
  NK_PW_DIV_FLOOR,
  NK_PW_MAXIMUM,     /* NaN propagating                                       */
  NK_PW_MINIMUM,
  NK_PW_FMAX,        /* NaN ignoring                                          */
  NK_PW_FMIN,
  NK_PW_ATAN2,       /* floating compute only, like the next three            */
  NK_PW_HYPOT,
  NK_PW_COPYSIGN,
  NK_PW_XLOGY,       /* a * log(b); 0 where a == 0; NaN where b is NaN        */
  NK_PW_NEXTAFTER,   /* steps in compute's own format (float16/bfloat16 too)  */
  NK_PW_EQ,
  NK_PW_NE,
  NK_PW_LT,
  NK_PW_LE,
  NK_PW_GT,
  NK_PW_GE,
  NK_PW_LOGICAL_AND,
  NK_PW_LOGICAL_OR,
  NK_PW_LOGICAL_XOR,
  NK_PW_BITWISE_AND, /* integral or bool compute only, like the next four     */
  NK_PW_BITWISE_OR,
  NK_PW_BITWISE_XOR,
  NK_PW_LSHIFT,      /* 0 when b < 0 or b >= compute's width                   */
  NK_PW_RSHIFT,      /* sign fill (0 for uint8) when b < 0 or b too large      */
  NK_PW_LERP_SCALAR, /* a + s0 * (b - a), ATen's two-sided formula            */
  NK_PW_LOGADDEXP,   /* log(exp(a) + exp(b)), floating only like the next two */
  NK_PW_LOGADDEXP2,
  NK_PW_XLOG1PY,     /* a * log1p(b); 0 where a == 0; NaN where b is NaN      */
  NK_PW_HEAVISIDE,   /* a == 0 ? b : a > 0                                    */
  NK_PW_GCD,         /* integral only, like lcm; ATen's calc_gcd               */
  NK_PW_LCM,
  /* a */
  NK_PW_POW_SCALAR,       /* pow(a, s0)                                       */
  NK_PW_CLAMP_SCALAR,     /* min(max(a, s0), s1)                              */
  NK_PW_CLAMP_MIN_SCALAR, /* max(a, s0)                                       */
  NK_PW_CLAMP_MAX_SCALAR, /* min(a, s0)                                       */
  /* a, b, c */
  NK_PW_WHERE,   /* a (read as bool) ? b : c, each converted straight to out  */
  NK_PW_CLAMP,   /* min(max(a, b), c); NaN where any is NaN                   */
  NK_PW_LERP,    /* weight c                                                  */
  NK_PW_ADDCMUL, /* a + s0 * b * c                                            */
  NK_PW_ADDCDIV, /* a + s0 * b / c (floating compute only)                    */
  NK_PW_OP_COUNT
} nk_pointwise_op;

/* s0/s1 are in compute's terms: f for floating compute, i otherwise. */
typedef struct nk_pointwise_params {
  int32_t op;      /* nk_pointwise_op */
  int32_t compute; /* nrt_dtype       */
  nk_scalar s0, s1;
} nk_pointwise_params;
/* unary ------------------------------------------------------------------
 * NK_KERNEL_UNARY: operands [0] out, [1] x.  The math is done in `compute`
 * (ATen's common dtype; float16/bfloat16 in float32, rounded to the compute
 * dtype once), the result is stored in out's dtype.  Each op says which
 * compute classes it takes (F = floating, I = integral, B = bool); another
 * class is an error naming the op.  Predicates (P) compute on x's own dtype
 * (compute = x's dtype) and store 0/1 in any out dtype.
 * Parameters are p[0..2] (floating compute reads .f, integral reads .i). */
typedef enum nk_unary_op {
  NK_UNARY_ABS = 0,   /* FIB (bool: x)                                     */
  NK_UNARY_NEG,       /* FI  (integers wrap)                               */
  NK_UNARY_SIGN,      /* FIB (NaN -> 0, bool: x)                           */
  NK_UNARY_EXP,       /* F from here to LGAMMA unless said otherwise       */
  NK_UNARY_EXP2,
  NK_UNARY_EXPM1,
  NK_UNARY_LOG,
  NK_UNARY_LOG2,
  NK_UNARY_LOG10,
  NK_UNARY_LOG1P,
  NK_UNARY_SQRT,
  NK_UNARY_RSQRT,
  NK_UNARY_RECIPROCAL,
  NK_UNARY_SIN,
  NK_UNARY_COS,
  NK_UNARY_TAN,
  NK_UNARY_ASIN,
  NK_UNARY_ACOS,
  NK_UNARY_ATAN,
  NK_UNARY_SINH,
  NK_UNARY_COSH,
  NK_UNARY_TANH,
  NK_UNARY_ASINH,
  NK_UNARY_ACOSH,
  NK_UNARY_ATANH,
  NK_UNARY_SIGMOID,
  NK_UNARY_LOGIT,     /* p0 = eps (< 0 or NaN: none): log(x / (1 - x))     */
  NK_UNARY_ERF,
  NK_UNARY_ERFC,
  NK_UNARY_ERFINV,
  NK_UNARY_LGAMMA,
  NK_UNARY_DIGAMMA,
  NK_UNARY_FLOOR,     /* F; integers are copied by the caller              */
  NK_UNARY_CEIL,
  NK_UNARY_ROUND,     /* half to even                                      */
  NK_UNARY_ROUND_DECIMALS, /* p0.i = decimals                              */
  NK_UNARY_TRUNC,
  NK_UNARY_FRAC,      /* x - trunc(x)                                      */
  NK_UNARY_RELU,      /* FI  x < 0 ? 0 : x (NaN stays)                     */
  NK_UNARY_CLAMP,     /* FI  min(max(x, p0), p1), NaN stays (hardtanh)     */
  NK_UNARY_GELU,      /* x * Phi(x), erf form                              */
  NK_UNARY_GELU_TANH, /* the tanh approximation                            */
  NK_UNARY_SILU,
  NK_UNARY_MISH,
  NK_UNARY_SOFTPLUS,  /* p0 = beta, p1 = threshold                         */
  NK_UNARY_ELU,       /* p0 = alpha, p1 = scale, p2 = input_scale          */
  NK_UNARY_LEAKY_RELU, /* p0 = negative slope                              */
  NK_UNARY_HARDSIGMOID,
  NK_UNARY_HARDSWISH,
  NK_UNARY_NAN_TO_NUM, /* p0 = nan, p1 = posinf, p2 = neginf replacements  */
  NK_UNARY_SINC,      /* sin(pi x) / (pi x), 1 at 0                        */
  NK_UNARY_HARDSHRINK, /* p0 = lambda: |x| <= lambda ? 0 : x               */
  NK_UNARY_SOFTSHRINK, /* p0 = lambda                                      */
  NK_UNARY_LOG_SIGMOID,
  NK_UNARY_POLYGAMMA, /* p0.i = n >= 0 (0: digamma, 1: trigamma)           */
  NK_UNARY_BITWISE_NOT, /* IB                                              */
  NK_UNARY_ISNAN,     /* P from here on                                    */
  NK_UNARY_ISINF,
  NK_UNARY_ISPOSINF,
  NK_UNARY_ISNEGINF,
  NK_UNARY_ISFINITE,
  NK_UNARY_SIGNBIT,
  NK_UNARY_LOGICAL_NOT,
  NK_UNARY_OP_COUNT
} nk_unary_op;

/* NK_KERNEL_UNARY_BACKWARD: operands [0] out, [1] a, [2] b, in the order
 * of ATen's iterator for the op (named below); floating compute only,
 * except THRESHOLD (FI). */
typedef enum nk_unary_backward_op {
  NK_UNARY_BW_SIGMOID = 0, /* a = grad, b = y: a * (1 - y) * y             */
  NK_UNARY_BW_TANH,        /* a = grad, b = y: a * (1 - y * y)             */
  NK_UNARY_BW_LOGIT,       /* a = grad, b = x; p0 = eps (< 0: none)        */
  NK_UNARY_BW_GELU,        /* a = grad, b = x                              */
  NK_UNARY_BW_GELU_TANH,   /* a = grad, b = x                              */
  NK_UNARY_BW_SILU,        /* a = grad, b = x                              */
  NK_UNARY_BW_MISH,        /* a = grad, b = x                              */
  NK_UNARY_BW_SOFTPLUS,    /* a = grad, b = x; p0 = beta, p1 = threshold   */
  NK_UNARY_BW_ELU,         /* a = grad, b = x; p = alpha, scale, input_scale */
  NK_UNARY_BW_ELU_RESULT,  /* a = grad, b = elu's result; p as ELU         */
  NK_UNARY_BW_LEAKY_RELU,  /* a = x (or result), b = grad; p0 = slope      */
  NK_UNARY_BW_HARDTANH,    /* a = grad, b = x; p0 = min, p1 = max          */
  NK_UNARY_BW_HARDSIGMOID, /* a = grad, b = x                              */
  NK_UNARY_BW_HARDSWISH,   /* a = grad, b = x                              */
  NK_UNARY_BW_THRESHOLD,   /* a = x, b = other: x <= p0 ? p1 : other (FI)  */
  NK_UNARY_BW_SHRINK,      /* a = grad, b = x; p0 = lambda                 */
  NK_UNARY_BW_LOG_SIGMOID, /* a = grad, b = x                              */
  NK_UNARY_BW_OP_COUNT
} nk_unary_backward_op;

typedef struct nk_unary_params {
  int32_t op;      /* nk_unary_op / nk_unary_backward_op */
  int32_t compute; /* nrt_dtype */
  nk_scalar p[3];
} nk_unary_params;
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

/* reduce ------------------------------------------------------------------
 *
 * NK_KERNEL_REDUCE takes a reduction as ATen's TensorIterator describes it:
 * every operand has the same ndim and sizes (the input's); operand 0 has
 * stride 0 along the reduced dims (and only there, for sizes > 1), and so
 * has operand 1 when the op has two outputs.  operands: [0] out, [1] second
 * out (ARGMAX/ARGMIN-style index of MAX_INDEX/MIN_INDEX, the mean of VAR
 * when present), last = in.
 *
 * Accumulation: float16/bfloat16/float32 inputs sum in float32 (pairwise:
 * blocks with independent accumulators, blocks combined as a binary tree),
 * float64 in float64, integers and bool in int64 wrapping (the out dtype's
 * wrap is the same ring).  VAR is Welford/Chan in float64 (as ATen's CPU).
 * Results never depend on the thread count: work is split over outputs, or,
 * for few outputs with long reductions, over fixed-size chunks of the
 * reduced range that are combined in order.
 * MAX/MIN propagate NaN; the index ops give the first extreme (the first
 * NaN if any), counted row-major over the reduced dims in tensor order.
 * An empty reduced range writes the identity (sum 0, prod 1, all true, any
 * false, norm 0 (inf for p < 0), mean/var NaN); MAX/MIN and the index ops
 * have none and fail. */
typedef enum nk_reduce_op {
  NK_REDUCE_SUM = 0,
  NK_REDUCE_NANSUM,        /* NaN counts as 0                              */
  NK_REDUCE_MEAN,          /* sum / count in the accumulation dtype         */
  NK_REDUCE_PROD,
  NK_REDUCE_MAX,           /* amax / max()                                  */
  NK_REDUCE_MIN,
  NK_REDUCE_ARGMAX,        /* [0] int64 index                               */
  NK_REDUCE_ARGMIN,
  NK_REDUCE_MAX_INDEX,     /* [0] value, [1] int64 index (max.dim)          */
  NK_REDUCE_MIN_INDEX,
  NK_REDUCE_ALL,
  NK_REDUCE_ANY,
  NK_REDUCE_NORM,          /* vector norm of order p (0, 1, 2, +-inf, any)  */
  NK_REDUCE_VAR,           /* var (std with take_sqrt); [1] mean if present */
  NK_REDUCE_COUNT_NONZERO, /* int64 count of x != 0                         */
  NK_REDUCE_OP_COUNT
} nk_reduce_op;

typedef struct nk_reduce_params {
  int32_t op;        /* nk_reduce_op */
  int32_t take_sqrt; /* VAR: std     */
  double p;          /* NORM order   */
  double correction; /* VAR: divisor is max(0, n - correction) */
} nk_reduce_params;

/* NK_KERNEL_SCAN: operands [0] out, [1] indices (int64; CUMMAX/CUMMIN
 * only), last = in; all of the same sizes.  The scan runs along `dim`.
 * Accumulation as ATen's CPU: float32 cumsum/cumprod in float64, 16-bit
 * floats in float32, integers in int64.  CUMMAX/CUMMIN take the latest
 * index among equal values and propagate NaN (its index sticks). */
typedef enum nk_scan_op {
  NK_SCAN_CUMSUM = 0,
  NK_SCAN_CUMPROD,
  NK_SCAN_CUMMAX,
  NK_SCAN_CUMMIN,
  NK_SCAN_LOGCUMSUMEXP,
  NK_SCAN_OP_COUNT
} nk_scan_op;

typedef struct nk_scan_params {
  int32_t op; /* nk_scan_op */
  int32_t dim;
} nk_scan_params;

/* NK_KERNEL_SOFTMAX along `dim` (an ndim-0 operand is one element):
 *   forward:  [0] out, [1] in;           out = softmax(in) or log_softmax(in)
 *   backward: [0] grad_in, [1] grad_out, [2] out (the forward's result);
 *             softmax:     grad_in = out * (grad_out - sum(grad_out * out))
 *             log_softmax: grad_in = grad_out - exp(out) * sum(grad_out)
 * Each operand has its own dtype; 16-bit floats compute in float32. */
typedef struct nk_softmax_params {
  int32_t dim;
  int32_t log;      /* log_softmax */
  int32_t backward;
  int32_t reserved;
} nk_softmax_params;

/* ---- convolution ---- */

/* ---- pooling and upsampling ---- */

/* ---- normalisation ---- */
/* NK_KERNEL_NORM / NK_KERNEL_NORM_BACKWARD.  An optional operand given as
 * an empty tensor (numel 0) means None (no weight, no bias, no running
 * stats, an output not wanted).  Each operand has its own dtype (16-bit
 * floats compute in float32, float32 and float64 in their own precision,
 * statistics are accumulated in float64).
 *
 * Row kinds (LAYER, RMS, GROUP): x is [R, L]; row r is normalised over its
 * L elements.  Weight/bias index of element (r, l): LAYER/RMS: l (W = L);
 * GROUP: (r % groups) * (L / hw) + l / hw (W = channels; rows are
 * (n, group), hw = HxW).
 *   forward:  [0] y [R, L], [1] mean [R] (empty for RMS), [2] rstd [R],
 *             [3] x [R, L], [4] weight [W], [5] bias [W] (empty for RMS)
 *             y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps)
 *             (biased var; RMS: rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * w)
 *   backward: [0] dx [R, L], [1] dweight [W], [2] dbias [W], [3] dy [R, L],
 *             [4] x, [5] mean [R] (empty for RMS), [6] rstd [R], [7] weight [W]
 *
 * BATCH: x is [N, C, S] (S = product of the spatial dims, any strides, so
 * channels_last too); channel c is normalised over its N * S elements.
 *   forward:  [0] y, [1] save_mean [C], [2] save_invstd [C], [3] x,
 *             [4] weight [C], [5] bias [C], [6] running_mean [C],
 *             [7] running_var [C].  training: batch statistics, saved, and
 *             the running stats (when given) updated in place:
 *             r = (1 - momentum) * r + momentum * stat, the variance
 *             unbiased (N*S/(N*S-1)).  Not training: mean = running_mean,
 *             invstd = 1 / sqrt(running_var + eps); save_* are empty.
 *   backward: [0] dx, [1] dweight [C], [2] dbias [C], [3] dy [N, C, S],
 *             [4] x, [5] mean [C], [6] training ? invstd [C] : running var [C],
 *             [7] weight [C]. */
typedef enum nk_norm_kind {
  NK_NORM_LAYER = 0,
  NK_NORM_RMS,
  NK_NORM_GROUP,
  NK_NORM_BATCH,
  NK_NORM_KIND_COUNT
} nk_norm_kind;

typedef struct nk_norm_params {
  int32_t kind;     /* nk_norm_kind */
  int32_t training; /* BATCH: batch statistics (forward), invstd given (backward) */
  int64_t groups;   /* GROUP: groups per sample */
  int64_t hw;       /* GROUP: elements per channel in a row */
  double eps;
  double momentum;  /* BATCH training forward */
} nk_norm_params;

/* ---- attention ---- */

/* ---- losses ---- */

/* ---- special functions ---- */

/* ---- long tail ---- */

typedef enum nk_isa { NK_ISA_PORTABLE = 0, NK_ISA_AVX2, NK_ISA_AVX512 } nk_isa;
nk_isa nk_cpu_isa(void);               /* detected once; TORCHNEURON_ISA=portable|avx2|avx512 caps it */
const char *nk_isa_name(nk_isa isa);

/* Registers every kernel id above with the runtime.  Idempotent. */
nrt_status nk_register_kernels(void);

#ifdef __cplusplus
}
#endif
#endif /* NEURON_KERNELS_H */
