/* event.c — events as captures of a stream's sequence number.
 *
 * Recording queues an internal task on the stream and captures (stream,
 * seq), where seq is the stream's launch count including that task: the
 * capture is complete once the stream's completed count reaches seq.  So
 * query and synchronize need no task of their own, and a wait is an
 * internal task on the waiting stream that blocks its worker until the
 * captured stream has completed seq (nrt_stream_wait_seq).  A wait copies
 * the capture when it is issued, so re-recording later never changes what
 * an earlier wait waits for, as in CUDA.
 *
 * The record task also stamps the time (for elapsed_ms) and so holds a
 * reference on the event: nrt_event_destroy only marks it, and the last of
 * the destroyer and the queued record tasks frees it.  Wait tasks hold only
 * the stream pointer, and streams live for the whole process. */
#include <stdlib.h>

#include "internal.h"

struct nrt_event {
  unsigned flags;
  pthread_mutex_t lock;
  nrt_stream *stream;   /* capture; NULL while never recorded */
  uint64_t seq;         /* capture complete when stream completed >= seq */
  uint64_t generation;  /* bumped by each record */
  uint64_t captured_generation, stamped_generation;
  uint64_t time_ns;     /* stamped by the record task of stamped_generation */
  int refs;             /* queued record tasks */
  int destroyed;
};

typedef struct record_params {
  nrt_event *event;
  uint64_t generation;
} record_params;

typedef struct wait_params {
  nrt_stream *stream;
  uint64_t seq;
} wait_params;

nrt_status nrt_event_create(unsigned flags, nrt_event **out) {
  if (!out || (flags & ~(unsigned)NRT_EVENT_TIMING))
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_create: NULL out or unknown flags %#x",
                    flags);
  nrt_event *e = calloc(1, sizeof *e);
  if (!e) return nrt_fail(NRT_ERROR_INTERNAL, "out of host memory for an event");
  e->flags = flags;
  pthread_mutex_init(&e->lock, NULL);
  *out = e;
  return NRT_SUCCESS;
}

/* Called with e->lock held; unlocks, and frees e once nothing refers to it. */
static void unlock_and_maybe_free(nrt_event *e) {
  int dead = e->destroyed && e->refs == 0;
  pthread_mutex_unlock(&e->lock);
  if (dead) {
    pthread_mutex_destroy(&e->lock);
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

nrt_status nrt_event_record(nrt_event *e, nrt_stream *s) {
  if (!e || !s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_event_record: NULL argument");
  pthread_mutex_lock(&e->lock);
  uint64_t generation = ++e->generation;
  e->refs++;
  pthread_mutex_unlock(&e->lock);

  nrt_task t = {.kernel = NRT_KERNEL_EVENT_RECORD, .name = "event_record"};
  *(record_params *)t.params = (record_params){e, generation};
  uint64_t seq = 0;
  nrt_status st = nrt_launch_internal(s, &t, &seq);

  pthread_mutex_lock(&e->lock);
  if (st != NRT_SUCCESS) {
    e->refs--; /* never queued; the previous capture stays */
  } else if (generation > e->captured_generation) {
    /* two threads re-recording at once: the later record wins */
    e->stream = s;
    e->seq = seq;
    e->captured_generation = generation;
  }
  unlock_and_maybe_free(e);
  return st;
}

void nrt_event_run_record(const nrt_task *t) {
  const record_params *p = (const record_params *)t->params;
  nrt_event *e = p->event;
  pthread_mutex_lock(&e->lock);
  if (p->generation > e->stamped_generation) {
    e->stamped_generation = p->generation;
    e->time_ns = nrt_now_ns();
  }
  e->refs--;
  unlock_and_maybe_free(e);
}

/* The event's current capture; stream NULL when never recorded. */
static wait_params capture_of(nrt_event *e) {
  pthread_mutex_lock(&e->lock);
  wait_params c = {e->stream, e->seq};
  pthread_mutex_unlock(&e->lock);
  return c;
}

static int capture_done(wait_params c) {
  return !c.stream || nrt_stream_completed(c.stream) >= c.seq;
}

nrt_status nrt_stream_wait_event(nrt_stream *s, nrt_event *e) {
  if (!e || !s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_stream_wait_event: NULL argument");
  wait_params c = capture_of(e);
  /* Already complete, or on s itself, where stream order already holds. */
  if (capture_done(c) || c.stream == s) return NRT_SUCCESS;
  nrt_task t = {.kernel = NRT_KERNEL_EVENT_WAIT, .name = "event_wait"};
  *(wait_params *)t.params = c;
  return nrt_launch_internal(s, &t, NULL);
}

void nrt_event_run_wait(const nrt_task *t) {
  const wait_params *p = (const wait_params *)t->params;
  nrt_stream_wait_seq(p->stream, p->seq);
}

nrt_status nrt_event_query(nrt_event *e) {
  if (!e) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "event is NULL");
  return capture_done(capture_of(e)) ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
}

nrt_status nrt_event_synchronize(nrt_event *e) {
  if (!e) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "event is NULL");
  nrt_status forked = nrt_check_not_forked();
  if (forked != NRT_SUCCESS) return forked;
  wait_params c = capture_of(e);
  if (c.stream) nrt_stream_wait_seq(c.stream, c.seq);
  return NRT_SUCCESS;
}

/* The completed capture's time, or a status saying why there is none. */
static nrt_status capture_time(nrt_event *e, uint64_t *ns) {
  if (!(e->flags & NRT_EVENT_TIMING))
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT,
                    "both events must be created with timing enabled (enable_timing=True)");
  wait_params c = capture_of(e);
  if (!c.stream) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "event was never recorded");
  if (!capture_done(c)) return nrt_fail(NRT_ERROR_NOT_READY, "event has not completed yet");
  /* Its record task has run; unless a newer record came in meanwhile, the
   * stamp is this capture's. */
  pthread_mutex_lock(&e->lock);
  int stamped = e->stamped_generation >= e->captured_generation;
  *ns = e->time_ns;
  pthread_mutex_unlock(&e->lock);
  if (!stamped) return nrt_fail(NRT_ERROR_NOT_READY, "event has not completed yet");
  return NRT_SUCCESS;
}

nrt_status nrt_event_elapsed_ms(nrt_event *start, nrt_event *end, float *ms) {
  if (!start || !end || !ms) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "NULL argument");
  uint64_t t0 = 0, t1 = 0;
  nrt_status st = capture_time(start, &t0);
  if (st == NRT_SUCCESS) st = capture_time(end, &t1);
  if (st != NRT_SUCCESS) return st;
  *ms = (float)(((double)t1 - (double)t0) / 1e6);
  return NRT_SUCCESS;
}
