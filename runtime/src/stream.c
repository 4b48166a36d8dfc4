/* stream.c — streams, their worker threads, the kernel table and launches.
 *
 * A stream is a bounded ring of task descriptors consumed in order by its
 * worker thread (started at the first launch), or by a thread waiting for
 * the stream when the worker has not taken the head task (claims, below).
 * Launchers serialise on push_lock, copy the descriptor in and publish it
 * by advancing `tail`; tasks run in order and `head` advances past each
 * one done, so head/tail double as the completed/launched sequence
 * numbers that events, synchronisation and the allocator's stream-ordered
 * reuse are built on.
 *
 * Latency: the worker polls for ~50 us before it sleeps (longer while work
 * comes in a steady rhythm: internal.h, spin budgets), and launchers only
 * take the wake-up lock when the worker is asleep, so a launch in a busy
 * loop is a copy and an atomic store.  The sleep handshakes
 * (worker_sleeping/tail, wake_seq/head, space_waiters/head) are seq_cst
 * store-then-load pairs on both sides, so no wake-up is ever lost.  The
 * fields each side touches per task sit on separate cache lines.
 *
 * Wake-ups are rationed.  A launcher that finds the ring full sleeps until
 * it is half empty (RING_LOW_WATER), not until one slot frees: a Python
 * loop issues faster than the device runs, so the ring is full for most of
 * a training step, and waking the launcher per task cost two context
 * switches per task on cores the kernels need (an addmm loop's issuing
 * thread burned 24 us of CPU per 100 us op).  A synchronising thread
 * likewise names the task it waits for (wake_seq) and is woken once, when
 * that task is done, not after every task before it.
 *
 * Errors: a kernel fails by returning nonzero or calling nrt_exec_fail; the
 * worker keeps the first failure as "<task name>: <message>" on the stream
 * until a synchronisation returns it, and goes on with the next task.
 * Launch-blocking mode is a synchronisation after every public launch.
 * Public launches cannot name the internal event kernels (their params
 * hold runtime pointers); event.c queues those with nrt_launch_internal.
 *
 * Each worker has one nrt_exec_ctx: its stream, an SBUF scratchpad mapped
 * at first use, and the failure message of the running task. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define RING_TASKS 1024u
#define RING_LOW_WATER (RING_TASKS / 2) /* a full ring's launcher waits down to this */
#define SPIN_NS 50000u

/* ------------------------------------------------------------ kernels */

static _Atomic(nrt_kernel_fn) kernel_table[NRT_KERNEL_MAX];
static _Atomic(nrt_fuse_classify_fn) fusion_table[NRT_KERNEL_MAX]; /* adaptive eager */
static const nrt_multi_fns *_Atomic multi_table[NRT_KERNEL_MAX];
static _Atomic(nrt_row_capture_fn) row_capture_table[NRT_KERNEL_MAX];
static const char *kernel_names[NRT_KERNEL_MAX];
static pthread_mutex_t kernel_lock = PTHREAD_MUTEX_INITIALIZER;

nrt_status nrt_kernel_register(uint32_t id, const char *name, nrt_kernel_fn fn) {
  if (id < NRT_KERNEL_FIRST_USER || id >= NRT_KERNEL_MAX || !fn)
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "kernel id %u is outside [%d, %d) or fn is NULL",
                    id, NRT_KERNEL_FIRST_USER, NRT_KERNEL_MAX);
  nrt_status st = NRT_SUCCESS;
  pthread_mutex_lock(&kernel_lock);
  nrt_kernel_fn old = atomic_load(&kernel_table[id]);
  if (old && old != fn)
    st = nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "kernel id %u is already registered as %s", id,
                  kernel_names[id] ? kernel_names[id] : "?");
  else {
    kernel_names[id] = name;
    atomic_store(&kernel_table[id], fn);
  }
  pthread_mutex_unlock(&kernel_lock);
  return st;
}

/* The per-id tables beside the executors take user ids only. */
static nrt_status check_user_id(uint32_t id) {
  if (id < NRT_KERNEL_FIRST_USER || id >= NRT_KERNEL_MAX)
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "kernel id %u is outside [%d, %d)", id,
                    NRT_KERNEL_FIRST_USER, NRT_KERNEL_MAX);
  return NRT_SUCCESS;
}

nrt_status nrt_kernel_set_fusion(uint32_t id, nrt_fuse_classify_fn fn) {
  nrt_status st = check_user_id(id);
  if (st == NRT_SUCCESS) atomic_store(&fusion_table[id], fn);
  return st;
}

nrt_status nrt_kernel_set_multi(uint32_t id, const nrt_multi_fns *fns) {
  nrt_status st = check_user_id(id);
  if (st == NRT_SUCCESS) atomic_store(&multi_table[id], fns);
  return st;
}

const nrt_multi_fns *nrt_task_multi(const nrt_task *t) {
  const nrt_multi_fns *fns = t->kernel < NRT_KERNEL_MAX ? atomic_load(&multi_table[t->kernel]) : NULL;
  const nrt_fuse_classify_fn classify = nrt_kernel_fusion_of(t->kernel);
  return fns && classify && classify(t) == NRT_FUSE_MULTI ? fns : NULL;
}

nrt_status nrt_kernel_set_row_capture(uint32_t id, nrt_row_capture_fn fn) {
  nrt_status st = check_user_id(id);
  if (st == NRT_SUCCESS) atomic_store(&row_capture_table[id], fn);
  return st;
}

nrt_row_capture_fn nrt_kernel_row_capture_of(uint32_t id) {
  return id < NRT_KERNEL_MAX ? atomic_load(&row_capture_table[id]) : NULL;
}

nrt_kernel_fn nrt_kernel_fn_of(uint32_t id) {
  return id < NRT_KERNEL_MAX ? atomic_load(&kernel_table[id]) : NULL;
}

nrt_fuse_classify_fn nrt_kernel_fusion_of(uint32_t id) {
  return id < NRT_KERNEL_MAX ? atomic_load(&fusion_table[id]) : NULL;
}

const char *nrt_kernel_name(uint32_t id) {
  if (id >= NRT_KERNEL_MAX) return NULL;
  pthread_mutex_lock(&kernel_lock);
  const char *name = kernel_names[id];
  pthread_mutex_unlock(&kernel_lock);
  return name;
}

/* ------------------------------------------------------------ exec ctx */

int nrt_exec_device(const nrt_exec_ctx *ctx) { return ctx->stream->device->index; }

void nrt_exec_ctx_release(nrt_exec_ctx *ctx) {
  if (ctx->sbuf) munmap(ctx->sbuf, NRT_SBUF_BYTES);
  ctx->sbuf = NULL;
}

void *nrt_exec_sbuf(nrt_exec_ctx *ctx) {
  if (!ctx->sbuf) {
    void *p = mmap(NULL, NRT_SBUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ctx->sbuf = p == MAP_FAILED ? NULL : p;
  }
  return ctx->sbuf;
}

void nrt_exec_fail(nrt_exec_ctx *ctx, const char *fmt, ...) {
  ctx->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------ streams */

nrt_stream *nrt_stream_create_internal(nrt_device *dev, int64_t id, int priority) {
  nrt_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->ring = aligned_alloc(64, RING_TASKS * sizeof(nrt_task));
  s->enqueue_ns = calloc(RING_TASKS, sizeof *s->enqueue_ns);
  if (!s->ring || !s->enqueue_ns) {
    free(s->ring);
    free(s->enqueue_ns);
    free(s);
    return NULL;
  }
  s->device = dev;
  s->id = id;
  atomic_store(&s->wake_seq, UINT64_MAX);
  atomic_store(&s->launcher_cpu, -1);
  s->spin_ns = SPIN_NS;
  s->priority = priority;
  pthread_mutex_init(&s->push_lock, NULL);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  pthread_cond_init(&s->space_cv, NULL);
  return s;
}

static nrt_stream *stream_slot(nrt_device *d, int64_t id, int priority) {
  nrt_stream *s = atomic_load(&d->streams[id]);
  if (s) return s;
  pthread_mutex_lock(&d->streams_lock);
  s = atomic_load(&d->streams[id]);
  if (!s) {
    s = nrt_stream_create_internal(d, id, priority);
    if (s) atomic_store(&d->streams[id], s);
    else nrt_fail(NRT_ERROR_INTERNAL, "out of host memory for a stream");
  }
  pthread_mutex_unlock(&d->streams_lock);
  return s;
}

nrt_stream *nrt_stream_default(int device) {
  nrt_device *d = nrt_device_get(device);
  return d ? stream_slot(d, 0, NRT_PRIORITY_NORMAL) : NULL;
}

nrt_status nrt_stream_from_pool(int device, int priority, nrt_stream **out) {
  if (!out) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "out is NULL");
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  int high = priority < 0;
  pthread_mutex_lock(&d->streams_lock);
  unsigned k = d->next_in_pool[high]++ % NRT_STREAMS_PER_POOL;
  pthread_mutex_unlock(&d->streams_lock);
  int64_t id = 1 + (int64_t)high * NRT_STREAMS_PER_POOL + k;
  *out = stream_slot(d, id, high ? NRT_PRIORITY_HIGH : NRT_PRIORITY_NORMAL);
  return *out ? NRT_SUCCESS : NRT_ERROR_INTERNAL;
}

nrt_status nrt_stream_get(int device, int64_t id, nrt_stream **out) {
  if (!out) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "out is NULL");
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  if (id == 0) {
    *out = nrt_stream_default(device);
    return *out ? NRT_SUCCESS : NRT_ERROR_INTERNAL;
  }
  *out = id > 0 && id < NRT_STREAM_SLOTS ? atomic_load(&d->streams[id]) : NULL;
  if (!*out)
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "stream id %lld was never created on device %d",
                    (long long)id, device);
  return NRT_SUCCESS;
}

int64_t nrt_stream_id(const nrt_stream *s) { return s->id; }
int nrt_stream_device(const nrt_stream *s) { return s->device->index; }
int nrt_stream_priority(const nrt_stream *s) { return s->priority; }
uint64_t nrt_stream_launched(const nrt_stream *s) { return atomic_load(&s->tail); }
uint64_t nrt_stream_completed(const nrt_stream *s) { return atomic_load(&s->head); }

/* ------------------------------------------------------------ worker */

/* The stream whose worker this thread is.  A task that synchronises its own
 * stream (a host function calling nrt_stream_synchronize, an allocation's
 * OOM retry inside a kernel) would wait for itself forever; for it the
 * stream's work "so far" is what came before the running task, which has
 * all completed.  Likewise a task cannot wait for queue space its own
 * stream would only free after it returns. */
static _Thread_local nrt_stream *own_stream;

void nrt_stream_record_failure(nrt_stream *s, const char *task_name, const char *message) {
  pthread_mutex_lock(&s->lock);
  if (s->error == NRT_SUCCESS) {
    s->error = NRT_ERROR_KERNEL_FAILED;
    snprintf(s->error_msg, sizeof s->error_msg, "%.200s: %s",
             task_name ? task_name : "<unnamed task>", message[0] ? message : "kernel failed");
  }
  pthread_mutex_unlock(&s->lock);
}

static void record_failure(nrt_stream *s, const nrt_task *t, const char *message) {
  nrt_stream_record_failure(s, t->name, message);
}

int nrt_execute(nrt_exec_ctx *ctx, const nrt_task *t) {
  switch (t->kernel) {
    case NRT_KERNEL_NOP:
    case NRT_KERNEL_HINT_FREE: /* read by the fusion planner, nothing to run */
      return 0;
    case NRT_KERNEL_MEMCPY: {
      const nrt_memcpy_params *p = (const nrt_memcpy_params *)t->params;
      if (p->bytes) memcpy(p->dst, p->src, p->bytes);
      return 0;
    }
    case NRT_KERNEL_EVENT_RECORD:
      nrt_event_run_record(t);
      return 0;
    case NRT_KERNEL_EVENT_WAIT:
      nrt_event_run_wait(t);
      return 0;
    case NRT_KERNEL_HOST_FN: {
      const nrt_host_fn_params *p = (const nrt_host_fn_params *)t->params;
      p->fn(p->arg);
      return 0;
    }
    default: {
      nrt_kernel_fn fn = atomic_load(&kernel_table[t->kernel]);
      ctx->message[0] = '\0';
      ctx->failed = 0;
      int rc = fn(t, ctx);
      return rc != 0 || ctx->failed; /* failing is failing, whatever it returns */
    }
  }
}

/* Waits until a task is published beyond index h. */
static void wait_for_work(nrt_stream *s, uint64_t h) {
  if (h < s->tail_seen) return;
  s->tail_seen = atomic_load(&s->tail);
  if (h < s->tail_seen) return;
  uint64_t until = 0;
  int moved = 0; /* once per wait: the launcher's CPU is its last launch's */
  for (unsigned i = 0; atomic_load(&s->tail) == h; i++) {
    if ((i & 63) == 63) {
      uint64_t now = nrt_now_ns();
      if (!until) until = now + s->spin_ns;
      else if (now > until) break;
      nrt_spin_step(&moved, &s->launcher_cpu);
    }
    nrt_cpu_relax();
  }
  if (atomic_load(&s->tail) != h) return;
  const uint64_t slept = nrt_now_ns();
  pthread_mutex_lock(&s->lock);
  atomic_store(&s->worker_sleeping, 1);
  while (atomic_load(&s->tail) == h) pthread_cond_wait(&s->work_cv, &s->lock);
  atomic_store(&s->worker_sleeping, 0);
  const uint64_t asked = s->wake_asked_ns;
  pthread_mutex_unlock(&s->lock);
  s->spin_ns = nrt_spin_budget_after_sleep(s->spin_ns, SPIN_NS, nrt_sleep_gap(slept, asked, nrt_now_ns()));
}

/* Adaptive eager's look-ahead.  The planner fuses what is queued when the
 * worker takes a task; after a synchronisation the host issues a chain one
 * op at a time (tens of microseconds each), so an idle worker found each
 * chain's first op alone, ran it unfused and fused the rest behind it
 * (GELU from primitives, 4 evaluations per sync: 9.2 ms per evaluation,
 * against 6.7 ms when the whole window was queued).  So before a large
 * fusible task with a shallow queue behind it, the worker waits while the
 * host keeps issuing fusible work: it stops at a gap of
 * FUSE_LOOKAHEAD_GAP_NS after the last arrival, FUSE_LOOKAHEAD_MAX_NS in
 * all, a task no group can take, a full window, a full ring, or any thread
 * waiting on the stream (a synchronisation, an event, a read of a result),
 * so a program that waits for its result never waits for this.  It yields
 * the core meanwhile: the thread it waits for may need it. */
#define FUSE_LOOKAHEAD_MIN_ELEMENTS (1 << 20) /* a millisecond-scale task: the wait is small beside it */
#define FUSE_LOOKAHEAD_GAP_NS 100000u        /* Python issues an op in 10-50 us */
#define FUSE_LOOKAHEAD_MAX_NS 1000000u
/* Multi-tensor (foreach) heads: an optimizer issues its foreach ops 100-150
 * us apart (a list of 100 tensors each), with ~0.8 ms of Python between
 * AdamW's two halves (its bias-correction lists); each op is milliseconds
 * of device work over a model's parameters. */
#define FUSE_LOOKAHEAD_MULTI_GAP_NS 1000000u
#define FUSE_LOOKAHEAD_MULTI_MAX_NS 3000000u
#define FUSE_LOOKAHEAD_DEPTH 128u            /* tasks: two groups' worth of members */

static void await_chain(nrt_stream *s, uint64_t h) {
  const nrt_task *t = &s->ring[h % RING_TASKS];
  /* a multi-tensor task (a foreach op): its table's release, an event
   * record, follows each one and joins its group (fusion_multi.c) */
  const nrt_multi_fns *multi = nrt_task_multi(t);
  const int64_t elements = multi ? multi->elements(t) : nrt_operand_numel(&t->operands[0]);
  if (elements < FUSE_LOOKAHEAD_MIN_ELEMENTS) return;
  const uint64_t gap = multi ? FUSE_LOOKAHEAD_MULTI_GAP_NS : FUSE_LOOKAHEAD_GAP_NS;
  const uint64_t most = multi ? FUSE_LOOKAHEAD_MULTI_MAX_NS : FUSE_LOOKAHEAD_MAX_NS;
  uint64_t seen = atomic_load(&s->tail);
  const uint64_t start = nrt_now_ns();
  uint64_t last = start;
  while (seen - h < FUSE_LOOKAHEAD_DEPTH && !atomic_load(&s->waiters) &&
         !atomic_load(&s->space_waiters)) {
    const uint32_t newest = s->ring[(seen - 1) % RING_TASKS].kernel;
    if (newest != NRT_KERNEL_HINT_FREE && !(multi && newest == NRT_KERNEL_EVENT_RECORD) &&
        (newest < NRT_KERNEL_FIRST_USER || !nrt_kernel_fusion_of(newest)))
      return;
    nrt_spin_yield();
    const uint64_t now = nrt_now_ns(), tail = atomic_load(&s->tail);
    if (tail != seen) {
      seen = tail;
      last = now;
    } else if (now - last > gap) {
      return;
    }
    if (now - start > most) return;
  }
}

/* Runs one task (any kernel) on this thread, keeping its failure on the
 * stream and, while tracing, its record. */
static void run_task(nrt_stream *s, nrt_exec_ctx *ctx, const nrt_task *t, uint64_t enqueue_ns,
                     uint64_t correlation) {
  const int tracing = nrt_trace_enabled() && t->kernel != NRT_KERNEL_HINT_FREE;
  const uint64_t start = tracing ? nrt_now_ns() : 0;
  const int failed = nrt_execute(ctx, t) != 0;
  if (failed) record_failure(s, t, ctx->message);
  if (tracing) {
    nrt_trace_record r = {.name = t->name, .correlation = correlation, .kernel = t->kernel,
                          .device = s->device->index, .stream = s->id,
                          .enqueue_ns = enqueue_ns ? enqueue_ns : start, .start_ns = start,
                          .end_ns = nrt_now_ns(), .failed = failed};
    nrt_trace_add(&r);
  }
}

/* Tasks up to h are done: head passes them, and a synchronising thread
 * that waits for them, or a launcher that waits for room, wakes. */
static void finish_through(nrt_stream *s, uint64_t h) {
  atomic_store(&s->head, h + 1);
  const int wake_done = h + 1 >= atomic_load(&s->wake_seq);
  const int wake_space = atomic_load(&s->space_waiters) &&
                         atomic_load(&s->tail) - (h + 1) <= RING_LOW_WATER;
  if (wake_done || wake_space) {
    pthread_mutex_lock(&s->lock);
    if (wake_done) {
      /* every sleeper wakes; those still short re-register under lock */
      atomic_store(&s->wake_seq, UINT64_MAX);
      pthread_cond_broadcast(&s->done_cv);
    }
    if (wake_space) pthread_cond_broadcast(&s->space_cv);
    pthread_mutex_unlock(&s->lock);
  }
}

static void wait_head(nrt_stream *s, uint64_t seq, int may_run);

/* Claims.  The worker is not the only thread that may run a stream's
 * tasks: a thread that waits for the stream runs the head task itself when
 * no one has taken it (wait_head).  On a machine whose other cores are
 * busy (a data loader, another job), the worker often was not running when
 * a task came: it had moved, or been moved, to a core that another process
 * held, and ran there at the next scheduler tick, 4 ms later, while the
 * synchronising thread sat idle on the other core (a 64^3 product
 * synchronised per call: p50 4.0 ms with a busy loop on one of 2 cores,
 * against 8 us on torch CPU; 11 us with waiters running it).  Tasks
 * [head, claimed) belong to one thread; a claim is a CAS from claimed ==
 * head (nothing in flight), so stream order holds: the worker takes all
 * that is queued (its fused groups plan over what it holds), a waiting
 * thread one task at a time.  Where the worker lost the race it waits for
 * that task like any waiter. */
static uint64_t worker_claim(nrt_stream *s, uint64_t h, uint64_t held) {
  uint64_t from = held > h ? held : h; /* extending its own claim, or a new one */
  const uint64_t to = atomic_load(&s->tail);
  if (to <= from) return from;
  return atomic_compare_exchange_strong(&s->claimed, &from, to) ? to : 0;
}

static void *worker_main(void *arg) {
  nrt_stream *s = arg;
  nrt_exec_ctx ctx = {.stream = s};
  own_stream = s;
  pthread_setname_np(pthread_self(), "neuron-stream"); /* for top, perf and gdb */
  nrt_place_slot(0);
  nrt_fp_state_enter(); /* for good: a compute thread */
  nrt_device_current_set(s->device->index);
  nrt_fusion *fusion = NULL; /* this worker's planner state, made at first use */
  uint64_t held = 0;         /* the end of the worker's claim */
  for (;;) {
    uint64_t h = atomic_load(&s->head);
    wait_for_work(s, h);
    if (!(held = worker_claim(s, h, held))) { /* a waiting thread runs task h */
      wait_head(s, h + 1, 0);
      continue;
    }
    const nrt_task *t = &s->ring[h % RING_TASKS];
    /* Adaptive eager: a chain of fusible tasks already queued behind this
     * one runs as one group (fusion_plan.c); the ring slots stay ours until
     * head moves past them. */
    uint64_t done = 0;
    if (t->kernel >= NRT_KERNEL_FIRST_USER && nrt_kernel_fusion_of(t->kernel) &&
        nrt_adaptive_active()) {
      if (held - h < FUSE_LOOKAHEAD_DEPTH) {
        await_chain(s, h);
        held = worker_claim(s, h, held); /* what came meanwhile: no one else claims behind ours */
      }
      done = nrt_fusion_run(&fusion, &ctx, s, s->ring, RING_TASKS, h, held - h);
    }
    if (done == 0) {
      run_task(s, &ctx, t, s->enqueue_ns[h % RING_TASKS], t->correlation);
      done = 1;
    }
    finish_through(s, h + done - 1);
  }
  return NULL;
}

static nrt_status start_worker(nrt_stream *s) {
  if (atomic_load(&s->worker_started)) return NRT_SUCCESS;
  nrt_status st = NRT_SUCCESS;
  pthread_mutex_lock(&s->lock);
  if (!atomic_load(&s->worker_started)) {
    if (pthread_create(&s->worker, NULL, worker_main, s) == 0) {
      pthread_detach(s->worker);
      atomic_store(&s->worker_started, 1);
    } else {
      st = nrt_fail(NRT_ERROR_INTERNAL, "cannot start the worker thread of stream %lld",
                    (long long)s->id);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

/* ------------------------------------------------------------ launch */

static nrt_status check_task(const nrt_task *t) {
  if (t->n_operands < 0 || t->n_operands > NRT_MAX_OPERANDS)
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: %d operands (at most %d)",
                    t->name ? t->name : "task", t->n_operands, NRT_MAX_OPERANDS);
  if (t->kernel < NRT_KERNEL_FIRST_USER) {
    /* Event tasks carry runtime-private pointers: only event.c queues them. */
    if (t->kernel == NRT_KERNEL_EVENT_RECORD || t->kernel == NRT_KERNEL_EVENT_WAIT ||
        t->kernel > NRT_KERNEL_HOST_FN)
      return nrt_fail(NRT_ERROR_UNKNOWN_KERNEL, "%s: kernel id %u is reserved for the runtime",
                      t->name ? t->name : "task", t->kernel);
    if (t->kernel == NRT_KERNEL_HOST_FN && !((const nrt_host_fn_params *)t->params)->fn)
      return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "host function task without a function");
    return NRT_SUCCESS;
  }
  if (t->kernel >= NRT_KERNEL_MAX || !atomic_load(&kernel_table[t->kernel]))
    return nrt_fail(NRT_ERROR_UNKNOWN_KERNEL, "%s: no kernel is registered with id %u",
                    t->name ? t->name : "task", t->kernel);
  return NRT_SUCCESS;
}

/* Copies only what the task uses (the dims of each operand it has): the
 * worker reads the slot from another core, so every cache line counts. */
static void copy_task(nrt_task *dst, const nrt_task *src) {
  dst->kernel = src->kernel;
  dst->n_operands = src->n_operands;
  dst->name = src->name;
  /* 0: the launching thread's current op (trace.c), for the profiler */
  dst->correlation = src->correlation ? src->correlation : nrt_trace_tls_correlation;
  for (int i = 0; i < src->n_operands; i++) {
    const nrt_operand *a = &src->operands[i];
    nrt_operand *b = &dst->operands[i];
    int nd = a->ndim < 0 ? 0 : a->ndim > NRT_MAX_DIMS ? NRT_MAX_DIMS : a->ndim;
    b->data = a->data;
    b->dtype = a->dtype;
    b->ndim = a->ndim;
    memcpy(b->sizes, a->sizes, (size_t)nd * sizeof a->sizes[0]);
    memcpy(b->strides, a->strides, (size_t)nd * sizeof a->strides[0]);
  }
  memcpy(dst->params, src->params, sizeof dst->params);
}

/* After publishing a task: the worker takes the lock only to sleep, so a
 * launch pays for it only when the worker is asleep. */
static void wake_worker(nrt_stream *s) {
  if (!atomic_load(&s->worker_sleeping)) return;
  pthread_mutex_lock(&s->lock);
  s->wake_asked_ns = nrt_now_ns();
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->lock);
}

nrt_status nrt_launch_internal(nrt_stream *s, const nrt_task *task, uint64_t *seq) {
  nrt_status st = nrt_check_not_forked();
  if (st == NRT_SUCCESS) st = start_worker(s);
  if (st != NRT_SUCCESS) return st;
  pthread_mutex_lock(&s->push_lock);
  uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
  if (t - s->head_seen >= RING_TASKS) s->head_seen = atomic_load(&s->head);
  if (t - s->head_seen >= RING_TASKS) { /* full: wait for the worker to make room */
    if (s == own_stream) {
      pthread_mutex_unlock(&s->push_lock);
      return nrt_fail(NRT_ERROR_INVALID_ARGUMENT,
                      "%s: the queue of stream %lld is full and this launch comes from one of "
                      "its own tasks, which would wait for itself",
                      task->name ? task->name : "task", (long long)s->id);
    }
    atomic_fetch_add(&s->space_waiters, 1);
    pthread_mutex_lock(&s->lock);
    while (t - atomic_load(&s->head) > RING_LOW_WATER) pthread_cond_wait(&s->space_cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_sub(&s->space_waiters, 1);
  }
  copy_task(&s->ring[t % RING_TASKS], task);
  if (nrt_trace_enabled()) s->enqueue_ns[t % RING_TASKS] = nrt_now_ns();
  nrt_publish_cpu(&s->launcher_cpu);
  atomic_store(&s->tail, t + 1);
  pthread_mutex_unlock(&s->push_lock);
  if (seq) *seq = t + 1;
  wake_worker(s);
  return NRT_SUCCESS;
}

/* A free hint is worth a ring slot only where a window can form: behind
 * queued work.  It never waits for room (a full ring just loses it: the
 * store then happens), and a worker freeing into its own stream is fine. */
void nrt_stream_hint_free(nrt_stream *s, void *ptr, size_t bytes) {
  if (!atomic_load(&s->worker_started) || pthread_mutex_trylock(&s->push_lock) != 0) return;
  uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
  uint64_t h = atomic_load(&s->head);
  if (h < t && t - h < RING_TASKS) {
    nrt_task *slot = &s->ring[t % RING_TASKS];
    slot->kernel = NRT_KERNEL_HINT_FREE;
    slot->n_operands = 0;
    slot->name = "free hint";
    slot->correlation = 0;
    nrt_memcpy_params *p = (nrt_memcpy_params *)slot->params; /* dst = block, bytes = size */
    p->dst = ptr;
    p->src = NULL;
    p->bytes = bytes;
    atomic_store(&s->tail, t + 1);
  }
  pthread_mutex_unlock(&s->push_lock);
  wake_worker(s); /* it may have run out of work meanwhile */
}

static _Atomic int launch_blocking_override = -1; /* tests */

void nrt_testing_set_launch_blocking(int on) { atomic_store(&launch_blocking_override, on); }

/* A stream exists, so the runtime is initialised: no init check per launch. */
static int blocking_now(void) {
  int override = atomic_load(&launch_blocking_override);
  return override >= 0 ? override : nrt_cfg.launch_blocking;
}

int nrt_launch_blocking(void) { return nrt_ensure_init() == NRT_SUCCESS && blocking_now(); }

static _Atomic int adaptive_override = -1; /* nrt_adaptive_set_mode */

void nrt_adaptive_set_mode(int mode) {
  atomic_store(&adaptive_override, mode < NRT_ADAPTIVE_OFF || mode > NRT_ADAPTIVE_VERIFY ? -1 : mode);
}

int nrt_adaptive_mode(void) {
  int m = atomic_load(&adaptive_override);
  if (m >= 0) return m;
  return nrt_ensure_init() == NRT_SUCCESS ? nrt_cfg.adaptive : NRT_ADAPTIVE_OFF;
}

/* Launch-blocking mode runs every task alone: a window never forms. */
int nrt_adaptive_active(void) {
  int m = atomic_load(&adaptive_override);
  return (m >= 0 ? m : nrt_cfg.adaptive) != NRT_ADAPTIVE_OFF && !blocking_now();
}

/* Small tasks on an idle stream run on the launching thread.
 *
 * Handing a task to the worker costs two cross-core trips of its cache
 * lines (~1 us here); an 8-element add costs a few dozen ns.  When the
 * stream has nothing queued, running the task right here gives the same
 * order and the same results as queueing it (the worker would start it at
 * once; push_lock keeps other launchers out meanwhile), and its error is
 * kept on the stream exactly as the worker keeps it.  Only kernels whose
 * operands are all small qualify, so the host never stalls on real work:
 * asynchrony is kept wherever it buys anything. */
#define INLINE_MAX_ELEMENTS 2048

static int is_small(const nrt_task *t) {
  for (int i = 0; i < t->n_operands; i++) {
    const nrt_operand *o = &t->operands[i];
    int64_t n = 1;
    for (int d = 0; d < o->ndim && d < NRT_MAX_DIMS; d++) {
      if (o->sizes[d] > INLINE_MAX_ELEMENTS) return 0;
      n *= o->sizes[d];
      if (n > INLINE_MAX_ELEMENTS) return 0;
    }
  }
  return 1;
}

/* A host thread's context for the tasks it runs itself (here and in
 * wait_head). */
static _Thread_local nrt_exec_ctx host_ctx;

/* Runs a task of s on this host thread as the worker would: the device's
 * numerics, not the host's, its failure kept on the stream. */
static void run_on_host(nrt_stream *s, const nrt_task *t, uint64_t enqueue_ns, uint64_t correlation) {
  host_ctx.stream = s;
  const unsigned own_fp = nrt_fp_state_enter();
  run_task(s, &host_ctx, t, enqueue_ns, correlation);
  nrt_fp_state_leave(own_fp);
}

static int try_run_inline(nrt_stream *s, const nrt_task *t) {
  pthread_mutex_lock(&s->push_lock);
  int idle = atomic_load(&s->head) == atomic_load_explicit(&s->tail, memory_order_relaxed);
  if (idle) run_on_host(s, t, 0, t->correlation ? t->correlation : nrt_trace_tls_correlation);
  pthread_mutex_unlock(&s->push_lock);
  return idle;
}

nrt_status nrt_launch(nrt_stream *s, const nrt_task *task) {
  if (!s || !task) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_launch: NULL argument");
  nrt_status st = check_task(task);
  if (st == NRT_SUCCESS) st = nrt_check_not_forked(); /* before the inline path's lock */
  int ran = st == NRT_SUCCESS && task->kernel >= NRT_KERNEL_FIRST_USER && s != own_stream &&
            is_small(task) && try_run_inline(s, task);
  if (st == NRT_SUCCESS && !ran) st = nrt_launch_internal(s, task, NULL);
  int blocking = blocking_now();
  if (st != NRT_SUCCESS || !blocking) return st;
  return nrt_stream_synchronize(s);
}

/* ------------------------------------------------------------ sync */

void nrt_stream_wait_seq(nrt_stream *s, uint64_t seq) {
  if (s == own_stream) return; /* everything before the running task is done */
  atomic_fetch_add(&s->waiters, 1); /* ends the worker's look-ahead (await_chain) */
  wait_head(s, seq, 1);
  atomic_fetch_sub(&s->waiters, 1);
}

/* Which tasks a waiting thread may run in the worker's place: the kernels
 * and the runtime's copies and markers.  Not an event wait (it would hold
 * the claim while blocking on another stream: the worker does that) nor a
 * host function (a user callback that may synchronise its own stream). */
static int host_may_run(const nrt_task *t) {
  return t->kernel >= NRT_KERNEL_FIRST_USER || t->kernel == NRT_KERNEL_NOP ||
         t->kernel == NRT_KERNEL_HINT_FREE || t->kernel == NRT_KERNEL_MEMCPY ||
         t->kernel == NRT_KERNEL_EVENT_RECORD;
}

static _Atomic int waiter_runs = 1;

void nrt_testing_set_waiter_runs(int on) { atomic_store(&waiter_runs, on); }

/* The head task, if no one holds it: claimed and run here, as the worker
 * would run it (run_on_host; a launch from inside it into this stream is
 * the stream's own, as on the worker).  1 if it ran. */
static int run_head_here(nrt_stream *s, uint64_t seq) {
  uint64_t h = atomic_load(&s->head);
  if (h >= seq || !atomic_load_explicit(&waiter_runs, memory_order_relaxed) ||
      atomic_load(&s->claimed) != h || atomic_load(&s->tail) <= h)
    return 0;
  const nrt_task *t = &s->ring[h % RING_TASKS];
  if (!host_may_run(t) || !atomic_compare_exchange_strong(&s->claimed, &h, h + 1)) return 0;
  nrt_stream *const outer = own_stream;
  own_stream = s;
  run_on_host(s, t, s->enqueue_ns[h % RING_TASKS], t->correlation);
  own_stream = outer;
  finish_through(s, h);
  return 1;
}

/* The waiter polls for a while before it sleeps, and while it polls it
 * runs the head task when no one holds it (may_run: a synchronising thread;
 * the worker itself waits with 0) and works as one of the compute pool's
 * threads (nrt_pool_assist) instead of keeping a core busy doing nothing.
 * It looks for an open region every 8th poll (a few hundred nanoseconds):
 * the flag shares its cache line with the counter the workers claim chunks
 * from. */
static void wait_head(nrt_stream *s, uint64_t seq, int may_run) {
  uint64_t until = 0;
  for (unsigned i = 0; atomic_load(&s->head) < seq; i++) {
    if ((i & 7) == 0 && ((may_run && run_head_here(s, seq)) || nrt_pool_assist())) continue;
    if ((i & 63) == 63) {
      uint64_t now = nrt_now_ns();
      if (!until) until = now + SPIN_NS;
      else if (now > until) break;
      nrt_spin_yield();
    }
    nrt_cpu_relax();
  }
  if (atomic_load(&s->head) >= seq) return;
  pthread_mutex_lock(&s->lock);
  while (atomic_load(&s->head) < seq) {
    if (seq < atomic_load(&s->wake_seq)) atomic_store(&s->wake_seq, seq);
    if (atomic_load(&s->head) >= seq) break; /* the store-then-load pair */
    pthread_cond_wait(&s->done_cv, &s->lock);
  }
  pthread_mutex_unlock(&s->lock);
}

nrt_status nrt_stream_query(nrt_stream *s) {
  if (!s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "stream is NULL");
  return atomic_load(&s->head) >= atomic_load(&s->tail) ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
}

nrt_status nrt_stream_synchronize(nrt_stream *s) {
  if (!s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "stream is NULL");
  nrt_status forked = nrt_check_not_forked();
  if (forked != NRT_SUCCESS) return forked;
  nrt_stream_wait_seq(s, atomic_load(&s->tail));
  pthread_mutex_lock(&s->lock);
  nrt_status err = s->error;
  char message[sizeof s->error_msg];
  memcpy(message, s->error_msg, sizeof message);
  s->error = NRT_SUCCESS;
  pthread_mutex_unlock(&s->lock);
  return err == NRT_SUCCESS ? NRT_SUCCESS : nrt_fail(err, "%s", message);
}
