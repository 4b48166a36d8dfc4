/* sort_random.c — the sampling kernels of the sort family, counter based
 * like random.c (Philox4x32-10 keyed by the seed, one block per element
 * counted from offset / 4), so results depend on seed, offset and shape
 * only, never on the thread count:
 *   NK_KERNEL_BERNOULLI_TENSOR: out <- (uniform < p[i]), p a tensor;
 *   NK_KERNEL_MULTINOMIAL: category samples per row of a probability
 *     matrix, with replacement (inverse of the cumulative distribution) or
 *     without (the exponential race: the n largest p / Exp(1), sorted). */
#include <stdatomic.h>

#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "sort/sort_keys.h"
#include "common/validate.h"

/* A uniform double in [0, 1) from the block's first two words (53 bits). */
static double unit53(const uint32_t x[4]) {
  return (double)((((uint64_t)x[1] << 32) | x[0]) >> 11) * 0x1p-53;
}

/* ------------------------------------------------------ bernoulli(p tensor) */

typedef struct bern_job {
  const nk_philox_params *p;
  const nrt_operand *out, *prob;
  nk_walker w;
  atomic_int bad;
} bern_job;

static void bern_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  bern_job *j = arg;
  nk_walker w = j->w;
  nk_walker_seek(&w, begin);
  const nrt_dtype to = (nrt_dtype)j->out->dtype, tp = (nrt_dtype)j->prob->dtype;
  for (int64_t i = begin; i < end; i++) {
    double pv = nk_load_f64(tp, (const char *)j->prob->data + w.off[1]);
    if (!(pv >= 0 && pv <= 1)) { atomic_store(&j->bad, 1); return; }
    uint32_t x[4];
    nk_philox4x32(j->p->seed, j->p->offset / 4 + (uint64_t)i, x);
    nk_store_i64(to, (char *)j->out->data + w.off[0], unit53(x) < pv);
    nk_walker_next(&w);
  }
}

int nk_bernoulli_tensor_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_elementwise(task, ctx, "bernoulli_tensor", 2)) return -1;
  bern_job job = {.p = (const nk_philox_params *)task->params, .out = &task->operands[0],
                  .prob = &task->operands[1]};
  job.w.ndim = job.out->ndim;
  job.w.n_ops = 2;
  for (int d = 0; d < job.out->ndim; d++) {
    job.w.sizes[d] = job.out->sizes[d];
    job.w.strides[0][d] = job.out->strides[d];
    job.w.strides[1][d] = job.prob->strides[d];
  }
  atomic_init(&job.bad, 0);
  nk_parallel_for(nk_numel(job.out), 4096, bern_range, &job);
  if (atomic_load(&job.bad)) {
    nrt_exec_fail(ctx, "bernoulli_: Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ multinomial */

enum { MN_OK = 0, MN_BAD_PROB, MN_ZERO_SUM, MN_OOM };

typedef struct mn_job {
  const nk_multinomial_params *p;
  const nrt_operand *out, *probs;
  int64_t cats, samples;
  atomic_int err;
} mn_job;

static void mn_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  mn_job *j = arg;
  const int64_t nc = j->cats, ns = j->samples;
  const nrt_dtype tp = (nrt_dtype)j->probs->dtype;
  const int two_d = j->probs->ndim == 2;
  const int64_t pr = two_d ? j->probs->strides[0] : 0, pc = j->probs->strides[two_d];
  const int64_t orow = j->out->ndim == 2 ? j->out->strides[0] : 0,
                ocol = j->out->strides[j->out->ndim - 1];
  double *cdf = malloc((size_t)nc * sizeof *cdf);
  nk_pair *pairs = j->p->replacement ? NULL : malloc((size_t)(2 * nc) * sizeof *pairs);
  if (!cdf || (!j->p->replacement && !pairs)) {
    atomic_store(&j->err, MN_OOM);
    free(cdf);
    free(pairs);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const char *row = (const char *)j->probs->data + r * pr;
    char *o = (char *)j->out->data + r * orow;
    double total = 0;
    int64_t last_positive = -1;
    for (int64_t c = 0; c < nc; c++) {
      double v = nk_load_f64(tp, row + c * pc);
      if (!(v >= 0) || isinf(v)) { atomic_store(&j->err, MN_BAD_PROB); goto done; }
      if (v > 0) last_positive = c;
      total += v;
      cdf[c] = total;
    }
    if (!(total > 0)) { atomic_store(&j->err, MN_ZERO_SUM); goto done; }
    if (j->p->replacement) {
      for (int64_t s = 0; s < ns; s++) {
        uint32_t x[4];
        nk_philox4x32(j->p->seed, j->p->offset / 4 + (uint64_t)(r * ns + s), x);
        double u = unit53(x) * total;
        int64_t lo = 0, hi = nc; /* first c with cdf[c] > u */
        while (lo < hi) {
          int64_t mid = lo + ((hi - lo) >> 1);
          if (cdf[mid] > u) hi = mid;
          else lo = mid + 1;
        }
        if (lo >= nc) lo = last_positive; /* u rounded up to the total */
        nk_write_i64(o + s * ocol, lo);
      }
    } else {
      for (int64_t c = 0; c < nc; c++) {
        uint32_t x[4];
        nk_philox4x32(j->p->seed, j->p->offset / 4 + (uint64_t)(r * nc + c), x);
        double q = -log(1.0 - unit53(x)); /* Exp(1), > 0 unless u == 0 */
        double v = nk_load_f64(tp, row + c * pc);
        double key = q > 0 ? v / q : (v > 0 ? INFINITY : 0);
        memcpy(&pairs[c].key, &key, 8); /* key >= 0: its bits order as the value */
        pairs[c].key = ~pairs[c].key;    /* largest first */
        pairs[c].index = c;
      }
      nk_sort_pairs(pairs, pairs + nc, nc);
      for (int64_t s = 0; s < ns; s++) nk_write_i64(o + s * ocol, pairs[s].index);
    }
  }
done:
  free(cdf);
  free(pairs);
}

int nk_multinomial_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "multinomial", 2)) return -1;
  const nk_multinomial_params *p = (const nk_multinomial_params *)task->params;
  const nrt_operand *out = &task->operands[0], *probs = &task->operands[1];
  int ok = out->dtype == NRT_INT64 && (probs->ndim == 1 || probs->ndim == 2) &&
           out->ndim == probs->ndim && nk_dtype_is_floating((nrt_dtype)probs->dtype);
  if (ok && probs->ndim == 2) ok = out->sizes[0] == probs->sizes[0];
  const int64_t nc = ok ? probs->sizes[probs->ndim - 1] : 0, ns = ok ? out->sizes[out->ndim - 1] : 0;
  if (!ok || (!p->replacement && ns > nc)) {
    nrt_exec_fail(ctx, "multinomial: expected int64 out of (rows, n_sample) for floating probs of "
                       "(rows, categories), n_sample <= categories without replacement");
    return -1;
  }
  const int64_t rows = probs->ndim == 2 ? probs->sizes[0] : 1;
  if (rows == 0 || ns == 0) return 0;
  if (nc == 0) {
    nrt_exec_fail(ctx, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    return -1;
  }
  mn_job job = {.p = p, .out = out, .probs = probs, .cats = nc, .samples = ns};
  atomic_init(&job.err, MN_OK);
  int64_t work = nc + ns;
  nk_parallel_for(rows, work >= 4096 ? 1 : 4096 / work, mn_range, &job);
  switch (atomic_load(&job.err)) {
  case MN_BAD_PROB:
    nrt_exec_fail(ctx, "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
    return -1;
  case MN_ZERO_SUM:
    nrt_exec_fail(ctx, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    return -1;
  case MN_OOM:
    nrt_exec_fail(ctx, "multinomial: out of host memory for %lld categories", (long long)nc);
    return -1;
  default: return 0;
  }
}
