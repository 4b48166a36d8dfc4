/* Events: query and synchronize, cross-stream and cross-device waits,
 * re-recording, destruction with queued uses, elapsed time. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

static int logged_in_order(const test_log *log, const int *want, int n) {
  int ok = atomic_load(&log->n) == n;
  for (int i = 0; ok && i < n; i++) ok = log->values[i] == want[i];
  return ok;
}

static void test_states(nrt_stream *a) {
  nrt_event *e;
  CHECK_OK(nrt_event_create(NRT_EVENT_DEFAULT, &e));
  CHECK_OK(nrt_event_query(e)); /* never recorded: complete */
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(launch_sleep(a, 50000));
  CHECK_OK(nrt_event_record(e, a));
  CHECK(nrt_event_query(e) == NRT_ERROR_NOT_READY);
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_event_query(e));
  CHECK_OK(nrt_stream_query(a)); /* the record was the stream's last task */
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_event_destroy(NULL));
  CHECK(nrt_event_create(4, &e) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_event_create(0, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_event_query(NULL) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_event_record(NULL, a) == NRT_ERROR_INVALID_ARGUMENT);
}

/* b's work after the wait runs after a's work before the record, even
 * though a is slow and b is idle; also across devices. */
static void test_wait(nrt_stream *a, nrt_stream *b) {
  test_log log = {0};
  log_entry slow = {&log, 1}, after = {&log, 2};
  nrt_event *e;
  CHECK_OK(nrt_event_create(0, &e));
  CHECK_OK(nrt_stream_wait_event(b, e)); /* never recorded: no wait */
  CHECK_OK(launch_sleep(a, 100000));
  CHECK_OK(launch_log(a, &slow));
  CHECK_OK(nrt_event_record(e, a));
  CHECK_OK(nrt_stream_wait_event(b, e));
  CHECK_OK(launch_log(b, &after));
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(logged_in_order(&log, (int[]){1, 2}, 2));
  CHECK_OK(nrt_event_query(e)); /* b's wait implies a got there */
  CHECK_OK(nrt_event_destroy(e));
  CHECK(nrt_stream_wait_event(b, NULL) == NRT_ERROR_INVALID_ARGUMENT);
}

/* A wait keeps the capture it was issued against: re-recording the event
 * on an idle stream afterwards must not release it early. */
static void test_rerecord(nrt_stream *a, nrt_stream *b, nrt_stream *c) {
  test_log log = {0};
  log_entry slow = {&log, 1}, after = {&log, 2};
  nrt_event *e;
  CHECK_OK(nrt_event_create(0, &e));
  CHECK_OK(launch_sleep(a, 100000));
  CHECK_OK(launch_log(a, &slow));
  CHECK_OK(nrt_event_record(e, a));
  CHECK_OK(nrt_stream_wait_event(b, e));
  CHECK_OK(launch_log(b, &after));
  CHECK_OK(nrt_event_record(e, c)); /* completes at once */
  CHECK_OK(nrt_event_synchronize(e));
  CHECK_OK(nrt_event_query(e)); /* the new capture is complete... */
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(logged_in_order(&log, (int[]){1, 2}, 2)); /* ...but b still waited for a */
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_stream_synchronize(a));
}

static void test_destroy_with_uses(nrt_stream *a, nrt_stream *b) {
  nrt_event *e;
  int64_t counter = 0;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &e));
  CHECK_OK(launch_sleep(a, 50000));
  CHECK_OK(nrt_event_record(e, a)); /* queued record holds the event */
  CHECK_OK(nrt_stream_wait_event(b, e));
  CHECK_OK(launch_add(b, &counter, 1));
  CHECK_OK(nrt_event_destroy(e));
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(counter == 1);
  CHECK_OK(nrt_stream_synchronize(a));
}

static void test_elapsed(nrt_stream *a) {
  nrt_event *t0, *t1, *plain;
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &t0));
  CHECK_OK(nrt_event_create(NRT_EVENT_TIMING, &t1));
  CHECK_OK(nrt_event_create(0, &plain));
  float ms = -1;
  CHECK(nrt_event_elapsed_ms(t0, t1, &ms) == NRT_ERROR_INVALID_ARGUMENT); /* not recorded */
  CHECK(strstr(nrt_last_error(), "never recorded") != NULL);
  CHECK_OK(nrt_event_record(t0, a));
  CHECK_OK(launch_sleep(a, 20000));
  CHECK_OK(nrt_event_record(t1, a));
  nrt_status early = nrt_event_elapsed_ms(t0, t1, &ms);
  CHECK(early == NRT_ERROR_NOT_READY || early == NRT_SUCCESS);
  CHECK_OK(nrt_event_synchronize(t1));
  CHECK_OK(nrt_event_elapsed_ms(t0, t1, &ms));
  CHECK(ms >= 20.0f); /* it slept that long; the upper end depends on the machine */
  float back = 0;
  CHECK_OK(nrt_event_elapsed_ms(t1, t0, &back));
  CHECK(back == -ms);
  CHECK_OK(nrt_event_record(plain, a));
  CHECK_OK(nrt_event_synchronize(plain));
  CHECK(nrt_event_elapsed_ms(plain, t1, &ms) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(nrt_last_error(), "timing") != NULL);
  CHECK(nrt_event_elapsed_ms(t0, t1, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  nrt_event_destroy(t0);
  nrt_event_destroy(t1);
  nrt_event_destroy(plain);
}

/* A chain through every stream: each waits on the previous one's event,
 * so the log comes out in chain order although the early links are slow. */
static void test_chain(nrt_stream **s, int n) {
  test_log log = {0};
  log_entry e[8];
  nrt_event *ev[8];
  for (int i = 0; i < n; i++) {
    e[i] = (log_entry){&log, i};
    CHECK_OK(nrt_event_create(0, &ev[i]));
    if (i > 0) CHECK_OK(nrt_stream_wait_event(s[i], ev[i - 1]));
    CHECK_OK(launch_sleep(s[i], (unsigned)(n - i) * 5000));
    CHECK_OK(launch_log(s[i], &e[i]));
    CHECK_OK(nrt_event_record(ev[i], s[i]));
  }
  CHECK_OK(nrt_event_synchronize(ev[n - 1]));
  int want[8];
  for (int i = 0; i < n; i++) want[i] = i;
  CHECK(logged_in_order(&log, want, n));
  for (int i = 0; i < n; i++) CHECK_OK(nrt_event_destroy(ev[i]));
}

/* A failed kernel before the record does not stall the waiting stream;
 * the error stays with the stream it happened on. */
static void test_wait_after_failure(nrt_stream *a, nrt_stream *b) {
  nrt_event *e;
  int64_t counter = 0;
  CHECK_OK(nrt_event_create(0, &e));
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  CHECK_OK(nrt_launch(a, &bad));
  CHECK_OK(nrt_event_record(e, a));
  CHECK_OK(nrt_stream_wait_event(b, e));
  CHECK_OK(launch_add(b, &counter, 1));
  CHECK_OK(nrt_stream_synchronize(b));
  CHECK(counter == 1);
  CHECK_OK(nrt_event_query(e));
  CHECK(nrt_stream_synchronize(a) == NRT_ERROR_KERNEL_FAILED);
  CHECK_OK(nrt_event_destroy(e));
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "64M", 1);
  setenv("TORCHNEURON_DEVICE_COUNT", "2", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *a, *b, *c, *d1 = nrt_stream_default(1);
  CHECK_OK(nrt_stream_from_pool(0, 0, &a));
  CHECK_OK(nrt_stream_from_pool(0, 0, &b));
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_HIGH, &c));
  test_states(a);
  test_wait(a, b);
  test_wait(a, d1); /* across devices */
  test_rerecord(a, b, c);
  test_destroy_with_uses(a, b);
  test_wait_after_failure(a, b);
  test_elapsed(a);
  nrt_stream *chain[5] = {a, b, c, d1, nrt_stream_default(0)};
  test_chain(chain, 5);
  return CHECK_SUMMARY();
}
