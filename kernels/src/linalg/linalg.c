/* linalg.c — the dense linear algebra parametrizations.orthogonal needs:
 * NK_KERNEL_ORGQR (below) and NK_KERNEL_LU (getrf/getrs, at the end of the
 * file, with its own notes; linalg.solve/inv/det/slogdet and the "cayley"
 * map).  matrix_exp needs no kernel: ops_linalg.cpp builds it from matmul.
 *
 * NK_KERNEL_ORGQR: the product of Householder reflectors
 * (torch.linalg.householder_product / orgqr), so that
 * torch.nn.utils.parametrizations.orthogonal's "householder" map and
 * ATen's householder_product_backward run on the device.
 *
 * Why this shape:
 *   - ATen's linalg_householder_product is one device-generic function
 *     (checks, a batched column-major copy of the input, then orgqr_stub);
 *     the glue registers it and fills the stub's PrivateUse1 slot with this
 *     kernel, so the checks and error messages are ATen's own.
 *   - The algorithm is LAPACK's unblocked xORG2R (what LAPACK itself runs
 *     for the small matrices parametrizations use): the reflectors are
 *     applied from the last to the first, each to the trailing columns only,
 *     so the work is ~ 2 m n k and every column is written by the reflector
 *     that owns it.  The blocked xORGQR (compact WY) only pays off for
 *     matrices far larger than a weight parametrization's.
 *   - One matrix per thread (nk_parallel_for over the batch): the matrices
 *     are independent and each one's result is computed in one fixed order,
 *     so results do not depend on the thread count.
 *   - float32 accumulates its dot products in double (the only deviation
 *     from sorg2r's arithmetic; results agree with LAPACK to float32's
 *     rounding), float64 is plain double.  Operands are strided, so the
 *     kernel takes the column-major copy ATen hands it as well as any
 *     other layout. */
#include <stdlib.h>
#include <string.h>

#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

typedef struct orgqr_job {
  const nrt_operand *a, *tau;
  int64_t m, n, k, batch;
  int bdims; /* batch dims (a->ndim - 2) */
} orgqr_job;

/* byte offsets of batch matrix b in a and tau (batch dims in tensor order) */
static void orgqr_offsets(const orgqr_job *j, int64_t b, int64_t *oa, int64_t *ot) {
  *oa = 0;
  *ot = 0;
  for (int d = j->bdims - 1; d >= 0; d--) {
    const int64_t s = j->a->sizes[d], i = b % s;
    b /= s;
    *oa += i * j->a->strides[d];
    *ot += i * j->tau->strides[d];
  }
}

#define ORGQR_MATRIX(T, ACC)                                                                          \
  static void orgqr_matrix_##T(const orgqr_job *j, char *A, const char *tau) {                       \
    const int64_t m = j->m, n = j->n, k = j->k;                                                       \
    const int64_t rs = j->a->strides[j->bdims], cs = j->a->strides[j->bdims + 1];                     \
    const int64_t ts = j->tau->strides[j->bdims];                                                     \
    for (int64_t c = k; c < n; c++) {                                                                 \
      for (int64_t r = 0; r < m; r++) *(T *)(A + r * rs + c * cs) = 0;                                \
      *(T *)(A + c * rs + c * cs) = 1;                                                                \
    }                                                                                                 \
    for (int64_t i = k - 1; i >= 0; i--) {                                                            \
      const T t = *(const T *)(tau + i * ts);                                                         \
      char *vi = A + i * cs; /* column i: the vector below the diagonal */                           \
      if (i < n - 1) {                                                                                \
        *(T *)(vi + i * rs) = 1;                                                                      \
        for (int64_t c = i + 1; c < n; c++) {                                                         \
          char *col = A + c * cs;                                                                     \
          ACC w = 0;                                                                                  \
          for (int64_t r = i; r < m; r++) w += (ACC) * (T *)(vi + r * rs) * (ACC) * (T *)(col + r * rs); \
          const T tw = (T)((ACC)t * w);                                                               \
          for (int64_t r = i; r < m; r++) *(T *)(col + r * rs) -= tw * *(T *)(vi + r * rs);           \
        }                                                                                             \
      }                                                                                               \
      for (int64_t r = i + 1; r < m; r++) *(T *)(vi + r * rs) *= -t;                                  \
      *(T *)(vi + i * rs) = 1 - t;                                                                    \
      for (int64_t r = 0; r < i; r++) *(T *)(vi + r * rs) = 0;                                        \
    }                                                                                                 \
  }
ORGQR_MATRIX(float, double)
ORGQR_MATRIX(double, double)

static void orgqr_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const orgqr_job *j = arg;
  for (int64_t b = begin; b < end; b++) {
    int64_t oa, ot;
    orgqr_offsets(j, b, &oa, &ot);
    char *A = (char *)j->a->data + oa;
    const char *tau = (const char *)j->tau->data + ot;
    if (j->a->dtype == NRT_FLOAT32) orgqr_matrix_float(j, A, tau);
    else orgqr_matrix_double(j, A, tau);
  }
}

int nk_orgqr_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "orgqr", 2)) return -1;
  const nrt_operand *a = &task->operands[0], *tau = &task->operands[1];
  if (a->dtype != tau->dtype || (a->dtype != NRT_FLOAT32 && a->dtype != NRT_FLOAT64)) {
    nrt_exec_fail(ctx, "orgqr: a and tau must share one dtype, float32 or float64");
    return -1;
  }
  if (a->ndim < 2 || tau->ndim != a->ndim - 1) {
    nrt_exec_fail(ctx, "orgqr: a must be (..., m, n) and tau (..., k); got %d-d and %d-d", (int)a->ndim,
                  (int)tau->ndim);
    return -1;
  }
  orgqr_job j = {.a = a, .tau = tau, .bdims = a->ndim - 2, .batch = 1};
  for (int d = 0; d < j.bdims; d++) {
    if (tau->sizes[d] != a->sizes[d]) {
      nrt_exec_fail(ctx, "orgqr: batch dim %d is %lld in a and %lld in tau", d, (long long)a->sizes[d],
                    (long long)tau->sizes[d]);
      return -1;
    }
    j.batch *= a->sizes[d];
  }
  j.m = a->sizes[a->ndim - 2];
  j.n = a->sizes[a->ndim - 1];
  j.k = tau->sizes[tau->ndim - 1];
  if (!(j.m >= j.n && j.n >= j.k)) {
    nrt_exec_fail(ctx, "orgqr: needs m >= n >= k, got m %lld, n %lld, k %lld", (long long)j.m, (long long)j.n,
                  (long long)j.k);
    return -1;
  }
  if (j.batch == 0 || j.n == 0) return 0;
  nk_parallel_for(j.batch, 1, orgqr_range, &j);
  return 0;
}

/* ------------------------------------------------------------------- LU */

/* Why: torch.linalg.solve (parametrizations.orthogonal's "cayley" map, and
 * every solve) is ATen's structured _linalg_solve_ex: lu_factor_stub then
 * lu_solve_stub, both registered for PrivateUse1 on this kernel.  Unblocked
 * right-looking getf2 (first largest |pivot|, as idamax; the column scaled
 * by the pivot's reciprocal, as LAPACK) and getrs's two triangular solves,
 * in the dtype, one matrix per thread (results independent of the thread
 * count).  Blocking would only pay for matrices far larger than these ops
 * see in training. */

typedef struct lu_job {
  const nrt_operand *ops; /* the task's operands */
  const nk_lu_params *p;
  int64_t batch;
  int bdims;
  int64_t m, n, r;    /* FACTOR: a is m x n; SOLVE: lu n x n, x n x r */
  volatile int bad;   /* a pivot out of range (SOLVE) */
} lu_job;

static int64_t lu_offset(const nrt_operand *o, int bdims, int64_t b, const nrt_operand *shape) {
  int64_t off = 0;
  for (int d = bdims - 1; d >= 0; d--) {
    const int64_t s = shape->sizes[d], i = b % s;
    b /= s;
    off += i * o->strides[d];
  }
  return off;
}

#define LU_MATRIX(T)                                                                                   \
  static void lu_factor_##T(const lu_job *j, char *A, char *piv, char *info) {                         \
    const nrt_operand *a = &j->ops[0];                                                                 \
    const int64_t rs = a->strides[j->bdims], cs = a->strides[j->bdims + 1];                            \
    const int64_t ps = j->ops[1].strides[j->bdims];                                                    \
    const int64_t m = j->m, n = j->n, k = m < n ? m : n;                                               \
    int32_t first_zero = 0;                                                                            \
    for (int64_t c = 0; c < k; c++) {                                                                  \
      int64_t p = c;                                                                                   \
      if (j->p->pivot) {                                                                               \
        T best = -1;                                                                                   \
        for (int64_t r = c; r < m; r++) {                                                              \
          T v = *(T *)(A + r * rs + c * cs);                                                           \
          v = v < 0 ? -v : v;                                                                          \
          if (v > best) { best = v; p = r; } /* the first largest; NaN never wins */                  \
        }                                                                                              \
      }                                                                                                \
      *(int32_t *)(piv + c * ps) = (int32_t)(p + 1);                                                   \
      const T pv = *(T *)(A + p * rs + c * cs);                                                        \
      if (pv != 0) {                                                                                   \
        if (p != c)                                                                                    \
          for (int64_t q = 0; q < n; q++) {                                                            \
            T t = *(T *)(A + c * rs + q * cs);                                                         \
            *(T *)(A + c * rs + q * cs) = *(T *)(A + p * rs + q * cs);                                 \
            *(T *)(A + p * rs + q * cs) = t;                                                           \
          }                                                                                            \
        const T inv = (T)1 / pv;                                                                       \
        for (int64_t r = c + 1; r < m; r++) *(T *)(A + r * rs + c * cs) *= inv;                        \
      } else if (!first_zero) {                                                                        \
        first_zero = (int32_t)(c + 1);                                                                 \
      }                                                                                                \
      for (int64_t q = c + 1; q < n; q++) {                                                            \
        const T u = *(T *)(A + c * rs + q * cs);                                                       \
        if (u == 0) continue;                                                                          \
        for (int64_t r = c + 1; r < m; r++) *(T *)(A + r * rs + q * cs) -= *(T *)(A + r * rs + c * cs) * u; \
      }                                                                                                \
    }                                                                                                  \
    *(int32_t *)info = first_zero;                                                                     \
  }                                                                                                    \
  static int lu_solve_##T(const lu_job *j, char *X, const char *L, const char *piv, int transpose) {   \
    const nrt_operand *x = &j->ops[0], *lu = &j->ops[1];                                               \
    const int64_t xr = x->strides[j->bdims], xc = x->strides[j->bdims + 1];                            \
    const int64_t lr = lu->strides[j->bdims], lc = lu->strides[j->bdims + 1];                          \
    const int64_t ps = j->ops[2].strides[j->bdims];                                                    \
    const int64_t n = j->n, nr = j->r;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                                  \
      const int32_t p = *(const int32_t *)(piv + i * ps);                                              \
      if (p < 1 || p > n) return -1;                                                                   \
    }                                                                                                  \
    for (int64_t c = 0; c < nr; c++) {                                                                 \
      char *col = X + c * xc;                                                                          \
      if (!transpose) {                                                                                \
        for (int64_t i = 0; i < n; i++) { /* P^T b: the swaps in order */                              \
          const int64_t p = *(const int32_t *)(piv + i * ps) - 1;                                      \
          if (p != i) {                                                                                \
            T t = *(T *)(col + i * xr);                                                                \
            *(T *)(col + i * xr) = *(T *)(col + p * xr);                                               \
            *(T *)(col + p * xr) = t;                                                                  \
          }                                                                                            \
        }                                                                                              \
        for (int64_t i = 1; i < n; i++) { /* L y = b, unit diagonal */                                 \
          T s = *(T *)(col + i * xr);                                                                  \
          for (int64_t q = 0; q < i; q++) s -= *(const T *)(L + i * lr + q * lc) * *(T *)(col + q * xr); \
          *(T *)(col + i * xr) = s;                                                                    \
        }                                                                                              \
        for (int64_t i = n - 1; i >= 0; i--) { /* U x = y */                                           \
          T s = *(T *)(col + i * xr);                                                                  \
          for (int64_t q = i + 1; q < n; q++) s -= *(const T *)(L + i * lr + q * lc) * *(T *)(col + q * xr); \
          *(T *)(col + i * xr) = s / *(const T *)(L + i * lr + i * lc);                                \
        }                                                                                              \
      } else {                                                                                         \
        for (int64_t i = 0; i < n; i++) { /* U^T y = b */                                              \
          T s = *(T *)(col + i * xr);                                                                  \
          for (int64_t q = 0; q < i; q++) s -= *(const T *)(L + q * lr + i * lc) * *(T *)(col + q * xr); \
          *(T *)(col + i * xr) = s / *(const T *)(L + i * lr + i * lc);                                \
        }                                                                                              \
        for (int64_t i = n - 2; i >= 0; i--) { /* L^T z = y, unit diagonal */                          \
          T s = *(T *)(col + i * xr);                                                                  \
          for (int64_t q = i + 1; q < n; q++) s -= *(const T *)(L + q * lr + i * lc) * *(T *)(col + q * xr); \
          *(T *)(col + i * xr) = s;                                                                    \
        }                                                                                              \
        for (int64_t i = n - 1; i >= 0; i--) { /* P z: the swaps in reverse */                         \
          const int64_t p = *(const int32_t *)(piv + i * ps) - 1;                                      \
          if (p != i) {                                                                                \
            T t = *(T *)(col + i * xr);                                                                \
            *(T *)(col + i * xr) = *(T *)(col + p * xr);                                               \
            *(T *)(col + p * xr) = t;                                                                  \
          }                                                                                            \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
    return 0;                                                                                          \
  }
LU_MATRIX(float)
LU_MATRIX(double)

static void lu_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  lu_job *j = arg;
  const nrt_operand *o = j->ops;
  const int f64 = o[0].dtype == NRT_FLOAT64;
  for (int64_t b = begin; b < end; b++) {
    char *x = (char *)o[0].data + lu_offset(&o[0], j->bdims, b, &o[0]);
    char *s1 = (char *)o[1].data + lu_offset(&o[1], j->bdims, b, &o[0]);
    char *s2 = (char *)o[2].data + lu_offset(&o[2], j->bdims, b, &o[0]);
    if (j->p->op == NK_LU_FACTOR) {
      if (f64) lu_factor_double(j, x, s1, s2);
      else lu_factor_float(j, x, s1, s2);
    } else {
      const int t = j->p->op == NK_LU_SOLVE_TRANSPOSE;
      if (f64 ? lu_solve_double(j, x, s1, s2, t) : lu_solve_float(j, x, s1, s2, t)) j->bad = 1;
    }
  }
}

int nk_lu_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "lu", 3)) return -1;
  const nk_lu_params *p = (const nk_lu_params *)task->params;
  const nrt_operand *o = task->operands;
  if (p->op < 0 || p->op >= NK_LU_OP_COUNT) {
    nrt_exec_fail(ctx, "lu: unknown op %d", (int)p->op);
    return -1;
  }
  const int factor = p->op == NK_LU_FACTOR;
  if (o[0].dtype != NRT_FLOAT32 && o[0].dtype != NRT_FLOAT64) {
    nrt_exec_fail(ctx, "lu: float32 or float64 only");
    return -1;
  }
  if ((factor ? o[1].dtype != NRT_INT32 || o[2].dtype != NRT_INT32
              : o[1].dtype != o[0].dtype || o[2].dtype != NRT_INT32)) {
    nrt_exec_fail(ctx, "lu: pivots and info must be int32 and the matrices share one dtype");
    return -1;
  }
  const int nd = o[0].ndim;
  /* shapes: FACTOR a (..., m, n), pivots (..., k), info (...);
   *         SOLVE x (..., n, r), lu (..., n, n), pivots (..., n) */
  if (nd < 2 || o[1].ndim != (factor ? nd - 1 : nd) || o[2].ndim != (factor ? nd - 2 : nd - 1)) {
    nrt_exec_fail(ctx, "lu: bad ranks %d, %d, %d", nd, (int)o[1].ndim, (int)o[2].ndim);
    return -1;
  }
  lu_job j = {.ops = o, .p = p, .bdims = nd - 2, .batch = 1};
  for (int d = 0; d < j.bdims; d++) {
    if (o[1].sizes[d] != o[0].sizes[d] || o[2].sizes[d] != o[0].sizes[d]) {
      nrt_exec_fail(ctx, "lu: batch dim %d differs between the operands", d);
      return -1;
    }
    j.batch *= o[0].sizes[d];
  }
  if (factor) {
    j.m = o[0].sizes[nd - 2];
    j.n = o[0].sizes[nd - 1];
    if (o[1].sizes[nd - 2] != (j.m < j.n ? j.m : j.n)) {
      nrt_exec_fail(ctx, "lu: pivots must have min(m, n) = %lld entries", (long long)(j.m < j.n ? j.m : j.n));
      return -1;
    }
  } else {
    j.n = o[0].sizes[nd - 2];
    j.r = o[0].sizes[nd - 1];
    if (o[1].sizes[nd - 2] != j.n || o[1].sizes[nd - 1] != j.n || o[2].sizes[nd - 2] != j.n) {
      nrt_exec_fail(ctx, "lu: the factors must be %lld x %lld with %lld pivots", (long long)j.n, (long long)j.n,
                    (long long)j.n);
      return -1;
    }
  }
  if (j.batch == 0) return 0;
  if (!factor && (j.n == 0 || j.r == 0)) return 0;
  nk_parallel_for(j.batch, 1, lu_range, &j);
  if (j.bad) {
    nrt_exec_fail(ctx, "lu: a pivot is outside [1, %lld]", (long long)j.n);
    return -1;
  }
  return 0;
}
