/* The losses kernels against naive references written here:
 * NK_KERNEL_LOSS_POINTWISE (every op; float32, float64, bfloat16, float16
 * and mixed dtypes; contiguous, strided, broadcast (stride 0), 0-dim, empty
 * and pool-sized layouts; binary_cross_entropy's [0, 1] check), and
 * NK_KERNEL_NLL_LOSS (forward none/mean/sum, class weights, ignore_index,
 * 1-d/2-d/4-d layouts, uint8 targets, the backward's full overwrite of
 * grad_input, out-of-range targets failing before any read, empty targets,
 * and the validation failures), and NK_KERNEL_MULTI_MARGIN (p 1 and 2,
 * reductions, weights, forward and backward bitwise against ATen's CPU
 * arithmetic written out, bad targets). */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

/* ------------------------------------------------------------ references */

static double ref_loss(nk_loss_op op, double x, double y, double g, double p0, double p1) {
  double d = x - y, z = fabs(d);
  switch (op) {
  case NK_LOSS_MSE: return d * d;
  case NK_LOSS_SMOOTH_L1: return z < p0 ? 0.5 * d * d / p0 : z - 0.5 * p0;
  case NK_LOSS_HUBER: return z < p0 ? 0.5 * d * d : p0 * (z - 0.5 * p0);
  case NK_LOSS_BCE: {
    double l1 = log(1 - x), l0 = log(x);
    if (l1 < -100) l1 = -100;
    if (l0 < -100) l0 = -100;
    return (y - 1) * l1 - y * l0;
  }
  case NK_LOSS_MSE_BW: return p0 * d * g;
  case NK_LOSS_SMOOTH_L1_BW: return p0 * (z >= p1 ? (d > 0 ? 1 : -1) : d / p1) * g;
  case NK_LOSS_HUBER_BW: return p0 * (z >= p1 ? (d > 0 ? p1 : -p1) : d) * g;
  case NK_LOSS_BCE_BW: {
    double den = (1 - x) * x;
    return g * d / (den < 1e-12 ? 1e-12 : den);
  }
  default: return 0;
  }
}

static double load_value(nrt_dtype t, const void *p) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
  case NRT_FLOAT16: memcpy(&h, p, 2); return tk_f16_value(h);
  case NRT_BFLOAT16: memcpy(&h, p, 2); return tk_bf16_value(h);
  case NRT_FLOAT32: memcpy(&f, p, 4); return f;
  default: memcpy(&d, p, 8); return d;
  }
}

static void put_value(nrt_dtype t, void *p, double v) { tk_put(t, p, (tk_value){0, 0, v}); }

/* relative tolerance of a result stored in dtype t */
static double tol_of(nrt_dtype t) {
  return t == NRT_FLOAT64 ? 1e-12 : t == NRT_FLOAT32 ? 2e-6 : t == NRT_BFLOAT16 ? 1.6e-2 : 2e-3;
}

static int close_to(double got, double want, nrt_dtype t) {
  if (isnan(want)) return isnan(got);
  return fabs(got - want) <= tol_of(t) * (1 + fabs(want));
}

/* ------------------------------------------------------- pointwise losses */

static int is_bw(nk_loss_op op) { return op >= NK_LOSS_MSE_BW; }

/* x in (0.01, 0.99) for BCE, else (-3, 3); y in (0, 1) for BCE. */
static double rand_in(double lo, double hi) { return lo + (hi - lo) * (double)(tk_rand() % 1000003) / 1000003.0; }

/* Runs op over [rows, cols] operands: x and y with the given element
 * strides (x_t transposed when asked), g broadcast as a [cols] row when
 * g_bcast; checks every element against the reference. */
static void run_pointwise(nk_loss_op op, nrt_dtype out_t, nrt_dtype in_t, nrt_dtype compute,
                          int64_t rows, int64_t cols, int transposed, int g_bcast, double p0, double p1) {
  const int n_ops = is_bw(op) ? 4 : 3;
  const int64_t n = rows * cols;
  const int64_t es = tk_size(in_t), os = tk_size(out_t);
  char *x = tk_alloc((size_t)(n * es)), *y = tk_alloc((size_t)(n * es)), *g = tk_alloc((size_t)(n * es));
  char *o = tk_alloc((size_t)(n * os));
  const int bce = op == NK_LOSS_BCE || op == NK_LOSS_BCE_BW;
  for (int64_t i = 0; i < n; i++) {
    put_value(in_t, x + i * es, bce ? rand_in(0.01, 0.99) : rand_in(-3, 3));
    put_value(in_t, y + i * es, bce ? rand_in(0, 1) : rand_in(-3, 3));
    put_value(in_t, g + i * es, rand_in(-2, 2));
  }
  int64_t sizes[2] = {rows, cols};
  int64_t tstr[2] = {1, rows}; /* x read column-major: a transposed view */
  int64_t gstr[2] = {0, 1};
  nrt_operand ops[4] = {
      tk_operand(o, out_t, 2, sizes, NULL),
      tk_operand(x, in_t, 2, sizes, transposed ? tstr : NULL),
      tk_operand(y, in_t, 2, sizes, NULL),
      tk_operand(g, in_t, 2, sizes, g_bcast ? gstr : NULL),
  };
  nk_loss_pointwise_params prm = {op, compute, p0, p1};
  nrt_task t = tk_task(NK_KERNEL_LOSS_POINTWISE, n_ops, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  /* ATen's CPU holds these parameters as scalar_t */
  double q0 = p0, q1 = p1;
  if (compute != NRT_FLOAT64 && (op == NK_LOSS_MSE_BW || op == NK_LOSS_HUBER || op == NK_LOSS_HUBER_BW))
    q0 = tk_stored(compute, (tk_value){0, 0, p0}).f;
  if (compute != NRT_FLOAT64 && op == NK_LOSS_HUBER_BW) q1 = tk_stored(compute, (tk_value){0, 0, p1}).f;
  int bad = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      int64_t xi = transposed ? c * rows + r : r * cols + c;
      int64_t gi = g_bcast ? c : r * cols + c;
      double want = ref_loss(op, load_value(in_t, x + xi * es), load_value(in_t, y + (r * cols + c) * es),
                             load_value(in_t, g + gi * es), q0, q1);
      double got = load_value(out_t, o + (r * cols + c) * os);
      nrt_dtype tol_t = out_t == NRT_FLOAT64 && compute != NRT_FLOAT64 ? compute : out_t;
      if (!close_to(got, want, tol_t) && bad++ < 3)
        fprintf(stderr, "  op %d out %s in %s [%lld,%lld]: got %.9g want %.9g\n", (int)op,
                tk_dtype_names[out_t], tk_dtype_names[in_t], (long long)r, (long long)c, got, want);
    }
  CHECK(bad == 0);
  tk_free(x), tk_free(y), tk_free(g), tk_free(o);
}

static void test_pointwise(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  for (int op = 0; op < NK_LOSS_OP_COUNT; op++) {
    double p0 = op == NK_LOSS_SMOOTH_L1 ? 0.7 : op == NK_LOSS_HUBER ? 1.3 : op >= NK_LOSS_MSE_BW ? 0.37 : 0;
    double p1 = op == NK_LOSS_SMOOTH_L1_BW ? 0.7 : op == NK_LOSS_HUBER_BW ? 1.3 : 0;
    if (op == NK_LOSS_MSE_BW) p0 = 2.0 / 3.0;
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
      run_pointwise((nk_loss_op)op, dts[k], dts[k], dts[k], 7, 13, 0, 0, p0, p1);
      run_pointwise((nk_loss_op)op, dts[k], dts[k], dts[k], 9, 5, 1, 1, p0, p1);
    }
    /* mixed: float32 inputs into a float64 result (float64 compute) */
    run_pointwise((nk_loss_op)op, NRT_FLOAT64, NRT_FLOAT32, NRT_FLOAT64, 4, 6, 1, 0, p0, p1);
    /* pool-sized (split over the compute pool), contiguous and strided */
    run_pointwise((nk_loss_op)op, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, 301, 417, 0, 0, p0, p1);
    run_pointwise((nk_loss_op)op, NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT32, 211, 333, 1, 1, p0, p1);
  }
  /* 0-dim and empty */
  float x = 0.25f, y = 1.0f, o = -1;
  nrt_operand ops[3] = {tk_operand(&o, NRT_FLOAT32, 0, NULL, NULL), tk_operand(&x, NRT_FLOAT32, 0, NULL, NULL),
                        tk_operand(&y, NRT_FLOAT32, 0, NULL, NULL)};
  float *dx = tk_alloc(4), *dy = tk_alloc(4), *dov = tk_alloc(4);
  *dx = x, *dy = y;
  ops[0].data = dov, ops[1].data = dx, ops[2].data = dy;
  nk_loss_pointwise_params prm = {NK_LOSS_MSE, NRT_FLOAT32, 0, 0};
  nrt_task t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  CHECK(*dov == 0.5625f);
  int64_t zero = 0;
  nrt_operand e[3] = {tk_operand(NULL, NRT_FLOAT32, 1, &zero, NULL), tk_operand(NULL, NRT_FLOAT32, 1, &zero, NULL),
                      tk_operand(NULL, NRT_FLOAT32, 1, &zero, NULL)};
  t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, e, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));
  tk_free(dx), tk_free(dy), tk_free(dov);
}

static void test_pointwise_errors(void) {
  const int64_t n = 50000;
  float *x = tk_alloc(n * 4), *y = tk_alloc(n * 4), *o = tk_alloc(n * 4);
  for (int64_t i = 0; i < n; i++) x[i] = 0.5f, y[i] = 1.0f;
  x[n - 3] = 1.5f;
  nrt_operand ops[3] = {tk_vector(o, NRT_FLOAT32, n), tk_vector(x, NRT_FLOAT32, n), tk_vector(y, NRT_FLOAT32, n)};
  nk_loss_pointwise_params prm = {NK_LOSS_BCE, NRT_FLOAT32, 0, 0};
  nrt_task t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "all elements of input should be between 0 and 1"));
  x[n - 3] = NAN;
  CHECK(tk_fails_with(&t, "all elements of input should be between 0 and 1"));
  x[n - 3] = 0.0f; /* 0 and 1 are allowed: log clamps at -100 */
  x[0] = 1.0f;
  CHECK_OK(tk_run(&t));
  CHECK(o[n - 3] == 100.0f * 0.0f + 100.0f && o[0] == 0.0f);
  prm = (nk_loss_pointwise_params){NK_LOSS_MSE, NRT_INT64, 0, 0};
  t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "mse_loss: needs a floating compute dtype"));
  prm = (nk_loss_pointwise_params){NK_LOSS_OP_COUNT, NRT_FLOAT32, 0, 0};
  t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid op"));
  prm = (nk_loss_pointwise_params){NK_LOSS_SMOOTH_L1, NRT_FLOAT32, 0, 0};
  t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "beta must be positive"));
  prm = (nk_loss_pointwise_params){NK_LOSS_MSE, NRT_FLOAT32, 0, 0};
  ops[2].sizes[0] = 3;
  t = tk_task(NK_KERNEL_LOSS_POINTWISE, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "shape differs"));
  t = tk_task(NK_KERNEL_LOSS_POINTWISE, 2, ops, &prm, sizeof prm);
  CHECK(tk_run(&t) != NRT_SUCCESS); /* wrong operand count */
  tk_free(x), tk_free(y), tk_free(o);
}

/* --------------------------------------------------------------- nll_loss */

typedef struct nll_case {
  int64_t N, C, H, W;
  nrt_dtype dt;
  int reduction; /* 0 none, 1 mean, 2 sum */
  int weighted;
  int64_t ignore;
  int uint8_target;
  int transposed; /* input stored [N, H, W, C] (channels last) */
} nll_case;

typedef struct nll_bufs {
  char *in, *w, *out, *tw, *gin, *gout;
  void *tgt;
  nrt_operand o_in, o_tgt, o_w, o_out, o_tw, o_gin, o_gout;
} nll_bufs;

static int64_t get_target(const nll_case *c, const nll_bufs *b, int64_t i) {
  return c->uint8_target ? ((uint8_t *)b->tgt)[i] : ((int64_t *)b->tgt)[i];
}

static void nll_setup(const nll_case *c, nll_bufs *b, int bad_at, int64_t bad_value) {
  const int64_t es = tk_size(c->dt), P = c->N * c->H * c->W, n_in = P * c->C;
  b->in = tk_alloc((size_t)(n_in * es));
  b->w = tk_alloc((size_t)(c->C * es));
  b->out = tk_alloc((size_t)(P * es + 8));
  b->tw = tk_alloc(8);
  b->gin = tk_alloc((size_t)(n_in * es));
  b->gout = tk_alloc((size_t)(P * es + 8));
  b->tgt = tk_alloc((size_t)(P * 8));
  for (int64_t i = 0; i < n_in; i++) put_value(c->dt, b->in + i * es, rand_in(-4, 0));
  for (int64_t i = 0; i < c->C; i++) put_value(c->dt, b->w + i * es, rand_in(0.1, 2));
  for (int64_t i = 0; i < P; i++) put_value(c->dt, b->gout + i * es, rand_in(-2, 2));
  put_value(c->dt, b->gout, 0.75);
  for (int64_t i = 0; i < P; i++) {
    int64_t t = (int64_t)(tk_rand() % (uint64_t)(c->C + 1));
    if (t == c->C) t = c->ignore; /* some ignored */
    if (bad_at >= 0 && i == bad_at) t = bad_value;
    if (c->uint8_target) ((uint8_t *)b->tgt)[i] = (uint8_t)t;
    else ((int64_t *)b->tgt)[i] = t;
  }
  for (int64_t i = 0; i < n_in; i++) put_value(c->dt, b->gin + i * es, 99); /* overwritten */
  int64_t s4[4] = {c->N, c->C, c->H, c->W};
  int64_t st4[4] = {c->H * c->W * c->C, 1, c->W * c->C, c->C}; /* channels last */
  int64_t s3[3] = {c->N, c->H, c->W};
  b->o_in = tk_operand(b->in, c->dt, 4, s4, c->transposed ? st4 : NULL);
  b->o_gin = tk_operand(b->gin, c->dt, 4, s4, NULL);
  b->o_tgt = tk_operand(b->tgt, c->uint8_target ? NRT_UINT8 : NRT_INT64, 3, s3, NULL);
  b->o_w = tk_vector(b->w, c->dt, c->C);
  b->o_out = c->reduction ? tk_operand(b->out, c->dt, 0, NULL, NULL) : tk_operand(b->out, c->dt, 3, s3, NULL);
  b->o_gout = c->reduction ? tk_operand(b->gout, c->dt, 0, NULL, NULL) : tk_operand(b->gout, c->dt, 3, s3, NULL);
  b->o_tw = tk_operand(b->tw, c->dt, 0, NULL, NULL);
}

static void nll_free(nll_bufs *b) {
  tk_free(b->in), tk_free(b->w), tk_free(b->out), tk_free(b->tw), tk_free(b->gin), tk_free(b->gout);
  tk_free(b->tgt);
}

static double in_at(const nll_case *c, const nll_bufs *b, int64_t n, int64_t k, int64_t h, int64_t w) {
  const nrt_operand *o = &b->o_in;
  return load_value(c->dt, b->in + n * o->strides[0] + k * o->strides[1] + h * o->strides[2] + w * o->strides[3]);
}

static nrt_task nll_task(const nll_case *c, nll_bufs *b, int backward) {
  nrt_operand ops[5];
  if (!backward) ops[0] = b->o_out, ops[1] = b->o_tw, ops[2] = b->o_in, ops[3] = b->o_tgt;
  else ops[0] = b->o_gin, ops[1] = b->o_gout, ops[2] = b->o_tgt, ops[3] = b->o_tw;
  ops[4] = b->o_w;
  nk_nll_loss_params prm = {backward, c->reduction, c->ignore};
  return tk_task(NK_KERNEL_NLL_LOSS, c->weighted ? 5 : 4, ops, &prm, sizeof prm);
}

static void run_nll(const nll_case *c) {
  nll_bufs b;
  nll_setup(c, &b, -1, 0);
  const int64_t es = tk_size(c->dt);
  nrt_task t = nll_task(c, &b, 0);
  CHECK_OK(tk_run(&t));
  /* reference: double sums */
  double loss = 0, tw = 0;
  int bad = 0;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t w = 0; w < c->W; w++) {
        int64_t i = (n * c->H + h) * c->W + w, tg = get_target(c, &b, i);
        double l = 0, wt = 0;
        if (tg != c->ignore) {
          wt = c->weighted ? load_value(c->dt, b.w + tg * es) : 1;
          l = -in_at(c, &b, n, tg, h, w) * wt;
        }
        loss += l, tw += wt;
        if (c->reduction == 0 && !close_to(load_value(c->dt, b.out + i * es), l, c->dt)) bad++;
      }
  if (c->reduction) {
    double want = c->reduction == 1 ? loss / tw : loss;
    double got = load_value(c->dt, b.out);
    /* 16-bit sums are rounded at every step, as ATen's CPU: looser */
    double tol = c->dt == NRT_BFLOAT16 || c->dt == NRT_FLOAT16 ? 0.05 : tol_of(c->dt) * 100;
    if (!(fabs(got - want) <= tol * (1 + fabs(want)))) bad++, fprintf(stderr, "  nll %g vs %g\n", got, want);
    if (!(fabs(load_value(c->dt, b.tw) - tw) <= tol * (1 + tw))) bad++;
  }
  CHECK(bad == 0);
  /* backward: every element written, the gradient at each target */
  double total = load_value(c->dt, b.tw), g0 = load_value(c->dt, b.gout);
  if (c->reduction == 0) total = 1;
  t = nll_task(c, &b, 1);
  CHECK_OK(tk_run(&t));
  bad = 0;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t w = 0; w < c->W; w++) {
        int64_t i = (n * c->H + h) * c->W + w, tg = get_target(c, &b, i);
        for (int64_t k = 0; k < c->C; k++) {
          double want = 0;
          if (k == tg && tg != c->ignore) {
            double wt = c->weighted ? load_value(c->dt, b.w + tg * es) : 1;
            double g = c->reduction ? (c->reduction == 1 ? g0 / total : g0) : load_value(c->dt, b.gout + i * es);
            want = -wt * g;
          }
          double got = load_value(c->dt, b.gin + (((n * c->C + k) * c->H + h) * c->W + w) * es);
          if (!close_to(got, want, c->dt) && bad++ < 3)
            fprintf(stderr, "  nll bw [%lld,%lld,%lld,%lld] got %g want %g\n", (long long)n, (long long)k,
                    (long long)h, (long long)w, got, want);
        }
      }
  CHECK(bad == 0);
  nll_free(&b);
}

/* The reduced forward in float32 replays the CPU's cascade: here the same
 * cascade is written out, in float, and must agree bitwise. */
static void test_nll_cascade_bitwise(void) {
  nll_case c = {5000, 3, 1, 1, NRT_FLOAT32, 1, 1, -100, 0, 0};
  nll_bufs b;
  nll_setup(&c, &b, -1, 0);
  nrt_task t = nll_task(&c, &b, 0);
  CHECK_OK(tk_run(&t));
  float ls[8] = {0}, ws[8] = {0};
  const float *in = (const float *)b.in, *w = (const float *)b.w;
  for (int64_t i = 0; i < c.N; i++) {
    int64_t tg = ((int64_t *)b.tgt)[i];
    if (tg != c.ignore) {
      float wv = w[tg];
      ls[0] -= in[i * c.C + tg] * wv;
      ws[0] += wv;
    }
    if (tg == c.ignore) continue;
    for (int j = 0; j + 1 < 8; j++) {
      if ((i & ((int64_t)15 << (j * 4))) != 0) break;
      ws[j + 1] += ws[j], ls[j + 1] += ls[j], ws[j] = 0, ls[j] = 0;
    }
  }
  float tw = 0, out = 0;
  for (int j = 0; j < 8; j++) tw += ws[j], out += ls[j];
  out /= tw;
  CHECK(((float *)b.out)[0] == out);
  CHECK(((float *)b.tw)[0] == tw);
  nll_free(&b);
}

static void test_nll(void) {
  static const nrt_dtype dts[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16};
  for (size_t k = 0; k < 4; k++)
    for (int red = 0; red < 3; red++)
      for (int wtd = 0; wtd < 2; wtd++) {
        nll_case c2 = {6, 5, 1, 1, dts[k], red, wtd, -100, 0, 0}; /* 2-d input */
        run_nll(&c2);
        nll_case c4 = {2, 4, 3, 5, dts[k], red, wtd, 1, 0, 1};    /* 4-d, ignore 1, channels last */
        run_nll(&c4);
      }
  nll_case c1 = {1, 7, 1, 1, NRT_FLOAT32, 2, 1, -100, 0, 0}; /* 1-d input */
  run_nll(&c1);
  nll_case cu = {9, 6, 1, 1, NRT_FLOAT32, 1, 0, 255, 1, 0}; /* uint8 targets */
  run_nll(&cu);
  nll_case big = {3000, 40, 1, 1, NRT_FLOAT32, 0, 1, -100, 0, 0}; /* pool-sized */
  run_nll(&big);
  nll_case bigs = {2, 3, 200, 150, NRT_FLOAT32, 1, 1, 2, 0, 1};
  run_nll(&bigs);
  test_nll_cascade_bitwise();
}

static void test_nll_errors(void) {
  /* an out-of-range target fails, naming it, in every mode */
  for (int red = 0; red < 3; red++)
    for (int bw = 0; bw < 2; bw++) {
      nll_case c = {4000, 10, 1, 1, NRT_FLOAT32, red, 1, -100, 0, 0};
      nll_bufs b;
      nll_setup(&c, &b, 3001, 10);
      nrt_task t = nll_task(&c, &b, bw);
      CHECK(tk_fails_with(&t, "Target 10 is out of bounds."));
      ((int64_t *)b.tgt)[3001] = -7;
      ((int64_t *)b.tgt)[3500] = 1000000000;
      CHECK(tk_fails_with(&t, "Target -7 is out of bounds."));
      nll_free(&b);
    }
  /* empty targets: mean is NaN, sum 0, total_weight 0 */
  nll_case c = {0, 3, 1, 1, NRT_FLOAT32, 1, 0, -100, 0, 0};
  nll_bufs b;
  nll_setup(&c, &b, -1, 0);
  nrt_task t = nll_task(&c, &b, 0);
  CHECK_OK(tk_run(&t));
  CHECK(isnan(((float *)b.out)[0]) && ((float *)b.tw)[0] == 0.0f);
  nll_free(&b);
  /* every target ignored: mean is 0/0 */
  nll_case ci = {3, 3, 1, 1, NRT_FLOAT32, 1, 0, -100, 0, 0};
  nll_setup(&ci, &b, -1, 0);
  for (int i = 0; i < 3; i++) ((int64_t *)b.tgt)[i] = -100;
  t = nll_task(&ci, &b, 0);
  CHECK_OK(tk_run(&t));
  CHECK(isnan(((float *)b.out)[0]));
  /* validation */
  nrt_operand ops[5] = {b.o_out, b.o_tw, b.o_in, b.o_tgt, b.o_w};
  nk_nll_loss_params prm = {0, 1, -100};
  ops[3].dtype = NRT_INT32;
  t = tk_task(NK_KERNEL_NLL_LOSS, 4, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "the target must be int64 or uint8"));
  ops[3] = b.o_tgt;
  ops[3].sizes[0] = 2;
  t = tk_task(NK_KERNEL_NLL_LOSS, 4, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "the target must be [N, H, W]"));
  ops[3] = b.o_tgt;
  ops[4].sizes[0] = 2;
  t = tk_task(NK_KERNEL_NLL_LOSS, 5, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "the weight must be [C]"));
  prm.reduction = 0;
  t = tk_task(NK_KERNEL_NLL_LOSS, 4, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "with reduction none the loss must be [N, H, W]"));
  prm.reduction = 7;
  t = tk_task(NK_KERNEL_NLL_LOSS, 4, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "invalid reduction"));
  prm.reduction = 1;
  ops[2].ndim = 3;
  t = tk_task(NK_KERNEL_NLL_LOSS, 4, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "the input must be [N, C, H, W]"));
  t = tk_task(NK_KERNEL_NLL_LOSS, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&t, "expected 4 or 5 operands"));
  nll_free(&b);
}


/* ---------------------------------------------------------- multi_margin */

/* ATen's CPU arithmetic for float32 (step by step in float, the reduction
 * in double), written out here; the kernel must agree bitwise. */
static void test_multi_margin(void) {
  for (int p = 1; p <= 2; p++)
    for (int red = 0; red < 3; red++)
      for (int weighted = 0; weighted < 2; weighted++) {
        const int64_t F = 37, D = 11;
        float *x = tk_alloc(F * D * 4), *w = tk_alloc(D * 4), *out = tk_alloc(F * 4), *gi = tk_alloc(F * D * 4);
        float *go = tk_alloc(F * 4);
        int64_t *t = tk_alloc(F * 8);
        for (int64_t i = 0; i < F * D; i++) x[i] = (float)rand_in(-1, 1);
        for (int64_t i = 0; i < D; i++) w[i] = (float)rand_in(0.5, 1.5);
        for (int64_t i = 0; i < F; i++) t[i] = (int64_t)(tk_rand() % D), go[i] = (float)rand_in(-1, 1);
        int64_t sx[2] = {F, D}, sf = F;
        nrt_operand ops[5] = {red ? tk_operand(out, NRT_FLOAT32, 0, NULL, NULL) : tk_vector(out, NRT_FLOAT32, F),
                              tk_operand(x, NRT_FLOAT32, 2, sx, NULL), tk_vector(t, NRT_INT64, F),
                              tk_vector(w, NRT_FLOAT32, D)};
        nk_multi_margin_params prm = {0, red, p, 0, 0.7};
        nrt_task task = tk_task(NK_KERNEL_MULTI_MARGIN, weighted ? 4 : 3, ops, &prm, sizeof prm);
        CHECK_OK(tk_run(&task));
        const float margin = 0.7f;
        double acc = 0;
        int bad = 0;
        float rows[37];
        for (int64_t f = 0; f < F; f++) {
          const float *xr = x + f * D, xt = xr[t[f]];
          float sum = 0;
          for (int64_t d = 0; d < D; d++) {
            if (d == t[f]) continue;
            float z = margin - xt + xr[d];
            if (z > 0) {
              float h = p == 1 ? z : z * z;
              if (weighted) h *= w[t[f]];
              sum += h;
            }
          }
          sum /= (float)D;
          rows[f] = sum;
          acc += sum;
          if (!red && out[f] != sum) bad++;
        }
        if (red == 1) acc /= (double)F;
        if (red && out[0] != (float)acc) bad++;
        CHECK(bad == 0);
        /* backward */
        nrt_operand bops[5] = {tk_operand(gi, NRT_FLOAT32, 2, sx, NULL),
                               red ? tk_operand(go, NRT_FLOAT32, 0, NULL, NULL) : tk_vector(go, NRT_FLOAT32, sf),
                               ops[1], ops[2], ops[3]};
        prm.backward = 1;
        task = tk_task(NK_KERNEL_MULTI_MARGIN, weighted ? 5 : 4, bops, &prm, sizeof prm);
        CHECK_OK(tk_run(&task));
        const float g = red == 1 ? (float)(1.0 / (double)(F * D)) : (float)(1.0 / (double)D);
        bad = 0;
        for (int64_t f = 0; f < F; f++) {
          const float *xr = x + f * D, xt = xr[t[f]];
          const float gof = red ? go[0] : go[f];
          float gt = 0;
          for (int64_t d = 0; d < D; d++) {
            if (d == t[f]) continue;
            float z = margin - xt + xr[d], h = 0;
            if (z > 0) {
              h = p == 1 ? g : 2 * g * z;
              if (weighted) h *= w[t[f]];
              gt -= h;
            }
            if (gi[f * D + d] != h * gof) bad++;
          }
          if (gi[f * D + t[f]] != gt * gof) bad++;
        }
        (void)rows;
        CHECK(bad == 0);
        /* a bad target fails before anything is read through it */
        t[F - 1] = D;
        prm.backward = 0;
        task = tk_task(NK_KERNEL_MULTI_MARGIN, weighted ? 4 : 3, ops, &prm, sizeof prm);
        CHECK(tk_fails_with(&task, "target out of range"));
        t[F - 1] = -1;
        prm.backward = 1;
        task = tk_task(NK_KERNEL_MULTI_MARGIN, weighted ? 5 : 4, bops, &prm, sizeof prm);
        CHECK(tk_fails_with(&task, "target out of range"));
        tk_free(x), tk_free(w), tk_free(out), tk_free(gi), tk_free(go), tk_free(t);
      }
  /* validation */
  float *x = tk_alloc(16);
  int64_t *t = tk_alloc(16), sx[2] = {2, 2};
  nrt_operand ops[3] = {tk_operand(x, NRT_FLOAT32, 0, NULL, NULL), tk_operand(x, NRT_FLOAT32, 2, sx, NULL),
                        tk_vector(t, NRT_INT32, 2)};
  nk_multi_margin_params prm = {0, 1, 1, 0, 1.0};
  nrt_task task = tk_task(NK_KERNEL_MULTI_MARGIN, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "int64 [F] targets"));
  prm.p = 3;
  task = tk_task(NK_KERNEL_MULTI_MARGIN, 3, ops, &prm, sizeof prm);
  CHECK(tk_fails_with(&task, "invalid reduction"));
  tk_free(x), tk_free(t);
}

static void tests(void) {
  test_pointwise();
  test_pointwise_errors();
  test_nll();
  test_nll_errors();
  test_multi_margin();
}

int main(void) { return tk_main(tests, __FILE__); }
