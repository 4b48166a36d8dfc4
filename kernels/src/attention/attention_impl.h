/* attention_impl.h — the tiled (flash-attention) forward and backward,
 * written once over GCC vector extensions and compiled per variant.
 *
 * The including file defines
 *   AT_T      float or double (the compute type),
 *   AT_VW     lanes per vector (4 portable, 8 AVX2, 16 AVX-512 for float),
 *   AT_NAME   the exported function's name,
 * and its own target flags (kernels/CMakeLists.txt) make the vectors real
 * registers.  Everything here is static; only AT_NAME is exported.
 *
 * Tiles live in one aligned heap block per chunk of work units (the compute
 * pool's workers have no scratchpad of their own; nrt_exec_sbuf belongs to
 * the stream's worker).  Each tile is in the compute type, rows padded to
 * whole vectors with zeros, so the micro-kernel has no edge columns. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "common/dtype_convert.h"
#include "common/nd_iter.h"

/* a * b + c fused into one rounding where the ISA has FMA (the tile GEMMs
 * and exp); every pass uses the same code, so scores stay bit-identical. */
#pragma GCC optimize("fp-contract=fast")

typedef AT_T T;
typedef T vec __attribute__((vector_size(AT_VW * sizeof(AT_T))));
/* the same vector at any element-aligned address (loads/stores of tiles) */
typedef T vec_u __attribute__((vector_size(AT_VW * sizeof(AT_T)), aligned(sizeof(AT_T)), may_alias));
#define VW AT_VW
#define BQ 128  /* query rows per tile  */
#define BK 64  /* key rows per tile    */
_Static_assert(BK == 64, "nk_attention_key_chunks (neuron_kernels.h) counts 64-key blocks");
#define MR 4   /* micro-kernel rows    */

static inline vec vload(const T *p) { return *(const vec_u *)p; }
static inline void vstore(T *p, vec v) { *(vec_u *)p = v; }
/* x in every lane.  Not (vec){0} + x: without -ffast-math that is a real
 * scalar add before each broadcast (0 + -0 is +0), in the hottest loop. */
#if AT_IS_DOUBLE
typedef int64_t vsplat_mask __attribute__((vector_size(AT_VW * 8)));
#else
typedef int32_t vsplat_mask __attribute__((vector_size(AT_VW * 4)));
#endif
static inline vec vsplat(T x) { return __builtin_shuffle((vec){x}, (vsplat_mask){0}); }
static inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/* ------------------------------------------------------------ micro-kernel
 * C[m x n] (+)= A[m x k] B[k x n]; A, B, C row-major with leading dims
 * lda, ldb, ldc; n a multiple of VW.  The k order is fixed (p = 0..k-1,
 * one fused multiply-add per step), so two tiles computed from the same
 * numbers give the same bits whatever their orientation. */
#define AI static inline __attribute__((always_inline))
AI void ukr_4x2(int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, int acc) {
  vec c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  if (acc) {
    c00 = vload(c), c01 = vload(c + VW), c10 = vload(c + ldc), c11 = vload(c + ldc + VW);
    c20 = vload(c + 2 * ldc), c21 = vload(c + 2 * ldc + VW), c30 = vload(c + 3 * ldc), c31 = vload(c + 3 * ldc + VW);
  }
  const T *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  for (int64_t p = 0; p < k; p++) {
    const vec b0 = vload(b + p * ldb), b1 = vload(b + p * ldb + VW);
    vec x = vsplat(a0[p]);
    c00 += x * b0, c01 += x * b1;
    x = vsplat(a1[p]);
    c10 += x * b0, c11 += x * b1;
    x = vsplat(a2[p]);
    c20 += x * b0, c21 += x * b1;
    x = vsplat(a3[p]);
    c30 += x * b0, c31 += x * b1;
  }
  vstore(c, c00), vstore(c + VW, c01), vstore(c + ldc, c10), vstore(c + ldc + VW, c11);
  vstore(c + 2 * ldc, c20), vstore(c + 2 * ldc + VW, c21), vstore(c + 3 * ldc, c30), vstore(c + 3 * ldc + VW, c31);
}
AI void ukr_4x1(int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, int acc) {
  vec c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
  if (acc) c0 = vload(c), c1 = vload(c + ldc), c2 = vload(c + 2 * ldc), c3 = vload(c + 3 * ldc);
  const T *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
  for (int64_t p = 0; p < k; p++) {
    const vec b0 = vload(b + p * ldb);
    c0 += vsplat(a0[p]) * b0, c1 += vsplat(a1[p]) * b0, c2 += vsplat(a2[p]) * b0, c3 += vsplat(a3[p]) * b0;
  }
  vstore(c, c0), vstore(c + ldc, c1), vstore(c + 2 * ldc, c2), vstore(c + 3 * ldc, c3);
}
AI void ukr_1x2(int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, int acc) {
  (void)lda, (void)ldc;
  vec c0 = {0}, c1 = {0};
  if (acc) c0 = vload(c), c1 = vload(c + VW);
  for (int64_t p = 0; p < k; p++) {
    const vec x = vsplat(a[p]);
    c0 += x * vload(b + p * ldb), c1 += x * vload(b + p * ldb + VW);
  }
  vstore(c, c0), vstore(c + VW, c1);
}
AI void ukr_1x1(int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, int acc) {
  (void)lda, (void)ldc;
  vec c0 = {0};
  if (acc) c0 = vload(c);
  for (int64_t p = 0; p < k; p++) c0 += vsplat(a[p]) * vload(b + p * ldb);
  vstore(c, c0);
}

/* R rows x 2 vectors, 2R accumulators: 8 x 2 for the 32-register ISA
 * (AVX-512), 6 x 2 for AVX2's 16 (12 accumulators, a broadcast and two B
 * vectors).  Fewer B loads per FMA than the 4-row kernel, and more
 * independent sums in flight: 4 x 2's eight only just cover two FMA pipes
 * of four cycles' latency.  Same per-element k order, so the same bits. */
#define UKR_RX2(name, R)                                                                        \
  AI void name(int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, \
               int acc) {                                                                      \
    vec c0[R], c1[R];                                                                          \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                      \
      c0[r] = acc ? vload(c + r * ldc) : (vec){0};                                             \
      c1[r] = acc ? vload(c + r * ldc + VW) : (vec){0};                                        \
    }                                                                                          \
    for (int64_t p = 0; p < k; p++) {                                                          \
      const vec b0 = vload(b + p * ldb), b1 = vload(b + p * ldb + VW);                         \
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                    \
        const vec x = vsplat(a[r * lda + p]);                                                  \
        c0[r] += x * b0, c1[r] += x * b1;                                                      \
      }                                                                                        \
    }                                                                                          \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                        \
      vstore(c + r * ldc, c0[r]), vstore(c + r * ldc + VW, c1[r]);                             \
  }
#if AT_VW >= 16
#define WIDE_ROWS 8
#elif AT_VW == 8
#define WIDE_ROWS 6
#endif
#ifdef WIDE_ROWS
UKR_RX2(ukr_wide, WIDE_ROWS)
#endif

static void tile_gemm(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda, const T *b,
                      int64_t ldb, T *c, int64_t ldc, int acc) {
  int64_t i = 0;
#ifdef WIDE_ROWS
  /* wide blocks; at AVX2 one or two fewer where that leaves a multiple of
   * MR rows (128 = 20 x 6 + 2 x 4, not 21 x 6 + 2 rows of the load-bound
   * 1 x 2 kernel) */
  int64_t wide = m / WIDE_ROWS;
  for (int t = 0; t < MR && t < wide; t++)
    if ((m - (wide - t) * WIDE_ROWS) % MR == 0) {
      wide -= t;
      break;
    }
  for (; i < wide * WIDE_ROWS && n % (2 * VW) == 0; i += WIDE_ROWS)
    for (int64_t j = 0; j < n; j += 2 * VW) ukr_wide(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, acc);
#endif
  for (; i + MR <= m; i += MR) {
    int64_t j = 0;
    for (; j + 2 * VW <= n; j += 2 * VW) ukr_4x2(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, acc);
    for (; j < n; j += VW) ukr_4x1(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, acc);
  }
  for (; i < m; i++) {
    int64_t j = 0;
    for (; j + 2 * VW <= n; j += 2 * VW) ukr_1x2(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, acc);
    for (; j < n; j += VW) ukr_1x1(k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, acc);
  }
}

/* ------------------------------------------------------------------- exp
 * exp of n (a multiple of VW) values in place.  Float: Cephes' expf
 * (range reduction by ln 2 in two parts, degree-6 polynomial), about
 * 1 ulp; -inf (and anything below the float range) gives exactly 0.
 * Double: the C library's exp per lane. */
#if !AT_IS_DOUBLE
typedef int32_t ivec __attribute__((vector_size(AT_VW * 4), aligned(4)));
/* exp of v <= 88.38 (or NaN): exp_vec without its clamp at the top, which
 * the online softmax's exp(s - max) (v <= 0) never needs -- the same bits,
 * four operations fewer per vector */
AI vec exp_vec_capped(vec v) {
  const vec lo = vsplat(-87.3365447504f);
  ivec keep = ~(v < lo); /* NaN stays NaN */
  v = (vec)(((ivec)v & keep) | ((ivec)lo & ~keep));
  vec t = v * vsplat(1.44269504088896341f) + vsplat(128.5f);
  ivec ni = __builtin_convertvector(t, ivec); /* t > 0: truncation is floor */
  vec nf = __builtin_convertvector(ni, vec) - vsplat(128.0f);
  ni -= 128;
  vec r = v - nf * vsplat(0.693359375f);
  r = r - nf * vsplat(-2.12194440e-4f);
  vec z = r * r;
  vec y = vsplat(1.9875691500E-4f);
  y = y * r + vsplat(1.3981999507E-3f);
  y = y * r + vsplat(8.3334519073E-3f);
  y = y * r + vsplat(4.1665795894E-2f);
  y = y * r + vsplat(1.6666665459E-1f);
  y = y * r + vsplat(5.0000001201E-1f);
  y = y * z + r + vsplat(1.0f);
  ivec e = (ni + 127) << 23;
  y = y * (vec)e;
  return (vec)((ivec)y & keep);
}

AI vec exp_vec(vec v) {
  const vec hi = vsplat(88.3762626647949f);
  ivec big = v > hi;
  return exp_vec_capped((vec)(((ivec)v & ~big) | ((ivec)hi & big)));
}
#endif

static void exp_inplace(T *x, int64_t n) {
#if AT_IS_DOUBLE
  for (int64_t i = 0; i < n; i++) x[i] = exp(x[i]);
#else
  for (int64_t i = 0; i < n; i += VW) vstore(x + i, exp_vec(vload(x + i)));
#endif
}

/* s[c] = exp(s[c] - m) over n (a multiple of VW), returning their sum
 * (a vector accumulator, then its lanes in order: a fixed order).  One
 * pass instead of a subtraction, the exp and the sum each going over the
 * line: the same operations per element, so the same bits. */
static T exp_shifted_sum(T *s, int64_t n, T m) {
  vec acc = {0};
#if AT_IS_DOUBLE
  for (int64_t c = 0; c < n; c++) s[c] = exp(s[c] - m);
  for (int64_t c = 0; c < n; c += VW) acc += vload(s + c);
#else
  const vec vm = vsplat(m);
  for (int64_t c = 0; c < n; c += VW) {
    const vec e = exp_vec_capped(vload(s + c) - vm); /* s <= m */
    vstore(s + c, e);
    acc += e;
  }
#endif
  T sum = 0;
  for (int l = 0; l < VW; l++) sum += acc[l];
  return sum;
}

/* ------------------------------------------------------------ tile loads */

/* n elements from src (byte step sstep, dtype) to dst (element step dstep). */
static void load_line(T *dst, int64_t dstep, const char *src, int64_t sstep, int32_t dtype, int64_t n) {
  if (dstep == 1 && sstep == (int64_t)sizeof(T) && dtype == (sizeof(T) == 4 ? NRT_FLOAT32 : NRT_FLOAT64)) {
    memcpy(dst, src, (size_t)n * sizeof(T)); /* the common case: a contiguous row */
    return;
  }
  switch (dtype) {
  case NRT_FLOAT32:
    for (int64_t i = 0; i < n; i++) dst[i * dstep] = (T)nk_read_f32(src + i * sstep);
    break;
  case NRT_FLOAT64:
    for (int64_t i = 0; i < n; i++) dst[i * dstep] = (T)nk_read_f64(src + i * sstep);
    break;
  case NRT_BFLOAT16:
    for (int64_t i = 0; i < n; i++) dst[i * dstep] = (T)nk_bf16_to_f32(nk_read_u16(src + i * sstep));
    break;
  case NRT_FLOAT16:
    for (int64_t i = 0; i < n; i++) dst[i * dstep] = (T)nk_f16_to_f32(nk_read_u16(src + i * sstep));
    break;
  default:
    for (int64_t i = 0; i < n; i++) dst[i * dstep] = (T)nk_load_f64((nrt_dtype)dtype, src + i * sstep);
    break;
  }
}

static void store_line(char *dst, int64_t dstep, int32_t dtype, const T *src, T mul, int64_t n) {
#if !AT_IS_DOUBLE
  /* the common cases without a dtype switch per element */
  if (dtype == NRT_FLOAT32) {
    for (int64_t i = 0; i < n; i++) nk_write_f32(dst + i * dstep, src[i] * mul);
    return;
  }
  if (dtype == NRT_BFLOAT16) {
    for (int64_t i = 0; i < n; i++) nk_write_u16(dst + i * dstep, nk_f32_to_bf16(src[i] * mul));
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) {
#if AT_IS_DOUBLE
    nk_store_f64((nrt_dtype)dtype, dst + i * dstep, src[i] * mul);
#else
    nk_store_f32((nrt_dtype)dtype, dst + i * dstep, src[i] * mul);
#endif
  }
}

static inline const char *row_ptr(const nk_attn_view *w, int64_t b, int64_t h, int64_t r) {
  return w->data + b * w->st[0] + h * w->st[1] + r * w->st[2];
}

/* Rows r0..r0+nr of (b, h), cols 0..nc: dst[r * ld + c] (trans: dst[c * ld + r]). */
static void load_tile(T *dst, int64_t ld, const nk_attn_view *w, int64_t b, int64_t h, int64_t r0,
                      int64_t nr, int64_t nc, int trans) {
  for (int64_t r = 0; r < nr; r++) {
    const char *src = row_ptr(w, b, h, r0 + r);
    if (trans)
      load_line(dst + r, ld, src, w->st[3], w->dtype, nc);
    else
      load_line(dst + r * ld, 1, src, w->st[3], w->dtype, nc);
  }
}

/* s[c] += mask value at (b, h, i, j) for n positions stepping by `step`
 * bytes (along j in a query row, along i in a key row).  A bool mask keeps
 * true and hides false. */
static void add_mask(T *s, int64_t n, const char *m, int64_t step, int32_t dtype) {
  if (dtype == NRT_BOOL) {
    for (int64_t c = 0; c < n; c++)
      if (!m[c * step]) s[c] = -(T)INFINITY;
    return;
  }
  for (int64_t c = 0; c < n; c++) {
    T x;
    load_line(&x, 1, m + c * step, 0, dtype, 1);
    s[c] += x;
  }
}

/* ------------------------------------------------------------- dropout */

typedef struct philox_cache {
  uint64_t ctr;
  uint32_t w[4];
  int valid;
} philox_cache;

static inline int keep_elem(const nk_attn_problem *p, philox_cache *pc, uint32_t thr, uint64_t idx) {
  uint64_t ctr = p->offset / 4 + idx / 4;
  if (!pc->valid || pc->ctr != ctr) {
    nk_philox4x32(p->seed, ctr, pc->w);
    pc->ctr = ctr;
    pc->valid = 1;
  }
  return pc->w[idx & 3] >= thr;
}

/* ----------------------------------------------------------------- job */

typedef struct job {
  const nk_attn_problem *p;
  int64_t nqb, nkb, group, Dp, Dvp;
  int dropout;
  uint32_t thr;
  T dscale; /* 1 / (1 - p), 0 when p >= 1 */
  volatile int oom;
  T *pack;      /* pre-converted tiles (see pack_range), or NULL */
  int64_t tile; /* elements per packed tile */
  /* the one-pass backward's key chunks: kchunks per (batch, kv head) of
   * kcb key blocks each; with more than one, each chunk's dQ (transposed,
   * D x Lp) goes to dq_part and reduce_dq_range sums them in order */
  int64_t kchunks, kcb;
  T *dq_part;
} job;

/* ------------------------------------------------------------- packing
 * The streamed operand's tiles (K/V by key block for the forward and dQ,
 * Q/dO by query block for dK/dV) are converted to the compute type and
 * laid out once, in parallel, before the main pass: otherwise every unit
 * would convert the same tiles again (each K/V tile is read by every query
 * block).  Tile u = (b * heads + h) * blocks + block; each holds up to four
 * parts (rows or transposed), zero-padded.  Without memory for it the main
 * pass loads tiles itself. */
typedef struct pack_part {
  const nk_attn_view *w;
  int trans;
  int64_t cols, ld, off;
} pack_part;

typedef struct pack_job {
  pack_part part[4];
  int n_parts;
  int64_t heads, seq, bs, nblk, tile;
  int single_use;
  T *dst;
} pack_job;

static void load_tile(T *dst, int64_t ld, const nk_attn_view *w, int64_t b, int64_t h, int64_t r0,
                      int64_t nr, int64_t nc, int trans);

static void pack_range(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  const pack_job *pj = arg;
  for (int64_t u = u0; u < u1; u++) {
    const int64_t blk = u % pj->nblk, h = (u / pj->nblk) % pj->heads, b = u / (pj->nblk * pj->heads);
    const int64_t r0 = blk * pj->bs, nr = pj->seq - r0 < pj->bs ? pj->seq - r0 : pj->bs;
    T *t = pj->dst + u * pj->tile;
    memset(t, 0, sizeof(T) * (size_t)pj->tile);
    for (int k = 0; k < pj->n_parts; k++) {
      const pack_part *pp = &pj->part[k];
      load_tile(t + pp->off, pp->ld, pp->w, b, h, r0, nr, pp->cols, pp->trans);
    }
  }
}

/* Packs into j->pack (left NULL when the memory is not there). */
static void pack(job *j, pack_job *pj, int64_t batch) {
  int64_t off = 0;
  for (int k = 0; k < pj->n_parts; k++) {
    pj->part[k].off = off;
    off += pj->part[k].trans ? pj->part[k].cols * pj->part[k].ld : pj->bs * pj->part[k].ld;
  }
  pj->tile = round_up(off, 16);
  pj->nblk = (pj->seq + pj->bs - 1) / pj->bs;
  const int64_t n = batch * pj->heads * pj->nblk;
  const double bytes = (double)n * (double)pj->tile * sizeof(T);
  /* a tile read by one unit only (a single block on the other side) is
   * loaded by that unit: packing it would be one more pass over it */
  if (n == 0 || bytes > 0x1p34 || pj->single_use) return; /* over 16 GiB: stream instead */
  pj->dst = aligned_alloc(64, (size_t)round_up((int64_t)bytes, 64));
  if (!pj->dst) return;
  nk_parallel_for(n, 1, pack_range, pj);
  j->pack = pj->dst;
  j->tile = pj->tile;
}

static void *alloc_tiles(job *j, size_t n_elems) {
  size_t bytes = round_up((int64_t)(n_elems * sizeof(T)), 64);
  void *m = aligned_alloc(64, bytes);
  if (!m) j->oom = 1;
  else memset(m, 0, bytes);
  return m;
}

/* Scores of one line: s[c] = s[c] * scale + mask, hidden (-inf) outside
 * [lo, hi) (causal limit, padding). */
static inline void finish_scores(T *s, int64_t n_pad, int64_t lo, int64_t hi, T scale) {
  if (lo == 0 && hi == n_pad && n_pad % VW == 0) { /* a whole line: vectors */
    const vec vs = vsplat(scale);
    for (int64_t c = 0; c < n_pad; c += VW) vstore(s + c, vload(s + c) * vs);
    return;
  }
  if (n_pad % VW == 0) {
    /* a causal or padded line: the same products, the hidden lanes
     * selected to -inf by a compare on the lane's index (element by
     * element this loop cost causal attention at head size 16 a fifth of
     * its time, more than the masking saved) */
    const vec vs = vsplat(scale), ninf = vsplat(-(T)INFINITY);
    vec idx;
    for (int l = 0; l < VW; l++) idx[l] = (T)l;
    const vec vlo = vsplat((T)lo), vhi = vsplat((T)hi), step = vsplat((T)VW);
    for (int64_t c = 0; c < n_pad; c += VW, idx += step) {
      const vsplat_mask keep = (idx >= vlo) & (idx < vhi);
      const vec x = vload(s + c) * vs;
      vstore(s + c, (vec)(((vsplat_mask)x & keep) | ((vsplat_mask)ninf & ~keep)));
    }
    return;
  }
  for (int64_t c = 0; c < n_pad; c++) s[c] = (c >= lo && c < hi) ? s[c] * scale : -(T)INFINITY;
}

/* The online softmax's row reductions, in vectors (a scalar loop is one
 * long dependency chain: about as many cycles per score as the two tile
 * GEMMs spend).  row_max ignores NaN like the scalar `x > max` test. */
static inline T row_max(const T *s, int64_t n) {
  T mx = -(T)INFINITY;
  int64_t c = 0;
  if (n >= VW) {
    vec vm = vsplat(-(T)INFINITY);
    for (; c + VW <= n; c += VW) {
      const vec x = vload(s + c);
      const vsplat_mask gt = x > vm;
      vm = (vec)(((vsplat_mask)x & gt) | ((vsplat_mask)vm & ~gt));
    }
    for (int l = 0; l < VW; l++) mx = vm[l] > mx ? vm[l] : mx;
  }
  for (; c < n; c++) mx = s[c] > mx ? s[c] : mx;
  return mx;
}

/* finish_scores and row_max of a whole line (n a multiple of VW) in one
 * pass: the same products stored and the same compares, so the same bits,
 * with one load of each score instead of two. */
static inline T scale_row_max(T *s, int64_t n, T scale) {
  const vec vs = vsplat(scale);
  vec vm = vsplat(-(T)INFINITY);
  for (int64_t c = 0; c < n; c += VW) {
    const vec x = vload(s + c) * vs;
    vstore(s + c, x);
    const vsplat_mask gt = x > vm;
    vm = (vec)(((vsplat_mask)x & gt) | ((vsplat_mask)vm & ~gt));
  }
  T mx = -(T)INFINITY;
  for (int l = 0; l < VW; l++) mx = vm[l] > mx ? vm[l] : mx;
  return mx;
}

/* s[from..to) = 0 with vector stores past the first whole vector.  As a
 * plain loop gcc made it `rep stosq`, whose start-up (tens of cycles)
 * outweighed the few vectors each causal row clears: 4% of a causal
 * forward at head size 16.  Kept out of line so the option sticks. */
__attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
static void zero_tail(T *s, int64_t from, int64_t to) {
  for (; from < to && from % VW; from++) s[from] = 0;
  for (; from + VW <= to; from += VW) vstore(s + from, (vec){0});
  for (; from < to; from++) s[from] = 0;
}

/* ------------------------------------------------------------- forward */

static void forward_range(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  job *j = arg;
  const nk_attn_problem *p = j->p;
  const int64_t D = p->D, Dv = p->Dv, Dvp = j->Dvp;
  T *buf = alloc_tiles(j, (size_t)(BQ * D + D * BK + BK * Dvp + BQ * BK + BQ * Dvp + 2 * BQ));
  if (!buf) return;
  T *Q = buf, *Ktb = Q + BQ * D, *Vb = Ktb + D * BK, *S = Vb + BK * Dvp, *O = S + BQ * BK;
  T *m = O + BQ * Dvp, *l = m + BQ;
  const T scale = (T)p->scale;
  philox_cache pc = {0};
  for (int64_t u = u0; u < u1; u++) {
    const int64_t qb = u % j->nqb, h = (u / j->nqb) % p->Hq, b = u / (j->nqb * p->Hq);
    const int64_t hk = h / j->group, i0 = qb * BQ, nq = p->L - i0 < BQ ? p->L - i0 : BQ;
    load_tile(Q, D, &p->q, b, h, i0, nq, D, 0);
    memset(O, 0, sizeof(T) * BQ * Dvp);
    for (int64_t r = 0; r < BQ; r++) { m[r] = -(T)INFINITY; l[r] = 0; }
    const int64_t kend = p->causal ? (i0 + nq < p->S ? i0 + nq : p->S) : p->S;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
      const int64_t nk = kend - j0 < BK ? kend - j0 : BK;
      const T *Kt = Ktb, *V = Vb;
      if (j->pack) {
        Kt = j->pack + ((b * p->Hkv + hk) * j->nkb + j0 / BK) * j->tile;
        V = Kt + D * BK;
      } else {
        if (nk < BK) memset(Ktb, 0, sizeof(T) * D * BK);
        load_tile(Ktb, BK, &p->k, b, hk, j0, nk, D, 1);
        load_tile(Vb, Dvp, &p->v, b, hk, j0, nk, Dv, 0);
      }
      tile_gemm(nq, BK, D, Q, D, Kt, BK, S, BK, 0);
      for (int64_t r = 0; r < nq; r++) {
        const int64_t i = i0 + r;
        T *s = S + r * BK;
        const int64_t hi = p->causal ? (i - j0 + 1 < nk ? i - j0 + 1 : nk) : nk;
        T mx;
        if (hi == BK && !p->mask.data) { /* a whole line (BK is a multiple of VW) */
          mx = scale_row_max(s, BK, scale);
        } else {
          finish_scores(s, BK, 0, hi, scale);
          if (p->mask.data) add_mask(s, hi, row_ptr(&p->mask, b, h, i) + j0 * p->mask.st[3], p->mask.st[3], p->mask.dtype);
          mx = row_max(s, hi);
        }
        const T mnew = mx > m[r] ? mx : m[r];
        if (mnew == -(T)INFINITY) { memset(s, 0, sizeof(T) * BK); continue; }
        /* past the last whole vector holding a visible key (causal: the
         * row's end) every exp is 0: write the zeros, skip the work */
        const int64_t we = hi <= 0 ? 0 : round_up(hi, VW) < BK ? round_up(hi, VW) : BK;
        const T sum = exp_shifted_sum(s, we, mnew);
        zero_tail(s, we, BK);
        if (m[r] != mnew) {
          const T alpha = m[r] == -(T)INFINITY ? 0 : (T)exp(m[r] - mnew);
          l[r] *= alpha;
          T *o = O + r * Dvp;
          for (int64_t c = 0; c < Dvp; c++) o[c] *= alpha;
          m[r] = mnew;
        }
        l[r] += sum;
        if (j->dropout) {
          const uint64_t base = (uint64_t)(((b * p->Hq + h) * p->L + i) * p->S + j0);
          for (int64_t c = 0; c < nk; c++)
            if (!keep_elem(p, &pc, j->thr, base + (uint64_t)c)) s[c] = 0;
        }
      }
      tile_gemm(nq, Dvp, nk, S, BK, V, Dvp, O, Dvp, 1);
    }
    for (int64_t r = 0; r < nq; r++) {
      const int64_t i = i0 + r;
      char *orow = (char *)row_ptr(&p->o, b, h, i);
      char *lrow = (char *)row_ptr(&p->lse, b, h, i);
      if (l[r] == 0) { /* every key hidden: zeros, as ATen's _safe_softmax */
        memset(O + r * Dvp, 0, sizeof(T) * Dvp);
        store_line(orow, p->o.st[3], p->o.dtype, O + r * Dvp, 1, Dv);
        const T inf = (T)INFINITY;
        store_line(lrow, 0, p->lse.dtype, &inf, 1, 1);
        continue;
      }
      store_line(orow, p->o.st[3], p->o.dtype, O + r * Dvp, j->dscale / l[r], Dv);
      const T lse = m[r] + (T)log(l[r]);
      store_line(lrow, 0, p->lse.dtype, &lse, 1, 1);
    }
  }
  free(buf);
}

/* ------------------------------------------------------ backward: dK, dV */

static void backward_kv_range(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  job *j = arg;
  const nk_attn_problem *p = j->p;
  const int64_t D = p->D, Dv = p->Dv, Dp = j->Dp, Dvp = j->Dvp;
  T *buf = alloc_tiles(j, (size_t)(BK * D + BK * Dv + BK * Dp + BK * Dvp + D * BQ + Dv * BQ + BQ * Dp +
                                   BQ * Dvp + 2 * BK * BQ + 2 * BQ));
  if (!buf) return;
  T *K = buf, *V = K + BK * D, *dK = V + BK * Dv, *dV = dK + BK * Dp, *Qtb = dV + BK * Dvp;
  T *dOtb = Qtb + D * BQ, *Qb = dOtb + Dv * BQ, *dOb = Qb + BQ * Dp, *St = dOb + BQ * Dvp, *dPt = St + BK * BQ;
  T *lse = dPt + BK * BQ, *delta = lse + BQ;
  const T scale = (T)p->scale;
  philox_cache pc = {0};
  for (int64_t u = u0; u < u1; u++) {
    const int64_t kb = u % j->nkb, hk = (u / j->nkb) % p->Hkv, b = u / (j->nkb * p->Hkv);
    const int64_t j0 = kb * BK, nk = p->S - j0 < BK ? p->S - j0 : BK;
    load_tile(K, D, &p->k, b, hk, j0, nk, D, 0);
    load_tile(V, Dv, &p->v, b, hk, j0, nk, Dv, 0);
    memset(dK, 0, sizeof(T) * BK * Dp);
    memset(dV, 0, sizeof(T) * BK * Dvp);
    for (int64_t h = hk * j->group; h < (hk + 1) * j->group; h++) {
      for (int64_t i0 = p->causal ? j0 / BQ * BQ : 0; i0 < p->L; i0 += BQ) {
        const int64_t nq = p->L - i0 < BQ ? p->L - i0 : BQ;
        const T *Qt = Qtb, *dOt = dOtb, *Q = Qb, *dO = dOb;
        if (j->pack) {
          Qt = j->pack + ((b * p->Hq + h) * j->nqb + i0 / BQ) * j->tile;
          dOt = Qt + D * BQ;
          Q = dOt + Dv * BQ;
          dO = Q + BQ * Dp;
        } else {
          if (nq < BQ) { memset(Qtb, 0, sizeof(T) * D * BQ); memset(dOtb, 0, sizeof(T) * Dv * BQ); }
          load_tile(Qtb, BQ, &p->q, b, h, i0, nq, D, 1);
          load_tile(dOtb, BQ, &p->dout, b, h, i0, nq, Dv, 1);
          load_tile(Qb, Dp, &p->q, b, h, i0, nq, D, 0);
          load_tile(dOb, Dvp, &p->dout, b, h, i0, nq, Dv, 0);
        }
        for (int64_t r = 0; r < nq; r++) {
          load_line(lse + r, 1, row_ptr(&p->lse, b, h, i0 + r), 0, p->lse.dtype, 1);
          load_line(delta + r, 1, row_ptr(&p->delta, b, h, i0 + r), 0, p->delta.dtype, 1);
        }
        /* only the block's real queries, rounded to the kernel's width: a
         * short sequence (64 queries in a 128-wide block) would otherwise
         * spend half its products and exps on padding; the columns past W
         * are never read (the products below sum over nq) */
        const int64_t W = round_up(nq, 2 * VW) < BQ ? round_up(nq, 2 * VW) : BQ;
        tile_gemm(nk, W, D, K, D, Qt, BQ, St, BQ, 0);
        tile_gemm(nk, W, Dv, V, Dv, dOt, BQ, dPt, BQ, 0);
        for (int64_t r = 0; r < nk; r++) {
          const int64_t jj = j0 + r;
          T *s = St + r * BQ, *dp = dPt + r * BQ;
          const int64_t lo = p->causal ? (jj - i0 > 0 ? jj - i0 : 0) : 0;
          finish_scores(s, W, lo, nq, scale);
          if (p->mask.data && lo < nq)
            add_mask(s + lo, nq - lo, row_ptr(&p->mask, b, h, i0 + lo) + jj * p->mask.st[3], p->mask.st[2],
                     p->mask.dtype);
          for (int64_t c = 0; c < nq; c++) s[c] -= lse[c];
          exp_inplace(s, W);
          const uint64_t base = (uint64_t)(((b * p->Hq + h) * p->L + i0) * p->S + jj);
          if (!j->dropout) { /* the same arithmetic, z = dscale, without the branch: vectors */
            const T z = j->dscale;
            for (int64_t c = 0; c < nq; c++) {
              const T pr = s[c];
              s[c] = pr * z;
              dp[c] = pr * (dp[c] * z - delta[c]);
            }
          } else
          for (int64_t c = 0; c < nq; c++) {
            const T pr = s[c];
            T z = j->dscale;
            if (j->dropout && !keep_elem(p, &pc, j->thr, base + (uint64_t)(c * p->S))) z = 0;
            s[c] = pr * z;
            dp[c] = pr * (dp[c] * z - delta[c]);
          }
          for (int64_t c = nq; c < W; c++) s[c] = dp[c] = 0;
        }
        tile_gemm(nk, Dvp, nq, St, BQ, dO, Dvp, dV, Dvp, 1);
        tile_gemm(nk, Dp, nq, dPt, BQ, Q, Dp, dK, Dp, 1);
      }
    }
    for (int64_t r = 0; r < nk; r++) {
      store_line((char *)row_ptr(&p->dk, b, hk, j0 + r), p->dk.st[3], p->dk.dtype, dK + r * Dp, scale, D);
      store_line((char *)row_ptr(&p->dv, b, hk, j0 + r), p->dv.st[3], p->dv.dtype, dV + r * Dvp, 1, Dv);
    }
  }
  free(buf);
}

/* ------------------------------------------------- backward: dQ, dbias */

static void backward_q_range(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  job *j = arg;
  const nk_attn_problem *p = j->p;
  const int64_t D = p->D, Dv = p->Dv, Dp = j->Dp;
  T *buf = alloc_tiles(j, (size_t)(BQ * D + BQ * Dv + BQ * Dp + D * BK + Dv * BK + BK * Dp + 2 * BQ * BK + 2 * BQ));
  if (!buf) return;
  T *Q = buf, *dO = Q + BQ * D, *dQ = dO + BQ * Dv, *Ktb = dQ + BQ * Dp, *Vtb = Ktb + D * BK;
  T *Kb = Vtb + Dv * BK, *S = Kb + BK * Dp, *dP = S + BQ * BK, *lse = dP + BQ * BK, *delta = lse + BQ;
  const T scale = (T)p->scale;
  philox_cache pc = {0};
  for (int64_t u = u0; u < u1; u++) {
    const int64_t qb = u % j->nqb, h = (u / j->nqb) % p->Hq, b = u / (j->nqb * p->Hq);
    const int64_t hk = h / j->group, i0 = qb * BQ, nq = p->L - i0 < BQ ? p->L - i0 : BQ;
    load_tile(Q, D, &p->q, b, h, i0, nq, D, 0);
    load_tile(dO, Dv, &p->dout, b, h, i0, nq, Dv, 0);
    for (int64_t r = 0; r < nq; r++) {
      load_line(lse + r, 1, row_ptr(&p->lse, b, h, i0 + r), 0, p->lse.dtype, 1);
      load_line(delta + r, 1, row_ptr(&p->delta, b, h, i0 + r), 0, p->delta.dtype, 1);
    }
    memset(dQ, 0, sizeof(T) * BQ * Dp);
    const int64_t kend = p->causal ? (i0 + nq < p->S ? i0 + nq : p->S) : p->S;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
      const int64_t nk = kend - j0 < BK ? kend - j0 : BK;
      const T *Kt = Ktb, *Vt = Vtb, *K = Kb;
      if (j->pack) {
        Kt = j->pack + ((b * p->Hkv + hk) * j->nkb + j0 / BK) * j->tile;
        Vt = Kt + D * BK;
        K = Vt + Dv * BK;
      } else {
        if (nk < BK) { memset(Ktb, 0, sizeof(T) * D * BK); memset(Vtb, 0, sizeof(T) * Dv * BK); }
        load_tile(Ktb, BK, &p->k, b, hk, j0, nk, D, 1);
        load_tile(Vtb, BK, &p->v, b, hk, j0, nk, Dv, 1);
        load_tile(Kb, Dp, &p->k, b, hk, j0, nk, D, 0);
      }
      tile_gemm(nq, BK, D, Q, D, Kt, BK, S, BK, 0);
      tile_gemm(nq, BK, Dv, dO, Dv, Vt, BK, dP, BK, 0);
      for (int64_t r = 0; r < nq; r++) {
        const int64_t i = i0 + r;
        T *s = S + r * BK, *dp = dP + r * BK;
        const int64_t hi = p->causal ? (i - j0 + 1 < nk ? i - j0 + 1 : nk) : nk;
        finish_scores(s, BK, 0, hi, scale);
        if (p->mask.data) add_mask(s, hi, row_ptr(&p->mask, b, h, i) + j0 * p->mask.st[3], p->mask.st[3], p->mask.dtype);
        for (int64_t c = 0; c < BK; c++) s[c] -= lse[r];
        exp_inplace(s, BK);
        const uint64_t base = (uint64_t)(((b * p->Hq + h) * p->L + i) * p->S + j0);
        if (!j->dropout) { /* the same arithmetic without the branch: vectors */
          const T z = j->dscale, dr = delta[r];
          for (int64_t c = 0; c < nk; c++) dp[c] = s[c] * (dp[c] * z - dr);
        } else
        for (int64_t c = 0; c < nk; c++) {
          T z = j->dscale;
          if (j->dropout && !keep_elem(p, &pc, j->thr, base + (uint64_t)c)) z = 0;
          dp[c] = s[c] * (dp[c] * z - delta[r]);
        }
        if (nk < BK) zero_tail(dp, nk, BK);
        if (p->dbias.data) store_line((char *)row_ptr(&p->dbias, b, h, i) + j0 * p->dbias.st[3], p->dbias.st[3],
                                      p->dbias.dtype, dp, 1, nk);
      }
      tile_gemm(nq, Dp, nk, dP, BK, K, Dp, dQ, Dp, 1);
    }
    for (int64_t r = 0; r < nq; r++)
      store_line((char *)row_ptr(&p->dq, b, h, i0 + r), p->dq.st[3], p->dq.dtype, dQ + r * Dp, scale, D);
  }
  free(buf);
}

/* Head (b, h)'s dQ rows from nc partial sums, each D x Lp transposed
 * (Lp = L rounded to 2 VW), nc apart by D * Lp: summed in order, scaled
 * and stored; tmp holds D values.  One partial: the one-pass backward's
 * own dQ; more: reduce_dq_range's key chunks. */
static void store_dq(const nk_attn_problem *p, int64_t b, int64_t h, const T *part, int64_t nc, T *tmp) {
  const int64_t D = p->D, L = p->L, Lp = round_up(L, 2 * VW);
  for (int64_t r = 0; r < L; r++) {
    for (int64_t c = 0; c < D; c++) {
      T sum = part[c * Lp + r];
      for (int64_t k = 1; k < nc; k++) sum += part[(k * D + c) * Lp + r];
      tmp[c] = sum;
    }
    store_line((char *)row_ptr(&p->dq, b, h, r), p->dq.st[3], p->dq.dtype, tmp, (T)p->scale, D);
  }
}

/* ------------------------------------ backward: dQ, dK, dV in one pass
 * A unit owns a (batch, kv head) -- or one of its key chunks, where
 * there are too few pairs to feed the pool (nk_attention_key_chunks) --:
 * its K, V (rows, and K
 * transposed) and, one query head at a time, that head's Q, dO (rows and
 * transposed), lse and delta = rowsum(dO * O) are loaded once into the unit's buffers; then for every (key block,
 * query block) pair S^T and dP^T are computed once and feed all three
 * products (5 tile GEMMs per pair instead of the two-pass 7, and no
 * packing pass).  dK, dV accumulate over the
 * whole key range of the unit, dQ (kept transposed, D x L) over the key
 * blocks of the head; every output element is still written by one unit
 * in a fixed order, so results do not depend on the thread count.  With
 * key chunks, each chunk's dQ is a partial sum that reduce_dq_range adds
 * in chunk order (the chunks are a function of the shape alone). */
static void backward_fused_range(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  job *j = arg;
  const nk_attn_problem *p = j->p;
  const int64_t D = p->D, Dv = p->Dv, Dp = j->Dp, Dvp = j->Dvp, L = p->L, S = p->S;
  const int64_t Lp = round_up(L, 2 * VW), Sp = round_up(S, BK);
  T *buf = alloc_tiles(j, (size_t)(D * Lp + Dv * Lp + Lp * Dp + Lp * Dvp + D * Lp + 2 * Lp + Sp * D + Sp * Dv +
                                   D * Sp + Sp * Dp + Sp * Dvp + 2 * BK * BQ + 2 * (Dp + Dvp)));
  if (!buf) return;
  T *Qt = buf, *dOt = Qt + D * Lp, *Qr = dOt + Dv * Lp, *dOr = Qr + Lp * Dp, *dQt = dOr + Lp * Dvp;
  T *lse = dQt + D * Lp, *delta = lse + Lp, *K = delta + Lp, *V = K + Sp * D, *Kt = V + Sp * Dv;
  T *dK = Kt + D * Sp, *dV = dK + Sp * Dp, *St = dV + Sp * Dvp, *dPt = St + BK * BQ, *tmp = dPt + BK * BQ;
  const T scale = (T)p->scale;
  philox_cache pc = {0};
  for (int64_t u = u0; u < u1; u++) {
    const int64_t chunk = u % j->kchunks, hk = (u / j->kchunks) % p->Hkv, b = u / (j->kchunks * p->Hkv);
    const int64_t jb = chunk * j->kcb * BK, je = jb + j->kcb * BK < S ? jb + j->kcb * BK : S;
    load_tile(K, D, &p->k, b, hk, 0, S, D, 0);
    load_tile(V, Dv, &p->v, b, hk, 0, S, Dv, 0);
    load_tile(Kt, Sp, &p->k, b, hk, 0, S, D, 1);
    memset(dK, 0, sizeof(T) * (size_t)(Sp * Dp));
    memset(dV, 0, sizeof(T) * (size_t)(Sp * Dvp));
    for (int64_t h = hk * j->group; h < (hk + 1) * j->group; h++) {
      memset(Qt, 0, sizeof(T) * (size_t)(D * Lp));
      memset(dOt, 0, sizeof(T) * (size_t)(Dv * Lp));
      memset(dQt, 0, sizeof(T) * (size_t)(D * Lp));
      load_tile(Qt, Lp, &p->q, b, h, 0, L, D, 1);
      load_tile(dOt, Lp, &p->dout, b, h, 0, L, Dv, 1);
      load_tile(Qr, Dp, &p->q, b, h, 0, L, D, 0);
      load_tile(dOr, Dvp, &p->dout, b, h, 0, L, Dv, 0);
      for (int64_t r = 0; r < L; r++) {
        load_line(lse + r, 1, row_ptr(&p->lse, b, h, r), 0, p->lse.dtype, 1);
        load_line(delta + r, 1, row_ptr(&p->delta, b, h, r), 0, p->delta.dtype, 1);
      }
      for (int64_t j0 = jb; j0 < je; j0 += BK) {
        const int64_t nk = S - j0 < BK ? S - j0 : BK;
        for (int64_t i0 = p->causal ? j0 / BQ * BQ : 0; i0 < L; i0 += BQ) {
          const int64_t nq = L - i0 < BQ ? L - i0 : BQ;
          const int64_t W = round_up(nq, 2 * VW) < BQ ? round_up(nq, 2 * VW) : BQ;
          tile_gemm(nk, W, D, K + j0 * D, D, Qt + i0, Lp, St, BQ, 0);
          tile_gemm(nk, W, Dv, V + j0 * Dv, Dv, dOt + i0, Lp, dPt, BQ, 0);
          for (int64_t r = 0; r < nk; r++) {
            const int64_t jj = j0 + r;
            T *s = St + r * BQ, *dp = dPt + r * BQ;
            const T *ls = lse + i0, *dl = delta + i0;
            const int64_t lo = p->causal ? (jj - i0 > 0 ? jj - i0 : 0) : 0;
            finish_scores(s, W, lo, nq, scale);
            if (p->mask.data && lo < nq)
              add_mask(s + lo, nq - lo, row_ptr(&p->mask, b, h, i0 + lo) + jj * p->mask.st[3], p->mask.st[2],
                       p->mask.dtype);
            for (int64_t c = 0; c < nq; c++) s[c] -= ls[c];
            exp_inplace(s, W);
            if (!j->dropout) {
              const T z = j->dscale;
              for (int64_t c = 0; c < nq; c++) {
                const T pr = s[c];
                s[c] = pr * z;
                dp[c] = pr * (dp[c] * z - dl[c]);
              }
            } else {
              const uint64_t base = (uint64_t)(((b * p->Hq + h) * p->L + i0) * p->S + jj);
              for (int64_t c = 0; c < nq; c++) {
                const T pr = s[c];
                T z = j->dscale;
                if (!keep_elem(p, &pc, j->thr, base + (uint64_t)(c * p->S))) z = 0;
                s[c] = pr * z;
                dp[c] = pr * (dp[c] * z - dl[c]);
              }
            }
            for (int64_t c = nq; c < W; c++) s[c] = dp[c] = 0;
          }
          tile_gemm(nk, Dvp, nq, St, BQ, dOr + i0 * Dvp, Dvp, dV + j0 * Dvp, Dvp, 1);
          tile_gemm(nk, Dp, nq, dPt, BQ, Qr + i0 * Dp, Dp, dK + j0 * Dp, Dp, 1);
          tile_gemm(D, W, nk, Kt + j0, Sp, dPt, BQ, dQt + i0, Lp, 1);
        }
      }
      if (j->kchunks > 1) {
        if (j->dq_part)
          memcpy(j->dq_part + ((b * p->Hq + h) * j->kchunks + chunk) * D * Lp, dQt, sizeof(T) * (size_t)(D * Lp));
        continue;
      }
      store_dq(p, b, h, dQt, 1, tmp);
    }
    for (int64_t r = jb; r < je; r++) {
      store_line((char *)row_ptr(&p->dk, b, hk, r), p->dk.st[3], p->dk.dtype, dK + r * Dp, scale, D);
      store_line((char *)row_ptr(&p->dv, b, hk, r), p->dv.st[3], p->dv.dtype, dV + r * Dvp, 1, Dv);
    }
  }
  free(buf);
}

/* dQ of (batch, head) units from the key chunks' partial sums, added in
 * chunk order. */
static void reduce_dq_range(void *arg, int64_t u0, int64_t u1, int worker) {
  (void)worker;
  job *j = arg;
  const nk_attn_problem *p = j->p;
  const int64_t nc = j->kchunks, size = p->D * round_up(p->L, 2 * VW);
  T *tmp = alloc_tiles(j, (size_t)p->D);
  if (!tmp) return;
  for (int64_t u = u0; u < u1; u++) store_dq(p, u / p->Hq, u % p->Hq, j->dq_part + u * nc * size, nc, tmp);
  free(tmp);
}

/* ------------------------------------------------------------- entry */

int AT_NAME(const nk_attn_problem *p, nrt_exec_ctx *ctx) {
  job j;
  memset(&j, 0, sizeof j);
  j.p = p;
  j.nqb = (p->L + BQ - 1) / BQ;
  j.nkb = (p->S + BK - 1) / BK;
  j.group = p->Hq / p->Hkv;
  j.Dp = round_up(p->D, VW);
  j.Dvp = round_up(p->Dv, VW);
  j.dropout = p->dropout_p > 0;
  j.thr = nk_attn_drop_threshold(p->dropout_p);
  j.dscale = p->dropout_p >= 1 ? 0 : (T)(1.0 / (1.0 - p->dropout_p));
  pack_job pj;
  memset(&pj, 0, sizeof pj);
  if (p->mode == NK_ATTENTION_BACKWARD_KV) {
    pj.heads = p->Hq, pj.seq = p->L, pj.bs = BQ, pj.n_parts = 4;
    pj.part[0] = (pack_part){&p->q, 1, p->D, BQ, 0};
    pj.part[1] = (pack_part){&p->dout, 1, p->Dv, BQ, 0};
    pj.part[2] = (pack_part){&p->q, 0, p->D, j.Dp, 0};
    pj.part[3] = (pack_part){&p->dout, 0, p->Dv, j.Dvp, 0};
  } else {
    pj.heads = p->Hkv, pj.seq = p->S, pj.bs = BK;
    pj.part[0] = (pack_part){&p->k, 1, p->D, BK, 0};
    if (p->mode == NK_ATTENTION_FORWARD) {
      pj.n_parts = 2;
      pj.part[1] = (pack_part){&p->v, 0, p->Dv, j.Dvp, 0};
    } else {
      pj.n_parts = 3;
      pj.part[1] = (pack_part){&p->v, 1, p->Dv, BK, 0};
      pj.part[2] = (pack_part){&p->k, 0, p->D, j.Dp, 0};
    }
  }
  if (p->mode == NK_ATTENTION_BACKWARD_KV) pj.single_use = j.nkb == 1;
  else pj.single_use = j.nqb == 1 && j.group == 1;
  if (p->mode != NK_ATTENTION_BACKWARD) pack(&j, &pj, p->B);
  switch (p->mode) {
  case NK_ATTENTION_BACKWARD: {
    const int64_t chunks = nk_attention_key_chunks(p->B * p->Hkv, p->S);
    j.kchunks = chunks;
    j.kcb = (j.nkb + chunks - 1) / chunks;
    /* no partial sums to keep when dq is empty (L or D 0) */
    const int64_t part = j.kchunks > 1 ? p->B * p->Hq * j.kchunks * p->D * round_up(p->L, 2 * VW) : 0;
    if (part > 0) {
      j.dq_part = aligned_alloc(64, (size_t)round_up((int64_t)sizeof(T) * part, 64));
      if (!j.dq_part) j.oom = 1;
    }
    if (!j.oom) nk_parallel_for(p->B * p->Hkv * j.kchunks, 1, backward_fused_range, &j);
    if (!j.oom && j.dq_part) nk_parallel_for(p->B * p->Hq, 1, reduce_dq_range, &j);
    free(j.dq_part);
    break;
  }
  case NK_ATTENTION_FORWARD:
    nk_parallel_for(p->B * p->Hq * j.nqb, 1, forward_range, &j);
    break;
  case NK_ATTENTION_BACKWARD_KV:
    nk_parallel_for(p->B * p->Hkv * j.nkb, 1, backward_kv_range, &j);
    break;
  default:
    nk_parallel_for(p->B * p->Hq * j.nqb, 1, backward_q_range, &j);
    break;
  }
  free(j.pack);
  if (j.oom) {
    nrt_exec_fail(ctx, "out of host memory for the attention tiles");
    return -1;
  }
  return 0;
}
