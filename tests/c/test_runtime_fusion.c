/* test_runtime_fusion.c — adaptive eager in the runtime (fusion_plan.c,
 * fusion_exec.c) with the real elementwise kernels: a chain queued behind
 * a busy stream runs fused, bit for bit as unfused; dead intermediates are
 * not stored; a group ends where views overlap; an error inside a group
 * names its task; verify mode catches a kernel that breaks the contract; a chain compiled
 * (fusion_jit.c) keeps the bits. */
#define _GNU_SOURCE /* usleep */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>

#include "../../runtime/src/internal.h" /* nrt_testing_set_launch_blocking */
#include "check.h"
#include "neuron_kernels.h"
#include "test_runtime_util.h"

#define N (1 << 16)

enum { K_FAILS_ON_NAN = 950, K_TILE_INDEX };

/* Fails when its input holds a NaN: a data-dependent failure (what the
 * contract forbids fusible kernels; here to see the error's name). */
static int fails_on_nan(const nrt_task *t, nrt_exec_ctx *ctx) {
  const nrt_operand *o = &t->operands[0], *x = &t->operands[1];
  int64_t n = 1;
  for (int d = 0; d < o->ndim; d++) n *= o->sizes[d];
  const int64_t so = o->ndim ? o->strides[o->ndim - 1] : 4, sx = x->ndim ? x->strides[x->ndim - 1] : 4;
  for (int64_t i = 0; i < n; i++) {
    float v = *(const float *)((const char *)x->data + i * sx);
    if (v != v) {
      nrt_exec_fail(ctx, "found a NaN");
      return 1;
    }
    *(float *)((char *)o->data + i * so) = v;
  }
  return 0;
}

/* out[i] = i counted from the task's first element: different bits when
 * run on tiles -- a kernel that breaks the contract, for verify mode. */
static int tile_index(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  const nrt_operand *o = &t->operands[0];
  int64_t n = 1;
  for (int d = 0; d < o->ndim; d++) n *= o->sizes[d];
  for (int64_t i = 0; i < n; i++) ((float *)o->data)[i] = (float)i;
  return 0;
}

static nrt_fuse_kind always(const nrt_task *t) {
  (void)t;
  return NRT_FUSE_ELEMENTWISE;
}

static nrt_operand vec(void *data, int64_t n, int64_t stride) {
  nrt_operand o = {.data = data, .dtype = NRT_FLOAT32, .ndim = 1};
  o.sizes[0] = n;
  o.strides[0] = stride;
  return o;
}

static nrt_task binary(int op, nrt_operand out, nrt_operand a, nrt_operand b, const char *name) {
  nrt_task t = {.kernel = NK_KERNEL_BINARY, .name = name, .n_operands = 3};
  t.operands[0] = out;
  t.operands[1] = a;
  t.operands[2] = b;
  nk_binary_params *p = (nk_binary_params *)t.params;
  p->op = op;
  p->compute = NRT_FLOAT32;
  p->alpha.f = 1.0;
  p->alpha.i = 1;
  return t;
}

static nrt_task unary(int op, nrt_operand out, nrt_operand x, const char *name) {
  nrt_task t = {.kernel = NK_KERNEL_UNARY, .name = name, .n_operands = 2};
  t.operands[0] = out;
  t.operands[1] = x;
  nk_unary_params *p = (nk_unary_params *)t.params;
  p->op = op;
  p->compute = NRT_FLOAT32;
  return t;
}

static float *device_floats(nrt_stream *s, int64_t n) {
  void *p = NULL;
  CHECK_OK(nrt_mem_alloc(s, (size_t)n * sizeof(float), &p));
  return p;
}

/* ((x * a + a).sigmoid() * x).exp() with the temporaries freed as Python
 * would free them; the result is copied to `out`. */
static void chain(nrt_stream *s, const float *x, const float *a, float *out) {
  CHECK_OK(launch_sleep(s, 20000));
  float *t1 = device_floats(s, N), *t2, *t3, *t4, *y;
  nrt_task k = binary(NK_BINARY_MUL, vec(t1, N, 4), vec((void *)x, N, 4), vec((void *)a, N, 4), "mul");
  CHECK_OK(nrt_launch(s, &k));
  t2 = device_floats(s, N);
  k = binary(NK_BINARY_ADD, vec(t2, N, 4), vec(t1, N, 4), vec((void *)a, N, 4), "add");
  CHECK_OK(nrt_launch(s, &k));
  CHECK_OK(nrt_mem_free(t1));
  t3 = device_floats(s, N);
  k = unary(NK_UNARY_SIGMOID, vec(t3, N, 4), vec(t2, N, 4), "sigmoid");
  CHECK_OK(nrt_launch(s, &k));
  CHECK_OK(nrt_mem_free(t2));
  t4 = device_floats(s, N);
  k = binary(NK_BINARY_MUL, vec(t4, N, 4), vec(t3, N, 4), vec((void *)x, N, 4), "mul2");
  CHECK_OK(nrt_launch(s, &k));
  CHECK_OK(nrt_mem_free(t3));
  y = device_floats(s, N);
  k = unary(NK_UNARY_EXP, vec(y, N, 4), vec(t4, N, 4), "exp");
  CHECK_OK(nrt_launch(s, &k));
  CHECK_OK(nrt_mem_free(t4));
  CHECK_OK(nrt_stream_synchronize(s));
  memcpy(out, y, N * sizeof(float));
  CHECK_OK(nrt_mem_free(y));
}

static void test_chain_bitwise(nrt_stream *s, const float *x, const float *a) {
  float *off = malloc(N * sizeof(float)), *on = malloc(N * sizeof(float));
  nrt_adaptive_set_mode(NRT_ADAPTIVE_OFF);
  chain(s, x, a, off);
  nrt_fusion_stats_reset();
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  chain(s, x, a, on);
  nrt_fusion_stats st;
  nrt_fusion_stats_get(&st);
  CHECK(st.groups == 1);
  CHECK(st.tasks_fused == 5);
  CHECK(st.groups_in_rows == 1); /* the kernels' row loops, called in rows */
  CHECK(st.bytes_not_written == 4ull * N * sizeof(float)); /* t1..t4 */
  CHECK(memcmp(off, on, N * sizeof(float)) == 0);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_VERIFY);
  chain(s, x, a, on);
  nrt_fusion_stats_get(&st);
  CHECK(st.groups_verified == 1);
  CHECK(memcmp(off, on, N * sizeof(float)) == 0);
  free(off);
  free(on);
}

/* x[1:] = y[:-1] + 1, then x[:-1] += 1, then y[1:] = x[:-1] * x[1:]: each
 * later task touches bytes an earlier one wrote through another view, so
 * the groups must end there.  (No task overlaps itself: such a task races
 * with itself when the pool splits it, fused or not.) */
static void shifted(nrt_stream *s, float *x, float *y, int mode, float *out) {
  nrt_adaptive_set_mode(mode);
  for (int i = 0; i < N; i++) x[i] = y[i] = (float)(i % 97);
  float *one = device_floats(s, 1);
  *one = 1.0f;
  nrt_operand b = {.data = one, .dtype = NRT_FLOAT32, .ndim = 1, .sizes = {N - 1}, .strides = {0}};
  nrt_fusion_stats_reset();
  CHECK_OK(launch_sleep(s, 20000));
  nrt_task k = binary(NK_BINARY_ADD, vec(x + 1, N - 1, 4), vec(y, N - 1, 4), b, "shift");
  CHECK_OK(nrt_launch(s, &k));
  k = binary(NK_BINARY_ADD, vec(x, N - 1, 4), vec(x, N - 1, 4), b, "inc");
  CHECK_OK(nrt_launch(s, &k));
  k = binary(NK_BINARY_MUL, vec(y + 1, N - 1, 4), vec(x, N - 1, 4), vec(x + 1, N - 1, 4), "mix");
  CHECK_OK(nrt_launch(s, &k));
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_fusion_stats st;
  nrt_fusion_stats_get(&st);
  CHECK(st.groups == 0);
  memcpy(out, x, N * sizeof(float));
  memcpy(out + N, y, N * sizeof(float));
  CHECK_OK(nrt_mem_free(one));
}

static void test_overlap_cuts(nrt_stream *s) {
  float *x = device_floats(s, N), *y = device_floats(s, N);
  float *off = malloc(2 * N * sizeof(float)), *on = malloc(2 * N * sizeof(float));
  shifted(s, x, y, NRT_ADAPTIVE_OFF, off);
  shifted(s, x, y, NRT_ADAPTIVE_ON, on);
  CHECK(memcmp(off, on, 2 * N * sizeof(float)) == 0);
  shifted(s, x, y, NRT_ADAPTIVE_VERIFY, on);
  CHECK(memcmp(off, on, 2 * N * sizeof(float)) == 0);
  CHECK_OK(nrt_mem_free(x));
  CHECK_OK(nrt_mem_free(y));
  free(off);
  free(on);
}

static void test_error_names_the_task(nrt_stream *s, const float *x) {
  CHECK_OK(nrt_kernel_register(K_FAILS_ON_NAN, "fails_on_nan", fails_on_nan));
  CHECK_OK(nrt_kernel_set_fusion(K_FAILS_ON_NAN, always));
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  nrt_fusion_stats_reset();
  float *t = device_floats(s, N), *u = device_floats(s, N), *v = device_floats(s, N);
  CHECK_OK(launch_sleep(s, 20000));
  nrt_task k = binary(NK_BINARY_DIV, vec(t, N, 4), vec((void *)x, N, 4), vec((void *)x, N, 4), "div");
  CHECK_OK(nrt_launch(s, &k)); /* 0 / 0 is NaN */
  nrt_task f = {.kernel = K_FAILS_ON_NAN, .name = "test::checked_copy", .n_operands = 2};
  f.operands[0] = vec(u, N, 4);
  f.operands[1] = vec(t, N, 4);
  CHECK_OK(nrt_launch(s, &f));
  k = binary(NK_BINARY_ADD, vec(v, N, 4), vec(u, N, 4), vec(t, N, 4), "add");
  CHECK_OK(nrt_launch(s, &k));
  nrt_status st = nrt_stream_synchronize(s);
  CHECK(st == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "test::checked_copy: found a NaN") != NULL);
  nrt_fusion_stats fs;
  nrt_fusion_stats_get(&fs);
  CHECK(fs.groups == 1);
  CHECK_OK(nrt_stream_synchronize(s)); /* reported once */
  CHECK_OK(nrt_mem_free(t));
  CHECK_OK(nrt_mem_free(u));
  CHECK_OK(nrt_mem_free(v));
  CHECK_OK(nrt_kernel_set_fusion(K_FAILS_ON_NAN, NULL));
}

static void test_verify_catches_contract_breach(nrt_stream *s) {
  CHECK_OK(nrt_kernel_register(K_TILE_INDEX, "tile_index", tile_index));
  CHECK_OK(nrt_kernel_set_fusion(K_TILE_INDEX, always));
  float *t = device_floats(s, N), *u = device_floats(s, N);
  for (int mode = NRT_ADAPTIVE_ON; mode <= NRT_ADAPTIVE_VERIFY; mode++) {
    nrt_adaptive_set_mode(mode);
    CHECK_OK(launch_sleep(s, 20000));
    nrt_task k = {.kernel = K_TILE_INDEX, .name = "test::tile_index", .n_operands = 1};
    k.operands[0] = vec(t, N, 4);
    CHECK_OK(nrt_launch(s, &k));
    k = unary(NK_UNARY_NEG, vec(u, N, 4), vec(t, N, 4), "neg");
    CHECK_OK(nrt_launch(s, &k));
    nrt_status st = nrt_stream_synchronize(s);
    if (mode == NRT_ADAPTIVE_ON) {
      CHECK(st == NRT_SUCCESS); /* unnoticed: why verify mode exists */
      CHECK(u[N - 1] != -(float)(N - 1));
    } else {
      CHECK(st == NRT_ERROR_KERNEL_FAILED);
      CHECK(strstr(nrt_last_error(), "adaptive eager verify") != NULL);
      CHECK(strstr(nrt_last_error(), "test::tile_index") != NULL);
      CHECK(u[N - 1] == -(float)(N - 1)); /* memory holds the unfused result */
    }
  }
  CHECK_OK(nrt_mem_free(t));
  CHECK_OK(nrt_mem_free(u));
  CHECK_OK(nrt_kernel_set_fusion(K_TILE_INDEX, NULL));
}

static void test_launch_blocking_is_unfused(nrt_stream *s, const float *x, const float *a) {
  float *out = malloc(N * sizeof(float));
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  nrt_testing_set_launch_blocking(1);
  nrt_fusion_stats_reset();
  chain(s, x, a, out);
  nrt_fusion_stats fs;
  nrt_fusion_stats_get(&fs);
  CHECK(fs.groups == 0);
  nrt_testing_set_launch_blocking(-1);
  free(out);
}

static void busy_until(uint64_t t) {
  while (nrt_now_ns() < t) {
  }
}

/* Occupies the worker for SPIN_NS without sleeping, and says when it ended. */
#define SPIN_NS 100000u
static _Atomic uint64_t spin_ended;
static void spin_fn(void *arg) {
  (void)arg;
  busy_until(nrt_now_ns() + SPIN_NS);
  atomic_store(&spin_ended, nrt_now_ns());
}

/* The worker's look-ahead (stream.c, await_chain): the first op of a large
 * chain is queued behind a task the worker is running, and the host issues
 * the rest 40 us after that task ends (under the 100 us gap).  The worker
 * waits for them, so all five ops run as one group; without the look-ahead
 * the first one ran alone (4 of 5 tries here).  One of five tries must
 * fuse all five (a stall of this thread on a loaded machine can split the
 * chain). */
static void test_lookahead_takes_the_first_op(nrt_stream *s) {
  const int64_t n = 1 << 20;
  float *x = device_floats(s, n), *a = device_floats(s, n);
  memset(x, 0, (size_t)n * sizeof(float));
  memset(a, 0, (size_t)n * sizeof(float));
  int whole = 0;
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  for (int attempt = 0; attempt < 5 && !whole; attempt++) {
    CHECK_OK(nrt_stream_synchronize(s));
    nrt_fusion_stats_reset();
    float *t[5];
    for (int i = 0; i < 5; i++) t[i] = device_floats(s, n);
    atomic_store(&spin_ended, 0);
    CHECK_OK(launch_host_fn(s, spin_fn, NULL));
    nrt_task k = binary(NK_BINARY_MUL, vec(t[0], n, 4), vec(x, n, 4), vec(a, n, 4), "mul");
    CHECK_OK(nrt_launch(s, &k));
    while (!atomic_load(&spin_ended)) {
    }
    busy_until(atomic_load(&spin_ended) + 40000);
    for (int i = 1; i < 5; i++) {
      k = binary(NK_BINARY_ADD, vec(t[i], n, 4), vec(t[i - 1], n, 4), vec(a, n, 4), "add");
      CHECK_OK(nrt_launch(s, &k));
    }
    CHECK_OK(nrt_stream_synchronize(s));
    nrt_fusion_stats st;
    nrt_fusion_stats_get(&st);
    whole = st.groups == 1 && st.tasks_fused == 5;
    for (int i = 0; i < 5; i++) CHECK_OK(nrt_mem_free(t[i]));
  }
  CHECK(whole);
  CHECK_OK(nrt_mem_free(x));
  CHECK_OK(nrt_mem_free(a));
}

/* The chain compiled (runtime/src/fusion_jit.c, sync mode, a fresh cache
 * directory, the source tree's headers): one group run by its generated
 * loop, the bits of unfused execution, in verify mode too; a second run
 * loads the library instead of building it. */
static void test_compiled_chain(nrt_stream *s, const float *x, const float *a) {
  if (nk_cpu_isa() == NK_ISA_PORTABLE) return; /* no vector prelude */
  char dir[] = "/tmp/nrt_fusion_jit_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  /* what a process that exited mid-build leaves: swept by the first build */
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  CHECK(dead > 0 && waitpid(dead, NULL, 0) == dead);
  char orphan[3][256];
  snprintf(orphan[0], sizeof orphan[0], "%s/fuse-0123456789abcdef.so.%d.c", dir, (int)dead);
  snprintf(orphan[1], sizeof orphan[1], "%s/fuse-0123456789abcdef.so.%d.tmp", dir, (int)dead);
  snprintf(orphan[2], sizeof orphan[2], "%s/fuse-0123456789abcdef.so.log", dir);
  for (int i = 0; i < 3; i++) {
    FILE *f = fopen(orphan[i], "w");
    CHECK(f != NULL);
    if (f) fclose(f);
  }
  nrt_fusion_jit_configure(NK_TEST_SOURCE_DIR "/kernels/src:" NK_TEST_SOURCE_DIR
                           "/kernels/include:" NK_TEST_SOURCE_DIR "/runtime/include", dir);
  nrt_fusion_jit_set_mode(NRT_FUSION_JIT_SYNC);
  float *off = malloc(N * sizeof(float)), *on = malloc(N * sizeof(float));
  nrt_adaptive_set_mode(NRT_ADAPTIVE_OFF);
  chain(s, x, a, off);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  nrt_fusion_stats_reset();
  chain(s, x, a, on);
  nrt_fusion_stats st;
  nrt_fusion_stats_get(&st);
  CHECK(st.groups == 1 && st.groups_compiled == 1);
  CHECK(st.group_builds == 1 && st.group_build_failures == 0);
  CHECK(memcmp(off, on, N * sizeof(float)) == 0);
  for (int i = 0; i < 3; i++) CHECK(access(orphan[i], F_OK) != 0);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_VERIFY);
  chain(s, x, a, on);
  nrt_fusion_stats_get(&st);
  CHECK(st.groups_verified == 1 && st.groups_compiled == 2 && st.group_builds == 1);
  CHECK(memcmp(off, on, N * sizeof(float)) == 0);
  nrt_fusion_jit_set_mode(NRT_FUSION_JIT_OFF);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  free(off);
  free(on);
}

int main(void) {
  CHECK_OK(nk_register_kernels());
  register_test_kernels();
  nrt_stream *s = nrt_stream_default(0);
  CHECK(s != NULL);
  float *x = device_floats(s, N), *a = device_floats(s, N);
  for (int i = 0; i < N; i++) {
    x[i] = (float)((i * 37) % 101) / 17.0f - 3.0f;
    a[i] = (float)((i * 11) % 89) / 23.0f - 1.5f;
  }
  test_chain_bitwise(s, x, a);
  test_overlap_cuts(s);
  test_error_names_the_task(s, x);
  test_verify_catches_contract_breach(s);
  test_launch_blocking_is_unfused(s, x, a);
  test_lookahead_takes_the_first_op(s);
  test_compiled_chain(s, x, a);
  CHECK_OK(nrt_mem_free(x));
  CHECK_OK(nrt_mem_free(a));
  return CHECK_SUMMARY();
}
