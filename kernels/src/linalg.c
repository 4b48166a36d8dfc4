/* linalg.c — NK_KERNEL_ORGQR: the product of Householder reflectors
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

#include "kernel_entries.h"
#include "nd_iter.h"
#include "neuron_kernels.h"
#include "validate.h"

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
