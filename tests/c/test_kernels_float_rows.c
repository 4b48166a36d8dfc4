/* The float-rows paths of the elementwise kernels (nd_iter.h's adapter,
 * half_rows.h's vectorised conversions, binary's fused AVX-512 16-bit loop)
 * for float16 and bfloat16: binary ops with contiguous, broadcast-scalar
 * (a float64 or 16-bit stride-0 operand), row-broadcast, strided and
 * in-place operands; unary ops (forward and backward); copies between
 * float32/float16/bfloat16, contiguous and transposed; lengths around the
 * vector widths and the adapter's chunk (1024) and block boundaries, and
 * special values (NaN with payloads and signs, infinities, subnormals,
 * values at the rounding ties and the float16 overflow edge).  Run once per
 * ISA (tk_main): avx512 takes the fused binary loop and the AVX-512
 * conversions, avx2 the widened chunks with F16C, portable the plain C.
 * References are written here: binary from the bits of the rounded float
 * result (tk_*_bits); unary and unary-backward as the float32 kernel's own
 * result on the widened input, rounded (the 16-bit contract: compute in
 * float32, round once); copies from tk_expected. */
#define _POSIX_C_SOURCE 200809L
#include "common/half_rows.h"
#include "test_kernels_util.h"

static const nrt_dtype halves[2] = {NRT_BFLOAT16, NRT_FLOAT16};
static const int64_t lengths[] = {1, 7, 15, 16, 17, 31, 33, 1023, 1024, 1025, 2065, 4099};
#define N_LENGTHS ((int)(sizeof lengths / sizeof lengths[0]))

static uint16_t half_bits(nrt_dtype t, double x) {
  return t == NRT_FLOAT16 ? tk_f16_bits(x) : tk_bf16_bits(x);
}
static float half_value(nrt_dtype t, uint16_t h) {
  return (float)(t == NRT_FLOAT16 ? tk_f16_value(h) : tk_bf16_value(h));
}

/* random values with a sprinkle of specials; ties and edges included */
static double sample(nrt_dtype t, int64_t i) {
  static const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 65504.0, 65520.0,
                                    1e-7, -3e-8, 6e-5, 1.00390625, 1.0 + 1.0 / 256 + 1.0 / 512};
  uint64_t r = tk_rand();
  if (r % 17 == 0) return specials[(r >> 8) % (sizeof specials / sizeof specials[0])];
  double v = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 8;
  (void)t;
  (void)i;
  return v;
}

/* bits equal (both sides canonicalise NaNs) */
static int same_bits(uint16_t got, uint16_t want) { return got == want; }

/* ------------------------------------------------------------------ binary */

static const nk_binary_op bops[] = {NK_BINARY_ADD, NK_BINARY_SUB, NK_BINARY_MUL, NK_BINARY_DIV};

static float bref(nk_binary_op op, float x, float y, float al) {
  switch (op) {
  case NK_BINARY_ADD: return al == 1 ? x + y : fmaf(al, y, x);
  case NK_BINARY_SUB: return al == 1 ? x - y : fmaf(-al, y, x);
  case NK_BINARY_MUL: return x * y;
  default: return x / y;
  }
}

enum { L_CONTIG, L_SCALAR_F64, L_SCALAR_HALF, L_A_SCALAR, L_STRIDED, L_INPLACE, L_OUT_STRIDED };

/* out[i] = op(a[i*sa], b[i*sb]) over n elements with the layout's strides */
static void binary_case(nrt_dtype t, nk_binary_op op, double alpha, int layout, int64_t n) {
  const int64_t sa = layout == L_STRIDED ? 3 : layout == L_A_SCALAR ? 0 : 1;
  const int64_t sb = layout == L_SCALAR_F64 || layout == L_SCALAR_HALF ? 0 : layout == L_STRIDED ? 2 : 1;
  const int64_t so = layout == L_OUT_STRIDED ? 2 : 1;
  uint16_t *a = tk_alloc((size_t)(n * 3 + 1) * 2), *b = tk_alloc((size_t)(n * 2 + 1) * 2);
  uint16_t *o = tk_alloc((size_t)(n * 2 + 1) * 2);
  double *b64 = tk_alloc(8);
  for (int64_t i = 0; i < n * 3 + 1; i++) a[i] = half_bits(t, sample(t, i));
  for (int64_t i = 0; i < n * 2 + 1; i++) b[i] = half_bits(t, sample(t, i));
  b64[0] = 0.3; /* not exact in float: the kernel must convert it to float once */
  uint16_t *a_copy = malloc((size_t)(n * 3 + 1) * 2);
  memcpy(a_copy, a, (size_t)(n * 3 + 1) * 2);
  nrt_operand ops[3];
  ops[0] = tk_operand(layout == L_INPLACE ? (void *)a : (void *)o, t, 1, &n, &so);
  ops[1] = tk_operand(a, t, 1, &n, &sa);
  ops[2] = layout == L_SCALAR_F64 ? tk_operand(b64, NRT_FLOAT64, 1, &n, &sb) : tk_operand(b, t, 1, &n, &sb);
  nk_binary_params prm = {op, t, {.f = alpha, .i = 0}};
  nrt_task task = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  const uint16_t *res = layout == L_INPLACE ? a : o;
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 3; i++) {
    float x = half_value(t, a_copy[i * sa]);
    float y = layout == L_SCALAR_F64 ? (float)b64[0] : half_value(t, b[i * sb]);
    uint16_t want = half_bits(t, bref(op, x, y, (float)alpha)), got = res[i * so];
    /* NaN op NaN: IEEE leaves open which NaN (so which sign) comes out,
     * and compilers swap the operands of commutative vector ops */
    if (isnan(x) && isnan(y) && (got & 0x7FFF) == (want & 0x7FFF)) continue;
    if (!same_bits(got, want)) {
      if (!bad)
        fprintf(stderr, "  binary %s op %d alpha %g layout %d n %lld [%lld]: %g op %g got 0x%04x want 0x%04x\n",
                tk_dtype_names[t], (int)op, alpha, layout, (long long)n, (long long)i, x, y, got, want);
      bad++;
    }
  }
  if (layout == L_OUT_STRIDED) /* the gaps are untouched */
    for (int64_t i = 0; i + 1 < n * 2 && !bad; i += 2) bad += o[i + 1] != 0;
  CHECK(bad == 0);
  free(a_copy);
  tk_free(a);
  tk_free(b);
  tk_free(o);
  tk_free(b64);
}

static void test_binary_halves(void) {
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 4; k++)
      for (int layout = L_CONTIG; layout <= L_OUT_STRIDED; layout++)
        for (int li = 0; li < N_LENGTHS; li++) {
          binary_case(halves[h], bops[k], 1.0, layout, lengths[li]);
          if (bops[k] == NK_BINARY_ADD || bops[k] == NK_BINARY_SUB)
            binary_case(halves[h], bops[k], 0.75, layout, lengths[li]);
        }
}

/* x (rows x cols) + bias (cols): the bias broadcast over rows, rows longer
 * and shorter than a chunk; and the float32-compute mixed case of autocast
 * (float32 out, 16-bit a, float32 b) */
static void test_binary_row_broadcast_and_mixed(void) {
  for (int h = 0; h < 2; h++) {
    const nrt_dtype t = halves[h];
    const int64_t rows = 5, cols_list[] = {3, 1029};
    for (int c = 0; c < 2; c++) {
      const int64_t cols = cols_list[c], sizes[2] = {rows, cols}, bstr[2] = {0, 1};
      uint16_t *x = tk_alloc((size_t)(rows * cols) * 2), *bias = tk_alloc((size_t)cols * 2);
      uint16_t *o = tk_alloc((size_t)(rows * cols) * 2);
      float *of = tk_alloc((size_t)(rows * cols) * 4), *bf = tk_alloc((size_t)(rows * cols) * 4);
      for (int64_t i = 0; i < rows * cols; i++) x[i] = half_bits(t, sample(t, i));
      for (int64_t i = 0; i < cols; i++) bias[i] = half_bits(t, sample(t, i));
      for (int64_t i = 0; i < rows * cols; i++) bf[i] = (float)sample(t, i);
      nrt_operand ops[3] = {tk_operand(o, t, 2, sizes, NULL), tk_operand(x, t, 2, sizes, NULL),
                            tk_operand(bias, t, 2, sizes, bstr)};
      nk_binary_params prm = {NK_BINARY_ADD, t, {.f = 1}};
      nrt_task task = tk_task(NK_KERNEL_BINARY, 3, ops, &prm, sizeof prm);
      CHECK_OK(tk_run(&task));
      int bad = 0;
      for (int64_t i = 0; i < rows * cols; i++)
        bad += !same_bits(o[i], half_bits(t, half_value(t, x[i]) + half_value(t, bias[i % cols])));
      CHECK(bad == 0);
      /* float32 out = 16-bit x * float32 b, computed in float32 */
      nrt_operand mops[3] = {tk_operand(of, NRT_FLOAT32, 2, sizes, NULL),
                             tk_operand(x, t, 2, sizes, NULL),
                             tk_operand(bf, NRT_FLOAT32, 2, sizes, NULL)};
      nk_binary_params mprm = {NK_BINARY_MUL, NRT_FLOAT32, {.f = 1}};
      task = tk_task(NK_KERNEL_BINARY, 3, mops, &mprm, sizeof mprm);
      CHECK_OK(tk_run(&task));
      bad = 0;
      for (int64_t i = 0; i < rows * cols; i++) {
        float want = half_value(t, x[i]) * bf[i];
        bad += !(of[i] == want || (isnan(of[i]) && isnan(want)));
      }
      CHECK(bad == 0);
      tk_free(x); tk_free(bias); tk_free(o); tk_free(of); tk_free(bf);
    }
  }
}

/* ------------------------------------------------------------------- unary */

/* 16-bit op(x) == round(float32 op(widened x)), for contiguous, strided and
 * in-place rows; the float32 reference runs contiguous (its vector path,
 * the one widened chunks take). */
static void unary_case(nrt_dtype t, int op, int64_t n, int strided, int inplace) {
  const int64_t sx = strided ? 3 : 1, one = 1;
  uint16_t *x = tk_alloc((size_t)(n * sx) * 2), *o = tk_alloc((size_t)n * 2);
  float *xf = tk_alloc((size_t)n * 4), *rf = tk_alloc((size_t)n * 4);
  for (int64_t i = 0; i < n * sx; i++) x[i] = half_bits(t, sample(t, i));
  for (int64_t i = 0; i < n; i++) xf[i] = half_value(t, x[i * sx]);
  nk_unary_params prm = {op, NRT_FLOAT32, {{0, 0}, {0, 0}, {0, 0}}};
  nrt_operand fops[2] = {tk_vector(rf, NRT_FLOAT32, n), tk_vector(xf, NRT_FLOAT32, n)};
  nrt_task task = tk_task(NK_KERNEL_UNARY, 2, fops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  prm.compute = t;
  nrt_operand hops[2] = {inplace ? tk_operand(x, t, 1, &n, &sx) : tk_operand(o, t, 1, &n, &one),
                         tk_operand(x, t, 1, &n, &sx)};
  task = tk_task(NK_KERNEL_UNARY, 2, hops, &prm, sizeof prm);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint16_t got = inplace ? x[i * sx] : o[i], want = half_bits(t, rf[i]);
    if (!same_bits(got, want) && bad++ == 0)
      fprintf(stderr, "  unary %s op %d n %lld strided %d inplace %d [%lld]: got 0x%04x want 0x%04x\n",
              tk_dtype_names[t], op, (long long)n, strided, inplace, (long long)i, got, want);
  }
  CHECK(bad == 0);
  tk_free(x); tk_free(o); tk_free(xf); tk_free(rf);
}

static void test_unary_halves(void) {
  const int ops[] = {NK_UNARY_EXP, NK_UNARY_TANH, NK_UNARY_GELU, NK_UNARY_GELU_TANH,
                     NK_UNARY_SILU, NK_UNARY_NEG, NK_UNARY_SIGMOID, NK_UNARY_LGAMMA};
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < (int)(sizeof ops / sizeof ops[0]); k++)
      for (int li = 0; li < N_LENGTHS; li++) {
        unary_case(halves[h], ops[k], lengths[li], 0, 0);
        if (li % 3 == 0) {
          unary_case(halves[h], ops[k], lengths[li], 1, 0);
          unary_case(halves[h], ops[k], lengths[li], 0, 1);
        }
      }
}

/* unary backward: 16-bit result == round(float32 result on widened inputs) */
static void test_unary_backward_halves(void) {
  const int ops[] = {NK_UNARY_BW_TANH, NK_UNARY_BW_GELU, NK_UNARY_BW_SILU};
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 3; k++)
      for (int li = 0; li < N_LENGTHS; li += 2) {
        const nrt_dtype t = halves[h];
        const int64_t n = lengths[li];
        uint16_t *a = tk_alloc((size_t)n * 2), *b = tk_alloc((size_t)n * 2), *o = tk_alloc((size_t)n * 2);
        float *af = tk_alloc((size_t)n * 4), *bf = tk_alloc((size_t)n * 4), *rf = tk_alloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
          a[i] = half_bits(t, sample(t, i));
          b[i] = half_bits(t, sample(t, i));
          af[i] = half_value(t, a[i]);
          bf[i] = half_value(t, b[i]);
        }
        nk_unary_params prm = {ops[k], NRT_FLOAT32, {{0, 0}, {0, 0}, {0, 0}}};
        nrt_operand fops[3] = {tk_vector(rf, NRT_FLOAT32, n), tk_vector(af, NRT_FLOAT32, n),
                               tk_vector(bf, NRT_FLOAT32, n)};
        nrt_task task = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, fops, &prm, sizeof prm);
        CHECK_OK(tk_run(&task));
        prm.compute = t;
        nrt_operand hops[3] = {tk_vector(o, t, n), tk_vector(a, t, n), tk_vector(b, t, n)};
        task = tk_task(NK_KERNEL_UNARY_BACKWARD, 3, hops, &prm, sizeof prm);
        CHECK_OK(tk_run(&task));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += !same_bits(o[i], half_bits(t, rf[i]));
        CHECK(bad == 0);
        tk_free(a); tk_free(b); tk_free(o); tk_free(af); tk_free(bf); tk_free(rf);
      }
}

/* -------------------------------------------------------------------- copy */

/* cast a (rows x cols) tensor `from` -> `to`, the input read transposed
 * when `transposed` (out contiguous), with specials and subnormals */
static void copy_case(nrt_dtype from, nrt_dtype to, int64_t rows, int64_t cols, int transposed) {
  const int64_t n = rows * cols, sizes[2] = {rows, cols}, tstr[2] = {1, rows};
  void *x = tk_alloc((size_t)(n * tk_size(from))), *o = tk_alloc((size_t)(n * tk_size(to)));
  tk_value *vals = malloc((size_t)n * sizeof *vals);
  for (int64_t i = 0; i < n; i++) {
    double v = sample(from, i);
    if (i % 29 == 5) v = ldexp((double)(tk_rand() % 1000), -150); /* float32/bf16 subnormals */
    if (i % 31 == 7) v = ldexp((double)(tk_rand() % 1000), -34);  /* float16 subnormal range */
    tk_value tv = {0, 0, v};
    if (from == NRT_FLOAT32 && i % 37 == 11) { /* a NaN with a payload and sign */
      uint32_t u = 0xFFA01234u;
      memcpy((char *)x + i * 4, &u, 4);
      float f;
      memcpy(&f, &u, 4);
      vals[i] = (tk_value){0, 0, f};
      continue;
    }
    tk_put(from, (char *)x + i * tk_size(from), tv);
    vals[i] = tk_stored(from, tv);
  }
  /* element (r, c) of the input lives at x[r + c*rows] when transposed */
  nrt_operand ops[2] = {tk_operand(o, to, 2, sizes, NULL),
                        tk_operand(x, from, 2, sizes, transposed ? tstr : NULL)};
  nrt_task task = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  CHECK_OK(tk_run(&task));
  int bad = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      int64_t src = transposed ? r + c * rows : r * cols + c, dst = r * cols + c;
      uint64_t want = tk_expected(vals[src], to), got = tk_raw(to, (char *)o + dst * tk_size(to));
      if (to == NRT_FLOAT32 && isnan(vals[src].f)) { /* float NaN: any quiet NaN of that sign */
        float g;
        memcpy(&g, &got, 4);
        if (isnan(g) && signbit(g) == signbit(vals[src].f)) continue;
      }
      if (from == NRT_FLOAT32 && to != NRT_FLOAT32 && isnan(vals[src].f)) /* canonical NaN */
        want = to == NRT_BFLOAT16 ? 0x7FC0 : (signbit(vals[src].f) ? 0xFE00 : 0x7E00);
      if (got != want && bad++ == 0)
        fprintf(stderr, "  copy %s -> %s %lldx%lld t%d [%lld,%lld] %g: got 0x%llx want 0x%llx\n",
                tk_dtype_names[from], tk_dtype_names[to], (long long)rows, (long long)cols,
                transposed, (long long)r, (long long)c, vals[src].f, (unsigned long long)got,
                (unsigned long long)want);
    }
  CHECK(bad == 0);
  free(vals);
  tk_free(x);
  tk_free(o);
}

static void test_copy_halves(void) {
  const nrt_dtype fl[3] = {NRT_FLOAT32, NRT_FLOAT16, NRT_BFLOAT16};
  const int64_t shapes[][2] = {{1, 1}, {3, 17}, {37, 53}, {1, 4099}, {129, 257}};
  for (int f = 0; f < 3; f++)
    for (int g = 0; g < 3; g++) {
      if (f == g) continue;
      for (int s = 0; s < 5; s++)
        for (int tr = 0; tr < 2; tr++) copy_case(fl[f], fl[g], shapes[s][0], shapes[s][1], tr);
    }
}

/* ------------------------------------------------------------------ rounding */

/* Every float32 -> bfloat16 rounding this CPU can run (the AVX512_BF16
 * instruction with its NaN/subnormal fall-back, the AVX-512 integer one,
 * AVX2's, the portable one) against dtype_convert.h's scalar rounding, on
 * runs of 64 consecutive bit patterns spread over all 2^32 (every sign,
 * exponent, NaN payload and subnormal range; runs mix fast-path and
 * fall-back vectors).  The sweep does not depend on the ISA cap, so it runs
 * once, under the avx512 cap. */
static void test_bf16_rounding_sweep(void) {
  if (nk_cpu_isa() != NK_ISA_AVX512) return;
  typedef void (*out_fn)(nrt_dtype, char *, int64_t, int64_t, const float *);
  const out_fn outs[] = {nk_half_out_portable, nk_half_out_avx2, nk_half_out_avx512,
                         nk_half_out_avx512bf16};
  const int n_outs = nk_cpu_has_avx512bf16() ? 4 : 3;
  enum { RUN = 64 };
  int64_t bad[4] = {0};
  for (uint64_t base = 0; base < (1ull << 32); base += RUN * 4099) {
    uint32_t bits[RUN];
    float v[RUN];
    uint16_t want[RUN], got[RUN];
    for (int i = 0; i < RUN; i++) bits[i] = (uint32_t)(base + (uint64_t)i);
    memcpy(v, bits, sizeof v);
    for (int i = 0; i < RUN; i++) nk_store_f32(NRT_BFLOAT16, &want[i], v[i]);
    for (int f = 0; f < n_outs; f++) {
      outs[f](NRT_BFLOAT16, (char *)got, 2, RUN, v);
      for (int i = 0; i < RUN; i++) bad[f] += got[i] != want[i];
    }
  }
  for (int f = 0; f < n_outs; f++) CHECK(bad[f] == 0);
}

static void tests(void) {
  test_bf16_rounding_sweep();
  test_binary_halves();
  test_binary_row_broadcast_and_mixed();
  test_unary_halves();
  test_unary_backward_halves();
  test_copy_halves();
}

int main(void) { return tk_main(tests, __FILE__); }
