/* event.c — events as sequence numbers.  Each record bumps `recorded` and
 * queues a task that sets `completed` (and the time) when the stream reaches
 * it; a wait queues a task that blocks the waiting stream's worker until
 * `completed` reaches the value captured at the wait.  Queued tasks hold a
 * reference, so destroying an event with uses in flight is safe. */
#include <stdlib.h>

#include "internal.h"

struct nrt_event {
  unsigned flags;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  uint64_t recorded, completed;
  uint64_t time_ns;
  int refs; /* queued tasks using the event */
  int destroyed;
};

typedef struct event_params {
  nrt_event *event;
  uint64_t seq;
} event_params;

nrt_status nrt_event_create(unsigned flags, nrt_event **out) {
  if (!out || (flags & ~(unsigned)NRT_EVENT_TIMING))
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_create: bad argument");
  nrt_event *e = calloc(1, sizeof *e);
  if (!e) return nrt_fail(NRT_ERROR_INTERNAL, "out of host memory for an event");
  e->flags = flags;
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cv, NULL);
  *out = e;
  return NRT_SUCCESS;
}

/* Called with e->lock held; unlocks, and frees e if it is dead. */
static void unlock_and_maybe_free(nrt_event *e) {
  int dead = e->destroyed && e->refs == 0;
  pthread_mutex_unlock(&e->lock);
  if (dead) {
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cv);
    free(e);
  }
}

nrt_status nrt_event_destroy(nrt_event *e) {
  if (!e) return NRT_SUCCESS;
  pthread_mutex_lock(&e->lock);
  e->destroyed = 1;
  unlock_and_maybe_free(e);
  return NRT_SUCCESS;
}

static nrt_status launch_event_task(nrt_stream *s, uint32_t kernel, nrt_event *e, uint64_t seq) {
  nrt_task t = {.kernel = kernel, .name = kernel == NRT_KERNEL_EVENT_RECORD ? "event_record" : "event_wait"};
  *(event_params *)t.params = (event_params){e, seq};
  return nrt_launch_nowait(s, &t);
}

nrt_status nrt_event_record(nrt_event *e, nrt_stream *s) {
  if (!e || !s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_record: NULL argument");
  pthread_mutex_lock(&e->lock);
  uint64_t seq = ++e->recorded;
  e->refs++;
  pthread_mutex_unlock(&e->lock);
  nrt_status st = launch_event_task(s, NRT_KERNEL_EVENT_RECORD, e, seq);
  if (st != NRT_SUCCESS) { /* never queued: complete it now so no one waits forever */
    pthread_mutex_lock(&e->lock);
    e->refs--;
    if (seq > e->completed) e->completed = seq;
    pthread_cond_broadcast(&e->cv);
    unlock_and_maybe_free(e);
  }
  return st;
}

void nrt_event_run_record(const nrt_task *t) {
  const event_params *p = (const event_params *)t->params;
  nrt_event *e = p->event;
  pthread_mutex_lock(&e->lock);
  if (p->seq > e->completed) {
    e->completed = p->seq;
    e->time_ns = nrt_now_ns();
  }
  e->refs--;
  pthread_cond_broadcast(&e->cv);
  unlock_and_maybe_free(e);
}

nrt_status nrt_stream_wait_event(nrt_stream *s, nrt_event *e) {
  if (!e || !s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_wait_event: NULL argument");
  pthread_mutex_lock(&e->lock);
  uint64_t target = e->recorded;
  int needed = e->completed < target;
  if (needed) e->refs++;
  pthread_mutex_unlock(&e->lock);
  if (!needed) return NRT_SUCCESS;
  nrt_status st = launch_event_task(s, NRT_KERNEL_EVENT_WAIT, e, target);
  if (st != NRT_SUCCESS) {
    pthread_mutex_lock(&e->lock);
    e->refs--;
    unlock_and_maybe_free(e);
  }
  return st;
}

void nrt_event_run_wait(const nrt_task *t) {
  const event_params *p = (const event_params *)t->params;
  nrt_event *e = p->event;
  pthread_mutex_lock(&e->lock);
  while (e->completed < p->seq) pthread_cond_wait(&e->cv, &e->lock);
  e->refs--;
  unlock_and_maybe_free(e);
}

nrt_status nrt_event_query(nrt_event *e) {
  if (!e) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "event is NULL");
  pthread_mutex_lock(&e->lock);
  int done = e->completed >= e->recorded;
  pthread_mutex_unlock(&e->lock);
  return done ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
}

nrt_status nrt_event_synchronize(nrt_event *e) {
  if (!e) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "event is NULL");
  pthread_mutex_lock(&e->lock);
  uint64_t target = e->recorded;
  while (e->completed < target) pthread_cond_wait(&e->cv, &e->lock);
  pthread_mutex_unlock(&e->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_event_elapsed_ms(nrt_event *start, nrt_event *end, float *ms) {
  if (!start || !end || !ms) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "NULL argument");
  if (!(start->flags & NRT_EVENT_TIMING) || !(end->flags & NRT_EVENT_TIMING))
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT,
                    "both events must be created with timing enabled (enable_timing=True)");
  nrt_event *ev[2] = {start, end};
  uint64_t t[2];
  for (int i = 0; i < 2; i++) {
    pthread_mutex_lock(&ev[i]->lock);
    int ok = ev[i]->recorded > 0 && ev[i]->completed >= ev[i]->recorded;
    t[i] = ev[i]->time_ns;
    pthread_mutex_unlock(&ev[i]->lock);
    if (!ok)
      return nrt_fail(ev[i]->recorded ? NRT_ERROR_NOT_READY : NRT_ERROR_INVALID_ARGUMENT,
                      ev[i]->recorded ? "event has not completed yet"
                                      : "event was never recorded");
  }
  *ms = (float)(((double)t[1] - (double)t[0]) / 1e6);
  return NRT_SUCCESS;
}
