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
/* NR_VW: elements per vector, one register: the NR_LANES lanes are NR_NV
 * vectors (AVX-512: one 16-float vector; AVX2: two 8-float ones).  A GCC
 * vector wider than the ISA's registers lives in memory: with 16-float
 * vectors and 8-double halves under AVX2, the loops stored and reloaded
 * every accumulator each step (group_norm 3.6x slower than at AVX-512,
 * 2.4x slower than the portable build).  Lane k is element k % NR_VW of
 * vector k / NR_VW whatever the width, so every ISA adds the same numbers
 * in the same order. */
#ifndef NR_VW
#define NR_VW NR_LANES
#endif
#define NR_NV (NR_LANES / NR_VW)

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
typedef NR_T NR_NAME(vec) __attribute__((vector_size(NR_VW * sizeof(NR_T))));

/* (statements, not functions returning vectors: a 64-byte vector return
 * would draw GCC's ABI warning in the portable build) */
#define NR_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define NR_SPLAT(v, x)                              \
  for (int k_ = 0; k_ < NR_VW; k_++) (v)[k_] = (x)
/* lanes out of an array of NR_NV vectors, by constant indices (memcpy
 * from the vectors' address would keep them in memory through the loop) */
#define NR_LANES_OUT(a, v)                          \
  _Pragma("GCC unroll 16") for (int k_ = 0; k_ < NR_LANES; k_++) (a)[k_] = (v)[k_ / NR_VW][k_ % NR_VW]
/* the same for the 2 * NR_NV double half-vectors (NR_VW / 2 lanes each) */
#define NR_DLANES_OUT(a, d)                         \
  _Pragma("GCC unroll 16") for (int k_ = 0; k_ < NR_LANES; k_++) \
    (a)[k_] = (d)[k_ / (NR_VW / 2)][k_ % (NR_VW / 2)]

/* sum of x, accumulated in double (the mean of data far from 0 stays exact);
 * the lanes as 2 * NR_NV half-vectors of doubles, each one register wide */
typedef NR_T NR_NAME(hvec) __attribute__((vector_size(NR_VW / 2 * sizeof(NR_T))));
typedef double NR_NAME(dhvec) __attribute__((vector_size(NR_VW / 2 * sizeof(double))));
#define NR_NH (2 * NR_NV) /* half-vectors per lane set */
/* A row's sums keep NR_ILP sets of lanes, taking NR_ILP * NR_LANES
 * elements per step: one set's adds wait on the previous step's (4 cycles
 * of latency each), and a 768-float layer-norm row is only 48 vectors, so
 * with one set sum and sumsq were latency-bound (54% of LayerNorm forward).
 * The sets are added lane by lane in a fixed order before the lanes fold
 * (NR_ADD_SETS), the same order for every ISA. */
#define NR_ILP 2
#define NR_ADD_SETS(acc, sets)                                                            \
  _Pragma("GCC unroll 8") for (int j_ = NR_NV; j_ < (sets) * NR_NV; j_++) (acc)[j_ % NR_NV] += (acc)[j_]

/* sum of (x - m)^2 */
static double NR_NAME(sumsq)(const NR_T *x, int64_t n, NR_T m) {
  NR_NAME(vec) acc[2 * NR_ILP * NR_NV] = {0}, mv, v; /* 2 * NR_ILP sets: a step is a subtract,
                                                        * a multiply and the add */
  NR_SPLAT(mv, m);
  int64_t i = 0;
  for (; i + 2 * NR_ILP * NR_LANES <= n; i += 2 * NR_ILP * NR_LANES)
    _Pragma("GCC unroll 8") for (int j = 0; j < 2 * NR_ILP * NR_NV; j++) {
      NR_LOAD(v, x + i + j * NR_VW);
      const NR_NAME(vec) d = v - mv;
      acc[j] += d * d;
    }
  for (; i + NR_LANES <= n; i += NR_LANES)
    _Pragma("GCC unroll 4") for (int j = 0; j < NR_NV; j++) {
      NR_LOAD(v, x + i + j * NR_VW);
      const NR_NAME(vec) d = v - mv;
      acc[j] += d * d;
    }
  NR_ADD_SETS(acc, 2 * NR_ILP);
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
  NR_NAME(vec) a1[NR_NV] = {0}, a2[NR_NV] = {0}, mv, vd, vw, vx;
  NR_T b1[NR_LANES], b2[NR_LANES]; /* the lanes, for the tail (see sum) */
  NR_SPLAT(mv, m);
  int64_t i = 0;
  if (w) {
    for (; i + NR_LANES <= n; i += NR_LANES)
      _Pragma("GCC unroll 4") for (int j = 0; j < NR_NV; j++) {
        NR_LOAD(vd, dy + i + j * NR_VW);
        NR_LOAD(vw, w + i + j * NR_VW);
        NR_LOAD(vx, x + i + j * NR_VW);
        const NR_NAME(vec) g = vd * vw;
        a1[j] += g;
        a2[j] += g * (vx - mv);
      }
    NR_LANES_OUT(b1, a1);
    NR_LANES_OUT(b2, a2);
    for (int k = 0; i < n; i++, k++) {
      NR_T g = dy[i] * w[i];
      b1[k] += g;
      b2[k] += g * (x[i] - m);
    }
  } else {
    for (; i + NR_LANES <= n; i += NR_LANES)
      _Pragma("GCC unroll 4") for (int j = 0; j < NR_NV; j++) {
        NR_LOAD(vd, dy + i + j * NR_VW);
        NR_LOAD(vx, x + i + j * NR_VW);
        a1[j] += vd;
        a2[j] += vd * (vx - mv);
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
/* The weight and bias gradients' column sums over k <= NR_COLROWS rows
 * (row i: dy[i], x[i], its mean m[i] and rstd r[i]): a full group of 4
 * updates the double sums once, ((p0 + p1) + (p2 + p3)), where an update per
 * row (a read-modify-write of gw and gb per element per row) had cost more
 * than the products: 39% of a LayerNorm (4096, 768) forward+backward. */
#define NR_COLROWS 4
static void NR_NAME(colsums)(double *gw, double *gb, const NR_T *const *dy, const NR_T *const *x,
                             int k, int64_t n, const NR_T *m, const NR_T *r) {
  if (k == NR_COLROWS) {
    const NR_T *d0 = dy[0], *d1 = dy[1], *d2 = dy[2], *d3 = dy[3];
    const NR_T *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    const NR_T m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
    if (gw)
      for (int64_t j = 0; j < n; j++)
        gw[j] += ((double)(d0[j] * ((x0[j] - m0) * r0)) + (double)(d1[j] * ((x1[j] - m1) * r1))) +
                 ((double)(d2[j] * ((x2[j] - m2) * r2)) + (double)(d3[j] * ((x3[j] - m3) * r3)));
    if (gb)
      for (int64_t j = 0; j < n; j++)
        gb[j] += ((double)d0[j] + (double)d1[j]) + ((double)d2[j] + (double)d3[j]);
    return;
  }
  for (int i = 0; i < k; i++) {
    const NR_T *d = dy[i], *xi = x[i], mi = m[i], ri = r[i];
    if (gw)
      for (int64_t j = 0; j < n; j++) gw[j] += (double)(d[j] * ((xi[j] - mi) * ri));
    if (gb)
      for (int64_t j = 0; j < n; j++) gb[j] += (double)d[j];
  }
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

/* a vector's two halves (NR_VW / 2 lanes each) */
#if NR_VW == 16
#define NR_LO(v) __builtin_shufflevector((v), (v), 0, 1, 2, 3, 4, 5, 6, 7)
#define NR_HI(v) __builtin_shufflevector((v), (v), 8, 9, 10, 11, 12, 13, 14, 15)
#elif NR_VW == 8
#define NR_LO(v) __builtin_shufflevector((v), (v), 0, 1, 2, 3)
#define NR_HI(v) __builtin_shufflevector((v), (v), 4, 5, 6, 7)
#else
#error "NR_VW must be 16 or 8"
#endif
/* the float lanes acc[NR_NV] added into the double half-vectors d[NR_NH] */
#define NR_TO_DOUBLE(d, acc)                                                         \
  _Pragma("GCC unroll 4") for (int j_ = 0; j_ < NR_NV; j_++) {                       \
    (d)[2 * j_] += __builtin_convertvector(NR_LO((acc)[j_]), NR_NAME(dhvec));       \
    (d)[2 * j_ + 1] += __builtin_convertvector(NR_HI((acc)[j_]), NR_NAME(dhvec));   \
  }
/* double lanes d plus tail lanes t, added pairwise */
#define NR_FOLD2(out, d, t)                                                          \
  do {                                                                               \
    double a_[NR_LANES];                                                             \
    NR_DLANES_OUT(a_, d);                                                            \
    for (int k_ = 0; k_ < NR_LANES; k_++) a_[k_] += (t)[k_];                         \
    for (int w_ = NR_LANES / 2; w_ > 0; w_ /= 2)                                     \
      for (int k_ = 0; k_ < w_; k_++) a_[k_] += a_[k_ + w_];                         \
    (out) = a_[0];                                                                   \
  } while (0)

#if NR_LANES != 16
#error "the multi-run sums are written for 16 lanes"
#endif

/* sum of x, in double (the mean of data far from 0 stays exact): NR_T
 * lanes (NR_ILP sets, see sumsq) for at most NR_BLOCK elements, then into
 * double lanes.  Converting every element to double was the costlier half
 * of LayerNorm's forward (two converts and an insert per 8 floats).  A
 * lane adds at most NR_BLOCK / (NR_ILP * NR_LANES) = 128 floats before
 * going to double; the variance does not depend on it (sumsq subtracts
 * the rounded mean: an error d in the mean changes it by d^2). */
static double NR_NAME(sum)(const NR_T *x, int64_t n) {
  NR_NAME(dhvec) d[NR_NH] = {0};
  NR_NAME(vec) acc[NR_ILP * NR_NV], v;
  const int64_t step = NR_ILP * NR_LANES, full = n - n % step;
  int64_t i = 0;
  while (i < full) {
    const int64_t stop = full - i < NR_BLOCK ? full : i + NR_BLOCK;
    for (int j = 0; j < NR_ILP * NR_NV; j++) acc[j] = (NR_NAME(vec)){0};
    for (; i < stop; i += step)
      _Pragma("GCC unroll 8") for (int j = 0; j < NR_ILP * NR_NV; j++) {
        NR_LOAD(v, x + i + j * NR_VW);
        acc[j] += v;
      }
    NR_ADD_SETS(acc, NR_ILP);
    NR_TO_DOUBLE(d, acc);
  }
  if (i + NR_LANES <= n) { /* fewer than NR_ILP lane sets left */
    for (int j = 0; j < NR_NV; j++) acc[j] = (NR_NAME(vec)){0};
    for (; i + NR_LANES <= n; i += NR_LANES)
      _Pragma("GCC unroll 4") for (int j = 0; j < NR_NV; j++) {
        NR_LOAD(v, x + i + j * NR_VW);
        acc[j] += v;
      }
    NR_TO_DOUBLE(d, acc);
  }
  double t[NR_LANES] = {0}, s;
  for (int k = 0; i < n; i++, k++) t[k] += (double)x[i];
  NR_FOLD2(s, d, t);
  return s;
}

/* sum of x (in double lanes, as sum) */
static double NR_NAME(msum)(const NR_T *x, int64_t rows, int64_t ld, int64_t n) {
  if (ld == n) n *= rows, rows = 1;
  NR_NAME(dhvec) d[NR_NH] = {0};
  NR_NAME(hvec) h;
  double t[NR_LANES] = {0};
  const int64_t nv = n - n % NR_LANES;
  for (int64_t r = 0; r < rows; r++) {
    const NR_T *xr = x + r * ld;
    for (int64_t i = 0; i < nv; i += NR_LANES)
      _Pragma("GCC unroll 4") for (int j = 0; j < NR_NH; j++) {
        NR_LOAD(h, xr + i + j * (NR_VW / 2));
        d[j] += __builtin_convertvector(h, NR_NAME(dhvec));
      }
    for (int64_t i = nv, k = 0; i < n; i++, k++) t[k] += (double)xr[i];
  }
  double s;
  NR_FOLD2(s, d, t);
  return s;
}

/* sum of (x - m)^2 */
static double NR_NAME(msumsq)(const NR_T *x, int64_t rows, int64_t ld, int64_t n, NR_T m) {
  if (ld == n) n *= rows, rows = 1;
  NR_NAME(dhvec) dl[NR_NH] = {0};
  NR_NAME(vec) mv, v;
  double t[NR_LANES] = {0};
  NR_SPLAT(mv, m);
  const int64_t nv = n - n % NR_LANES;
  NR_NAME(vec) acc[NR_NV] = {0};
  int64_t pending = 0; /* elements in acc since its last flush */
  for (int64_t r = 0; r < rows; r++) {
    const NR_T *xr = x + r * ld;
    for (int64_t i0 = 0; i0 < nv;) {
      const int64_t i1 = nv - i0 < NR_BLOCK - pending ? nv : i0 + (NR_BLOCK - pending);
      for (int64_t i = i0; i < i1; i += NR_LANES)
        _Pragma("GCC unroll 4") for (int j = 0; j < NR_NV; j++) {
          NR_LOAD(v, xr + i + j * NR_VW);
          const NR_NAME(vec) d = v - mv;
          acc[j] += d * d;
        }
      pending += i1 - i0;
      i0 = i1;
      if (pending == NR_BLOCK) {
        NR_TO_DOUBLE(dl, acc);
        for (int j = 0; j < NR_NV; j++) acc[j] = (NR_NAME(vec)){0};
        pending = 0;
      }
    }
    for (int64_t i = nv, k = 0; i < n; i++, k++) {
      const NR_T d = xr[i] - m;
      t[k] += (double)(d * d);
    }
  }
  NR_TO_DOUBLE(dl, acc);
  double s;
  NR_FOLD2(s, dl, t);
  return s;
}

/* *s1 += sum of dy, *s2 += sum of dy * (x - m); dy's runs at dy + r * lddy */
static void NR_NAME(mdsums)(const NR_T *dy, int64_t lddy, const NR_T *x, int64_t ldx, int64_t rows,
                            int64_t n, NR_T m, double *s1, double *s2) {
  if (ldx == n && lddy == n) n *= rows, rows = 1;
  NR_NAME(dhvec) d1[NR_NH] = {0}, d2[NR_NH] = {0};
  NR_NAME(vec) mv, vd, vx;
  double t1[NR_LANES] = {0}, t2[NR_LANES] = {0};
  NR_SPLAT(mv, m);
  const int64_t nv = n - n % NR_LANES;
  NR_NAME(vec) a1[NR_NV] = {0}, a2[NR_NV] = {0};
  int64_t pending = 0; /* elements in a1, a2 since their last flush */
  for (int64_t r = 0; r < rows; r++) {
    const NR_T *xr = x + r * ldx, *dr = dy + r * lddy;
    for (int64_t i0 = 0; i0 < nv;) {
      const int64_t i1 = nv - i0 < NR_BLOCK - pending ? nv : i0 + (NR_BLOCK - pending);
      for (int64_t i = i0; i < i1; i += NR_LANES)
        _Pragma("GCC unroll 4") for (int j = 0; j < NR_NV; j++) {
          NR_LOAD(vd, dr + i + j * NR_VW);
          NR_LOAD(vx, xr + i + j * NR_VW);
          a1[j] += vd;
          a2[j] += vd * (vx - mv);
        }
      pending += i1 - i0;
      i0 = i1;
      if (pending == NR_BLOCK) {
        NR_TO_DOUBLE(d1, a1);
        NR_TO_DOUBLE(d2, a2);
        for (int j = 0; j < NR_NV; j++) a1[j] = a2[j] = (NR_NAME(vec)){0};
        pending = 0;
      }
    }
    for (int64_t i = nv, k = 0; i < n; i++, k++) {
      t1[k] += (double)dr[i];
      t2[k] += (double)(dr[i] * (xr[i] - m));
    }
  }
  NR_TO_DOUBLE(d1, a1);
  NR_TO_DOUBLE(d2, a2);
  double a, b;
  NR_FOLD2(a, d1, t1);
  NR_FOLD2(b, d2, t2);
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
