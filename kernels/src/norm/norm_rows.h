/* norm_rows.h — the contiguous-run primitives of the normalisation kernels,
 * written once as a template over the element type.
 *
 * Include with NR_T (float or double) and NR_NAME(x) (the names to give)
 * defined.  norm.c includes it for float and double (portable C); each
 * norm_<isa>_f32.c includes it for float under its ISA's target flags, so
 * the same loops come out as AVX2 or AVX-512 code.  Sums run over NR_LANES
 * independent accumulators (each a plain loop the compiler vectorises
 * without reassociating anything) that are added in a fixed order at the
 * end, so a result depends only on the data and never on the thread count.
 * A NULL w means weight 1, a NULL b bias 0. */
#include <stdint.h>
#include <string.h>

#ifndef NR_LANES
#define NR_LANES 16
#endif

/* lanes added pairwise, in double */
static inline double NR_NAME(fold)(const NR_T *acc) {
  double a[NR_LANES];
  for (int k = 0; k < NR_LANES; k++) a[k] = (double)acc[k];
  for (int w = NR_LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; k++) a[k] += a[k + w];
  return a[0];
}

/* The lanes as one GCC vector (NR_LANES elements): written with arrays of
 * NR_LANES accumulators, GCC's SLP vectoriser turned these loops into 45 KB
 * of permutes under AVX-512 (a batch-norm backward at 1 ns an element);
 * as vectors they are one load and one FMA per lane group.  Lane k still
 * sums elements k, k + NR_LANES, ..., in the same order as before. */
typedef NR_T NR_NAME(vec) __attribute__((vector_size(NR_LANES * sizeof(NR_T))));

/* (statements, not functions returning vectors: a 64-byte vector return
 * would draw GCC's ABI warning in the portable build) */
#define NR_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define NR_SPLAT(v, x)                              \
  for (int k_ = 0; k_ < NR_LANES; k_++) (v)[k_] = (x)
/* lanes out, by constant indices (memcpy from the vector's address would
 * keep it in memory through the loop) */
#define NR_LANES_OUT(a, v)                          \
  _Pragma("GCC unroll 16") for (int k_ = 0; k_ < NR_LANES; k_++) (a)[k_] = (v)[k_]

/* sum of x, accumulated in double (the mean of data far from 0 stays exact);
 * the lanes as two halves, each one register wide (a 16-double vector is
 * wider than any register, and GCC keeps such a vector in memory) */
typedef NR_T NR_NAME(hvec) __attribute__((vector_size(NR_LANES / 2 * sizeof(NR_T))));
typedef double NR_NAME(dhvec) __attribute__((vector_size(NR_LANES / 2 * sizeof(double))));
static double NR_NAME(sum)(const NR_T *x, int64_t n) {
  NR_NAME(dhvec) lo = {0}, hi = {0};
  NR_NAME(hvec) vl, vh;
  int64_t i = 0;
  for (; i + NR_LANES <= n; i += NR_LANES) {
    NR_LOAD(vl, x + i);
    NR_LOAD(vh, x + i + NR_LANES / 2);
    lo += __builtin_convertvector(vl, NR_NAME(dhvec));
    hi += __builtin_convertvector(vh, NR_NAME(dhvec));
  }
  double a[NR_LANES]; /* the tail goes to the lanes in memory: a vector
                       * subscripted in a loop would live in memory too */
  _Pragma("GCC unroll 16") for (int k = 0; k < NR_LANES / 2; k++) {
    a[k] = lo[k];
    a[k + NR_LANES / 2] = hi[k];
  }
  for (int k = 0; i < n; i++, k++) a[k] += (double)x[i];
  for (int w = NR_LANES / 2; w > 0; w /= 2)
    for (int k = 0; k < w; k++) a[k] += a[k + w];
  return a[0];
}

/* sum of (x - m)^2 */
static double NR_NAME(sumsq)(const NR_T *x, int64_t n, NR_T m) {
  NR_NAME(vec) acc = {0}, mv, v;
  NR_SPLAT(mv, m);
  int64_t i = 0;
  for (; i + NR_LANES <= n; i += NR_LANES) {
    NR_LOAD(v, x + i);
    const NR_NAME(vec) d = v - mv;
    acc += d * d;
  }
  NR_T a[NR_LANES];
  NR_LANES_OUT(a, acc);
  for (int k = 0; i < n; i++, k++) {
    NR_T d = x[i] - m;
    a[k] += d * d;
  }
  return NR_NAME(fold)(a);
}

/* *s1 += sum of dy * w, *s2 += sum of dy * w * (x - m) */
static void NR_NAME(dsums)(const NR_T *dy, const NR_T *x, const NR_T *w, int64_t n, NR_T m,
                           double *s1, double *s2) {
  NR_NAME(vec) a1 = {0}, a2 = {0}, mv, vd, vw, vx;
  NR_T b1[NR_LANES], b2[NR_LANES]; /* the lanes, for the tail (see sum) */
  NR_SPLAT(mv, m);
  int64_t i = 0;
  if (w) {
    for (; i + NR_LANES <= n; i += NR_LANES) {
      NR_LOAD(vd, dy + i);
      NR_LOAD(vw, w + i);
      NR_LOAD(vx, x + i);
      const NR_NAME(vec) g = vd * vw;
      a1 += g;
      a2 += g * (vx - mv);
    }
    NR_LANES_OUT(b1, a1);
    NR_LANES_OUT(b2, a2);
    for (int k = 0; i < n; i++, k++) {
      NR_T g = dy[i] * w[i];
      b1[k] += g;
      b2[k] += g * (x[i] - m);
    }
  } else {
    for (; i + NR_LANES <= n; i += NR_LANES) {
      NR_LOAD(vd, dy + i);
      NR_LOAD(vx, x + i);
      a1 += vd;
      a2 += vd * (vx - mv);
    }
    NR_LANES_OUT(b1, a1);
    NR_LANES_OUT(b2, a2);
    for (int k = 0; i < n; i++, k++) {
      b1[k] += dy[i];
      b2[k] += dy[i] * (x[i] - m);
    }
  }
  *s1 += NR_NAME(fold)(b1);
  *s2 += NR_NAME(fold)(b2);
}

/* y = (x * scale + shift) * w + b (ATen's CPU form) */
static void NR_NAME(apply)(NR_T *y, const NR_T *x, int64_t n, NR_T scale, NR_T shift,
                           const NR_T *w, const NR_T *b) {
  if (w && b) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale + shift) * w[i] + b[i];
  } else if (w) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale + shift) * w[i];
  } else if (b) {
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale + shift) + b[i];
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;
  }
}

/* dx = a * dy * w + b * x + c */
static void NR_NAME(dx)(NR_T *dx, const NR_T *dy, const NR_T *x, const NR_T *w, int64_t n, NR_T a,
                        NR_T b, NR_T c) {
  if (w) {
    for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] * w[i] + b * x[i] + c;
  } else {
    for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] + b * x[i] + c;
  }
}

/* column sums over rows (in double): gw[j] += dy[j] * (x[j] - m) * r, gb[j] += dy[j] */
static void NR_NAME(colsums)(double *gw, double *gb, const NR_T *dy, const NR_T *x, int64_t n,
                             NR_T m, NR_T r) {
  if (gw)
    for (int64_t j = 0; j < n; j++) gw[j] += (double)(dy[j] * ((x[j] - m) * r));
  if (gb)
    for (int64_t j = 0; j < n; j++) gb[j] += (double)dy[j];
}

/* ------------------------------------------- multi-run sums (batch norm)
 * rows runs of n elements, run r at x + r * ld (elements).  The lanes run
 * on across the runs and fold once at the end: batch norm's runs are one
 * (sample, channel) plane of 49..3136 elements, and a fold per run had cost
 * as much as the data.  Lane k takes elements k, k + NR_LANES, ... of each
 * run in turn; a run's last n % NR_LANES elements go to tail lanes t[0..]
 * (double, in memory), added to lane k at the fold.  Products accumulate in
 * NR_T lanes for NR_BLOCK elements (across runs), then go to the double
 * lanes, so long runs lose no more than short ones.  Adjacent runs (ld ==
 * n) are one run.  Every order is fixed by (rows, ld, n) alone. */
#ifndef NR_BLOCK
#define NR_BLOCK 4096
#endif

/* the NR_LANES lanes of v (an NR_LANES-wide vector) as two halves */
#define NR_HALVES(lo, hi, v)                                                         \
  do {                                                                               \
    (lo) = __builtin_shufflevector((v), (v), 0, 1, 2, 3, 4, 5, 6, 7);                \
    (hi) = __builtin_shufflevector((v), (v), 8, 9, 10, 11, 12, 13, 14, 15);          \
  } while (0)
/* lanes lo, hi (double halves) plus tail lanes t, added pairwise */
#define NR_FOLD2(out, lo, hi, t)                                                     \
  do {                                                                               \
    double a_[NR_LANES];                                                             \
    _Pragma("GCC unroll 8") for (int k_ = 0; k_ < NR_LANES / 2; k_++) {              \
      a_[k_] = (lo)[k_] + (t)[k_];                                                   \
      a_[k_ + NR_LANES / 2] = (hi)[k_] + (t)[k_ + NR_LANES / 2];                     \
    }                                                                                \
    for (int w_ = NR_LANES / 2; w_ > 0; w_ /= 2)                                     \
      for (int k_ = 0; k_ < w_; k_++) a_[k_] += a_[k_ + w_];                         \
    (out) = a_[0];                                                                   \
  } while (0)

#if NR_LANES != 16
#error "the multi-run sums are written for 16 lanes"
#endif

/* sum of x (in double lanes, as sum) */
static double NR_NAME(msum)(const NR_T *x, int64_t rows, int64_t ld, int64_t n) {
  if (ld == n) n *= rows, rows = 1;
  NR_NAME(dhvec) lo = {0}, hi = {0};
  NR_NAME(hvec) vl, vh;
  double t[NR_LANES] = {0};
  const int64_t nv = n - n % NR_LANES;
  for (int64_t r = 0; r < rows; r++) {
    const NR_T *xr = x + r * ld;
    for (int64_t i = 0; i < nv; i += NR_LANES) {
      NR_LOAD(vl, xr + i);
      NR_LOAD(vh, xr + i + NR_LANES / 2);
      lo += __builtin_convertvector(vl, NR_NAME(dhvec));
      hi += __builtin_convertvector(vh, NR_NAME(dhvec));
    }
    for (int64_t i = nv, k = 0; i < n; i++, k++) t[k] += (double)xr[i];
  }
  double s;
  NR_FOLD2(s, lo, hi, t);
  return s;
}

/* sum of (x - m)^2 */
static double NR_NAME(msumsq)(const NR_T *x, int64_t rows, int64_t ld, int64_t n, NR_T m) {
  if (ld == n) n *= rows, rows = 1;
  NR_NAME(dhvec) lo = {0}, hi = {0};
  NR_NAME(hvec) hl, hh;
  NR_NAME(vec) mv, v;
  double t[NR_LANES] = {0};
  NR_SPLAT(mv, m);
  const int64_t nv = n - n % NR_LANES;
  NR_NAME(vec) acc = {0};
  int64_t pending = 0; /* elements in acc since its last flush */
  for (int64_t r = 0; r < rows; r++) {
    const NR_T *xr = x + r * ld;
    for (int64_t i0 = 0; i0 < nv;) {
      const int64_t i1 = nv - i0 < NR_BLOCK - pending ? nv : i0 + (NR_BLOCK - pending);
      for (int64_t i = i0; i < i1; i += NR_LANES) {
        NR_LOAD(v, xr + i);
        const NR_NAME(vec) d = v - mv;
        acc += d * d;
      }
      pending += i1 - i0;
      i0 = i1;
      if (pending == NR_BLOCK) {
        NR_HALVES(hl, hh, acc);
        lo += __builtin_convertvector(hl, NR_NAME(dhvec));
        hi += __builtin_convertvector(hh, NR_NAME(dhvec));
        acc = (NR_NAME(vec)){0};
        pending = 0;
      }
    }
    for (int64_t i = nv, k = 0; i < n; i++, k++) {
      const NR_T d = xr[i] - m;
      t[k] += (double)(d * d);
    }
  }
  NR_HALVES(hl, hh, acc);
  lo += __builtin_convertvector(hl, NR_NAME(dhvec));
  hi += __builtin_convertvector(hh, NR_NAME(dhvec));
  double s;
  NR_FOLD2(s, lo, hi, t);
  return s;
}

/* *s1 += sum of dy, *s2 += sum of dy * (x - m); dy's runs at dy + r * lddy */
static void NR_NAME(mdsums)(const NR_T *dy, int64_t lddy, const NR_T *x, int64_t ldx, int64_t rows,
                            int64_t n, NR_T m, double *s1, double *s2) {
  if (ldx == n && lddy == n) n *= rows, rows = 1;
  NR_NAME(dhvec) lo1 = {0}, hi1 = {0}, lo2 = {0}, hi2 = {0};
  NR_NAME(hvec) hl, hh;
  NR_NAME(vec) mv, vd, vx;
  double t1[NR_LANES] = {0}, t2[NR_LANES] = {0};
  NR_SPLAT(mv, m);
  const int64_t nv = n - n % NR_LANES;
  NR_NAME(vec) a1 = {0}, a2 = {0};
  int64_t pending = 0; /* elements in a1, a2 since their last flush */
#define NR_FLUSH_D()                                      \
  do {                                                    \
    NR_HALVES(hl, hh, a1);                                \
    lo1 += __builtin_convertvector(hl, NR_NAME(dhvec));   \
    hi1 += __builtin_convertvector(hh, NR_NAME(dhvec));   \
    NR_HALVES(hl, hh, a2);                                \
    lo2 += __builtin_convertvector(hl, NR_NAME(dhvec));   \
    hi2 += __builtin_convertvector(hh, NR_NAME(dhvec));   \
  } while (0)
  for (int64_t r = 0; r < rows; r++) {
    const NR_T *xr = x + r * ldx, *dr = dy + r * lddy;
    for (int64_t i0 = 0; i0 < nv;) {
      const int64_t i1 = nv - i0 < NR_BLOCK - pending ? nv : i0 + (NR_BLOCK - pending);
      for (int64_t i = i0; i < i1; i += NR_LANES) {
        NR_LOAD(vd, dr + i);
        NR_LOAD(vx, xr + i);
        a1 += vd;
        a2 += vd * (vx - mv);
      }
      pending += i1 - i0;
      i0 = i1;
      if (pending == NR_BLOCK) {
        NR_FLUSH_D();
        a1 = a2 = (NR_NAME(vec)){0};
        pending = 0;
      }
    }
    for (int64_t i = nv, k = 0; i < n; i++, k++) {
      t1[k] += (double)dr[i];
      t2[k] += (double)(dr[i] * (xr[i] - m));
    }
  }
  NR_FLUSH_D();
#undef NR_FLUSH_D
  double a, b;
  NR_FOLD2(a, lo1, hi1, t1);
  NR_FOLD2(b, lo2, hi2, t2);
  *s1 += a;
  *s2 += b;
}

/* y = x * scale + shift over rows runs (y's at y + r * ldy, x's at x + r * ldx) */
static void NR_NAME(mapply)(NR_T *y, int64_t ldy, const NR_T *x, int64_t ldx, int64_t rows, int64_t n,
                            NR_T scale, NR_T shift) {
  if (ldy == n && ldx == n) n *= rows, rows = 1;
  for (int64_t r = 0; r < rows; r++) {
    NR_T *yr = y + r * ldy;
    const NR_T *xr = x + r * ldx;
    for (int64_t i = 0; i < n; i++) yr[i] = xr[i] * scale + shift;
  }
}

/* dx = a * dy + b * x + c over rows runs (each operand with its own ld) */
static void NR_NAME(mdx)(NR_T *dx, int64_t lddx, const NR_T *dy, int64_t lddy, const NR_T *x,
                         int64_t ldx, int64_t rows, int64_t n, NR_T a, NR_T b, NR_T c) {
  if (lddx == n && lddy == n && ldx == n) n *= rows, rows = 1;
  for (int64_t r = 0; r < rows; r++) {
    NR_T *o = dx + r * lddx;
    const NR_T *g = dy + r * lddy, *xr = x + r * ldx;
    for (int64_t i = 0; i < n; i++) o[i] = a * g[i] + b * xr[i] + c;
  }
}
