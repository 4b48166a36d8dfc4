/* reduce.c — NK_KERNEL_REDUCE: one engine for every reduction.
 *
 * The operands are ATen's reduction TensorIterator (neuron_kernels.h): the
 * dims where operand 0 has stride 0 are reduced, the others are kept.  A
 * plan splits the dims into kept and reduced sets (size-1 dims dropped),
 * orders each innermost-first by stride and coalesces them, so that a
 * contiguous reduction is one long run.  The index ops keep the reduced
 * dims in tensor order instead, so that the flat position over the reduced
 * dims is the index ATen reports.
 *
 * Products of float16/bfloat16 round every step to the dtype, as ATen's
 * CPU prod (which multiplies in scalar_t) does, overflow included.
 *
 * Each op lowers to a kind (sum-like, product, extreme, all/any, count,
 * Welford) and an element transform (|x|, x^2, |x|^p, x != 0, NaN -> 0),
 * so norms and means are sums with a different transform or finish.
 *
 * Summation is pairwise: a run is cut into blocks of RED_BLOCK elements,
 * each block summed with 16 independent accumulators (which the compiler
 * vectorises), and the block sums enter a binary counter (tree32/tree64)
 * that adds equal-sized partial sums, as a balanced tree would.
 *
 * A sum whose kept inner dim is the contiguous one (x.sum(0)) runs
 * "vertically" instead: tiles of neighbouring outputs accumulate whole input
 * rows (see vertical_sum_t), with the same pairwise structure.
 *
 * Parallelism: over output elements (or tiles); or, when there are fewer than
 * RED_FEW_OUTPUTS outputs and each reduces more than RED_CHUNK elements,
 * over fixed RED_CHUNK-element chunks of the reduced range whose partial
 * results are combined in order.  Both choices depend on the shape only,
 * so results never depend on the thread count. */
#include <stdlib.h>
#include <string.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"
#include "reduce/reduce_block.h"

#define RED_BLOCK 1024
#define RED_CHUNK 65536
#define RED_FEW_OUTPUTS 16
#define RED_LANES NK_RED_LANES /* extremes, variances and float64 sums: their folds assume 16 */

typedef enum rkind { K_SUM, K_PROD, K_MAX, K_MIN, K_ALL, K_ANY, K_COUNT, K_VAR } rkind;
typedef enum rxform { T_ID, T_NAN0, T_ABS, T_SQ, T_POW, T_NZ } rxform;
typedef enum rfinish { F_NONE, F_MEAN, F_SQRT, F_ROOT } rfinish;

typedef struct rplan {
  nk_reduce_op op;
  rkind kind;
  rxform xf;
  rfinish fin;
  int indexed;    /* the extreme's index is an output              */
  int value_out;  /* the extreme's value is an output (not ARG*)   */
  nk_class cls;   /* accumulation class of the input               */
  nrt_dtype dt, out0, out1; /* input and output dtypes */
  int n_outs;     /* 1 or 2 output operands                        */
  int nk, nr;     /* kept / reduced dims, innermost first          */
  int64_t ksize[NRT_MAX_DIMS], kin[NRT_MAX_DIMS], kout[2][NRT_MAX_DIMS];
  int64_t rsize[NRT_MAX_DIMS], rstr[NRT_MAX_DIMS];
  int64_t n_out, n_red;
  char *out[2];
  const char *in;
  float pf;
  double pd, correction;
  int take_sqrt;
} rplan;

/* ------------------------------------------------------------ pairwise sum */

/* Level k holds the sum of 2^k consecutive partial sums when bit k of
 * count is set: pushing works like incrementing a binary counter. */
typedef struct tree32 { float lv[64]; uint64_t count; } tree32;
typedef struct tree64 { double lv[64]; uint64_t count; } tree64;

#define TREE_FUNCS(T, V)                                                   \
  static inline void T##_push(T *t, V v) {                               \
    uint64_t c = t->count++;                                             \
    int k = 0;                                                           \
    for (; c & 1; c >>= 1, k++) v = t->lv[k] + v;                        \
    t->lv[k] = v;                                                        \
  }                                                                      \
  static inline V T##_total(const T *t) {                                \
    V s = 0;                                                             \
    int first = 1;                                                       \
    uint64_t c = t->count;                                               \
    for (int k = 0; c; k++, c >>= 1)                                     \
      if (c & 1) {                                                       \
        s = first ? t->lv[k] : t->lv[k] + s;                             \
        first = 0;                                                       \
      }                                                                  \
    return s;                                                            \
  }
TREE_FUNCS(tree32, float)
TREE_FUNCS(tree64, double)

/* ------------------------------------------------------------ accumulator */

typedef struct racc {
  tree32 t32;        /* K_SUM, float class  */
  tree64 t64;        /* K_SUM, double class */
  uint64_t u;        /* integer sums and products, counts, all/any */
  float f;           /* float products      */
  double d;          /* double products     */
  int has;           /* extremes: a value was seen */
  float ef;
  double ed;
  int64_t ei, idx;
  double n, mean, m2; /* K_VAR */
} racc;

static void acc_init(const rplan *pl, racc *a) {
  a->t32.count = a->t64.count = 0;
  a->u = (pl->kind == K_PROD || pl->kind == K_ALL) ? 1 : 0;
  a->f = 1;
  a->d = 1;
  a->has = 0;
  a->ef = 0;
  a->ed = 0;
  a->ei = a->idx = 0;
  a->n = a->mean = a->m2 = 0;
}

/* --------------------------------------------------------------- transforms */

NK_INLINE float xf_f32(rxform t, float x, float p) {
  switch (t) {
  case T_ID: return x;
  case T_NAN0: return isnan(x) ? 0.0f : x;
  case T_ABS: return fabsf(x);
  case T_SQ: return x * x;
  case T_POW: return powf(fabsf(x), p);
  default: return x != 0 ? 1.0f : 0.0f;
  }
}

NK_INLINE double xf_f64(rxform t, double x, double p) {
  switch (t) {
  case T_ID: return x;
  case T_NAN0: return isnan(x) ? 0.0 : x;
  case T_ABS: return fabs(x);
  case T_SQ: return x * x;
  case T_POW: return pow(fabs(x), p);
  default: return x != 0 ? 1.0 : 0.0;
  }
}

/* ------------------------------------------------------------- sums of runs */

/* Sum of n <= RED_BLOCK elements in reduce_block.h's order (s is a
 * constant in the contiguous instantiation, so this vectorises). */
NK_INLINE float block_f32(nrt_dtype dt, rxform t, const char *p, int64_t n, int64_t s, float pw) {
  float r;
#define NK_RED_XF_LOAD(i) xf_f32(t, nk_load_f32(dt, p + (i) * s), pw)
  NK_RED_BLOCK_F32(n, NK_RED_XF_LOAD, r);
#undef NK_RED_XF_LOAD
  return r;
}

NK_INLINE double block_f64(nrt_dtype dt, rxform t, const char *p, int64_t n, int64_t s, double pw) {
  if (n < RED_LANES) { /* a short row: no lanes to set up and fold */
    double r = 0;
    for (int64_t i = 0; i < n; i++) r += xf_f64(t, nk_load_f64(dt, p + i * s), pw);
    return r;
  }
  double acc[RED_LANES] = {0};
  int64_t i = 0;
  for (; i + RED_LANES <= n; i += RED_LANES)
    for (int j = 0; j < RED_LANES; j++) acc[j] += xf_f64(t, nk_load_f64(dt, p + (i + j) * s), pw);
  for (int j = 0; j < 8; j++) acc[j] += acc[j + 8];
  for (int j = 0; j < 4; j++) acc[j] += acc[j + 4];
  for (int j = 0; j < 2; j++) acc[j] += acc[j + 2];
  double r = acc[0] + acc[1];
  for (; i < n; i++) r += xf_f64(t, nk_load_f64(dt, p + i * s), pw);
  return r;
}

static float block_f32_portable(const float *p, int64_t n) { return nk_reduce_block_f32_body(p, n); }

/* The plain float32 sum's block for this CPU (reduce_block.h: the same bits
 * at every ISA; wider loads stream faster). */
static nk_reduce_block_f32_fn pick_block_f32(void) {
  static const nk_reduce_block_f32_fn fns[] = {block_f32_portable, nk_reduce_block_f32_avx2,
                                               nk_reduce_block_f32_avx512};
  return fns[nk_cpu_isa()];
}

NK_INLINE void sum_run_f32_t(racc *a, nrt_dtype dt, rxform t, const char *p, int64_t n, int64_t s,
                             float pw) {
  const int64_t es = (int64_t)nk_dtype_size(dt);
  if (dt == NRT_FLOAT32 && t == T_ID && s == es) { /* block_f32's arithmetic, per ISA */
    const nk_reduce_block_f32_fn block = pick_block_f32();
    for (int64_t i = 0; i < n; i += RED_BLOCK)
      tree32_push(&a->t32, block((const float *)(const void *)(p + i * es), n - i < RED_BLOCK ? n - i : RED_BLOCK));
    return;
  }
  for (int64_t i = 0; i < n; i += RED_BLOCK) {
    int64_t m = n - i < RED_BLOCK ? n - i : RED_BLOCK;
    float b = s == es ? block_f32(dt, t, p + i * es, m, es, pw) : block_f32(dt, t, p + i * s, m, s, pw);
    tree32_push(&a->t32, b);
  }
}

NK_INLINE void sum_run_f64_t(racc *a, nrt_dtype dt, rxform t, const char *p, int64_t n, int64_t s,
                             double pw) {
  const int64_t es = (int64_t)nk_dtype_size(dt);
  for (int64_t i = 0; i < n; i += RED_BLOCK) {
    int64_t m = n - i < RED_BLOCK ? n - i : RED_BLOCK;
    double b = s == es ? block_f64(dt, t, p + i * es, m, es, pw) : block_f64(dt, t, p + i * s, m, s, pw);
    tree64_push(&a->t64, b);
  }
}

#define XF_CASES(CALL, dt)                          \
  switch (pl->xf) {                                 \
  case T_ID: CALL(dt, T_ID); break;                 \
  case T_NAN0: CALL(dt, T_NAN0); break;             \
  case T_ABS: CALL(dt, T_ABS); break;               \
  case T_SQ: CALL(dt, T_SQ); break;                 \
  case T_POW: CALL(dt, T_POW); break;               \
  default: CALL(dt, T_NZ); break;                   \
  }

static void sum_run_float(const rplan *pl, racc *a, const char *p, int64_t n, int64_t s) {
#define CALL32(dt, t) sum_run_f32_t(a, dt, t, p, n, s, pl->pf)
  switch (pl->dt) {
  case NRT_FLOAT16: XF_CASES(CALL32, NRT_FLOAT16); break;
  case NRT_BFLOAT16: XF_CASES(CALL32, NRT_BFLOAT16); break;
  default: XF_CASES(CALL32, NRT_FLOAT32); break;
  }
#undef CALL32
}

static void sum_run_double(const rplan *pl, racc *a, const char *p, int64_t n, int64_t s) {
#define CALL64(dt, t) sum_run_f64_t(a, dt, t, p, n, s, pl->pd)
  XF_CASES(CALL64, NRT_FLOAT64);
#undef CALL64
}

/* Integers wrap in uint64; the out dtype's wrap of it is ATen's result. */
NK_INLINE uint64_t isum_t(nrt_dtype dt, const char *p, int64_t n, int64_t s) {
  uint64_t u = 0;
  for (int64_t i = 0; i < n; i++) u += (uint64_t)nk_load_integral(dt, p + i * s);
  return u;
}

static uint64_t isum(nrt_dtype dt, const char *p, int64_t n, int64_t s) {
  switch (dt) {
  case NRT_BOOL: return isum_t(NRT_BOOL, p, n, s);
  case NRT_UINT8: return isum_t(NRT_UINT8, p, n, s);
  case NRT_INT8: return isum_t(NRT_INT8, p, n, s);
  case NRT_INT16: return isum_t(NRT_INT16, p, n, s);
  case NRT_INT32: return isum_t(NRT_INT32, p, n, s);
  default: return isum_t(NRT_INT64, p, n, s);
  }
}

/* ----------------------------------------------------------- other kinds */

/* Extremes: NaN wins and stays; ties keep the earlier index. */
NK_INLINE void extreme_run_t(const rplan *pl, racc *a, nrt_dtype dt, const char *p, int64_t n, int64_t s,
                             int64_t i0) {
  const int is_max = pl->kind == K_MAX, absx = pl->xf == T_ABS;
  int64_t i = 0;
  switch (pl->cls) {
  case NK_CLASS_FLOAT: {
    float best = a->ef;
    int64_t bi = a->idx;
    if (!a->has) {
      best = nk_load_f32(dt, p);
      if (absx) best = fabsf(best);
      bi = i0;
      i = 1;
    }
    for (; i < n && !isnan(best); i++) {
      float x = nk_load_f32(dt, p + i * s);
      if (absx) x = fabsf(x);
      if (isnan(x) || (is_max ? x > best : x < best)) {
        best = x;
        bi = i0 + i;
      }
    }
    a->ef = best;
    a->idx = bi;
    break;
  }
  case NK_CLASS_DOUBLE: {
    double best = a->ed;
    int64_t bi = a->idx;
    if (!a->has) {
      best = nk_load_f64(dt, p);
      if (absx) best = fabs(best);
      bi = i0;
      i = 1;
    }
    for (; i < n && !isnan(best); i++) {
      double x = nk_load_f64(dt, p + i * s);
      if (absx) x = fabs(x);
      if (isnan(x) || (is_max ? x > best : x < best)) {
        best = x;
        bi = i0 + i;
      }
    }
    a->ed = best;
    a->idx = bi;
    break;
  }
  default: {
    int64_t best = a->ei, bi = a->idx;
    if (!a->has) {
      best = nk_load_integral(dt, p);
      bi = i0;
      i = 1;
    }
    for (; i < n; i++) {
      int64_t x = nk_load_integral(dt, p + i * s);
      if (is_max ? x > best : x < best) {
        best = x;
        bi = i0 + i;
      }
    }
    a->ei = best;
    a->idx = bi;
    break;
  }
  }
  a->has = 1;
}

/* The value-only float extremes (amax, max(), norm +-inf): RED_LANES
 * running extremes and a NaN flag, which vectorises. */
NK_INLINE void extreme_values_f32_t(const rplan *pl, racc *a, nrt_dtype dt, const char *p, int64_t n,
                                    int64_t s) {
  const int is_max = pl->kind == K_MAX, absx = pl->xf == T_ABS;
  for (int64_t b = 0; b < n; b += RED_BLOCK) {
    const int64_t m = n - b < RED_BLOCK ? n - b : RED_BLOCK;
    const char *q = p + b * s;
    float e[RED_LANES];
    int nan[RED_LANES] = {0};
    for (int j = 0; j < RED_LANES; j++) e[j] = is_max ? -INFINITY : INFINITY;
    int64_t i = 0;
    for (; i + RED_LANES <= m; i += RED_LANES)
      for (int j = 0; j < RED_LANES; j++) {
        float x = nk_load_f32(dt, q + (i + j) * s);
        if (absx) x = fabsf(x);
        nan[j] |= x != x;
        e[j] = is_max ? (x > e[j] ? x : e[j]) : (x < e[j] ? x : e[j]);
      }
    for (; i < m; i++) {
      float x = nk_load_f32(dt, q + i * s);
      if (absx) x = fabsf(x);
      nan[0] |= x != x;
      e[0] = is_max ? (x > e[0] ? x : e[0]) : (x < e[0] ? x : e[0]);
    }
    float r = e[0];
    int any_nan = nan[0];
    for (int j = 1; j < RED_LANES; j++) {
      r = is_max ? (e[j] > r ? e[j] : r) : (e[j] < r ? e[j] : r);
      any_nan |= nan[j];
    }
    if (any_nan) r = NAN;
    if (!a->has || isnan(r) || (!isnan(a->ef) && (is_max ? r > a->ef : r < a->ef))) {
      if (!(a->has && isnan(a->ef))) a->ef = r;
    }
    a->has = 1;
    if (isnan(a->ef)) return;
  }
}

static void extreme_run(const rplan *pl, racc *a, const char *p, int64_t n, int64_t s, int64_t i0) {
  const int values_only = !pl->indexed && pl->value_out;
  const int64_t es = (int64_t)nk_dtype_size(pl->dt);
#define EXT(dt)                                                                          \
  if (values_only && nk_dtype_class(dt) == NK_CLASS_FLOAT) {                            \
    if (s == es) extreme_values_f32_t(pl, a, dt, p, n, (int64_t)nk_dtype_size(dt));      \
    else extreme_values_f32_t(pl, a, dt, p, n, s);                                      \
  } else {                                                                               \
    extreme_run_t(pl, a, dt, p, n, s, i0);                                              \
  }
  switch (pl->dt) {
  case NRT_BOOL: EXT(NRT_BOOL); break;
  case NRT_UINT8: EXT(NRT_UINT8); break;
  case NRT_INT8: EXT(NRT_INT8); break;
  case NRT_INT16: EXT(NRT_INT16); break;
  case NRT_INT32: EXT(NRT_INT32); break;
  case NRT_INT64: EXT(NRT_INT64); break;
  case NRT_FLOAT16: EXT(NRT_FLOAT16); break;
  case NRT_BFLOAT16: EXT(NRT_BFLOAT16); break;
  case NRT_FLOAT32: EXT(NRT_FLOAT32); break;
  default: EXT(NRT_FLOAT64); break;
  }
#undef EXT
}

/* Chan's combination of (n, mean, m2) with a block's. */
static void welford_merge(racc *a, double n, double mean, double m2) {
  if (n == 0) return;
  double tot = a->n + n, delta = mean - a->mean;
  a->mean += delta * (n / tot);
  a->m2 += m2 + delta * delta * (a->n * n / tot);
  a->n = tot;
}

/* Each block exactly, by two passes around its own mean (RED_LANES
 * accumulators each), then merged. */
NK_INLINE void var_block_t(racc *a, nrt_dtype dt, const char *q, int64_t m, int64_t s) {
  double acc[RED_LANES] = {0}, sum = 0, m2 = 0;
  int64_t i = 0;
  for (; i + RED_LANES <= m; i += RED_LANES)
    for (int j = 0; j < RED_LANES; j++) acc[j] += nk_load_f64(dt, q + (i + j) * s);
  for (; i < m; i++) sum += nk_load_f64(dt, q + i * s);
  for (int j = 0; j < RED_LANES; j++) sum += acc[j];
  const double mean = sum / (double)m;
  for (int j = 0; j < RED_LANES; j++) acc[j] = 0;
  for (i = 0; i + RED_LANES <= m; i += RED_LANES)
    for (int j = 0; j < RED_LANES; j++) {
      double d = nk_load_f64(dt, q + (i + j) * s) - mean;
      acc[j] += d * d;
    }
  for (; i < m; i++) {
    double d = nk_load_f64(dt, q + i * s) - mean;
    m2 += d * d;
  }
  for (int j = 0; j < RED_LANES; j++) m2 += acc[j];
  welford_merge(a, (double)m, mean, m2);
}

NK_INLINE void var_run_t(racc *a, nrt_dtype dt, const char *p, int64_t n, int64_t s) {
  const int64_t es = (int64_t)nk_dtype_size(dt);
  for (int64_t b = 0; b < n; b += RED_BLOCK) {
    int64_t m = n - b < RED_BLOCK ? n - b : RED_BLOCK;
    if (s == es) var_block_t(a, dt, p + b * es, m, es);
    else var_block_t(a, dt, p + b * s, m, s);
  }
}

static void var_run(const rplan *pl, racc *a, const char *p, int64_t n, int64_t s) {
  switch (pl->dt) {
  case NRT_FLOAT16: var_run_t(a, NRT_FLOAT16, p, n, s); break;
  case NRT_BFLOAT16: var_run_t(a, NRT_BFLOAT16, p, n, s); break;
  case NRT_FLOAT32: var_run_t(a, NRT_FLOAT32, p, n, s); break;
  default: var_run_t(a, NRT_FLOAT64, p, n, s); break;
  }
}

/* all/any/count_nonzero over a dense run of a byte dtype (bool, uint8,
 * int8: an element is true when its byte is not zero) without a load
 * through the dtype switch per element: all is libc's vectorised search
 * for a zero byte, any tests 64 bytes at a time, count sums a compare that
 * vectorises.  x.isnan().any() over 2^20 floats spent 1.3 ms of its 1.9 in
 * the any on 2 Zen 3 threads.  Returns false for any other run. */
static bool fold_byte_run(const rplan *pl, racc *a, const char *p, int64_t n, int64_t s) {
  if (s != 1 || nk_dtype_size(pl->dt) != 1 || nk_dtype_is_floating(pl->dt)) return false;
  const unsigned char *b = (const unsigned char *)p;
  switch (pl->kind) {
  case K_ALL:
    if (a->u && n > 0) a->u = memchr(b, 0, (size_t)n) == NULL;
    return true;
  case K_ANY: {
    int64_t i = 0;
    for (; !a->u && i + 64 <= n; i += 64) {
      uint64_t w[8], any = 0;
      memcpy(w, b + i, sizeof w);
      for (int k = 0; k < 8; k++) any |= w[k];
      a->u = any != 0;
    }
    for (; !a->u && i < n; i++) a->u = b[i] != 0;
    return true;
  }
  case K_COUNT: {
    uint64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += b[i] != 0;
    a->u += c;
    return true;
  }
  default: return false;
  }
}

/* Folds one run of n elements (stride s, flat reduced index i0) into a. */
static void fold_run(const rplan *pl, racc *a, const char *p, int64_t n, int64_t s, int64_t i0) {
  if ((pl->kind == K_ALL || pl->kind == K_ANY || pl->kind == K_COUNT) && fold_byte_run(pl, a, p, n, s))
    return;
  switch (pl->kind) {
  case K_SUM:
    if (pl->cls == NK_CLASS_FLOAT) sum_run_float(pl, a, p, n, s);
    else if (pl->cls == NK_CLASS_DOUBLE) sum_run_double(pl, a, p, n, s);
    else a->u += isum(pl->dt, p, n, s);
    break;
  case K_PROD:
    for (int64_t i = 0; i < n; i++) {
      const char *x = p + i * s;
      if (pl->cls == NK_CLASS_FLOAT) a->f = nk_round_f32(pl->dt, a->f * nk_load_f32(pl->dt, x));
      else if (pl->cls == NK_CLASS_DOUBLE) a->d *= nk_load_f64(pl->dt, x);
      else a->u *= (uint64_t)nk_load_integral(pl->dt, x);
    }
    break;
  case K_MAX: case K_MIN: extreme_run(pl, a, p, n, s, i0); break;
  case K_ALL:
    for (int64_t i = 0; i < n && a->u; i++) a->u = nk_load_bool(pl->dt, p + i * s);
    break;
  case K_ANY:
    for (int64_t i = 0; i < n && !a->u; i++) a->u = nk_load_bool(pl->dt, p + i * s);
    break;
  case K_COUNT:
    for (int64_t i = 0; i < n; i++) a->u += nk_load_bool(pl->dt, p + i * s);
    break;
  case K_VAR: var_run(pl, a, p, n, s); break;
  }
}

/* Folds the flat reduced positions [begin, end) below `base` (the input
 * element of one output), run by run along the innermost reduced dim. */
static void fold_range(const rplan *pl, racc *a, const char *base, int64_t begin, int64_t end) {
  const int nr = pl->nr;
  if (begin >= end) return;
  if (nr == 0) {
    fold_run(pl, a, base, 1, 0, 0);
    return;
  }
  int64_t idx[NRT_MAX_DIMS];
  const char *p = base;
  int64_t rest = begin;
  for (int d = 0; d < nr; d++) {
    idx[d] = rest ? rest % pl->rsize[d] : 0; /* (a division costs more than a short row) */
    rest = rest ? rest / pl->rsize[d] : 0;
    p += idx[d] * pl->rstr[d];
  }
  for (int64_t pos = begin; pos < end;) {
    int64_t n = pl->rsize[0] - idx[0];
    if (n > end - pos) n = end - pos;
    fold_run(pl, a, p, n, pl->rstr[0], pos);
    pos += n;
    if (pos >= end) break;
    p -= idx[0] * pl->rstr[0];
    idx[0] = 0;
    for (int d = 1; d < nr; d++) {
      p += pl->rstr[d];
      if (++idx[d] < pl->rsize[d]) break;
      p -= pl->rsize[d] * pl->rstr[d];
      idx[d] = 0;
    }
  }
}

/* Adds a later partial b into a (the chunked path). */
static void combine(const rplan *pl, racc *a, const racc *b) {
  switch (pl->kind) {
  case K_SUM:
    if (pl->cls == NK_CLASS_FLOAT) tree32_push(&a->t32, tree32_total(&b->t32));
    else if (pl->cls == NK_CLASS_DOUBLE) tree64_push(&a->t64, tree64_total(&b->t64));
    else a->u += b->u;
    break;
  case K_PROD:
    a->f = nk_round_f32(pl->dt, a->f * b->f);
    a->d *= b->d;
    a->u *= b->u;
    break;
  case K_MAX: case K_MIN: {
    if (!b->has) break;
    if (!a->has) {
      *a = *b;
      break;
    }
    const int is_max = pl->kind == K_MAX;
    int take;
    if (pl->cls == NK_CLASS_FLOAT)
      take = !isnan(a->ef) && (isnan(b->ef) || (is_max ? b->ef > a->ef : b->ef < a->ef));
    else if (pl->cls == NK_CLASS_DOUBLE)
      take = !isnan(a->ed) && (isnan(b->ed) || (is_max ? b->ed > a->ed : b->ed < a->ed));
    else
      take = is_max ? b->ei > a->ei : b->ei < a->ei;
    if (take) {
      a->ef = b->ef;
      a->ed = b->ed;
      a->ei = b->ei;
      a->idx = b->idx;
    }
    break;
  }
  case K_ALL: a->u = a->u && b->u; break;
  case K_ANY: a->u = a->u || b->u; break;
  case K_COUNT: a->u += b->u; break;
  case K_VAR: welford_merge(a, b->n, b->mean, b->m2); break;
  }
}

/* Finishes and stores one output element (and its index / mean). */
static void store(const rplan *pl, const racc *a, char *o0, char *o1) {
  switch (pl->kind) {
  case K_SUM:
    if (pl->cls == NK_CLASS_FLOAT) {
      float v = tree32_total(&a->t32);
      if (pl->fin == F_MEAN) v = v / (float)pl->n_red;
      else if (pl->fin == F_SQRT) v = sqrtf(v);
      else if (pl->fin == F_ROOT) v = powf(v, 1.0f / pl->pf);
      nk_store_f32(pl->out0, o0, v);
    } else if (pl->cls == NK_CLASS_DOUBLE) {
      double v = tree64_total(&a->t64);
      if (pl->fin == F_MEAN) v = v / (double)pl->n_red;
      else if (pl->fin == F_SQRT) v = sqrt(v);
      else if (pl->fin == F_ROOT) v = pow(v, 1.0 / pl->pd);
      nk_store_f64(pl->out0, o0, v);
    } else {
      nk_store_i64(pl->out0, o0, (int64_t)a->u);
    }
    break;
  case K_PROD:
    if (pl->cls == NK_CLASS_FLOAT) nk_store_f32(pl->out0, o0, a->f);
    else if (pl->cls == NK_CLASS_DOUBLE) nk_store_f64(pl->out0, o0, a->d);
    else nk_store_i64(pl->out0, o0, (int64_t)a->u);
    break;
  case K_MAX: case K_MIN:
    if (!a->has) { /* only the norm's +-inf orders get here: 0 resp. inf */
      nk_store_f64(pl->out0, o0, pl->kind == K_MAX ? 0.0 : INFINITY);
      break;
    }
    if (pl->value_out) {
      if (pl->cls == NK_CLASS_FLOAT) nk_store_f32(pl->out0, o0, a->ef);
      else if (pl->cls == NK_CLASS_DOUBLE) nk_store_f64(pl->out0, o0, a->ed);
      else nk_store_i64(pl->out0, o0, a->ei);
      if (pl->indexed) nk_store_i64(pl->out1, o1, a->idx);
    } else {
      nk_store_i64(pl->out0, o0, a->idx);
    }
    break;
  case K_ALL: case K_ANY: case K_COUNT: nk_store_i64(pl->out0, o0, (int64_t)a->u); break;
  case K_VAR: {
    double div = a->n - pl->correction > 0 ? a->n - pl->correction : 0;
    double v = a->m2 / div;
    nk_store_f64(pl->out0, o0, pl->take_sqrt ? sqrt(v) : v);
    if (o1) nk_store_f64(pl->out1, o1, a->n > 0 ? a->mean : NAN);
    break;
  }
  }
}

/* Pointers of output element o (flat over the kept dims). */
static void locate(const rplan *pl, int64_t o, const char **in, char **o0, char **o1) {
  const char *pi = pl->in;
  char *p0 = pl->out[0], *p1 = pl->out[1];
  for (int d = 0; d < pl->nk; d++) {
    int64_t i = o % pl->ksize[d];
    o /= pl->ksize[d];
    pi += i * pl->kin[d];
    p0 += i * pl->kout[0][d];
    if (p1) p1 += i * pl->kout[1][d];
  }
  *in = pi;
  *o0 = p0;
  *o1 = p1;
}

static void outputs_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const rplan *pl = arg;
  racc a;
  const char *in;
  char *o0, *o1;
  locate(pl, begin, &in, &o0, &o1);
  int64_t i0 = pl->nk > 0 ? begin % pl->ksize[0] : 0;
  for (int64_t o = begin; o < end; o++) {
    acc_init(pl, &a);
    fold_range(pl, &a, in, 0, pl->n_red);
    store(pl, &a, o0, o1);
    /* step along the innermost kept dim; relocate when it wraps */
    if (pl->nk > 0 && ++i0 < pl->ksize[0]) {
      in += pl->kin[0];
      o0 += pl->kout[0][0];
      if (o1) o1 += pl->kout[1][0];
    } else if (o + 1 < end) {
      locate(pl, o + 1, &in, &o0, &o1);
      i0 = 0;
    }
  }
}

typedef struct chunk_job {
  const rplan *pl;
  const char *in;
  racc *parts;
} chunk_job;

static void chunks_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const chunk_job *j = arg;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = c * RED_CHUNK, hi = lo + RED_CHUNK < j->pl->n_red ? lo + RED_CHUNK : j->pl->n_red;
    acc_init(j->pl, &j->parts[c]);
    fold_range(j->pl, &j->parts[c], j->in, lo, hi);
  }
}

/* ------------------------------------------------------- vertical sums */

/* A sum whose kept inner dim is contiguous in the input and whose reduced
 * dims are outer (x.sum(0) of a matrix): a tile of VT neighbouring outputs
 * accumulates one input row at a time, VB rows per partial vector, and the
 * partial vectors enter a binary counter per lane -- the same pairwise sum
 * as the row path, without striding through memory once per output. */
#define VT 64
#define VB 16

/* Rows [begin, end) of the reduced range into tot[0..T). */
NK_INLINE void vertical_sum_t(const rplan *pl, nrt_dtype dt, rxform t, const char *in, int64_t T,
                              int64_t begin, int64_t end, float *tot) {
  const int64_t es = (int64_t)nk_dtype_size(dt);
  float lv[48][VT], acc[VT];
  uint64_t count = 0;
  int64_t idx[NRT_MAX_DIMS] = {0}, rows = 0, rest = begin;
  const char *p = in;
  for (int d = 0; d < pl->nr && rest; d++) {
    idx[d] = rest % pl->rsize[d];
    rest /= pl->rsize[d];
    p += idx[d] * pl->rstr[d];
  }
  for (int64_t j = 0; j < VT; j++) acc[j] = 0;
  for (int64_t r = begin; r < end; r++) {
    for (int64_t j = 0; j < T; j++) acc[j] += xf_f32(t, nk_load_f32(dt, p + j * es), pl->pf);
    if (++rows == VB || r + 1 == end) {
      uint64_t c = count++;
      int k = 0;
      for (; c & 1; c >>= 1, k++)
        for (int64_t j = 0; j < T; j++) acc[j] = lv[k][j] + acc[j];
      for (int64_t j = 0; j < T; j++) {
        lv[k][j] = acc[j];
        acc[j] = 0;
      }
      rows = 0;
    }
    for (int d = 0; d < pl->nr; d++) {
      p += pl->rstr[d];
      if (++idx[d] < pl->rsize[d]) break;
      p -= pl->rsize[d] * pl->rstr[d];
      idx[d] = 0;
    }
  }
  for (int64_t j = 0; j < T; j++) {
    float v = 0;
    int first = 1;
    for (int k = 0; k < 48; k++)
      if ((count >> k) & 1) {
        v = first ? lv[k][j] : lv[k][j] + v;
        first = 0;
      }
    tot[j] = v;
  }
}

static void vertical_sum(const rplan *pl, const char *in, int64_t T, int64_t begin, int64_t end,
                         float *tot) {
#define CALLV(dt, t) vertical_sum_t(pl, dt, t, in, T, begin, end, tot)
  switch (pl->dt) {
  case NRT_FLOAT16: XF_CASES(CALLV, NRT_FLOAT16); break;
  case NRT_BFLOAT16: XF_CASES(CALLV, NRT_BFLOAT16); break;
  default: XF_CASES(CALLV, NRT_FLOAT32); break;
  }
#undef CALLV
}

static int vertical_fits(const rplan *pl) {
  return pl->kind == K_SUM && pl->cls == NK_CLASS_FLOAT && pl->nk > 0 && pl->nr > 0 &&
         pl->kin[0] == (int64_t)nk_dtype_size(pl->dt) && pl->ksize[0] >= 8;
}

static void vertical_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const rplan *pl = arg;
  const int64_t per_row = (pl->ksize[0] + VT - 1) / VT;
  float tot[VT];
  racc a;
  for (int64_t t = begin; t < end; t++) {
    const int64_t j0 = (t % per_row) * VT, T = pl->ksize[0] - j0 < VT ? pl->ksize[0] - j0 : VT;
    const char *in;
    char *o0, *o1;
    locate(pl, (t / per_row) * pl->ksize[0] + j0, &in, &o0, &o1);
    vertical_sum(pl, in, T, 0, pl->n_red, tot);
    for (int64_t j = 0; j < T; j++) {
      acc_init(pl, &a);
      tree32_push(&a.t32, tot[j]);
      store(pl, &a, o0 + j * pl->kout[0][0], o1 ? o1 + j * pl->kout[1][0] : NULL);
    }
  }
}

/* Few outputs, long reduction, vertical layout (x.sum(0) of a [n, 8]
 * matrix): fixed chunks of rows, each a partial vector, combined in order. */
typedef struct vchunk_job {
  const rplan *pl;
  float *parts; /* chunks x VT */
} vchunk_job;

static void vchunks_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const vchunk_job *j = arg;
  const int64_t rows = RED_CHUNK / VT;
  for (int64_t c = begin; c < end; c++) {
    int64_t lo = c * rows, hi = lo + rows < j->pl->n_red ? lo + rows : j->pl->n_red;
    vertical_sum(j->pl, j->pl->in, j->pl->ksize[0], lo, hi, j->parts + c * VT);
  }
}

static int vertical_chunked(const rplan *pl, nrt_exec_ctx *ctx) {
  const int64_t rows = RED_CHUNK / VT, chunks = (pl->n_red + rows - 1) / rows;
  float *parts = malloc((size_t)chunks * VT * sizeof(float));
  if (!parts) {
    nrt_exec_fail(ctx, "reduce: out of host memory for %lld partial results", (long long)chunks);
    return -1;
  }
  vchunk_job job = {pl, parts};
  nk_parallel_for(chunks, 1, vchunks_range, &job);
  racc a;
  for (int64_t j = 0; j < pl->ksize[0]; j++) {
    acc_init(pl, &a);
    for (int64_t c = 0; c < chunks; c++) tree32_push(&a.t32, parts[c * VT + j]);
    store(pl, &a, pl->out[0] + j * pl->kout[0][0], NULL);
  }
  free(parts);
  return 0;
}

/* ----------------------------------------------------------------- plan */

static int lower_op(rplan *pl, const nk_reduce_params *prm, nrt_exec_ctx *ctx) {
  pl->xf = T_ID;
  pl->fin = F_NONE;
  pl->indexed = 0;
  pl->value_out = 1;
  int floating_only = 0, outs = 1;
  switch (pl->op) {
  case NK_REDUCE_SUM: pl->kind = K_SUM; break;
  case NK_REDUCE_NANSUM: pl->kind = K_SUM; pl->xf = T_NAN0; break;
  case NK_REDUCE_MEAN: pl->kind = K_SUM; pl->fin = F_MEAN; floating_only = 1; break;
  case NK_REDUCE_PROD: pl->kind = K_PROD; break;
  case NK_REDUCE_MAX: pl->kind = K_MAX; break;
  case NK_REDUCE_MIN: pl->kind = K_MIN; break;
  case NK_REDUCE_ARGMAX: pl->kind = K_MAX; pl->value_out = 0; break;
  case NK_REDUCE_ARGMIN: pl->kind = K_MIN; pl->value_out = 0; break;
  case NK_REDUCE_MAX_INDEX: pl->kind = K_MAX; pl->indexed = 1; outs = 2; break;
  case NK_REDUCE_MIN_INDEX: pl->kind = K_MIN; pl->indexed = 1; outs = 2; break;
  case NK_REDUCE_ALL: pl->kind = K_ALL; break;
  case NK_REDUCE_ANY: pl->kind = K_ANY; break;
  case NK_REDUCE_COUNT_NONZERO: pl->kind = K_COUNT; break;
  case NK_REDUCE_VAR:
    pl->kind = K_VAR;
    floating_only = 1;
    outs = pl->n_outs; /* the mean is optional */
    break;
  case NK_REDUCE_NORM: {
    double p = prm->p;
    floating_only = 1;
    if (isnan(p)) {
      nrt_exec_fail(ctx, "reduce: norm order is NaN");
      return -1;
    }
    pl->kind = K_SUM;
    if (p == INFINITY) { pl->kind = K_MAX; pl->xf = T_ABS; }
    else if (p == -INFINITY) { pl->kind = K_MIN; pl->xf = T_ABS; }
    else if (p == 0) pl->xf = T_NZ;
    else if (p == 1) pl->xf = T_ABS;
    else if (p == 2) { pl->xf = T_SQ; pl->fin = F_SQRT; }
    else { pl->xf = T_POW; pl->fin = F_ROOT; }
    break;
  }
  default:
    nrt_exec_fail(ctx, "reduce: invalid op %d", (int)pl->op);
    return -1;
  }
  if (pl->n_outs != outs) {
    nrt_exec_fail(ctx, "reduce: op %d takes %d output operand(s), got %d", (int)pl->op, outs,
                  pl->n_outs);
    return -1;
  }
  if (floating_only && !nk_dtype_is_floating(pl->dt)) {
    nrt_exec_fail(ctx, "reduce: op %d needs a floating input, got dtype %d", (int)pl->op, (int)pl->dt);
    return -1;
  }
  if ((pl->indexed && pl->out1 != NRT_INT64) || (!pl->value_out && pl->out0 != NRT_INT64)) {
    nrt_exec_fail(ctx, "reduce: indices must be int64");
    return -1;
  }
  return 0;
}

/* Sorts dims (innermost first) by |key| ascending, stable, then coalesces
 * neighbours whose strides allow it for every stride array. */
static int order_and_coalesce(int n, int64_t *size, int64_t *const *str, int nstr, int sort) {
  if (sort) {
    for (int i = 1; i < n; i++)
      for (int j = i; j > 0 && llabs(str[0][j - 1]) > llabs(str[0][j]); j--)
        for (int k = -1; k < nstr; k++) {
          int64_t *a = k < 0 ? size : str[k], t = a[j - 1];
          a[j - 1] = a[j];
          a[j] = t;
        }
  }
  int m = 0;
  for (int i = 0; i < n; i++) {
    int joins = m > 0;
    for (int k = 0; k < nstr && joins; k++)
      if (str[k][m - 1] * size[m - 1] != str[k][i]) joins = 0;
    if (joins) {
      size[m - 1] *= size[i];
    } else {
      size[m] = size[i];
      for (int k = 0; k < nstr; k++) str[k][m] = str[k][i];
      m++;
    }
  }
  return m;
}

static int plan_reduce(const nrt_task *task, nrt_exec_ctx *ctx, rplan *pl) {
  const nk_reduce_params *prm = (const nk_reduce_params *)task->params;
  const int nops = task->n_operands;
  if (nops != 2 && nops != 3) {
    nrt_exec_fail(ctx, "reduce: expected 2 or 3 operands, got %d", nops);
    return -1;
  }
  if (nk_check_elementwise(task, ctx, "reduce", nops)) return -1;
  const nrt_operand *ops = task->operands, *in = &ops[nops - 1];
  pl->op = (nk_reduce_op)prm->op;
  pl->n_outs = nops - 1;
  pl->in = in->data;
  pl->out[0] = ops[0].data;
  pl->out[1] = nops == 3 ? ops[1].data : NULL;
  pl->dt = (nrt_dtype)in->dtype;
  pl->out0 = (nrt_dtype)ops[0].dtype;
  pl->out1 = nops == 3 ? (nrt_dtype)ops[1].dtype : pl->out0;
  pl->cls = nk_dtype_class(pl->dt);
  if (pl->cls == NK_CLASS_BOOL) pl->cls = NK_CLASS_INT;
  pl->pd = prm->p;
  pl->pf = (float)prm->p;
  pl->correction = prm->correction;
  pl->take_sqrt = prm->take_sqrt;
  pl->n_out = pl->n_red = 1;
  pl->nk = pl->nr = 0;
  const int nd = in->ndim;
  for (int d = nd - 1; d >= 0; d--) {
    int64_t size = in->sizes[d];
    if (size == 1) continue;
    int reduced = ops[0].strides[d] == 0;
    if (nops == 3 && (ops[1].strides[d] == 0) != reduced) {
      nrt_exec_fail(ctx, "reduce: the outputs disagree on which dims are reduced");
      return -1;
    }
    if (reduced) {
      pl->rsize[pl->nr] = size;
      pl->rstr[pl->nr++] = in->strides[d];
      pl->n_red *= size;
    } else {
      pl->ksize[pl->nk] = size;
      pl->kout[0][pl->nk] = ops[0].strides[d];
      pl->kout[1][pl->nk] = nops == 3 ? ops[1].strides[d] : 0;
      pl->kin[pl->nk++] = in->strides[d];
      pl->n_out *= size;
    }
  }
  if (lower_op(pl, prm, ctx)) return -1;
  int64_t *kstr[3] = {pl->kin, pl->kout[0], pl->kout[1]};
  int64_t *rstr[1] = {pl->rstr};
  pl->nk = order_and_coalesce(pl->nk, pl->ksize, kstr, 3, 1);
  pl->nr = order_and_coalesce(pl->nr, pl->rsize, rstr, 1, pl->value_out && !pl->indexed);
  return 0;
}

/* Adaptive eager may run this task as a fused group's sink, on tiles of
 * whole rows (fusible.c): a plain reduction (one output) over rows of at
 * most RED_CHUNK elements that lie innermost in memory, so that the task and
 * any box of whole rows both take the per-output path -- one pairwise tree
 * per row, in the same order (never the chunked or vertical paths, whose
 * choice depends on how many rows a call holds). */
nrt_fuse_kind nk_reduce_fusion(const nrt_task *t) {
  const nk_reduce_params *prm = (const nk_reduce_params *)t->params;
  switch (prm->op) {
  case NK_REDUCE_SUM: case NK_REDUCE_NANSUM: case NK_REDUCE_MEAN: case NK_REDUCE_MAX:
  case NK_REDUCE_MIN: case NK_REDUCE_NORM: case NK_REDUCE_VAR: break;
  default: return NRT_FUSE_NONE;
  }
  if (t->n_operands != 2) return NRT_FUSE_NONE;
  const nrt_operand *out = &t->operands[0], *in = &t->operands[1];
  if (out->ndim != in->ndim || in->ndim > NRT_MAX_DIMS) return NRT_FUSE_NONE;
  int64_t n_red = 1, min_kept = INT64_MAX, max_red = 0;
  for (int d = 0; d < in->ndim; d++) {
    if (in->sizes[d] == 1) continue;
    const int64_t stride = in->strides[d] < 0 ? -in->strides[d] : in->strides[d];
    if (out->strides[d] == 0) {
      if (stride == 0) return NRT_FUSE_NONE;
      n_red *= in->sizes[d];
      if (stride * (in->sizes[d] - 1) > max_red) max_red = stride * (in->sizes[d] - 1);
    } else if (stride < min_kept) {
      min_kept = stride;
    }
  }
  return n_red > 1 && n_red <= RED_CHUNK && max_red < min_kept ? NRT_FUSE_REDUCTION
                                                                : NRT_FUSE_NONE;
}

int nk_reduce_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  rplan pl;
  if (plan_reduce(task, ctx, &pl)) return -1;
  if (pl.n_out == 0) return 0;
  if (pl.n_red == 0) {
    if ((pl.kind == K_MAX || pl.kind == K_MIN) && pl.op != NK_REDUCE_NORM) {
      nrt_exec_fail(ctx, "reduce: op %d of an empty range has no identity", (int)pl.op);
      return -1;
    }
    if (!pl.out[0] || (pl.n_outs == 2 && !pl.out[1])) {
      nrt_exec_fail(ctx, "reduce: output data is null");
      return -1;
    }
  }
  if (pl.n_out < RED_FEW_OUTPUTS && pl.n_red > RED_CHUNK && vertical_fits(&pl) && pl.n_out == pl.ksize[0])
    return vertical_chunked(&pl, ctx);
  if (pl.n_out < RED_FEW_OUTPUTS && pl.n_red > RED_CHUNK) {
    int64_t chunks = (pl.n_red + RED_CHUNK - 1) / RED_CHUNK;
    racc *parts = malloc((size_t)chunks * sizeof *parts);
    if (!parts) {
      nrt_exec_fail(ctx, "reduce: out of host memory for %lld partial results", (long long)chunks);
      return -1;
    }
    for (int64_t o = 0; o < pl.n_out; o++) {
      chunk_job job = {&pl, NULL, parts};
      char *o0, *o1;
      locate(&pl, o, &job.in, &o0, &o1);
      nk_parallel_for(chunks, 1, chunks_range, &job);
      racc total;
      acc_init(&pl, &total);
      for (int64_t c = 0; c < chunks; c++) combine(&pl, &total, &parts[c]);
      store(&pl, &total, o0, o1);
    }
    free(parts);
    return 0;
  }
  if (pl.n_red > 0 && vertical_fits(&pl)) {
    const int64_t tiles = pl.n_out / pl.ksize[0] * ((pl.ksize[0] + VT - 1) / VT);
    const int64_t work = pl.n_red * VT;
    nk_parallel_for(tiles, NK_GRAIN_ELEMENTWISE / work > 0 ? NK_GRAIN_ELEMENTWISE / work : 1, vertical_range, &pl);
    return 0;
  }
  int64_t per = pl.n_red > 0 ? pl.n_red : 1;
  int64_t grain = NK_GRAIN_ELEMENTWISE / per > 0 ? NK_GRAIN_ELEMENTWISE / per : 1;
  nk_parallel_for(pl.n_out, grain, outputs_range, &pl);
  return 0;
}
