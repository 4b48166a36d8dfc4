/* softmax.c — NK_KERNEL_SOFTMAX: softmax / log_softmax, forward and
 * backward, along one dim.
 *
 * Each line along `dim` is independent; lines are split over the compute
 * pool.  Forward is the numerically stable form: m = max(x), then
 * exp(x - m) and its sum, as ATen's CPU kernel (softmax multiplies by the
 * reciprocal of the sum).  float16/bfloat16/float32 compute in float32,
 * float64 in float64.  Sums use RED_LANES independent accumulators.
 * A float32 line that is contiguous in every operand takes the
 * vectorised loop of the machine's ISA (softmax_simd_impl.h, compiled as
 * softmax_avx2_f32.c and softmax_avx512_f32.c; exp is the unary ops' vector
 * exp, simd_exp_f32.h); contiguous 16-bit lines are widened into float32
 * buffers for it (log_softmax forward keeping ATen's 16-bit rounding of
 * the sum and its log: the vector line's log = 2 / 3); float32 lines along
 * an outer dim go in tiles of neighbours (AVX2).  NK_SOFTMAX_AVX2 in the
 * environment picks the AVX2 line on an AVX-512 machine (tests run both). */
#include <math.h>
#include <stdlib.h>

#include "common/dtype_convert.h"
#include "common/half_rows.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "reduce/softmax_simd.h"
#include "common/validate.h"
#include "common/tmp_buffers.h"

typedef struct smplan {
  int log, backward, nops, dbl;
  int last_dim; /* dim is the innermost dim */
  nrt_dtype dt[3];
  int64_t len, s[3];  /* along dim (bytes) */
  int nd;             /* the other dims */
  int64_t size[NRT_MAX_DIMS], st[3][NRT_MAX_DIMS];
  char *data[3];
  nk_softmax_vec_fn vec;
  int widen; /* 16-bit lines go through float32 buffers to `vec` */
} smplan;

#define LANES 8

/* ------------------------------------------------------------ float class */

static float max_f32(nrt_dtype t, const char *p, int64_t n, int64_t s) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    float x = nk_load_f32(t, p + i * s);
    if (isnan(x)) return x;
    m = x > m ? x : m;
  }
  return m;
}

static void line_f32(const smplan *p, char *const *d) {
  const int64_t n = p->len;
  float acc[LANES] = {0};
  if (!p->backward) {
    const nrt_dtype to = p->dt[0], ti = p->dt[1];
    const int64_t so = p->s[0], si = p->s[1];
    const float m = max_f32(ti, d[1], n, si);
    for (int64_t i = 0; i < n; i++) acc[i % LANES] += expf(nk_load_f32(ti, d[1] + i * si) - m);
    float sum = 0;
    for (int j = 0; j < LANES; j++) sum += acc[j];
    if (p->log) {
      /* ATen's CPU rounding: along the last dim a 16-bit input keeps the sum
       * and its log in its own dtype (found bit-exact against torch 2.13) */
      const int narrow = p->last_dim && (ti == NRT_FLOAT16 || ti == NRT_BFLOAT16);
      const float ls = narrow ? nk_round_f32(ti, logf(nk_round_f32(ti, sum))) : logf(sum);
      for (int64_t i = 0; i < n; i++) {
        const float x = nk_load_f32(ti, d[1] + i * si);
        nk_store_f32(to, d[0] + i * so, x - m - ls);
      }
    } else {
      const float r = 1.0f / sum;
      for (int64_t i = 0; i < n; i++)
        nk_store_f32(to, d[0] + i * so, expf(nk_load_f32(ti, d[1] + i * si) - m) * r);
    }
    return;
  }
  const nrt_dtype tg = p->dt[1], ty = p->dt[2], tr = p->dt[0];
  for (int64_t i = 0; i < n; i++) {
    float g = nk_load_f32(tg, d[1] + i * p->s[1]);
    acc[i % LANES] += p->log ? g : g * nk_load_f32(ty, d[2] + i * p->s[2]);
  }
  float sum = 0;
  for (int j = 0; j < LANES; j++) sum += acc[j];
  for (int64_t i = 0; i < n; i++) {
    float g = nk_load_f32(tg, d[1] + i * p->s[1]), y = nk_load_f32(ty, d[2] + i * p->s[2]);
    nk_store_f32(tr, d[0] + i * p->s[0], p->log ? g - expf(y) * sum : y * (g - sum));
  }
}

/* ----------------------------------------------------------- double class */

static void line_f64(const smplan *p, char *const *d) {
  const int64_t n = p->len;
  double acc[LANES] = {0};
  if (!p->backward) {
    const nrt_dtype to = p->dt[0], ti = p->dt[1];
    const int64_t so = p->s[0], si = p->s[1];
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      double x = nk_load_f64(ti, d[1] + i * si);
      if (isnan(x)) { m = x; break; }
      m = x > m ? x : m;
    }
    for (int64_t i = 0; i < n; i++) acc[i % LANES] += exp(nk_load_f64(ti, d[1] + i * si) - m);
    double sum = 0;
    for (int j = 0; j < LANES; j++) sum += acc[j];
    if (p->log) {
      const double sh = m + log(sum);
      for (int64_t i = 0; i < n; i++) nk_store_f64(to, d[0] + i * so, nk_load_f64(ti, d[1] + i * si) - sh);
    } else {
      const double r = 1.0 / sum;
      for (int64_t i = 0; i < n; i++)
        nk_store_f64(to, d[0] + i * so, exp(nk_load_f64(ti, d[1] + i * si) - m) * r);
    }
    return;
  }
  const nrt_dtype tg = p->dt[1], ty = p->dt[2], tr = p->dt[0];
  for (int64_t i = 0; i < n; i++) {
    double g = nk_load_f64(tg, d[1] + i * p->s[1]);
    acc[i % LANES] += p->log ? g : g * nk_load_f64(ty, d[2] + i * p->s[2]);
  }
  double sum = 0;
  for (int j = 0; j < LANES; j++) sum += acc[j];
  for (int64_t i = 0; i < n; i++) {
    double g = nk_load_f64(tg, d[1] + i * p->s[1]), y = nk_load_f64(ty, d[2] + i * p->s[2]);
    nk_store_f64(tr, d[0] + i * p->s[0], p->log ? g - exp(y) * sum : y * (g - sum));
  }
}

/* A contiguous 16-bit line through float32 copies and the vector line;
 * the copies widen and round with half_rows.h's vector loops (the same
 * bits as nk_bf16_to_f32 / nk_f32_to_bf16: a bfloat16 1024x8000
 * log_softmax had spent most of its time in the per-element loops). */
static int widened_line(const smplan *p, char *const *d, float *buf) {
  const int64_t n = p->len;
  const nrt_dtype t = (nrt_dtype)p->dt[0]; /* every operand: the same 16-bit dtype, contiguous */
  char *b[3] = {(char *)buf, (char *)(buf + n), (char *)(buf + 2 * n)};
  for (int o = 1; o < p->nops; o++) nk_half_in(t, d[o], 2, n, (float *)b[o]);
  /* log_softmax forward of a 16-bit line rounds like ATen's CPU (line_f32) */
  const int log = p->log && !p->backward && p->last_dim ? (p->dt[1] == NRT_BFLOAT16 ? 2 : 3) : p->log;
  if (p->vec(log, p->backward, n, b[0], b[1], b[2])) return 1;
  nk_half_out(t, d[0], 2, n, (const float *)b[0]);
  return 0;
}

static void lines_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const smplan *p = arg;
  float *buf = p->widen ? nk_tmp_malloc((size_t)p->len * 3 * sizeof(float)) : NULL;
  for (int64_t l = begin; l < end; l++) {
    char *d[3] = {p->data[0], p->data[1], p->data[2]};
    int64_t r = l;
    for (int k = 0; k < p->nd; k++) {
      int64_t i = r % p->size[k];
      r /= p->size[k];
      for (int o = 0; o < p->nops; o++) d[o] += i * p->st[o][k];
    }
    if (buf && !widened_line(p, d, buf)) continue;
    if (p->vec && !p->widen && !p->vec(p->log, p->backward, p->len, d[0], d[1], d[2])) continue;
    if (p->dbl) line_f64(p, d);
    else line_f32(p, d);
  }
  nk_tmp_free(buf);
}

nk_softmax_vec_fn nk_softmax_vec_pick(void) {
  const nk_isa isa = nk_cpu_isa();
  if (getenv("NK_SOFTMAX_AVX2")) return isa >= NK_ISA_AVX2 ? nk_softmax_avx2_f32 : NULL; /* tests: both ways */
  return isa == NK_ISA_AVX512 ? nk_softmax_avx512_f32 : isa == NK_ISA_AVX2 ? nk_softmax_avx2_f32 : NULL;
}

/* ------------------------------------------- float32 tiles of lines */

/* When `dim` is not the innermost dim but the innermost other dim is
 * contiguous in every (float32) operand, ST neighbouring lines are done
 * together, walking `dim` row by row: contiguous reads instead of one
 * strided walk per line. */
#define ST 32

static void tile_f32(const smplan *p, char *const *d, int64_t T) {
  const int64_t n = p->len;
  float m[ST], sum[ST];
  for (int64_t j = 0; j < T; j++) sum[j] = 0;
  if (!p->backward) {
    int nan[ST] = {0};
    for (int64_t j = 0; j < T; j++) m[j] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      const float *x = (const float *)(d[1] + i * p->s[1]);
      for (int64_t j = 0; j < T; j++) {
        nan[j] |= x[j] != x[j];
        m[j] = x[j] > m[j] ? x[j] : m[j];
      }
    }
    for (int64_t j = 0; j < T; j++)
      if (nan[j]) m[j] = NAN;
    for (int64_t i = 0; i < n; i++) {
      const float *x = (const float *)(d[1] + i * p->s[1]);
      for (int64_t j = 0; j < T; j++) sum[j] += expf(x[j] - m[j]);
    }
    for (int64_t j = 0; j < T; j++) sum[j] = p->log ? m[j] + logf(sum[j]) : 1.0f / sum[j];
    for (int64_t i = 0; i < n; i++) {
      const float *x = (const float *)(d[1] + i * p->s[1]);
      float *o = (float *)(d[0] + i * p->s[0]);
      for (int64_t j = 0; j < T; j++) o[j] = p->log ? x[j] - sum[j] : expf(x[j] - m[j]) * sum[j];
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    const float *g = (const float *)(d[1] + i * p->s[1]), *y = (const float *)(d[2] + i * p->s[2]);
    for (int64_t j = 0; j < T; j++) sum[j] += p->log ? g[j] : g[j] * y[j];
  }
  for (int64_t i = 0; i < n; i++) {
    const float *g = (const float *)(d[1] + i * p->s[1]), *y = (const float *)(d[2] + i * p->s[2]);
    float *o = (float *)(d[0] + i * p->s[0]);
    for (int64_t j = 0; j < T; j++) o[j] = p->log ? g[j] - expf(y[j]) * sum[j] : y[j] * (g[j] - sum[j]);
  }
}

static void tiles_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const smplan *p = arg;
  const int64_t per_row = (p->size[0] + ST - 1) / ST;
  for (int64_t t = begin; t < end; t++) {
    const int64_t j0 = (t % per_row) * ST, T = p->size[0] - j0 < ST ? p->size[0] - j0 : ST;
    char *d[3] = {p->data[0], p->data[1], p->data[2]};
    int64_t r = (t / per_row) * p->size[0] + j0;
    for (int k = 0; k < p->nd; k++) {
      int64_t i = r % p->size[k];
      r /= p->size[k];
      for (int o = 0; o < p->nops; o++) d[o] += i * p->st[o][k];
    }
    if (p->vec && !nk_softmax_tile_avx2_f32(p->log, p->backward, p->len, T, d, p->s)) continue;
    tile_f32(p, d, T);
  }
}

int nk_softmax_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  const nk_softmax_params *prm = (const nk_softmax_params *)task->params;
  const int nops = prm->backward ? 3 : 2;
  if (nk_check_elementwise(task, ctx, "softmax", nops)) return -1;
  const nrt_operand *ops = task->operands;
  smplan p = {.log = prm->log != 0, .backward = prm->backward != 0, .nops = nops};
  for (int o = 0; o < nops; o++) {
    p.dt[o] = (nrt_dtype)ops[o].dtype;
    p.data[o] = ops[o].data;
    if (!nk_dtype_is_floating(p.dt[o])) {
      nrt_exec_fail(ctx, "softmax: operand %d has a non-floating dtype %d", o, (int)p.dt[o]);
      return -1;
    }
  }
  p.dbl = p.dt[1] == NRT_FLOAT64;
  p.last_dim = prm->dim == ops[0].ndim - 1;
  const int ndim = ops[0].ndim;
  if (ndim == 0 ? prm->dim != 0 : (prm->dim < 0 || prm->dim >= ndim)) {
    nrt_exec_fail(ctx, "softmax: dim %d out of range for %d dims", (int)prm->dim, ndim);
    return -1;
  }
  int64_t lines = 1;
  p.len = 1;
  for (int o = 0; o < nops; o++) p.s[o] = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    if (d == prm->dim) {
      p.len = ops[0].sizes[d];
      for (int o = 0; o < nops; o++) p.s[o] = ops[o].strides[d];
      continue;
    }
    p.size[p.nd] = ops[0].sizes[d];
    for (int o = 0; o < nops; o++) p.st[o][p.nd] = ops[o].strides[d];
    lines *= ops[0].sizes[d];
    p.nd++;
  }
  if (lines == 0 || p.len == 0) return 0;
  int all_f32_contig = 1;
  for (int o = 0; o < nops; o++)
    if (p.dt[o] != NRT_FLOAT32 || (p.len > 1 && p.s[o] != 4)) all_f32_contig = 0;
  p.vec = all_f32_contig ? nk_softmax_vec_pick() : NULL;
  /* 16-bit contiguous lines widen to float32 for the vector line
   * (log_softmax forward rounding its sum and log like ATen's CPU) */
  int same16 = (p.dt[0] == NRT_FLOAT16 || p.dt[0] == NRT_BFLOAT16) && p.len > 1;
  for (int o = 0; o < nops; o++)
    if (p.dt[o] != p.dt[0] || p.s[o] != 2) same16 = 0;
  if (same16 && nk_softmax_vec_pick()) {
    p.vec = nk_softmax_vec_pick();
    p.widen = 1;
  }
  int tiles_fit = !all_f32_contig && p.nd > 0 && p.size[0] >= 2;
  for (int o = 0; o < nops; o++)
    if (p.dt[o] != NRT_FLOAT32 || p.st[o][0] != 4) tiles_fit = 0;
  if (tiles_fit) {
    p.vec = nk_softmax_vec_pick(); /* non-NULL: the AVX2 tile may run */
    const int64_t tiles = lines / p.size[0] * ((p.size[0] + ST - 1) / ST);
    const int64_t work = p.len * ST;
    nk_parallel_for(tiles, NK_GRAIN_ELEMENTWISE / work > 0 ? NK_GRAIN_ELEMENTWISE / work : 1, tiles_range, &p);
    return 0;
  }
  int64_t grain = NK_GRAIN_ELEMENTWISE / p.len > 0 ? NK_GRAIN_ELEMENTWISE / p.len : 1;
  nk_parallel_for(lines, grain, lines_range, &p);
  return 0;
}
