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
  /* pointwise */
  NK_KERNEL_POINTWISE, /* out <- op(a[, b[, c]]) with scalar params       */
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
