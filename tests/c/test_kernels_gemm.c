/* The GEMM kernel against a triple loop in long double / exact integers:
 * sizes 0, 1, primes, just below/above the block sizes (the tests force
 * small ones, MC 24, KC 40, NC 64, through TORCHNEURON_GEMM_*, so every
 * block edge is crossed with small shapes; MR 12/6/4, NR 32/16/8/4),
 * matrix-vector shapes, transposed and strided (sliced) views of a, b and
 * out, batch broadcast (stride 0), alpha/beta (beta 0 ignores NaN in out),
 * every dtype class, mixed-precision rounding of float16/bfloat16, a
 * randomised sweep, nk_gemm_operands called from inside a parallel region
 * (serial there; bit-identical to the pooled run), b given through row or
 * column offset tables (nk_gemm_operands_indirect: packed and unpacked, 8-
 * and 12-row kernels; bfloat16 b in k pairs through the tables, k odd and
 * even, adjacent and spread; bfloat16 b already in k pairs read in place,
 * 8- and 12-row kernels, odd k with a zero high half), mixed precision (bfloat16/float16 a and b
 * into a float32 out, checked at float32 tolerance against the exact sum
 * of the 16-bit inputs: no intermediate 16-bit rounding), an addend
 * operand c (out = alpha a b + beta c: a full matrix, addmm's bias
 * broadcast along rows, a column broadcast; out is NaN and must not be
 * read; every output path: direct tiles, the workspace, matrix-vector,
 * k = 0), and the validation failures. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

/* the case tables leave gcase's trailing fields (addend) zero on purpose */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* kernels/src/gemm/gemm.h: the entries other kernels call */
int nk_gemm_operands(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha, nk_scalar beta);
typedef struct nk_gemm_indirect {
  const int64_t *b_rows, *b_cols;
  int b_pair_rows;
} nk_gemm_indirect;
int nk_gemm_pair_rows(void);
int nk_gemm_operands_indirect(nrt_exec_ctx *ctx, const nrt_operand ops[3], nk_scalar alpha,
                              nk_scalar beta, const nk_gemm_indirect *ind);
#define ROWS_SLACK 64 /* NK_GEMM_ROWS_SLACK */

typedef struct gcase {
  nrt_dtype t;
  int64_t batch, m, n, k;
  int a_transposed, b_transposed, b_broadcast;
  double alpha, beta;
  int out_transposed, sliced; /* out stored (n, m); a, b, out every other element */
  int addend; /* ADD_*: operand 3 c replaces out in beta's term */
} gcase;
enum { ADD_NONE, ADD_FULL, ADD_ROW_BIAS, ADD_COLUMN };

/* tolerance for a sum of k products of values in [-1, 1] */
static double tolerance(nrt_dtype t, int64_t k) {
  double eps = t == NRT_FLOAT64 ? 1e-15 : t == NRT_FLOAT32 ? 1e-6 : t == NRT_FLOAT16 ? 1e-3 : 8e-3;
  return eps * (double)(k + 4) * 4;
}

static tk_value random_value(nrt_dtype t) {
  tk_value v = {0};
  if (tk_is_integral(t)) {
    v.is_int = 1;
    v.i = (int64_t)(tk_rand() % 7) - (t == NRT_UINT8 ? 0 : 3);
  } else {
    v.f = (double)(int64_t)(tk_rand() % 2001 - 1000) / 1000.0;
  }
  return tk_stored(t, v);
}

static double as_double(tk_value v) { return v.is_int ? (double)v.i : v.f; }

/* out_f32: a and b of dtype c->t (16-bit), out float32 */
static void check_case_out(const gcase *c, int out_f32) {
  const nrt_dtype t = c->t, ot = out_f32 ? NRT_FLOAT32 : t;
  const int64_t es = tk_size(t), oes = tk_size(ot), B = c->batch, M = c->m, N = c->n, K = c->k;
  const int64_t bb = c->b_broadcast ? 1 : B, sl = c->sliced ? 2 : 1;
  char *a = tk_alloc((size_t)(B * M * K * es * sl)), *b = tk_alloc((size_t)(bb * K * N * es * sl));
  char *out = tk_alloc((size_t)(B * M * N * oes * sl));
  tk_value *va = malloc(sizeof *va * (size_t)(B * M * K + 1));
  tk_value *vb = malloc(sizeof *vb * (size_t)(bb * K * N + 1));
  tk_value *vo = malloc(sizeof *vo * (size_t)(B * M * N + 1));
  /* a stored (batch, m, k) or (batch, k, m) if transposed; likewise b */
  int64_t a_sz[3] = {B, M, K}, a_st[3] = {M * K, c->a_transposed ? 1 : K, c->a_transposed ? M : 1};
  int64_t b_sz[3] = {B, K, N}, b_st[3] = {c->b_broadcast ? 0 : K * N, c->b_transposed ? 1 : N,
                                          c->b_transposed ? K : 1};
  /* element i of a logical (contiguous-order) array lives at i * sl */
  for (int64_t i = 0; i < B * M * K; i++) {
    va[i] = random_value(t);
    tk_put(t, a + i * sl * es, va[i]);
  }
  for (int64_t i = 0; i < bb * K * N; i++) {
    vb[i] = random_value(t);
    tk_put(t, b + i * sl * es, vb[i]);
  }
  /* out element (bi, i, j) at logical index o_index */
  int64_t o_st[3] = {M * N, c->out_transposed ? 1 : N, c->out_transposed ? M : 1};
  for (int64_t i = 0; i < B * M * N; i++) {
    vo[i] = (c->beta == 0 || c->addend) && !tk_is_integral(t) ? (tk_value){0, 0, NAN} : random_value(t);
    tk_put(ot, out + i * sl * oes, vo[i]);
  }
  /* the addend: values vc at logical (bi, i, j) -> vc[bi * M * N + i * N + j],
   * stored contiguous (full), as one row of n (bias) or one column of m */
  tk_value *vc = malloc(sizeof *vc * (size_t)(B * M * N + 1));
  tk_value *vstore = malloc(sizeof *vstore * (size_t)(B * M * N + 1));
  char *cbuf = tk_alloc((size_t)((B * M * N + 1) * oes));
  int64_t c_st[3] = {M * N, N, 1};
  if (c->addend == ADD_ROW_BIAS) c_st[0] = 0, c_st[1] = 0;
  if (c->addend == ADD_COLUMN) c_st[0] = 0, c_st[1] = 1, c_st[2] = 0;
  for (int64_t i = 0; i < B * M * N; i++) tk_put(ot, cbuf + i * oes, vstore[i] = random_value(ot));
  for (int64_t bi = 0; bi < B; bi++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) vc[bi * M * N + i * N + j] = vstore[bi * c_st[0] + i * c_st[1] + j * c_st[2]];
  int64_t a_st_e[3], b_st_e[3], o_st_e[3];
  for (int d = 0; d < 3; d++) a_st_e[d] = a_st[d] * sl, b_st_e[d] = b_st[d] * sl, o_st_e[d] = o_st[d] * sl;
  nrt_operand ops[4] = {tk_operand(out, ot, 3, (int64_t[]){B, M, N}, o_st_e),
                        tk_operand(a, t, 3, a_sz, a_st_e), tk_operand(b, t, 3, b_sz, b_st_e),
                        tk_operand(cbuf, ot, 3, (int64_t[]){B, M, N}, c_st)};
  nk_gemm_params p = {{c->alpha, (int64_t)c->alpha}, {c->beta, (int64_t)c->beta}};
  nrt_task task = tk_task(NK_KERNEL_GEMM, c->addend ? 4 : 3, ops, &p, sizeof p);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t bi = 0; bi < B && bad < 3; bi++)
    for (int64_t i = 0; i < M && bad < 3; i++)
      for (int64_t j = 0; j < N && bad < 3; j++) {
        long double acc = 0;
        int64_t iacc = 0;
        for (int64_t p2 = 0; p2 < K; p2++) {
          tk_value x = va[bi * a_st[0] + i * a_st[1] + p2 * a_st[2]];
          tk_value y = vb[bi * b_st[0] + p2 * b_st[1] + j * b_st[2]];
          acc += (long double)as_double(x) * as_double(y);
          iacc += x.i * y.i;
        }
        const int64_t o = bi * o_st[0] + i * o_st[1] + j * o_st[2];
        const tk_value prior = c->addend ? vc[bi * M * N + i * N + j] : vo[o];
        if (tk_is_integral(t)) {
          tk_value e = {1, (int64_t)c->alpha * iacc + (int64_t)c->beta * prior.i, 0};
          uint64_t want = tk_expected(e, t), got = tk_raw(t, out + o * sl * es);
          if (want != got) bad++;
        } else {
          double want = c->alpha * (double)acc + (c->beta == 0 ? 0 : c->beta * prior.f);
          tk_value g = {0};
          const char *op = out + o * sl * oes;
          if (ot == NRT_FLOAT16) g.f = tk_f16_value((uint16_t)tk_raw(ot, op));
          else if (ot == NRT_BFLOAT16) g.f = tk_bf16_value((uint16_t)tk_raw(ot, op));
          else if (ot == NRT_FLOAT32) { float f; memcpy(&f, op, 4); g.f = f; }
          else memcpy(&g.f, op, 8);
          double tol = tolerance(ot, K) * (fabs(c->alpha) + fabs(c->beta)) + tolerance(ot, 0);
          if (!(fabs(g.f - want) <= tol)) {
            if (bad == 0)
              fprintf(stderr, "  gemm %s%s b%lld m%lld n%lld k%lld [%lld,%lld,%lld]: got %g want %g\n",
                      tk_dtype_names[t], out_f32 ? "->float32" : "", (long long)B, (long long)M, (long long)N, (long long)K,
                      (long long)bi, (long long)i, (long long)j, g.f, want);
            bad++;
          }
        }
      }
  CHECK(bad == 0);
  free(va), free(vb), free(vo), free(vc), free(vstore);
  tk_free(a), tk_free(b), tk_free(out), tk_free(cbuf);
}

static void check_case(const gcase *c) { check_case_out(c, 0); }

/* out = alpha a b + beta c, through every output path. */
static void test_addend(void) {
  static const nrt_dtype types[] = {NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16, NRT_INT64};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
    for (int mode = ADD_FULL; mode <= ADD_COLUMN; mode++) {
      const double beta = tk_is_integral(types[ti]) ? 3 : 0.75;
      const double one = tk_is_integral(types[ti]) ? 3 : 1; /* a full c is copied, not scaled */
      gcase cases[] = {
          {types[ti], 1, 37, 70, 53, 0, 1, 0, 1, beta, 0, 0, mode},  /* tiles + edges, k blocks */
          {types[ti], 2, 13, 33, 9, 1, 0, 0, -0.5, beta, 1, 0, mode}, /* strided out: workspace */
          {types[ti], 1, 45, 1, 30, 0, 0, 0, 1, beta, 0, 0, mode},   /* matrix-vector */
          {types[ti], 1, 1, 45, 30, 0, 1, 0, 2, beta, 0, 1, mode},   /* row-vector */
          {types[ti], 3, 4, 5, 0, 0, 0, 0, 1, beta, 0, 0, mode},     /* k = 0: beta c */
          {types[ti], 1, 6, 7, 5, 0, 0, 0, 1, 0, 0, 0, mode},        /* beta 0: c ignored */
          {types[ti], 1, 37, 70, 53, 0, 1, 0, 1, one, 0, 0, mode},   /* beta 1 */
          {types[ti], 2, 150, 90, 600, 1, 0, 0, 1, one, 0, 0, mode}, /* the pool, k blocks */
      };
      for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    }
}

static void test_sizes(void) {
  static const int64_t sizes[] = {0, 1, 5, 6, 7, 13, 17, 33, 97};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j += 2) {
      gcase c = {NRT_FLOAT32, 1, sizes[i], sizes[j], sizes[(i + j) % 9], 0, 0, 0, 1, 0, 0, 0};
      check_case(&c);
    }
  /* blocking edges: k across KC, m across MC, n across NC */
  gcase edges[] = {
      {NRT_FLOAT32, 1, 7, 17, 255, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 7, 17, 257, 0, 0, 0, 1, 0, 0, 0},
      {NRT_FLOAT32, 1, 95, 9, 31, 0, 0, 0, 1, 0, 0, 0},  {NRT_FLOAT32, 1, 97, 9, 31, 0, 0, 0, 1, 0, 0, 0},
      {NRT_FLOAT32, 1, 3, 1025, 5, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT64, 1, 3, 513, 300, 0, 0, 0, 1, 0, 0, 0},
      {NRT_FLOAT32, 1, 200, 300, 520, 0, 0, 0, 1, 0, 0, 0}, /* several tiles: the pool */
  };
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) check_case(&edges[i]);
}

static void test_layouts_and_dtypes(void) {
  for (int t = NRT_UINT8; t < NRT_DTYPE_COUNT; t++)
    for (int layout = 0; layout < 4; layout++) {
      gcase c = {(nrt_dtype)t, 3, 11, 19, 23, layout & 1, (layout >> 1) & 1, layout == 3, 1, 0, 0, 0};
      check_case(&c);
    }
  gcase scaled[] = {
      {NRT_FLOAT32, 2, 9, 18, 7, 0, 1, 0, 0.5, 2, 0, 0},  {NRT_FLOAT64, 2, 9, 18, 7, 1, 0, 0, -2, 0.25, 0, 0},
      {NRT_BFLOAT16, 1, 8, 8, 64, 0, 0, 0, 1, 1, 0, 0}, {NRT_FLOAT16, 1, 8, 8, 64, 0, 0, 0, 1, -1, 0, 0},
      {NRT_INT64, 2, 5, 6, 7, 0, 0, 0, 3, -2, 0, 0},     {NRT_INT32, 1, 5, 6, 0, 0, 0, 0, 1, 2, 0, 0}, /* k = 0 */
      {NRT_FLOAT32, 1, 4, 4, 0, 0, 0, 0, 1, 0, 0, 0},    /* k = 0, beta 0: zeros, not NaN */
  };
  for (size_t i = 0; i < sizeof scaled / sizeof *scaled; i++) check_case(&scaled[i]);
}

/* Random shapes around the forced block sizes (MC 24, KC 40, NC 64) and
 * the micro-tiles, random layouts, every float dtype, alpha/beta. */
static void test_random_sweep(void) {
  static const int64_t dims[] = {0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 16, 17, 23, 24, 25,
                                 31, 32, 33, 39, 40, 41, 47, 48, 49, 63, 64, 65, 79, 81, 97, 130};
  static const nrt_dtype fl[] = {NRT_FLOAT32, NRT_FLOAT32, NRT_FLOAT64, NRT_BFLOAT16, NRT_FLOAT16,
                                 NRT_INT32};
  const int nd = (int)(sizeof dims / sizeof *dims);
  for (int it = 0; it < 60; it++) {
    gcase c = {fl[tk_rand() % 6], 1 + (int64_t)(tk_rand() % 2), dims[tk_rand() % nd],
               dims[tk_rand() % nd], dims[tk_rand() % nd], (int)(tk_rand() % 2), (int)(tk_rand() % 2),
               0, 1, 0, (int)(tk_rand() % 2), (int)(tk_rand() % 3 == 0)};
    c.b_broadcast = c.batch > 1 && tk_rand() % 2;
    if (tk_rand() % 3 == 0) c.alpha = 0.5, c.beta = tk_is_integral(c.t) ? 2 : -1.5;
    check_case(&c);
  }
  /* tall / skinny / matrix-vector (the unpacked paths) and one big k */
  gcase shapes[] = {
      {NRT_FLOAT32, 1, 301, 1, 77, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 301, 1, 77, 1, 0, 0, 2, 1, 0, 0},
      {NRT_FLOAT32, 1, 1, 301, 77, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 1, 301, 77, 0, 1, 0, 1, 0, 0, 1},
      {NRT_FLOAT64, 2, 133, 1, 65, 0, 0, 1, 1, 0.5, 0, 0}, {NRT_FLOAT64, 1, 1, 1, 1000, 0, 0, 0, 1, 0, 0, 0},
      {NRT_FLOAT32, 1, 1, 1, 1000, 0, 0, 0, 1, 0, 0, 1},  {NRT_BFLOAT16, 1, 70, 1, 50, 0, 0, 0, 1, 0, 0, 0},
      {NRT_FLOAT32, 1, 500, 3, 9, 0, 0, 0, 1, 0, 0, 0},   {NRT_FLOAT32, 1, 3, 500, 9, 1, 1, 0, 1, 0, 1, 0},
      {NRT_FLOAT32, 1, 5, 7, 700, 0, 0, 0, 1, 0, 0, 0},   {NRT_FLOAT32, 40, 9, 10, 11, 0, 0, 1, 1, 0, 0, 0},
      {NRT_FLOAT32, 3, 150, 140, 130, 1, 0, 0, 1, 1, 1, 0},
      /* bfloat16 in k pairs (AVX512_BF16): odd k across many k blocks, every
       * layout, alpha/beta */
      {NRT_BFLOAT16, 1, 30, 40, 2051, 0, 0, 0, 1, 0, 0, 0}, {NRT_BFLOAT16, 2, 29, 37, 301, 1, 1, 0, 0.5, 2, 0, 0},
      {NRT_BFLOAT16, 1, 13, 65, 99, 1, 0, 0, 1, 0, 1, 0},   {NRT_BFLOAT16, 1, 65, 13, 99, 0, 1, 0, 1, -1, 0, 1},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_case(&shapes[i]);
}

/* Small plain products read B in place (gemm.c, small_unpacked): n a
 * multiple of the micro-tile's width (32 floats at AVX-512, 16 at AVX2; 16
 * doubles / 8), k within one k block (KC 40 here), up to 256 rows; two
 * panels of NC 64, edge row tiles, batches with a broadcast B, alpha/beta,
 * a transposed out; float16/bfloat16 at the same shapes.  (At AVX2 only a
 * B within half of L1 is read in place: 13x128x33 is packed there.)  And
 * few_rows_unpacked's products, with the B it leaves packed. */
static void test_plain_unpacked(void) {
  gcase cases[] = {
      {NRT_FLOAT32, 1, 100, 64, 40, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 13, 128, 33, 1, 0, 0, 0.5, 2, 0, 0},
      {NRT_FLOAT32, 3, 50, 32, 29, 0, 0, 1, 1, 0, 0, 0},  {NRT_FLOAT32, 1, 256, 64, 7, 0, 0, 0, 1, -1, 1, 0},
      {NRT_FLOAT64, 1, 37, 32, 17, 0, 0, 0, 1, 0, 0, 0},  {NRT_FLOAT64, 2, 9, 16, 40, 1, 0, 0, -2, 0.25, 0, 0},
      /* 16-bit B at those shapes is packed (the rows kernels read floats) */
      {NRT_FLOAT16, 1, 20, 64, 30, 0, 0, 0, 1, 0, 0, 0},  {NRT_BFLOAT16, 1, 20, 64, 30, 0, 0, 0, 1, 0, 0, 0},
      /* few rows (<= 128, k >= 256) read B in place at any size, across
       * k blocks, with edge row tiles, a broadcast B and a transposed A;
       * rows 2 KiB apart (n 512 floats) stay packed */
      {NRT_FLOAT32, 1, 70, 96, 300, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 2, 128, 64, 260, 0, 0, 1, 0.5, 2, 0, 0},
      {NRT_FLOAT64, 1, 33, 48, 257, 1, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 20, 512, 256, 0, 0, 0, 1, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

/* bfloat16/float16 a and b into a float32 out (the convolution's operands
 * with its float32 accumulators): every layout, alpha/beta (beta 1: the
 * weight gradient's chunk after chunk), matrix-vector shapes, odd k across
 * k blocks, and a random sweep. */
static void test_mixed(void) {
  gcase fixed[] = {
      {NRT_BFLOAT16, 1, 30, 40, 2051, 0, 0, 0, 1, 0, 0, 0}, {NRT_BFLOAT16, 2, 29, 37, 301, 1, 1, 0, 0.5, 2, 0, 0},
      {NRT_BFLOAT16, 1, 13, 65, 99, 1, 0, 0, 1, 1, 1, 0},   {NRT_BFLOAT16, 1, 65, 13, 99, 0, 1, 0, 1, -1, 0, 1},
      {NRT_BFLOAT16, 3, 24, 64, 80, 0, 0, 1, 1, 1, 0, 0},   {NRT_BFLOAT16, 1, 70, 1, 50, 0, 0, 0, 1, 0, 0, 0},
      {NRT_BFLOAT16, 1, 1, 70, 51, 0, 1, 0, 1, 1, 0, 0},    {NRT_BFLOAT16, 1, 4, 4, 0, 0, 0, 0, 1, 0.5, 0, 0},
      {NRT_FLOAT16, 2, 29, 37, 301, 1, 1, 0, 0.5, 2, 0, 0}, {NRT_FLOAT16, 1, 70, 1, 50, 0, 0, 0, 1, 1, 0, 1},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) check_case_out(&fixed[i], 1);
  static const int64_t dims[] = {1, 2, 7, 11, 12, 13, 23, 24, 25, 31, 32, 33, 40, 41, 64, 65, 97};
  const int nd = (int)(sizeof dims / sizeof *dims);
  for (int it = 0; it < 30; it++) {
    gcase c = {it % 5 ? NRT_BFLOAT16 : NRT_FLOAT16, 1 + (int64_t)(tk_rand() % 2), dims[tk_rand() % nd],
               dims[tk_rand() % nd], dims[tk_rand() % nd], (int)(tk_rand() % 2), (int)(tk_rand() % 2),
               0, 1, 0, (int)(tk_rand() % 2), (int)(tk_rand() % 3 == 0)};
    if (tk_rand() % 2) c.beta = 1;
    check_case_out(&c, 1);
  }
}

/* nk_gemm_operands from inside a parallel region (as convolution and
 * attention call it): a kernel whose parallel_for runs one product per
 * batch entry; there the GEMM runs serially, and its results must be
 * bit-identical to the same products run on the pool. */
enum { K_NESTED = NRT_KERNEL_MAX - 3 };
typedef struct nested_arg {
  const nrt_operand *ops;
  nrt_exec_ctx *ctx;
  int failed;
} nested_arg;

static void nested_range(void *arg, int64_t begin, int64_t end, int worker) {
  (void)worker;
  nested_arg *na = arg;
  for (int64_t bi = begin; bi < end; bi++) {
    nrt_operand one[3];
    for (int i = 0; i < 3; i++) {
      one[i] = na->ops[i];
      one[i].data = (char *)one[i].data + bi * one[i].strides[0];
      one[i].sizes[0] = 1;
    }
    nk_scalar alpha = {1, 1}, beta = {0, 0};
    if (nk_gemm_operands(na->ctx, one, alpha, beta)) __atomic_store_n(&na->failed, 1, __ATOMIC_RELAXED);
  }
}

static int nested_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  nested_arg na = {task->operands, ctx, 0};
  nrt_parallel_for(task->operands[0].sizes[0], 1, nested_range, &na);
  return na.failed ? -1 : 0;
}

static void test_nested_in_parallel_region(void) {
  CHECK_OK(nrt_kernel_register(K_NESTED, "gemm_nested", nested_kernel));
  const int64_t B = 4, M = 70, N = 90, K = 130;
  for (int ti = 0; ti < 3; ti++) {
    const nrt_dtype t = ti == 0 ? NRT_FLOAT32 : ti == 1 ? NRT_FLOAT64 : NRT_BFLOAT16;
    const int64_t es = tk_size(t);
    char *a = tk_alloc((size_t)(B * M * K * es)), *b = tk_alloc((size_t)(B * K * N * es));
    char *o1 = tk_alloc((size_t)(B * M * N * es)), *o2 = tk_alloc((size_t)(B * M * N * es));
    for (int64_t i = 0; i < B * M * K; i++) tk_put(t, a + i * es, random_value(t));
    for (int64_t i = 0; i < B * K * N; i++) tk_put(t, b + i * es, random_value(t));
    nrt_operand ops1[3] = {tk_operand(o1, t, 3, (int64_t[]){B, M, N}, NULL),
                           tk_operand(a, t, 3, (int64_t[]){B, M, K}, NULL),
                           tk_operand(b, t, 3, (int64_t[]){B, K, N}, NULL)};
    nrt_operand ops2[3] = {ops1[0], ops1[1], ops1[2]};
    ops2[0].data = o2;
    nk_gemm_params p = {{1, 1}, {0, 0}};
    /* pooled: one product per batch entry, each on the whole pool */
    for (int64_t bi = 0; bi < B; bi++) {
      nrt_operand one[3];
      for (int i = 0; i < 3; i++) {
        one[i] = ops1[i];
        one[i].data = (char *)one[i].data + bi * one[i].strides[0];
        one[i].sizes[0] = 1;
      }
      nrt_task task = tk_task(NK_KERNEL_GEMM, 3, one, &p, sizeof p);
      CHECK_OK(tk_run(&task));
    }
    nrt_task nested = tk_task((nk_kernel_id)K_NESTED, 3, ops2, NULL, 0);
    CHECK_OK(tk_run(&nested));
    CHECK(memcmp(o1, o2, (size_t)(B * M * N * es)) == 0);
    tk_free(a), tk_free(b), tk_free(o1), tk_free(o2);
  }
}

/* b's rows (k index) or columns at shuffled offsets in a bigger buffer. */
enum { K_INDIRECT = NRT_KERNEL_MAX - 4 };
static nk_gemm_indirect indirect_tables;
static double indirect_beta;

static int indirect_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  nk_scalar alpha = {1, 1}, beta = {indirect_beta, (int64_t)indirect_beta};
  return nk_gemm_operands_indirect(ctx, task->operands, alpha, beta, &indirect_tables);
}

/* t: a and b's dtype, ot: out's; spread: elements between b's entries
 * along the index without a table (1: adjacent). */
static void check_indirect(nrt_dtype t, nrt_dtype ot, int64_t M, int64_t N, int64_t K, int by_rows,
                           double beta, int spread) {
  const int64_t es = tk_size(t), oes = tk_size(ot), lines = by_rows ? K : N, gap = 3;
  const int64_t len = (by_rows ? N : K) * spread;
  char *a = tk_alloc((size_t)(M * K * es)), *out = tk_alloc((size_t)(M * N * oes + oes));
  char *b = tk_alloc((size_t)((lines * (len + gap) + ROWS_SLACK) * es));
  int64_t *off = malloc(sizeof *off * (size_t)(lines + 1)), *slot = malloc(sizeof *slot * (size_t)(lines + 1));
  double *va = malloc(sizeof *va * (size_t)(M * K + 1)), *vb = malloc(sizeof *vb * (size_t)(K * N + 1));
  double *vo = malloc(sizeof *vo * (size_t)(M * N + 1));
  memset(b, 0, (size_t)((lines * (len + gap) + ROWS_SLACK) * es));
  for (int64_t i = 0; i < lines; i++) slot[i] = i;
  for (int64_t i = lines - 1; i > 0; i--) { /* shuffle: line i lives in slot[i] */
    const int64_t j = (int64_t)(tk_rand() % (uint64_t)(i + 1)), s2 = slot[i];
    slot[i] = slot[j];
    slot[j] = s2;
  }
  for (int64_t i = 0; i < lines; i++) off[i] = slot[i] * (len + gap) * es;
  for (int64_t i = 0; i < M * K; i++) {
    va[i] = as_double(random_value(t));
    tk_put(t, a + i * es, (tk_value){0, 0, va[i]});
  }
  for (int64_t p2 = 0; p2 < K; p2++)
    for (int64_t j = 0; j < N; j++) {
      vb[p2 * N + j] = as_double(random_value(t));
      const int64_t at = by_rows ? off[p2] + j * spread * es : off[j] + p2 * spread * es;
      tk_put(t, b + at, (tk_value){0, 0, vb[p2 * N + j]});
    }
  for (int64_t i = 0; i < M * N; i++) {
    vo[i] = as_double(random_value(ot));
    tk_put(ot, out + i * oes, (tk_value){0, 0, vo[i]});
  }
  indirect_tables = by_rows ? (nk_gemm_indirect){off, NULL} : (nk_gemm_indirect){NULL, off};
  indirect_beta = beta;
  nrt_operand ops[3] = {tk_operand(out, ot, 3, (int64_t[]){1, M, N}, NULL),
                        tk_operand(a, t, 3, (int64_t[]){1, M, K}, NULL),
                        tk_operand(b, t, 3, (int64_t[]){1, K, N}, (int64_t[]){0, 0, 0})};
  ops[2].strides[1] = by_rows ? 0 : spread * es; /* the unused index's stride: 0 */
  ops[2].strides[2] = by_rows ? spread * es : 0;
  nrt_task task = tk_task((nk_kernel_id)K_INDIRECT, 3, ops, NULL, 0);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      long double acc = 0;
      for (int64_t p2 = 0; p2 < K; p2++) acc += (long double)va[i * K + p2] * vb[p2 * N + j];
      const double want = (double)acc + beta * vo[i * N + j];
      double got;
      const char *o = out + (i * N + j) * oes;
      if (ot == NRT_FLOAT32) { float f; memcpy(&f, o, 4); got = f; }
      else if (ot == NRT_BFLOAT16) got = tk_bf16_value((uint16_t)tk_raw(ot, o));
      else memcpy(&got, o, 8);
      if (!(fabs(got - want) <= tolerance(ot, K) * 2 + tolerance(ot, 0))) {
        if (!bad)
          fprintf(stderr, "  indirect %s %s->%s spread %d m%lld n%lld k%lld [%lld,%lld]: got %g want %g\n",
                  by_rows ? "rows" : "cols", tk_dtype_names[t], tk_dtype_names[ot], spread, (long long)M, (long long)N,
                  (long long)K, (long long)i, (long long)j, got, want);
        bad++;
      }
    }
  CHECK(bad == 0);
  free(off), free(slot), free(va), free(vb), free(vo);
  tk_free(a), tk_free(b), tk_free(out);
}

static void test_indirect(void) {
  CHECK_OK(nrt_kernel_register(K_INDIRECT, "gemm_indirect", indirect_kernel));
  /* up to 256 rows B (by rows) is read unpacked, beyond it packed */
  static const int64_t ms[] = {5, 16, 30, 40, 100, 256, 261}, ns[] = {1, 37, 70}, ks[] = {3, 45, 130};
  for (int t = 0; t < 2; t++)
    for (int by_rows = 0; by_rows < 2; by_rows++)
      for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        for (size_t j = 0; j < 3; j++)
          check_indirect(t ? NRT_FLOAT64 : NRT_FLOAT32, t ? NRT_FLOAT64 : NRT_FLOAT32, ms[i], ns[j],
                         ks[(i + j) % 3], by_rows, (double)((i + j) % 2), 1);
  /* bfloat16 b through the tables (k pairs on AVX512_BF16, widened
   * elsewhere): into float32 (implicit convolution) and bfloat16, entries
   * adjacent (the fast pair packings) and spread (element by element) */
  static const int64_t bks[] = {3, 45, 130, 1, 80};
  for (int by_rows = 0; by_rows < 2; by_rows++)
    for (size_t i = 0; i < 5; i++)
      for (size_t j = 0; j < 3; j++)
        check_indirect(NRT_BFLOAT16, (i + j) % 4 == 3 ? NRT_BFLOAT16 : NRT_FLOAT32, ms[i], ns[j],
                       bks[(i + 2 * j) % 5], by_rows, (double)((i + j) % 2), 1 + (int)(j == 1));
}

/* bfloat16 b stored in k pairs (nk_gemm_indirect.b_pair_rows): pair p's
 * words (column j at + 4 j, low half row 2p) at shuffled offsets, read in
 * place by the dot-product rows kernel; into float32.  Odd K: the last
 * pair's high half is 0 in b (and A's packing pads it with 0).  Where the
 * CPU has no such kernel the product must fail, not read b as elements. */
static void check_pair_rows(int64_t M, int64_t N, int64_t K, double beta) {
  const int64_t P = (K + 1) / 2, gap = 5, line = N * 4 + gap * 4; /* bytes per pair line */
  char *a = tk_alloc((size_t)(M * K * 2)), *out = tk_alloc((size_t)(M * N * 4 + 4));
  char *b = tk_alloc((size_t)(P * line + ROWS_SLACK * 4));
  int64_t *off = malloc(sizeof *off * (size_t)(P + 1));
  double *va = malloc(sizeof *va * (size_t)(M * K + 1)), *vb = malloc(sizeof *vb * (size_t)(K * N + 1));
  double *vo = malloc(sizeof *vo * (size_t)(M * N + 1));
  memset(b, 0, (size_t)(P * line + ROWS_SLACK * 4));
  for (int64_t q = 0; q < P; q++) off[q] = ((q * 7) % P) * line; /* a permutation of the lines */
  for (int64_t i = 0; i < M * K; i++) {
    va[i] = as_double(random_value(NRT_BFLOAT16));
    tk_put(NRT_BFLOAT16, a + i * 2, (tk_value){0, 0, va[i]});
  }
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < N; j++) {
      vb[k * N + j] = as_double(random_value(NRT_BFLOAT16));
      tk_put(NRT_BFLOAT16, b + off[k / 2] + j * 4 + (k % 2) * 2, (tk_value){0, 0, vb[k * N + j]});
    }
  for (int64_t i = 0; i < M * N; i++) {
    vo[i] = as_double(random_value(NRT_FLOAT32));
    tk_put(NRT_FLOAT32, out + i * 4, (tk_value){0, 0, vo[i]});
  }
  indirect_tables = (nk_gemm_indirect){off, NULL, 1};
  indirect_beta = beta;
  nrt_operand ops[3] = {tk_operand(out, NRT_FLOAT32, 3, (int64_t[]){1, M, N}, NULL),
                        tk_operand(a, NRT_BFLOAT16, 3, (int64_t[]){1, M, K}, NULL),
                        tk_operand(b, NRT_BFLOAT16, 3, (int64_t[]){1, K, N}, (int64_t[]){0, 0, 4})};
  nrt_task task = tk_task((nk_kernel_id)K_INDIRECT, 3, ops, NULL, 0);
  if (!nk_gemm_pair_rows()) {
    CHECK(tk_run(&task) != NRT_SUCCESS);
  } else {
    CHECK_OK(tk_run(&task));
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        long double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += (long double)va[i * K + k] * vb[k * N + j];
        const double want = (double)acc + beta * vo[i * N + j];
        float got;
        memcpy(&got, out + (i * N + j) * 4, 4);
        if (!(fabs(got - want) <= tolerance(NRT_FLOAT32, K) * 2 + tolerance(NRT_FLOAT32, 0))) {
          if (!bad)
            fprintf(stderr, "  pair rows m%lld n%lld k%lld [%lld,%lld]: got %g want %g\n", (long long)M,
                    (long long)N, (long long)K, (long long)i, (long long)j, (double)got, want);
          bad++;
        }
      }
    CHECK(bad == 0);
  }
  indirect_tables = (nk_gemm_indirect){NULL, NULL, 0};
  free(off), free(va), free(vb), free(vo);
  tk_free(a), tk_free(b), tk_free(out);
}

static void test_pair_rows(void) {
  /* 16 and 32 rows take the 8-row kernel, 12 and 40 the 12-row one; 70
   * columns end in a part sliver; k odd, one pair, and past KC (40 here) */
  static const int64_t ms[] = {16, 32, 12, 40, 5}, ns[] = {64, 70, 1}, ks[] = {144, 45, 2, 1, 81};
  for (size_t i = 0; i < 5; i++)
    for (size_t j = 0; j < 3; j++) check_pair_rows(ms[i], ns[j], ks[(i + j) % 5], (double)((i + j) % 2));
}

static void test_validation(void) {
  float buf[64] = {0};
  nrt_operand good[3] = {tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 2, 3}, NULL),
                         tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 2, 4}, NULL),
                         tk_operand(buf, NRT_FLOAT32, 3, (int64_t[]){1, 4, 3}, NULL)};
  nk_gemm_params p = {{1, 1}, {0, 0}};
  nrt_operand ops[3];
  memcpy(ops, good, sizeof ops);
  ops[2].sizes[1] = 5;
  nrt_task t = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "do not chain"));
  memcpy(ops, good, sizeof ops);
  ops[1].dtype = NRT_FLOAT64;
  t = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "one dtype"));
  /* mixed precision is 16-bit a and b of one dtype into float32 only */
  memcpy(ops, good, sizeof ops);
  ops[1].dtype = NRT_BFLOAT16;
  t = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "one dtype"));
  ops[2].dtype = NRT_FLOAT16;
  t = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "one dtype"));
  ops[2].dtype = NRT_BFLOAT16;
  ops[0].dtype = NRT_FLOAT64;
  t = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "one dtype"));
  memcpy(ops, good, sizeof ops);
  ops[0].ndim = 2;
  t = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  CHECK(tk_fails_with(&t, "must be 3-d"));
  for (int i = 0; i < 3; i++) good[i].dtype = NRT_BOOL;
  t = tk_task(NK_KERNEL_GEMM, 3, good, &p, sizeof p);
  CHECK(tk_fails_with(&t, "bool"));
  t = tk_task(NK_KERNEL_GEMM, 2, good, &p, sizeof p);
  CHECK(tk_fails_with(&t, "expected 3 operands"));
}

/* A product solved transposed (out^T = b^T a^T; gemm.c, transposed_pays)
 * gives the bits of the untransposed one: the same shapes run with
 * TORCHNEURON_GEMM_TRANSPOSE=0 and =1 and compare byte for byte, and both
 * against the exact sum (check_case).  Shapes across the k blocks (KC 40
 * here), edge tiles both ways, strided outputs, float32, float64, and
 * bfloat16 into bfloat16 and into float32. */
static void run_bytes(const gcase *c, nrt_dtype ot, const char *mode, char *out) {
  const nrt_dtype t = c->t;
  const int64_t es = tk_size(t), oes = tk_size(ot), M = c->m, N = c->n, K = c->k;
  (void)oes;
  char *a = tk_alloc((size_t)(M * K * es)), *b = tk_alloc((size_t)(K * N * es));
  tk_rng = 0x5DEECE66Dull; /* the same operands for both runs */
  for (int64_t i = 0; i < M * K; i++) tk_put(t, a + i * es, random_value(t));
  for (int64_t i = 0; i < K * N; i++) tk_put(t, b + i * es, random_value(t));
  memset(out, 0, (size_t)(M * N * oes));
  int64_t o_st[3] = {M * N, c->out_transposed ? 1 : N, c->out_transposed ? M : 1};
  nrt_operand ops[3] = {tk_operand(out, ot, 3, (int64_t[]){1, M, N}, o_st),
                        tk_operand(a, t, 3, (int64_t[]){1, M, K}, NULL),
                        tk_operand(b, t, 3, (int64_t[]){1, K, N}, NULL)};
  nk_gemm_params p = {{1, 1}, {0, 0}};
  nrt_task task = tk_task(NK_KERNEL_GEMM, 3, ops, &p, sizeof p);
  setenv("TORCHNEURON_GEMM_TRANSPOSE", mode, 1);
  CHECK_OK(tk_run(&task));
  unsetenv("TORCHNEURON_GEMM_TRANSPOSE");
  tk_free(a), tk_free(b);
}

static void test_transposed_orientation(void) {
  const gcase cases[] = {
      {NRT_FLOAT32, 1, 100, 20, 97, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 64, 98, 130, 0, 0, 0, 1, 0, 0, 0},
      {NRT_FLOAT32, 1, 37, 70, 41, 0, 0, 0, 1, 0, 1, 0},  {NRT_FLOAT64, 1, 50, 18, 81, 0, 0, 0, 1, 0, 0, 0},
      {NRT_BFLOAT16, 1, 96, 34, 66, 0, 0, 0, 1, 0, 0, 0}, {NRT_FLOAT32, 1, 512, 98, 200, 0, 0, 0, 1, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    for (int wide = 0; wide < 1 + (cases[i].t == NRT_BFLOAT16); wide++) {
      const nrt_dtype ot = wide ? NRT_FLOAT32 : cases[i].t;
      const size_t bytes = (size_t)(cases[i].m * cases[i].n * tk_size(ot));
      char *plain = tk_alloc(bytes), *swapped = tk_alloc(bytes);
      run_bytes(&cases[i], ot, "0", plain);
      run_bytes(&cases[i], ot, "1", swapped);
      CHECK(memcmp(plain, swapped, bytes) == 0);
      tk_free(plain), tk_free(swapped);
    }
    setenv("TORCHNEURON_GEMM_TRANSPOSE", "1", 1);
    check_case(&cases[i]);
    unsetenv("TORCHNEURON_GEMM_TRANSPOSE");
  }
}

static void tests(void) {
  /* small blocks, so that small shapes cross every block edge (read once,
   * at the first product) */
  setenv("TORCHNEURON_GEMM_MC", "24", 1);
  setenv("TORCHNEURON_GEMM_KC", "40", 1);
  setenv("TORCHNEURON_GEMM_NC", "64", 1);
  test_sizes();
  test_random_sweep();
  test_plain_unpacked();
  test_nested_in_parallel_region();
  test_indirect();
  test_pair_rows();
  test_mixed();
  test_layouts_and_dtypes();
  test_addend();
  test_transposed_orientation();
  test_validation();
}

int main(void) { return tk_main(tests, __FILE__); }
