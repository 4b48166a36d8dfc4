/* pool.c — the compute pool the engines split work across.
 *
 * TORCHNEURON_NUM_THREADS threads in all: the caller is worker 0 and
 * n-1 helper threads (started at the first parallel region) are workers
 * 1..n-1.  Chunks (at least grain long, except the last; about
 * POOL_CHUNKS_PER_THREAD per thread) are handed out by an atomic counter.
 * Several chunks per thread rather than one: on a machine whose cores the
 * pool fills (and shares with the launching thread, other processes), a
 * helper that wakes or is scheduled late used to leave its whole share
 * for the caller to do after its own -- twice the time; now the others
 * take what it has not claimed.  A worker may so call fn more than once in
 * a region; every kernel's work is a function of the range alone.  One region runs at a time; a caller that finds the
 * pool busy (another stream's kernel), or that is already inside a region,
 * runs its whole range inline as worker 0, so nothing can deadlock.  Worker
 * indexes are therefore unique within one call, not across concurrent
 * calls: per-worker scratch belongs to the call.
 *
 * The caller never waits for a helper that has not shown up: a helper
 * joins a region (job.joined) and then checks that it is still open; the
 * caller closes it once every chunk is claimed and waits only for helpers
 * that joined.  Both sides store then load (seq_cst), so either the caller
 * sees the helper or the helper sees the region closed and touches
 * nothing.  On a loaded machine the caller just does the work itself.
 *
 * Latency: kernels come in bursts, so a helper polls `generation` for a
 * short while after each region before it sleeps, and the caller polls
 * for joined helpers to finish before it sleeps.  The polls yield the core
 * every 64 rounds (nrt_spin_yield), so a spinner never holds off a
 * runnable thread for its whole spin.  Generation changes and
 * the sleeper count are both under wake_lock, so a wake-up is never lost.
 *
 * Team regions (nrt_parallel_team, at the end) share the helpers, the
 * region lock and the wake-up, but run one member per thread at once.
 *
 * A host thread waiting for a stream (nrt_pool_assist, from stream.c's
 * wait) joins an open region as a worker too.  On a machine whose cores
 * the pool fills, the waiting host thread is a third busy thread: it
 * spin-waits on one core while the stream's worker and a helper need both,
 * and a helper woken from its futex waits for a core (a compiled 32768-
 * element GELU synchronised after each call: 124 us against Inductor CPU's
 * 53, most of it threads switching).  So worker indexes are seats, claimed
 * per region (job.seats: the caller holds 0, helpers and assisting hosts
 * take 1..n-1 and leave when none is left) rather than fixed per thread;
 * a region's participants are whoever arrives first, and every thread
 * joins by the same protocol (joined, then closed). */
#include "internal.h"

#define SPIN_NS 30000u
#define POOL_CHUNKS_PER_THREAD 8

static int n_threads = 1;
static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER; /* one region */
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int helpers; /* threads in the pool, caller included; under region_lock */
static _Atomic uint64_t generation; /* written under wake_lock */
static atomic_int caller_cpu = -1;  /* where the last region's caller ran (spin-waits and CPU sharing) */
static int sleeping_helpers;        /* under wake_lock */
static uint64_t wake_asked_ns;      /* under wake_lock: the last wake-up of sleeping helpers (nrt_sleep_gap) */
static _Thread_local int in_region;

static struct {
  nrt_range_fn fn;   /* a range region (nrt_parallel_for), or */
  nrt_team_fn team;  /* a team region (nrt_parallel_team)     */
  void *arg;
  int64_t n, chunk;
  _Atomic int64_t next;
  int team_want;
  atomic_int members;   /* team seats taken, the caller's included; -1: closed */
  atomic_int team_size; /* 0 until the caller fixes it */
  atomic_int seats;  /* range regions: worker indexes handed out, the caller's included */
  atomic_int joined; /* helpers (or assisting hosts) inside the current region */
  atomic_int closed; /* every chunk is claimed: no one may join */
} job = {.closed = 1};

static cpu_set_t allowed; /* the process's CPUs when the pool started (pinning) */
static int n_allowed;

void nrt_pool_init(int threads) {
  n_threads = threads > 0 ? threads : 1;
  n_allowed = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
}

/* Compute slot i (0: a stream's worker, the caller of its regions;
 * 1..n-1: the helpers) starts on the i-th CPU the process may use, modulo
 * their number, and with TORCHNEURON_PIN_THREADS=1 stays there.  A new
 * thread was often started, or a helper woken from its futex, on the CPU
 * of the thread that created or woke it; a parallel product then ran on
 * one core until the load balancer moved it, tens of milliseconds later:
 * right after start-up, 256^3 products called one at a time took 220 us
 * instead of 110 us for their first hundred calls in 5 of 16 runs, and in
 * none of 16 when each thread first moves to its own CPU.  Unpinned, the
 * thread then takes back every CPU the process may use (another stream's
 * worker, another process on the machine: the scheduler stays free). */
void nrt_place_slot(int slot) {
  if (n_allowed <= 0) return;
  int want = slot % n_allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (want-- == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one); /* moves it there now */
      if (!nrt_cfg.pin_threads) pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
      return;
    }
  }
}

int nrt_move_off_cpu(int cpu) {
  if (cpu < 0 || nrt_cfg.pin_threads || nrt_current_cpu() != cpu) return 0;
  cpu_set_t own, others;
  if (pthread_getaffinity_np(pthread_self(), sizeof own, &own) != 0) return 0;
  others = own;
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) == 0 || pthread_setaffinity_np(pthread_self(), sizeof others, &others) != 0)
    return 0;
  pthread_setaffinity_np(pthread_self(), sizeof own, &own);
  return 1;
}

int nrt_compute_threads(void) {
  nrt_ensure_init();
  return n_threads;
}

static void run_chunks(int worker) {
  int64_t b;
  while ((b = atomic_fetch_add(&job.next, job.chunk)) < job.n) {
    int64_t e = job.n - b > job.chunk ? b + job.chunk : job.n;
    job.fn(job.arg, b, e, worker);
  }
}

/* Polls `done` for up to ns nanoseconds; returns its last answer.  A
 * helper passes the CPU of the thread it waits for (part_from, else NULL)
 * to move off it (internal.h, spin-waits and CPU sharing). */
static int spin_for(uint64_t ns, int (*done)(void *), void *arg, atomic_int *part_from) {
  uint64_t until = 0;
  int moved = 0;
  for (unsigned i = 0;; i++) {
    if (done(arg)) return 1;
    if ((i & 63) == 63) {
      uint64_t now = nrt_now_ns();
      if (!until) until = now + ns;
      else if (now > until) return done(arg);
      if (part_from) nrt_spin_step(&moved, part_from);
      else nrt_spin_yield();
    }
    nrt_cpu_relax();
  }
}

static int spin_until(int (*done)(void *), void *arg) { return spin_for(SPIN_NS, done, arg, NULL); }

static int generation_moved(void *seen) {
  return atomic_load(&generation) != *(uint64_t *)seen;
}

static int helpers_done(void *unused) {
  (void)unused;
  return atomic_load(&job.joined) == 0;
}

/* A helper takes a free seat of the team being formed, if any, and runs
 * its member once the caller has fixed the team's size. */
static void join_team(void) {
  int seat = atomic_load(&job.members);
  do {
    if (seat < 0 || seat >= job.team_want) return; /* closed, or full */
  } while (!atomic_compare_exchange_weak(&job.members, &seat, seat + 1));
  int size;
  for (unsigned i = 1; (size = atomic_load(&job.team_size)) == 0; i++) {
    if ((i & 63) == 0) nrt_spin_yield();
    nrt_cpu_relax();
  }
  job.team(job.arg, seat, size);
}

/* Joins the current region, if one is open, as a helper or an assisting
 * host: enter (joined), then check that it is still open, take a seat and
 * work; leave (the last one out of a closed region tells the caller). */
static void join_region(void) {
  atomic_fetch_add(&job.joined, 1);
  if (!atomic_load(&job.closed)) {
    if (job.team) {
      join_team();
    } else {
      const int seat = atomic_fetch_add(&job.seats, 1);
      if (seat < helpers) run_chunks(seat);
    }
  }
  if (atomic_fetch_sub(&job.joined, 1) == 1 && atomic_load(&job.closed)) {
    pthread_mutex_lock(&wake_lock);
    pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&wake_lock);
  }
}

static void *helper_main(void *arg) {
  int slot = (int)(intptr_t)arg;
  uint64_t seen = 0;
  pthread_setname_np(pthread_self(), "neuron-pool"); /* for top, perf and gdb */
  nrt_place_slot(slot);
  nrt_fp_state_enter(); /* for good: a compute thread */
  in_region = 1; /* a kernel's nested parallel_for runs inline */
  uint64_t budget = SPIN_NS; /* internal.h, spin budgets */
  for (;;) {
    if (!spin_for(budget, generation_moved, &seen, &caller_cpu)) {
      const uint64_t slept = nrt_now_ns();
      pthread_mutex_lock(&wake_lock);
      sleeping_helpers++;
      while (atomic_load(&generation) == seen) pthread_cond_wait(&wake_cv, &wake_lock);
      sleeping_helpers--;
      const uint64_t asked = wake_asked_ns;
      pthread_mutex_unlock(&wake_lock);
      budget = nrt_spin_budget_after_sleep(budget, SPIN_NS, nrt_sleep_gap(slept, asked, nrt_now_ns()));
    }
    seen = atomic_load(&generation);
    join_region();
  }
  return NULL;
}

int nrt_pool_assist(void) {
  if (in_region || atomic_load(&job.closed)) return 0;
  in_region = 1; /* its kernels' nested parallel_for runs inline, as on a helper */
  const unsigned own = nrt_fp_state_enter();
  join_region();
  nrt_fp_state_leave(own);
  in_region = 0;
  return 1;
}

/* Opens the region that job now describes to the helpers. */
static void wake_helpers(void) {
  nrt_publish_cpu(&caller_cpu);
  pthread_mutex_lock(&wake_lock);
  atomic_fetch_add(&generation, 1);
  if (sleeping_helpers) {
    wake_asked_ns = nrt_now_ns();
    pthread_cond_broadcast(&wake_cv);
  }
  pthread_mutex_unlock(&wake_lock);
}

/* After job.closed: returns once no helper is inside the region. */
static void wait_for_helpers(void) {
  if (spin_until(helpers_done, NULL)) return;
  pthread_mutex_lock(&wake_lock);
  while (!helpers_done(NULL)) pthread_cond_wait(&done_cv, &wake_lock);
  pthread_mutex_unlock(&wake_lock);
}

/* Starts the helpers; returns how many threads the pool has, caller
 * included (fewer than asked if the OS refuses threads). */
static int start_helpers(void) {
  for (int i = 1; i < n_threads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, helper_main, (void *)(intptr_t)i) != 0) return i;
    pthread_detach(t);
  }
  return n_threads;
}

/* One range region: fn over [0, n) in claims of `chunk`. */
static void range_region(int64_t n, int64_t chunk, nrt_range_fn fn, void *arg) {
  nrt_ensure_init();
  if (n <= chunk || n_threads == 1 || in_region || pthread_mutex_trylock(&region_lock) != 0) {
    fn(arg, 0, n, 0);
    return;
  }
  if (!helpers) helpers = start_helpers();
  job.fn = fn;
  job.team = NULL;
  job.arg = arg;
  job.n = n;
  job.chunk = chunk;
  atomic_store(&job.next, 0);
  atomic_store(&job.seats, 1); /* seat 0: the caller */
  atomic_store(&job.closed, 0);
  if (helpers > 1) wake_helpers();
  in_region = 1;
  run_chunks(0);
  in_region = 0;
  atomic_store(&job.closed, 1);
  wait_for_helpers();
  pthread_mutex_unlock(&region_lock);
}

void nrt_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *arg) {
  if (n <= 0 || !fn) return;
  if (grain < 1) grain = 1;
  nrt_ensure_init();
  /* several chunks per thread: a thread the OS runs late costs only the
   * chunks it has not claimed, which the others take */
  const int64_t pieces = (int64_t)(n_threads > 1 ? n_threads : 1) * POOL_CHUNKS_PER_THREAD;
  const int64_t per = n / pieces + (n % pieces != 0);
  range_region(n, per > grain ? per : grain, fn, arg);
}

/* Claims of one index: a few heavy items finish within one item of each
 * other.  Claims of ceil(n / pieces) did not: 18 GEMM row blocks on 2
 * threads went as 9 claims of 2, 5 for one thread and 4 for the other
 * (2048x512 @ 512x1376 float32: 170 against 186 GFLOP/s balanced). */
void nrt_parallel_for_each(int64_t n, nrt_range_fn fn, void *arg) {
  if (n <= 0 || !fn) return;
  range_region(n, 1, fn, arg);
}

/* Team regions.  A member may wait for the others, so every member must be
 * running: seats go to the helpers that arrive while the caller waits (up
 * to TEAM_WAIT_NS, which a spinning helper beats by far and a sleeping one
 * by its wake-up time on an idle core; on a busy machine a helper that is
 * not running is not waited for), then the caller closes the seats (members = -1:
 * a later helper leaves) and publishes the size.  A helper in the team is
 * one of this pool's, which the region lock keeps from any other region,
 * so it never waits for work of its own: no deadlock. */
#define TEAM_WAIT_NS 50000u

static int team_full(void *unused) {
  (void)unused;
  return atomic_load(&job.members) >= job.team_want;
}

void nrt_parallel_team(int want, nrt_team_fn fn, void *arg) {
  if (!fn) return;
  nrt_ensure_init();
  if (want > n_threads) want = n_threads;
  if (want <= 1 || in_region || pthread_mutex_trylock(&region_lock) != 0) {
    fn(arg, 0, 1);
    return;
  }
  if (!helpers) helpers = start_helpers();
  if (want > helpers) want = helpers;
  if (want <= 1) {
    pthread_mutex_unlock(&region_lock);
    fn(arg, 0, 1);
    return;
  }
  job.fn = NULL;
  job.team = fn;
  job.arg = arg;
  job.team_want = want;
  atomic_store(&job.members, 1); /* seat 0: the caller */
  atomic_store(&job.team_size, 0);
  atomic_store(&job.closed, 0);
  wake_helpers();
  spin_for(TEAM_WAIT_NS, team_full, NULL, NULL);
  const int size = atomic_exchange(&job.members, -1);
  atomic_store(&job.team_size, size);
  in_region = 1;
  fn(arg, 0, size);
  in_region = 0;
  atomic_store(&job.closed, 1);
  wait_for_helpers();
  job.team = NULL;
  pthread_mutex_unlock(&region_lock);
}
