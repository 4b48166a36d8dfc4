/* random.c — NK_KERNEL_RANDOM: counter-based samples (Philox4x32-10).
 *
 * Element i (row-major over out's sizes) draws block offset/4 + i, so the
 * numbers depend on (seed, offset, shape) alone: any thread count, any
 * chunking, any strides give the same tensor.  Integers from 64 random bits
 * modulo the range (the bias is below 2^-32 for every range a tensor dtype
 * allows), floats from the top 24 (float32 and narrower) or 53 (float64)
 * bits, as ATen's uniform_real_distribution does. */
#include <math.h>

#include "common/dtype_convert.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

void nk_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

typedef struct random_job {
  const nk_random_params *p;
  const nrt_operand *out;
  nrt_dtype dtype;
  int wide; /* float64: 53-bit uniforms */
} random_job;

/* A uniform in [0, 1) from the block's first words. */
static double unit(const uint32_t x[4], int wide) {
  if (wide) return (double)((((uint64_t)x[1] << 32) | x[0]) >> 11) * 0x1p-53;
  return (double)(x[0] >> 8) * 0x1p-24;
}

static void sample(const random_job *j, uint64_t index, char *dst) {
  const nk_random_params *p = j->p;
  uint32_t x[4];
  nk_philox4x32(p->seed, p->offset / 4 + index, x);
  uint64_t bits = ((uint64_t)x[1] << 32) | x[0];
  switch (p->dist) {
  case NK_DIST_UNIFORM: {
    nk_store_f64(j->dtype, dst, p->a + unit(x, j->wide) * (p->b - p->a));
    if (nk_load_f64(j->dtype, dst) >= p->b && p->b > p->a) /* rounding reached b */
      nk_store_f64(j->dtype, dst, p->a);
    break;
  }
  case NK_DIST_NORMAL: {
    double u1 = ((double)x[2] + 1.0) * 0x1p-32; /* (0, 1]: log is finite */
    double u2 = (double)x[3] * 0x1p-32;
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    nk_store_f64(j->dtype, dst, p->a + p->b * z);
    break;
  }
  case NK_DIST_BERNOULLI:
    nk_store_i64(j->dtype, dst, unit(x, 1) < p->a);
    break;
  case NK_DIST_RANGE: {
    int64_t v = (int64_t)((uint64_t)p->base + bits % p->range);
    if (nk_dtype_is_floating(j->dtype)) nk_store_f64(j->dtype, dst, (double)v);
    else nk_store_i64(j->dtype, dst, v);
    break;
  }
  case NK_DIST_FULL_RANGE:
    nk_store_i64(j->dtype, dst, (int64_t)bits);
    break;
  default: { /* NK_DIST_EXPONENTIAL */
    double u = 1.0 - unit(x, j->wide); /* (0, 1] */
    nk_store_f64(j->dtype, dst, -log(u) / p->a);
    break;
  }
  }
}

static void random_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const random_job *j = arg;
  const nrt_operand *o = j->out;
  int64_t idx[NRT_MAX_DIMS];
  int64_t rest = begin, offset = 0;
  for (int d = o->ndim - 1; d >= 0; d--) { /* unravel begin, row-major */
    idx[d] = rest % o->sizes[d];
    rest /= o->sizes[d];
    offset += idx[d] * o->strides[d];
  }
  for (int64_t i = begin; i < end; i++) {
    sample(j, (uint64_t)i, (char *)o->data + offset);
    for (int d = o->ndim - 1; d >= 0; d--) { /* next index, carrying */
      offset += o->strides[d];
      if (++idx[d] < o->sizes[d]) break;
      offset -= idx[d] * o->strides[d];
      idx[d] = 0;
    }
  }
}

int nk_random_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "random", 1)) return -1;
  const nk_random_params *p = (const nk_random_params *)task->params;
  if (p->dist < 0 || p->dist >= NK_DIST_COUNT) {
    nrt_exec_fail(ctx, "random: unknown distribution %d", (int)p->dist);
    return -1;
  }
  if (p->dist == NK_DIST_RANGE && p->range == 0) {
    nrt_exec_fail(ctx, "random: empty range");
    return -1;
  }
  const nrt_operand *out = &task->operands[0];
  random_job job = {p, out, (nrt_dtype)out->dtype, out->dtype == NRT_FLOAT64};
  /* Philox costs ~30 ns an element: a smaller grain than memory-bound ops. */
  int64_t numel = 1;
  for (int d = 0; d < out->ndim; d++) numel *= out->sizes[d]; /* validated */
  nk_parallel_for(numel, 4096, random_range, &job);
  return 0;
}
