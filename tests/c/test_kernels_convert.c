/* float16/bfloat16 conversions through the copy kernel: every half bit
 * pattern widened, and float32/float64 narrowed with rounding ties,
 * overflow, subnormals, NaN and random bit patterns, both through the
 * contiguous (vectorised) path and a strided (scalar) one, against the
 * reference rounding of test_kernels_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "test_kernels_util.h"

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float f32_from(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* copy n elements from src (stride sstride elements) into dst (stride dstride) */
static nrt_status copy_1d(void *dst, nrt_dtype dt, int64_t dstride, const void *src, nrt_dtype st,
                          int64_t sstride, int64_t n) {
  nrt_operand ops[2] = {tk_operand(dst, dt, 1, &n, &dstride), tk_operand((void *)src, st, 1, &n, &sstride)};
  nrt_task t = tk_task(NK_KERNEL_COPY, 2, ops, NULL, 0);
  return tk_run(&t);
}

/* every one of the 65536 patterns of a 16-bit float widened to float32 */
static void widen_all(nrt_dtype half, int64_t stride) {
  const int64_t n = 65536;
  uint16_t *src = tk_alloc((size_t)(n * stride) * 2);
  float *dst = tk_alloc((size_t)(n * stride) * 4);
  for (int64_t i = 0; i < n; i++) src[i * stride] = (uint16_t)i;
  /* from element 1 on, so the vector loop also sees a misaligned start and a tail */
  CHECK_OK(copy_1d(dst + stride, NRT_FLOAT32, stride, src + stride, half, stride, n - 1));
  CHECK_OK(copy_1d(dst, NRT_FLOAT32, stride, src, half, stride, 1));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t got = f32_bits(dst[i * stride]), want;
    if (half == NRT_BFLOAT16) {
      want = (uint32_t)i << 16; /* c10::BFloat16 widens by shifting, NaN included */
    } else {
      double v = tk_f16_value((uint16_t)i);
      want = isnan(v) ? ((uint32_t)(i & 0x8000) << 16) | 0x7FC00000u | ((uint32_t)(i & 0x3FF) << 13)
                      : f32_bits((float)v);
    }
    if (got != want && bad++ < 5)
      fprintf(stderr, "  %s 0x%04x -> 0x%08x, want 0x%08x (stride %lld)\n", tk_dtype_names[half],
              (unsigned)i, got, want, (long long)stride);
  }
  CHECK(bad == 0);
  tk_free(src);
  tk_free(dst);
}

static void narrow_values(const float *vals, int64_t n, int64_t stride) {
  float *src = tk_alloc((size_t)(n * stride) * 4);
  uint16_t *h = tk_alloc((size_t)(n * stride) * 2), *b = tk_alloc((size_t)(n * stride) * 2);
  for (int64_t i = 0; i < n; i++) src[i * stride] = vals[i];
  CHECK_OK(copy_1d(h, NRT_FLOAT16, stride, src, NRT_FLOAT32, stride, n));
  CHECK_OK(copy_1d(b, NRT_BFLOAT16, stride, src, NRT_FLOAT32, stride, n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    uint16_t wh = tk_f16_bits(vals[i]), wb = tk_bf16_bits(vals[i]);
    uint16_t gh = h[i * stride], gb = b[i * stride];
    if ((gh != wh || gb != wb) && bad++ < 5)
      fprintf(stderr, "  0x%08x (%g): f16 0x%04x want 0x%04x, bf16 0x%04x want 0x%04x (stride %lld)\n",
              f32_bits(vals[i]), vals[i], gh, wh, gb, wb, (long long)stride);
  }
  CHECK(bad == 0);
  tk_free(src);
  tk_free(h);
  tk_free(b);
}

static void test_narrow(void) {
  const float specials[] = {
      0.0f, -0.0f, 1.0f, -1.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-9f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f,
      1.0f + 0x1p-11f + 0x1p-20f, 1.0f + 0x1p-8f + 0x1p-9f, 65504.0f, 65519.0f, 65520.0f, 65536.0f,
      -65520.0f, 3.4028235e38f, -3.4028235e38f, 0x1.fefffep127f, 0x1.ff0000p127f, 0x1p-14f, 0x1p-24f,
      0x1p-25f, 0x1.000002p-25f, 0x3p-26f, 0x1p-26f, 0x1.ff8p-15f, 0x1.ffcp-15f, 0x1p-126f, 0x1p-133f,
      0x1p-134f, 0x3p-135f, 0x1p-149f, 1e-40f, INFINITY, -INFINITY, NAN, -NAN,
      f32_from(0x7F800001u), f32_from(0xFFFFFFFFu), f32_from(0x7FBFFFFFu), 0.1f, 1.0f / 3.0f, 1e5f,
      123456.789f, -2.5f, 2.5f, 3.5f};
  const int64_t ns = sizeof specials / sizeof specials[0];
  narrow_values(specials, ns, 1);
  narrow_values(specials, ns, 3);
  /* random bit patterns over the whole float range, plus values clustered
   * around halfway points of the 16-bit grids */
  enum { N = 1 << 17 };
  float *vals = malloc(N * sizeof *vals);
  for (int i = 0; i < N; i++) {
    uint32_t r = (uint32_t)tk_rand();
    if (i % 2) r = (r & 0x8FFFFFFFu) | 0x30000000u | (r & 0x0F800000u); /* exps near half's range */
    if (i % 4 == 3) r = (r & ~0x1FFFu) | 0x1000u;                       /* exact f16 ties */
    if (i % 8 == 5) r = (r & ~0xFFFFu) | 0x8000u;                       /* exact bf16 ties */
    vals[i] = f32_from(r);
  }
  narrow_values(vals, N, 1);
  narrow_values(vals, N - 5, 2);
  free(vals);
}

/* double -> half rounds through float, as PyTorch does */
static void test_double_rounding(void) {
  const double vals[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40, 65519.99999, 1e300, -1e-300,
                         0x1p-25 + 0x1p-60, NAN, 1.0 / 3.0};
  const int64_t n = sizeof vals / sizeof vals[0];
  double *src = tk_alloc(sizeof vals);
  uint16_t *h = tk_alloc(n * 2), *b = tk_alloc(n * 2);
  memcpy(src, vals, sizeof vals);
  CHECK_OK(copy_1d(h, NRT_FLOAT16, 1, src, NRT_FLOAT64, 1, n));
  CHECK_OK(copy_1d(b, NRT_BFLOAT16, 1, src, NRT_FLOAT64, 1, n));
  for (int64_t i = 0; i < n; i++) {
    CHECK(h[i] == tk_f16_bits(vals[i]));
    CHECK(b[i] == tk_bf16_bits(vals[i]));
  }
  CHECK(h[0] == 0x3C00); /* 1 + 2^-11 + tiny: through float it is a tie, to even */
  tk_free(src);
  tk_free(h);
  tk_free(b);
}

/* half -> float -> half is the identity on every non-NaN pattern */
static void test_round_trip(void) {
  const int64_t n = 65536;
  uint16_t *a = tk_alloc(n * 2), *back = tk_alloc(n * 2);
  float *f = tk_alloc(n * 4);
  for (nrt_dtype half = NRT_FLOAT16; half <= NRT_BFLOAT16; half++) {
    for (int64_t i = 0; i < n; i++) a[i] = (uint16_t)i;
    CHECK_OK(copy_1d(f, NRT_FLOAT32, 1, a, half, 1, n));
    CHECK_OK(copy_1d(back, half, 1, f, NRT_FLOAT32, 1, n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
      double v = half == NRT_FLOAT16 ? tk_f16_value((uint16_t)i) : tk_bf16_value((uint16_t)i);
      if (!isnan(v) && back[i] != a[i]) bad++;
    }
    CHECK(bad == 0);
  }
  tk_free(a);
  tk_free(back);
  tk_free(f);
}

static void tests(void) {
  widen_all(NRT_FLOAT16, 1);
  widen_all(NRT_FLOAT16, 2);
  widen_all(NRT_BFLOAT16, 1);
  widen_all(NRT_BFLOAT16, 3);
  test_narrow();
  test_double_rounding();
  test_round_trip();
}

int main(void) { return tk_main(tests, __FILE__); }
