/* NK_KERNEL_ATTENTION against a naive reference in double: the whole
 * L x S score matrix, a plain softmax (a row with every key hidden gives
 * zeros), dropout from the documented Philox rule, and the textbook
 * gradients (dP = dO V^T, dS = P (dP - rowsum(P dP)), dQ = scale dS K,
 * dK = scale dS^T Q, dV = P^T dO, dbias = dS).  Covers sizes that are not
 * multiples of the 64-row tiles, head dims 1..256 with Dv != D, GQA,
 * causal with L < S and L > S, float and bool masks broadcast by stride 0,
 * fully hidden rows, dropout, transposed (B, S, H, D) layouts, every
 * floating dtype, S = 0, and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

typedef struct acase {
  nrt_dtype t;
  int64_t B, Hq, Hkv, L, S, D, Dv;
  int causal;
  int mask; /* 0 none, 1 float (broadcast over batch), 2 bool (broadcast over heads) */
  double dropout;
  int transposed; /* q, k, v, dout stored (B, seq, H, D) */
  int backward;
} acase;

typedef struct tensor4 {
  char *dev;
  double *ref; /* logical (b, h, r, c) row-major, the stored values */
  int64_t sz[4], st[4]; /* st in elements */
  nrt_dtype t;
} tensor4;

static void t4_make(tensor4 *x, nrt_dtype t, const int64_t sz[4], int transposed, int fill) {
  x->t = t;
  memcpy(x->sz, sz, sizeof x->sz);
  const int64_t n = sz[0] * sz[1] * sz[2] * sz[3];
  if (transposed) { /* physical (b, r, h, c) */
    x->st[3] = 1; x->st[1] = sz[3]; x->st[2] = sz[1] * sz[3]; x->st[0] = sz[1] * sz[2] * sz[3];
  } else {
    x->st[3] = 1; x->st[2] = sz[3]; x->st[1] = sz[2] * sz[3]; x->st[0] = sz[1] * sz[2] * sz[3];
  }
  x->dev = tk_alloc((size_t)(n * tk_size(t)));
  x->ref = calloc((size_t)n + 1, sizeof(double));
  if (!fill) return;
  for (int64_t b = 0; b < sz[0]; b++)
    for (int64_t h = 0; h < sz[1]; h++)
      for (int64_t r = 0; r < sz[2]; r++)
        for (int64_t c = 0; c < sz[3]; c++) {
          tk_value v = {0, 0, (double)(int64_t)(tk_rand() % 2001 - 1000) / 500.0};
          v = tk_stored(t, v);
          const int64_t li = ((b * sz[1] + h) * sz[2] + r) * sz[3] + c;
          x->ref[li] = v.f;
          tk_put(t, x->dev + (b * x->st[0] + h * x->st[1] + r * x->st[2] + c * x->st[3]) * tk_size(t), v);
        }
}

static nrt_operand t4_op(const tensor4 *x) { return tk_operand(x->dev, x->t, 4, x->sz, x->st); }

static double t4_get(const tensor4 *x, int64_t b, int64_t h, int64_t r, int64_t c) {
  const char *p = x->dev + (b * x->st[0] + h * x->st[1] + r * x->st[2] + c * x->st[3]) * tk_size(x->t);
  switch (x->t) {
  case NRT_FLOAT16: { uint16_t u; memcpy(&u, p, 2); return tk_f16_value(u); }
  case NRT_BFLOAT16: { uint16_t u; memcpy(&u, p, 2); return tk_bf16_value(u); }
  case NRT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
  default: { double d; memcpy(&d, p, 8); return d; }
  }
}

static void t4_free(tensor4 *x) { tk_free(x->dev); free(x->ref); }

static double R(const tensor4 *x, int64_t b, int64_t h, int64_t r, int64_t c) {
  return x->ref[((b * x->sz[1] + h) * x->sz[2] + r) * x->sz[3] + c];
}

static int keep_ref(uint64_t seed, uint64_t offset, double p, uint64_t idx) {
  uint32_t w[4];
  nk_philox4x32(seed, offset / 4 + idx / 4, w);
  return (double)w[idx % 4] >= p * 4294967296.0;
}

static double tol_for(nrt_dtype t) {
  return t == NRT_FLOAT64 ? 1e-10 : t == NRT_FLOAT32 ? 2e-5 : t == NRT_BFLOAT16 ? 3e-2 : 4e-3;
}

static int close_to(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

static int n_bad;
static void expect_close(double got, double want, double tol, const char *what) {
  if (!close_to(got, want, tol)) {
    if (n_bad++ < 5) fprintf(stderr, "  %s: got %.9g want %.9g\n", what, got, want);
  }
}

static void check_case(const acase *c) {
  const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, L = c->L, S = c->S, D = c->D, Dv = c->Dv;
  const double scale = 1.0 / sqrt((double)D), tol = tol_for(c->t) * 4;
  const uint64_t seed = 0x1234567ull + (uint64_t)L, offset = 8;
  tensor4 q, k, v, o, dout;
  t4_make(&q, c->t, (int64_t[]){B, Hq, L, D}, c->transposed, 1);
  t4_make(&k, c->t, (int64_t[]){B, Hkv, S, D}, c->transposed, 1);
  t4_make(&v, c->t, (int64_t[]){B, Hkv, S, Dv}, c->transposed, 1);
  t4_make(&o, c->t, (int64_t[]){B, Hq, L, Dv}, 0, 0);
  t4_make(&dout, c->t, (int64_t[]){B, Hq, L, Dv}, c->transposed, 1);
  const nrt_dtype st_t = c->t == NRT_FLOAT64 ? NRT_FLOAT64 : NRT_FLOAT32;
  char *lse = tk_alloc((size_t)(B * Hq * L * tk_size(st_t) + 8));
  /* mask: stored (1, Hq, L, S) float or (B, 1, L, S) bool, expanded by stride 0 */
  char *mdev = NULL;
  double *mref = calloc((size_t)(B * Hq * L * S) + 1, sizeof(double)); /* additive, -inf hidden */
  nrt_operand mop = {0};
  if (c->mask == 1) {
    mdev = tk_alloc((size_t)(Hq * L * S * tk_size(c->t)) + 8);
    for (int64_t i = 0; i < Hq * L * S; i++) {
      tk_value x = tk_stored(c->t, (tk_value){0, 0, (double)(int64_t)(tk_rand() % 201 - 100) / 50.0});
      if (i % 7 == 3) x.f = -INFINITY;
      if (i / S == 2) x.f = -INFINITY; /* row 2 of head 0: every key hidden */
      tk_put(c->t, mdev + i * tk_size(c->t), x);
      for (int64_t b = 0; b < B; b++) mref[b * Hq * L * S + i] = x.f;
    }
    mop = tk_operand(mdev, c->t, 4, (int64_t[]){B, Hq, L, S}, (int64_t[]){0, L * S, S, 1});
  } else if (c->mask == 2) {
    mdev = tk_alloc((size_t)(B * L * S) + 8);
    for (int64_t i = 0; i < B * L * S; i++) {
      const int on = (tk_rand() % 3) != 0 && (i / S) % L != 1; /* row 1 hidden */
      mdev[i] = (char)on;
      const int64_t b = i / (L * S), rest = i % (L * S);
      for (int64_t h = 0; h < Hq; h++) mref[(b * Hq + h) * L * S + rest] = on ? 0 : -INFINITY;
    }
    mop = tk_operand(mdev, NRT_BOOL, 4, (int64_t[]){B, Hq, L, S}, (int64_t[]){L * S, 0, S, 1});
  }
  nk_attention_params prm = {NK_ATTENTION_FORWARD, c->causal, c->mask != 0, 0, scale, c->dropout, seed, offset};
  nrt_operand ops[8] = {t4_op(&o), tk_operand(lse, st_t, 3, (int64_t[]){B, Hq, L}, NULL), t4_op(&q), t4_op(&k),
                        t4_op(&v), mop};
  nrt_task t = tk_task(NK_KERNEL_ATTENTION, 5 + (c->mask != 0), ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&t));

  /* reference */
  const int64_t G = Hq / Hkv;
  double *P = malloc(sizeof(double) * (size_t)(S + 1)), *Z = malloc(sizeof(double) * (size_t)(S + 1));
  double *dq = calloc((size_t)(B * Hq * L * D) + 1, sizeof(double));
  double *dk = calloc((size_t)(B * Hkv * S * D) + 1, sizeof(double));
  double *dv = calloc((size_t)(B * Hkv * S * Dv) + 1, sizeof(double));
  double *dbias = calloc((size_t)(B * Hq * L * S) + 1, sizeof(double));
  const double dscale = c->dropout >= 1 ? 0 : 1 / (1 - c->dropout);
  n_bad = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++)
      for (int64_t i = 0; i < L; i++) {
        const int64_t hk = h / G;
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; j++) {
          double s = 0;
          for (int64_t d = 0; d < D; d++) s += R(&q, b, h, i, d) * R(&k, b, hk, j, d);
          s = s * scale + mref[((b * Hq + h) * L + i) * S + j];
          if (c->causal && j > i) s = -INFINITY;
          P[j] = s;
          mx = s > mx ? s : mx;
        }
        double sum = 0;
        for (int64_t j = 0; j < S; j++) { P[j] = mx == -INFINITY ? 0 : exp(P[j] - mx); sum += P[j]; }
        for (int64_t j = 0; j < S; j++) {
          P[j] = sum > 0 ? P[j] / sum : 0;
          const uint64_t idx = (uint64_t)(((b * Hq + h) * L + i) * S + j);
          Z[j] = c->dropout > 0 ? keep_ref(seed, offset, c->dropout, idx) * dscale : 1;
        }
        for (int64_t e = 0; e < Dv; e++) {
          double acc = 0;
          for (int64_t j = 0; j < S; j++) acc += P[j] * Z[j] * R(&v, b, hk, j, e);
          expect_close(t4_get(&o, b, h, i, e), acc, tol, "out");
        }
        double lse_got;
        if (st_t == NRT_FLOAT64) memcpy(&lse_got, lse + ((b * Hq + h) * L + i) * 8, 8);
        else { float f; memcpy(&f, lse + ((b * Hq + h) * L + i) * 4, 4); lse_got = f; }
        expect_close(lse_got, sum > 0 ? mx + log(sum) : INFINITY, tol, "lse");
        if (!c->backward) continue;
        /* gradients of sum(out * dout) */
        double delta = 0;
        for (int64_t j = 0; j < S; j++) {
          double dp = 0;
          for (int64_t e = 0; e < Dv; e++) dp += R(&dout, b, h, i, e) * R(&v, b, hk, j, e);
          Z[j] *= dp; /* dP */
          delta += P[j] * Z[j];
        }
        for (int64_t j = 0; j < S; j++) {
          const double ds = P[j] * (Z[j] - delta);
          dbias[((b * Hq + h) * L + i) * S + j] = ds;
          for (int64_t d = 0; d < D; d++) {
            dq[((b * Hq + h) * L + i) * D + d] += scale * ds * R(&k, b, hk, j, d);
            dk[((b * Hkv + hk) * S + j) * D + d] += scale * ds * R(&q, b, h, i, d);
          }
          const uint64_t idx = (uint64_t)(((b * Hq + h) * L + i) * S + j);
          const double pz = P[j] * (c->dropout > 0 ? keep_ref(seed, offset, c->dropout, idx) * dscale : 1);
          for (int64_t e = 0; e < Dv; e++) dv[((b * Hkv + hk) * S + j) * Dv + e] += pz * R(&dout, b, h, i, e);
        }
      }
  CHECK(n_bad == 0);
  if (n_bad) fprintf(stderr, "  forward case t=%d B=%ld Hq=%ld Hkv=%ld L=%ld S=%ld D=%ld Dv=%ld causal=%d mask=%d p=%g tr=%d: %d bad\n",
                     c->t, (long)B, (long)Hq, (long)Hkv, (long)L, (long)S, (long)D, (long)Dv, c->causal, c->mask,
                     c->dropout, c->transposed, n_bad);

  if (c->backward) {
    /* stats = (lse, delta = rowsum(dout * out)) in the compute type */
    char *stats = tk_alloc((size_t)(2 * B * Hq * L * tk_size(st_t)) + 8);
    memcpy(stats, lse, (size_t)(B * Hq * L * tk_size(st_t)));
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < L; i++) {
          double d = 0;
          for (int64_t e = 0; e < Dv; e++) d += t4_get(&dout, b, h, i, e) * t4_get(&o, b, h, i, e);
          const int64_t at = B * Hq * L + (b * Hq + h) * L + i;
          if (st_t == NRT_FLOAT64) memcpy(stats + at * 8, &d, 8);
          else { float f = (float)d; memcpy(stats + at * 4, &f, 4); }
        }
    tensor4 gq, gk, gv, gb;
    t4_make(&gq, c->t, (int64_t[]){B, Hq, L, D}, c->transposed, 0);
    t4_make(&gk, c->t, (int64_t[]){B, Hkv, S, D}, 0, 0);
    t4_make(&gv, c->t, (int64_t[]){B, Hkv, S, Dv}, c->transposed, 0);
    t4_make(&gb, st_t, (int64_t[]){B, Hq, L, S}, 0, 0);
    nrt_operand sop = tk_operand(stats, st_t, 4, (int64_t[]){2, B, Hq, L}, NULL);
    /* twice: the two-pass backward (BACKWARD_KV, BACKWARD_Q with dbias) and
     * the one-pass BACKWARD (not with a mask) */
    for (int one_pass = 0; one_pass < (c->mask ? 1 : 2); one_pass++) {
    nk_attention_params bp = prm;
    if (one_pass) {
      t4_free(&gq); t4_free(&gk); t4_free(&gv);
      t4_make(&gq, c->t, (int64_t[]){B, Hq, L, D}, c->transposed, 0);
      t4_make(&gk, c->t, (int64_t[]){B, Hkv, S, D}, c->transposed, 0);
      t4_make(&gv, c->t, (int64_t[]){B, Hkv, S, Dv}, 0, 0);
      bp.mode = NK_ATTENTION_BACKWARD;
      nrt_operand all[8] = {t4_op(&gq), t4_op(&gk), t4_op(&gv), t4_op(&dout), t4_op(&q), t4_op(&k), t4_op(&v), sop};
      t = tk_task(NK_KERNEL_ATTENTION, 8, all, &bp, sizeof bp);
      CHECK_OK(tk_run(&t));
    } else {
    bp.mode = NK_ATTENTION_BACKWARD_KV;
    nrt_operand kv[8] = {t4_op(&gk), t4_op(&gv), t4_op(&dout), t4_op(&q), t4_op(&k), t4_op(&v), sop, mop};
    t = tk_task(NK_KERNEL_ATTENTION, 7 + (c->mask != 0), kv, &bp, sizeof bp);
    CHECK_OK(tk_run(&t));
    bp.mode = NK_ATTENTION_BACKWARD_Q;
    bp.has_dbias = c->mask == 1;
    nrt_operand qo[8] = {t4_op(&gq), t4_op(&gb), t4_op(&dout), t4_op(&q), t4_op(&k), t4_op(&v), sop, mop};
    t = tk_task(NK_KERNEL_ATTENTION, 7 + (c->mask != 0), qo, &bp, sizeof bp);
    CHECK_OK(tk_run(&t));
    }
    n_bad = 0;
    const double gtol = tol * 4;
    for (int64_t b = 0; b < B; b++) {
      for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < L; i++) {
          for (int64_t d = 0; d < D; d++) expect_close(t4_get(&gq, b, h, i, d), dq[((b * Hq + h) * L + i) * D + d], gtol, "dq");
          if (bp.has_dbias)
            for (int64_t j = 0; j < S; j++)
              expect_close(t4_get(&gb, b, h, i, j), dbias[((b * Hq + h) * L + i) * S + j], gtol, "dbias");
        }
      for (int64_t h = 0; h < Hkv; h++)
        for (int64_t j = 0; j < S; j++) {
          for (int64_t d = 0; d < D; d++) expect_close(t4_get(&gk, b, h, j, d), dk[((b * Hkv + h) * S + j) * D + d], gtol, "dk");
          for (int64_t e = 0; e < Dv; e++) expect_close(t4_get(&gv, b, h, j, e), dv[((b * Hkv + h) * S + j) * Dv + e], gtol, "dv");
        }
    }
    CHECK(n_bad == 0);
    if (n_bad) fprintf(stderr, "  backward (one pass %d) case L=%ld S=%ld D=%ld causal=%d mask=%d p=%g: %d bad\n",
                       one_pass, (long)L, (long)S, (long)D, c->causal, c->mask, c->dropout, n_bad);
    }
    t4_free(&gq); t4_free(&gk); t4_free(&gv); t4_free(&gb);
    tk_free(stats);
  }
  free(P); free(Z); free(dq); free(dk); free(dv); free(dbias); free(mref);
  if (mdev) tk_free(mdev);
  tk_free(lse);
  t4_free(&q); t4_free(&k); t4_free(&v); t4_free(&o); t4_free(&dout);
}

static void test_cases(void) {
  static const acase cases[] = {
      /* t, B, Hq, Hkv, L, S, D, Dv, causal, mask, dropout, transposed, backward */
      {NRT_FLOAT32, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1},
      {NRT_FLOAT32, 2, 2, 2, 70, 131, 16, 16, 0, 0, 0, 0, 1},
      {NRT_FLOAT64, 1, 2, 1, 65, 64, 24, 40, 0, 0, 0, 0, 1},        /* GQA, Dv != D */
      {NRT_FLOAT32, 1, 4, 2, 100, 77, 32, 32, 1, 0, 0, 0, 1},       /* causal, L > S */
      {NRT_FLOAT32, 1, 1, 1, 40, 150, 8, 8, 1, 0, 0, 1, 1},         /* causal, L < S, transposed */
      {NRT_FLOAT32, 2, 2, 1, 33, 70, 20, 12, 0, 1, 0, 0, 1},        /* float mask, hidden row */
      {NRT_FLOAT64, 2, 3, 3, 17, 66, 5, 7, 0, 2, 0, 1, 1},          /* bool mask, transposed */
      {NRT_FLOAT32, 1, 2, 2, 67, 90, 16, 16, 0, 0, 0.3, 0, 1},      /* dropout */
      {NRT_FLOAT64, 1, 2, 1, 30, 129, 8, 8, 1, 0, 0.5, 1, 1},       /* dropout, causal, gqa */
      {NRT_FLOAT32, 1, 1, 1, 20, 30, 256, 256, 0, 0, 0, 0, 1},      /* head dim 256 */
      {NRT_FLOAT32, 1, 1, 1, 9, 70, 200, 72, 0, 1, 0, 1, 1},
      {NRT_BFLOAT16, 1, 2, 2, 70, 70, 64, 64, 1, 0, 0, 1, 1},
      {NRT_FLOAT16, 2, 2, 1, 50, 80, 32, 32, 0, 1, 0, 0, 1},
      {NRT_FLOAT32, 1, 1, 1, 5, 0, 8, 8, 0, 0, 0, 0, 1},            /* S = 0 */
      {NRT_FLOAT32, 1, 2, 2, 10, 10, 8, 8, 0, 0, 1.0, 0, 1},        /* dropout 1: zeros */
      {NRT_FLOAT32, 3, 4, 4, 128, 256, 64, 64, 1, 0, 0, 0, 0},
      {NRT_FLOAT32, 4, 4, 4, 64, 64, 16, 16, 1, 0, 0, 1, 1},        /* the GPT example's head dim 16 */
      {NRT_BFLOAT16, 2, 2, 2, 129, 200, 64, 64, 1, 0, 0, 1, 1},     /* two query blocks, odd lengths */
      {NRT_FLOAT32, 1, 1, 1, 0, 5, 8, 8, 0, 0, 0, 0, 1},            /* L = 0: zero dk, dv */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

static void test_validation(void) {
  float buf[256] = {0};
  nk_attention_params p = {NK_ATTENTION_FORWARD, 0, 0, 0, 1, 0, 0, 0};
  nrt_operand good[5] = {tk_operand(buf, NRT_FLOAT32, 4, (int64_t[]){1, 2, 3, 4}, NULL),
                         tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 2, 3}, NULL),
                         tk_operand(buf, NRT_FLOAT32, 4, (int64_t[]){1, 2, 3, 5}, NULL),
                         tk_operand(buf, NRT_FLOAT32, 4, (int64_t[]){1, 2, 6, 5}, NULL),
                         tk_operand(buf, NRT_FLOAT32, 4, (int64_t[]){1, 2, 6, 4}, NULL)};
  nrt_task t = tk_task(NK_KERNEL_ATTENTION, 5, good, &p, sizeof p);
  CHECK_OK(tk_run(&t));
  nrt_operand ops[5];
  memcpy(ops, good, sizeof ops);
  ops[3].sizes[1] = 3; /* 2 query heads, 3 kv heads */
  t = tk_task(NK_KERNEL_ATTENTION, 5, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "heads must divide"));
  memcpy(ops, good, sizeof ops);
  ops[4].sizes[2] = 7;
  t = tk_task(NK_KERNEL_ATTENTION, 5, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "key/value shapes"));
  memcpy(ops, good, sizeof ops);
  ops[2].dtype = NRT_INT32;
  t = tk_task(NK_KERNEL_ATTENTION, 5, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "floating"));
  memcpy(ops, good, sizeof ops);
  ops[0].sizes[3] = 5;
  t = tk_task(NK_KERNEL_ATTENTION, 5, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "out must be"));
  p.has_mask = 1;
  t = tk_task(NK_KERNEL_ATTENTION, 5, good, &p, sizeof p);
  CHECK(tk_fails_with(&t, "expected 6 operands"));
  p.has_mask = 0;
  p.dropout_p = 1.5;
  t = tk_task(NK_KERNEL_ATTENTION, 5, good, &p, sizeof p);
  CHECK(tk_fails_with(&t, "dropout"));
  p.dropout_p = 0;
  p.mode = 7;
  t = tk_task(NK_KERNEL_ATTENTION, 5, good, &p, sizeof p);
  CHECK(tk_fails_with(&t, "bad mode"));
}

static void tests(void) {
  test_cases();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
