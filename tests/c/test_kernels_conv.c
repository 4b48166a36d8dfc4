/* test_kernels_conv.c — NK_KERNEL_CONV against a naive reference written
 * from the definition (one loop over every (n, o, position, c, k) term in
 * double): forward with and without bias, input and weight gradients,
 * im2col and col2im, over 1-3 spatial dims, stride/padding/dilation/groups
 * (depthwise included), channels-last and strided layouts, all four float
 * dtypes, empty batches, the chunked path, and the validation errors.
 * bfloat16 runs both ways: its operands on the dot-product GEMM (where the
 * CPU has AVX512_BF16 and the ISA is avx512) and widened to float32
 * (TORCHNEURON_CONV_BF16_DOT=1 / 0, on each path; and the portable/avx2
 * runs), besides conv.c's own choice.  The direct 3x3 kernels
 * (conv_direct.c) run by conv.c's choice, forced wherever the shape allows
 * (TORCHNEURON_CONV_DIRECT=1) and off ("0"). */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

typedef struct conv_case {
  nrt_dtype t;
  int nd;
  int64_t n, c, o, groups;
  int64_t in[3], k[3], s[3], p[3], d[3];
  int layout; /* 0 contiguous, 1 channels last, 2 every other element (strided) */
} conv_case;

static double getv(nrt_dtype t, const void *p) {
  switch (t) {
  case NRT_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return tk_f16_value(h); }
  case NRT_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return tk_bf16_value(h); }
  case NRT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
  default: { double d; memcpy(&d, p, 8); return d; }
  }
}
static void putv(nrt_dtype t, void *p, double v) {
  tk_value x = {0};
  x.f = v;
  tk_put(t, p, x);
}

/* A tensor (A, B, spatial nd) in a given layout; elements strides. */
typedef struct tens {
  nrt_operand op;
  char *mem;
  int64_t numel, span;
} tens;

static tens make(nrt_dtype t, int nd, const int64_t *sizes, int layout) {
  tens x;
  memset(&x, 0, sizeof x);
  const int ndim = 2 + nd;
  int64_t st[5], step = layout == 2 ? 2 : 1;
  x.numel = 1;
  for (int d = 0; d < ndim; d++) x.numel *= sizes[d];
  if (layout == 1) { /* order: A, spatial..., B (B innermost) */
    st[1] = step;
    step *= sizes[1];
    for (int d = ndim - 1; d >= 2; d--) {
      st[d] = step;
      step *= sizes[d];
    }
    st[0] = step;
    step *= sizes[0];
  } else {
    for (int d = ndim - 1; d >= 0; d--) {
      st[d] = step;
      step *= sizes[d];
    }
  }
  x.span = step;
  x.mem = tk_alloc((size_t)(step * tk_size(t)) + 8);
  x.op = tk_operand(x.mem, t, ndim, sizes, st);
  return x;
}

/* element at logical index idx[] (ndim entries) */
static char *at(const tens *x, const int64_t *idx) {
  char *p = x->op.data;
  for (int d = 0; d < x->op.ndim; d++) p += idx[d] * x->op.strides[d];
  return p;
}

static void fill_random(tens *x) {
  int64_t idx[5] = {0};
  for (int64_t e = 0; e < x->numel; e++) {
    int64_t r = e;
    for (int d = x->op.ndim - 1; d >= 0; d--) {
      idx[d] = r % x->op.sizes[d];
      r /= x->op.sizes[d];
    }
    putv((nrt_dtype)x->op.dtype, at(x, idx), (double)((int64_t)(tk_rand() % 2001) - 1000) / 1000.0);
  }
}

static double tol(nrt_dtype t) {
  return t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 1e-5 : t == NRT_FLOAT16 ? 2e-3 : 1.6e-2;
}

/* compares x with the double reference ref (row-major over logical sizes) */
static int close_to(const tens *x, const double *ref, double scale) {
  int64_t idx[5] = {0};
  const nrt_dtype t = (nrt_dtype)x->op.dtype;
  for (int64_t e = 0; e < x->numel; e++) {
    int64_t r = e;
    for (int d = x->op.ndim - 1; d >= 0; d--) {
      idx[d] = r % x->op.sizes[d];
      r /= x->op.sizes[d];
    }
    const double got = getv(t, at(x, idx));
    if (!(fabs(got - ref[e]) <= tol(t) * (scale + fabs(ref[e])))) {
      fprintf(stderr, "  element %lld: got %.9g want %.9g\n", (long long)e, got, ref[e]);
      return 0;
    }
  }
  return 1;
}

static void pad3(const conv_case *c, int64_t in[3], int64_t k[3], int64_t s[3], int64_t p[3],
                 int64_t d[3]) {
  for (int i = 0; i < 3; i++) {
    const int src = i - (3 - c->nd);
    in[i] = src < 0 ? 1 : c->in[src];
    k[i] = src < 0 ? 1 : c->k[src];
    s[i] = src < 0 ? 1 : c->s[src];
    p[i] = src < 0 ? 0 : c->p[src];
    d[i] = src < 0 ? 1 : c->d[src];
  }
}

static int bf16_only; /* check_case skips other dtypes */

static void check_case(const conv_case *cc) {
  const nrt_dtype t = cc->t;
  if (bf16_only && t != NRT_BFLOAT16) return;
  int64_t in[3], k[3], s[3], p[3], d[3], out[3];
  pad3(cc, in, k, s, p, d);
  int64_t lprod = 1, iprod = 1, kprod = 1;
  for (int i = 0; i < 3; i++) {
    out[i] = (in[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
    lprod *= out[i];
    iprod *= in[i];
    kprod *= k[i];
  }
  const int nd = cc->nd;
  const int64_t cg = cc->c / cc->groups, og = cc->o / cc->groups;
  int64_t xs[5] = {cc->n, cc->c}, ys[5] = {cc->n, cc->o}, ws[5] = {cc->o, cg};
  for (int i = 0; i < nd; i++) {
    xs[2 + i] = in[3 - nd + i];
    ys[2 + i] = out[3 - nd + i];
    ws[2 + i] = k[3 - nd + i];
  }
  tens x = make(t, nd, xs, cc->layout), w = make(t, nd, ws, cc->layout == 1 ? 1 : 0);
  tens y = make(t, nd, ys, cc->layout), dy = make(t, nd, ys, cc->layout == 2 ? 2 : 0);
  tens dx = make(t, nd, xs, cc->layout), dw = make(t, nd, ws, cc->layout);
  int64_t bs = cc->o;
  tens b;
  memset(&b, 0, sizeof b);
  b.mem = tk_alloc((size_t)(cc->o * tk_size(t)) + 8);
  b.op = tk_operand(b.mem, t, 1, &bs, NULL);
  fill_random(&x);
  fill_random(&w);
  fill_random(&dy);
  for (int64_t o = 0; o < cc->o; o++) putv(t, b.mem + o * tk_size(t), (double)(o % 7) / 8.0 - 0.3);
  /* poison the outputs: the kernel must overwrite them */
  memset(y.mem, 0x7f, (size_t)(y.span * tk_size(t)));
  memset(dx.mem, 0x7f, (size_t)(dx.span * tk_size(t)));
  memset(dw.mem, 0x7f, (size_t)(dw.span * tk_size(t)));

  double *ry = calloc((size_t)(cc->n * cc->o * lprod + 1), sizeof(double));
  double *rdx = calloc((size_t)(cc->n * cc->c * iprod + 1), sizeof(double));
  double *rdw = calloc((size_t)(cc->o * cg * kprod + 1), sizeof(double));
  int64_t ix[5], iy[5], iw[5];
  for (int64_t n = 0; n < cc->n; n++)
    for (int64_t o = 0; o < cc->o; o++)
      for (int64_t l = 0; l < lprod; l++) {
        const int64_t o0 = l / (out[1] * out[2]), o1 = l / out[2] % out[1], o2 = l % out[2];
        iy[0] = n;
        iy[1] = o;
        const int64_t oc[3] = {o0, o1, o2};
        for (int i = 0; i < nd; i++) iy[2 + i] = oc[3 - nd + i];
        const double gy = getv(t, at(&dy, iy));
        double acc = getv(t, b.mem + o * tk_size(t));
        for (int64_t c = 0; c < cg; c++)
          for (int64_t kr = 0; kr < kprod; kr++) {
            const int64_t kc[3] = {kr / (k[1] * k[2]), kr / k[2] % k[1], kr % k[2]};
            int64_t ic[3];
            int ok = 1;
            for (int i = 0; i < 3; i++) {
              ic[i] = oc[i] * s[i] - p[i] + kc[i] * d[i];
              if (ic[i] < 0 || ic[i] >= in[i]) ok = 0;
            }
            if (!ok) continue;
            const int64_t ch = o / og * cg + c;
            ix[0] = n;
            ix[1] = ch;
            iw[0] = o;
            iw[1] = c;
            for (int i = 0; i < nd; i++) {
              ix[2 + i] = ic[3 - nd + i];
              iw[2 + i] = kc[3 - nd + i];
            }
            const double xv = getv(t, at(&x, ix)), wv = getv(t, at(&w, iw));
            acc += xv * wv;
            rdx[(n * cc->c + ch) * iprod + (ic[0] * in[1] + ic[1]) * in[2] + ic[2]] += wv * gy;
            rdw[(o * cg + c) * kprod + kr] += gy * xv;
          }
        ry[(n * cc->o + o) * lprod + l] = acc;
      }

  nk_conv_params prm;
  memset(&prm, 0, sizeof prm);
  prm.nd = nd;
  prm.groups = cc->groups;
  for (int i = 0; i < nd; i++) {
    prm.stride[i] = cc->s[i];
    prm.padding[i] = cc->p[i];
    prm.dilation[i] = cc->d[i];
    prm.kernel[i] = cc->k[i];
  }
  const double scale = sqrt((double)(cg * kprod)) + 1;
  prm.mode = NK_CONV_FORWARD;
  nrt_operand fops[4] = {y.op, x.op, w.op, b.op};
  nrt_task task = tk_task(NK_KERNEL_CONV, 4, fops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(close_to(&y, ry, scale));
  /* without bias */
  for (int64_t n = 0; n < cc->n; n++)
    for (int64_t o = 0; o < cc->o; o++)
      for (int64_t l = 0; l < lprod; l++)
        ry[(n * cc->o + o) * lprod + l] -= getv(t, b.mem + o * tk_size(t));
  task = tk_task(NK_KERNEL_CONV, 3, fops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(close_to(&y, ry, scale));
  prm.mode = NK_CONV_BACKWARD_INPUT;
  nrt_operand bops[3] = {dx.op, dy.op, w.op};
  task = tk_task(NK_KERNEL_CONV, 3, bops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(close_to(&dx, rdx, scale));
  prm.mode = NK_CONV_BACKWARD_WEIGHT;
  nrt_operand wops[3] = {dw.op, dy.op, x.op};
  task = tk_task(NK_KERNEL_CONV, 3, wops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  CHECK(close_to(&dw, rdw, sqrt((double)(cc->n * lprod)) + 1));

  /* im2col / col2im on x (groups ignored) */
  if (cc->groups == 1) {
    int64_t cs[3] = {cc->n, cc->c * kprod, lprod};
    const int64_t total = cs[0] * cs[1] * cs[2];
    char *colm = tk_alloc((size_t)(total * tk_size(t)) + 8);
    nrt_operand col = tk_operand(colm, t, 3, cs, NULL);
    double *rcol = calloc((size_t)(total + 1), sizeof(double));
    double *rim = calloc((size_t)(cc->n * cc->c * iprod + 1), sizeof(double));
    for (int64_t n = 0; n < cc->n; n++)
      for (int64_t c = 0; c < cc->c; c++)
        for (int64_t kr = 0; kr < kprod; kr++)
          for (int64_t l = 0; l < lprod; l++) {
            const int64_t oc[3] = {l / (out[1] * out[2]), l / out[2] % out[1], l % out[2]};
            const int64_t kc[3] = {kr / (k[1] * k[2]), kr / k[2] % k[1], kr % k[2]};
            int64_t ic[3];
            int ok = 1;
            for (int i = 0; i < 3; i++) {
              ic[i] = oc[i] * s[i] - p[i] + kc[i] * d[i];
              if (ic[i] < 0 || ic[i] >= in[i]) ok = 0;
            }
            const int64_t e = (n * cc->c * kprod + c * kprod + kr) * lprod + l;
            if (!ok) continue;
            ix[0] = n;
            ix[1] = c;
            for (int i = 0; i < nd; i++) ix[2 + i] = ic[3 - nd + i];
            rcol[e] = getv(t, at(&x, ix));
            rim[(n * cc->c + c) * iprod + (ic[0] * in[1] + ic[1]) * in[2] + ic[2]] += rcol[e];
          }
    prm.mode = NK_CONV_IM2COL;
    nrt_operand iops[2] = {col, x.op};
    task = tk_task(NK_KERNEL_CONV, 2, iops, &prm, sizeof prm);
    CHECK_OK(tk_run(&task));
    tens colt = {.op = col, .mem = colm, .numel = total};
    colt.op.ndim = 3;
    CHECK(close_to(&colt, rcol, 0));
    prm.mode = NK_CONV_COL2IM;
    nrt_operand cops[2] = {dx.op, col};
    task = tk_task(NK_KERNEL_CONV, 2, cops, &prm, sizeof prm);
    CHECK_OK(tk_run(&task));
    CHECK(close_to(&dx, rim, (double)kprod));
    free(rcol);
    free(rim);
    tk_free(colm);
  }
  free(ry);
  free(rdx);
  free(rdw);
  tk_free(x.mem);
  tk_free(w.mem);
  tk_free(y.mem);
  tk_free(dy.mem);
  tk_free(dx.mem);
  tk_free(dw.mem);
  tk_free(b.mem);
}

static void test_cases(void) {
  const nrt_dtype dts[4] = {NRT_FLOAT32, NRT_FLOAT64, NRT_FLOAT16, NRT_BFLOAT16};
  const conv_case base[] = {
      /* t, nd, n, c, o, groups, in, k, s, p, d, layout */
      {0, 1, 2, 3, 4, 1, {7}, {3}, {1}, {1}, {1}, 0},
      {0, 1, 1, 4, 6, 2, {11}, {2}, {3}, {2}, {2}, 2},
      {0, 2, 2, 3, 5, 1, {6, 5}, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 0},
      {0, 2, 3, 4, 4, 1, {5, 5}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}, /* 1x1: no col */
      {0, 2, 2, 4, 4, 1, {5, 5}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 2},
      {0, 2, 2, 6, 6, 6, {7, 6}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, 1}, /* depthwise */
      {0, 2, 1, 3, 6, 3, {5, 5}, {3, 3}, {1, 1}, {2, 1}, {2, 1}, 2}, /* depthwise x2 */
      {0, 2, 2, 6, 9, 3, {5, 4}, {2, 3}, {1, 2}, {1, 1}, {1, 1}, 1}, /* groups */
      {0, 3, 1, 2, 3, 1, {4, 5, 3}, {2, 3, 1}, {1, 2, 1}, {1, 1, 0}, {1, 1, 1}, 0},
      {0, 3, 2, 4, 4, 2, {3, 3, 4}, {2, 2, 2}, {2, 1, 1}, {0, 1, 1}, {1, 1, 2}, 1},
      {0, 2, 0, 3, 4, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},  /* empty batch */
      {0, 1, 2, 3, 2, 1, {1}, {1}, {1}, {0}, {1}, 0},                 /* size 1 */
  };
  for (size_t i = 0; i < sizeof base / sizeof *base; i++)
    for (int j = 0; j < 4; j++) {
      conv_case c = base[i];
      c.t = dts[j];
      check_case(&c);
    }
  /* a col bigger than the chunk cap (4M elements): column chunks */
  conv_case big = {NRT_FLOAT32, 2, 1, 64, 2, 1, {260, 260}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0};
  check_case(&big);
  /* dw of >= 4 GEMM tiles: products added straight into the accumulator */
  conv_case wide = {NRT_FLOAT32, 2, 2, 128, 200, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1};
  check_case(&wide);
  wide.t = NRT_BFLOAT16;
  check_case(&wide);
  /* many samples, several per chunk */
  conv_case many = {NRT_FLOAT32, 2, 9, 8, 3, 1, {90, 90}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2};
  check_case(&many);
  /* implicit GEMM's shapes: 16 / 32 channels (unpacked, 8-row tiles),
   * padding up to and beyond the kernel's extent, dilation, even kernels */
  const conv_case implicit[] = {
      {NRT_FLOAT32, 2, 4, 16, 16, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT64, 2, 3, 32, 32, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {NRT_FLOAT32, 2, 2, 5, 40, 1, {9, 7}, {3, 3}, {1, 1}, {2, 1}, {1, 1}, 2},
      {NRT_FLOAT32, 2, 2, 4, 6, 1, {6, 6}, {3, 3}, {1, 1}, {3, 3}, {1, 1}, 0},
      {NRT_FLOAT32, 3, 2, 3, 5, 1, {4, 5, 6}, {2, 3, 2}, {1, 1, 1}, {1, 1, 1}, {1, 2, 1}, 0},
      {NRT_FLOAT32, 1, 3, 6, 8, 2, {20}, {5}, {1}, {2}, {2}, 1},
      /* 70 and 260 output channels: products read B unpacked up to 256
       * rows, packed beyond (gemm.c's NK_GEMM_UNPACKED_MAX_ROWS) */
      {NRT_FLOAT32, 2, 2, 7, 70, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 1, 3, 260, 1, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
  };
  for (size_t i = 0; i < sizeof implicit / sizeof *implicit; i++) check_case(&implicit[i]);
  /* the direct 3x3 kernels' shapes (conv_direct.c: float32, stride 1,
   * padding 1, stride 1 or 2): planes of one vector or less, a vector's tail, rows a
   * vector spans, one row or column, the 4096-position limit and past it,
   * channel counts around the tiles, and layouts it declines */
  const conv_case direct[] = {
      {NRT_FLOAT32, 2, 2, 16, 16, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 3, 5, 7, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 1, 1, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 3, 9, 1, {1, 37}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 6, 3, 1, {19, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 1, 2, 5, 1, {64, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 1, 2, 3, 1, {65, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 33, 13, 1, {5, 3}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 8, 8, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {NRT_FLOAT32, 2, 2, 8, 8, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
      {NRT_FLOAT32, 2, 0, 4, 4, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0},
      /* stride 2 per dim: the phase planes (forward, weight gradient) */
      {NRT_FLOAT32, 2, 2, 16, 32, 1, {16, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 3, 5, 7, 1, {9, 11}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 3, 4, 1, {15, 7}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 3, 4, 1, {6, 9}, {3, 3}, {1, 2}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 2, 3, 1, {1, 1}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0},
      {NRT_FLOAT32, 2, 2, 6, 6, 1, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 2},
  };
  for (size_t i = 0; i < sizeof direct / sizeof *direct; i++) check_case(&direct[i]);
  /* the same in bfloat16 (on AVX512_BF16: operands in k pairs, bfloat16 col
   * and padded grid, float32 accumulation), and bfloat16 chunks of several
   * samples, column chunks, 1x1 with stride */
  for (size_t i = 0; i < sizeof implicit / sizeof *implicit; i++) {
    conv_case c = implicit[i];
    c.t = NRT_BFLOAT16;
    check_case(&c);
  }
  many.t = NRT_BFLOAT16;
  check_case(&many);
  const conv_case bf16[] = {
      {NRT_BFLOAT16, 2, 2, 64, 2, 1, {40, 40}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 0}, /* column chunks */
      {NRT_BFLOAT16, 2, 5, 16, 32, 1, {9, 9}, {1, 1}, {2, 2}, {0, 0}, {1, 1}, 2},
      {NRT_BFLOAT16, 2, 3, 24, 40, 2, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
      {NRT_BFLOAT16, 2, 4, 33, 17, 1, {7, 7}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 0},
  };
  for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++) check_case(&bf16[i]);
}

static void test_validation(void) {
  float buf[256] = {0};
  nk_conv_params p;
  memset(&p, 0, sizeof p);
  p.nd = 1;
  p.groups = 1;
  p.stride[0] = p.dilation[0] = 1;
  nrt_operand ops[3] = {tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 4, 5}, NULL),
                        tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 3, 7}, NULL),
                        tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){4, 3, 3}, NULL)};
  nrt_task t = tk_task(NK_KERNEL_CONV, 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  nrt_operand bad[3];
  memcpy(bad, ops, sizeof bad);
  bad[2].sizes[1] = 2;
  t = tk_task(NK_KERNEL_CONV, 3, bad, &p, sizeof p);
  CHECK(tk_fails_with(&t, "weight must be"));
  memcpy(bad, ops, sizeof bad);
  bad[1].dtype = NRT_FLOAT64;
  t = tk_task(NK_KERNEL_CONV, 3, bad, &p, sizeof p);
  CHECK(tk_fails_with(&t, "one dtype"));
  memcpy(bad, ops, sizeof bad);
  for (int i = 0; i < 3; i++) bad[i].dtype = NRT_INT32;
  t = tk_task(NK_KERNEL_CONV, 3, bad, &p, sizeof p);
  CHECK(tk_fails_with(&t, "dtype must be"));
  p.groups = 2;
  t = tk_task(NK_KERNEL_CONV, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "groups must divide"));
  p.groups = 1;
  p.stride[0] = 0;
  t = tk_task(NK_KERNEL_CONV, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "stride and dilation"));
  p.stride[0] = 1;
  p.nd = 4;
  t = tk_task(NK_KERNEL_CONV, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "nd must be"));
  p.nd = 1;
  p.mode = 99;
  t = tk_task(NK_KERNEL_CONV, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "unknown mode"));
  p.mode = NK_CONV_IM2COL;
  p.kernel[0] = 3;
  nrt_operand iops[2] = {tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 9, 6}, NULL), ops[1]};
  t = tk_task(NK_KERNEL_CONV, 2, iops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "col operand"));
}

static void tests(void) {
  /* every case on each path: conv.c's choice, im2col only, implicit GEMM
   * wherever it applies (conv_implicit.c; read on every call) */
  static const char *paths[] = {"", "0", "1"};
  for (int i = 0; i < 3; i++) {
    setenv("TORCHNEURON_CONV_IMPLICIT", paths[i], 1);
    test_cases();
    /* the implicit / im2col paths where the direct kernels would run */
    if (i) {
      setenv("TORCHNEURON_CONV_DIRECT", "0", 1);
      test_cases();
      unsetenv("TORCHNEURON_CONV_DIRECT");
    }
  }
  unsetenv("TORCHNEURON_CONV_IMPLICIT");
  /* the direct kernels wherever the shape allows, any channel count
   * (conv_direct.c; read on every call) */
  setenv("TORCHNEURON_CONV_DIRECT", "1", 1);
  test_cases();
  unsetenv("TORCHNEURON_CONV_DIRECT");
  /* bfloat16 both ways wherever the CPU allows (conv.c picks one per
   * shape): operands on the dot-product GEMM, and widened to float32
   * copies (the path without AVX512_BF16); on each convolution path */
  bf16_only = 1;
  static const char *ways[] = {"1", "0"};
  for (int w = 0; w < 2; w++)
    for (int i = 1; i < 3; i++) {
      setenv("TORCHNEURON_CONV_BF16_DOT", ways[w], 1);
      setenv("TORCHNEURON_CONV_IMPLICIT", paths[i], 1);
      test_cases();
    }
  bf16_only = 0;
  unsetenv("TORCHNEURON_CONV_BF16_DOT");
  unsetenv("TORCHNEURON_CONV_IMPLICIT");
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
