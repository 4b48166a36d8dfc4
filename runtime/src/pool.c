/* pool.c — the compute pool the engines split work across.
 *
 * TORCHNEURON_NUM_THREADS threads in all: the caller is worker 0 and
 * n-1 helper threads (started at the first parallel region) are workers
 * 1..n-1.  Chunks are handed out by an atomic counter.  One region runs at
 * a time; a caller that finds the pool busy (another stream's kernel), or
 * that is already inside a region, runs its whole range inline as worker 0,
 * so nothing can deadlock.  Worker indexes are therefore unique within one
 * call, not across concurrent calls: per-worker scratch belongs to the call. */
#include <time.h>

#include "internal.h"

static int n_threads = 1;
static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER; /* one region */
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int helpers_started;
static uint64_t generation;
static _Thread_local int in_region;

static struct {
  nrt_range_fn fn;
  void *arg;
  int64_t n, chunk;
  _Atomic int64_t next;
  atomic_int busy_helpers;
} job;

void nrt_pool_init(int threads) { n_threads = threads > 0 ? threads : 1; }
int nrt_compute_threads(void) {
  nrt_ensure_init();
  return n_threads;
}

static void run_chunks(int worker) {
  int64_t b;
  while ((b = atomic_fetch_add(&job.next, job.chunk)) < job.n) {
    int64_t e = b + job.chunk < job.n ? b + job.chunk : job.n;
    job.fn(job.arg, b, e, worker);
  }
}

static void *helper_main(void *arg) {
  int worker = (int)(intptr_t)arg;
  uint64_t seen = 0;
  in_region = 1; /* a kernel's nested parallel_for runs inline */
  for (;;) {
    pthread_mutex_lock(&wake_lock);
    while (generation == seen) pthread_cond_wait(&wake_cv, &wake_lock);
    seen = generation;
    pthread_mutex_unlock(&wake_lock);
    run_chunks(worker);
    if (atomic_fetch_sub(&job.busy_helpers, 1) == 1) {
      pthread_mutex_lock(&wake_lock);
      pthread_cond_signal(&done_cv);
      pthread_mutex_unlock(&wake_lock);
    }
  }
  return NULL;
}

static int start_helpers(void) {
  for (int i = 1; i < n_threads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, helper_main, (void *)(intptr_t)i) != 0) return i;
    pthread_detach(t);
  }
  return n_threads;
}

void nrt_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *arg) {
  if (n <= 0 || !fn) return;
  if (grain < 1) grain = 1;
  nrt_ensure_init();
  if (n <= grain || n_threads == 1 || in_region || pthread_mutex_trylock(&region_lock) != 0) {
    fn(arg, 0, n, 0);
    return;
  }
  static int helpers; /* how many started, guarded by region_lock */
  if (!helpers_started) {
    helpers = start_helpers();
    helpers_started = 1;
  }
  int64_t per = (n + helpers - 1) / helpers;
  job.fn = fn;
  job.arg = arg;
  job.n = n;
  job.chunk = per > grain ? per : grain;
  atomic_store(&job.next, 0);
  atomic_store(&job.busy_helpers, helpers - 1);
  if (helpers > 1) {
    pthread_mutex_lock(&wake_lock);
    generation++;
    pthread_cond_broadcast(&wake_cv);
    pthread_mutex_unlock(&wake_lock);
  }
  in_region = 1;
  run_chunks(0);
  in_region = 0;
  pthread_mutex_lock(&wake_lock);
  while (atomic_load(&job.busy_helpers) > 0) pthread_cond_wait(&done_cv, &wake_lock);
  pthread_mutex_unlock(&wake_lock);
  pthread_mutex_unlock(&region_lock);
}
