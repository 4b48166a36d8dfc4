/* optim_tile.h — the math of the multi-tensor kernels, on tiles.
 *
 * Included twice by optim_impl.h: once with OPT_T = float (float16,
 * bfloat16, float32 storage) and once with OPT_T = double (float64), and
 * that pair once per ISA variant (optim.c portable, optim_avx2_f32.c).
 * Every function works on tiles of at most NK_OPT_TILE elements that the
 * caller loaded into local arrays, so each op is one simple loop the
 * compiler vectorises, with no aliasing between operands (an in-place
 * launch reads and writes memory only in the load/store loops).
 *
 * Required macros: OPT_T, OPT_S(name) (suffixes a name), OPT_SQRT, OPT_EXP,
 * OPT_EXPM1, OPT_LOG, OPT_LOG1P, OPT_LOG2, OPT_LOG10, OPT_TANH, OPT_SIN,
 * OPT_COS, OPT_CEIL, OPT_FLOOR, OPT_RINT, OPT_TRUNC, OPT_ERF, OPT_ERFC,
 * OPT_POW, OPT_FABS, OPT_FMA (a * b + c, fused where ATen's vectors are). */

/* r <- op(a, b, c); b and c are tiles already holding the scalar where the
 * op takes one; alpha is add/sub's alpha or addcmul/addcdiv's value.  r may
 * be a itself, or b or c (an in-place launch writes the tensor it reads);
 * any other overlap is the caller's to avoid.  Each element is computed
 * from its own index only, so no loop has a dependence between iterations
 * and OPT_EACH says so to the vectoriser (#pragma GCC ivdep) instead of
 * restrict. */
static void OPT_S(fe_tile)(int op, int n, OPT_T *r, const OPT_T *a, const OPT_T *b,
                           const OPT_T *c, OPT_T alpha) {
  int j;
  switch (op) {
  case NK_FOREACH_ADD: OPT_EACH(j) r[j] = a[j] + alpha * b[j]; break;
  case NK_FOREACH_SUB: OPT_EACH(j) r[j] = a[j] - alpha * b[j]; break;
  case NK_FOREACH_MUL: OPT_EACH(j) r[j] = a[j] * b[j]; break;
  case NK_FOREACH_DIV: OPT_EACH(j) r[j] = a[j] / b[j]; break;
  /* Both sides of a select are computed first: gcc will not evaluate a
   * floating-point operation only one side needs (it could trap), so a
   * ternary over arithmetic stays a scalar branch per element. */
  case NK_FOREACH_MAXIMUM: /* std::max, NaN from either side */
    OPT_EACH(j) {
      const OPT_T nan_sum = a[j] + b[j], hi = a[j] < b[j] ? b[j] : a[j];
      r[j] = (a[j] != a[j] || b[j] != b[j]) ? nan_sum : hi;
    }
    break;
  case NK_FOREACH_MINIMUM:
    OPT_EACH(j) {
      const OPT_T nan_sum = a[j] + b[j], lo = b[j] < a[j] ? b[j] : a[j];
      r[j] = (a[j] != a[j] || b[j] != b[j]) ? nan_sum : lo;
    }
    break;
  case NK_FOREACH_POW: OPT_EACH(j) r[j] = OPT_POW(a[j], b[j]); break;
  case NK_FOREACH_RPOW: OPT_EACH(j) r[j] = OPT_POW(b[j], a[j]); break;
  case NK_OPT_POW_ONE: OPT_EACH(j) r[j] = 1; break;
  case NK_OPT_POW_SQ: OPT_EACH(j) r[j] = a[j] * a[j]; break;
  case NK_OPT_POW_CUBE: OPT_EACH(j) r[j] = a[j] * a[j] * a[j]; break;
  case NK_OPT_POW_RECIP_SQ: OPT_EACH(j) r[j] = 1 / (a[j] * a[j]); break;
  case NK_FOREACH_ADDCMUL: OPT_EACH(j) r[j] = a[j] + alpha * b[j] * c[j]; break;
  case NK_FOREACH_ADDCDIV: OPT_EACH(j) r[j] = a[j] + alpha * b[j] / c[j]; break;
  case NK_FOREACH_LERP: /* ATen's lerp: from the nearer end (both computed, see above) */
    OPT_EACH(j) {
      const OPT_T d = b[j] - a[j], from_a = a[j] + c[j] * d, from_b = b[j] - d * ((OPT_T)1 - c[j]);
      r[j] = OPT_FABS(c[j]) < (OPT_T)0.5 ? from_a : from_b;
    }
    break;
  case NK_FOREACH_COPY: OPT_EACH(j) r[j] = a[j]; break;
  case NK_FOREACH_ZERO: OPT_EACH(j) r[j] = 0; break;
  case NK_FOREACH_NEG: OPT_EACH(j) r[j] = -a[j]; break;
  case NK_FOREACH_ABS: OPT_EACH(j) r[j] = OPT_FABS(a[j]); break;
  case NK_FOREACH_SQRT: OPT_S(sqrt_tile)(n, r, a); break;
  case NK_FOREACH_RSQRT:
    OPT_S(sqrt_tile)(n, r, a);
    OPT_EACH(j) r[j] = 1 / r[j];
    break;
  case NK_FOREACH_EXP: OPT_EACH(j) r[j] = OPT_EXP(a[j]); break;
  case NK_FOREACH_EXPM1: OPT_EACH(j) r[j] = OPT_EXPM1(a[j]); break;
  case NK_FOREACH_LOG: OPT_EACH(j) r[j] = OPT_LOG(a[j]); break;
  case NK_FOREACH_LOG1P: OPT_EACH(j) r[j] = OPT_LOG1P(a[j]); break;
  case NK_FOREACH_LOG2: OPT_EACH(j) r[j] = OPT_LOG2(a[j]); break;
  case NK_FOREACH_LOG10: OPT_EACH(j) r[j] = OPT_LOG10(a[j]); break;
  case NK_FOREACH_RECIPROCAL: OPT_EACH(j) r[j] = 1 / a[j]; break;
  case NK_FOREACH_SIGN: OPT_EACH(j) r[j] = (OPT_T)((0 < a[j]) - (a[j] < 0)); break;
  case NK_FOREACH_SIGMOID: OPT_EACH(j) r[j] = 1 / (1 + OPT_EXP(-a[j])); break;
  case NK_FOREACH_TANH: OPT_EACH(j) r[j] = OPT_TANH(a[j]); break;
  case NK_FOREACH_SIN: OPT_EACH(j) r[j] = OPT_SIN(a[j]); break;
  case NK_FOREACH_COS: OPT_EACH(j) r[j] = OPT_COS(a[j]); break;
  case NK_FOREACH_CEIL: OPT_EACH(j) r[j] = OPT_CEIL(a[j]); break;
  case NK_FOREACH_FLOOR: OPT_EACH(j) r[j] = OPT_FLOOR(a[j]); break;
  case NK_FOREACH_ROUND: OPT_EACH(j) r[j] = OPT_RINT(a[j]); break;
  case NK_FOREACH_TRUNC: OPT_EACH(j) r[j] = OPT_TRUNC(a[j]); break;
  case NK_FOREACH_FRAC: OPT_EACH(j) r[j] = a[j] - OPT_TRUNC(a[j]); break;
  case NK_FOREACH_ERF: OPT_EACH(j) r[j] = OPT_ERF(a[j]); break;
  case NK_FOREACH_ERFC: OPT_EACH(j) r[j] = OPT_ERFC(a[j]); break;
  case NK_FOREACH_UNSCALE: OPT_EACH(j) r[j] = a[j] * alpha; break;
  default: break; /* validated by the caller */
  }
}

/* 1 when a tile holds an inf or NaN (x - x is 0 exactly for finite x). */
static int OPT_S(nonfinite_tile)(int n, const OPT_T *restrict a) {
  int bad = 0;
  for (int j = 0; j < n; j++) bad |= !(a[j] - a[j] == 0);
  return bad;
}

/* ------------------------------------------------------------ fused steps
 * One tile of a fused optimizer step, ATen CPU's vector-path formulas
 * (FusedAdamKernel.cpp, FusedSGDKernel.cpp, FusedAdagradKernel.cpp): the
 * scalar factors are rounded to OPT_T first, as ATen's Vec(scalar_t(x)).
 * OPT_FMA marks the explicit vec::fmadd calls and the a * b + c that gcc
 * contracts into one FMA in ATen's AVX2/AVX-512 builds (the first product
 * of a sum is what gets fused, found by comparing bits); with it the float32/float64 steps agree with
 * torch's CPU fused optimizer bit for bit on an FMA machine.
 * p, g, s1, s2, s3 are param, grad and the op's state tiles, updated in
 * place; the caller stores them. */
typedef struct OPT_S(optim_coef) {
  OPT_T grad_scale;          /* divide grads by it when has_scale        */
  OPT_T wd;                  /* weight decay (Adam, SGD, Adagrad)        */
  OPT_T decay;               /* AdamW: 1 - lr * weight_decay             */
  OPT_T lerp_w;              /* Adam: 1 - beta1                          */
  OPT_T beta2, c2;           /* Adam: beta2, 1 - beta2                   */
  OPT_T bc2_sqrt, eps;       /* Adam: sqrt(1 - beta2^step); Adagrad eps  */
  OPT_T neg_step_size;       /* Adam: -lr / (1 - beta1^step); SGD: -lr   */
  OPT_T momentum, one_minus_dampening; /* SGD                           */
  OPT_T clr;                 /* Adagrad: lr / (1 + (step - 1) lr_decay)  */
} OPT_S(optim_coef);

static void OPT_S(grad_prologue)(int n, OPT_T *restrict g, const OPT_T *restrict p,
                                 const OPT_S(optim_coef) *k, int has_scale, int maximize,
                                 int add_wd) {
  int j;
  if (has_scale)
    for (j = 0; j < n; j++) g[j] = g[j] / k->grad_scale;
  if (maximize)
    for (j = 0; j < n; j++) g[j] = g[j] * (OPT_T)-1;
  if (add_wd)
    for (j = 0; j < n; j++) g[j] = OPT_FMA(p[j], k->wd, g[j]);
}

/* Adam/AdamW: s1 exp_avg, s2 exp_avg_sq, s3 max_exp_avg_sq (amsgrad). The
 * grad tile is left scaled (the caller stores it when grads are scaled). */
static void OPT_S(adam_tile)(int n, OPT_T *restrict p, OPT_T *restrict g, OPT_T *restrict s1,
                             OPT_T *restrict s2, OPT_T *restrict s3, const OPT_S(optim_coef) *k,
                             int adamw, int has_wd, int amsgrad, int maximize, int has_scale,
                             OPT_T *restrict tmp) {
  int j;
  OPT_S(grad_prologue)(n, g, p, k, has_scale, 0, 0);
  if (!amsgrad && !maximize) {
    /* The usual step in two passes over the tile (the state and params
     * are often memory itself: see optim_rows) with the square root's
     * vector loop between them: the operations of the passes below, in
     * the same order, so the same bits.  wd: 0 none, 1 Adam's L2 term,
     * 2 AdamW's decay. */
    const OPT_T w = k->lerp_w, decay = k->decay, wdv = k->wd, b2 = k->beta2, c2 = k->c2;
    const int wd = !has_wd ? 0 : adamw ? 2 : 1;
#define ADAM_PASS(WD, NEAR)                                                      \
  for (j = 0; j < n; j++) {                                                      \
    OPT_T d = g[j];                                                              \
    if ((WD) == 2) p[j] = p[j] * decay;                                          \
    if ((WD) == 1) d = OPT_FMA(p[j], wdv, d);                                    \
    s1[j] = (NEAR) ? OPT_FMA(w, d - s1[j], s1[j]) : OPT_FMA(w - (OPT_T)1, d - s1[j], d); \
    s2[j] = OPT_FMA(c2 * d, d, s2[j] * b2);                                      \
  }
    if (OPT_FABS(w) < (OPT_T)0.5) {
      if (wd == 0) ADAM_PASS(0, 1) else if (wd == 1) ADAM_PASS(1, 1) else ADAM_PASS(2, 1)
    } else {
      if (wd == 0) ADAM_PASS(0, 0) else if (wd == 1) ADAM_PASS(1, 0) else ADAM_PASS(2, 0)
    }
#undef ADAM_PASS
    OPT_S(sqrt_tile)(n, tmp, s2);
    const OPT_T bc2 = k->bc2_sqrt, eps = k->eps, nss = k->neg_step_size;
    for (j = 0; j < n; j++) p[j] = p[j] + nss * s1[j] / (tmp[j] / bc2 + eps);
    return;
  }
  /* the scaled grad is what gets stored; maximize and decay act on a copy */
  for (j = 0; j < n; j++) tmp[j] = maximize ? g[j] * (OPT_T)-1 : g[j];
  if (has_wd) {
    if (adamw)
      for (j = 0; j < n; j++) p[j] = p[j] * k->decay;
    else
      for (j = 0; j < n; j++) tmp[j] = OPT_FMA(p[j], k->wd, tmp[j]);
  }
  /* exp_avg.lerp_(grad, 1 - beta1) as ATen's vectors do it: one fmadd */
  const OPT_T w = k->lerp_w;
  if (OPT_FABS(w) < (OPT_T)0.5)
    for (j = 0; j < n; j++) s1[j] = OPT_FMA(w, tmp[j] - s1[j], s1[j]);
  else
    for (j = 0; j < n; j++) s1[j] = OPT_FMA(w - (OPT_T)1, tmp[j] - s1[j], tmp[j]);
  for (j = 0; j < n; j++) s2[j] = OPT_FMA(k->c2 * tmp[j], tmp[j], s2[j] * k->beta2);
  const OPT_T *v = s2;
  if (amsgrad) {
    for (j = 0; j < n; j++) { /* Vectorized maximum: NaN propagating (both sides computed) */
      const OPT_T nan_sum = s3[j] + s2[j], hi = s3[j] < s2[j] ? s2[j] : s3[j];
      s3[j] = (s3[j] != s3[j] || s2[j] != s2[j]) ? nan_sum : hi;
    }
    v = s3;
  }
  OPT_S(sqrt_tile)(n, tmp, v);
  for (j = 0; j < n; j++) tmp[j] = tmp[j] / k->bc2_sqrt + k->eps;
  for (j = 0; j < n; j++) p[j] = p[j] + k->neg_step_size * s1[j] / tmp[j];
}

/* SGD: s1 momentum_buffer (when momentum != 0). */
static void OPT_S(sgd_tile)(int n, OPT_T *restrict p, OPT_T *restrict g, OPT_T *restrict s1,
                            const OPT_S(optim_coef) *k, int has_wd, int has_momentum,
                            int first_step, int nesterov, int maximize, int has_scale,
                            OPT_T *restrict tmp) {
  int j;
  OPT_S(grad_prologue)(n, g, p, k, has_scale, 0, 0);
  if (has_momentum && !first_step && !maximize) {
    /* The usual step in one pass over the tile (p, g and the buffer are
     * often memory itself: see optim_rows): the operations of the passes
     * below, in the same order, so the same bits. */
    const OPT_T mom = k->momentum, omd = k->one_minus_dampening, nlr = k->neg_step_size,
                wd = has_wd ? k->wd : 0;
#define SGD_PASS(WD, NESTEROV)                                                   \
  for (j = 0; j < n; j++) {                                                      \
    const OPT_T d = (WD) ? OPT_FMA(p[j], wd, g[j]) : g[j];                       \
    const OPT_T s = OPT_FMA(omd, d, s1[j] * mom);                                \
    s1[j] = s;                                                                   \
    p[j] = OPT_FMA((NESTEROV) ? OPT_FMA(s, mom, d) : s, nlr, p[j]);              \
  }
    if (has_wd) {
      if (nesterov) SGD_PASS(1, 1) else SGD_PASS(1, 0)
    } else {
      if (nesterov) SGD_PASS(0, 1) else SGD_PASS(0, 0)
    }
#undef SGD_PASS
    return;
  }
  for (j = 0; j < n; j++) tmp[j] = maximize ? g[j] * (OPT_T)-1 : g[j];
  if (has_wd)
    for (j = 0; j < n; j++) tmp[j] = OPT_FMA(p[j], k->wd, tmp[j]);
  if (has_momentum) {
    if (first_step)
      for (j = 0; j < n; j++) s1[j] = tmp[j];
    else
      for (j = 0; j < n; j++) s1[j] = OPT_FMA(k->one_minus_dampening, tmp[j], s1[j] * k->momentum);
    if (nesterov)
      for (j = 0; j < n; j++) tmp[j] = OPT_FMA(s1[j], k->momentum, tmp[j]);
    else
      for (j = 0; j < n; j++) tmp[j] = s1[j];
  }
  for (j = 0; j < n; j++) p[j] = OPT_FMA(tmp[j], k->neg_step_size, p[j]);
}

/* Adagrad: s1 state_sum. */
static void OPT_S(adagrad_tile)(int n, OPT_T *restrict p, OPT_T *restrict g, OPT_T *restrict s1,
                                const OPT_S(optim_coef) *k, int has_wd, int maximize,
                                int has_scale, OPT_T *restrict tmp) {
  int j;
  OPT_S(grad_prologue)(n, g, p, k, has_scale, 0, 0);
  for (j = 0; j < n; j++) tmp[j] = maximize ? g[j] * (OPT_T)-1 : g[j];
  if (has_wd)
    for (j = 0; j < n; j++) tmp[j] = OPT_FMA(p[j], k->wd, tmp[j]);
  for (j = 0; j < n; j++) s1[j] = OPT_FMA(tmp[j], tmp[j], s1[j]);
  OPT_T std_[NK_OPT_TILE];
  OPT_S(sqrt_tile)(n, std_, s1);
  for (j = 0; j < n; j++) p[j] = p[j] - k->clr * tmp[j] / (std_[j] + k->eps);
}
