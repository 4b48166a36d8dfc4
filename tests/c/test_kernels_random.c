/* Philox4x32-10 known-answer vectors, and the random kernel's contract:
 * samples depend on (seed, offset, index) only, not on strides or threads;
 * values lie in their distribution's support. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "neuron_kernels.h"

static nrt_stream *stream;

static void run(nrt_dtype dt, void *data, int ndim, const int64_t *sizes, const int64_t *strides,
                nk_random_params p) {
  nrt_task t = {.kernel = NK_KERNEL_RANDOM, .name = "random", .n_operands = 1};
  t.operands[0].data = data;
  t.operands[0].dtype = dt;
  t.operands[0].ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    t.operands[0].sizes[d] = sizes[d];
    t.operands[0].strides[d] = strides[d];
  }
  memcpy(t.params, &p, sizeof p);
  CHECK_OK(nrt_launch(stream, &t));
  CHECK_OK(nrt_stream_synchronize(stream));
}

int main(void) {
  CHECK_OK(nrt_init());
  CHECK_OK(nk_register_kernels());
  stream = nrt_stream_default(0);

  /* Random123's published known answers for Philox4x32-10. */
  uint32_t x[4];
  nk_philox4x32(0, 0, x);
  CHECK(x[0] == 0x6627e8d5u && x[1] == 0xe169c58du && x[2] == 0xbc57ac4cu && x[3] == 0x9b00dbd8u);
  nk_philox4x32(0xffffffffffffffffull, 0xffffffffffffffffull, x); /* key and ctr all ones */
  /* ctr = {~0,~0,0,0}: not a published vector; check determinism instead */
  uint32_t y[4];
  nk_philox4x32(0xffffffffffffffffull, 0xffffffffffffffffull, y);
  CHECK(!memcmp(x, y, sizeof x));

  enum { N = 20000 };
  float *a = malloc(N * sizeof(float)), *b = malloc(2 * N * sizeof(float));
  int64_t n = N, s1 = 4, s2 = 8;
  nk_random_params uni = {.dist = NK_DIST_UNIFORM, .seed = 42, .offset = 8, .a = -2.0, .b = 3.0};
  run(NRT_FLOAT32, a, 1, &n, &s1, uni);
  run(NRT_FLOAT32, b, 1, &n, &s2, uni); /* strided: same values */
  int same = 1, inside = 1;
  double mean = 0;
  for (int i = 0; i < N; i++) {
    same &= a[i] == b[2 * i];
    inside &= a[i] >= -2.0f && a[i] < 3.0f;
    mean += a[i];
  }
  CHECK(same && inside);
  CHECK(fabs(mean / N - 0.5) < 0.05);
  /* a 2-d view, transposed in memory, is filled in row-major order */
  int64_t sz[2] = {100, 200}, st[2] = {4, 400};
  run(NRT_FLOAT32, b, 2, sz, st, uni);
  int rowmajor = 1;
  for (int r = 0; r < 100; r++)
    for (int c = 0; c < 200; c++) rowmajor &= b[c * 100 + r] == a[r * 200 + c];
  CHECK(rowmajor);
  /* another offset or seed gives other numbers */
  nk_random_params shifted = uni;
  shifted.offset += 4;
  run(NRT_FLOAT32, b, 1, &n, &s1, shifted);
  CHECK(b[0] == a[1] && b[1] == a[2]); /* offset + 4 is one element on */
  shifted.seed = 43;
  run(NRT_FLOAT32, b, 1, &n, &s1, shifted);
  CHECK(b[0] != a[1]);

  /* normal: mean and std */
  double *d = malloc(N * sizeof(double));
  int64_t s8 = 8;
  run(NRT_FLOAT64, d, 1, &n, &s8, (nk_random_params){.dist = NK_DIST_NORMAL, .seed = 7, .a = 1.0, .b = 2.0});
  double m = 0, v = 0;
  for (int i = 0; i < N; i++) m += d[i];
  m /= N;
  for (int i = 0; i < N; i++) v += (d[i] - m) * (d[i] - m);
  CHECK(fabs(m - 1.0) < 0.05 && fabs(sqrt(v / N) - 2.0) < 0.05);

  /* ranges, bernoulli, exponential */
  int64_t *iv = malloc(N * sizeof(int64_t));
  run(NRT_INT64, iv, 1, &n, &s8, (nk_random_params){.dist = NK_DIST_RANGE, .seed = 1, .range = 10, .base = -5});
  int in_range = 1, seen_low = 0, seen_high = 0;
  for (int i = 0; i < N; i++) {
    in_range &= iv[i] >= -5 && iv[i] < 5;
    seen_low |= iv[i] == -5;
    seen_high |= iv[i] == 4;
  }
  CHECK(in_range && seen_low && seen_high);
  unsigned char *bits = malloc(N);
  int64_t one = 1;
  run(NRT_BOOL, bits, 1, &n, &one, (nk_random_params){.dist = NK_DIST_BERNOULLI, .seed = 3, .a = 0.25});
  int ones = 0, boolish = 1;
  for (int i = 0; i < N; i++) {
    ones += bits[i];
    boolish &= bits[i] <= 1;
  }
  CHECK(boolish && abs(ones - N / 4) < N / 40);
  run(NRT_FLOAT32, a, 1, &n, &s1, (nk_random_params){.dist = NK_DIST_EXPONENTIAL, .seed = 5, .a = 4.0});
  double em = 0;
  int positive = 1;
  for (int i = 0; i < N; i++) {
    em += a[i];
    positive &= a[i] >= 0 && isfinite(a[i]);
  }
  CHECK(positive && fabs(em / N - 0.25) < 0.02);

  /* bad params fail the task, not the process */
  nrt_task bad = {.kernel = NK_KERNEL_RANDOM, .name = "random", .n_operands = 1};
  bad.operands[0] = (nrt_operand){.data = a, .dtype = NRT_FLOAT32, .ndim = 1, .sizes = {4}, .strides = {4}};
  ((nk_random_params *)bad.params)->dist = 99;
  CHECK_OK(nrt_launch(stream, &bad));
  CHECK(nrt_stream_synchronize(stream) == NRT_ERROR_KERNEL_FAILED);
  ((nk_random_params *)bad.params)->dist = NK_DIST_RANGE; /* range 0 */
  CHECK_OK(nrt_launch(stream, &bad));
  CHECK(nrt_stream_synchronize(stream) == NRT_ERROR_KERNEL_FAILED);
  free(a); free(b); free(d); free(iv); free(bits);
  return CHECK_SUMMARY();
}
