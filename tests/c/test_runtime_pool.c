/* The compute pool: every index exactly once, chunks at least grain long,
 * worker indexes in range, inline cases, nesting, concurrent callers (host
 * threads and stream workers) without deadlock.  Teams: every member once,
 * all members running at once (a barrier between them completes), the size
 * bounded by the request, a team of 1 inside a region, concurrent teams and
 * ranges without deadlock.  A host thread waiting for a stream works in its
 * regions: on a seat no one else holds, under the pool's floating-point
 * control state, not its own; and when every seat is taken it goes to
 * sleep rather than polling for the whole region. */
#define _GNU_SOURCE /* setenv */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../runtime/src/internal.h" /* nrt_testing_set_waiter_runs */
#include "check.h"

enum { THREADS = 4, K_PARALLEL = 700, K_ASSIST = 701, K_FULL = 702 };

typedef struct coverage {
  int64_t n, grain;
  atomic_uchar *hits;
  atomic_int short_chunks, bad_worker, calls;
  atomic_int workers_seen; /* bit per worker index */
} coverage;

static void cover_fn(void *arg, int64_t b, int64_t e, int worker) {
  coverage *c = arg;
  atomic_fetch_add(&c->calls, 1);
  if (e - b < c->grain && e != c->n) atomic_fetch_add(&c->short_chunks, 1);
  if (worker < 0 || worker >= THREADS) atomic_fetch_add(&c->bad_worker, 1);
  else atomic_fetch_or(&c->workers_seen, 1 << worker);
  for (int64_t i = b; i < e; i++) atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
}

static coverage *coverage_new(int64_t n, int64_t grain) {
  coverage *c = calloc(1, sizeof *c);
  c->n = n;
  c->grain = grain;
  c->hits = calloc((size_t)(n > 0 ? n : 1), 1);
  return c;
}

/* Every index hit exactly `times` times, chunks and workers valid. */
static int coverage_ok(coverage *c, int times) {
  int ok = !atomic_load(&c->short_chunks) && !atomic_load(&c->bad_worker);
  for (int64_t i = 0; ok && i < c->n; i++) ok = c->hits[i] == times;
  return ok;
}

static void coverage_free(coverage *c) {
  free(c->hits);
  free(c);
}

static void test_cover(void) {
  static const struct { int64_t n, grain; } cases[] = {
      {100003, 1000}, {7, 1}, {4, 1}, {1000, 999}, {1000, 0}, {1 << 20, 4096}, {5, 100},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    coverage *c = coverage_new(cases[i].n, cases[i].grain < 1 ? 1 : cases[i].grain);
    nrt_parallel_for(cases[i].n, cases[i].grain, cover_fn, c);
    CHECK(coverage_ok(c, 1));
    coverage_free(c);
  }
  /* inline: n <= grain is one call on worker 0 */
  coverage *c = coverage_new(1000, 1000);
  nrt_parallel_for(1000, 1000, cover_fn, c);
  CHECK(coverage_ok(c, 1) && c->calls == 1 && c->workers_seen == 1);
  nrt_parallel_for(0, 10, cover_fn, c);  /* nothing */
  nrt_parallel_for(-5, 10, cover_fn, c); /* nothing */
  nrt_parallel_for(10, 1, NULL, c);      /* nothing, no crash */
  CHECK(c->calls == 1);
  coverage_free(c);
}

/* parallel_for_each: every index once, in calls of one index each (grain
 * 1 and a count that parallel_for would claim two at a time). */
static void test_for_each(void) {
  static const int64_t counts[] = {1, 2, 5, 18, 33, 1000};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    coverage *c = coverage_new(counts[i], 1);
    nrt_parallel_for_each(counts[i], cover_fn, c);
    CHECK(coverage_ok(c, 1) && c->calls == counts[i]);
    coverage_free(c);
  }
  coverage *c = coverage_new(4, 1);
  nrt_parallel_for_each(0, cover_fn, c);  /* nothing */
  nrt_parallel_for_each(-3, cover_fn, c); /* nothing */
  nrt_parallel_for_each(4, NULL, c);      /* nothing, no crash */
  CHECK(c->calls == 0);
  coverage_free(c);
}

/* fn that runs a whole parallel_for of its own for each chunk */
typedef struct nested {
  coverage *inner[64];
  atomic_int next;
} nested;

static void nested_fn(void *arg, int64_t b, int64_t e, int worker) {
  nested *n = arg;
  (void)worker;
  for (int64_t i = b; i < e; i++) {
    int k = atomic_fetch_add(&n->next, 1);
    nrt_parallel_for(n->inner[k]->n, 10, cover_fn, n->inner[k]); /* runs inline */
  }
}

static void test_nested(void) {
  nested n = {0};
  for (int i = 0; i < 64; i++) n.inner[i] = coverage_new(500, 10);
  nrt_parallel_for(64, 4, nested_fn, &n);
  int ok = n.next == 64;
  for (int i = 0; i < 64; i++) {
    ok &= coverage_ok(n.inner[i], 1) && n.inner[i]->calls == 1;
    coverage_free(n.inner[i]);
  }
  CHECK(ok);
}

static void *caller_main(void *arg) {
  coverage *c = arg;
  for (int r = 0; r < 50; r++) nrt_parallel_for(c->n, 100, cover_fn, c);
  return NULL;
}

/* Host threads and stream workers call at once: each range exactly once
 * per call, nobody waits forever. */
static int parallel_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  coverage *c = t->operands[0].data;
  nrt_parallel_for(c->n, 100, cover_fn, c);
  return 0;
}

static void test_concurrent(void) {
  enum { CALLERS = 3, STREAMS = 3 };
  CHECK_OK(nrt_kernel_register(K_PARALLEL, "parallel", parallel_kernel));
  coverage *host[CALLERS], *dev[STREAMS];
  pthread_t th[CALLERS];
  nrt_stream *s[STREAMS];
  for (int i = 0; i < STREAMS; i++) {
    dev[i] = coverage_new(20000 + i, 100);
    CHECK_OK(nrt_stream_from_pool(0, 0, &s[i]));
    for (int r = 0; r < 50; r++) {
      nrt_task t = {.kernel = K_PARALLEL, .name = "parallel", .n_operands = 1};
      t.operands[0].data = dev[i];
      CHECK_OK(nrt_launch(s[i], &t));
    }
  }
  for (int i = 0; i < CALLERS; i++) {
    host[i] = coverage_new(30000 + i, 100);
    pthread_create(&th[i], NULL, caller_main, host[i]);
  }
  for (int i = 0; i < CALLERS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < STREAMS; i++) CHECK_OK(nrt_stream_synchronize(s[i]));
  for (int i = 0; i < CALLERS; i++) {
    CHECK(coverage_ok(host[i], 50));
    coverage_free(host[i]);
  }
  for (int i = 0; i < STREAMS; i++) {
    CHECK(coverage_ok(dev[i], 50));
    coverage_free(dev[i]);
  }
}

/* ---------------------------------------------------------------- teams */

typedef struct team_probe {
  atomic_int size_seen, bad, arrived, ran;
  atomic_int members_seen; /* bit per member */
  int rounds;              /* barriers to pass */
} team_probe;

/* A central barrier over the team (as compiled kernels' GOMP_barrier):
 * completes only when all `size` members run at once. */
static void team_fn(void *arg, int member, int size) {
  team_probe *p = arg;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&p->size_seen, &expected, size) && expected != size)
    atomic_fetch_add(&p->bad, 1);
  if (member < 0 || member >= size) atomic_fetch_add(&p->bad, 1);
  else atomic_fetch_or(&p->members_seen, 1 << member);
  atomic_fetch_add(&p->ran, 1);
  for (int r = 1; r <= p->rounds; r++) {
    atomic_fetch_add(&p->arrived, 1);
    while (atomic_load(&p->arrived) < r * size) sched_yield(); /* 4 members, 2 cores */
  }
}

static int team_ok(team_probe *p, int want) {
  const int size = atomic_load(&p->size_seen);
  return !atomic_load(&p->bad) && size >= 1 && size <= want && atomic_load(&p->ran) == size &&
         atomic_load(&p->members_seen) == (1 << size) - 1 &&
         atomic_load(&p->arrived) == p->rounds * size;
}

static void test_team(void) {
  int full = 0;
  for (int want = 0; want <= THREADS + 2; want++) {
    for (int r = 0; r < 20; r++) {
      team_probe p = {.rounds = 5};
      nrt_parallel_team(want, team_fn, &p);
      CHECK(team_ok(&p, want < 1 ? 1 : want));
      full += want == THREADS && atomic_load(&p.size_seen) == THREADS;
    }
  }
  /* helpers are idle here and arrive well within the wait: most teams are
   * whole (not all: the OS may run a helper late) */
  CHECK(full > 0);
}

static void team_in_range_fn(void *arg, int64_t b, int64_t e, int worker) {
  (void)worker;
  team_probe *probes = arg;
  for (int64_t i = b; i < e; i++) nrt_parallel_team(THREADS, team_fn, &probes[i]);
}

/* Inside a range region a team is the calling thread alone. */
static void test_team_nested(void) {
  team_probe probes[16] = {{0}};
  for (int i = 0; i < 16; i++) probes[i].rounds = 3;
  nrt_parallel_for(16, 1, team_in_range_fn, probes);
  for (int i = 0; i < 16; i++) CHECK(team_ok(&probes[i], 1) && atomic_load(&probes[i].size_seen) == 1);
}

static void *team_caller_main(void *arg) {
  (void)arg;
  int ok = 1;
  for (int r = 0; r < 200; r++) {
    team_probe p = {.rounds = 2};
    nrt_parallel_team(THREADS, team_fn, &p);
    ok &= team_ok(&p, THREADS);
  }
  return (void *)(intptr_t)ok;
}

/* Teams and ranges from several threads at once: every team is whole in
 * its own right (members all ran, barriers passed), nobody waits forever. */
static void test_team_concurrent(void) {
  enum { TEAMS = 3 };
  pthread_t th[TEAMS];
  for (int i = 0; i < TEAMS; i++) pthread_create(&th[i], NULL, team_caller_main, NULL);
  coverage *c = coverage_new(30000, 100);
  caller_main(c);
  for (int i = 0; i < TEAMS; i++) {
    void *ok;
    pthread_join(th[i], &ok);
    CHECK(ok == (void *)1);
  }
  CHECK(coverage_ok(c, 50));
  coverage_free(c);
}

/* ------------------------------------------------------- host assist */

/* Which thread holds each worker index of a region, and whether a chunk
 * ran on the waiting host, under which MXCSR. */
typedef struct assist_probe {
  pthread_t host;
  _Atomic(pthread_t) holder[THREADS];
  atomic_int held[THREADS];
  atomic_int bad, host_chunks, host_fp_bad;
  atomic_uchar hits[4096];
  unsigned pool_fp;
  pthread_t worker; /* the stream's, worker 0 */
} assist_probe;

static unsigned read_mxcsr(void) {
#if defined(__x86_64__)
  return __builtin_ia32_stmxcsr() & 0xffc0u; /* the control bits, not the flags */
#else
  return 0;
#endif
}

static void assist_fn(void *arg, int64_t b, int64_t e, int worker) {
  assist_probe *p = arg;
  if (worker < 0 || worker >= THREADS) {
    atomic_fetch_add(&p->bad, 1);
    return;
  }
  /* an index is held by one thread at a time */
  const pthread_t self = pthread_self();
  if (atomic_fetch_add(&p->held[worker], 1) == 0) atomic_store(&p->holder[worker], self);
  else atomic_fetch_add(&p->bad, 1);
  if (pthread_equal(self, p->host)) {
    atomic_fetch_add(&p->host_chunks, 1);
    if (read_mxcsr() != p->pool_fp) atomic_fetch_add(&p->host_fp_bad, 1);
  }
  const uint64_t until = nrt_now_ns() + 20000; /* 20 us a chunk: room to join */
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&p->hits[i], 1);
  while (nrt_now_ns() < until) sched_yield();
  atomic_fetch_sub(&p->held[worker], 1);
}

static int assist_kernel(const nrt_task *t, nrt_exec_ctx *ctx) {
  (void)ctx;
  assist_probe *p = t->operands[0].data;
  p->pool_fp = read_mxcsr(); /* the stream worker's */
  p->worker = pthread_self();
  nrt_parallel_for(4096, 64, assist_fn, p);
  return 0;
}

/* The helpers sleep (2 ms idle each time), the host waits in
 * synchronize: it takes seats in the stream's regions, at least once in
 * 100 tries, with the flush-to-zero it set for itself switched off there
 * (the stream's worker, started after the host set it, runs without it
 * too: compute threads do not inherit it). */
static void test_host_assist(void) {
  CHECK_OK(nrt_kernel_register(K_ASSIST, "assist", assist_kernel));
  nrt_testing_set_waiter_runs(0); /* the worker runs it; the host only waits */
  nrt_stream *s;
  CHECK_OK(nrt_stream_from_pool(0, 0, &s));
#if defined(__x86_64__)
  const unsigned own = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr(own | 0x8040); /* FTZ and DAZ on this thread only */
#endif
  int host_ran = 0, ok = 1;
  for (int r = 0; r < 100; r++) {
    assist_probe *p = calloc(1, sizeof *p);
    p->host = pthread_self();
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
    nrt_task t = {.kernel = K_ASSIST, .name = "assist", .n_operands = 1};
    t.operands[0].data = p;
    t.operands[0].ndim = 1; /* large: queued for the worker, never run inline */
    t.operands[0].sizes[0] = 1 << 20;
    t.operands[0].strides[0] = 0;
    CHECK_OK(nrt_launch(s, &t));
    CHECK_OK(nrt_stream_synchronize(s));
    for (int i = 0; i < 4096; i++) ok &= p->hits[i] == 1;
    ok &= !atomic_load(&p->bad) && !atomic_load(&p->host_fp_bad) && p->pool_fp == 0x1f80u;
    ok &= !pthread_equal(p->worker, p->host);
    host_ran += atomic_load(&p->host_chunks) > 0;
    free(p);
  }
#if defined(__x86_64__)
  CHECK((__builtin_ia32_stmxcsr() & 0x8040) == 0x8040); /* its own state is back */
  __builtin_ia32_ldmxcsr(own);
#endif
  nrt_testing_set_waiter_runs(1);
  CHECK(ok);
  CHECK(host_ran > 0);
}

/* A region of 32 units of 2 ms each, sleeping: about 16 ms on 4 seats. */
static void nap_fn(void *arg, int64_t b, int64_t e, int worker) {
  (void)arg, (void)worker;
  for (int64_t i = b; i < e; i++) {
    struct timespec t = {0, 2000000};
    nanosleep(&t, NULL);
  }
}
static int full_kernel(const nrt_task *task, nrt_exec_ctx *ctx) {
  (void)task, (void)ctx;
  nrt_parallel_for(32, 1, nap_fn, NULL);
  return 0;
}

static double thread_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The host arrives 5 ms into a region whose seats the worker and helpers
 * hold: it must poll for its ~50 us and sleep, not poll the region's
 * remaining ~11 ms (stream.c's wait_head checks its deadline on polls that
 * do not look for a region, so an open region cannot keep it polling). */
static void test_host_sleeps_on_full_region(void) {
  CHECK_OK(nrt_kernel_register(K_FULL, "full", full_kernel));
  nrt_stream *s;
  CHECK_OK(nrt_stream_from_pool(0, 0, &s));
  double worst = 0;
  for (int r = 0; r < 3; r++) {
    nrt_task t = {.kernel = K_FULL, .name = "full", .n_operands = 1};
    t.operands[0].ndim = 1; /* large: queued for the worker, never run inline */
    t.operands[0].sizes[0] = 1 << 20;
    CHECK_OK(nrt_launch(s, &t));
    struct timespec lead = {0, 5000000};
    nanosleep(&lead, NULL);
    const double cpu0 = thread_cpu_ms();
    CHECK_OK(nrt_stream_synchronize(s));
    const double used = thread_cpu_ms() - cpu0;
    worst = used > worst ? used : worst;
  }
  if (!(worst < 3.0)) fprintf(stderr, "  host used %.2f ms of CPU waiting on a full region\n", worst);
  CHECK(worst < 3.0);
}

int main(void) {
  setenv("TORCHNEURON_NUM_THREADS", "4", 1);
  setenv("TORCHNEURON_HBM_SIZE", "64M", 1);
  CHECK_OK(nrt_init());
  CHECK(nrt_compute_threads() == THREADS);
  test_cover();
  test_for_each();
  test_nested();
  test_concurrent();
  test_team();
  test_team_nested();
  test_team_concurrent();
  test_host_assist();
  test_host_sleeps_on_full_region();
  return CHECK_SUMMARY();
}
