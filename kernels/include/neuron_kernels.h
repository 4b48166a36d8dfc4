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
  /* unary */
  NK_KERNEL_UNARY,          /* out <- op(x)      (nk_unary_op)             */
  NK_KERNEL_UNARY_BACKWARD, /* out <- op(a, b)   (nk_unary_backward_op)    */
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
