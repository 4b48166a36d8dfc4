/* optim.h — what optim.c shares with its ISA variants (optim_impl.h). */
#ifndef NK_OPTIM_H
#define NK_OPTIM_H

#include <stdint.h>

#include "neuron_kernels.h"

/* elements per tile: the unit the row loops load, compute and store */
#define NK_OPT_TILE 256

/* internal ops beyond nk_foreach_op: ATen's special pow exponents */
enum {
  NK_OPT_POW_ONE = 100, /* exponent 0 */
  NK_OPT_POW_SQ,        /* 2  */
  NK_OPT_POW_CUBE,      /* 3  */
  NK_OPT_POW_RECIP_SQ   /* -2 */
};

/* which operands an op reads */
enum {
  NK_OPT_SHAPE_NULLARY = 0, /* zero_                          */
  NK_OPT_SHAPE_UNARY,       /* a                              */
  NK_OPT_SHAPE_BINARY,      /* a, b (slot 2 or the scalar)    */
  NK_OPT_SHAPE_ADDC,        /* a, b, c, value = the scalar    */
  NK_OPT_SHAPE_LERP,        /* a, b, w (slot 3 or the scalar) */
  NK_OPT_SHAPE_REDUCE       /* a -> one value per tensor      */
};

enum {
  NK_OPT_RED_NONE = 0,
  NK_OPT_RED_SUM_ABS, /* ord 1          */
  NK_OPT_RED_SUM_SQ,  /* ord 2          */
  NK_OPT_RED_SUM_POW, /* other ord > 0  */
  NK_OPT_RED_MAX_ABS, /* ord inf        */
  NK_OPT_RED_MAX      /* _foreach_max   */
};

typedef struct nk_opt_fe {
  int op;        /* nk_foreach_op or NK_OPT_POW_* for this row */
  int shape;     /* NK_OPT_SHAPE_*                             */
  int red_kind;  /* NK_OPT_RED_*                               */
  int b_is_list;
  int use_double; /* compute in double (a float64 slot)        */
  nrt_dtype dt[NK_FOREACH_SLOTS];
  double alpha;  /* add/sub alpha; norm ord                    */
} nk_opt_fe;

/* per-row factors of a fused step, in double (ATen's host-side math) */
typedef struct nk_opt_coef {
  double grad_scale, wd, decay, lerp_w, beta2, c2, bc2_sqrt, eps, neg_step_size, momentum,
      one_minus_dampening, clr;
} nk_opt_coef;

typedef struct nk_opt_fused {
  int op, flags, has_scale, has_wd;
  nrt_dtype dt;
} nk_opt_fused;

typedef void (*nk_opt_fe_rows_fn)(const nk_opt_fe *p, const nk_tensor_set *set, double s,
                                  int64_t lo, int64_t hi, double *partial);
typedef void (*nk_opt_fused_rows_fn)(const nk_opt_fused *p, const nk_opt_coef *k,
                                     const nk_tensor_set *set, int64_t lo, int64_t hi);

void nk_opt_fe_rows_portable(const nk_opt_fe *p, const nk_tensor_set *set, double s, int64_t lo,
                             int64_t hi, double *partial);
void nk_opt_fused_rows_portable(const nk_opt_fused *p, const nk_opt_coef *k,
                                const nk_tensor_set *set, int64_t lo, int64_t hi);
void nk_opt_fe_rows_avx2(const nk_opt_fe *p, const nk_tensor_set *set, double s, int64_t lo,
                         int64_t hi, double *partial);
void nk_opt_fused_rows_avx2(const nk_opt_fused *p, const nk_opt_coef *k,
                            const nk_tensor_set *set, int64_t lo, int64_t hi);

#endif /* NK_OPTIM_H */
