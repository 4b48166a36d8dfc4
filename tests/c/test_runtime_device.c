/* Devices: enumeration, properties, the current device of each host
 * thread and of each stream's worker, status names, per-thread error
 * messages, dtype sizes, the SBUF scratchpad. */
#define _GNU_SOURCE /* setenv */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"

enum { K_WHERE = 800 };

/* Writes the executing device and whether the whole SBUF is usable. */
static int where_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  int64_t *out = t->operands[0].data;
  out[0] = nrt_exec_device(ctx);
  nrt_device_props props;
  nrt_device_props_get(nrt_exec_device(ctx), &props);
  unsigned char *sbuf = nrt_exec_sbuf(ctx);
  out[1] = sbuf && (uintptr_t)sbuf % 64 == 0;
  if (sbuf) {
    memset(sbuf, 0x5a, props.sbuf_bytes); /* all of it is ours */
    out[2] = sbuf[0] + sbuf[props.sbuf_bytes - 1];
  }
  out[3] = nrt_exec_sbuf(ctx) == sbuf; /* stable within a worker */
  return 0;
}

static void *thread_current(void *arg) {
  int *seen = arg;
  nrt_device_current_get(&seen[0]); /* a new thread starts on device 0 */
  nrt_device_current_set(2);
  nrt_device_current_get(&seen[1]);
  return NULL;
}

static void test_enumeration(void) {
  int count = 0;
  CHECK_OK(nrt_device_count(&count));
  CHECK(count == 3);
  CHECK(nrt_device_count(NULL) == NRT_ERROR_INVALID_ARGUMENT);
  for (int d = 0; d < count; d++) {
    nrt_device_props p;
    memset(&p, 0xff, sizeof p);
    CHECK_OK(nrt_device_props_get(d, &p));
    CHECK(strcmp(p.name, "Virtual NeuronCore v1") == 0);
    CHECK(p.hbm_bytes == (uint64_t)128 << 20 && p.compute_threads == 3);
    CHECK(p.sbuf_bytes >= ((uint64_t)1 << 20) && p.major >= 1 && p.minor >= 0);
  }
  nrt_device_props p;
  CHECK(nrt_device_props_get(3, &p) == NRT_ERROR_INVALID_DEVICE);
  CHECK(strstr(nrt_last_error(), "3") != NULL);
  CHECK(nrt_device_props_get(-1, &p) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_device_props_get(0, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_default(3) == NULL && nrt_stream_default(-1) == NULL);
  CHECK(nrt_device_synchronize(3) == NRT_ERROR_INVALID_DEVICE);
}

static void test_current_device(void) {
  int cur = -1;
  CHECK_OK(nrt_device_current_get(&cur));
  CHECK(cur == 0);
  CHECK(nrt_device_current_set(3) == NRT_ERROR_INVALID_DEVICE);
  CHECK_OK(nrt_device_current_get(&cur));
  CHECK(cur == 0); /* a rejected set changes nothing */
  CHECK_OK(nrt_device_current_set(1));
  int seen[2] = {-1, -1};
  pthread_t t;
  pthread_create(&t, NULL, thread_current, seen);
  pthread_join(t, NULL);
  CHECK(seen[0] == 0 && seen[1] == 2);
  CHECK_OK(nrt_device_current_get(&cur));
  CHECK(cur == 1); /* the other thread's choice is its own */
  CHECK_OK(nrt_device_current_set(0));
}

static void test_workers(void) {
  CHECK_OK(nrt_kernel_register(K_WHERE, "where", where_kernel));
  for (int d = 0; d < 3; d++) {
    int64_t out[4] = {-1, -1, -1, -1};
    nrt_task t = {.kernel = K_WHERE, .name = "where", .n_operands = 1};
    t.operands[0].data = out;
    CHECK_OK(nrt_launch(nrt_stream_default(d), &t));
    CHECK_OK(nrt_stream_synchronize(nrt_stream_default(d)));
    CHECK(out[0] == d && out[1] == 1 && out[2] == 2 * 0x5a && out[3] == 1);
  }
}

static void *thread_error(void *arg) {
  (void)arg;
  nrt_device_current_set(99);
  return strstr(nrt_last_error(), "99") ? (void *)1 : NULL;
}

static void test_errors(void) {
  CHECK(strcmp(nrt_status_name(NRT_SUCCESS), "NRT_SUCCESS") == 0);
  CHECK(strcmp(nrt_status_name(NRT_ERROR_OUT_OF_MEMORY), "NRT_ERROR_OUT_OF_MEMORY") == 0);
  CHECK(strcmp(nrt_status_name(NRT_ERROR_INTERNAL), "NRT_ERROR_INTERNAL") == 0);
  CHECK(strcmp(nrt_status_name((nrt_status)1000), "NRT_ERROR_UNKNOWN_STATUS") == 0);
  CHECK(strcmp(nrt_status_name((nrt_status)-1), "NRT_ERROR_UNKNOWN_STATUS") == 0);
  /* messages are per host thread */
  CHECK(nrt_device_current_set(42) == NRT_ERROR_INVALID_DEVICE);
  pthread_t t;
  void *other = NULL;
  pthread_create(&t, NULL, thread_error, NULL);
  pthread_join(t, &other);
  CHECK(other != NULL);
  CHECK(strstr(nrt_last_error(), "42") != NULL && strstr(nrt_last_error(), "99") == NULL);
}

static void test_dtypes(void) {
  static const struct { nrt_dtype t; size_t size; } want[] = {
      {NRT_BOOL, 1},    {NRT_UINT8, 1},   {NRT_INT8, 1},     {NRT_INT16, 2},
      {NRT_INT32, 4},   {NRT_INT64, 8},   {NRT_FLOAT16, 2},  {NRT_BFLOAT16, 2},
      {NRT_FLOAT32, 4}, {NRT_FLOAT64, 8},
  };
  CHECK(sizeof want / sizeof want[0] == NRT_DTYPE_COUNT);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CHECK(nrt_dtype_size(want[i].t) == want[i].size);
  CHECK(nrt_dtype_size(NRT_DTYPE_COUNT) == 0 && nrt_dtype_size((nrt_dtype)-1) == 0);
}

int main(void) {
  setenv("TORCHNEURON_DEVICE_COUNT", "3", 1);
  setenv("TORCHNEURON_HBM_SIZE", "128M", 1);
  setenv("TORCHNEURON_NUM_THREADS", "3", 1);
  CHECK_OK(nrt_init());
  CHECK_OK(nrt_init()); /* idempotent */
  test_enumeration();
  test_current_device();
  test_workers();
  test_errors();
  test_dtypes();
  return CHECK_SUMMARY();
}
