/* optim_impl.h — one ISA variant of the multi-tensor row loops.
 *
 * Included once by optim.c (portable C) and once by optim_avx2_f32.c
 * (compiled with -mavx2 -mfma, so the tile loops vectorise 8 lanes wide and
 * fmaf is one instruction).  OPT_ISA(name) names this variant's entry points
 * (declared in optim.h); OPT_SQRT_TILE_F/D may give a vector square root
 * (gcc vectorises sqrtf only without errno). */
#include <math.h>

#include "common/dtype_convert.h"
#include "optim/optim.h"

#ifdef __FMA__
#define OPT_FMAF(a, b, c) fmaf(a, b, c)
#define OPT_FMAD(a, b, c) fma(a, b, c)
#else /* ATen's portable Vectorized fmadd is a * b + c too */
#define OPT_FMAF(a, b, c) ((a) * (b) + (c))
#define OPT_FMAD(a, b, c) ((a) * (b) + (c))
#endif

/* ------------------------------------------------------------ tile I/O */

#define OPT_DEFINE_IO(T, SUF)                                                                \
  static void load_tile_##SUF(nrt_dtype t, const char *base, int64_t i0, int n, T *dst) {  \
    switch (t) {                                                                            \
    case NRT_FLOAT32: {                                                                     \
      const char *s = base + i0 * 4;                                                        \
      for (int j = 0; j < n; j++) dst[j] = (T)nk_read_f32(s + 4 * j);                       \
      break;                                                                                \
    }                                                                                       \
    case NRT_FLOAT64: {                                                                     \
      const char *s = base + i0 * 8;                                                        \
      for (int j = 0; j < n; j++) dst[j] = (T)nk_read_f64(s + 8 * j);                       \
      break;                                                                                \
    }                                                                                       \
    case NRT_BFLOAT16: {                                                                    \
      const char *s = base + i0 * 2;                                                        \
      for (int j = 0; j < n; j++) dst[j] = (T)nk_bf16_to_f32(nk_read_u16(s + 2 * j));       \
      break;                                                                                \
    }                                                                                       \
    default: {                                                                              \
      const char *s = base + i0 * 2;                                                        \
      for (int j = 0; j < n; j++) dst[j] = (T)nk_f16_to_f32(nk_read_u16(s + 2 * j));        \
      break;                                                                                \
    }                                                                                       \
    }                                                                                       \
  }                                                                                         \
  static void store_tile_##SUF(nrt_dtype t, char *base, int64_t i0, int n, const T *src) {  \
    switch (t) {                                                                            \
    case NRT_FLOAT32: {                                                                     \
      char *d = base + i0 * 4;                                                              \
      for (int j = 0; j < n; j++) nk_write_f32(d + 4 * j, (float)src[j]);                   \
      break;                                                                                \
    }                                                                                       \
    case NRT_FLOAT64: {                                                                     \
      char *d = base + i0 * 8;                                                              \
      for (int j = 0; j < n; j++) nk_write_f64(d + 8 * j, (double)src[j]);                  \
      break;                                                                                \
    }                                                                                       \
    case NRT_BFLOAT16: {                                                                    \
      char *d = base + i0 * 2;                                                              \
      for (int j = 0; j < n; j++) nk_write_u16(d + 2 * j, nk_f32_to_bf16((float)src[j]));   \
      break;                                                                                \
    }                                                                                       \
    default: {                                                                              \
      char *d = base + i0 * 2;                                                              \
      for (int j = 0; j < n; j++) nk_write_u16(d + 2 * j, nk_f32_to_f16((float)src[j]));    \
      break;                                                                                \
    }                                                                                       \
    }                                                                                       \
  }                                                                                         \
  static void fill_tile_##SUF(int n, T *dst, T v) {                                        \
    for (int j = 0; j < n; j++) dst[j] = v;                                                 \
  }

OPT_DEFINE_IO(float, f)
OPT_DEFINE_IO(double, d)

/* r may be a (fe_tile's rule) */
#ifndef OPT_SQRT_TILE_F
static void sqrt_tile_f(int n, float *r, const float *a) {
  _Pragma("GCC ivdep") for (int j = 0; j < n; j++) r[j] = sqrtf(a[j]);
}
#endif
#ifndef OPT_SQRT_TILE_D
static void sqrt_tile_d(int n, double *r, const double *a) {
  _Pragma("GCC ivdep") for (int j = 0; j < n; j++) r[j] = sqrt(a[j]);
}
#endif

/* ------------------------------------------------------------ the math, twice */

/* an element-wise loop whose result may be written over an operand (optim_tile.h) */
#define OPT_EACH(j) _Pragma("GCC ivdep") for (j = 0; j < n; j++)

#define OPT_T float
#define OPT_S(name) name##_f
#define OPT_SQRT sqrtf
#define OPT_EXP expf
#define OPT_EXPM1 expm1f
#define OPT_LOG logf
#define OPT_LOG1P log1pf
#define OPT_LOG2 log2f
#define OPT_LOG10 log10f
#define OPT_TANH tanhf
#define OPT_SIN sinf
#define OPT_COS cosf
#define OPT_CEIL ceilf
#define OPT_FLOOR floorf
#define OPT_RINT nearbyintf
#define OPT_TRUNC truncf
#define OPT_ERF erff
#define OPT_ERFC erfcf
#define OPT_POW powf
#define OPT_FABS fabsf
#define OPT_FMA OPT_FMAF
#include "optim/optim_tile.h"
#undef OPT_T
#undef OPT_S
#undef OPT_SQRT
#undef OPT_EXP
#undef OPT_EXPM1
#undef OPT_LOG
#undef OPT_LOG1P
#undef OPT_LOG2
#undef OPT_LOG10
#undef OPT_TANH
#undef OPT_SIN
#undef OPT_COS
#undef OPT_CEIL
#undef OPT_FLOOR
#undef OPT_RINT
#undef OPT_TRUNC
#undef OPT_ERF
#undef OPT_ERFC
#undef OPT_POW
#undef OPT_FABS
#undef OPT_FMA

#define OPT_T double
#define OPT_S(name) name##_d
#define OPT_SQRT sqrt
#define OPT_EXP exp
#define OPT_EXPM1 expm1
#define OPT_LOG log
#define OPT_LOG1P log1p
#define OPT_LOG2 log2
#define OPT_LOG10 log10
#define OPT_TANH tanh
#define OPT_SIN sin
#define OPT_COS cos
#define OPT_CEIL ceil
#define OPT_FLOOR floor
#define OPT_RINT nearbyint
#define OPT_TRUNC trunc
#define OPT_ERF erf
#define OPT_ERFC erfc
#define OPT_POW pow
#define OPT_FABS fabs
#define OPT_FMA OPT_FMAD
#include "optim/optim_tile.h"

/* ------------------------------------------------------------ reductions */

/* Per-tile partial of a norm or max, in double, lanes of 8 so that the
 * compiler vectorises and the order is fixed. */
#define OPT_DEFINE_REDUCE(T, SUF)                                                          \
  static double reduce_tile_##SUF(int kind, double ord, int n, const T *a, double acc) {   \
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                             \
    int j = 0;                                                                             \
    switch (kind) {                                                                        \
    case NK_OPT_RED_SUM_ABS:                                                               \
      for (; j + 8 <= n; j += 8)                                                           \
        for (int l = 0; l < 8; l++) lane[l] += fabs((double)a[j + l]);                     \
      for (; j < n; j++) lane[0] += fabs((double)a[j]);                                    \
      break;                                                                               \
    case NK_OPT_RED_SUM_SQ:                                                                \
      for (; j + 8 <= n; j += 8)                                                           \
        for (int l = 0; l < 8; l++) lane[l] += (double)a[j + l] * (double)a[j + l];        \
      for (; j < n; j++) lane[0] += (double)a[j] * (double)a[j];                           \
      break;                                                                               \
    case NK_OPT_RED_SUM_POW:                                                               \
      for (; j < n; j++) lane[j & 7] += pow(fabs((double)a[j]), ord);                      \
      break;                                                                               \
    case NK_OPT_RED_MAX_ABS:                                                               \
      for (; j < n; j++) {                                                                 \
        double x = fabs((double)a[j]);                                                     \
        acc = (x != x || acc != acc) ? NAN : (acc < x ? x : acc);                          \
      }                                                                                    \
      return acc;                                                                          \
    default: /* NK_OPT_RED_MAX */                                                          \
      for (; j < n; j++) {                                                                 \
        double x = (double)a[j];                                                           \
        acc = (x != x || acc != acc) ? NAN : (acc < x ? x : acc);                          \
      }                                                                                    \
      return acc;                                                                          \
    }                                                                                      \
    return acc + (((lane[0] + lane[1]) + (lane[2] + lane[3])) +                            \
                  ((lane[4] + lane[5]) + (lane[6] + lane[7])));                            \
  }

OPT_DEFINE_REDUCE(float, f)
OPT_DEFINE_REDUCE(double, d)

/* ------------------------------------------------------------ foreach rows */

/* An operand in the compute type (float32 for the float build, float64 for
 * the double one) is read where it lies, and the result is written where it
 * goes; other dtypes are converted through local tiles.  Reading and
 * writing in place took a foreach add over 25M float32s from 0.70x to
 * ~1.0x torch CPU's on 2 Zen 3 cores (three tile copies per element fewer).
 * The output is written directly unless a direct input overlaps it other
 * than exactly (fe_tile's rule): such a launch computes into r first, so
 * each tile reads its inputs before it stores, as the tile copies did. */
#define OPT_DEFINE_FE_ROWS(T, SUF, NATIVE)                                                  \
  static const T *src_tile_##SUF(nrt_dtype t, const char *base, int64_t i0, int n, T *buf) { \
    if (t == NATIVE) return (const T *)(const void *)base + i0;                             \
    load_tile_##SUF(t, base, i0, n, buf);                                                   \
    return buf;                                                                             \
  }                                                                                         \
  /* x (n elements) is y itself, or apart from it */                                       \
  static int same_or_apart_##SUF(const T *x, const T *y, int n) {                          \
    return x == y || (uintptr_t)(x + n) <= (uintptr_t)y || (uintptr_t)(y + n) <= (uintptr_t)x; \
  }                                                                                         \
  static void fe_rows_##SUF(const nk_opt_fe *p, const nk_tensor_set *set, double s,        \
                            int64_t lo, int64_t hi, double *partial) {                     \
    T ta[NK_OPT_TILE], tb[NK_OPT_TILE], tc[NK_OPT_TILE], r[NK_OPT_TILE];                  \
    const T *a = ta, *b = tb, *c = tc;                                                      \
    const int op = p->op, shape = p->shape;                                                \
    const T alpha = (T)(shape == NK_OPT_SHAPE_ADDC || op == NK_FOREACH_UNSCALE ? s : p->alpha); \
    double acc = p->red_kind >= NK_OPT_RED_MAX_ABS ? -INFINITY : 0;                        \
    if (p->red_kind == NK_OPT_RED_MAX_ABS) acc = 0;                                        \
    int bad = 0;                                                                           \
    /* a scalar operand: one tile holding it for the whole range */                        \
    if (shape == NK_OPT_SHAPE_BINARY && !p->b_is_list) fill_tile_##SUF(NK_OPT_TILE, tb, (T)s); \
    if (shape == NK_OPT_SHAPE_LERP && p->b_is_list != 2) fill_tile_##SUF(NK_OPT_TILE, tc, (T)s); \
    for (int64_t i = lo; i < hi; i += NK_OPT_TILE) {                                       \
      const int n = (int)(hi - i < NK_OPT_TILE ? hi - i : NK_OPT_TILE);                    \
      if (shape != NK_OPT_SHAPE_NULLARY) a = src_tile_##SUF(p->dt[1], set->data[1], i, n, ta); \
      switch (shape) {                                                                     \
      case NK_OPT_SHAPE_BINARY:                                                            \
        if (p->b_is_list) b = src_tile_##SUF(p->dt[2], set->data[2], i, n, tb);            \
        break;                                                                             \
      case NK_OPT_SHAPE_ADDC:                                                              \
        b = src_tile_##SUF(p->dt[2], set->data[2], i, n, tb);                              \
        c = src_tile_##SUF(p->dt[3], set->data[3], i, n, tc);                              \
        break;                                                                             \
      case NK_OPT_SHAPE_LERP:                                                              \
        b = src_tile_##SUF(p->dt[2], set->data[2], i, n, tb);                              \
        if (p->b_is_list == 2) c = src_tile_##SUF(p->dt[3], set->data[3], i, n, tc);       \
        break;                                                                             \
      case NK_OPT_SHAPE_REDUCE:                                                            \
        acc = reduce_tile_##SUF(p->red_kind, p->alpha, n, a, acc);                         \
        continue;                                                                          \
      default: break;                                                                      \
      }                                                                                    \
      if (op == NK_FOREACH_UNSCALE) bad |= nonfinite_tile_##SUF(n, a);                     \
      T *out = p->dt[0] == NATIVE ? (T *)(void *)set->data[0] + i : NULL;                  \
      if (out && same_or_apart_##SUF(a, out, n) &&                                         \
          same_or_apart_##SUF(b, out, n) && same_or_apart_##SUF(c, out, n)) {             \
        fe_tile_##SUF(op, n, out, a, b, c, alpha);                                         \
      } else {                                                                             \
        fe_tile_##SUF(op, n, r, a, b, c, alpha);                                           \
        store_tile_##SUF(p->dt[0], set->data[0], i, n, r);                                 \
      }                                                                                    \
    }                                                                                      \
    if (shape == NK_OPT_SHAPE_REDUCE) *partial = acc;                                      \
    if (op == NK_FOREACH_UNSCALE) *partial = bad;                                          \
  }

OPT_DEFINE_FE_ROWS(float, f, NRT_FLOAT32)
OPT_DEFINE_FE_ROWS(double, d, NRT_FLOAT64)

void OPT_ISA(nk_opt_fe_rows)(const nk_opt_fe *p, const nk_tensor_set *set, double s, int64_t lo,
                             int64_t hi, double *partial) {
  if (p->use_double)
    fe_rows_d(p, set, s, lo, hi, partial);
  else
    fe_rows_f(p, set, s, lo, hi, partial);
}

/* ------------------------------------------------------------ fused rows */

/* Params stored in T itself (float32 for the float build, float64 for
 * the double one) are updated where they lie: the tile functions get the
 * memory (distinct tensors: restrict holds) and the load/store copies are
 * skipped -- 7 of an AdamW step's ~17 passes over each tile.  Other
 * dtypes go through the tiles, converted. */
#define OPT_DEFINE_OPTIM_ROWS(T, SUF)                                                       \
  static void optim_rows_##SUF(const nk_opt_fused *p, const nk_opt_coef *kd,               \
                               const nk_tensor_set *set, int64_t lo, int64_t hi) {         \
    T pt[NK_OPT_TILE], gt[NK_OPT_TILE], s1[NK_OPT_TILE], s2[NK_OPT_TILE], s3[NK_OPT_TILE],  \
        tmp[NK_OPT_TILE];                                                                  \
    optim_coef_##SUF k = {(T)kd->grad_scale, (T)kd->wd,        (T)kd->decay,               \
                          (T)kd->lerp_w,     (T)kd->beta2,     (T)kd->c2,                  \
                          (T)kd->bc2_sqrt,   (T)kd->eps,       (T)kd->neg_step_size,       \
                          (T)kd->momentum,   (T)kd->one_minus_dampening, (T)kd->clr};      \
    const nrt_dtype t = p->dt;                                                             \
    const int f = p->flags, op = p->op;                                                    \
    const int scale = p->has_scale;                                                        \
    const int ams = (f & NK_OPTIM_AMSGRAD) != 0, maxi = (f & NK_OPTIM_MAXIMIZE) != 0;      \
    const int mom = kd->momentum != 0;                                                     \
    const int direct = t == (sizeof(T) == 4 ? NRT_FLOAT32 : NRT_FLOAT64);                  \
    const int has1 = op != NK_OPTIM_SGD || mom, has3 = op <= NK_OPTIM_ADAMW && ams;         \
    const int has2 = op == NK_OPTIM_ADAM || op == NK_OPTIM_ADAMW;                          \
    for (int64_t i = lo; i < hi; i += NK_OPT_TILE) {                                       \
      const int n = (int)(hi - i < NK_OPT_TILE ? hi - i : NK_OPT_TILE);                    \
      T *P = direct ? (T *)(void *)set->data[0] + i : pt;                                  \
      T *G = direct ? (T *)(void *)set->data[1] + i : gt;                                  \
      T *S1 = direct && has1 ? (T *)(void *)set->data[2] + i : s1;                         \
      T *S2 = direct && has2 ? (T *)(void *)set->data[3] + i : s2;                         \
      T *S3 = direct && has3 ? (T *)(void *)set->data[4] + i : s3;                         \
      if (!direct) {                                                                       \
        load_tile_##SUF(t, set->data[0], i, n, pt);                                        \
        load_tile_##SUF(t, set->data[1], i, n, gt);                                        \
      }                                                                                    \
      switch (op) {                                                                        \
      case NK_OPTIM_ADAM:                                                                  \
      case NK_OPTIM_ADAMW:                                                                 \
        if (!direct) {                                                                     \
          load_tile_##SUF(t, set->data[2], i, n, s1);                                      \
          load_tile_##SUF(t, set->data[3], i, n, s2);                                      \
          if (ams) load_tile_##SUF(t, set->data[4], i, n, s3);                             \
        }                                                                                  \
        adam_tile_##SUF(n, P, G, S1, S2, S3, &k, op == NK_OPTIM_ADAMW, p->has_wd, ams,     \
                        maxi, scale, tmp);                                                 \
        if (!direct) {                                                                     \
          store_tile_##SUF(t, set->data[2], i, n, s1);                                     \
          store_tile_##SUF(t, set->data[3], i, n, s2);                                     \
          if (ams) store_tile_##SUF(t, set->data[4], i, n, s3);                            \
        }                                                                                  \
        break;                                                                             \
      case NK_OPTIM_SGD:                                                                   \
        if (!direct && mom && !(f & NK_OPTIM_FIRST_STEP))                                  \
          load_tile_##SUF(t, set->data[2], i, n, s1);                                      \
        sgd_tile_##SUF(n, P, G, S1, &k, p->has_wd, mom, (f & NK_OPTIM_FIRST_STEP) != 0,    \
                       (f & NK_OPTIM_NESTEROV) != 0, maxi, scale, tmp);                    \
        if (!direct && mom) store_tile_##SUF(t, set->data[2], i, n, s1);                   \
        break;                                                                             \
      default:                                                                             \
        if (!direct) load_tile_##SUF(t, set->data[2], i, n, s1);                           \
        adagrad_tile_##SUF(n, P, G, S1, &k, p->has_wd, maxi, scale, tmp);                  \
        if (!direct) store_tile_##SUF(t, set->data[2], i, n, s1);                          \
        break;                                                                             \
      }                                                                                    \
      if (!direct) {                                                                       \
        if (scale) store_tile_##SUF(t, set->data[1], i, n, gt);                            \
        store_tile_##SUF(t, set->data[0], i, n, pt);                                       \
      }                                                                                    \
    }                                                                                      \
  }

OPT_DEFINE_OPTIM_ROWS(float, f)
OPT_DEFINE_OPTIM_ROWS(double, d)

void OPT_ISA(nk_opt_fused_rows)(const nk_opt_fused *p, const nk_opt_coef *k,
                                const nk_tensor_set *set, int64_t lo, int64_t hi) {
  if (p->dt == NRT_FLOAT64)
    optim_rows_d(p, k, set, lo, hi);
  else
    optim_rows_f(p, k, set, lo, hi);
}
