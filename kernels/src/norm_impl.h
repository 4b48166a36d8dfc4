/* norm_impl.h — the row and channel walks of the normalisation kernels,
 * written once as a template over the compute type (norm.c includes it for
 * float and for double).  Defined by the includer:
 *   NI_T            float or double
 *   NI_DT           its nrt_dtype
 *   NI(x)           the names to give
 *   NI_F(fn)        the run primitive fn of norm_rows.h for NI_T
 *   NI_LOAD(t, p)   one element of dtype t as NI_T
 *   NI_STORE(t,p,v) store v rounded to dtype t
 * The plan (norm_plan, norm.c) holds the operands, sizes and the weight and
 * bias already converted to NI_T. */

/* n elements of operand dtype t at p (byte stride s) as NI_T: the memory
 * itself when it already is contiguous NI_T, else a converted copy in buf */
static const NI_T *NI(run_in)(nrt_dtype t, const char *p, int64_t s, int64_t n, NI_T *buf) {
  if (t == NI_DT && (s == (int64_t)sizeof(NI_T) || n <= 1)) return (const NI_T *)p;
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
    NI_T *yr = NI(run_out)((nrt_dtype)y->dtype, yp, y->strides[1], L, buf + L);
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
    NI(run_store)((nrt_dtype)y->dtype, yp, y->strides[1], L, yr);
    if (mo->sizes[0]) NI(vec_put)(mo, r, mean);
    if (ro->sizes[0]) NI(vec_put)(ro, r, rstd);
  }
  free(buf);
}

/* dx of each row; for GROUP also the per (n, channel) sums that dweight and
 * dbias need (p->scratch: sum dy and sum dy * (x - mean), 2 per channel). */
static void NI(rows_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *dxo = &p->o[0], *dy = &p->o[3], *x = &p->o[4], *mo = &p->o[5], *ro = &p->o[6];
  const int64_t L = p->L;
  const NI_T *w = p->w;
  const int want_dx = dxo->sizes[0] != 0, group = p->prm.kind == NK_NORM_GROUP;
  if (!want_dx && !group) return;
  NI_T *buf = malloc((size_t)(3 * L) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const NI_T *xr = NI(run_in)((nrt_dtype)x->dtype, (const char *)x->data + r * x->strides[0],
                                x->strides[1], L, buf);
    const NI_T *dyr = NI(run_in)((nrt_dtype)dy->dtype, (const char *)dy->data + r * dy->strides[0],
                                 dy->strides[1], L, buf + L);
    const NI_T mean = p->prm.kind == NK_NORM_RMS ? (NI_T)0 : NI(vec_at)(mo, r);
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
    if (!want_dx) continue;
    /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w */
    const double rs = (double)rstd, n = (double)L;
    const double bb = -rs * rs * rs * s2 / n;
    const double cc = p->prm.kind == NK_NORM_RMS ? 0.0 : -rs * s1 / n - bb * (double)mean;
    char *dxp = (char *)dxo->data + r * dxo->strides[0];
    NI_T *dxr = NI(run_out)((nrt_dtype)dxo->dtype, dxp, dxo->strides[1], L, buf + 2 * L);
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
  free(buf);
}

/* LAYER/RMS dweight, dbias partials: unit = (chunk of NORM_ROWS rows,
 * block of NORM_COLS columns), rows in order; p->partial holds per chunk
 * the column sums of dy * (x - mean) * rstd and of dy (L each, double),
 * added over chunks in order afterwards (norm.c). */
static void NI(cols_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *gwo = &p->o[1], *gbo = &p->o[2], *dy = &p->o[3], *x = &p->o[4],
                    *mo = &p->o[5], *ro = &p->o[6];
  const int64_t L = p->L, nblk = (L + NORM_COLS - 1) / NORM_COLS;
  NI_T *buf = malloc((size_t)(2 * NORM_COLS) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  for (int64_t u = begin; u < end; u++) {
    const int64_t chunk = u / nblk, blk = u % nblk;
    const int64_t j0 = blk * NORM_COLS, n = L - j0 < NORM_COLS ? L - j0 : NORM_COLS;
    const int64_t r0 = chunk * NORM_ROWS, r1 = p->R - r0 < NORM_ROWS ? p->R : r0 + NORM_ROWS;
    double *gw = p->partial + chunk * 2 * L + j0, *gb = gw + L;
    for (int64_t j = 0; j < n; j++) gw[j] = gb[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
      const NI_T *xr = NI(run_in)((nrt_dtype)x->dtype,
                                  (const char *)x->data + r * x->strides[0] + j0 * x->strides[1],
                                  x->strides[1], n, buf);
      const NI_T *dyr =
          NI(run_in)((nrt_dtype)dy->dtype,
                     (const char *)dy->data + r * dy->strides[0] + j0 * dy->strides[1],
                     dy->strides[1], n, buf + NORM_COLS);
      const NI_T mean = p->prm.kind == NK_NORM_RMS ? (NI_T)0 : NI(vec_at)(mo, r);
      NI_F(colsums)(gwo->sizes[0] ? gw : NULL, gbo->sizes[0] ? gb : NULL, dyr, xr, n, mean,
                    NI(vec_at)(ro, r));
    }
  }
  free(buf);
}

/* --------------------------------------------------- channels: batch norm */

/* channel c's statistics: mean and invstd (batch or running) */
static void NI(channel_stats)(norm_plan *p, const nrt_operand *x, int64_t c, NI_T *buf,
                              double *mean, double *invstd, double *var_sum) {
  const int64_t N = x->sizes[0], S = x->sizes[2];
  const nrt_dtype t = (nrt_dtype)x->dtype;
  const double cnt = (double)(N * S);
  double s = 0;
  for (int64_t n = 0; n < N; n++)
    s += NI_F(sum)(NI(run_in)(t, (const char *)x->data + n * x->strides[0] + c * x->strides[1],
                              x->strides[2], S, buf),
                   S);
  const NI_T m = (NI_T)(s / cnt);
  double v = 0;
  for (int64_t n = 0; n < N; n++)
    v += NI_F(sumsq)(NI(run_in)(t, (const char *)x->data + n * x->strides[0] + c * x->strides[1],
                                x->strides[2], S, buf),
                     S, m);
  *mean = (double)m;
  *var_sum = v;
  *invstd = 1.0 / sqrt(v / cnt + p->prm.eps);
}

static void NI(channels_forward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *y = &p->o[0], *smo = &p->o[1], *sio = &p->o[2], *x = &p->o[3],
                    *rmo = &p->o[6], *rvo = &p->o[7];
  const int64_t N = x->sizes[0], S = x->sizes[2];
  NI_T *buf = malloc((size_t)(2 * S) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  for (int64_t c = begin; c < end; c++) {
    double mean, invstd, var_sum;
    if (p->prm.training) {
      NI(channel_stats)(p, x, c, buf, &mean, &invstd, &var_sum);
      if (smo->sizes[0]) NI(vec_put)(smo, c, (NI_T)mean);
      if (sio->sizes[0]) NI(vec_put)(sio, c, (NI_T)invstd);
      const double mom = p->prm.momentum, cnt = (double)(N * S);
      if (rmo->sizes[0]) NI(vec_put)(rmo, c, (NI_T)(mom * mean + (1 - mom) * (double)NI(vec_at)(rmo, c)));
      if (rvo->sizes[0])
        NI(vec_put)(rvo, c, (NI_T)(mom * var_sum / (cnt - 1) + (1 - mom) * (double)NI(vec_at)(rvo, c)));
    } else {
      mean = (double)NI(vec_at)(rmo, c);
      invstd = 1.0 / sqrt((double)NI(vec_at)(rvo, c) + p->prm.eps);
    }
    const NI_T *w = p->w, *b = p->b;
    const NI_T alpha = (NI_T)(invstd * (w ? (double)w[c] : 1.0));
    const NI_T beta = (b ? b[c] : (NI_T)0) - (NI_T)mean * alpha;
    for (int64_t n = 0; n < N; n++) {
      const char *xp = (const char *)x->data + n * x->strides[0] + c * x->strides[1];
      char *yp = (char *)y->data + n * y->strides[0] + c * y->strides[1];
      const NI_T *xr = NI(run_in)((nrt_dtype)x->dtype, xp, x->strides[2], S, buf);
      NI_T *yr = NI(run_out)((nrt_dtype)y->dtype, yp, y->strides[2], S, buf + S);
      NI_F(apply)(yr, xr, S, alpha, beta, NULL, NULL);
      NI(run_store)((nrt_dtype)y->dtype, yp, y->strides[2], S, yr);
    }
  }
  free(buf);
}

static void NI(channels_backward)(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  norm_plan *p = arg;
  const nrt_operand *dxo = &p->o[0], *gwo = &p->o[1], *gbo = &p->o[2], *dy = &p->o[3],
                    *x = &p->o[4], *mo = &p->o[5], *so = &p->o[6];
  const int64_t N = x->sizes[0], S = x->sizes[2];
  NI_T *buf = malloc((size_t)(3 * S) * sizeof(NI_T));
  if (!buf) {
    atomic_store(&p->oom, 1);
    return;
  }
  const int train = p->prm.training;
  for (int64_t c = begin; c < end; c++) {
    const double mean = (double)NI(vec_at)(mo, c);
    const double invstd =
        train ? (double)NI(vec_at)(so, c) : 1.0 / sqrt((double)NI(vec_at)(so, c) + p->prm.eps);
    double s1 = 0, s2 = 0; /* sum dy, sum dy * (x - mean) */
    if (train || gwo->sizes[0] || gbo->sizes[0]) {
      for (int64_t n = 0; n < N; n++) {
        const NI_T *xr = NI(run_in)((nrt_dtype)x->dtype,
                                    (const char *)x->data + n * x->strides[0] + c * x->strides[1],
                                    x->strides[2], S, buf);
        const NI_T *dyr = NI(run_in)((nrt_dtype)dy->dtype,
                                     (const char *)dy->data + n * dy->strides[0] + c * dy->strides[1],
                                     dy->strides[2], S, buf + S);
        NI_F(dsums)(dyr, xr, NULL, S, (NI_T)mean, &s1, &s2);
      }
    }
    if (gwo->sizes[0]) NI(vec_put)(gwo, c, (NI_T)(s2 * invstd));
    if (gbo->sizes[0]) NI(vec_put)(gbo, c, (NI_T)s1);
    if (!dxo->sizes[0]) continue;
    const double wc = p->w ? (double)((const NI_T *)p->w)[c] : 1.0, cnt = (double)(N * S);
    double a = invstd * wc, bb = 0, cc = 0;
    if (train) {
      const double k = s2 * invstd * invstd / cnt, gm = s1 / cnt;
      bb = -k * a;
      cc = (mean * k - gm) * a;
    }
    for (int64_t n = 0; n < N; n++) {
      const NI_T *xr = NI(run_in)((nrt_dtype)x->dtype,
                                  (const char *)x->data + n * x->strides[0] + c * x->strides[1],
                                  x->strides[2], S, buf);
      const NI_T *dyr = NI(run_in)((nrt_dtype)dy->dtype,
                                   (const char *)dy->data + n * dy->strides[0] + c * dy->strides[1],
                                   dy->strides[2], S, buf + S);
      char *dxp = (char *)dxo->data + n * dxo->strides[0] + c * dxo->strides[1];
      NI_T *dxr = NI(run_out)((nrt_dtype)dxo->dtype, dxp, dxo->strides[2], S, buf + 2 * S);
      NI_F(dx)(dxr, dyr, xr, NULL, S, (NI_T)a, (NI_T)bb, (NI_T)cc);
      NI(run_store)((nrt_dtype)dxo->dtype, dxp, dxo->strides[2], S, dxr);
    }
  }
  free(buf);
}
