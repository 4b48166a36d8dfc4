/* trace.c — the bounded ring of executed-task records the profiler drains.
 * Full ring: the oldest record is overwritten and counted as dropped.
 * Enabling clears the ring; disabling keeps it, so a profiler can stop
 * tracing and then drain.  One mutex: adds happen only while tracing.
 * Correlation: the profiler sets a per-thread id (the running ATen op);
 * tasks launched with correlation 0 take the launching thread's id, so the
 * runtime's own copies are attributed to the op that queued them. */
#include <stdlib.h>
#include <time.h>

#include "internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static nrt_trace_record *ring;
static size_t capacity, first, count;
static uint64_t dropped;
static atomic_int enabled;

void nrt_trace_init(size_t cap) { capacity = cap; }

uint64_t nrt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nrt_trace_enable(int on) {
  if (nrt_ensure_init() != NRT_SUCCESS) return;
  pthread_mutex_lock(&lock);
  if (on) { /* a fresh session; turning off keeps the records for the drain */
    if (!ring) ring = calloc(capacity, sizeof *ring);
    first = count = 0;
    dropped = 0;
  }
  atomic_store(&enabled, on && ring);
  pthread_mutex_unlock(&lock);
}

int nrt_trace_enabled(void) { return atomic_load_explicit(&enabled, memory_order_relaxed); }

_Thread_local uint64_t nrt_trace_tls_correlation;

void nrt_trace_set_correlation(uint64_t id) { nrt_trace_tls_correlation = id; }
uint64_t nrt_trace_correlation(void) { return nrt_trace_tls_correlation; }

void nrt_trace_host_work(nrt_stream *s, const char *name, uint32_t kernel, uint64_t start_ns,
                         uint64_t end_ns) {
  nrt_trace_record r = {.name = name, .correlation = nrt_trace_tls_correlation, .kernel = kernel,
                        .device = s->device->index, .stream = s->id, .enqueue_ns = start_ns,
                        .start_ns = start_ns, .end_ns = end_ns};
  nrt_trace_add(&r);
}

void nrt_trace_add(const nrt_trace_record *r) {
  pthread_mutex_lock(&lock);
  if (ring && atomic_load(&enabled)) {
    if (count == capacity) {
      first = (first + 1) % capacity;
      count--;
      dropped++;
    }
    ring[(first + count) % capacity] = *r;
    count++;
  }
  pthread_mutex_unlock(&lock);
}

nrt_status nrt_trace_drain(nrt_trace_record *out, size_t max, size_t *n, uint64_t *lost) {
  if (!n || (!out && max)) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_trace_drain: NULL argument");
  pthread_mutex_lock(&lock);
  size_t k = count < max ? count : max;
  for (size_t i = 0; i < k; i++) out[i] = ring[(first + i) % capacity];
  if (k) {
    first = (first + k) % capacity;
    count -= k;
  }
  *n = k;
  if (lost) *lost = dropped;
  dropped = 0;
  pthread_mutex_unlock(&lock);
  return NRT_SUCCESS;
}
