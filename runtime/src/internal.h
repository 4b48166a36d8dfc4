/* internal.h — what the runtime's files share; nothing here is public. */
#ifndef NRT_INTERNAL_H
#define NRT_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "neuron_runtime.h"

/* ---- error.c: the calling thread's message, set by every failing call. */
nrt_status nrt_fail(nrt_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- env.c: configuration, parsed once. */
typedef struct nrt_config {
  int device_count;
  int first_device; /* every thread's device until it sets one */
  uint64_t hbm_bytes;
  int num_threads;
  int launch_blocking;
  int adaptive; /* NRT_ADAPTIVE_* */
  int fusion_compile; /* NRT_FUSION_JIT_*: TORCHNEURON_FUSION_COMPILE */
  size_t trace_capacity;
  int pin_threads; /* TORCHNEURON_PIN_THREADS: compute threads on their own CPUs */
} nrt_config;
/* Parsers are exposed for the tests: 0 on success, -1 on malformed or
 * out-of-range text (the caller names the variable in its message). */
int nrt_parse_size(const char *text, uint64_t *out);
int nrt_parse_int(const char *text, long lo, long hi, long *out);
/* NEURON_RT_VISIBLE_CORES: the number of cores listed, or -1. */
int nrt_parse_core_list(const char *text, int cores);
nrt_status nrt_config_from_env(nrt_config *cfg);

/* ---- device.c */
#define NRT_STREAM_SLOTS (1 + 2 * NRT_STREAMS_PER_POOL) /* default + 2 pools */
#define NRT_SBUF_BYTES (24u << 20)

typedef struct nrt_arena nrt_arena;
typedef struct nrt_allocator nrt_allocator;

typedef struct nrt_device {
  int index;
  nrt_arena *arena;
  nrt_allocator *alloc;
  pthread_mutex_t streams_lock;
  _Atomic(nrt_stream *) streams[NRT_STREAM_SLOTS]; /* by stream id */
  unsigned next_in_pool[2];                        /* round robin   */
} nrt_device;

extern nrt_config nrt_cfg;
/* Lazily initialises; NULL (and a message) on a bad index or failed init. */
nrt_device *nrt_device_get(int index);
/* The status a NULL from nrt_device_get stands for (bad index, or the
 * failed initialisation's). */
nrt_status nrt_device_error(void);
nrt_status nrt_ensure_init(void);
/* NRT_ERROR_INTERNAL with a message in a child forked after initialisation
 * (checked by every call that would wait for a worker or take a lock that
 * the fork may have left held). */
nrt_status nrt_check_not_forked(void);
/* Waits for the work launched so far on every stream of d, leaving kernel
 * errors on their streams for the caller's next synchronisation. */
void nrt_device_wait_idle(nrt_device *d);

/* ---- arena.c: segments of a device's reserved address space. */
#define NRT_SEGMENT_ALIGN ((size_t)2 << 20)
nrt_status nrt_arena_create(uint64_t capacity, nrt_arena **out);
void *nrt_arena_take(nrt_arena *a, size_t bytes); /* NULL when full */
void nrt_arena_give(nrt_arena *a, void *ptr, size_t bytes);
int nrt_arena_contains(const nrt_arena *a, const void *ptr);
uint64_t nrt_arena_capacity(const nrt_arena *a);

/* ---- allocator.c */
nrt_status nrt_allocator_create(nrt_device *dev, nrt_allocator **out);

/* ---- stream.c */
struct nrt_stream {
  nrt_device *device;
  int64_t id;
  int priority;
  /* ring of tasks: producers serialise on push_lock; the one worker
   * consumes.  tail = tasks launched, head = tasks completed. */
  nrt_task *ring;
  uint64_t *enqueue_ns; /* per ring slot, written only while tracing */
  /* head and tail live on cache lines of their own, each with its side's
   * private copy of the other, so a launch moves no line the worker owns. */
  _Alignas(64) _Atomic uint64_t head; /* written by whoever ran the task (the worker, mostly) */
  _Atomic uint64_t claimed;           /* tasks [head, claimed) are taken by one thread (stream.c) */
  uint64_t tail_seen;                 /* worker's last look at tail */
  uint64_t spin_ns;                   /* the worker's spin budget (nrt_spin_budget_after_sleep) */
  uint64_t wake_asked_ns;             /* under lock: when a launch last woke the worker (nrt_sleep_gap) */
  _Alignas(64) _Atomic uint64_t tail; /* written under push_lock */
  uint64_t head_seen;                 /* launchers' last look at head */
  atomic_int launcher_cpu;            /* where the last launch came from (-1: unknown) */
  _Alignas(64) pthread_mutex_t push_lock; /* launchers only */
  /* Read by both sides on every task, written only around a sleep: a line
   * that stays shared instead of bouncing. */
  _Alignas(64) atomic_int worker_sleeping, space_waiters;
  atomic_int waiters; /* threads in nrt_stream_wait_seq (adaptive eager's look-ahead) */
  _Atomic uint64_t wake_seq; /* the first head a sleeping waiter needs (UINT64_MAX: none) */
  atomic_int worker_started;
  _Alignas(64) pthread_mutex_t lock; /* sleep/wake and the error slot */
  pthread_cond_t work_cv, done_cv, space_cv;
  pthread_t worker;
  nrt_status error;
  char error_msg[768];
};
nrt_stream *nrt_stream_create_internal(nrt_device *dev, int64_t id, int priority);
/* Waits until the stream has completed its first `seq` tasks. */
void nrt_stream_wait_seq(nrt_stream *s, uint64_t seq);
uint64_t nrt_stream_launched(const nrt_stream *s);
uint64_t nrt_stream_completed(const nrt_stream *s);
/* Queues a task without nrt_launch's checks or its launch-blocking wait
 * (the runtime's own tasks, e.g. events).  *seq (may be NULL) gets the
 * stream's launch count including this task: it has run once
 * nrt_stream_completed reaches that value. */
nrt_status nrt_launch_internal(nrt_stream *s, const nrt_task *task, uint64_t *seq);
/* Queues a free hint for [ptr, ptr + bytes) if the stream has work queued
 * and room for it; never waits (fusion_plan.c reads it). */
void nrt_stream_hint_free(nrt_stream *s, void *ptr, size_t bytes);

/* What a kernel sees while it executes (one per stream worker, one per
 * pool worker inside a fused group). */
struct nrt_exec_ctx {
  nrt_stream *stream;
  void *sbuf; /* mmap'd at first use: a worker that never asks costs nothing */
  int failed; /* nrt_exec_fail was called for the running task */
  char message[512];
};
/* Runs one task's kernel (any id, the runtime's own too); nonzero if it failed. */
int nrt_execute(nrt_exec_ctx *ctx, const nrt_task *t);
void nrt_exec_ctx_release(nrt_exec_ctx *ctx);
/* Keeps the first failure on s as "<task name>: <message>". */
void nrt_stream_record_failure(nrt_stream *s, const char *task_name, const char *message);
nrt_kernel_fn nrt_kernel_fn_of(uint32_t id);
nrt_fuse_classify_fn nrt_kernel_fusion_of(uint32_t id);
/* How the kernel runs t, when t is a multi-tensor task (its kernel's
 * classifier says NRT_FUSE_MULTI and it registered nrt_multi_fns); else NULL. */
const nrt_multi_fns *nrt_task_multi(const nrt_task *t);
nrt_row_capture_fn nrt_kernel_row_capture_of(uint32_t id);
/* 1 if the worker should plan fused groups now (mode on, not blocking). */
int nrt_adaptive_active(void);

/* An operand's element count, saturating at INT64_MAX: descriptors are
 * checked for sign, not for a product that overflows. */
static inline int64_t nrt_operand_numel(const nrt_operand *o) {
  int64_t n = 1;
  for (int d = 0; d < o->ndim && d < NRT_MAX_DIMS; d++)
    if (__builtin_mul_overflow(n, o->sizes[d], &n)) return INT64_MAX;
  return n;
}

/* ---- fusion_plan.c / fusion_exec.c: adaptive eager (fusion.h) */
typedef struct nrt_fusion nrt_fusion;
/* Runs the group that starts at the stream's task `head`, if there is one
 * of at least two tasks among the `queued` tasks published behind it;
 * returns how many queued tasks it consumed (0: none, run head unfused).
 * Called by the stream's worker only. */
uint64_t nrt_fusion_run(nrt_fusion **state, nrt_exec_ctx *ctx, nrt_stream *s, const nrt_task *ring,
                        unsigned ring_size, uint64_t head, uint64_t queued);

/* Overrides TORCHNEURON_LAUNCH_BLOCKING (tests); -1 restores it. */
void nrt_testing_set_launch_blocking(int on);
/* 0: a waiting thread never runs the head task itself, so the worker runs
 * every queued task (tests of what the worker does); 1 restores it. */
void nrt_testing_set_waiter_runs(int on);

/* ---- event.c: executed by the stream worker. */
void nrt_event_run_record(const nrt_task *t);
void nrt_event_run_wait(const nrt_task *t);

/* ---- host.c: 1 if [ptr, ptr + bytes) lies inside one live pinned block. */
int nrt_host_range_pinned(const void *ptr, size_t bytes);

/* ---- trace.c */
void nrt_trace_init(size_t capacity);
void nrt_trace_add(const nrt_trace_record *r);
/* The calling thread's correlation id (nrt_trace_set_correlation). */
extern _Thread_local uint64_t nrt_trace_tls_correlation;
/* Records host-side work done for stream s as if it were one of its tasks
 * (a synchronous copy to pageable memory): name, kernel and times. */
void nrt_trace_host_work(nrt_stream *s, const char *name, uint32_t kernel, uint64_t start_ns,
                         uint64_t end_ns);

/* ---- pool.c */
void nrt_pool_init(int threads);
/* A waiting host thread joins the open compute-pool region, if any, as a
 * worker (pool.c); returns whether there was one. */
int nrt_pool_assist(void);
void nrt_place_slot(int slot); /* this thread onto compute slot `slot`'s CPU (kept: TORCHNEURON_PIN_THREADS) */

/* Spin budgets that follow the work's rhythm (a stream's worker, a pool
 * helper).  Each polls for its budget before it sleeps, and waking a
 * sleeper costs 20-40 us on a VM.  A loop that synchronises after every
 * call leaves gaps of tens of microseconds of Python between them, longer
 * than a fixed 30-50 us spin: a compiled LayerNorm of 64 x 1024 so called
 * took 83 us against Inductor CPU's 39, its team waiting each time for a
 * helper to wake (libgomp's threads spin for milliseconds).  So a thread
 * asked to wake within NRT_SPIN_MAX_NS of going to sleep polls that long
 * and a quarter more next time (up to the cap), and one that slept longer
 * goes back to its base budget: steady rhythms keep their threads awake,
 * an idle device sleeps after the base spin.
 *
 * The gap is measured to the wake-up call (the waker stamps it), not to
 * when the thread ran again: on a VM whose host is busy a wake-up itself
 * took 200-600 us (the idle vCPU has to be scheduled), so measured to the
 * thread's return every gap looked long, the budget stayed at its base,
 * and every call paid a wake-up: a 64^3 product synchronised after each
 * call took 250-500 us against 16 us on the CPU.  `asked_ns` is that
 * stamp (0 or stale: none, the thread's own clock is used). */
#define NRT_SPIN_MAX_NS 400000u
static inline uint64_t nrt_spin_budget_after_sleep(uint64_t budget, uint64_t base, uint64_t slept_ns) {
  if (slept_ns > NRT_SPIN_MAX_NS) return base;
  uint64_t want = slept_ns + slept_ns / 4;
  if (want < budget) want = budget;
  return want > NRT_SPIN_MAX_NS ? NRT_SPIN_MAX_NS : want;
}
/* How long a thread that went to sleep at `slept` slept, as far as its
 * budget is concerned: until it was asked to wake (asked_ns), else until now. */
static inline uint64_t nrt_sleep_gap(uint64_t slept, uint64_t asked_ns, uint64_t now) {
  return asked_ns >= slept && asked_ns <= now ? asked_ns - slept : now - slept;
}

/* Spin-waits and CPU sharing.  A runtime thread that spin-waits for
 * another thread on the same CPU only hands that CPU back and forth with
 * it (sched_yield), and this VM's scheduler left such a pair on one CPU
 * with the other idle: a product synchronised after each call took 16 us
 * there against 8 us apart, for whole runs.  A thread that woke another
 * often got it onto its own CPU.  So each spinner checks, where it
 * yields, whether the thread it waits for runs on its CPU (that thread
 * publishes the CPU it runs on; sched_getcpu reads the rseq area, ~4 ns)
 * and then moves to another CPU (nrt_move_off_cpu).  Only the runtime's
 * own threads move: a stream's worker off its last launcher's CPU, a pool
 * helper off its last region caller's.  A host thread waiting for a
 * stream is the user's, and sleeping it instead of spinning made the pair
 * trade futex wake-ups on one CPU (each wake-up put the woken thread on
 * the waker's CPU): 40 us a round. */
static inline int nrt_current_cpu(void) { return sched_getcpu(); } /* -1: unknown */
/* Moves the calling runtime thread off `cpu` if it runs there: its
 * affinity minus that CPU for a moment (the move is made at once), then
 * its own affinity again, so the scheduler stays free.  Does nothing when
 * TORCHNEURON_PIN_THREADS=1 or no other CPU is allowed.  1: it moved. */
int nrt_move_off_cpu(int cpu);
/* Publishes the calling thread's CPU in *slot for the threads that wait
 * for it (stored only when it changed: the line stays shared). */
static inline void nrt_publish_cpu(atomic_int *slot) {
  const int cpu = nrt_current_cpu();
  if (cpu != atomic_load_explicit(slot, memory_order_relaxed))
    atomic_store_explicit(slot, cpu, memory_order_relaxed);
}

/* The device's floating-point control state (MXCSR: rounding, flush-to-
 * zero, denormals-are-zero) is x86's default, whatever the host thread had
 * set (a new thread inherits its creator's; torch's set_flush_denormal
 * changes the calling thread's only): the device's results never depend on
 * host-thread state, as a GPU's do not.  Compute threads enter it for good
 * when they start; a host thread around device work it does itself (a small
 * task run inline, a pool region it assists): enter returns the thread's own
 * state, leave restores it. */
#if defined(__x86_64__) || defined(__i386__)
#define NRT_MXCSR_DEFAULT 0x1f80u /* round to nearest, all exceptions masked */
#define NRT_MXCSR_CONTROL 0xffc0u /* the low 6 bits are sticky exception flags */
static inline unsigned nrt_fp_state_swap(unsigned to) {
  const unsigned was = __builtin_ia32_stmxcsr();
  if ((was ^ to) & NRT_MXCSR_CONTROL)
    __builtin_ia32_ldmxcsr((was & ~NRT_MXCSR_CONTROL) | (to & NRT_MXCSR_CONTROL));
  return was;
}
#else
#define NRT_MXCSR_DEFAULT 0u
static inline unsigned nrt_fp_state_swap(unsigned to) { return to; }
#endif
static inline unsigned nrt_fp_state_enter(void) { return nrt_fp_state_swap(NRT_MXCSR_DEFAULT); }
static inline void nrt_fp_state_leave(unsigned saved) { nrt_fp_state_swap(saved); }

/* spin hint for busy-wait loops */
static inline void nrt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* The periodic step of a bounded spin (every 64 polls, with the clock
 * check): hands the core to any other runnable thread.  The runtime's
 * threads (a stream's worker, the pool's helpers, a synchronising caller)
 * outnumber the cores as soon as the pool uses them all; a spinner that
 * only pauses keeps the core from the thread whose progress it awaits, up
 * to the whole spin, each time. */
static inline void nrt_spin_yield(void) { sched_yield(); }

/* A spin-wait's periodic step (with nrt_spin_yield's reasons): moves off
 * the CPU published in *part_from once per wait (*moved), then yields. */
static inline void nrt_spin_step(int *moved, atomic_int *part_from) {
  if (!*moved) *moved = nrt_move_off_cpu(atomic_load_explicit(part_from, memory_order_relaxed));
  nrt_spin_yield();
}

#endif
