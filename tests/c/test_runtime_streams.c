/* Streams and launches: identity and pools, in-order execution, query,
 * the kernel table, bad launches, kernel failures reported at sync (and at
 * once in launch-blocking mode), the queue filling up. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/internal.h"
#include "check.h"
#include "test_runtime_util.h"

static void test_identity(void) {
  nrt_stream *s0 = nrt_stream_default(0), *a, *b, *hi, *again;
  CHECK(s0 != NULL && s0 == nrt_stream_default(0));
  CHECK(nrt_stream_id(s0) == 0 && nrt_stream_device(s0) == 0);
  CHECK(nrt_stream_priority(s0) == NRT_PRIORITY_NORMAL);
  CHECK(nrt_stream_id(nrt_stream_default(1)) == 0 && nrt_stream_device(nrt_stream_default(1)) == 1);
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_NORMAL, &a));
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_NORMAL, &b));
  CHECK_OK(nrt_stream_from_pool(0, -5, &hi)); /* clamped to high */
  CHECK(a != b && nrt_stream_id(a) != 0 && nrt_stream_id(b) != nrt_stream_id(a));
  CHECK(nrt_stream_priority(hi) == NRT_PRIORITY_HIGH && nrt_stream_id(hi) != nrt_stream_id(a));
  nrt_stream *clamped;
  CHECK_OK(nrt_stream_from_pool(0, 7, &clamped));
  CHECK(nrt_stream_priority(clamped) == NRT_PRIORITY_NORMAL);
  /* round robin: after a full turn of the pool the first stream comes back */
  nrt_stream *turn = NULL;
  for (int i = 0; i < NRT_STREAMS_PER_POOL - 2; i++) CHECK_OK(nrt_stream_from_pool(0, 0, &turn));
  CHECK(turn == a);
  CHECK_OK(nrt_stream_get(0, nrt_stream_id(b), &again));
  CHECK(again == b);
  CHECK_OK(nrt_stream_get(0, 0, &again));
  CHECK(again == s0);
  CHECK(nrt_stream_get(0, NRT_STREAMS_PER_POOL + 5, &again) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_get(1, nrt_stream_id(b), &again) == NRT_ERROR_INVALID_ARGUMENT); /* not on 1 */
  CHECK(nrt_stream_get(0, -1, &again) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_get(0, 1 << 20, &again) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_get(9, 0, &again) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_stream_from_pool(9, 0, &again) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_stream_from_pool(0, 0, NULL) == NRT_ERROR_INVALID_ARGUMENT);
}

static void test_order_and_query(nrt_stream *s) {
  CHECK_OK(nrt_stream_query(s)); /* nothing launched yet */
  test_log log = {0};
  log_entry e[100];
  CHECK_OK(launch_sleep(s, 100000)); /* holds the worker while we look */
  for (int i = 0; i < 100; i++) {
    e[i] = (log_entry){&log, i};
    CHECK_OK(launch_log(s, &e[i]));
  }
  CHECK(nrt_stream_query(s) == NRT_ERROR_NOT_READY);
  CHECK(atomic_load(&log.n) == 0); /* the launches did not wait */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_stream_query(s));
  int in_order = atomic_load(&log.n) == 100;
  for (int i = 0; i < 100; i++) in_order &= log.values[i] == i;
  CHECK(in_order);
  CHECK(nrt_stream_query(NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_synchronize(NULL) == NRT_ERROR_INVALID_ARGUMENT);
}

/* More tasks than the ring holds: launches block for space, none is lost. */
static void test_queue_full(nrt_stream *s) {
  int64_t counter = 0;
  CHECK_OK(launch_sleep(s, 20000));
  for (int i = 0; i < 5000; i++) CHECK_OK(launch_add(s, &counter, i));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(counter == (int64_t)4999 * 5000 / 2);
}

static void test_kernel_table(nrt_stream *s) {
  CHECK_OK(nrt_kernel_register(K_ADD, "add", add_kernel)); /* same again: fine */
  CHECK(nrt_kernel_register(K_ADD, "add", fail_kernel) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "add") != NULL);
  CHECK(nrt_kernel_register(NRT_KERNEL_HOST_FN, "low", add_kernel) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_kernel_register(NRT_KERNEL_FIRST_USER - 1, "low", add_kernel) ==
        NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_kernel_register(NRT_KERNEL_MAX, "high", add_kernel) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_kernel_register(NRT_KERNEL_FIRST_USER, "null", NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_kernel_register(NRT_KERNEL_MAX - 1, "last", add_kernel));
  int64_t c = 0;
  nrt_task t = {.kernel = NRT_KERNEL_MAX - 1, .name = "last", .n_operands = 1};
  t.operands[0].data = &c;
  *(int64_t *)t.params = 3;
  CHECK_OK(nrt_launch(s, &t));
  nrt_task nop = {.kernel = NRT_KERNEL_NOP, .name = "nop"};
  CHECK_OK(nrt_launch(s, &nop));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(c == 3);
}

static void test_bad_launches(nrt_stream *s) {
  static const struct { uint32_t kernel; int n_operands; nrt_status want; } bad[] = {
      {950, 0, NRT_ERROR_UNKNOWN_KERNEL},                   /* never registered */
      {40, 0, NRT_ERROR_UNKNOWN_KERNEL},                    /* reserved range */
      {NRT_KERNEL_EVENT_RECORD, 0, NRT_ERROR_UNKNOWN_KERNEL}, /* runtime-internal */
      {NRT_KERNEL_EVENT_WAIT, 0, NRT_ERROR_UNKNOWN_KERNEL},
      {NRT_KERNEL_MAX, 0, NRT_ERROR_UNKNOWN_KERNEL},
      {0xffffffffu, 0, NRT_ERROR_UNKNOWN_KERNEL},
      {K_ADD, NRT_MAX_OPERANDS + 1, NRT_ERROR_INVALID_ARGUMENT},
      {K_ADD, -1, NRT_ERROR_INVALID_ARGUMENT},
      {NRT_KERNEL_HOST_FN, 0, NRT_ERROR_INVALID_ARGUMENT}, /* no function */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    nrt_task t = {.kernel = bad[i].kernel, .name = "bad", .n_operands = bad[i].n_operands};
    CHECK(nrt_launch(s, &t) == bad[i].want);
    CHECK(strstr(nrt_last_error(), "bad") != NULL || bad[i].kernel == NRT_KERNEL_HOST_FN);
  }
  nrt_task ok = {.kernel = NRT_KERNEL_NOP, .name = "nop"};
  CHECK(nrt_launch(NULL, &ok) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_launch(s, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_stream_synchronize(s)); /* none of them was queued */
  CHECK_OK(nrt_stream_query(s));
}

/* A failing kernel: its name and message come back at the next sync, once;
 * later tasks still run and the stream keeps working. */
static void test_kernel_failure(nrt_stream *s, nrt_stream *other) {
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  nrt_task bad2 = {.kernel = K_FAIL_RETURNS_0, .name = "aten::scatter"};
  int64_t counter = 0;
  CHECK_OK(nrt_launch(s, &bad));
  CHECK_OK(nrt_launch(s, &bad2)); /* the second failure does not replace the first */
  CHECK_OK(launch_add(s, &counter, 5));
  CHECK_OK(nrt_stream_synchronize(other)); /* other streams are unaffected */
  CHECK(nrt_stream_synchronize(s) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::gather: index 7 is out of bounds") != NULL);
  CHECK(counter == 5);
  CHECK_OK(nrt_stream_synchronize(s)); /* reported once */

  CHECK_OK(nrt_launch(s, &bad2)); /* nrt_exec_fail fails the task even if it returns 0 */
  CHECK(nrt_stream_synchronize(s) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::scatter: quietly failed") != NULL);

  /* the device-wide sync reports it too, and clears it */
  CHECK_OK(nrt_launch(other, &bad));
  CHECK(nrt_stream_query(other) == NRT_SUCCESS || nrt_stream_query(other) == NRT_ERROR_NOT_READY);
  CHECK(nrt_device_synchronize(0) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::gather") != NULL);
  CHECK_OK(nrt_device_synchronize(0));
  CHECK_OK(nrt_stream_synchronize(other));

  nrt_task unnamed = {.kernel = K_FAIL};
  CHECK_OK(nrt_launch(s, &unnamed));
  CHECK(nrt_stream_synchronize(s) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "index 7") != NULL);
  CHECK_OK(launch_add(s, &counter, 1));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(counter == 6);
}

/* Launch-blocking: each launch waits and returns its own task's error. */
static void test_launch_blocking(nrt_stream *s) {
  nrt_testing_set_launch_blocking(1);
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  CHECK(nrt_launch(s, &bad) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::gather: index 7") != NULL);
  int64_t counter = 0;
  CHECK_OK(launch_add(s, &counter, 1));
  CHECK(counter == 1); /* finished when the launch returned */
  test_log log = {0};
  log_entry e = {&log, 9};
  CHECK_OK(launch_sleep(s, 20000));
  CHECK_OK(launch_log(s, &e));
  CHECK(atomic_load(&log.n) == 1);
  nrt_testing_set_launch_blocking(-1);
  CHECK_OK(launch_sleep(s, 50000));
  CHECK(nrt_stream_query(s) == NRT_ERROR_NOT_READY); /* asynchronous again */
  CHECK_OK(nrt_stream_synchronize(s));
}

/* A user kernel appending params[0] to the test_log in operands[0]: small,
 * so on an idle stream it may run on the launching thread. */
enum { K_LOG = 910 };
static int log_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  test_log *log = t->operands[0].data;
  int i = atomic_fetch_add(&log->n, 1);
  if (i < 256) log->values[i] = *(const int *)t->params;
  return 0;
}

static nrt_status launch_log_kernel(nrt_stream *s, test_log *log, int value) {
  nrt_task t = {.kernel = K_LOG, .name = "log", .n_operands = 1};
  t.operands[0] = (nrt_operand){.data = log, .dtype = NRT_UINT8, .ndim = 1, .sizes = {1}};
  *(int *)t.params = value;
  return nrt_launch(s, &t);
}

/* Small kernels (which an idle stream may run inline), queued host
 * functions and slow tasks, interleaved, with the stream sometimes idle:
 * the log is always in launch order. */
static void test_mixed_order(nrt_stream *s) {
  CHECK_OK(nrt_kernel_register(K_LOG, "log", log_kernel));
  test_log log = {0};
  log_entry host[64];
  int n = 0;
  CHECK_OK(nrt_stream_synchronize(s)); /* idle: the first kernel may run inline */
  for (int round = 0; round < 16; round++) {
    CHECK_OK(launch_log_kernel(s, &log, n++));
    if (round % 4 == 1) CHECK_OK(launch_sleep(s, 3000));
    host[round] = (log_entry){&log, n++};
    CHECK_OK(launch_log(s, &host[round]));
    CHECK_OK(launch_log_kernel(s, &log, n++));
    if (round % 5 == 0) CHECK_OK(nrt_stream_synchronize(s)); /* idle again */
  }
  CHECK_OK(nrt_stream_synchronize(s));
  int in_order = atomic_load(&log.n) == n;
  for (int i = 0; in_order && i < n; i++) in_order = log.values[i] == i;
  CHECK(in_order);
}

/* Tasks that use their own stream: synchronising it, or launching onto it
 * until the queue is full, must neither deadlock nor lose work. */
typedef struct self_use {
  nrt_stream *s;
  nrt_status sync;
  int launched, refused;
  int64_t counter;
} self_use;

static void self_sync_fn(void *arg) {
  self_use *u = arg;
  u->sync = nrt_stream_synchronize(u->s);
  for (int i = 0; i < 3000; i++) {
    nrt_status st = launch_add(u->s, &u->counter, 1);
    if (st == NRT_SUCCESS) u->launched++;
    else if (st == NRT_ERROR_INVALID_ARGUMENT) u->refused++;
  }
}

static void test_self_use(nrt_stream *s) {
  self_use u = {.s = s, .sync = NRT_ERROR_INTERNAL};
  CHECK_OK(launch_host_fn(s, self_sync_fn, &u));
  CHECK_OK(nrt_stream_synchronize(s)); /* waits for the host function... */
  CHECK_OK(nrt_stream_synchronize(s)); /* ...then for what it launched */
  CHECK(u.sync == NRT_SUCCESS);
  CHECK(u.launched > 0 && u.refused > 0 && u.launched + u.refused == 3000);
  CHECK(u.counter == u.launched);
}

/* nrt_move_off_cpu: the calling thread leaves the CPU it is named, and
 * keeps its own affinity; no CPU (-1), or no other CPU to go to, leaves it
 * where it is. */
static void test_move_off_cpu(void) {
  cpu_set_t own, one;
  CHECK(pthread_getaffinity_np(pthread_self(), sizeof own, &own) == 0);
  const int here = nrt_current_cpu();
  CHECK(here >= 0);
  CHECK(nrt_move_off_cpu(-1) == 0);
  if (CPU_COUNT(&own) >= 2) {
    const int from = nrt_current_cpu();
    CHECK(nrt_move_off_cpu(from) == 1);
    CHECK(nrt_current_cpu() != from);
    cpu_set_t now;
    CHECK(pthread_getaffinity_np(pthread_self(), sizeof now, &now) == 0);
    CHECK(CPU_EQUAL(&now, &own));
  }
  CPU_ZERO(&one); /* the only CPU allowed: nowhere to go */
  CPU_SET(nrt_current_cpu(), &one);
  CHECK(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
  CHECK(nrt_move_off_cpu(nrt_current_cpu()) == 0);
  CHECK(pthread_setaffinity_np(pthread_self(), sizeof own, &own) == 0);
}

/* Spin budgets: a sleep cut short by work lengthens the next spin to the
 * gap and a quarter (never shorter than it was, never past the cap); a
 * sleep past the cap goes back to the base. */
static void test_spin_budget(void) {
  const uint64_t base = 50000;
  CHECK(nrt_spin_budget_after_sleep(base, base, 80000) == 100000);
  CHECK(nrt_spin_budget_after_sleep(200000, base, 80000) == 200000);
  CHECK(nrt_spin_budget_after_sleep(base, base, 10000) == base);
  CHECK(nrt_spin_budget_after_sleep(base, base, NRT_SPIN_MAX_NS - 1) == NRT_SPIN_MAX_NS);
  CHECK(nrt_spin_budget_after_sleep(NRT_SPIN_MAX_NS, base, NRT_SPIN_MAX_NS + 1) == base);
  CHECK(nrt_spin_budget_after_sleep(300000, base, 5000000) == base);
  /* The gap runs to the wake-up call when the waker stamped one: a thread
   * the host scheduled 600 us late was still asked within 80 us. */
  CHECK(nrt_sleep_gap(1000000, 1080000, 1680000) == 80000);
  CHECK(nrt_spin_budget_after_sleep(base, base, nrt_sleep_gap(1000000, 1080000, 1680000)) == 100000);
  /* no stamp since it slept (an older one, or none): its own clock */
  CHECK(nrt_sleep_gap(1000000, 900000, 1680000) == 680000);
  CHECK(nrt_sleep_gap(1000000, 0, 1030000) == 30000);
  /* a stamp from the future of `now` (another CPU's clock read later) is not trusted */
  CHECK(nrt_sleep_gap(1000000, 1700000, 1680000) == 680000);
}

/* A thread that waits for a stream runs the head task itself when the
 * worker has not taken it (stream.c, claims).  K_WHO records who ran it
 * and with which floating-point state; K_SEQ checks that it runs in
 * launch order and exactly once.  Their operands are large in name (stride
 * 0), so they are queued, never run inline at launch. */
enum { K_WHO = 911, K_SEQ };
typedef struct who_probe {
  pthread_t thread;
  unsigned fp;
} who_probe;
typedef struct seq_probe {
  _Atomic int64_t next, bad, off_worker;
  pthread_t worker;
} seq_probe;

static unsigned current_mxcsr(void) {
#if defined(__x86_64__)
  return __builtin_ia32_stmxcsr() & NRT_MXCSR_CONTROL;
#else
  return 0;
#endif
}

static int who_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  who_probe *p = t->operands[0].data;
  p->thread = pthread_self();
  p->fp = current_mxcsr();
  return 0;
}

static int seq_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  seq_probe *p = t->operands[0].data;
  const int64_t want = *(const int64_t *)t->params;
  if (atomic_load(&p->next) != want) atomic_fetch_add(&p->bad, 1);
  atomic_store(&p->next, want + 1);
  if (!pthread_equal(pthread_self(), p->worker)) atomic_fetch_add(&p->off_worker, 1);
  return 0;
}

static nrt_task big_task(uint32_t kernel, const char *name, void *data) {
  nrt_task t = {.kernel = kernel, .name = name, .n_operands = 1};
  t.operands[0] = (nrt_operand){.data = data, .dtype = NRT_UINT8, .ndim = 1, .sizes = {1 << 20}};
  return t;
}

static void worker_thread_fn(void *arg) { *(pthread_t *)arg = pthread_self(); }

typedef struct syncer {
  nrt_stream *s;
  atomic_int stop;
} syncer;

static void *sync_loop(void *arg) {
  syncer *y = arg;
  while (!atomic_load(&y->stop)) nrt_stream_synchronize(y->s);
  return NULL;
}

static void test_waiter_runs(nrt_stream *s) {
  CHECK_OK(nrt_kernel_register(K_WHO, "who", who_kernel));
  CHECK_OK(nrt_kernel_register(K_SEQ, "seq", seq_kernel));
  pthread_t worker;
  CHECK_OK(launch_host_fn(s, worker_thread_fn, &worker));
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(!pthread_equal(worker, pthread_self()));
  /* The worker asleep (2 ms idle), the host synchronises at once: it runs
   * the kernel itself at least once in 100 tries, always with the device's
   * floating-point state (not the flush-to-zero it set for itself), and
   * never runs a host function (the worker's alone). */
#if defined(__x86_64__)
  const unsigned own = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr(own | 0x8040);
#endif
  int host_ran = 0, fp_ok = 1, fn_on_worker = 1;
  for (int r = 0; r < 100; r++) {
    usleep(2000);
    who_probe p = {0};
    nrt_task t = big_task(K_WHO, "who", &p);
    CHECK_OK(nrt_launch(s, &t));
    CHECK_OK(nrt_stream_synchronize(s));
    host_ran += pthread_equal(p.thread, pthread_self());
    fp_ok &= p.fp == NRT_MXCSR_DEFAULT;
    pthread_t ran_fn;
    usleep(2000);
    CHECK_OK(launch_host_fn(s, worker_thread_fn, &ran_fn));
    CHECK_OK(nrt_stream_synchronize(s));
    fn_on_worker &= pthread_equal(ran_fn, worker);
  }
#if defined(__x86_64__)
  CHECK((__builtin_ia32_stmxcsr() & 0x8040) == 0x8040);
  __builtin_ia32_ldmxcsr(own);
#endif
  CHECK(host_ran > 0);
  CHECK(fp_ok);
  CHECK(fn_on_worker);
  /* A failure in a task a waiter ran is the stream's, named, as any other. */
  for (int r = 0; r < 20; r++) {
    usleep(2000);
    nrt_task bad = big_task(K_FAIL, "aten::gather", NULL);
    CHECK_OK(nrt_launch(s, &bad));
    CHECK(nrt_stream_synchronize(s) == NRT_ERROR_KERNEL_FAILED);
    CHECK(strstr(nrt_last_error(), "aten::gather: index 7") != NULL);
  }
  CHECK_OK(nrt_stream_synchronize(s));
  /* Two waiters (this thread between bursts, another in a loop) and the
   * worker race for 20000 tasks: each runs once, in launch order. */
  seq_probe q = {.worker = worker};
  syncer y = {.s = s};
  pthread_t other;
  CHECK(pthread_create(&other, NULL, sync_loop, &y) == 0);
  uint64_t rng = 12345;
  for (int64_t i = 0; i < 20000;) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int burst = 1 + (int)((rng >> 33) % 48);
    for (int b = 0; b < burst && i < 20000; b++, i++) {
      nrt_task t = big_task(K_SEQ, "seq", &q);
      *(int64_t *)t.params = i;
      CHECK_OK(nrt_launch(s, &t));
    }
    if ((rng >> 20) % 3 == 0) CHECK_OK(nrt_stream_synchronize(s));
  }
  CHECK_OK(nrt_stream_synchronize(s));
  atomic_store(&y.stop, 1);
  pthread_join(other, NULL);
  CHECK(atomic_load(&q.next) == 20000);
  CHECK(atomic_load(&q.bad) == 0);
  CHECK(atomic_load(&q.off_worker) > 0);
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "128M", 1);
  setenv("TORCHNEURON_DEVICE_COUNT", "2", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  test_identity();
  test_move_off_cpu();
  test_spin_budget();
  nrt_stream *s1, *s2;
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_NORMAL, &s1));
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_HIGH, &s2));
  test_order_and_query(s1);
  test_queue_full(s1);
  test_kernel_table(s1);
  test_bad_launches(s1);
  test_kernel_failure(s1, s2);
  test_launch_blocking(s1);
  test_self_use(s1);
  test_mixed_order(s2);
  test_waiter_runs(s1);
  return CHECK_SUMMARY();
}
