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
  NK_KERNEL_CONV, /* convolution forward/backward, im2col, col2im (nk_conv_mode) */

  /* pooling and upsampling */
  NK_KERNEL_POOL,              /* max/avg/adaptive pooling forward, 1-3 spatial dims */
  NK_KERNEL_POOL_SCATTER,      /* pooling backward, max_unpool: scatter into a plane */
  NK_KERNEL_UPSAMPLE,          /* nearest(-exact)/linear/cubic resampling forward    */
  NK_KERNEL_UPSAMPLE_BACKWARD, /* grad_in <- adjoint of NK_KERNEL_UPSAMPLE           */

  /* normalisation */
  NK_KERNEL_NORM,          /* layer/rms/group norm over rows, batch norm over channels */
  NK_KERNEL_NORM_BACKWARD, /* their input, weight and bias gradients            */

  /* attention */
  NK_KERNEL_ATTENTION, /* fused scaled-dot-product attention (flash), fwd/bwd */

  /* losses */
  NK_KERNEL_LOSS_POINTWISE, /* out <- elementwise loss or its gradient (nk_loss_op) */
  NK_KERNEL_NLL_LOSS,       /* nll_loss / nll_loss2d forward and backward         */
  NK_KERNEL_MULTI_MARGIN,   /* multi_margin_loss forward and backward             */

  /* special functions */

  /* optimizer */
  NK_KERNEL_FOREACH,          /* one op over every tensor of a list (nk_foreach_op) */
  NK_KERNEL_FUSED_OPTIM,      /* Adam/AdamW/SGD/Adagrad step over lists (nk_optim_op) */
  NK_KERNEL_AMP_UPDATE_SCALE, /* GradScaler: scale, growth tracker <- f(found_inf) */

  /* long tail */
  NK_KERNEL_ORGQR, /* Q <- product of Householder reflectors (householder_product) */
  NK_KERNEL_LU,    /* LU factorisation with partial pivoting, and solves with it (nk_lu_op) */
  NK_KERNEL_TAIL_POINTWISE, /* glu, prelu, renorm factor, frexp, cross (nk_tail_op) */
  NK_KERNEL_UNFOLD_BACKWARD, /* grad_input <- sum of unfold's windows over it */
  NK_KERNEL_HISTOGRAM,       /* hist <- (weighted) counts of input rows in bins  */
  NK_KERNEL_LOGSPACE,        /* out (1-d) [i] <- base ^ (linspace exponent)     */
  NK_KERNEL_DIST,            /* cdist / pdist p-norm distances and backward    */
  NK_KERNEL_EMBEDDING_BAG,   /* embedding_bag forward and backward (nk_embedding_bag_op) */

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
 * (batch, k, n), optionally [3] c (batch, m, n): 3-d, one dtype, any byte
 * strides (a transposed or broadcast matrix is only strides, never a copy;
 * addmm's bias is a c with row stride 0).
 * out <- alpha * (a @ b) + beta * out, or with c: out <- alpha * (a @ b) +
 * beta * c (out not read; c must not overlap out).  beta == 0 does not read
 * out or c (BLAS's rule: NaN there does not propagate).  Accumulates in float32 for
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
  NK_PW_IGAMMA,      /* regularised lower incomplete gamma P(a, b); floating */
  NK_PW_IGAMMAC,     /* upper Q(a, b); floating like the rest of this block   */
  NK_PW_ZETA,        /* Hurwitz zeta(a, b)                                    */
  NK_PW_CHEBYSHEV_T, /* polynomial of degree b (int64 of b, as ATen) at a     */
  NK_PW_CHEBYSHEV_U,
  NK_PW_CHEBYSHEV_V,
  NK_PW_CHEBYSHEV_W,
  NK_PW_SHIFTED_CHEBYSHEV_T,
  NK_PW_SHIFTED_CHEBYSHEV_U,
  NK_PW_SHIFTED_CHEBYSHEV_V,
  NK_PW_SHIFTED_CHEBYSHEV_W,
  NK_PW_HERMITE_H,
  NK_PW_HERMITE_HE,
  NK_PW_LAGUERRE_L,
  NK_PW_LEGENDRE_P,
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
  NK_UNARY_I0,        /* F from here to SPHERICAL_BESSEL_J0: ATen's Math.h */
  NK_UNARY_I0E,       /* (special.c); float16/bfloat16 in float32          */
  NK_UNARY_I1,
  NK_UNARY_I1E,
  NK_UNARY_NDTRI,
  NK_UNARY_LOG_NDTR,
  NK_UNARY_ERFCX,
  NK_UNARY_ENTR,      /* -x log x; 0 at 0; -inf below                      */
  NK_UNARY_AIRY_AI,
  NK_UNARY_BESSEL_J0,
  NK_UNARY_BESSEL_J1,
  NK_UNARY_BESSEL_Y0,
  NK_UNARY_BESSEL_Y1,
  NK_UNARY_MODIFIED_BESSEL_I0,
  NK_UNARY_MODIFIED_BESSEL_I1,
  NK_UNARY_MODIFIED_BESSEL_K0,
  NK_UNARY_MODIFIED_BESSEL_K1,
  NK_UNARY_SCALED_MODIFIED_BESSEL_K0,
  NK_UNARY_SCALED_MODIFIED_BESSEL_K1,
  NK_UNARY_SPHERICAL_BESSEL_J0,
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
  NK_SORT_NANMEDIAN, /* the lower median of the non-NaN values; the first
                        NaN when the slice has only NaNs (torch.nanmedian) */
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

/* NK_KERNEL_CONV: a convolution of nd (1..3) spatial dims, ATen's geometry:
 * x (N, C, I...), w (O, C/groups, K...), y (N, O, L...), each output
 * position o reading input o * stride - padding + k * dilation (positions
 * outside [0, I) are zeros).  Transposed convolution is the same geometry
 * with the roles swapped (the glue maps it: its forward is BACKWARD_INPUT).
 *   FORWARD:         [0] y, [1] x, [2] w, optional [3] bias (O): y = conv(x, w) + bias
 *   BACKWARD_INPUT:  [0] dx, [1] dy, [2] w: dx = conv^T(dy, w) (overwritten)
 *   BACKWARD_WEIGHT: [0] dw, [1] dy, [2] x: dw = sum over n, l of dy x (overwritten)
 *   IM2COL:          [0] col (N, C * prod(kernel), L), [1] x (N, C, I...)
 *   COL2IM:          [0] x (N, C, I...) (overwritten), [1] col as IM2COL's
 * For IM2COL/COL2IM the kernel sizes come from `kernel` and L is the product
 * of the output sizes the geometry gives; elsewhere from the operands.
 * Operands share one dtype: float32, float64, float16, bfloat16 (16-bit
 * computed in float32 and rounded once on store).  Any strides. */
typedef enum nk_conv_mode {
  NK_CONV_FORWARD = 0,
  NK_CONV_BACKWARD_INPUT,
  NK_CONV_BACKWARD_WEIGHT,
  NK_CONV_IM2COL,
  NK_CONV_COL2IM,
  NK_CONV_MODE_COUNT
} nk_conv_mode;
typedef struct nk_conv_params {
  int32_t mode; /* nk_conv_mode */
  int32_t nd;   /* spatial dims, 1..3 */
  int64_t groups;
  int64_t stride[3], padding[3], dilation[3];
  int64_t kernel[3]; /* IM2COL / COL2IM */
} nk_conv_params;

/* ---- pooling and upsampling ---- */
/* Every operand is 5-d (N, C, D, H, W), any byte strides (channels_last is
 * only strides); 1-d and 2-d ops are given with size-1 D (and H) dims, whose
 * window is 1 (kernel 1, stride 1, pad 0, dilation 1).  A (n, c) pair is a
 * plane; a max index is the flat position d * H * W + h * W + w in the
 * input plane, as ATen stores it.  Results never depend on the thread
 * count: forward outputs are independent, backward work is split over
 * planes only and each plane accumulates in one fixed order (the CPU's).
 * float16/bfloat16 compute in float32, float64 in float64.
 *
 * NK_KERNEL_POOL (forward):
 *   MAX, ADAPTIVE_MAX: [0] out, [1] indices (int64, out's sizes), [2] in;
 *                      floating and integral dtypes; NaN wins (the last NaN
 *                      of the window, as ATen's `val > max || isnan(val)`).
 *   AVG, ADAPTIVE_AVG: [0] out, [1] in; AVG also integral (int64 sum,
 *                      truncating division), ADAPTIVE_AVG floating only.
 * MAX: window o * stride - pad + k * dilation (k < kernel), clipped to the
 * input.  AVG: ATen's window and divisor (count_include_pad,
 * divisor_override != 0), an empty clipped window gives 0.  ADAPTIVE_*:
 * window [floor(o * I / O), ceil((o + 1) * I / O)), average = sum / kd /
 * kh / kw.
 *
 * NK_KERNEL_POOL_SCATTER: out (operand 0) is overwritten; floating only
 * except UNPOOL.
 *   MAX, ADAPTIVE_MAX: [0] grad_in, [1] grad_out, [2] indices (int64,
 *       grad_out's sizes): grad_in[index] += grad_out; an index outside the
 *       input plane fails the task (nothing is written out of bounds).
 *   AVG, ADAPTIVE_AVG: [0] grad_in, [1] grad_out: each grad_out / divisor
 *       added to its window (the forward's window and divisor).
 *   UNPOOL: [0] out, [1] in, [2] indices (in's sizes): out = 0, then
 *       out[index] = in in row-major order (the last duplicate wins); any
 *       dtype; an index outside the output plane fails the task with ATen's
 *       "Found an invalid max index". */
typedef enum nk_pool_mode {
  NK_POOL_MAX = 0,
  NK_POOL_AVG,
  NK_POOL_ADAPTIVE_AVG,
  NK_POOL_ADAPTIVE_MAX,
  NK_POOL_UNPOOL,
  NK_POOL_MODE_COUNT
} nk_pool_mode;

typedef struct nk_pool_params {
  int32_t mode;              /* nk_pool_mode */
  int32_t count_include_pad; /* AVG */
  int64_t divisor_override;  /* AVG: != 0 replaces the divisor; 0 none */
  int64_t kernel[3], stride[3], pad[3], dilation[3]; /* d, h, w (MAX/AVG) */
  int32_t nd;                /* UNPOOL: the op's spatial dims (error text) */
  int32_t reserved;
} nk_pool_params;

/* NK_KERNEL_UPSAMPLE: [0] out (N, C, OD, OH, OW), [1] in (N, C, D, H, W).
 * NK_KERNEL_UPSAMPLE_BACKWARD: [0] grad_in (N, C, D, H, W, overwritten),
 * [1] grad_out (N, C, OD, OH, OW).  Only the last nd spatial dims are
 * resampled (the others must be equal).  Source indices and weights are
 * ATen's (UpSample.h) in ATen's precision: nearest/nearest-exact in float
 * (compute_scales_value<float>), linear/cubic in the op math type (double
 * for float64, float otherwise), area_pixel_compute_scale with align_corners
 * and the optional scale (has_scale, scale > 0: 1 / scale), the guard of
 * guard_index_and_lambda (floorf, lambda clamped to [0, 1]).  Linear and
 * cubic sum the taps dim by dim, the outermost dim last (ATen's separable
 * Interpolate order).  NEAREST(_EXACT) forward copies elements (any dtype);
 * LINEAR/CUBIC are floating only.  CUBIC is 2-d (A = -0.75, indices
 * clamped to the input); its backward uses the CPU backward's own
 * (unguarded) index and order. */
typedef enum nk_upsample_mode {
  NK_UPSAMPLE_NEAREST = 0,
  NK_UPSAMPLE_NEAREST_EXACT,
  NK_UPSAMPLE_LINEAR,
  NK_UPSAMPLE_CUBIC,
  NK_UPSAMPLE_MODE_COUNT
} nk_upsample_mode;

typedef struct nk_upsample_params {
  int32_t mode; /* nk_upsample_mode */
  int32_t nd;   /* 1..3 */
  int32_t align_corners;
  int32_t has_scale[3]; /* d, h, w */
  int32_t reserved;
  double scale[3];      /* the op's scale factors (output / input) */
} nk_upsample_params;

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
/* NK_KERNEL_ATTENTION: softmax(scale * q k^T + mask) v, tiled (online
 * softmax; the L x S matrix is never stored), and its backward.
 * Shapes: q (B, Hq, L, D), k (B, Hkv, S, D), v (B, Hkv, S, Dv) with
 * Hq % Hkv == 0 (query head h reads key/value head h / (Hq / Hkv));
 * mask (B, Hq, L, S), broadcast by stride 0: floating (added to the scores)
 * or bool (false hides the key).  Any byte strides, any floating dtype
 * (16-bit compute in float32, float64 in float64).
 *   FORWARD:     [0] out (B, Hq, L, Dv), [1] lse (B, Hq, L), [2] q, [3] k,
 *                [4] v, [5] mask (has_mask).  lse = log-sum-exp of the
 *                scores, +inf for a row whose keys are all hidden (its out
 *                row is 0, as ATen's _safe_softmax).
 *   BACKWARD_KV: [0] dk, [1] dv, [2] dout, [3] q, [4] k, [5] v,
 *                [6] stats (2, B, Hq, L): [0] lse, [1] delta = rowsum(dout * out),
 *                [7] mask (has_mask).
 *   BACKWARD_Q:  [0] dq, [1] dbias (B, Hq, L, S; written when has_dbias,
 *                else ignored), [2..7] as BACKWARD_KV.
 *   BACKWARD:    dq, dk and dv in one pass over (batch, kv head, key
 *                chunk) units (no dbias, no mask): [0] dq, [1] dk, [2] dv, [3] dout,
 *                [4] q, [5] k, [6] v, [7] stats as BACKWARD_KV.  Holds the
 *                unit's whole K/V and one head's Q/dO in float: for many
 *                (batch, head) pairs of moderate length.
 * causal hides key j > query i (top-left aligned, as ATen).  Dropout (p >
 * 0): element (b, h, i, j) is kept iff word idx % 4 of Philox4x32-10 block
 * offset/4 + idx/4 under seed is >= p * 2^32, idx = ((b*Hq + h)*L + i)*S + j;
 * kept weights are scaled by 1/(1-p).  Backward regenerates the same mask.
 * Work splits over (batch, head, query block) (forward, dQ) and (batch,
 * kv head, key block) (dK, dV): every output element is written by one
 * unit in a fixed order, so results never depend on the thread count. */
/* The one-pass backward (BACKWARD) splits each (batch, kv head) into this
 * many chunks of its keys: enough units to feed 8 threads, at most one
 * chunk per 64-key block.  A function of the shape alone, so the results
 * never depend on the thread count; each chunk's dQ is a partial sum,
 * added in chunk order.  Each chunk loads its heads' Q and dO again, so
 * chunks cost: B1 H8 S512 D64 forward+backward on 2 threads took 7-15%
 * longer as 16 units of half the keys than as 8 whole ones.  8 threads is
 * the compromise between a 2-core machine and a larger one.  The op layer
 * uses it to choose the one-pass form. */
static inline int64_t nk_attention_key_chunks(int64_t units, int64_t S) {
  const int64_t blocks = (S + 63) / 64;
  int64_t c = units >= 8 || units <= 0 ? 1 : (8 + units - 1) / units;
  if (c > blocks) c = blocks;
  if (c <= 1) return 1;
  const int64_t per = (blocks + c - 1) / c; /* key blocks per chunk */
  return (blocks + per - 1) / per;         /* the chunks those make */
}
/* Whether a backward without a mask takes the one-pass form: its units
 * (pairs x key chunks) are enough for 8 threads, a unit's float buffers
 * (the whole K/V, one head's Q/dO, rows and transposed) stay within 16
 * MiB and the chunks' dQ partial sums (float, D x L padded) within 64 MiB.
 * Shape rules only: the choice, and so the results, never depend on the
 * thread count.  Forward+backward on Zen 3 (AVX2), two passes / one: B1
 * H8 S512 D64 17.8 / 14.9 ms, B1 H4 (2 chunks) 9.3 / 8.3. */
static inline int nk_attention_one_pass(int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S,
                                        int64_t D, int64_t Dv) {
  const int64_t chunks = nk_attention_key_chunks(B * Hkv, S);
  const double unit_bytes = 8.0 * (double)((L + S) * (D + Dv) * 3);
  const double part_bytes = chunks > 1 ? 4.0 * (double)(B * Hq * chunks * D * (L + 16)) : 0;
  return B * Hkv * chunks >= 8 && unit_bytes <= 16.0 * 1024 * 1024 && part_bytes <= 64.0 * 1024 * 1024;
}
typedef enum nk_attention_mode {
  NK_ATTENTION_FORWARD = 0,
  NK_ATTENTION_BACKWARD_KV,
  NK_ATTENTION_BACKWARD_Q,
  NK_ATTENTION_BACKWARD,
  NK_ATTENTION_MODE_COUNT
} nk_attention_mode;
typedef struct nk_attention_params {
  int32_t mode; /* nk_attention_mode */
  int32_t causal;
  int32_t has_mask;
  int32_t has_dbias;
  double scale;
  double dropout_p;
  uint64_t seed, offset;
} nk_attention_params;

/* ---- losses ---- */
/* NK_KERNEL_LOSS_POINTWISE: the elementwise part of a loss, over ATen's
 * TensorIterator operands (same ndim and sizes, stride 0 where broadcast).
 *   forward ops:  [0] out, [1] x (input), [2] y (target)
 *   backward ops: [0] grad_input, [1] x, [2] y, [3] g (grad_output)
 * Floating compute only (`compute` is ATen's common dtype; float16/bfloat16
 * compute in float32 and round on store).  Inputs of other dtypes are
 * converted on load.  d = x - y below. */
typedef enum nk_loss_op {
  NK_LOSS_MSE = 0,      /* d * d                                                  */
  NK_LOSS_SMOOTH_L1,    /* p0 = beta > 0: |d| < beta ? 0.5 d^2 / beta : |d| - beta/2 */
  NK_LOSS_HUBER,        /* p0 = delta: |d| < delta ? 0.5 d^2 : delta (|d| - delta/2) */
  NK_LOSS_BCE,          /* (y - 1) max(log(1 - x), -100) - y max(log(x), -100);
                           x outside [0, 1] (or NaN) fails the task with
                           "all elements of input should be between 0 and 1"    */
  NK_LOSS_MSE_BW,       /* p0 = norm: norm * d * g                                */
  NK_LOSS_SMOOTH_L1_BW, /* p0 = norm, p1 = beta: norm * (|d| >= beta ? sign(d) : d / beta) * g */
  NK_LOSS_HUBER_BW,     /* p0 = norm, p1 = delta: norm * (|d| >= delta ? sign(d) delta : d) * g */
  NK_LOSS_BCE_BW,       /* g * d / max((1 - x) * x, 1e-12)                        */
  NK_LOSS_OP_COUNT
} nk_loss_op;

typedef struct nk_loss_pointwise_params {
  int32_t op;      /* nk_loss_op */
  int32_t compute; /* nrt_dtype, floating */
  double p0, p1;   /* rounded to compute by the kernel where ATen's CPU does
                      (MSE_BW, HUBER, HUBER_BW: scalar_t parameters) */
} nk_loss_pointwise_params;

/* NK_KERNEL_NLL_LOSS: negative log likelihood over class dim 1 of an
 * [N, C, H, W] input (the glue gives 1-d [C] as [1, C, 1, 1] and 2-d [N, C]
 * as [N, C, 1, 1], stride 0 in the added dims); targets [N, H, W] (int64 or
 * uint8); optional weight [C].
 *   forward:  [0] out ([N, H, W] with reduction none, else 0-dim),
 *             [1] total_weight (0-dim; 0 with reduction none, as ATen's CPU),
 *             [2] input, [3] target, [4] weight
 *   backward: [0] grad_input ([N, C, H, W], every element written),
 *             [1] grad_output ([N, H, W] with none, else 0-dim),
 *             [2] target, [3] total_weight (0-dim), [4] weight
 * A target equal to ignore_index contributes nothing (0 loss, 0 gradient);
 * any other target outside [0, C) fails the task with "Target T is out of
 * bounds." (the first such in row-major order) before it is used.
 * Reductions replay ATen's CPU exactly: one serial pass in row-major order
 * with its 8-level cascade of partial sums, every step rounded to the input
 * dtype (ATen accumulates in scalar_t), so the result is bitwise the CPU's
 * and never depends on the thread count; empty targets give NaN (mean) or
 * 0 (sum) with total_weight 0.  Elementwise work (reduction none, the
 * backward) splits over [N, H] rows, each written by one worker. */
typedef struct nk_nll_loss_params {
  int32_t backward;
  int32_t reduction; /* ATen's Reduction: 0 none, 1 mean, 2 sum */
  int64_t ignore_index;
} nk_nll_loss_params;

/* NK_KERNEL_MULTI_MARGIN: multi-class hinge loss of an [F, D] input (the
 * glue gives a 1-d or 0-d input as [1, D]); targets [F] int64; optional
 * weight [D].  Row f with target t: (1/D) sum over d != t of
 * w[t] * max(0, margin - x[f, t] + x[f, d])^p  (p = 1 or 2).
 *   forward:  [0] out ([F] with reduction none, else 0-dim), [1] input,
 *             [2] target, [3] weight
 *   backward: [0] grad_input ([F, D], every element written), [1]
 *             grad_output ([F] with none, else 0-dim), [2] input, [3]
 *             target, [4] weight
 * Every target is checked first: one outside [0, D) fails the task with
 * "target out of range" (ATen's CPU message) before any is used.  The
 * arithmetic is ATen's CPU's, step by step in the input dtype (rows summed
 * in order), the reduction over rows in double (its accscalar_t), serially
 * in row order after the rows are computed in parallel: bitwise the CPU's
 * result at any thread count. */
typedef struct nk_multi_margin_params {
  int32_t backward;
  int32_t reduction; /* 0 none, 1 mean, 2 sum */
  int32_t p;         /* 1 or 2 */
  int32_t reserved;
  double margin;
} nk_multi_margin_params;

/* ---- special functions ---- */

/* ---- optimizer ---- */
/* Multi-tensor launches (torch's _foreach_* ops, fused optimizers, AMP).
 *
 * A list of any length is one task: the tensors are described by a table of
 * nk_tensor_set rows (params.sets) that the launcher writes into host memory
 * it keeps alive until the task has run (pinned, stream ordered), because a
 * task has at most NRT_MAX_OPERANDS operands.  Row i holds tensor i of every
 * list ("slot" k = list k): the tensors of a row have the same number of
 * elements and the same strides and are non-overlapping and dense, so each
 * is a flat run of numel elements from data[k] (ATen's fast-route rule).
 * A tensor is cut into blocks of NK_FOREACH_BLOCK elements; first_block is
 * the number of blocks of the rows before it (the launcher fills it, the
 * kernel checks it), and blocks are the units split over the compute pool,
 * so results do not depend on the thread count.  After the rows the table
 * holds n_blocks doubles of scratch the kernel owns (per-block partials of
 * reductions, found-inf flags), combined in block order.
 * Task operands: [0] the table as a 1-d uint8 operand of its bytes, [1] a
 * 1-d view of the largest tensor of the list (so the runtime sees the size
 * of the work); the kernel reaches memory only through the table. */
#define NK_FOREACH_BLOCK 32768
#define NK_FOREACH_SLOTS 6

typedef struct nk_tensor_set {
  void *data[NK_FOREACH_SLOTS]; /* slot k: tensor of list k, NULL if unused */
  int64_t numel;                /* elements of each tensor of the row       */
  int64_t first_block;          /* blocks of the rows before this one       */
  double scalar;                /* this row's scalar (ScalarList overloads) */
} nk_tensor_set;

/* Elementwise ops write slot 0 from slots 1.. (an in-place op passes the
 * same pointer in slots 0 and 1).  "b" is slot 2 when params.b_is_list,
 * else the row's scalar s: params.scalar (Scalar overload), the row's
 * scalar (ScalarList) or *scalar_ptr (a device 0-dim tensor).  Math is done
 * in float32 (float16/bfloat16/float32) or float64, as ATen's opmath. */
typedef enum nk_foreach_op {
  NK_FOREACH_ADD = 0,   /* a + alpha * b                                  */
  NK_FOREACH_SUB,       /* a - alpha * b                                  */
  NK_FOREACH_MUL,
  NK_FOREACH_DIV,
  NK_FOREACH_MAXIMUM,   /* NaN propagating (also clamp_min)               */
  NK_FOREACH_MINIMUM,   /* NaN propagating (also clamp_max)               */
  NK_FOREACH_POW,       /* a ^ b (ATen's special exponents 2, 3, .5, -1..) */
  NK_FOREACH_RPOW,      /* b ^ a: pow(Scalar, Tensor[])                   */
  NK_FOREACH_ADDCMUL,   /* a + s * b * c, b slot 2, c slot 3, s the row's */
  NK_FOREACH_ADDCDIV,   /* a + s * b / c                                  */
  NK_FOREACH_LERP,      /* lerp(a, b, w): w slot 3 when b_is_list > 1, else s */
  NK_FOREACH_COPY,      /* a (slot 1 may have another dtype)              */
  NK_FOREACH_ZERO,      /* 0 (slot 0 only)                                */
  NK_FOREACH_NEG,
  NK_FOREACH_ABS,
  NK_FOREACH_SQRT,
  NK_FOREACH_RSQRT,
  NK_FOREACH_EXP,
  NK_FOREACH_EXPM1,
  NK_FOREACH_LOG,
  NK_FOREACH_LOG1P,
  NK_FOREACH_LOG2,
  NK_FOREACH_LOG10,
  NK_FOREACH_RECIPROCAL,
  NK_FOREACH_SIGN,      /* NaN gives 0, as ATen                           */
  NK_FOREACH_SIGMOID,
  NK_FOREACH_TANH,
  NK_FOREACH_SIN,
  NK_FOREACH_COS,
  NK_FOREACH_CEIL,
  NK_FOREACH_FLOOR,
  NK_FOREACH_ROUND,     /* half to even                                   */
  NK_FOREACH_TRUNC,
  NK_FOREACH_FRAC,
  NK_FOREACH_ERF,
  NK_FOREACH_ERFC,
  /* per-tensor reductions of slot 1 into element 0 of slot 0 (its dtype) */
  NK_FOREACH_NORM,      /* ord params.alpha: 1, 2, +inf or p > 0; float64 sums */
  NK_FOREACH_MAX,       /* NaN propagating; tensors must not be empty     */
  /* AMP: slot 0 <- slot 1 * s (s = *scalar_ptr, float32); *flag_ptr
   * (float32) <- 1 when any element is inf or NaN, else left as it is. */
  NK_FOREACH_UNSCALE,
  NK_FOREACH_OP_COUNT
} nk_foreach_op;

typedef struct nk_foreach_params {
  const nk_tensor_set *sets; /* n_tensors rows, then n_blocks doubles     */
  int64_t n_tensors, n_blocks;
  int32_t op;                /* nk_foreach_op                              */
  int32_t b_is_list;         /* 0: b is the scalar; 1: slot 2; 2: lerp's w slot 3 too */
  int32_t dtype[NK_FOREACH_SLOTS]; /* nrt_dtype of each slot's tensors     */
  int32_t scalar_kind;       /* nk_foreach_scalar_kind                     */
  int32_t scalar_dtype;      /* nrt_dtype of *scalar_ptr                   */
  const void *scalar_ptr;    /* NK_FOREACH_SCALAR_TENSOR: a device element */
  void *flag_ptr;            /* NK_FOREACH_UNSCALE: found_inf (float32)    */
  double alpha;              /* add/sub alpha; norm's ord                  */
  double scalar;             /* NK_FOREACH_SCALAR_VALUE                    */
} nk_foreach_params;

typedef enum nk_foreach_scalar_kind {
  NK_FOREACH_SCALAR_VALUE = 0, /* params.scalar           */
  NK_FOREACH_SCALAR_LIST,      /* the row's scalar         */
  NK_FOREACH_SCALAR_TENSOR     /* *params.scalar_ptr       */
} nk_foreach_scalar_kind;

/* Fused optimizer steps, ATen CPU's formulas (FusedAdamKernel.cpp,
 * FusedSGDKernel.cpp, FusedAdagradKernel.cpp) in float32 for
 * float16/bfloat16/float32 params and float64 for float64; step-dependent
 * factors in double.  Slots: 0 param, 1 grad, then
 *   ADAM/ADAMW: 2 exp_avg, 3 exp_avg_sq, 4 max_exp_avg_sq (amsgrad), 5 step;
 *   SGD:        2 momentum_buffer (momentum != 0);
 *   ADAGRAD:    2 state_sum, 5 step.
 * Slots 0-4 share params.dtype; step is one element of step_dtype.
 * When found_inf is set and *found_inf == 1 nothing is written; when
 * grad_scale is set, grad <- grad / *grad_scale is stored and used. */
typedef enum nk_optim_op {
  NK_OPTIM_ADAM = 0,
  NK_OPTIM_ADAMW,
  NK_OPTIM_SGD,
  NK_OPTIM_ADAGRAD,
  NK_OPTIM_OP_COUNT
} nk_optim_op;

enum {
  NK_OPTIM_AMSGRAD = 1,
  NK_OPTIM_MAXIMIZE = 2,
  NK_OPTIM_NESTEROV = 4,
  NK_OPTIM_FIRST_STEP = 8
};

typedef struct nk_optim_params {
  const nk_tensor_set *sets; /* as nk_foreach_params (no scratch)          */
  int64_t n_tensors, n_blocks;
  int32_t op;                /* nk_optim_op                                */
  int32_t flags;             /* NK_OPTIM_*                                 */
  int32_t dtype;             /* nrt_dtype of slots 0-4 (floating)          */
  int32_t step_dtype;        /* nrt_dtype of slot 5 (floating)             */
  int32_t lr_dtype;          /* nrt_dtype of *lr_ptr                       */
  int32_t reserved;
  const void *lr_ptr;        /* a device lr tensor, or NULL: params.lr     */
  const float *grad_scale;   /* NULL or one float32                        */
  const float *found_inf;    /* NULL or one float32                        */
  double lr, beta1, beta2, weight_decay, eps; /* beta1 = momentum, beta2 = dampening (SGD); beta1 = lr_decay (Adagrad) */
} nk_optim_params;

/* _amp_update_scale_.  operands: [0] scale (float32, 1 element), [1]
 * growth_tracker (int32, 1 element), [2] found_inf (float32, 1 element).
 * found_inf: scale *= backoff, tracker = 0; else tracker + 1 reaching
 * interval: scale *= growth when that stays finite, tracker = 0. */
typedef struct nk_amp_update_scale_params {
  double growth, backoff;
  int64_t interval;
} nk_amp_update_scale_params;

/* ---- long tail ---- */
/* NK_KERNEL_ORGQR (no params): LAPACK's orgqr, unblocked.  Operands [0] a
 * (..., m, n), read and written in place, any strides; [1] tau (..., k),
 * the same batch dims; one floating dtype (float32 or float64), m >= n >= k.
 * On entry column j < k of each matrix holds, below its diagonal, the
 * Householder vector v_j (v_j[j] = 1 implied, v_j[< j] = 0); on exit the
 * matrix is the first n columns of H_0 H_1 ... H_{k-1}, H_j = I - tau_j v_j
 * v_j^T (torch.linalg.householder_product).  Math in the dtype (dot
 * products accumulated in double for float32), one matrix per thread. */
/* NK_KERNEL_LU: LAPACK's getrf / getrs, unblocked, float32 or float64 (one
 * dtype; pivots and info int32), any strides, one matrix per thread:
 *   FACTOR: [0] a (..., m, n) in place <- L (unit, below the diagonal) and U;
 *     [1] pivots (..., min(m, n)) <- 1-based row swapped with each row (row
 *     j itself without pivoting); [2] info (...) <- 0, or j + 1 for the first
 *     exactly zero U[j, j] (the factorisation still completes).
 *   SOLVE / SOLVE_TRANSPOSE: [0] x (..., n, r) in place: B on entry, A^-1 B
 *     (A^-T B) on exit, A = P L U given by [1] lu (..., n, n) and [2] pivots
 *     (..., n) with x's batch dims (broadcast ones have stride 0); a pivot
 *     outside [1, n] is an error. */
typedef enum nk_lu_op { NK_LU_FACTOR = 0, NK_LU_SOLVE, NK_LU_SOLVE_TRANSPOSE, NK_LU_OP_COUNT } nk_lu_op;
typedef struct nk_lu_params {
  int32_t op;    /* nk_lu_op */
  int32_t pivot; /* FACTOR: partial pivoting (else none) */
} nk_lu_params;
typedef enum nk_tail_op {
  NK_TAIL_GLU = 0,        /* [0] out <- a * sigmoid(b); [1] a, [2] b            */
  NK_TAIL_GLU_BACKWARD,   /* [0] gA <- s*g, [1] gB <- (1-s)*s*a*g, s = sigmoid(b);
                             [2] a, [3] b, [4] g                              */
  NK_TAIL_PRELU,          /* [0] out <- x > 0 ? x : w*x; [1] x, [2] w          */
  NK_TAIL_PRELU_BACKWARD, /* [0] gx <- x > 0 ? g : w*g, [1] gw <- x > 0 ? 0 : x*g;
                             [2] x, [3] w, [4] g                              */
  NK_TAIL_RENORM_FACTOR,  /* [0] out <- norm > s ? s / (norm + 1e-7) : 1; [1] norm */
  NK_TAIL_FREXP,          /* [0] mantissa, [1] exponent (int32) <- frexp([2] x) */
  NK_TAIL_CROSS,          /* [0] out <- [1] a x [2] b along dim (size 3 there) */
  NK_TAIL_OP_COUNT
} nk_tail_op;
/* NK_KERNEL_TAIL_POINTWISE: elementwise operands (same ndim and sizes, byte
 * strides, own dtypes) as listed per op.  compute is the nrt_dtype the math
 * runs in (float64 in double, other floating dtypes in float; cross also
 * takes integral dtypes, wrapping in int64). */
typedef struct nk_tail_pointwise_params {
  int32_t op;      /* nk_tail_op */
  int32_t compute; /* nrt_dtype  */
  int32_t dim;     /* cross */
  int32_t reserved;
  double scalar;   /* renorm: maxnorm */
} nk_tail_pointwise_params;
/* NK_KERNEL_UNFOLD_BACKWARD: operands [0] grad_input (ndim >= 1), [1] grad
 * (grad_input's dims, dim holding the window count, plus a last dim of
 * `size`), same dtype.  Every grad_input element along dim at position i is
 * the sum of grad[.., w, .., i - w*step] over the windows w that cover i
 * (0 where none do). */
typedef struct nk_unfold_backward_params {
  int32_t dim;
  int32_t reserved;
  int64_t size, step;
} nk_unfold_backward_params;
/* NK_KERNEL_HISTOGRAM: operands [0] hist (dims-d, sizes n_edges[d] - 1),
 * [1] input (2-d: rows x dims), [2] edges (1-d: every dim's increasing
 * edges, concatenated), optional [3] weight (1-d, one per row); input,
 * edges and weight share one floating dtype.  Each row whose every
 * coordinate lies within its dim's outer edges (not NaN) adds its weight (1
 * without) to its bin; the last bin includes its right edge.  The bin is
 * found as ATen's CPU does: LINEAR is (x - lo) * (n - 1) / (hi - lo) in the
 * input dtype's arithmetic (torch.histc), LINEAR_LOCAL_SEARCH corrects it
 * against the neighbouring edges, BINARY_SEARCH searches the edges.  Sums
 * are in double, per fixed chunk of rows, the chunks summed in order. */
#define NK_HISTOGRAM_MAX_DIMS 16
typedef enum nk_histogram_algorithm {
  NK_HISTOGRAM_LINEAR = 0,
  NK_HISTOGRAM_LINEAR_LOCAL_SEARCH,
  NK_HISTOGRAM_BINARY_SEARCH,
  /* histc on integers, CUDA's rule: input an integer dtype, hist any dtype
   * (counts wrap to it), edges 2 int64 values lo < hi, n_edges[0] = bins + 1;
   * lo <= x <= hi counts in bin (x - lo) * bins / (hi - lo) (exact integer
   * arithmetic), bin == bins going to the last bin. */
  NK_HISTOGRAM_INTEGER
} nk_histogram_algorithm;
typedef struct nk_histogram_params {
  int32_t algorithm; /* nk_histogram_algorithm */
  int32_t dims;
  int64_t n_edges[NK_HISTOGRAM_MAX_DIMS];
} nk_histogram_params;
/* NK_KERNEL_LOGSPACE: operand [0] out (1-d, steps elements, any dtype):
 * out[i] = pow(base, start + step * i) for i < steps / 2, else
 * pow(base, end - step * (steps - 1 - i)), in double, as ATen's CPU. */
typedef struct nk_logspace_params {
  double base, start, end, step;
  int64_t steps;
} nk_logspace_params;
/* NK_KERNEL_DIST: p-norm distances as ATen's CPU (p = 0: count of
 * differing coordinates, 1, 2, inf: max, else (sum |d|^p)^(1/p)), in the
 * operands' dtype (float32 or float64, all the same):
 *   CDIST:          [0] out (b, r1, r2) <- dist(x1[b, i], x2[b, j]); [1] x1 (b, r1, m), [2] x2 (b, r2, m)
 *   CDIST_BACKWARD: [0] grad_x1 (b, r1, m) <- sum over j of the norm's gradient;
 *                   [1] grad (b, r1, r2), [2] x1, [3] x2, [4] dist (b, r1, r2)
 *   PDIST:          [0] out (n(n-1)/2, pairs i < j in row-major order); [1] x (n, m)
 *   PDIST_BACKWARD: [0] grad_x (n, m); [1] grad (pairs), [2] x, [3] dist (pairs) */
typedef enum nk_dist_op {
  NK_DIST_CDIST = 0,
  NK_DIST_CDIST_BACKWARD,
  NK_DIST_PDIST,
  NK_DIST_PDIST_BACKWARD,
  NK_DIST_OP_COUNT
} nk_dist_op;
typedef struct nk_dist_params {
  int32_t op; /* nk_dist_op */
  int32_t reserved;
  double p;
} nk_dist_params;
/* NK_KERNEL_EMBEDDING_BAG: bags of rows of weight (V, D); indices and
 * offsets are int32 or int64 (one dtype), every index is checked against
 * [0, V) and every offset against [0, n]; bag b holds indices
 * [offsets[b], offsets[b + 1]) (the last bag runs to n unless
 * include_last_offset); an index equal to padding_idx is skipped.
 *   FORWARD: [0] out (B, D), [1] offset2bag (n, int64: each index's bag, -1
 *     for none), [2] bag_size (B, int64: non-padding indices), [3]
 *     max_indices (B, D, int64; written for MAX only: the weight row of each
 *     maximum, -1 for an empty bag), [4] weight, [5] indices (n), [6]
 *     offsets, optional [7] per_sample_weights (n, SUM only).  SUM adds
 *     (weighted) rows, MEAN divides by bag_size, MAX takes the elementwise
 *     maximum; an empty bag gives zeros.
 *   DENSE_BACKWARD: [0] grad_weight (V, D), [1] grad (B, D), [2] indices,
 *     [3] offset2bag, [4] bag_size, [5] max_indices, optional [6]
 *     per_sample_weights: each index's bag gradient (times its weight, / the
 *     bag size for MEAN, / the index's count with scale_grad_by_freq) is
 *     added to its row; MAX routes each element to its max_indices row.
 *   PSW_BACKWARD: [0] grad_psw (n), [1] grad (B, D), [2] weight, [3]
 *     indices, [4] offset2bag: dot(grad[bag], weight[index]), 0 for padding.
 * Sums run in float (double for float64) in index order, per column, so
 * results do not depend on the thread count. */
typedef enum nk_embedding_bag_op {
  NK_EMBAG_FORWARD = 0,
  NK_EMBAG_DENSE_BACKWARD,
  NK_EMBAG_PSW_BACKWARD,
  NK_EMBAG_OP_COUNT
} nk_embedding_bag_op;
typedef enum nk_embedding_bag_mode { NK_EMBAG_SUM = 0, NK_EMBAG_MEAN, NK_EMBAG_MAX } nk_embedding_bag_mode;
typedef struct nk_embedding_bag_params {
  int32_t op;   /* nk_embedding_bag_op   */
  int32_t mode; /* nk_embedding_bag_mode */
  int32_t include_last_offset;
  int32_t scale_grad_by_freq;
  int64_t padding_idx; /* -1: none (already wrapped to [0, V)) */
} nk_embedding_bag_params;

typedef enum nk_isa { NK_ISA_PORTABLE = 0, NK_ISA_AVX2, NK_ISA_AVX512 } nk_isa;
nk_isa nk_cpu_isa(void);               /* detected once; TORCHNEURON_ISA=portable|avx2|avx512 caps it */
const char *nk_isa_name(nk_isa isa);
int nk_cpu_has_avx512bf16(void);       /* AVX512_BF16 (+BW/VL/DQ), within the cap */
int nk_cpu_has_amx_bf16(void);         /* AMX-TILE + AMX-BF16 on top of it; TORCHNEURON_AMX=0 disables */
/* The index into a {portable, avx2, avx512, avx512bf16} table of variants:
 * nk_cpu_isa(), or 3 where the AVX512_BF16 ones may run. */
#define NK_VARIANTS 4
static inline int nk_cpu_variant(void) { return nk_cpu_has_avx512bf16() ? 3 : (int)nk_cpu_isa(); }

/* Registers every kernel id above with the runtime.  Idempotent. */
nrt_status nk_register_kernels(void);

#ifdef __cplusplus
}
#endif
#endif /* NEURON_KERNELS_H */
