#define _GNU_SOURCE /* setenv, usleep */
/* Streams, events, errors, launch-blocking, copies, the compute pool,
 * tracing, and many host threads on many streams at once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../runtime/src/internal.h"
#include "check.h"

enum { K_FAIL = 900, K_ADD = 901 };

static int fail_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)t;
  nrt_exec_fail(ctx, "index %d is out of bounds", 7);
  return 1;
}

/* operands[0] is an int64 counter incremented by params[0]. */
static int add_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  *(int64_t *)t->operands[0].data += *(const int64_t *)t->params;
  return 0;
}

typedef struct log_entry {
  int *log, *n;
  int value;
  unsigned sleep_us;
} log_entry;

static void log_fn(void *arg) {
  log_entry *e = arg;
  if (e->sleep_us) usleep(e->sleep_us);
  e->log[(*e->n)++] = e->value;
}

static void launch_log(nrt_stream *s, log_entry *e) {
  nrt_task t = {.kernel = NRT_KERNEL_HOST_FN, .name = "log"};
  *(nrt_host_fn_params *)t.params = (nrt_host_fn_params){log_fn, e};
  CHECK_OK(nrt_launch(s, &t));
}

static void launch_add(nrt_stream *s, int64_t *counter, int64_t by) {
  nrt_task t = {.kernel = K_ADD, .name = "add", .n_operands = 1};
  t.operands[0].data = counter;
  *(int64_t *)t.params = by;
  CHECK_OK(nrt_launch(s, &t));
}

static void cover_fn(void *arg, int64_t b, int64_t e, int worker) {
  unsigned char *hits = arg;
  (void)worker;
  for (int64_t i = b; i < e; i++) __atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}

typedef struct stress_arg {
  int thread;
  int64_t counters[4];
  int ok;
} stress_arg;

static void *stress_main(void *p) {
  stress_arg *a = p;
  nrt_stream *s[4];
  a->ok = 1;
  for (int i = 0; i < 4; i++)
    if (nrt_stream_from_pool(a->thread % 2, i % 2 ? NRT_PRIORITY_HIGH : 0, &s[i])) a->ok = 0;
  for (int round = 0; round < 2000; round++) {
    int k = round % 4;
    nrt_task t = {.kernel = K_ADD, .name = "add", .n_operands = 1};
    t.operands[0].data = &a->counters[k];
    *(int64_t *)t.params = 1;
    if (nrt_launch(s[k], &t)) a->ok = 0;
    void *mem = NULL;
    if (nrt_mem_alloc(s[k], 512 + (size_t)(round % 7) * 4096, &mem) || nrt_mem_free(mem)) a->ok = 0;
  }
  for (int i = 0; i < 4; i++)
    if (nrt_stream_synchronize(s[i])) a->ok = 0;
  return NULL;
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "512M", 1);
  setenv("TORCHNEURON_NUM_THREADS", "4", 1);
  setenv("TORCHNEURON_TRACE_CAPACITY", "16", 1);
  CHECK_OK(nrt_init());
  CHECK_OK(nrt_kernel_register(K_FAIL, "fail", fail_kernel));
  CHECK_OK(nrt_kernel_register(K_ADD, "add", add_kernel));
  CHECK_OK(nrt_kernel_register(K_ADD, "add", add_kernel)); /* idempotent */
  CHECK(nrt_kernel_register(K_ADD, "add", fail_kernel) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_kernel_register(3, "low", add_kernel) == NRT_ERROR_INVALID_ARGUMENT);

  /* devices and the current device per host thread */
  int count = 0, cur = -1;
  CHECK_OK(nrt_device_count(&count));
  CHECK(count == 2);
  nrt_device_props props;
  CHECK_OK(nrt_device_props_get(1, &props));
  CHECK(props.hbm_bytes == (512u << 20) && props.compute_threads == 4 && props.name[0]);
  CHECK(nrt_device_props_get(2, &props) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_device_current_set(5) == NRT_ERROR_INVALID_DEVICE);
  CHECK_OK(nrt_device_current_set(1));
  CHECK_OK(nrt_device_current_get(&cur));
  CHECK(cur == 1);
  CHECK_OK(nrt_device_current_set(0));

  /* stream identity and pools */
  nrt_stream *s0 = nrt_stream_default(0), *s1, *s2, *hi, *again;
  CHECK(nrt_stream_id(s0) == 0 && nrt_stream_device(s0) == 0);
  CHECK_OK(nrt_stream_from_pool(0, 0, &s1));
  CHECK_OK(nrt_stream_from_pool(0, 0, &s2));
  CHECK_OK(nrt_stream_from_pool(0, -5, &hi)); /* clamped to high */
  CHECK(s1 != s2 && nrt_stream_id(s1) != 0 && nrt_stream_priority(hi) == NRT_PRIORITY_HIGH);
  CHECK_OK(nrt_stream_get(0, nrt_stream_id(s2), &again));
  CHECK(again == s2);
  CHECK(nrt_stream_get(0, 60, &again) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_stream_get(0, -1, &again) == NRT_ERROR_INVALID_ARGUMENT);

  /* order on one stream; query while a task blocks */
  int log[64], n = 0;
  log_entry e[8];
  for (int i = 0; i < 8; i++) e[i] = (log_entry){log, &n, i, i == 0 ? 100000 : 0};
  for (int i = 0; i < 8; i++) launch_log(s1, &e[i]);
  CHECK(nrt_stream_query(s1) == NRT_ERROR_NOT_READY);
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK(nrt_stream_query(s1) == NRT_SUCCESS);
  int in_order = n == 8;
  for (int i = 0; i < n; i++) in_order &= log[i] == i;
  CHECK(in_order);

  /* cross-stream wait: s2 runs after s1's slow task */
  n = 0;
  nrt_event *ev;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &ev));
  CHECK_OK(nrt_event_query(ev)); /* never recorded: complete */
  CHECK_OK(nrt_stream_wait_event(s2, ev)); /* no-op */
  log_entry slow = {log, &n, 1, 100000}, after = {log, &n, 2, 0};
  launch_log(s1, &slow);
  CHECK_OK(nrt_event_record(ev, s1));
  CHECK_OK(nrt_stream_wait_event(s2, ev));
  launch_log(s2, &after);
  CHECK(nrt_event_query(ev) == NRT_ERROR_NOT_READY);
  CHECK_OK(nrt_stream_synchronize(s2));
  CHECK(n == 2 && log[0] == 1 && log[1] == 2);
  CHECK_OK(nrt_event_synchronize(ev));
  CHECK_OK(nrt_event_destroy(ev));

  /* destroying an event with a queued wait is safe */
  CHECK_OK(nrt_event_create(0, &ev));
  log_entry slow2 = {log, &n, 3, 50000};
  launch_log(s1, &slow2);
  CHECK_OK(nrt_event_record(ev, s1));
  CHECK_OK(nrt_stream_wait_event(s2, ev));
  CHECK_OK(nrt_event_destroy(ev));
  CHECK_OK(nrt_device_synchronize(0));

  /* elapsed time */
  nrt_event *t0, *t1;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &t0));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &t1));
  float ms = 0;
  CHECK(nrt_event_elapsed_ms(t0, t1, &ms) == NRT_ERROR_INVALID_ARGUMENT); /* not recorded */
  log_entry nap = {log, &n, 4, 20000};
  CHECK_OK(nrt_event_record(t0, s1));
  launch_log(s1, &nap);
  CHECK_OK(nrt_event_record(t1, s1));
  CHECK_OK(nrt_event_synchronize(t1));
  CHECK_OK(nrt_event_elapsed_ms(t0, t1, &ms));
  CHECK(ms >= 19.0f && ms < 5000.0f);
  nrt_event *plain;
  CHECK_OK(nrt_event_create(0, &plain));
  CHECK_OK(nrt_event_record(plain, s1));
  CHECK_OK(nrt_event_synchronize(plain));
  CHECK(nrt_event_elapsed_ms(plain, t1, &ms) == NRT_ERROR_INVALID_ARGUMENT);
  nrt_event_destroy(t0);
  nrt_event_destroy(t1);
  nrt_event_destroy(plain);

  /* a failing kernel: reported at sync with its name, once; stream goes on */
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  CHECK_OK(nrt_launch(s1, &bad));
  int64_t counter = 0;
  launch_add(s1, &counter, 5);
  CHECK(nrt_stream_synchronize(s1) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::gather: index 7 is out of bounds") != NULL);
  CHECK(counter == 5);
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK_OK(nrt_launch(s1, &bad));
  CHECK(nrt_device_synchronize(0) == NRT_ERROR_KERNEL_FAILED);
  CHECK_OK(nrt_device_synchronize(0));

  /* bad launches */
  nrt_task unknown = {.kernel = 950, .name = "x"};
  CHECK(nrt_launch(s1, &unknown) == NRT_ERROR_UNKNOWN_KERNEL);
  nrt_task reserved = {.kernel = 40, .name = "x"};
  CHECK(nrt_launch(s1, &reserved) == NRT_ERROR_UNKNOWN_KERNEL);
  nrt_task many = {.kernel = K_ADD, .name = "x", .n_operands = NRT_MAX_OPERANDS + 1};
  CHECK(nrt_launch(s1, &many) == NRT_ERROR_INVALID_ARGUMENT);

  /* launch-blocking: the error comes back from the launch itself */
  nrt_testing_set_launch_blocking(1);
  CHECK(nrt_launch(s1, &bad) == NRT_ERROR_KERNEL_FAILED);
  counter = 0;
  launch_add(s1, &counter, 1);
  CHECK(counter == 1); /* finished when the launch returned */
  nrt_testing_set_launch_blocking(-1);

  /* copies in every direction */
  enum { N = 3 << 20 }; /* above the staging limit */
  for (size_t bytes = 100; bytes <= N; bytes = bytes * 97 + 13) {
    unsigned char *src = malloc(bytes), *back = malloc(bytes), *pin = NULL;
    void *d1 = NULL, *d2 = NULL;
    CHECK_OK(nrt_host_alloc(bytes, (void **)&pin));
    for (size_t i = 0; i < bytes; i++) src[i] = (unsigned char)(i * 31 + bytes);
    CHECK_OK(nrt_mem_alloc(s1, bytes, &d1));
    CHECK_OK(nrt_mem_alloc(nrt_stream_default(1), bytes, &d2));
    CHECK_OK(nrt_memcpy_async(s1, d1, src, bytes)); /* pageable H2D */
    memset(src, 0, bytes);                          /* caller may reuse at once */
    CHECK_OK(nrt_memcpy_async(s1, d2, d1, bytes));  /* D2D across devices */
    CHECK_OK(nrt_memcpy_async(s1, pin, d2, bytes)); /* D2H pinned: async */
    CHECK_OK(nrt_stream_synchronize(s1));
    CHECK_OK(nrt_memcpy_async(s1, d1, pin, bytes)); /* H2D pinned */
    CHECK_OK(nrt_memcpy_async(s1, back, d1, bytes)); /* D2H pageable: done on return */
    int same = 1;
    for (size_t i = 0; i < bytes; i++) same &= back[i] == (unsigned char)(i * 31 + bytes);
    CHECK(same);
    CHECK(nrt_memcpy_async(s1, (char *)d1 + bytes - 8, src, 1u << 30) == NRT_ERROR_INVALID_ARGUMENT);
    nrt_mem_free(d1);
    nrt_mem_free(d2);
    nrt_host_free(pin);
    free(src);
    free(back);
  }

  /* compute pool: every index exactly once, also from concurrent callers */
  CHECK(nrt_compute_threads() == 4);
  enum { M = 100003 };
  unsigned char *hits = calloc(M, 1);
  nrt_parallel_for(M, 1000, cover_fn, hits);
  nrt_parallel_for(M, M, cover_fn, hits);   /* inline */
  nrt_parallel_for(0, 10, cover_fn, hits);  /* nothing */
  int once = 1;
  for (int i = 0; i < M; i++) once &= hits[i] == 2;
  CHECK(once);
  free(hits);

  /* tracing: bounded ring, oldest dropped, drained in order */
  nrt_trace_enable(1);
  counter = 0;
  for (int i = 0; i < 20; i++) launch_add(s2, &counter, 1);
  CHECK_OK(nrt_stream_synchronize(s2));
  nrt_trace_record rec[32];
  size_t got = 0;
  uint64_t dropped = 0;
  CHECK_OK(nrt_trace_drain(rec, 32, &got, &dropped));
  CHECK(got == 16 && dropped == 4);
  int sane = 1;
  for (size_t i = 0; i < got; i++)
    sane &= rec[i].stream == nrt_stream_id(s2) && rec[i].kernel == K_ADD &&
            rec[i].enqueue_ns <= rec[i].start_ns && rec[i].start_ns <= rec[i].end_ns &&
            !strcmp(rec[i].name, "add") && (i == 0 || rec[i - 1].end_ns <= rec[i].start_ns);
  CHECK(sane);
  CHECK_OK(nrt_trace_drain(rec, 32, &got, &dropped));
  CHECK(got == 0 && dropped == 0);
  nrt_trace_enable(0);
  launch_add(s2, &counter, 1);
  CHECK_OK(nrt_stream_synchronize(s2));
  CHECK_OK(nrt_trace_drain(rec, 32, &got, NULL));
  CHECK(got == 0);

  /* many host threads x many streams, launching and allocating at once */
  pthread_t th[4];
  stress_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (stress_arg){.thread = i};
    pthread_create(&th[i], NULL, stress_main, &args[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  int all_ok = 1;
  for (int i = 0; i < 4; i++) {
    all_ok &= args[i].ok;
    for (int k = 0; k < 4; k++) all_ok &= args[i].counters[k] == 500;
  }
  CHECK(all_ok);
  nrt_mem_stats st;
  CHECK_OK(nrt_mem_stats_get(0, &st));
  CHECK(st.allocation_current == 0);
  return CHECK_SUMMARY();
}
