/* gemm.c — NK_KERNEL_GEMM: out[b] <- alpha * a[b] @ b[b] + beta * out[b].
 *
 * BLIS's five loops around a register-blocked micro-kernel (gemm.h):
 *
 *   for jc in n by NC:                 B panel, KC x NC, in L3 (shared)
 *     for pc in k by KC:               pack B panel[pc, jc] once (all threads)
 *       for ic in m by MC:     (par)   pack A block[ic, pc] (per thread, L2)
 *         for jr in NC by NR:  (par)   B sliver KC x NR (L1/L2), reused MC/MR times
 *           for ir in MC by MR:        micro-kernel: MR x NR of C
 *
 * Decisions (the why):
 *  - Block sizes come from the caches, read at run time (sysconf, with
 *    defaults of 32 KiB / 1 MiB / 8 MiB): KC so that a B sliver is twice
 *    L1 (fewer passes over C; see plan_gemm), MC so that an A block fills
 *    half of L2, NC so that the shared B panel takes a quarter of L3.  TORCHNEURON_GEMM_{MC,KC,NC} override
 *    them (tuning).  KC never depends on the thread count: every output
 *    element sums its k blocks in the same order, and within a block the
 *    micro-kernel adds p = 0..kc-1 in order, so results do not depend on
 *    the number of threads (MC does depend on it; it only moves work).
 *  - Threads: the pool is a work queue, not a team with barriers (a helper
 *    may never show up on a loaded machine), so each (jc, pc) panel is two
 *    parallel regions: one packs the shared B panel (split by slivers), one
 *    runs (ic, jr-chunk) work items, each worker packing the A block of
 *    its items into its own buffer (re-used while consecutive items share
 *    ic).  Batched products of small matrices go the other way: one whole
 *    matrix product per work item, serial inside.  Inside a parallel region
 *    (convolution, attention calling nk_gemm_operands) everything runs
 *    inline and serially, with the same results.
 *  - C is updated by the micro-kernel directly (alpha, beta; later k
 *    blocks with beta = 1) when the output is the compute type with unit
 *    column stride and the tile is full; edge tiles go through a scratch
 *    tile.  Other outputs (float16/bfloat16, integers, odd strides)
 *    accumulate into a compute-type workspace of M x NC and are stored once
 *    (alpha, beta, one rounding) by the work item that owns the tile after
 *    the last k block, as ATen's CPU does.
 *  - Compute types: float32 for float16/bfloat16/float32 (16-bit operands
 *    are widened while packing, so they run on the float32 kernels; on a
 *    CPU with AVX512_BF16, bfloat16 operands are instead packed in k pairs
 *    for a dot-product micro-kernel with twice the float32 rate, as
 *    oneDNN does for ATen's CPU),
 *    float64, int64 for the integers (wrapping, portable kernel).
 *  - Mixed precision: bfloat16/float16 a and b may write a float32 out
 *    (GemmEx's 32F C).  Convolution needs it: its operands are bfloat16
 *    but its results accumulate across GEMMs (the weight gradient's
 *    chunks, col2im's overlapping columns, the bias) and must be rounded
 *    once at the end, so the GEMM's output has to stay float32.  Such a
 *    plan updates out directly (no workspace); matrix-vector shapes take
 *    the packed path.  The offset tables work for bfloat16 b too: the
 *    pair packing reads rows/columns through them (implicit-GEMM
 *    convolution on its padded bfloat16 grid); the unpacked form stays
 *    float32/float64 (its rows kernels read the compute type in place).
 *  - Matrix-vector shapes (n == 1 or m == 1, float32/float64, one operand
 *    with unit stride along k) skip packing: dot products per row, or axpy
 *    sweeps for a column-major matrix; small problems run serially.
 *  - Buffers (per-call, 64-byte aligned) are cached per calling thread and
 *    grown on demand, so steady-state calls do not fault pages in.
 *  - An addend c (operand 3: out = alpha * a @ b + beta * c, c broadcast by
 *    strides) is added where each tile is finished, while the tile is in
 *    L1: to the micro-kernel's tile after the last k block (direct
 *    outputs) or inside the workspace store (others, one rounding).
 *    addmm's bias had been copied into out first and read back with beta
 *    = 1: a pass over out for nothing, and for bfloat16 outputs a
 *    per-element convert-and-store that took twice the product's time. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dtype_convert.h"
#include "gemm/gemm.h"
#include "common/half_rows.h"
#include "common/kernel_entries.h"
#include "common/nd_iter.h"
#include "neuron_kernels.h"
#include "common/validate.h"

/* ------------------------------------------------------------ portable */

#define NK_UKR_PORTABLE(name, T, MR, NR, MULADD)                                           \
  static void name(int64_t kc, const void *ap, const void *bp, void *cp, int64_t ldc,       \
                   const void *alphap, const void *betap) {                                 \
    const T *a = ap, *b = bp;                                                               \
    T *c = cp, acc[MR][NR] = {{0}};                                                         \
    const T alpha = *(const T *)alphap, beta = *(const T *)betap;                           \
    for (int64_t p = 0; p < kc; p++, a += MR, b += NR)                                      \
      for (int i = 0; i < MR; i++)                                                          \
        for (int j = 0; j < NR; j++) acc[i][j] = MULADD(acc[i][j], a[i], b[j]);             \
    for (int i = 0; i < MR; i++)                                                            \
      for (int j = 0; j < NR; j++) {                                                        \
        T v = MULADD((T)0, alpha, acc[i][j]);                                               \
        c[i * ldc + j] = beta == 0 ? v : MULADD(v, beta, c[i * ldc + j]);                   \
      }                                                                                     \
  }
#define NK_MULADD_FLOAT(acc, x, y) ((acc) + (x) * (y))
#define NK_MULADD_INT(acc, x, y) ((int64_t)((uint64_t)(acc) + (uint64_t)(x) * (uint64_t)(y)))
NK_UKR_PORTABLE(ukr_f32_6x16, float, 6, 16, NK_MULADD_FLOAT)
NK_UKR_PORTABLE(ukr_f64_4x8, double, 4, 8, NK_MULADD_FLOAT)
NK_UKR_PORTABLE(ukr_i64_4x4, int64_t, 4, 4, NK_MULADD_INT)

#define NK_DOT_PORTABLE(name, T)                                                            \
  static T name(int64_t n, const T *x, const T *y) {                                        \
    T s[8] = {0};                                                                           \
    int64_t p = 0;                                                                          \
    for (; p + 8 <= n; p += 8)                                                              \
      for (int l = 0; l < 8; l++) s[l] += x[p + l] * y[p + l];                              \
    T r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));               \
    for (; p < n; p++) r += x[p] * y[p];                                                    \
    return r;                                                                               \
  }                                                                                         \
  static void name##_axpy(int64_t n, T s, const T *x, T *y) {                               \
    for (int64_t i = 0; i < n; i++) y[i] += s * x[i];                                       \
  }                                                                                         \
  static void name##_axpy_tile(int64_t rows, int64_t cols, T s, const T *x, int64_t xrs,    \
                               T *y, int64_t ldy) {                                         \
    for (int64_t i = 0; i < rows; i++) name##_axpy(cols, s, x + i * xrs, y + i * ldy);      \
  }
NK_DOT_PORTABLE(dot_f32, float)
NK_DOT_PORTABLE(dot_f64, double)

/* ------------------------------------------------------------ shapes */

typedef struct gemm_arch {
  int mr, nr;
  nk_gemm_ukr ukr;
  void *dot, *axpy; /* float/double matrix-vector helpers (NULL: none) */
  void *axpy_tile;  /* axpy over a tile's rows (gemm_simd.h; NULL with axpy) */
  nk_gemm_ukr_rows ukr_rows; /* the unpacked-B form (NULL: none) */
  /* AMX (gemm_amx_bf16.c): the k pairs padded to a multiple of kp_align
   * (1: none), A packed in tile order (pack_pairs_tiles), and the tile
   * configuration loaded / released around each run of micro-kernel calls. */
  int kp_align, a_tiles;
  void (*begin)(void), (*end)(void);
  /* rows_first's blocking: micro-kernel calls of kp_sub packed k steps (0:
   * the whole k block) over row_group row slivers, so a B sub-sliver stays
   * in L1 while the group's A slivers stream from L2. */
  int kp_sub, row_group;
  /* products below this many flops run serially */
  double serial_flops;
} gemm_arch;

/* The AVX512_BF16 dot-product kernel: within the TORCHNEURON_ISA cap
 * (avx512) and on a CPU that has the instruction. */
static int has_bf16_dot(void) { return nk_cpu_has_avx512bf16(); }

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

/* The SIMD kernels' entries, by position (the AMX ones name theirs), with
 * the defaults: no k padding, one-sliver row groups, and 2 MFLOP as the
 * serial threshold (the float32 kernels' measured break-even). */
#define ARCH_DEFAULTS .kp_align = 1, .row_group = 1, .serial_flops = 2e6
#define ARCH(mr_, nr_, ukr_, dot_, axpy_, rows_)                                          \
  (gemm_arch){.mr = mr_, .nr = nr_, .ukr = ukr_, .dot = (void *)dot_, .axpy = (void *)axpy_,    \
              .axpy_tile = (void *)axpy_##_tile, .ukr_rows = rows_, ARCH_DEFAULTS}
#define ARCH_NO_MV(mr_, nr_, ukr_, rows_)                                                  \
  (gemm_arch){.mr = mr_, .nr = nr_, .ukr = ukr_, .ukr_rows = rows_, ARCH_DEFAULTS}

/* Whether an m-row product takes the 8-row tiles: fewer padded rows than
 * 12-row ones (16 rows are 2 tiles of 8, not 24 rows of 12), few rows. */
static int eight_rows_pay(int64_t m) { return m < 96 && round_up(m, 8) < round_up(m, 12); }

/* The micro-kernel for m-row products of compute class cls. */
static gemm_arch pick_arch(nk_class cls, int pairs, int64_t m) {
  const nk_isa isa = nk_cpu_isa();
  if (pairs && nk_cpu_has_amx_bf16())
    return (gemm_arch){.mr = m <= 16 ? 16 : 32, .nr = 32,
                       .ukr = m <= 16 ? nk_gemm_ukr_amx_bf16_16x32 : nk_gemm_ukr_amx_bf16_32x32,
                       .kp_align = 16, .a_tiles = 1, .begin = nk_gemm_amx_begin,
                       .end = nk_gemm_amx_end, .kp_sub = 128, .row_group = 2,
                       /* one AMX core beat two below ~80 MFLOP (256^3: 0.91-0.98x
                        * torch CPU serial, 0.41-1.01x split; 320^3: 0.5-0.7x
                        * against 0.33-0.53x; 384^3 gains from the split) */
                       .serial_flops = 8e7};
  if (pairs && eight_rows_pay(m))
    return ARCH_NO_MV(8, 32, nk_gemm_ukr_avx512bf16_f32_m8, nk_gemm_ukr_rows_avx512bf16_f32_m8);
  if (pairs) return ARCH_NO_MV(12, 32, nk_gemm_ukr_avx512bf16_f32, nk_gemm_ukr_rows_avx512bf16_f32);
  switch (cls) {
  case NK_CLASS_FLOAT:
    /* Few rows: 8-row tiles where they pad less than 12-row ones (16 rows
     * are 2 tiles of 8, not 24 rows of 12); many rows: the 12-row kernel,
     * which needs fewer loads per multiply-add. */
    if (isa == NK_ISA_AVX512 && eight_rows_pay(m))
      return ARCH(8, 32, nk_gemm_ukr_avx512_f32_m8, nk_gemm_dot_avx512_f32,
                  nk_gemm_axpy_avx512_f32, nk_gemm_ukr_rows_avx512_f32_m8);
    if (isa == NK_ISA_AVX512)
      return ARCH(12, 32, nk_gemm_ukr_avx512_f32, nk_gemm_dot_avx512_f32,
                  nk_gemm_axpy_avx512_f32, nk_gemm_ukr_rows_avx512_f32);
    if (isa == NK_ISA_AVX2)
      return ARCH(6, 16, nk_gemm_ukr_avx2_f32, nk_gemm_dot_avx2_f32,
                  nk_gemm_axpy_avx2_f32, nk_gemm_ukr_rows_avx2_f32);
    return ARCH(6, 16, ukr_f32_6x16, dot_f32, dot_f32_axpy, NULL);
  case NK_CLASS_DOUBLE:
    if (isa == NK_ISA_AVX512)
      return ARCH(12, 16, nk_gemm_ukr_avx512_f64, nk_gemm_dot_avx512_f64,
                  nk_gemm_axpy_avx512_f64, nk_gemm_ukr_rows_avx512_f64);
    if (isa == NK_ISA_AVX2)
      return ARCH(6, 8, nk_gemm_ukr_avx2_f64, nk_gemm_dot_avx2_f64,
                  nk_gemm_axpy_avx2_f64, nk_gemm_ukr_rows_avx2_f64);
    return ARCH(4, 8, ukr_f64_4x8, dot_f64, dot_f64_axpy, NULL);
  default: return ARCH_NO_MV(4, 4, ukr_i64_4x4, NULL);
  }
}

static long env_long(const char *name) {
  const char *s = getenv(name);
  return s && *s ? atol(s) : 0;
}

typedef struct cache_info {
  long l1, l2, l3, mc, kc, nc; /* bytes; then the overrides (0: none) */
} cache_info;

static cache_info caches(void) {
  static cache_info ci;
  static int known; /* racing first callers compute the same answer */
  if (!__atomic_load_n(&known, __ATOMIC_ACQUIRE)) {
    cache_info c;
    c.l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    c.l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    c.l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (c.l1 < 16384 || c.l1 > (1L << 20)) c.l1 = 32768;
    if (c.l2 < 131072 || c.l2 > (64L << 20)) c.l2 = 1L << 20;
    if (c.l3 < c.l2 || c.l3 > (1L << 30)) c.l3 = 8L << 20;
    c.mc = env_long("TORCHNEURON_GEMM_MC");
    c.kc = env_long("TORCHNEURON_GEMM_KC");
    c.nc = env_long("TORCHNEURON_GEMM_NC");
    ci = c;
    __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
  }
  return ci;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------ the plan */

/* A matrix of one batch entry: element (r, c) at data + r * rs + c * cs,
 * or at the byte offsets roff[r] / coff[c] in place of r * rs / c * cs
 * where those tables are given (nk_gemm_indirect; float32, float64 and
 * bfloat16, whose k-pair packing reads through them like NK_PACK). */
typedef struct matrix {
  const char *data;
  nrt_dtype dtype;
  int64_t rs, cs;
  const int64_t *roff, *coff;
} matrix;

/* The most rows a product reads an indirect B unpacked (see the plan). */
#define NK_GEMM_UNPACKED_MAX_ROWS 256

#define NK_ROW(x, r) ((x)->roff ? (x)->roff[r] : (r) * (x)->rs)
#define NK_COL(x, c) ((x)->coff ? (x)->coff[c] : (c) * (x)->cs)

typedef struct gemm_plan {
  nk_class cls;
  gemm_arch arch;
  size_t es;                 /* bytes of the compute type */
  int64_t mc, kc, nc;        /* mc a multiple of mr, nc of nr */
  int64_t batch, m, n, k;
  nrt_operand out, a, b;     /* 3-d: (batch, rows, cols) */
  nk_scalar alpha, beta;     /* beta scales out; 0 when an addend c is given */
  nrt_operand c;             /* the addend (has_c), 3-d like out */
  int has_c;
  nk_scalar c_scale;         /* its scale */
  int direct;                /* out is the compute type with unit column stride */
  int pairs;                 /* bfloat16 packed in k pairs for the dot-product kernel */
  nk_gemm_indirect ind;      /* offset tables (all NULL: plain strides) */
  int unpacked_b;            /* B read in place by arch.ukr_rows (ind.b_rows, unit columns) */
  int rows_first;            /* an indirect output in one k block: stored a row block at a time */
  /* Read through (const double *) / (const int64_t *) by the micro-kernels
   * and merge_tile, so they need 8-byte alignment: after `int direct` a
   * plain char array sits at offset 4 mod 8 (a misaligned load, UBSan). */
  _Alignas(8) char one[8], zero[8];       /* 1 and 0 in the compute type */
  _Alignas(8) char alpha_c[8], beta_c[8]; /* alpha, beta in the compute type */
} gemm_plan;

static void set_compute(nk_class cls, char *dst, nk_scalar v) {
  switch (cls) {
  case NK_CLASS_FLOAT: { float f = (float)v.f; memcpy(dst, &f, 4); break; }
  case NK_CLASS_DOUBLE: memcpy(dst, &v.f, 8); break;
  default: memcpy(dst, &v.i, 8); break;
  }
}

/* ------------------------------------------------------------ packing */

/* A sliver row of the widths the micro-kernels use (MR or NR elements of
 * 4 or 8 bytes) as one fixed-size copy, which the compiler turns into vector
 * moves; 0 for any other width (the caller copies element by element). */
static inline int copy_sliver_row(void *dst, const void *src, size_t bytes) {
  switch (bytes) {
  case 24: memcpy(dst, src, 24); return 1;
  case 32: memcpy(dst, src, 32); return 1;
  case 48: memcpy(dst, src, 48); return 1;
  case 64: memcpy(dst, src, 64); return 1;
  case 96: memcpy(dst, src, 96); return 1;
  case 128: memcpy(dst, src, 128); return 1;
  default: return 0;
  }
}

/* Packing with rows adjacent reads one short run per k step, the steps a
 * column stride apart: in a large matrix each run is on another page, which
 * the hardware prefetchers do not follow, so the copy waited on memory
 * (a transposed A of 2048 x 1376 floats: the pack took 11% of the thread
 * time).  It prefetches the run PACK_PREFETCH_STEPS steps ahead once the
 * block spans more than PACK_PREFETCH_SPAN bytes; a smaller one is in
 * cache already (128^3 lost 3% to the prefetches).  1376x2048 @ 2048x512
 * with A transposed, 2 threads: 165 -> 171 GFLOP/s; 1024^3 so: 155 -> 168. */
#define PACK_PREFETCH_STEPS 8
#define PACK_PREFETCH_SPAN (64 << 10)
static inline void prefetch_span(const char *p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
  __builtin_prefetch(p + bytes - 1, 0, 3);
}

/* Rows [r0, r0 + rows) x cols [c0, c0 + cols) of x packed into slivers of
 * `width` along the row index, k (the column index) major inside a sliver:
 * dst[s][c][i] = x[r0 + s * width + i][c0 + c]; padding is 0.  A is packed
 * as (m, k); B is passed transposed, (n, k).  Two fast layouts: rows
 * adjacent in memory (one run of `width` per k step) and k adjacent (a
 * transpose); anything else reads element by element. */
#define NK_PACK(name, T, S, LOAD)                                                            \
  static void name(const matrix *x, int64_t r0, int64_t rows, int64_t c0, int64_t cols,     \
                   int width, T *dst) {                                                     \
    if (x->rs == (int64_t)sizeof(S) && !x->roff) {                                          \
      /* Rows adjacent: walk each column (a k step) once across all the       \
       * slivers, so the source streams in order.  Sliver by sliver would      \
       * read `width` elements from each of `cols` far-apart lines and leave    \
       * the copy waiting on memory (a quarter of a 128x784x1152 product). */  \
      const int64_t sliver = (int64_t)width * cols;                                         \
      const int64_t pf_dist =                                                               \
          !x->coff && x->cs * cols > PACK_PREFETCH_SPAN ? PACK_PREFETCH_STEPS : 0;            \
      for (int64_t c = 0; c < cols; c++) {                                                  \
        const S *src = (const S *)(x->data + r0 * x->rs + NK_COL(x, c0 + c));               \
        if (pf_dist && c + pf_dist < cols)                                                  \
          prefetch_span(x->data + r0 * x->rs + NK_COL(x, c0 + c + pf_dist),                \
                        (size_t)rows * sizeof(S));                                          \
        T *d = dst + c * width;                                                             \
        for (int64_t s = 0; s < rows; s += width, d += sliver, src += width) {              \
          const int valid = rows - s < width ? (int)(rows - s) : width;                     \
          /* a whole sliver row of a type packed as itself: one fixed-size    \
           * copy (vector moves; the loop below runs element by element: 8%  \
           * of a 128^3 product for B's rows, 10% of 256x768 @ 768x256 for  \
           * a transposed A's 6-row slivers) */                              \
          if (sizeof(S) == sizeof(T) && valid == width &&                                   \
              copy_sliver_row(d, src, (size_t)width * sizeof(T)))                           \
            continue;                                                                       \
          int i = 0;                                                                        \
          for (; i < valid; i++) d[i] = LOAD(src[i]);                                       \
          for (; i < width; i++) d[i] = 0;                                                  \
        }                                                                                   \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    for (int64_t s = 0; s < rows; s += width, dst += (int64_t)width * cols) {               \
      const int valid = rows - s < width ? (int)(rows - s) : width;                         \
      if (x->cs == (int64_t)sizeof(S) && !x->coff) {                                        \
        for (int i = 0; i < valid; i++) {                                                   \
          const S *src = (const S *)(x->data + NK_ROW(x, r0 + s + i) + c0 * x->cs);         \
          for (int64_t c = 0; c < cols; c++) dst[c * width + i] = LOAD(src[c]);             \
        }                                                                                   \
        if (valid < width)                                                                  \
          for (int64_t c = 0; c < cols; c++)                                                \
            for (int i = valid; i < width; i++) dst[c * width + i] = 0;                     \
      } else {                                                                              \
        for (int64_t c = 0; c < cols; c++) {                                                \
          T *d = dst + c * width;                                                           \
          const char *col = x->data + NK_COL(x, c0 + c);                                    \
          int i = 0;                                                                        \
          for (; i < valid; i++) {                                                          \
            S v;                                                                            \
            memcpy(&v, col + NK_ROW(x, r0 + s + i), sizeof v);                              \
            d[i] = LOAD(v);                                                                 \
          }                                                                                 \
          for (; i < width; i++) d[i] = 0;                                                  \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  }
#define NK_ID(v) (v)
NK_PACK(pack_f32, float, float, NK_ID)
NK_PACK(pack_f64, double, double, NK_ID)
NK_PACK(pack_bf16, float, uint16_t, nk_bf16_to_f32)
NK_PACK(pack_f16, float, uint16_t, nk_f16_to_f32)

/* bfloat16 for the dot-product kernel: the same slivers, but each element
 * a k pair, (cols + 1) / 2 of them: dst[s][q][i] = x[r0 + s*width + i][c0 +
 * 2q] | x[..][c0 + 2q + 1] << 16, an odd last pair's high half 0. */
static uint16_t at16(const matrix *x, int64_t r, int64_t c) {
  uint16_t v;
  memcpy(&v, x->data + NK_ROW(x, r) + NK_COL(x, c), sizeof v);
  return v;
}

static void pack_pairs(const matrix *x, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                       int width, int64_t kp, uint32_t *dst) {
  const int64_t pairs = (cols + 1) / 2, sliver = (int64_t)width * kp;
  for (int64_t s = 0; s < rows; s += width) /* pairs [pairs, kp): AMX's k padding */
    memset(dst + s / width * sliver + pairs * width, 0, (size_t)((kp - pairs) * width) * 4);
  if (x->rs == 2 && !x->roff) {
    /* rows adjacent: two source lines per pair (an implicit convolution's
     * B: k rows at offsets coff, the columns adjacent), a sliver at a time
     * so the writes run in order (pair-outer, each pair's writes jumped
     * from sliver to sliver: 14% of a 512^3 bfloat16 product, its samples
     * on the stores) */
    for (int64_t s = 0; s < rows; s += width) {
      const int valid = rows - s < width ? (int)(rows - s) : width;
      uint32_t *d = dst + s / width * sliver;
      for (int64_t q = 0; q < pairs; q++, d += width) {
        const uint16_t *lo = (const uint16_t *)(x->data + (r0 + s) * 2 + NK_COL(x, c0 + 2 * q));
        const uint16_t *hi =
            2 * q + 1 < cols ? (const uint16_t *)(x->data + (r0 + s) * 2 + NK_COL(x, c0 + 2 * q + 1))
                             : NULL;
        int i = 0;
        if (hi)
          for (; i < valid; i++) d[i] = (uint32_t)lo[i] | (uint32_t)hi[i] << 16;
        else
          for (; i < valid; i++) d[i] = lo[i];
        for (; i < width; i++) d[i] = 0;
      }
    }
    return;
  }
  /* k adjacent: the pairs are the source's own 32-bit words, so a sliver
   * is float32's k-major register transpose on words (moving them one by
   * one had taken a quarter of a 1024x64x64 product); an odd last k is a
   * half-empty pair, filled below */
  const int k_adjacent = x->cs == 2 && !x->coff, transpose = k_adjacent && nk_cpu_isa() >= NK_ISA_AVX2;
  for (int64_t s = 0; s < rows; s += width, dst += sliver) {
    const int valid = rows - s < width ? (int)(rows - s) : width;
    if (transpose)
      nk_gemm_pack_kmajor_avx2_f32(x->data + c0 * 2 + (x->roff ? 0 : (r0 + s) * x->rs),
                                   x->roff ? x->roff + r0 + s : NULL, x->rs, valid, cols / 2, width,
                                   (float *)(void *)dst);
    for (int i = 0; i < valid; i++) {
      const int64_t r = r0 + s + i;
      if (k_adjacent) {
        const char *src = x->data + NK_ROW(x, r) + c0 * 2;
        if (!transpose)
          for (int64_t q = 0; q < cols / 2; q++) memcpy(&dst[q * width + i], src + 4 * q, 4);
        if (cols % 2) dst[(pairs - 1) * width + i] = at16(x, r, c0 + cols - 1);
      } else {
        for (int64_t q = 0; q < pairs; q++)
          dst[q * width + i] = (uint32_t)at16(x, r, c0 + 2 * q) |
                               (2 * q + 1 < cols ? (uint32_t)at16(x, r, c0 + 2 * q + 1) << 16 : 0);
      }
    }
    for (int64_t q = 0; q < pairs; q++)
      for (int i = valid; i < width; i++) dst[q * width + i] = 0;
  }
}

/* A for AMX: the same k pairs in AMX's tile order: blocks of 16 pairs,
 * each block holding the sliver's `width` rows of 16 words (64 bytes)
 * one after another, dst[s][q / 16][i][q % 16], zero past the last pair
 * and the last row.  A k step's tiles are then one contiguous run that
 * the prefetchers follow; row-major slivers (a tile's 16 rows kp * 4
 * bytes apart) left 32 streams in flight, and the tile loads waited on
 * L2.  kp is a multiple of 16. */
static void pack_pairs_tiles(const matrix *x, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                            int width, int64_t kp, uint32_t *dst) {
  const int k_adjacent = x->cs == 2 && !x->coff;
  const int64_t blocks = kp / 16;
  for (int64_t s = 0; s < round_up(rows, width); s += width, dst += (int64_t)width * kp)
    for (int i = 0; i < width; i++) {
      const int64_t r = r0 + s + i;
      for (int64_t blk = 0; blk < blocks; blk++) {
        uint16_t *d = (uint16_t *)(dst + (blk * width + i) * 16);
        const int64_t c = blk * 32, n = s + i < rows && c < cols ? (cols - c < 32 ? cols - c : 32) : 0;
        const char *src = x->data + NK_ROW(x, r) + (c0 + c) * 2;
        if (k_adjacent && n == 32) { /* a constant size: vector moves, not `rep movs` */
          memcpy(d, src, 64);
          continue;
        }
        if (k_adjacent && n > 0)
          memcpy(d, src, (size_t)n * 2);
        else
          for (int64_t e = 0; e < n; e++) d[e] = at16(x, r, c0 + c + e);
        memset(d + n, 0, (size_t)(32 - n) * 2);
      }
    }
}

/* The packed length of a k block of kc: kc values, or its pairs (padded
 * for AMX). */
static int64_t packed_k(const gemm_plan *p, int64_t kc) {
  return p->pairs ? round_up((kc + 1) / 2, p->arch.kp_align) : kc;
}

static void pack(const gemm_plan *p, const matrix *x, int64_t r0, int64_t rows, int64_t c0,
                 int64_t cols, int width, char *dst) {
  if (p->pairs) {
    pack_pairs(x, r0, rows, c0, cols, width, packed_k(p, cols), (uint32_t *)dst);
    return;
  }
  if (p->cls == NK_CLASS_FLOAT) {
    if (x->dtype == NRT_FLOAT32 && x->cs == 4 && !x->coff && (x->rs != 4 || x->roff) &&
        nk_cpu_isa() >= NK_ISA_AVX2) {
      /* k contiguous: register transposes (gemm_pack_avx2_f32.c) */
      for (int64_t s = 0; s < rows; s += width, dst += (size_t)(width * cols) * 4) {
        const int valid = rows - s < width ? (int)(rows - s) : width;
        if (x->roff)
          nk_gemm_pack_kmajor_avx2_f32(x->data + c0 * 4, x->roff + r0 + s, 0, valid, cols, width,
                                       (float *)dst);
        else
          nk_gemm_pack_kmajor_avx2_f32(x->data + (r0 + s) * x->rs + c0 * 4, NULL, x->rs, valid,
                                       cols, width, (float *)dst);
      }
      return;
    }
    switch (x->dtype) {
    case NRT_FLOAT32: pack_f32(x, r0, rows, c0, cols, width, (float *)dst); return;
    case NRT_BFLOAT16: pack_bf16(x, r0, rows, c0, cols, width, (float *)dst); return;
    case NRT_FLOAT16: pack_f16(x, r0, rows, c0, cols, width, (float *)dst); return;
    default: break;
    }
  }
  if (p->cls == NK_CLASS_DOUBLE && x->dtype == NRT_FLOAT64) {
    pack_f64(x, r0, rows, c0, cols, width, (double *)dst);
    return;
  }
  /* Integers (and anything else): one converted element at a time. */
  const size_t es = p->es;
  for (int64_t s = 0; s < rows; s += width) {
    for (int64_t c = 0; c < cols; c++) {
      for (int i = 0; i < width; i++, dst += es) {
        if (s + i >= rows) {
          memset(dst, 0, es);
          continue;
        }
        const char *src = x->data + (r0 + s + i) * x->rs + (c0 + c) * x->cs;
        if (p->cls == NK_CLASS_FLOAT) {
          float v = nk_load_f32(x->dtype, src);
          memcpy(dst, &v, 4);
        } else if (p->cls == NK_CLASS_DOUBLE) {
          double v = nk_load_f64(x->dtype, src);
          memcpy(dst, &v, 8);
        } else {
          int64_t v = nk_load_i64(x->dtype, src);
          memcpy(dst, &v, 8);
        }
      }
    }
  }
}

/* ------------------------------------------------------------ storing */

/* A float row of n values of matrix x (dtype t, element stride cs) as
 * float32: in place when it already is, else converted into buf; a
 * broadcast row (cs 0) is filled with its one value. */
static const float *float_row(nrt_dtype t, const char *x, int64_t cs, int64_t n, float *buf) {
  if (cs == 0) {
    const float v = nk_load_f32(t, x);
    for (int64_t j = 0; j < n; j++) buf[j] = v;
    return buf;
  }
  return nk_half_pick()->in(t, x, cs, n, buf);
}

/* out = alpha * ws + beta * out (or + c_beta * c) over rows x cols (ws in
 * the compute type, leading dimension ld; the tile's rows and columns start
 * at i0 / j0 of this batch entry, whose addend starts at cdata), rounding
 * once to out's dtype.  Float rows go through the per-ISA row conversions
 * (this file is built for the baseline ISA, 4 lanes wide) in blocks of
 * ROW_BLOCK columns. */
#define ROW_BLOCK 256
static void store_ws(const gemm_plan *p, const char *ws, int64_t ld, char *out, int64_t rs,
                     int64_t cs, int64_t rows, int64_t cols, const char *cdata, int64_t i0,
                     int64_t j0) {
  const nrt_dtype t = (nrt_dtype)p->out.dtype, ct = (nrt_dtype)p->c.dtype;
  for (int64_t i = 0; i < rows; i++) {
    char *o = out + i * rs;
    if (p->cls == NK_CLASS_FLOAT) {
      const float *w = (const float *)ws + i * ld, al = (float)p->alpha.f, be = (float)p->beta.f;
      const float cb = (float)p->c_scale.f;
      if (!p->has_c && be == 0 && al == 1) {
        nk_half_pick()->out(t, o, cs, cols, w);
        continue;
      }
      const char *crow = p->has_c ? cdata + (i0 + i) * p->c.strides[1] : NULL;
      for (int64_t b = 0; b < cols; b += ROW_BLOCK) {
        const int64_t n = cols - b < ROW_BLOCK ? cols - b : ROW_BLOCK;
        float v[ROW_BLOCK], tmp[ROW_BLOCK];
        for (int64_t j = 0; j < n; j++) v[j] = al * w[b + j];
        if (crow) {
          const int64_t ccs = p->c.strides[2];
          const float *x = float_row(ct, crow + (j0 + b) * ccs, ccs, n, tmp);
          for (int64_t j = 0; j < n; j++) v[j] += cb * x[j];
        } else if (be != 0) {
          const float *x = float_row(t, o + b * cs, cs, n, tmp);
          for (int64_t j = 0; j < n; j++) v[j] += be * x[j];
        }
        nk_half_pick()->out(t, o + b * cs, cs, n, v);
      }
    } else if (p->cls == NK_CLASS_DOUBLE) {
      const double *w = (const double *)ws + i * ld;
      const char *crow = p->has_c ? cdata + (i0 + i) * p->c.strides[1] + j0 * p->c.strides[2] : NULL;
      for (int64_t j = 0; j < cols; j++, o += cs) {
        double v = p->alpha.f * w[j];
        if (crow) v += p->c_scale.f * nk_load_f64(ct, crow + j * p->c.strides[2]);
        else if (p->beta.f != 0) v += p->beta.f * nk_load_f64(t, o);
        nk_store_f64(t, o, v);
      }
    } else {
      const int64_t *w = (const int64_t *)ws + i * ld;
      const char *crow = p->has_c ? cdata + (i0 + i) * p->c.strides[1] + j0 * p->c.strides[2] : NULL;
      for (int64_t j = 0; j < cols; j++, o += cs) {
        uint64_t r = (uint64_t)p->alpha.i * (uint64_t)w[j];
        if (crow) r += (uint64_t)p->c_scale.i * (uint64_t)nk_load_i64(ct, crow + j * p->c.strides[2]);
        else if (p->beta.i != 0) r += (uint64_t)p->beta.i * (uint64_t)nk_load_i64(t, o);
        nk_store_i64(t, o, (int64_t)r);
      }
    }
  }
}

/* c (valid rows x cols of a tile, leading dimension ldc) = t + beta * c,
 * beta == 0 not reading c; t is a scratch tile already scaled by alpha. */
static void merge_tile(nk_class cls, const char *t, int nr, char *c, int64_t ldc, int64_t rows,
                       int64_t cols, const char *betap) {
  for (int64_t i = 0; i < rows; i++) {
    if (cls == NK_CLASS_FLOAT) {
      const float *s = (const float *)t + i * nr, b = *(const float *)betap;
      float *d = (float *)c + i * ldc;
      for (int64_t j = 0; j < cols; j++) d[j] = b == 0 ? s[j] : s[j] + b * d[j];
    } else if (cls == NK_CLASS_DOUBLE) {
      const double *s = (const double *)t + i * nr, b = *(const double *)betap;
      double *d = (double *)c + i * ldc;
      for (int64_t j = 0; j < cols; j++) d[j] = b == 0 ? s[j] : s[j] + b * d[j];
    } else {
      const int64_t *s = (const int64_t *)t + i * nr, b = *(const int64_t *)betap;
      int64_t *d = (int64_t *)c + i * ldc;
      for (int64_t j = 0; j < cols; j++)
        d[j] = b == 0 ? s[j] : (int64_t)((uint64_t)s[j] + (uint64_t)b * (uint64_t)d[j]);
    }
  }
}

/* dst (rows x cols of a finished tile of a direct output, leading dimension
 * ld elements) += c_scale * c over the same rows and columns; c has out's
 * dtype, which is the compute type.  Rows of c with unit stride go through
 * the ISA's axpy over the tile's rows in one call (a Linear's bias: the
 * scalar loop, built for the baseline ISA, had been 7% of a 1024x256 @
 * 256x768 addmm on Zen 3, and then a call per row 40% of a 1024x64 @
 * 64x256 one); with the usual c_scale of 1 its fused multiply-add is the
 * plain sum, so the bits are the scalar loop's. */
static void add_c_tile(const gemm_plan *p, const char *cdata, char *dst, int64_t ld, int64_t i0,
                       int64_t j0, int64_t rows, int64_t cols) {
  const int64_t rs = p->c.strides[1], cs = p->c.strides[2], es = (int64_t)p->es;
  const char *c = cdata + i0 * rs + j0 * cs;
  if (p->arch.axpy_tile && cs == es && rs % es == 0) {
    if (p->cls == NK_CLASS_FLOAT)
      ((void (*)(int64_t, int64_t, float, const float *, int64_t, float *, int64_t))p->arch.axpy_tile)(
          rows, cols, (float)p->c_scale.f, (const float *)(const void *)c, rs / es,
          (float *)(void *)dst, ld);
    else
      ((void (*)(int64_t, int64_t, double, const double *, int64_t, double *, int64_t))
           p->arch.axpy_tile)(rows, cols, p->c_scale.f, (const double *)(const void *)c, rs / es,
                              (double *)(void *)dst, ld);
    return;
  }
  for (int64_t i = 0; i < rows; i++, c += rs) {
    if (p->cls == NK_CLASS_FLOAT) {
      float *d = (float *)(void *)dst + i * ld;
      const float cb = (float)p->c_scale.f;
      for (int64_t j = 0; j < cols; j++) d[j] += cb * nk_read_f32(c + j * cs);
    } else {
      double *d = (double *)(void *)dst + i * ld;
      for (int64_t j = 0; j < cols; j++) d[j] += p->c_scale.f * nk_read_f64(c + j * cs);
    }
  }
}

/* ------------------------------------------------------------ buffers */

typedef struct gemm_buffers {
  char *b_panel;  /* KC x NC, shared */
  char *ws;       /* M x NC compute-type workspace (indirect outputs), or
                   * MR x NC per worker (gemm_plan.rows_first) */
  char *a_blocks; /* one MC x KC block per worker */
  size_t a_stride, ws_stride; /* per worker */
  int workers;
} gemm_buffers;

typedef struct tls_cache {
  char *mem;
  size_t bytes;
} tls_cache;
static _Thread_local tls_cache cache;

/* `bytes` of 64-byte aligned scratch owned by the calling thread (kept for
 * its next call); NULL when out of memory. */
static char *scratch(size_t bytes) {
  if (bytes <= cache.bytes) return cache.mem;
  free(cache.mem);
  cache.bytes = 0;
  cache.mem = aligned_alloc(64, round_up((int64_t)bytes, 4096));
  if (cache.mem) cache.bytes = (size_t)round_up((int64_t)bytes, 4096);
  return cache.mem;
}

/* ------------------------------------------------------------ the loops */

typedef struct panel {
  const gemm_plan *p;
  const gemm_buffers *buf;
  matrix a, bt;      /* A as (m, k), B transposed as (n, k) */
  char *out;         /* this batch entry's output */
  const char *cdata; /* and its addend (has_c) */
  int64_t j0, nc;    /* the panel's columns */
  int64_t p0, kc;    /* the k block */
  int64_t kp;        /* its packed length: kc, or its pairs (gemm_plan.pairs) */
  int last;          /* the last k block: indirect outputs are stored now */
  int64_t mc, n_ic, jr_chunk, n_jr_chunks;
} panel;

/* The entry of B's row table for k index p0 (a k block's start, even):
 * rows, or their pairs (b_pair_rows). */
static int64_t row_of(const gemm_plan *p, int64_t p0) { return p->ind.b_pair_rows ? p0 / 2 : p0; }

static void pack_b_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const panel *pn = arg;
  const gemm_plan *p = pn->p;
  const int nr = p->arch.nr;
  const int64_t c0 = begin * nr, c1 = end * nr < pn->nc ? end * nr : pn->nc;
  pack(p, &pn->bt, pn->j0 + c0, c1 - c0, pn->p0, pn->kc, nr,
       pn->buf->b_panel + (size_t)(c0 * pn->kp) * p->es);
}

/* An indirect output (16-bit, integer, odd strides) whose product is one k
 * block: a group of row slivers at a time (row_group x MR rows of the
 * item's columns jb..je), computed into the worker's buffer (L2) and
 * stored at once.  Through the M x NC workspace, a 4096x768 @ 768x768
 * bfloat16 product wrote 12 MB of float32 to memory and read it back to
 * round it (a third of its time on AMX).  Inside a group the k block is
 * split in kp_sub steps, slivers outer and rows inner, so each B
 * sub-sliver is reused from L1 by the group's A slivers: an AMX tile step
 * reads 4 KiB, more than L2 delivers if neither operand stays in L1
 * (about 1400 GFLOP/s per core with both from L2, 2100 with B in L1).
 * AMX: kp_sub 128 and groups of 2 slivers were the best of 64..384 and
 * 1..8 on a 4096x768 @ 768x768 product (10% over the whole k block).
 * The partial sums go through float32 memory exactly, so the values and
 * their single rounding are the unsplit ones. */
static void rows_first(const panel *pn, const char *a_pack, int worker, int64_t i0, int64_t rows,
                       int64_t jb, int64_t je) {
  const gemm_plan *p = pn->p;
  const int mr = p->arch.mr, nr = p->arch.nr;
  const int64_t group = (int64_t)mr * p->arch.row_group;
  const int64_t sub = p->arch.kp_sub ? p->arch.kp_sub : pn->kp;
  const int64_t es = (int64_t)p->es, ld = round_up(je - jb, nr);
  char *rb = pn->buf->ws + (size_t)worker * pn->buf->ws_stride;
  for (int64_t ig = 0; ig < rows; ig += group) {
    const int64_t gr = rows - ig < group ? rows - ig : group;
    for (int64_t q0 = 0; q0 < pn->kp; q0 += sub) {
      const int64_t kq = pn->kp - q0 < sub ? pn->kp - q0 : sub;
      const char *beta = q0 ? p->one : p->zero;
      for (int64_t jr = jb; jr < je; jr += nr)
        for (int64_t ir = ig; ir < ig + gr; ir += mr) {
          const char *as = a_pack + (ir * pn->kp + q0 * mr) * es;
          char *dst = rb + ((ir - ig) * ld + jr - jb) * es;
          if (p->unpacked_b)
            p->arch.ukr_rows(kq, as, pn->bt.data + (pn->j0 + jr) * es, pn->bt.coff + row_of(p, pn->p0) + q0,
                             dst, ld, p->one, beta);
          else
            p->arch.ukr(kq, as, pn->buf->b_panel + (jr * pn->kp + q0 * nr) * es, dst, ld, p->one,
                        beta);
        }
    }
    char *o = pn->out + (i0 + ig) * p->out.strides[1] + (pn->j0 + jb) * p->out.strides[2];
    store_ws(p, rb, ld, o, p->out.strides[1], p->out.strides[2], gr, je - jb, pn->cdata, i0 + ig,
             pn->j0 + jb);
  }
}

/* Rows [*i0, *i0 + *rows) of ic block ic: the m rows' slivers split
 * evenly over the n_ic blocks (sizes differ by at most one sliver). */
static void ic_block(const panel *pn, int64_t ic, int64_t *i0, int64_t *rows) {
  const int64_t mr = pn->p->arch.mr, slivers = (pn->p->m + mr - 1) / mr;
  const int64_t s0 = ic * slivers / pn->n_ic, s1 = (ic + 1) * slivers / pn->n_ic;
  const int64_t i1 = s1 * mr < pn->p->m ? s1 * mr : pn->p->m;
  *i0 = s0 * mr;
  *rows = i1 - *i0;
}

/* Work items [begin, end): item = ic * n_jr_chunks + chunk. */
static void compute_range(void *arg, int64_t begin, int64_t end, int worker) {
  const panel *pn = arg;
  const gemm_plan *p = pn->p;
  const int mr = p->arch.mr, nr = p->arch.nr;
  const size_t es = p->es;
  char *a_pack = pn->buf->a_blocks + (size_t)worker * pn->buf->a_stride;
  _Alignas(64) char tile[16 * 32 * 8];
  int64_t packed_ic = -1;
  if (p->arch.begin) p->arch.begin();
  for (int64_t item = begin; item < end; item++) {
    const int64_t ic = item / pn->n_jr_chunks, chunk = item % pn->n_jr_chunks;
    int64_t i0, rows;
    ic_block(pn, ic, &i0, &rows);
    if (ic != packed_ic) {
      if (p->arch.a_tiles)
        pack_pairs_tiles(&pn->a, i0, rows, pn->p0, pn->kc, mr, pn->kp, (uint32_t *)a_pack);
      else
        pack(p, &pn->a, i0, rows, pn->p0, pn->kc, mr, a_pack);
      packed_ic = ic;
    }
    const int64_t jb = chunk * pn->jr_chunk;
    const int64_t je = jb + pn->jr_chunk < pn->nc ? jb + pn->jr_chunk : pn->nc;
    if (p->rows_first) {
      rows_first(pn, a_pack, worker, i0, rows, jb, je);
      continue;
    }
    /* Where C goes: the output itself, or the workspace (row i, panel column j). */
    char *c;
    int64_t ldc;
    const char *alpha, *beta;
    if (p->direct) {
      ldc = p->out.strides[1] / (int64_t)es;
      c = pn->out + i0 * p->out.strides[1] + (pn->j0 + jb) * (int64_t)es;
      alpha = p->alpha_c;
      beta = pn->p0 == 0 ? p->beta_c : p->one;
    } else {
      ldc = pn->nc;
      c = pn->buf->ws + (size_t)(i0 * pn->nc + jb) * es;
      alpha = p->one;
      beta = pn->p0 == 0 ? p->zero : p->one;
    }
    for (int64_t jr = jb; jr < je; jr += nr) {
      const int64_t cols = je - jr < nr ? je - jr : nr;
      const char *bs = pn->buf->b_panel + (size_t)(jr * pn->kp) * es;
      /* unpacked: the sliver's k steps in place (matrix bt's rows adjacent) */
      const char *bbase = pn->bt.data + (pn->j0 + jr) * (int64_t)es;
      const int64_t *boff = p->unpacked_b ? pn->bt.coff + row_of(p, pn->p0) : NULL;
      char *cj = c + (jr - jb) * (int64_t)es;
      for (int64_t ir = 0; ir < rows; ir += mr) {
        const int64_t r = rows - ir < mr ? rows - ir : mr;
        const char *as = a_pack + (size_t)(ir * pn->kp) * es;
        char *ct = cj + ir * ldc * (int64_t)es;
        const int full = r == mr && cols == nr;
        char *dst = full ? ct : tile;
        const int64_t ld = full ? ldc : nr;
        const char *bt = full ? beta : p->zero;
        if (boff) p->arch.ukr_rows(pn->kp, as, bbase, boff, dst, ld, alpha, bt);
        else p->arch.ukr(pn->kp, as, bs, dst, ld, alpha, bt);
        if (!full) merge_tile(p->cls, tile, nr, ct, ldc, r, cols, beta);
        if (p->direct && p->has_c && pn->last)
          add_c_tile(p, pn->cdata, ct, ldc, i0 + ir, pn->j0 + jr, r, cols);
      }
    }
    if (!p->direct && pn->last) {
      char *o = pn->out + i0 * p->out.strides[1] + (pn->j0 + jb) * p->out.strides[2];
      store_ws(p, c, pn->nc, o, p->out.strides[1], p->out.strides[2], rows, je - jb, pn->cdata, i0,
               pn->j0 + jb);
    }
  }
  if (p->arch.end) p->arch.end();
}

#define MIN_BLOCK_ROWS 96 /* the shortest row block that gemm_one splits m into */

/* One batch entry, all loops; `parallel` splits packing and the ic/jr work
 * over the pool (two regions per panel), otherwise everything runs here
 * with worker `worker`'s A buffer. */
static void gemm_one(const gemm_plan *p, const gemm_buffers *buf, int64_t bi, int parallel,
                     int worker) {
  panel pn;
  pn.p = p;
  pn.buf = buf;
  pn.a = (matrix){(const char *)p->a.data + bi * p->a.strides[0], (nrt_dtype)p->a.dtype,
                  p->a.strides[1], p->a.strides[2], NULL, NULL};
  pn.bt = (matrix){(const char *)p->b.data + bi * p->b.strides[0], (nrt_dtype)p->b.dtype,
                   p->b.strides[2], p->b.strides[1], p->ind.b_cols, p->ind.b_rows};
  pn.out = (char *)p->out.data + bi * p->out.strides[0];
  pn.cdata = p->has_c ? (const char *)p->c.data + bi * p->c.strides[0] : NULL;
  const int mr = p->arch.mr, nr = p->arch.nr;
  const int threads = parallel ? buf->workers : 1;
  /* MC: the cache's, but small enough to give every thread ~4 blocks of
   * rows, each claimed whole (an item is one ic block's row of jr chunks
   * when there are enough blocks): with one block per thread (mc = m /
   * threads), the jr split had both workers pack the same A block for
   * their halves of its columns -- A packed twice, which cost 20-25% of a
   * 1024x256 @ 256x256 product on 2 threads (Xeon, AVX-512).  Blocks stay
   * at least MIN_BLOCK_ROWS tall: each B sliver fetched from L3 serves one
   * block, so the B traffic per flop goes as 1 / rows, whatever the
   * micro-kernel's MR (Xeon, MR 12: 512^3 lost 5% with 72 rows; Zen 3,
   * MR 6, where the rule had been 8 tiles = 48 rows: 96 rows gained 2-4%
   * at 384^3..512^3 and 12% at 640^3, paired).  Below that,
   * narrow products (B's columns in at most two slivers per thread) still
   * split m alone into blocks of 2 tiles, and the rest split m by thread
   * and n by jr chunks. */
  pn.mc = p->mc;
  if (threads > 1) {
    const int64_t share = round_up((p->m + threads - 1) / threads, mr);
    const int64_t quarter = round_up((p->m + 4 * threads - 1) / (4 * threads), mr);
    const int narrow = round_up(p->n, nr) <= 2 * threads * nr;
    if (quarter < pn.mc && (quarter >= MIN_BLOCK_ROWS || (narrow && p->m >= 8 * threads * mr)))
      pn.mc = quarter;
    else if (share < pn.mc)
      pn.mc = share < 4 * mr && p->m > 4 * mr && 4 * mr <= p->mc ? 4 * mr : share;
  }
  /* Blocks: a multiple of the threads, so that whole-row items share out
   * evenly (ic_block evens their sizes): 2048 rows in 17 blocks of 126
   * rows left one thread a block's work after the other (2048x512 @
   * 512x1376 float32 on 2 threads: 176 -> 186 GFLOP/s in 18; 1024^3 in 10
   * rather than 9: 159 -> 171; 256^3 in 4 rather than 126 + 126 + 4 rows:
   * 112 -> 130). */
  pn.n_ic = (p->m + pn.mc - 1) / pn.mc;
  if (threads > 1 && pn.n_ic > threads && pn.n_ic % threads)
    pn.n_ic += threads - pn.n_ic % threads;
  if (pn.n_ic > (p->m + mr - 1) / mr) pn.n_ic = (p->m + mr - 1) / mr; /* no empty block */
  for (pn.j0 = 0; pn.j0 < p->n; pn.j0 += p->nc) {
    pn.nc = p->n - pn.j0 < p->nc ? p->n - pn.j0 : p->nc;
    const int64_t slivers = (pn.nc + nr - 1) / nr;
    /* jr chunks: enough items for ~4 per thread when ic blocks are few. */
    int64_t chunks = 1;
    if (threads > 1 && pn.n_ic < 4 * threads) chunks = (4 * threads + pn.n_ic - 1) / pn.n_ic;
    if (chunks > slivers) chunks = slivers;
    pn.jr_chunk = (slivers + chunks - 1) / chunks * nr;
    pn.n_jr_chunks = (pn.nc + pn.jr_chunk - 1) / pn.jr_chunk;
    for (pn.p0 = 0; pn.p0 < p->k; pn.p0 += p->kc) {
      pn.kc = p->k - pn.p0 < p->kc ? p->k - pn.p0 : p->kc;
      pn.kp = packed_k(p, pn.kc);
      pn.last = pn.p0 + pn.kc >= p->k;
      const int64_t items = pn.n_ic * pn.n_jr_chunks;
      if (parallel) {
        if (!p->unpacked_b) nk_parallel_for(slivers, 4, pack_b_range, &pn);
        /* a claim takes half an ic row of items: a worker re-packs the A
         * block whenever its next item is another ic's, and single-item
         * claims alternated ic between the workers (A packed once per
         * item), while half rows still leave chunks to steal; an item
         * that is a whole row is claimed one at a time (even shares) */
        if (pn.n_jr_chunks > 1) nk_parallel_for(items, pn.n_jr_chunks / 2, compute_range, &pn);
        else nk_parallel_for_each(items, compute_range, &pn);
      } else {
        if (!p->unpacked_b) pack_b_range(&pn, 0, slivers, worker);
        compute_range(&pn, 0, items, worker);
      }
    }
  }
}

/* ------------------------------------------------------------ matrix-vector */

/* out[i] = alpha * sum_p x[i, p] * v[p] + beta * out[i] for i in rows,
 * float32/float64 with x's k stride one element (dot form) or x's row
 * stride one element (axpy form).  m == 1 products come here transposed. */
typedef struct gemv {
  const gemm_plan *p;
  const char *x, *v, *out;
  int64_t rows, k, xrs, xcs, vs, os;
  const char *c; /* the addend's entries, cstride apart (has_c) */
  int64_t cstride;
  int dot_form;
  char *vbuf; /* v made contiguous (dot form), or NULL if it already is */
} gemv;

#define NK_GEMV_RANGE(name, T, LOADV)                                                        \
  static void name(const gemv *g, int64_t begin, int64_t end) {                             \
    const gemm_plan *p = g->p;                                                              \
    const T alpha = (T)p->alpha.f, beta = (T)p->beta.f, cb = (T)p->c_scale.f;               \
    const T *v = g->vbuf ? (const T *)g->vbuf : (const T *)g->v;                            \
    if (g->dot_form) {                                                                      \
      T (*dot)(int64_t, const T *, const T *) = (T(*)(int64_t, const T *, const T *))p->arch.dot; \
      for (int64_t i = begin; i < end; i++) {                                               \
        T s = alpha * dot(g->k, (const T *)(g->x + i * g->xrs), v);                          \
        T *o = (T *)(g->out + i * g->os);                                                   \
        if (g->c) s += cb * *(const T *)(const void *)(g->c + i * g->cstride);              \
        *o = beta == 0 ? s : s + beta * *o;                                                 \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    void (*axpy)(int64_t, T, const T *, T *) = (void (*)(int64_t, T, const T *, T *))p->arch.axpy; \
    T acc[256];                                                                             \
    for (int64_t i0 = begin; i0 < end; i0 += 256) {                                         \
      const int64_t n = end - i0 < 256 ? end - i0 : 256;                                    \
      memset(acc, 0, sizeof acc);                                                           \
      for (int64_t q = 0; q < g->k; q++) {                                                  \
        T vq;                                                                               \
        memcpy(&vq, g->v + q * g->vs, sizeof vq);                                           \
        axpy(n, vq, (const T *)(g->x + i0 * g->xrs + q * g->xcs), acc);                      \
      }                                                                                     \
      for (int64_t i = 0; i < n; i++) {                                                     \
        T *o = (T *)(g->out + (i0 + i) * g->os);                                            \
        T s = alpha * acc[i];                                                               \
        if (g->c) s += cb * *(const T *)(const void *)(g->c + (i0 + i) * g->cstride);       \
        *o = beta == 0 ? s : s + beta * *o;                                                 \
      }                                                                                     \
    }                                                                                       \
  }
NK_GEMV_RANGE(gemv_f32, float, 0)
NK_GEMV_RANGE(gemv_f64, double, 0)

static void gemv_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const gemv *g = arg;
  if (g->p->cls == NK_CLASS_FLOAT)
    gemv_f32(g, begin, end);
  else
    gemv_f64(g, begin, end);
}

/* 16-bit operands (bfloat16 or float16 a and b, any float out): dot
 * products of x's rows, which are contiguous along k, with v, summed in
 * float32 (gemm_dot16.h); each result is scaled, added to, and rounded
 * once, as store_ws does for the packed path. */
static float dot16_portable_bf16(int64_t n, const uint16_t *x, const uint16_t *y) {
  float s = 0;
  for (int64_t p = 0; p < n; p++) s += nk_bf16_to_f32(x[p]) * nk_bf16_to_f32(y[p]);
  return s;
}
static float dot16_portable_f16(int64_t n, const uint16_t *x, const uint16_t *y) {
  float s = 0;
  for (int64_t p = 0; p < n; p++) s += nk_f16_to_f32(x[p]) * nk_f16_to_f32(y[p]);
  return s;
}

static nk_gemm_dot16 pick_dot16(nrt_dtype t) {
  static const nk_gemm_dot16 bf16[] = {dot16_portable_bf16, nk_gemm_dot16_avx2_bf16,
                                       nk_gemm_dot16_avx512_bf16},
                             f16[] = {dot16_portable_f16, nk_gemm_dot16_avx2_f16,
                                      nk_gemm_dot16_avx512_f16};
  return (t == NRT_BFLOAT16 ? bf16 : f16)[nk_cpu_isa()];
}

static void gemv16_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const gemv *g = arg;
  const gemm_plan *p = g->p;
  const nk_gemm_dot16 dot = pick_dot16((nrt_dtype)p->a.dtype);
  const nrt_dtype t = (nrt_dtype)p->out.dtype;
  const float alpha = (float)p->alpha.f, beta = (float)p->beta.f, cb = (float)p->c_scale.f;
  const uint16_t *v = (const uint16_t *)(g->vbuf ? g->vbuf : g->v);
  for (int64_t i = begin; i < end; i++) {
    float s = alpha * dot(g->k, (const uint16_t *)(const void *)(g->x + i * g->xrs), v);
    char *o = (char *)g->out + i * g->os;
    if (g->c) s += cb * nk_load_f32((nrt_dtype)p->c.dtype, g->c + i * g->cstride);
    else if (beta != 0) s += beta * nk_load_f32(t, o);
    nk_store_f32(t, o, s);
  }
}

/* Runs the product as matrix-vector passes if its shape and layout allow;
 * returns 1 if it did. */
static int try_gemv(const gemm_plan *p) {
  const int half = (p->a.dtype == NRT_BFLOAT16 || p->a.dtype == NRT_FLOAT16) &&
                   p->b.dtype == p->a.dtype && p->cls == NK_CLASS_FLOAT;
  if (p->cls != NK_CLASS_FLOAT && p->cls != NK_CLASS_DOUBLE) return 0;
  if (p->ind.b_rows || p->ind.b_cols) return 0;
  if (half) {
    if ((p->n != 1 && p->m != 1) || p->k == 0) return 0;
  } else {
    if (p->a.dtype != p->out.dtype) return 0;
    if (!p->direct || (p->n != 1 && p->m != 1) || p->k == 0) return 0;
  }
  const int64_t es = half ? 2 : (int64_t)p->es; /* bytes of a and b */
  /* As rows x k matrix x times vector v into out (stride os). */
  int64_t rows, xrs, xcs, vs, os, xb, vb, cst;
  const char *xd, *vd;
  if (p->n == 1) {
    rows = p->m;
    xd = p->a.data, xb = p->a.strides[0], xrs = p->a.strides[1], xcs = p->a.strides[2];
    vd = p->b.data, vb = p->b.strides[0], vs = p->b.strides[1];
    os = p->out.strides[1];
    cst = p->c.strides[1];
  } else {
    rows = p->n;
    xd = p->b.data, xb = p->b.strides[0], xrs = p->b.strides[2], xcs = p->b.strides[1];
    vd = p->a.data, vb = p->a.strides[0], vs = p->a.strides[2];
    os = p->out.strides[2];
    cst = p->c.strides[2];
  }
  const int dot_form = xcs == es;
  if (!dot_form && !(xrs == es && rows > 1 && !half)) return 0;
  char *vbuf = NULL;
  if (dot_form && vs != es) {
    vbuf = scratch((size_t)(p->k * es));
    if (!vbuf) return 0;
  }
  for (int64_t bi = 0; bi < p->batch; bi++) {
    gemv g = {.p = p, .x = xd + bi * xb, .v = vd + bi * vb,
              .out = (const char *)p->out.data + bi * p->out.strides[0], .rows = rows, .k = p->k,
              .xrs = xrs, .xcs = xcs, .vs = vs, .os = os, .dot_form = dot_form, .vbuf = vbuf,
              .c = p->has_c ? (const char *)p->c.data + bi * p->c.strides[0] : NULL, .cstride = cst};
    if (vbuf)
      for (int64_t q = 0; q < p->k; q++) memcpy(vbuf + q * es, g.v + q * vs, (size_t)es);
    const int64_t grain = dot_form ? 1 + (1 << 16) / p->k : 256 * (1 + (1 << 16) / (256 * p->k));
    nk_parallel_for(rows, grain, half ? gemv16_range : gemv_range, &g);
  }
  return 1;
}

/* ------------------------------------------------------------ entry */

static int plan_gemm(nrt_exec_ctx *ctx, const nrt_operand *ops, nk_scalar alpha, nk_scalar beta,
                     gemm_plan *p) {
  for (int i = 0; i < 3; i++) {
    if (ops[i].ndim != 3) {
      nrt_exec_fail(ctx, "gemm: operand %d must be 3-d (batch, rows, cols), got %d-d", i,
                    (int)ops[i].ndim);
      return -1;
    }
  }
  /* One dtype, or 16-bit float a and b with a float32 out (cuBLAS GemmEx
   * with a 32F C): the product accumulates in float32 either way, and a
   * float32 out is updated in place instead of through the workspace. */
  const int mixed = ops[1].dtype == ops[2].dtype && ops[0].dtype == NRT_FLOAT32 &&
                    (ops[1].dtype == NRT_BFLOAT16 || ops[1].dtype == NRT_FLOAT16);
  for (int i = 1; i < 3 && !mixed; i++)
    if (ops[i].dtype != ops[0].dtype) {
      nrt_exec_fail(ctx, "gemm: operands must share one dtype, or be bfloat16/float16 a and b "
                    "with a float32 out (%d vs %d)", (int)ops[i].dtype, (int)ops[0].dtype);
      return -1;
    }
  memset(p, 0, sizeof *p);
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
  p->pairs = ops[1].dtype == NRT_BFLOAT16 && has_bf16_dot(); /* a and b: out may be float32 */
  p->arch = pick_arch(p->cls, p->pairs, p->m);
  p->es = p->cls == NK_CLASS_FLOAT ? sizeof(float) : 8;
  p->alpha = alpha;
  p->beta = beta;
  set_compute(p->cls, p->alpha_c, alpha);
  set_compute(p->cls, p->beta_c, beta);
  set_compute(p->cls, p->one, (nk_scalar){1.0, 1});
  set_compute(p->cls, p->zero, (nk_scalar){0.0, 0});
  const int compute_dtype = (p->cls == NK_CLASS_FLOAT && t == NRT_FLOAT32) ||
                            (p->cls == NK_CLASS_DOUBLE && t == NRT_FLOAT64);
  p->direct = compute_dtype && p->out.strides[2] == (int64_t)p->es &&
              p->out.strides[1] % (int64_t)p->es == 0;

  const cache_info ci = caches();
  const int64_t mr = p->arch.mr, nr = p->arch.nr, es = (int64_t)p->es;
  /* KC: the B sliver (KC x NR) takes twice L1.  Measured (Zen 4, 1024^3
   * float32): a sliver in L1 (KC 192) leaves each product 5-6 passes of
   * read-modify-write over C, which cost more than streaming the B sliver
   * from L2 (the micro-kernel holds 96% of peak with both streaming);
   * KC 512 was the best of 128..1024.  Packed in pairs, the same bytes hold
   * twice the k. */
  const int64_t kper = p->pairs ? 2 : 1;
  int64_t kc = ci.kc > 0 ? ci.kc : kper * (ci.l1 * 2 / (nr * es)) / 8 * 8;
  kc = ci.kc > 0 ? clamp64(kc, 8, 4096) : clamp64(kc, 64, 512 * kper);
  /* Balance the k blocks: same count, even sizes (a function of k only). */
  const int64_t kblocks = (p->k + kc - 1) / kc;
  if (kblocks > 1) kc = round_up((p->k + kblocks - 1) / kblocks, 8);
  p->kc = kc;
  const int64_t row_bytes = (kc + kper - 1) / kper * es; /* a packed row of a k block */
  int64_t mc = ci.mc > 0 ? ci.mc : ci.l2 / 2 / row_bytes;
  p->mc = clamp64(mc / mr * mr, mr, 4096 / mr * mr);
  int64_t nc = ci.nc > 0 ? ci.nc : ci.l3 / 4 / row_bytes;
  p->nc = clamp64(nc / nr * nr, nr, 16384);
  if (p->nc > round_up(p->n, nr)) p->nc = round_up(p->n, nr);
  return 0;
}

/* The addend c of out <- alpha * a @ b + beta * c: checked against out,
 * then beta moves from out to c (out is written, not read).  beta == 0
 * ignores c, as it would ignore out. */
static int plan_addend(nrt_exec_ctx *ctx, const nrt_operand *c, gemm_plan *p) {
  if (c->ndim != 3 || c->dtype != p->out.dtype) {
    nrt_exec_fail(ctx, "gemm: the addend must be 3-d with out's dtype");
    return -1;
  }
  for (int d = 0; d < 3; d++)
    if (c->sizes[d] != p->out.sizes[d]) {
      nrt_exec_fail(ctx, "gemm: the addend's shape (%lld, %lld, %lld) is not out's",
                    (long long)c->sizes[0], (long long)c->sizes[1], (long long)c->sizes[2]);
      return -1;
    }
  const int zero = p->cls == NK_CLASS_FLOAT || p->cls == NK_CLASS_DOUBLE ? p->beta.f == 0 : p->beta.i == 0;
  if (zero) return 0;
  p->has_c = 1;
  p->c = *c;
  p->c_scale = p->beta;
  p->beta = (nk_scalar){0.0, 0};
  set_compute(p->cls, p->beta_c, p->beta);
  return 0;
}

/* A full addend (out <- alpha * a @ b + beta * c, c a matrix of its own)
 * is written to out first, scaled, and the product then accumulates onto
 * it (beta 1).  Added tile by tile after the last k block instead, each
 * tile's rows of c came from memory one cold line at a time: addmm of a
 * residual (2048x1376 @ 1376x512 + a 2048x512 c) took 5% longer than the
 * bare product.  A broadcast bias (rows of stride 0) stays in the tiles:
 * its one row is in cache.  The sum's order becomes beta * c first, then
 * the k blocks. */
static int addend_first(const gemm_plan *p) {
  /* c never shares out's bytes: the kernel's contract (neuron_kernels.h) */
  return p->has_c && p->direct && p->c.strides[1] != 0 && p->c.strides[2] == (int64_t)p->es &&
         (p->cls == NK_CLASS_FLOAT || p->cls == NK_CLASS_DOUBLE);
}

static void addend_rows(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  const gemm_plan *p = arg;
  const size_t row = (size_t)p->n * p->es;
  for (int64_t r = begin; r < end; r++) {
    const int64_t bi = r / p->m, i = r % p->m;
    char *o = (char *)p->out.data + bi * p->out.strides[0] + i * p->out.strides[1];
    const char *c = (const char *)p->c.data + bi * p->c.strides[0] + i * p->c.strides[1];
    if (p->c_scale.f == 1.0) {
      memcpy(o, c, row);
    } else if (p->cls == NK_CLASS_FLOAT) {
      const float cb = (float)p->c_scale.f;
      for (int64_t j = 0; j < p->n; j++) ((float *)(void *)o)[j] = cb * ((const float *)(const void *)c)[j];
    } else {
      for (int64_t j = 0; j < p->n; j++)
        ((double *)(void *)o)[j] = p->c_scale.f * ((const double *)(const void *)c)[j];
    }
  }
}

/* out = beta * out, or beta * c (k == 0: the product is empty). */
static void scale_out(const gemm_plan *p) {
  const nrt_dtype t = (nrt_dtype)p->out.dtype;
  for (int64_t bi = 0; bi < p->batch; bi++)
    for (int64_t i = 0; i < p->m; i++)
      for (int64_t j = 0; j < p->n; j++) {
        char *o = (char *)p->out.data + bi * p->out.strides[0] + i * p->out.strides[1] +
                  j * p->out.strides[2];
        if (p->has_c) {
          const char *c = (const char *)p->c.data + bi * p->c.strides[0] + i * p->c.strides[1] +
                          j * p->c.strides[2];
          if (p->cls == NK_CLASS_FLOAT) nk_store_f32(t, o, (float)p->c_scale.f * nk_load_f32(t, c));
          else if (p->cls == NK_CLASS_DOUBLE) nk_store_f64(t, o, p->c_scale.f * nk_load_f64(t, c));
          else nk_store_i64(t, o, (int64_t)((uint64_t)p->c_scale.i * (uint64_t)nk_load_i64(t, c)));
          continue;
        }
        if (p->cls == NK_CLASS_FLOAT)
          nk_store_f32(t, o, p->beta.f == 0 ? 0.0f : (float)p->beta.f * nk_load_f32(t, o));
        else if (p->cls == NK_CLASS_DOUBLE)
          nk_store_f64(t, o, p->beta.f == 0 ? 0.0 : p->beta.f * nk_load_f64(t, o));
        else
          nk_store_i64(t, o, p->beta.i == 0 ? 0 : (int64_t)((uint64_t)p->beta.i *
                                                           (uint64_t)nk_load_i64(t, o)));
      }
}

typedef struct batch_run {
  const gemm_plan *p;
  const gemm_buffers *bufs; /* one set per worker */
} batch_run;

static void batch_range(void *arg, int64_t begin, int64_t end, int worker) {
  const batch_run *r = arg;
  for (int64_t bi = begin; bi < end; bi++) gemm_one(r->p, &r->bufs[worker], bi, 0, 0);
}

int nk_gemm_bf16_dot(void) { return has_bf16_dot(); }

int nk_gemm_pair_rows(void) { return has_bf16_dot() && !nk_cpu_has_amx_bf16(); }

static int gemm_run(nrt_exec_ctx *ctx, const nrt_operand ops[3], const nrt_operand *c,
                    nk_scalar alpha, nk_scalar beta, const nk_gemm_indirect *ind);

int nk_gemm_operands(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha, nk_scalar beta) {
  return gemm_run(ctx, ops, NULL, alpha, beta, NULL);
}

int nk_gemm_operands_indirect(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha,
                              nk_scalar beta, const nk_gemm_indirect *ind) {
  return gemm_run(ctx, ops, NULL, alpha, beta, ind);
}

/* Whether the rows kernels can read B in place (an offset per k row):
 * they read the compute type, so float32/float64 B of out's dtype with
 * unit column stride, and few rows (each row tile re-reads B; see the
 * indirect case in gemm_run). */
static int b_readable_in_place(const gemm_plan *p) {
  const int float_b = p->b.dtype == NRT_FLOAT32 || p->b.dtype == NRT_FLOAT64;
  return p->arch.ukr_rows && !p->pairs && float_b && p->b.dtype == p->out.dtype &&
         p->b.strides[2] == (int64_t)p->es && p->m <= NK_GEMM_UNPACKED_MAX_ROWS;
}

/* Whether a plain (no offset tables) product reads B in place too, through
 * a table of its row offsets: B small enough to stay in L2 across the row
 * tiles' re-reads, one k block, and whole slivers only (the rows kernels
 * read NR columns: an edge sliver would read past a user's tensor).
 * Measured at AVX-512 (Zen 4: 128^3 0.8 -> 1.0x torch CPU, when packing B
 * went element by element).  At AVX2 (Zen 3, 16-wide slivers, packing by
 * fixed-size copies) a packed B was faster from 128^3 (2 threads: 34.5 ->
 * 31.6 us; 256^3 227 -> 222 us; 1 thread 57 -> 53 us): a sliver read in
 * place is k lines a power-of-two stride apart, which share a few L1
 * sets and come from L2 on every row tile.  So at AVX2 only a B within
 * half of L1 is read in place (64^3: 7.85 -> 7.50 us). */
static int small_b(const gemm_plan *p) {
  const int64_t bytes = p->k * p->n * (int64_t)p->es, l1_share = caches().l1 / 2;
  if (nk_cpu_isa() < NK_ISA_AVX512 && bytes > l1_share) return 0;
  return p->k <= p->kc && bytes <= caches().l2 / 2;
}

/* Or few rows, whatever B's size.  Packing B costs a pass over K x N for
 * every M rows of work, a quarter of a 64 x 576 @ 576 x 3136 product on
 * one core (the shape of a 64->64 3x3 convolution at 56x56, and of 1x1
 * convolutions and linear layers of few rows); read in place, each k
 * step's sliver row comes from L2 (once per row tile).  That holds while a
 * sliver's k rows spread over L2's sets: rows a multiple of 2 KiB apart
 * share 1/32 of them or fewer and come from L3 (96 x 512 @ 512 x 2048 in
 * place: 165 -> 121 GFLOP/s).  Measured on Zen 3 (AVX2, 2 threads,
 * paired): m 64: 143-153 -> 165-169 GFLOP/s; 96: 165 -> 177; 128: 161-164
 * -> 165-177; 8 x 1024 @ 1024 x 4112: 56 -> 68.  From 192 rows packing
 * costs little and the two were level, and with a short k in place lost
 * (120 x 120 @ 120 x 1920: 165 -> 161, one thread 90 -> 82; 256 x 64 @
 * 64 x 3136: 170 -> 158). */
#define UNPACKED_MAX_ROWS 128
#define UNPACKED_MIN_K 256
static int few_rows(const gemm_plan *p) {
  return p->m <= UNPACKED_MAX_ROWS && p->k >= UNPACKED_MIN_K && p->b.strides[1] % 2048 != 0;
}

static int small_unpacked(const gemm_plan *p) {
  return b_readable_in_place(p) && p->n % p->arch.nr == 0 && (small_b(p) || few_rows(p));
}

/* The operands with rows and columns exchanged: (batch, cols, rows). */
static nrt_operand transposed(nrt_operand x) {
  const int64_t s = x.sizes[1], st = x.strides[1];
  x.sizes[1] = x.sizes[2];
  x.strides[1] = x.strides[2];
  x.sizes[2] = s;
  x.strides[2] = st;
  return x;
}

/* Whether the product is better solved transposed, out^T = b^T @ a^T: the
 * micro-kernel computes whole MR x NR tiles (NR = 32 lanes at AVX-512), so
 * a product of few columns pays for the padding of its last sliver.  A
 * late ResNet layer's forward, 512 channels x 98 positions (2 samples of
 * 7x7), computed 128 columns for 98 (120 GFLOP/s, the micro-kernel itself
 * at peak); transposed, 98 rows pad to 108 and 512 columns to none (150).
 * Taken when the padded tile area drops by 5%: the transposed output
 * is no longer row-major, so it goes through the workspace (one more pass
 * over out, small beside a product deep enough to pay).  Each element
 * still sums the same products in the same k blocks (the block size
 * depends on NR, the same in both) and, with alpha 1 and beta 0, the
 * workspace stores the sum the direct update would leave: the bits do not
 * change.  So plain products only: alpha 1, beta 0, no offset tables, no
 * addend, one batch entry, no matrix-vector shapes.
 * TORCHNEURON_GEMM_TRANSPOSE=0 / 1 never / always transposes (tests). */
static int transposed_pays(const nrt_operand ops[3]) {
  const char *env = getenv("TORCHNEURON_GEMM_TRANSPOSE");
  if (env && *env) return env[0] != '0';
  const int64_t m = ops[0].sizes[1], n = ops[0].sizes[2], k = ops[1].sizes[2];
  if (m < 16 || n < 16 || k < 64) return 0;
  const nk_class cls = nk_dtype_class((nrt_dtype)ops[0].dtype);
  if (cls != NK_CLASS_FLOAT && cls != NK_CLASS_DOUBLE) return 0;
  const int pairs = ops[1].dtype == NRT_BFLOAT16 && has_bf16_dot();
  const gemm_arch as = pick_arch(cls, pairs, m), at = pick_arch(cls, pairs, n);
  const double work = (double)round_up(m, as.mr) * (double)round_up(n, as.nr);
  const double work_t = (double)round_up(n, at.mr) * (double)round_up(m, at.nr);
  return work_t < 0.95 * work && 2.0 * (double)m * (double)n * (double)k >= as.serial_flops;
}

static int gemm_solve(nrt_exec_ctx *ctx, const nrt_operand ops[3], const nrt_operand *c,
                      nk_scalar alpha, nk_scalar beta, const nk_gemm_indirect *ind);

static int gemm_run(nrt_exec_ctx *ctx, const nrt_operand ops[3], const nrt_operand *c,
                    nk_scalar alpha, nk_scalar beta, const nk_gemm_indirect *ind) {
  if (!c && !ind && alpha.f == 1.0 && beta.f == 0.0 &&
      ops[0].ndim == 3 && ops[1].ndim == 3 && ops[2].ndim == 3 && ops[0].sizes[0] == 1 &&
      transposed_pays(ops)) {
    const nrt_operand t[3] = {transposed(ops[0]), transposed(ops[2]), transposed(ops[1])};
    return gemm_solve(ctx, t, NULL, alpha, beta, NULL);
  }
  return gemm_solve(ctx, ops, c, alpha, beta, ind);
}

static int gemm_solve(nrt_exec_ctx *ctx, const nrt_operand ops[3], const nrt_operand *c,
                      nk_scalar alpha, nk_scalar beta, const nk_gemm_indirect *ind) {
  gemm_plan plan;
  if (plan_gemm(ctx, ops, alpha, beta, &plan)) return -1;
  if (c && plan_addend(ctx, c, &plan)) return -1;
  if (ind && (ind->b_rows || ind->b_cols)) {
    if (ops[2].dtype != NRT_FLOAT32 && ops[2].dtype != NRT_FLOAT64 && ops[2].dtype != NRT_BFLOAT16) {
      nrt_exec_fail(ctx, "gemm: indirect operands must be float32, float64 or bfloat16");
      return -1;
    }
    plan.ind = *ind;
    /* Unpacked up to NK_GEMM_UNPACKED_MAX_ROWS rows: each row tile then
     * re-reads the B rows from wherever the offsets point (from L1/L2, a
     * k step's NR values per MR x NR multiply-adds), where packing reads
     * each B element once but from wherever the padded input lies: the
     * packing's loads missed so often that packing took as long as the
     * micro-kernel in a 64->64 3x3 convolution at 56x56 (perf: 84% of its
     * samples on one load).  Measured per layer, batch 2, interleaved
     * runs, from 4 * MR rows (the old bound) to 256: 64->64 @56 forward
     * 2.7 -> 2.25 ms (backward 8.9 -> 7.7), 128->128 @28 2.6 -> 2.38,
     * 256->256 @14 2.84 -> 2.66 at AVX-512; at AVX2 3.1 -> 2.4, 2.75 ->
     * 2.6, 3.0 -> 2.8 and 512->512 @7 4.0-4.5 -> 3.7.  Beyond that many
     * tiles reuse one packed copy and it pays again.  float32 and
     * float64 only: bfloat16 B is always packed (in k pairs, or widened),
     * since the rows kernels read the compute type in place. */
    plan.unpacked_b = ind->b_rows && !ind->b_cols && b_readable_in_place(&plan);
    if (ind->b_pair_rows) {
      if (!plan.pairs || !plan.arch.ukr_rows || !ind->b_rows || ind->b_cols ||
          ops[2].dtype != NRT_BFLOAT16) {
        nrt_exec_fail(ctx, "gemm: a B in k pairs needs bfloat16 operands, the dot-product kernel "
                      "without AMX and a row table alone");
        return -1;
      }
      plan.unpacked_b = 1;
    }
  }
  const int plain_unpacked = !plan.ind.b_rows && !plan.ind.b_cols && small_unpacked(&plan);
  const gemm_plan *p = &plan;
  if (p->batch == 0 || p->m == 0 || p->n == 0) return 0;
  if (p->k == 0) {
    scale_out(p);
    return 0;
  }
  if (try_gemv(p)) return 0;
  if (addend_first(p)) {
    nk_parallel_for(p->batch * p->m, 64, addend_rows, &plan);
    plan.has_c = 0;
    plan.beta = (nk_scalar){1.0, 1};
    memcpy(plan.beta_c, plan.one, sizeof plan.one);
  }

  const int threads = nrt_compute_threads();
  const double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
  /* Below ~2 MFLOP per product (arch.serial_flops) a trip to the pool
   * costs more than it saves; batches of such products split by batch
   * entry instead. */
  const int small = flops < p->arch.serial_flops;
  const int by_batch = threads > 1 && p->batch > 1 && (small || p->batch >= 2 * threads);
  const int parallel = threads > 1 && !small && !by_batch;
  const int sets = by_batch ? threads : 1;
  const int workers = parallel ? threads : 1;
  const int64_t mr = p->arch.mr;
  const size_t es = p->es;
  const int64_t kp = packed_k(p, p->kc); /* the longest packed k block */
  const size_t a_stride = (size_t)round_up((int64_t)((size_t)(round_up(p->mc, mr) * kp) * es), 64);
  const size_t b_bytes = (size_t)round_up((int64_t)((size_t)(kp * p->nc) * es), 64);
  plan.rows_first = !p->direct && p->k <= p->kc;
  const int64_t group_rows = mr * p->arch.row_group;
  const size_t ws_stride = (size_t)round_up((int64_t)((size_t)(group_rows * p->nc) * es), 64);
  const size_t ws_bytes = p->direct       ? 0
                          : p->rows_first ? ws_stride * (size_t)workers
                                          : (size_t)round_up((int64_t)((size_t)(p->m * p->nc) * es), 64);
  const size_t per_set = b_bytes + ws_bytes + a_stride * (size_t)workers;
  const size_t table = plain_unpacked ? (size_t)round_up((int64_t)((size_t)p->k * 8), 64) : 0;
  char *mem = scratch(per_set * (size_t)sets + table);
  if (!mem) {
    nrt_exec_fail(ctx, "gemm: out of host memory for packing buffers (%zu bytes)",
                  per_set * (size_t)sets + table);
    return -1;
  }
  if (plain_unpacked) { /* B's row offsets, after the packing buffers */
    int64_t *rows = (int64_t *)(void *)(mem + per_set * (size_t)sets);
    for (int64_t q = 0; q < p->k; q++) rows[q] = q * p->b.strides[1];
    plan.ind.b_rows = rows;
    plan.unpacked_b = 1;
  }
  gemm_buffers bufs[sets];
  for (int s = 0; s < sets; s++) {
    char *base = mem + per_set * (size_t)s;
    bufs[s] = (gemm_buffers){base, base + b_bytes, base + b_bytes + ws_bytes, a_stride, ws_stride,
                             workers};
  }
  if (by_batch) {
    batch_run r = {p, bufs};
    nk_parallel_for(p->batch, 1, batch_range, &r);
  } else {
    for (int64_t bi = 0; bi < p->batch; bi++) gemm_one(p, &bufs[0], bi, parallel, 0);
  }
  return 0;
}

/* ------------------------------------------------------------ peak probe */

typedef struct peak_run {
  int64_t iters;
  int f64;
  int64_t flops; /* atomic sum */
} peak_run;

static int64_t peak_one(int64_t iters, int f64) {
  switch (nk_cpu_isa()) {
  case NK_ISA_AVX512: return nk_peak_fma_avx512(iters, f64);
  case NK_ISA_AVX2: return nk_peak_fma_avx2(iters, f64);
  default: {
    /* portable: 8 independent multiply-add chains */
    volatile double sink;
    double acc[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int64_t it = 0; it < iters; it++)
      for (int i = 0; i < 8; i++) acc[i] = acc[i] * 0.999999 + 1e-7;
    sink = acc[0] + acc[7];
    (void)sink;
    return iters * 16;
  }
  }
}

static void peak_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  peak_run *r = arg;
  for (int64_t i = begin; i < end; i++)
    __atomic_add_fetch(&r->flops, peak_one(r->iters, r->f64), __ATOMIC_RELAXED);
}

int64_t nk_peak_fma(int64_t iters, int f64, int threads) {
  if (threads <= 1) return peak_one(iters, f64);
  peak_run r = {iters, f64, 0};
  nrt_parallel_for(threads, 1, peak_range, &r);
  return r.flops;
}

int nk_gemm_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  if (nk_check_operands(task, ctx, "gemm", task->n_operands == 4 ? 4 : 3)) return -1;
  const nk_gemm_params *prm = (const nk_gemm_params *)task->params;
  return gemm_run(ctx, task->operands, task->n_operands == 4 ? &task->operands[3] : NULL, prm->alpha,
                  prm->beta, NULL);
}
