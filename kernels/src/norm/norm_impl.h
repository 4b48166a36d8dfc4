/* norm_impl.h — the row and channel walks of the normalisation kernels,
 * written once as a template over the compute type (norm.c includes it for
 * float and for double).  Defined by the includer:
 *   NI_T            float or double
 *   NI_DT           its nrt_dtype
 *   NI(x)           the names to give
 *   NI_F(fn)        the run primitive fn of norm_rows.h for NI_T
 *   NI_LOAD(t, p)   one element of dtype t as NI_T
 *   NI_STORE(t,p,v) store v rounded to dtype t
 *   NI_HALF         (optional, float) runs convert with half_rows.h
 * The plan (norm_plan, norm.c) holds the operands, sizes and the weight and
 * bias already converted to NI_T. */

/* n elements of operand dtype t at p (byte stride s) as NI_T: the memory
 * itself when it already is contiguous NI_T, else a converted copy in buf */
static const NI_T *NI(run_in)(nrt_dtype t, const char *p, int64_t s, int64_t n, NI_T *buf) {
  if (t == NI_DT && (s == (int64_t)sizeof(NI_T) || n <= 1)) return (const NI_T *)p;
#ifdef NI_HALF
  if (s != 0) return nk_half_in(t, p, s, n, buf); /* vectorised widening */
#endif
  for (int64_t i = 0; i < n; i++) buf[i] = NI_LOAD(t, p + i * s);
  return buf;
}

/* where to compute n outputs: the memory itself when it is contiguous NI_T */
static NI_T *NI(run_out)(nrt_dtype t, char *p, int64_t s, int64_t n, NI_T *buf) {
  return t == NI_DT && (s == (int64_t)sizeof(NI_T) || n <= 1) ? (NI_T *)p : buf;
}

/* stores a run computed by run_out's choice */
static void NI(run_store)(nrt_dtype t, char *p, int64_t s, int64_t n, const NI_T *v) {
  if ((const char *)v == p) return;
#ifdef NI_HALF
  if (s != 0) {
    nk_half_out(t, p, s, n, v);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) NI_STORE(t, p + i * s, v[i]);
}

static NI_T NI(vec_at)(const nrt_operand *o, int64_t i) {
  return NI_LOAD((nrt_dtype)o->dtype, (const char *)o->data + i * o->strides[0]);
}
static void NI(vec_put)(const nrt_operand *o, int64_t i, NI_T v) {
  NI_STORE((nrt_dtype)o->dtype, (char *)o->data + i * o->strides[0], v);
}

/* ------------------------------------------------- rows: layer, rms, group */

static void NI(rows_forward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *y = &p->o[0], *mo = &p->o[1], *ro = &p->o[2], *x = &p->o[3];
  const int64_t L = p->L;
  const NI_T *w = p->w, *b = p->b;
  NI_T *buf = malloc((size_t)(2 * L) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  /* A large output in the compute type with contiguous rows: each row is
   * computed in the buffer and streamed out (common/stream_store.h), not
   * stored in place, which read every line of y before writing it.  Paired
   * in one process on Zen 3 (2 threads), LayerNorm forward over outputs
   * beyond the L3: 16384 x 768 8.3-8.7 -> 7.5-8.8 ms, 8192 x 4096 18.6-21.4
   * -> 17.8-21.3 ms (0-13%, ~3% typical: the kernel runs near the
   * bandwidth the eager kernels reach here); over 4096 x 768 (L3-resident
   * in a loop) the same. */
  const int stream = y->dtype == NI_DT && (y->strides[1] == (int64_t)sizeof(NI_T) || L <= 1) &&
                     (double)p->R * (double)L * sizeof(NI_T) >= NK_STREAM_STORE_BYTES;
  for (int64_t r = begin; r < end; r++) {
    const char *xp = (const char *)x->data + r * x->strides[0];
    char *yp = (char *)y->data + r * y->strides[0];
    const NI_T *xr = NI(run_in)((nrt_dtype)x->dtype, xp, x->strides[1], L, buf);
    NI_T mean = 0, rstd;
    if (p->prm.kind == NK_NORM_RMS) {
      rstd = (NI_T)(1.0 / sqrt(NI_F(sumsq)(xr, L, 0) / (double)L + p->prm.eps));
    } else {
      mean = (NI_T)(NI_F(sum)(xr, L) / (double)L);
      double var = NI_F(sumsq)(xr, L, mean) / (double)L;
      rstd = (NI_T)(1.0 / sqrt(var + p->prm.eps));
    }
    NI_T *yr = stream ? buf + L : NI(run_out)((nrt_dtype)y->dtype, yp, y->strides[1], L, buf + L);
    if (p->prm.kind == NK_NORM_GROUP) {
      const int64_t hw = p->prm.hw, cg = L / hw, c0 = (r % p->prm.groups) * cg;
      for (int64_t k = 0; k < cg; k++) {
        NI_T scale = rstd * (w ? w[c0 + k] : (NI_T)1);
        NI_T shift = (b ? b[c0 + k] : (NI_T)0) - mean * scale;
        NI_F(apply)(yr + k * hw, xr + k * hw, hw, scale, shift, NULL, NULL);
      }
    } else {
      NI_F(apply)(yr, xr, L, rstd, -mean * rstd, w, b);
    }
    if (stream) nk_stream_bytes(yp, yr, (size_t)L * sizeof(NI_T));
    else NI(run_store)((nrt_dtype)y->dtype, yp, y->strides[1], L, yr);
    if (mo->sizes[0]) NI(vec_put)(mo, r, mean);
    if (ro->sizes[0]) NI(vec_put)(ro, r, rstd);
  }
  if (stream) nk_stream_fence();
  free(buf);
}

/* dx of row r (xr, dyr: its x and dy as NI_T; out: L elements of scratch);
 * for GROUP also the per (n, channel) sums that dweight and dbias need
 * (p->scratch: sum dy and sum dy * (x - mean), 2 per channel). */
/* Row r's saved mean (0 for RMS norm, which keeps none). */
static NI_T NI(mean_at)(const norm_plan *p, int64_t r) {
  return p->prm.kind == NK_NORM_RMS ? (NI_T)0 : NI(vec_at)(&p->o[5], r);
}

static void NI(row_backward)(norm_plan *p, int64_t r, const NI_T *xr, const NI_T *dyr, NI_T *out) {
  const nrt_operand *dxo = &p->o[0], *ro = &p->o[6];
  const int64_t L = p->L;
  const NI_T *w = p->w;
  const int want_dx = dxo->sizes[0] != 0, group = p->prm.kind == NK_NORM_GROUP;
  const NI_T mean = NI(mean_at)(p, r);
  const NI_T rstd = NI(vec_at)(ro, r);
  double s1 = 0, s2 = 0; /* sum dy * w, sum dy * w * (x - mean) */
  if (group) {
    const int64_t hw = p->prm.hw, cg = L / hw, c0 = (r % p->prm.groups) * cg;
    for (int64_t k = 0; k < cg; k++) {
      double d1 = 0, d2 = 0;
      NI_F(dsums)(dyr + k * hw, xr + k * hw, NULL, hw, mean, &d1, &d2);
      if (p->scratch) {
        p->scratch[2 * (r * cg + k)] = d1;
        p->scratch[2 * (r * cg + k) + 1] = d2;
      }
      const double wc = w ? (double)w[c0 + k] : 1.0;
      s1 += d1 * wc;
      s2 += d2 * wc;
    }
  } else {
    NI_F(dsums)(dyr, xr, w, L, mean, &s1, &s2);
  }
  if (!want_dx) return;
  /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w */
  const double rs = (double)rstd, n = (double)L;
  const double bb = -rs * rs * rs * s2 / n;
  const double cc = p->prm.kind == NK_NORM_RMS ? 0.0 : -rs * s1 / n - bb * (double)mean;
  char *dxp = (char *)dxo->data + r * dxo->strides[0];
  NI_T *dxr = NI(run_out)((nrt_dtype)dxo->dtype, dxp, dxo->strides[1], L, out);
  if (group) {
    const int64_t hw = p->prm.hw, cg = L / hw, c0 = (r % p->prm.groups) * cg;
    for (int64_t k = 0; k < cg; k++)
      NI_F(dx)(dxr + k * hw, dyr + k * hw, xr + k * hw, NULL, hw,
               (NI_T)(rs * (w ? (double)w[c0 + k] : 1.0)), (NI_T)bb, (NI_T)cc);
  } else {
    NI_F(dx)(dxr, dyr, xr, w, L, rstd, (NI_T)bb, (NI_T)cc);
  }
  NI(run_store)((nrt_dtype)dxo->dtype, dxp, dxo->strides[1], L, dxr);
}

/* Columns [j0, j0 + n) of row r of operand o (x or dy) as an NI_T run. */
static const NI_T *NI(run_of)(const nrt_operand *o, int64_t r, int64_t j0, int64_t n, NI_T *buf) {
  return NI(run_in)((nrt_dtype)o->dtype, (const char *)o->data + r * o->strides[0] + j0 * o->strides[1],
                    o->strides[1], n, buf);
}

static void NI(rows_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const int64_t L = p->L;
  if (p->o[0].sizes[0] == 0 && p->prm.kind != NK_NORM_GROUP) return;
  NI_T *buf = malloc((size_t)(3 * L) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  for (int64_t r = begin; r < end; r++)
    NI(row_backward)(p, r, NI(run_of)(&p->o[4], r, 0, L, buf), NI(run_of)(&p->o[3], r, 0, L, buf + L),
                     buf + 2 * L);
  free(buf);
}

/* LAYER/RMS dweight, dbias partials of rows [r0, r1), columns [j0, j0 +
 * n): gw, gb (n each, zeroed here) <- the column sums of dy * (x - mean) *
 * rstd and of dy, the rows in groups of NR_COLROWS from r0 (colsums), so
 * the bits depend on r0 only.  with_dx (whole rows): each row's dx too,
 * while its x and dy are in cache.  buf: (2 NR_COLROWS + with_dx) n. */
static void NI(chunk_sums)(norm_plan *p, int64_t r0, int64_t r1, int64_t j0, int64_t n, double *gw,
                           double *gb, int with_dx, NI_T *buf) {
  for (int64_t j = 0; j < n; j++) gw[j] = gb[j] = 0;
  for (int64_t r = r0; r < r1; r += NR_COLROWS) {
    const int k = r1 - r < NR_COLROWS ? (int)(r1 - r) : NR_COLROWS;
    const NI_T *xr[NR_COLROWS], *dyr[NR_COLROWS];
    NI_T mean[NR_COLROWS], rstd[NR_COLROWS];
    for (int i = 0; i < k; i++) {
      xr[i] = NI(run_of)(&p->o[4], r + i, j0, n, buf + 2 * i * n);
      dyr[i] = NI(run_of)(&p->o[3], r + i, j0, n, buf + (2 * i + 1) * n);
      mean[i] = NI(mean_at)(p, r + i);
      rstd[i] = NI(vec_at)(&p->o[6], r + i);
      if (with_dx) NI(row_backward)(p, r + i, xr[i], dyr[i], buf + 2 * NR_COLROWS * n);
    }
    NI_F(colsums)(p->o[1].sizes[0] ? gw : NULL, p->o[2].sizes[0] ? gb : NULL, dyr, xr, k, n, mean,
                  rstd);
  }
}

/* LAYER/RMS with dweight or dbias, on enough rows: unit = a chunk of
 * NORM_ROWS rows, each row's dx and then the chunk's column sums
 * (p->partial, as cols_backward's) while the rows are in cache: one pass
 * over x and dy instead of two.  The same chunk_sums as cols_backward, so
 * the same bits. */
static void NI(chunks_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const int64_t L = p->L;
  NI_T *buf = malloc((size_t)((2 * NR_COLROWS + 1) * L) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  for (int64_t chunk = begin; chunk < end; chunk++) {
    const int64_t r0 = chunk * NORM_ROWS, r1 = p->R - r0 < NORM_ROWS ? p->R : r0 + NORM_ROWS;
    double *gw = p->partial + chunk * 2 * L;
    NI(chunk_sums)(p, r0, r1, 0, L, gw, gw + L, p->o[0].sizes[0] != 0, buf);
  }
  free(buf);
}

/* LAYER/RMS dweight, dbias partials: unit = (chunk of NORM_ROWS rows,
 * block of NORM_COLS columns); p->partial holds per chunk the column sums
 * of dy * (x - mean) * rstd and of dy (L each, double), added over chunks
 * in order afterwards (norm.c). */
static void NI(cols_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const int64_t L = p->L, nblk = (L + NORM_COLS - 1) / NORM_COLS;
  NI_T *buf = malloc((size_t)(2 * NR_COLROWS * NORM_COLS) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    const int64_t chunk = u / nblk, blk = u % nblk;
    const int64_t j0 = blk * NORM_COLS, n = L - j0 < NORM_COLS ? L - j0 : NORM_COLS;
    const int64_t r0 = chunk * NORM_ROWS, r1 = p->R - r0 < NORM_ROWS ? p->R : r0 + NORM_ROWS;
    double *gw = p->partial + chunk * 2 * L + j0;
    NI(chunk_sums)(p, r0, r1, j0, n, gw, gw + L, 0, buf);
  }
  free(buf);
}

/* --------------------------------------------------- channels: batch norm
 * A unit is (channel c, chunk k of p->cr samples); a channel has p->uc
 * chunks (norm.c's chunk_plan: from the shape only).  With one chunk a
 * channel is one unit that does everything while its data is in cache
 * (statistics, then the apply or dx pass); with more, the units' partial
 * results (count, mean, M2 / sum dy, sum dy * (x - mean)) are combined per
 * channel in chunk order between two parallel passes. */

/* samples n0 .. n0 + rows - 1 of channel c of o as NI_T runs of S: o's own
 * memory when it is NI_T with contiguous planes (*ld = the sample stride in
 * elements), else a converted copy in buf (*ld = S) */
static const NI_T *NI(chan_in)(const nrt_operand *o, int64_t c, int64_t n0, int64_t rows,
                               NI_T *buf, int64_t *ld) {
  const int64_t S = o->sizes[2];
  const char *base = (const char *)o->data + n0 * o->strides[0] + c * o->strides[1];
  if (o->dtype == NI_DT && (o->strides[2] == (int64_t)sizeof(NI_T) || S == 1) &&
      o->strides[0] % (int64_t)sizeof(NI_T) == 0) {
    *ld = o->strides[0] / (int64_t)sizeof(NI_T);
    return (const NI_T *)base;
  }
  for (int64_t r = 0; r < rows; r++) {
    const NI_T *v = NI(run_in)((nrt_dtype)o->dtype, base + r * o->strides[0], o->strides[2], S, buf + r * S);
    if (v != buf + r * S) memcpy(buf + r * S, v, (size_t)S * sizeof(NI_T));
  }
  *ld = S;
  return buf;
}

/* does chan_in need a buffer for o? */
static int NI(chan_buffered)(const nrt_operand *o) {
  return !(o->dtype == NI_DT && (o->strides[2] == (int64_t)sizeof(NI_T) || o->sizes[2] == 1) &&
           o->strides[0] % (int64_t)sizeof(NI_T) == 0);
}

/* unit u: channel *c, samples [*n0, *n0 + returned count) */
static int64_t NI(unit_rows)(const norm_plan *p, int64_t u, int64_t *c, int64_t *n0) {
  *c = u / p->uc;
  *n0 = (u % p->uc) * p->cr;
  return p->N - *n0 < p->cr ? p->N - *n0 : p->cr;
}

/* the unit's mean (rounded to NI_T: the mean it centres on) and its sum of
 * squared deviations from it: two passes over the (cached) unit */
static void NI(unit_stats)(const norm_plan *p, const NI_T *x, int64_t rows, int64_t ld, double *mean,
                           double *m2) {
  const int64_t S = p->S;
  const NI_T m = (NI_T)(NI_F(msum)(x, rows, ld, S) / (double)(rows * S));
  *mean = (double)m;
  *m2 = NI_F(msumsq)(x, rows, ld, S, m);
}

/* channel c's statistics are mean and m2 (sum of squared deviations; both
 * unused in evaluation): stores them and the running statistics, returns
 * y's scale and shift in ab[0], ab[1] */
static void NI(chan_finish)(norm_plan *p, int64_t c, double mean, double m2, double *ab) {
  const nrt_operand *smo = &p->o[1], *sio = &p->o[2], *rmo = &p->o[6], *rvo = &p->o[7];
  double invstd;
  if (p->prm.training) {
    const double cnt = (double)(p->N * p->S);
    invstd = 1.0 / sqrt(m2 / cnt + p->prm.eps);
    if (smo->sizes[0]) NI(vec_put)(smo, c, (NI_T)mean);
    if (sio->sizes[0]) NI(vec_put)(sio, c, (NI_T)invstd);
    const double mom = p->prm.momentum;
    if (rmo->sizes[0]) NI(vec_put)(rmo, c, (NI_T)(mom * mean + (1 - mom) * (double)NI(vec_at)(rmo, c)));
    if (rvo->sizes[0])
      NI(vec_put)(rvo, c, (NI_T)(mom * m2 / (cnt - 1) + (1 - mom) * (double)NI(vec_at)(rvo, c)));
  } else {
    mean = (double)NI(vec_at)(rmo, c);
    invstd = 1.0 / sqrt((double)NI(vec_at)(rvo, c) + p->prm.eps);
  }
  const NI_T *w = p->w, *b = p->b;
  const NI_T alpha = (NI_T)(invstd * (w ? (double)w[c] : 1.0));
  ab[0] = (double)alpha;
  ab[1] = (double)((b ? b[c] : (NI_T)0) - (NI_T)mean * alpha);
}

/* y = x * alpha + beta over a unit (x as chan_in gave it) */
static void NI(unit_apply)(norm_plan *p, int64_t c, int64_t n0, int64_t rows, const NI_T *x, int64_t ld,
                           const double *ab, NI_T *out) {
  const nrt_operand *y = &p->o[0];
  const int64_t S = p->S;
  if (!NI(chan_buffered)(y)) { /* NI_T planes: all runs in one call */
    NI_F(mapply)((NI_T *)((char *)y->data + n0 * y->strides[0] + c * y->strides[1]),
                 y->strides[0] / (int64_t)sizeof(NI_T), x, ld, rows, S, (NI_T)ab[0], (NI_T)ab[1]);
    return;
  }
  for (int64_t r = 0; r < rows; r++) {
    char *yp = (char *)y->data + (n0 + r) * y->strides[0] + c * y->strides[1];
    NI_T *yr = NI(run_out)((nrt_dtype)y->dtype, yp, y->strides[2], S, out);
    NI_F(apply)(yr, x + r * ld, S, (NI_T)ab[0], (NI_T)ab[1], NULL, NULL);
    NI(run_store)((nrt_dtype)y->dtype, yp, y->strides[2], S, yr);
  }
}

/* a unit's buffers: a (and b) converted when chan_in needs it, one output
 * run; NULL (oom set) when out of memory */
static NI_T *NI(unit_buf)(norm_plan *p, const nrt_operand *a, const nrt_operand *b, NI_T **ba,
                          NI_T **bb, NI_T **bo) {
  const int64_t n = p->cr * p->S;
  const int64_t na = NI(chan_buffered)(a) ? n : 0, nb = b && NI(chan_buffered)(b) ? n : 0;
  NI_T *buf = malloc((size_t)(na + nb + p->S) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return NULL;
  }
  *ba = buf;
  if (bb) *bb = buf + na;
  *bo = buf + na + nb;
  return buf;
}

/* forward, one chunk per channel: everything of channels [begin, end) */
static void NI(channels_forward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *x = &p->o[3];
  NI_T *bx, *bo;
  NI_T *buf = NI(unit_buf)(p, x, NULL, &bx, NULL, &bo);
  if (!buf) return;
  for (int64_t c = begin; c < end; c++) {
    double mean = 0, m2 = 0, ab[2];
    int64_t ld;
    const NI_T *xc = NI(chan_in)(x, c, 0, p->N, bx, &ld);
    if (p->prm.training) NI(unit_stats)(p, xc, p->N, ld, &mean, &m2);
    NI(chan_finish)(p, c, mean, m2, ab);
    NI(unit_apply)(p, c, 0, p->N, xc, ld, ab, bo);
  }
  free(buf);
}

/* The chunked passes' common walk: units [begin, end) loaded (x, and dy
 * for the backward steps) and handed to one step. */
#ifndef NI_STEPS_DEFINED
#define NI_STEPS_DEFINED
enum { NI_STATS, NI_APPLY, NI_DSUMS, NI_DX };
#endif
static void NI(unit_dx)(norm_plan *p, int64_t c, int64_t n0, int64_t rows, const NI_T *dy, int64_t lddy,
                        const NI_T *x, int64_t ldx, const double *k3, NI_T *out);
static void NI(units_walk)(norm_plan *p, int64_t begin, int64_t end, int step) {
  const int backward = step == NI_DSUMS || step == NI_DX;
  const nrt_operand *x = &p->o[backward ? 4 : 3], *dy = backward ? &p->o[3] : NULL;
  NI_T *bx, *bd = NULL, *bo;
  NI_T *buf = NI(unit_buf)(p, x, dy, &bx, backward ? &bd : NULL, &bo);
  if (!buf) return;
  for (int64_t u = begin; u < end; u++) {
    int64_t c, n0, ldx, ldd = 0;
    const int64_t rows = NI(unit_rows)(p, u, &c, &n0);
    const NI_T *xc = NI(chan_in)(x, c, n0, rows, bx, &ldx);
    const NI_T *dc = backward ? NI(chan_in)(dy, c, n0, rows, bd, &ldd) : NULL;
    switch (step) {
    case NI_STATS: NI(unit_stats)(p, xc, rows, ldx, &p->part[2 * u], &p->part[2 * u + 1]); break;
    case NI_APPLY: NI(unit_apply)(p, c, n0, rows, xc, ldx, &p->ab[2 * c], bo); break;
    case NI_DSUMS: {
      double s1 = 0, s2 = 0;
      NI_F(mdsums)(dc, ldd, xc, ldx, rows, p->S, (NI_T)NI(vec_at)(&p->o[5], c), &s1, &s2);
      p->part[2 * u] = s1;
      p->part[2 * u + 1] = s2;
      break;
    }
    default: NI(unit_dx)(p, c, n0, rows, dc, ldd, xc, ldx, &p->ab[3 * c], bo); break;
    }
  }
  free(buf);
}

/* forward, chunked, pass 1: each unit's mean and M2 into p->part */
static void NI(units_stats)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  NI(units_walk)(arg, begin, end, NI_STATS);
}

/* forward, chunked, between the passes: channels [begin, end) combine
 * their units in order (Chan et al.'s pairwise update) into p->ab */
static void NI(chans_combine)(norm_plan *p, int64_t begin, int64_t end) {
  for (int64_t c = begin; c < end; c++) {
    double cnt = 0, mean = 0, m2 = 0;
    if (p->prm.training)
      for (int64_t k = 0; k < p->uc; k++) {
        int64_t cc, n0;
        const double nb = (double)(NI(unit_rows)(p, c * p->uc + k, &cc, &n0) * p->S);
        const double mb = p->part[2 * (c * p->uc + k)], m2b = p->part[2 * (c * p->uc + k) + 1];
        const double d = mb - mean, nab = cnt + nb;
        mean += d * (nb / nab);
        m2 += m2b + d * d * (cnt * nb / nab);
        cnt = nab;
      }
    NI(chan_finish)(p, c, mean, m2, &p->ab[2 * c]);
  }
}

/* forward, chunked, pass 2: y of each unit */
static void NI(units_apply)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  NI(units_walk)(arg, begin, end, NI_APPLY);
}

/* backward: does channel c need sum dy and sum dy * (x - mean)? */
static int NI(want_dsums)(const norm_plan *p) {
  return p->prm.training || p->o[1].sizes[0] || p->o[2].sizes[0];
}

/* backward, channel c's sums are s1 (dy), s2 (dy * (x - mean)): stores
 * dweight, dbias; returns dx = a * dy + b * x + c as k[0..2] */
static void NI(chan_dfinish)(norm_plan *p, int64_t c, double s1, double s2, double *k3) {
  const nrt_operand *gwo = &p->o[1], *gbo = &p->o[2], *mo = &p->o[5], *so = &p->o[6];
  const int train = p->prm.training;
  const double mean = (double)NI(vec_at)(mo, c);
  const double invstd =
      train ? (double)NI(vec_at)(so, c) : 1.0 / sqrt((double)NI(vec_at)(so, c) + p->prm.eps);
  if (gwo->sizes[0]) NI(vec_put)(gwo, c, (NI_T)(s2 * invstd));
  if (gbo->sizes[0]) NI(vec_put)(gbo, c, (NI_T)s1);
  const double wc = p->w ? (double)((const NI_T *)p->w)[c] : 1.0, cnt = (double)(p->N * p->S);
  double a = invstd * wc, bb = 0, cc = 0;
  if (train) {
    const double k = s2 * invstd * invstd / cnt, gm = s1 / cnt;
    bb = -k * a;
    cc = (mean * k - gm) * a;
  }
  k3[0] = a;
  k3[1] = bb;
  k3[2] = cc;
}

/* dx over a unit */
static void NI(unit_dx)(norm_plan *p, int64_t c, int64_t n0, int64_t rows, const NI_T *dy, int64_t lddy,
                        const NI_T *x, int64_t ldx, const double *k3, NI_T *out) {
  const nrt_operand *dxo = &p->o[0];
  const int64_t S = p->S;
  if (!NI(chan_buffered)(dxo)) { /* NI_T planes: all runs in one call */
    NI_F(mdx)((NI_T *)((char *)dxo->data + n0 * dxo->strides[0] + c * dxo->strides[1]),
              dxo->strides[0] / (int64_t)sizeof(NI_T), dy, lddy, x, ldx, rows, S, (NI_T)k3[0],
              (NI_T)k3[1], (NI_T)k3[2]);
    return;
  }
  for (int64_t r = 0; r < rows; r++) {
    char *dxp = (char *)dxo->data + (n0 + r) * dxo->strides[0] + c * dxo->strides[1];
    NI_T *dxr = NI(run_out)((nrt_dtype)dxo->dtype, dxp, dxo->strides[2], S, out);
    NI_F(dx)(dxr, dy + r * lddy, x + r * ldx, NULL, S, (NI_T)k3[0], (NI_T)k3[1], (NI_T)k3[2]);
    NI(run_store)((nrt_dtype)dxo->dtype, dxp, dxo->strides[2], S, dxr);
  }
}

/* backward, one chunk per channel: everything of channels [begin, end) */
static void NI(channels_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *dy = &p->o[3], *x = &p->o[4];
  NI_T *bx, *bd, *bo;
  NI_T *buf = NI(unit_buf)(p, x, dy, &bx, &bd, &bo);
  if (!buf) return;
  const int sums = NI(want_dsums)(p), want_dx = p->o[0].sizes[0] != 0;
  for (int64_t c = begin; c < end; c++) {
    int64_t ldx, ldd;
    const NI_T *xc = NI(chan_in)(x, c, 0, p->N, bx, &ldx);
    const NI_T *dc = NI(chan_in)(dy, c, 0, p->N, bd, &ldd);
    double s1 = 0, s2 = 0, k3[3];
    if (sums) NI_F(mdsums)(dc, ldd, xc, ldx, p->N, p->S, (NI_T)NI(vec_at)(&p->o[5], c), &s1, &s2);
    NI(chan_dfinish)(p, c, s1, s2, k3);
    if (want_dx) NI(unit_dx)(p, c, 0, p->N, dc, ldd, xc, ldx, k3, bo);
  }
  free(buf);
}

/* backward, chunked, pass 1: each unit's two sums into p->part */
static void NI(units_dsums)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  NI(units_walk)(arg, begin, end, NI_DSUMS);
}

/* backward, chunked, between the passes: the units' sums in order */
static void NI(chans_dcombine)(norm_plan *p, int64_t begin, int64_t end) {
  const int sums = NI(want_dsums)(p);
  for (int64_t c = begin; c < end; c++) {
    double s1 = 0, s2 = 0;
    if (sums)
      for (int64_t k = 0; k < p->uc; k++) {
        s1 += p->part[2 * (c * p->uc + k)];
        s2 += p->part[2 * (c * p->uc + k) + 1];
      }
    NI(chan_dfinish)(p, c, s1, s2, &p->ab[3 * c]);
  }
}

/* backward, chunked, pass 2: dx of each unit */
static void NI(units_dx)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  NI(units_walk)(arg, begin, end, NI_DX);
}
