/* test_runtime_util.h — what several runtime tests launch: host-function
 * tasks that sleep or append to a log, a counter kernel and a failing
 * kernel.  Include after the runtime header and check.h. */
#ifndef TEST_RUNTIME_UTIL_H
#define TEST_RUNTIME_UTIL_H
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

enum { K_ADD = 900, K_FAIL, K_FAIL_RETURNS_0 };

/* operands[0] is an int64 counter; params hold the increment. */
static inline int add_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  *(int64_t *)t->operands[0].data += *(const int64_t *)t->params;
  return 0;
}

static inline int fail_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)t;
  nrt_exec_fail(ctx, "index %d is out of bounds", 7);
  return 1;
}

/* Says it failed but returns 0: still a failure. */
static inline int fail_returns_0_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)t;
  nrt_exec_fail(ctx, "quietly failed");
  return 0;
}

static inline void register_test_kernels(void) {
  CHECK_OK(nrt_kernel_register(K_ADD, "add", add_kernel));
  CHECK_OK(nrt_kernel_register(K_FAIL, "fail", fail_kernel));
  CHECK_OK(nrt_kernel_register(K_FAIL_RETURNS_0, "fail0", fail_returns_0_kernel));
}

static inline nrt_status launch_add(nrt_stream *s, int64_t *counter, int64_t by) {
  nrt_task t = {.kernel = K_ADD, .name = "add", .n_operands = 1};
  t.operands[0] = (nrt_operand){.data = counter, .dtype = NRT_INT64, .ndim = 0};
  *(int64_t *)t.params = by;
  return nrt_launch(s, &t);
}

static inline nrt_status launch_host_fn(nrt_stream *s, void (*fn)(void *), void *arg) {
  nrt_task t = {.kernel = NRT_KERNEL_HOST_FN, .name = "host_fn"};
  *(nrt_host_fn_params *)t.params = (nrt_host_fn_params){fn, arg};
  return nrt_launch(s, &t);
}

static inline void sleep_fn(void *arg) { usleep((unsigned)(uintptr_t)arg); }

/* Occupies the stream's worker for us microseconds. */
static inline nrt_status launch_sleep(nrt_stream *s, unsigned us) {
  return launch_host_fn(s, sleep_fn, (void *)(uintptr_t)us);
}

/* A shared log: each entry appends its value when its task runs. */
typedef struct test_log {
  atomic_int n;
  int values[256];
} test_log;

typedef struct log_entry {
  test_log *log;
  int value;
} log_entry;

static inline void log_fn(void *arg) {
  log_entry *e = arg;
  int i = atomic_fetch_add(&e->log->n, 1);
  if (i < 256) e->log->values[i] = e->value;
}

static inline nrt_status launch_log(nrt_stream *s, log_entry *e) { return launch_host_fn(s, log_fn, e); }

#endif
