/* Concurrency: 4 host threads x 4 streams each (shared round robin across
 * threads, two devices), launching thousands of tasks while allocating,
 * recording, freeing and chaining streams with events.  Every increment
 * must land exactly once and the allocator must end balanced. */
#define _GNU_SOURCE /* setenv, usleep */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

enum { HOST_THREADS = 4, STREAMS = 4, ROUNDS = 3000 };

typedef struct worker_arg {
  int thread;
  int64_t counters[STREAMS];
  int failures;
} worker_arg;

static void *worker_main(void *p) {
  worker_arg *a = p;
  int dev = a->thread % 2;
  nrt_stream *s[STREAMS];
  nrt_event *ev = NULL;
  for (int i = 0; i < STREAMS; i++)
    a->failures += nrt_stream_from_pool(dev, i % 2 ? NRT_PRIORITY_HIGH : 0, &s[i]) != NRT_SUCCESS;
  a->failures += nrt_event_create(0, &ev) != NRT_SUCCESS;
  void *held[8] = {0};
  for (int round = 0; round < ROUNDS; round++) {
    int k = round % STREAMS;
    a->failures += launch_add(s[k], &a->counters[k], 1) != NRT_SUCCESS;
    /* a block lives across a few rounds and is used by a second stream */
    void **slot = &held[round % 8];
    if (*slot) a->failures += nrt_mem_free(*slot) != NRT_SUCCESS;
    *slot = NULL;
    a->failures += nrt_mem_alloc(s[k], 512 + (size_t)(round % 13) * 4096, slot) != NRT_SUCCESS;
    if (round % 5 == 0) a->failures += nrt_mem_record_stream(*slot, s[(k + 1) % STREAMS]) != NRT_SUCCESS;
    if (round % 97 == 0) { /* order two streams through an event */
      a->failures += nrt_event_record(ev, s[k]) != NRT_SUCCESS;
      a->failures += nrt_stream_wait_event(s[(k + 2) % STREAMS], ev) != NRT_SUCCESS;
    }
    if (round % 499 == 0) a->failures += nrt_stream_synchronize(s[k]) != NRT_SUCCESS;
  }
  for (int i = 0; i < 8; i++) a->failures += nrt_mem_free(held[i]) != NRT_SUCCESS;
  for (int i = 0; i < STREAMS; i++) a->failures += nrt_stream_synchronize(s[i]) != NRT_SUCCESS;
  a->failures += nrt_event_destroy(ev) != NRT_SUCCESS;
  return NULL;
}

/* A ring overfilled several times while other host threads synchronise on
 * events recorded at different points: the launcher sleeps until the ring
 * is half empty and each synchroniser is woken once its own task is done
 * (wake_seq), so every wait must still end and every task run once. */
enum { FLOOD_TASKS = 5000, FLOOD_EVENTS = 4 };
typedef struct flood_wait {
  nrt_event *ev;
  int failures;
} flood_wait;

static void *flood_waiter(void *p) {
  flood_wait *w = p;
  w->failures += nrt_event_synchronize(w->ev) != NRT_SUCCESS;
  return NULL;
}

static void check_flooded_ring(void) {
  nrt_stream *s;
  CHECK_OK(nrt_stream_from_pool(0, 0, &s));
  int64_t counter = 0;
  flood_wait waits[FLOOD_EVENTS];
  pthread_t th[FLOOD_EVENTS];
  CHECK_OK(launch_sleep(s, 20000)); /* the ring fills behind it */
  for (int i = 0; i < FLOOD_TASKS; i++) {
    CHECK(launch_add(s, &counter, 1) == NRT_SUCCESS);
    if (i % (FLOOD_TASKS / FLOOD_EVENTS) == FLOOD_TASKS / FLOOD_EVENTS / 2) {
      flood_wait *w = &waits[i / (FLOOD_TASKS / FLOOD_EVENTS)];
      CHECK_OK(nrt_event_create(0, &w->ev));
      CHECK_OK(nrt_event_record(w->ev, s));
      w->failures = 0;
      pthread_create(&th[i / (FLOOD_TASKS / FLOOD_EVENTS)], NULL, flood_waiter, w);
    }
  }
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(counter == FLOOD_TASKS);
  for (int i = 0; i < FLOOD_EVENTS; i++) {
    pthread_join(th[i], NULL);
    CHECK(waits[i].failures == 0);
    CHECK_OK(nrt_event_destroy(waits[i].ev));
  }
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "256M", 1);
  setenv("TORCHNEURON_DEVICE_COUNT", "2", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  pthread_t th[HOST_THREADS];
  worker_arg args[HOST_THREADS];
  for (int i = 0; i < HOST_THREADS; i++) {
    args[i] = (worker_arg){.thread = i};
    pthread_create(&th[i], NULL, worker_main, &args[i]);
  }
  for (int i = 0; i < HOST_THREADS; i++) pthread_join(th[i], NULL);
  check_flooded_ring();
  for (int i = 0; i < HOST_THREADS; i++) {
    CHECK(args[i].failures == 0);
    for (int k = 0; k < STREAMS; k++) CHECK(args[i].counters[k] == ROUNDS / STREAMS);
  }
  for (int d = 0; d < 2; d++) {
    CHECK_OK(nrt_device_synchronize(d));
    CHECK_OK(nrt_mem_empty_cache(d));
    nrt_mem_stats st;
    CHECK_OK(nrt_mem_stats_get(d, &st));
    CHECK(st.allocation_current == 0 && st.allocated_bytes == 0 && st.active_bytes == 0);
    CHECK(st.requested_bytes == 0 && st.alloc_count == st.free_count);
    CHECK(st.reserved_bytes == 0 && st.segment_count == 0);
    CHECK(st.allocated_bytes_total == st.freed_bytes_total);
  }
  return CHECK_SUMMARY();
}
