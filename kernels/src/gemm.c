/* gemm.c — NK_KERNEL_GEMM: out[b] <- alpha * a[b] @ b[b] + beta * out[b].
 *
 * BLIS's structure.  The output is cut into tiles of MC x NC (per batch);
 * each tile is one unit of parallel work and owns an accumulator in the
 * compute type.  For each KC-deep slice of k, the tile packs its A block
 * (MC x KC, into MR-row slivers) and B panel (KC x NC, into NR-column
 * slivers), converting from the operands' dtype and absorbing any strides or
 * transposes, and the micro-kernel adds MR x NR products into the
 * accumulator.  Last, the tile is stored: out = alpha * acc + beta * out
 * (beta == 0 never reads out, so garbage or NaN there does not propagate).
 *
 * Decisions:
 *  - Compute types: float32 for float16/bfloat16/float32 (one rounding on
 *    store, as ATen's CPU), float64, int64 for integers (wrapping, no UB).
 *  - The k loop runs in the same order for every tile and tiles never share
 *    an output element, so results do not depend on the thread count.
 *  - Packing B once per tile (instead of once per KC x NC panel shared by all
 *    tiles of a row) costs 1/MC of the multiply-adds and keeps tiles
 *    independent.
 *  - Micro-kernels: AVX-512 float32 6x32, AVX2+FMA float32 6x16, portable C
 *    for the rest (the compiler vectorises their fixed-size loops); faster
 *    float64 and 16-bit kernels plug in through pick_shape. */
#include <stdlib.h>

#include "dtype_convert.h"
#include "gemm.h"
#include "kernel_entries.h"
#include "nd_iter.h"
#include "neuron_kernels.h"
#include "validate.h"

#define NK_UKR_PORTABLE(name, T, MR, NR, MULADD)                                      \
  static void name(int64_t kc, const void *ap, const void *bp, void *cp, int64_t ldc) { \
    const T *a = ap, *b = bp;                                                          \
    T *c = cp, acc[MR][NR] = {{0}};                                                    \
    for (int64_t p = 0; p < kc; p++, a += MR, b += NR)                                 \
      for (int i = 0; i < MR; i++)                                                     \
        for (int j = 0; j < NR; j++) acc[i][j] = MULADD(acc[i][j], a[i], b[j]);        \
    for (int i = 0; i < MR; i++)                                                       \
      for (int j = 0; j < NR; j++) c[i * ldc + j] = MULADD(c[i * ldc + j], 1, acc[i][j]); \
  }
#define NK_MULADD_FLOAT(acc, x, y) ((acc) + (x) * (y))
#define NK_MULADD_INT(acc, x, y) ((int64_t)((uint64_t)(acc) + (uint64_t)(x) * (uint64_t)(y)))
NK_UKR_PORTABLE(ukr_f32_6x16, float, 6, 16, NK_MULADD_FLOAT)
NK_UKR_PORTABLE(ukr_f64_4x8, double, 4, 8, NK_MULADD_FLOAT)
NK_UKR_PORTABLE(ukr_i64_4x4, int64_t, 4, 4, NK_MULADD_INT)

typedef struct gemm_shape {
  int mr, nr;
  int64_t mc, kc, nc; /* mc a multiple of mr, nc of nr */
  size_t esize;       /* bytes of the compute type */
  nk_gemm_ukr ukr;
} gemm_shape;

static gemm_shape pick_shape(nk_class cls) {
  switch (cls) {
  case NK_CLASS_FLOAT:
    switch (nk_cpu_isa()) {
    case NK_ISA_AVX512: return (gemm_shape){6, 32, 96, 256, 1024, sizeof(float), nk_gemm_avx512_f32_6x32};
    case NK_ISA_AVX2: return (gemm_shape){6, 16, 96, 256, 1024, sizeof(float), nk_gemm_avx2_f32_6x16};
    default: return (gemm_shape){6, 16, 96, 256, 1024, sizeof(float), ukr_f32_6x16};
    }
  case NK_CLASS_DOUBLE: return (gemm_shape){4, 8, 96, 256, 512, sizeof(double), ukr_f64_4x8};
  default: return (gemm_shape){4, 4, 96, 256, 512, sizeof(int64_t), ukr_i64_4x4};
  }
}

/* A matrix of one batch entry: element (r, c) at data + r * rs + c * cs. */
typedef struct matrix {
  const char *data;
  nrt_dtype dtype;
  int64_t rs, cs;
} matrix;

typedef struct gemm_plan {
  nk_class cls;
  gemm_shape s;
  int64_t batch, m, n, k;
  nrt_operand out, a, b; /* 3-d: (batch, rows, cols) */
  double alpha, beta;
  int64_t alpha_i, beta_i;
  int64_t m_tiles, n_tiles;
} gemm_plan;

/* One element converted to the compute type at dst. */
NK_INLINE void load_compute(nk_class cls, nrt_dtype t, const char *src, char *dst) {
  switch (cls) {
  case NK_CLASS_FLOAT: { float v = nk_load_f32(t, src); memcpy(dst, &v, sizeof v); break; }
  case NK_CLASS_DOUBLE: { double v = nk_load_f64(t, src); memcpy(dst, &v, sizeof v); break; }
  default: { int64_t v = nk_load_i64(t, src); memcpy(dst, &v, sizeof v); break; }
  }
}

/* Rows [r0, r0 + rows) x cols [c0, c0 + cols) of x, packed into slivers of
 * `width` along the "row" index (A: slivers of MR rows, k-major inside; B
 * is passed transposed so that its slivers are NR columns).  Padding is 0.
 * Operands already in the compute type are read as plain loads (the common
 * case, and the one where packing cost shows). */
#define NK_PACK_RAW(name, T)                                                                  \
  static void name(const matrix *x, int64_t r0, int64_t rows, int64_t c0, int64_t cols,         \
                   int width, T *dst) {                                                       \
    for (int64_t s = 0; s < rows; s += width) {                                               \
      const int valid = rows - s < width ? (int)(rows - s) : width;                           \
      const char *base = x->data + (r0 + s) * x->rs + c0 * x->cs;                             \
      for (int64_t c = 0; c < cols; c++, dst += width) {                                      \
        const char *src = base + c * x->cs;                                                   \
        int i = 0;                                                                            \
        if (x->rs == (int64_t)sizeof(T)) {                                                    \
          memcpy(dst, src, (size_t)valid * sizeof(T));                                        \
          i = valid;                                                                          \
        }                                                                                     \
        for (; i < valid; i++) memcpy(dst + i, src + i * x->rs, sizeof(T));                   \
        for (; i < width; i++) dst[i] = 0;                                                    \
      }                                                                                       \
    }                                                                                         \
  }
NK_PACK_RAW(pack_raw_f32, float)
NK_PACK_RAW(pack_raw_f64, double)

static void pack(nk_class cls, size_t es, const matrix *x, int64_t r0, int64_t rows, int64_t c0,
                 int64_t cols, int width, char *dst) {
  if (cls == NK_CLASS_FLOAT && x->dtype == NRT_FLOAT32) {
    pack_raw_f32(x, r0, rows, c0, cols, width, (float *)dst);
    return;
  }
  if (cls == NK_CLASS_DOUBLE && x->dtype == NRT_FLOAT64) {
    pack_raw_f64(x, r0, rows, c0, cols, width, (double *)dst);
    return;
  }
  for (int64_t s = 0; s < rows; s += width) {
    for (int64_t c = 0; c < cols; c++) {
      for (int i = 0; i < width; i++, dst += es) {
        if (s + i < rows)
          load_compute(cls, x->dtype, x->data + (r0 + s + i) * x->rs + (c0 + c) * x->cs, dst);
        else
          memset(dst, 0, es);
      }
    }
  }
}

/* out = alpha * acc + beta * out over the valid rows x cols of the tile. */
static void store_tile(const gemm_plan *p, const char *acc, int64_t ld, char *out, int64_t rs,
                       int64_t cs, int64_t rows, int64_t cols) {
  const nrt_dtype t = (nrt_dtype)p->out.dtype;
  for (int64_t i = 0; i < rows; i++) {
    for (int64_t j = 0; j < cols; j++) {
      char *o = out + i * rs + j * cs;
      const char *a = acc + (i * ld + j) * (int64_t)p->s.esize;
      switch (p->cls) {
      case NK_CLASS_FLOAT: {
        float v;
        memcpy(&v, a, sizeof v);
        v = (float)p->alpha * v;
        if (p->beta != 0) v += (float)p->beta * nk_load_f32(t, o);
        nk_store_f32(t, o, v);
        break;
      }
      case NK_CLASS_DOUBLE: {
        double v;
        memcpy(&v, a, sizeof v);
        v = p->alpha * v;
        if (p->beta != 0) v += p->beta * nk_load_f64(t, o);
        nk_store_f64(t, o, v);
        break;
      }
      default: {
        int64_t v;
        memcpy(&v, a, sizeof v);
        uint64_t r = (uint64_t)p->alpha_i * (uint64_t)v;
        if (p->beta_i != 0) r += (uint64_t)p->beta_i * (uint64_t)nk_load_i64(t, o);
        nk_store_i64(t, o, (int64_t)r);
        break;
      }
      }
    }
  }
}

typedef struct gemm_buffers {
  char *a_pack, *b_pack, *acc;
} gemm_buffers;

static void run_tile(const gemm_plan *p, const gemm_buffers *buf, int64_t tile) {
  const gemm_shape *s = &p->s;
  const int64_t bi = tile / (p->m_tiles * p->n_tiles);
  const int64_t rest = tile % (p->m_tiles * p->n_tiles);
  const int64_t i0 = rest / p->n_tiles * s->mc, j0 = rest % p->n_tiles * s->nc;
  const int64_t rows = p->m - i0 < s->mc ? p->m - i0 : s->mc;
  const int64_t cols = p->n - j0 < s->nc ? p->n - j0 : s->nc;
  const int64_t rows_p = (rows + s->mr - 1) / s->mr * s->mr;
  const int64_t cols_p = (cols + s->nr - 1) / s->nr * s->nr;
  const size_t es = s->esize;
  /* A as (m, k); B transposed to (n, k) so both pack as "rows into slivers". */
  const matrix a = {(const char *)p->a.data + bi * p->a.strides[0], (nrt_dtype)p->a.dtype,
                    p->a.strides[1], p->a.strides[2]};
  const matrix bt = {(const char *)p->b.data + bi * p->b.strides[0], (nrt_dtype)p->b.dtype,
                     p->b.strides[2], p->b.strides[1]};
  memset(buf->acc, 0, (size_t)(rows_p * cols_p) * es);
  for (int64_t k0 = 0; k0 < p->k; k0 += s->kc) {
    const int64_t kc = p->k - k0 < s->kc ? p->k - k0 : s->kc;
    pack(p->cls, es, &a, i0, rows, k0, kc, s->mr, buf->a_pack);
    pack(p->cls, es, &bt, j0, cols, k0, kc, s->nr, buf->b_pack);
    for (int64_t jr = 0; jr < cols_p; jr += s->nr) {
      const char *bs = buf->b_pack + (size_t)(jr * kc) * es;
      for (int64_t ir = 0; ir < rows_p; ir += s->mr)
        s->ukr(kc, buf->a_pack + (size_t)(ir * kc) * es, bs, buf->acc + (size_t)(ir * cols_p + jr) * es,
               cols_p);
    }
  }
  char *out = (char *)p->out.data + bi * p->out.strides[0] + i0 * p->out.strides[1] +
              j0 * p->out.strides[2];
  store_tile(p, buf->acc, cols_p, out, p->out.strides[1], p->out.strides[2], rows, cols);
}

typedef struct gemm_run {
  const gemm_plan *plan;
  int failed; /* set (never cleared) when a worker could not get buffers */
} gemm_run;

static void run_tiles(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  gemm_run *r = arg;
  const gemm_shape *s = &r->plan->s;
  gemm_buffers buf = {malloc((size_t)(s->mc * s->kc) * s->esize),
                      malloc((size_t)(s->kc * s->nc) * s->esize),
                      malloc((size_t)(s->mc * s->nc) * s->esize)};
  if (buf.a_pack && buf.b_pack && buf.acc)
    for (int64_t t = begin; t < end; t++) run_tile(r->plan, &buf, t);
  else
    __atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
  free(buf.a_pack);
  free(buf.b_pack);
  free(buf.acc);
}

static int plan_gemm(nrt_exec_ctx *ctx, const nrt_operand *ops, nk_scalar alpha, nk_scalar beta,
                     gemm_plan *p) {
  for (int i = 0; i < 3; i++) {
    if (ops[i].ndim != 3) {
      nrt_exec_fail(ctx, "gemm: operand %d must be 3-d (batch, rows, cols), got %d-d", i,
                    (int)ops[i].ndim);
      return -1;
    }
    if (ops[i].dtype != ops[0].dtype) {
      nrt_exec_fail(ctx, "gemm: operands must share one dtype (%d vs %d)", (int)ops[i].dtype,
                    (int)ops[0].dtype);
      return -1;
    }
  }
  p->out = ops[0];
  p->a = ops[1];
  p->b = ops[2];
  p->batch = ops[0].sizes[0];
  p->m = ops[0].sizes[1];
  p->n = ops[0].sizes[2];
  p->k = ops[1].sizes[2];
  if (ops[1].sizes[0] != p->batch || ops[2].sizes[0] != p->batch || ops[1].sizes[1] != p->m ||
      ops[2].sizes[1] != p->k || ops[2].sizes[2] != p->n) {
    nrt_exec_fail(ctx, "gemm: shapes do not chain: out (%lld, %lld, %lld), a (%lld, %lld, %lld), "
                  "b (%lld, %lld, %lld)",
                  (long long)p->batch, (long long)p->m, (long long)p->n, (long long)ops[1].sizes[0],
                  (long long)ops[1].sizes[1], (long long)ops[1].sizes[2], (long long)ops[2].sizes[0],
                  (long long)ops[2].sizes[1], (long long)ops[2].sizes[2]);
    return -1;
  }
  const nrt_dtype t = (nrt_dtype)ops[0].dtype;
  if (t == NRT_BOOL) {
    nrt_exec_fail(ctx, "gemm: bool is not supported");
    return -1;
  }
  p->cls = nk_dtype_class(t);
  p->s = pick_shape(p->cls);
  p->alpha = alpha.f;
  p->beta = beta.f;
  p->alpha_i = alpha.i;
  p->beta_i = beta.i;
  p->m_tiles = (p->m + p->s.mc - 1) / p->s.mc;
  p->n_tiles = (p->n + p->s.nc - 1) / p->s.nc;
  return 0;
}

int nk_gemm_operands(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha, nk_scalar beta) {
  gemm_plan plan;
  if (plan_gemm(ctx, ops, alpha, beta, &plan)) return -1;
  if (plan.batch == 0 || plan.m == 0 || plan.n == 0) return 0;
  gemm_run run = {&plan, 0};
  const int64_t tiles = plan.batch * plan.m_tiles * plan.n_tiles;
  /* A tile of less than ~2^18 multiply-adds is not worth a trip to the pool. */
  const int64_t flops_per_tile = (plan.m < plan.s.mc ? plan.m : plan.s.mc) *
                                 (plan.n < plan.s.nc ? plan.n : plan.s.nc) * (plan.k ? plan.k : 1);
  const int64_t grain = flops_per_tile >= (1 << 18) ? 1 : ((1 << 18) / flops_per_tile) + 1;
  nk_parallel_for(tiles, grain, run_tiles, &run);
  if (run.failed) {
    nrt_exec_fail(ctx, "gemm: out of host memory for packing buffers");
    return -1;
  }
  return 0;
}

int nk_gemm_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "gemm", 3)) return -1;
  const nk_gemm_params *prm = (const nk_gemm_params *)task->params;
  return nk_gemm_operands(ctx, task->operands, prm->alpha, prm->beta);
}
