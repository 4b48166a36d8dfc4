"""Compiled kernels run their OpenMP regions on the device's compute pool.

Inductor's C++ kernels are OpenMP code: ``#pragma omp parallel`` around
``#pragma omp for`` loops, ``#pragma omp single``, and per-thread reduction
buffers indexed by ``omp_get_thread_num()`` (torch/_inductor/codegen/
cpp.py, ``WorkSharing`` and ``LoopLevel.lines``).  Built with ``-fopenmp``,
such a kernel runs on libgomp's thread team, a second set of threads beside
the compute pool that eager kernels and extern calls (GEMM, convolution)
use: on a machine whose cores the pool fills, the two sets take turns on the
same cores (and libgomp's threads spin for a while after each region).

gcc lowers those constructs to a handful of calls: ``GOMP_parallel`` (the
region, with the outlined body), ``GOMP_barrier`` (the end of a ``for`` or
``single`` without ``nowait``), ``GOMP_single_start``, and
``omp_get_num_threads`` / ``omp_get_thread_num`` (a static schedule is
computed inline from those two).  The kernel library defines them itself,
with hidden visibility, so its calls bind to these definitions and never to
libgomp's: a region becomes a team of the compute pool
(``nrt_parallel_team``, runtime/src/pool.c), which the library reaches
through a table the launch module hands it at load time
(``neuron_bind_team``; the library links nothing of torch_neuronx).

Only those constructs have a definition here.  A kernel using anything else
(a dynamic schedule, ``critical``, ``atomic``, tasks: Inductor's C++ code
generation writes none of them in torch 2.13, its GEMM templates a static
``schedule`` only) is built without this file and keeps libgomp
(``supports``), so an unknown construct can never meet a half-emulated
runtime.
"""
from __future__ import annotations

import re

# The `#pragma omp` forms gcc lowers to the calls defined below (static
# schedules are computed inline; `simd` makes no call).
_ALLOWED = re.compile(
    r"""^(parallel(\s+num_threads\(\d+\))?
        |for(\s+(collapse\(\d+\)|simd(\s+simdlen\(\d+\))?|schedule\(static(,\s*\d+)?\)|nowait))*
        |simd(\s+simdlen\(\d+\))?
        |single(\s+nowait)?
        |barrier)$""",
    re.VERBOSE,
)
_PRAGMA = re.compile(r"^\s*#\s*pragma\s+omp\s+(.*?)\s*$", re.MULTILINE)


def supports(src: str) -> bool:
    """Whether every OpenMP construct of the kernel source is one this
    file implements."""
    return all(_ALLOWED.match(m.group(1)) for m in _PRAGMA.finditer(src))


# Placed after cpp_prefix.h (which includes <omp.h>: the definitions must
# match its declarations, __GOMP_NOTHROW included).
SOURCE = r"""
// torch_neuronx: OpenMP regions as compute-pool teams (torch_neuronx/_inductor/omp_team.py).
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>
// Kernels may write large outputs with non-temporal stores (cache_hints.py),
// which are weakly ordered: a member fences its own before the others may
// read what it wrote, when it finishes its share of a region and before a
// barrier (the entry point fences the calling thread after the kernel).
#define NEURON_TEAM_FENCES 1
namespace neuron_team {
static inline void fence_streams() { _mm_sfence(); }
// What the launch module hands the library (torch_neuronx/csrc/compiled.cpp, TeamApi).
struct Api {
  uint64_t version;
  void (*team)(int want, void (*member)(void* arg, int member, int size), void* arg);
  int (*threads)();
};
constexpr uint64_t kApiVersion = 1;
static const Api* api = nullptr;
struct Region {
  void (*body)(void*);
  void* data;
  std::atomic<int> arrived{0};
  std::atomic<unsigned> phase{0};
  std::atomic<int> sleepers{0};
  std::atomic<unsigned> singles{0};
};
// A barrier waiter polls for up to kBarrierPollNs (from kBarrierPollAloneNs
// on, yielding its core every 64 polls), then sleeps on the phase word.
// Polling: a member that joined late (a helper woken from sleep, tens of
// microseconds on a VM) reaches the barrier after the others, and a sleeper
// then costs another wake-up; with ~100 us of pause-polls and then a futex,
// a compiled LayerNorm over 1024x256 took ~285 us per call for 45 us of
// work (~160-220 us now).  Yielding and the bound: with more runnable
// threads than cores the member everyone waits for, or the host thread,
// may be the one a poller keeps off its core (polling without yielding
// for 300 us made the MLP example's compiled step 15% slower; unbounded
// polling cost a scheduler slice, milliseconds, per barrier).
constexpr long kBarrierPollNs = 300000, kBarrierPollAloneNs = 20000;
static long monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}
static void futex_wait(std::atomic<unsigned>* word, unsigned seen) {
  syscall(SYS_futex, reinterpret_cast<unsigned*>(word), FUTEX_WAIT_PRIVATE, seen, nullptr,
          nullptr, 0);
}
static void futex_wake_all(std::atomic<unsigned>* word) {
  syscall(SYS_futex, reinterpret_cast<unsigned*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}
// The running member's region (null outside one), its number, the team's
// size, and the `single` constructs it has met.
static thread_local Region* region = nullptr;
static thread_local int member = 0;
static thread_local int size = 1;
static thread_local unsigned singles_met = 0;
static void run_member(void* arg, int m, int n) {
  Region* const outer = region;
  const int outer_member = member, outer_size = size;
  const unsigned outer_singles = singles_met;
  region = static_cast<Region*>(arg);
  member = m;
  size = n;
  singles_met = 0;
  region->body(region->data);
  fence_streams();
  region = outer;
  member = outer_member;
  size = outer_size;
  singles_met = outer_singles;
}
}  // namespace neuron_team

extern "C" {
__attribute__((visibility("default"))) int neuron_bind_team(const void* table) {
  const auto* t = static_cast<const neuron_team::Api*>(table);
  if (t == nullptr || t->version != neuron_team::kApiVersion) return -1;
  neuron_team::api = t;
  return 0;
}

__attribute__((visibility("hidden"))) void GOMP_parallel(void (*body)(void*), void* data,
                                                         unsigned num_threads, unsigned flags) {
  (void)flags;  // proc_bind: the pool's threads are what they are
  using namespace neuron_team;
  Region r;
  r.body = body;
  r.data = data;
  // nested regions run on the calling thread alone (OpenMP's default)
  const int want = region != nullptr || api == nullptr ? 1
                   : num_threads != 0                   ? static_cast<int>(num_threads)
                                                        : api->threads();
  if (want <= 1) {
    run_member(&r, 0, 1);
    return;
  }
  api->team(want, run_member, &r);
}

// A central barrier: the last to arrive resets the count, then opens the
// phase and wakes the sleepers.  (seq_cst on phase and sleepers: either the
// opener sees a sleeper, or the sleeper's futex_wait sees the new phase.)
__attribute__((visibility("hidden"))) void GOMP_barrier(void) {
  using namespace neuron_team;
  fence_streams();
  if (region == nullptr || size == 1) return;
  Region* const r = region;
  const unsigned phase = r->phase.load();
  if (r->arrived.fetch_add(1) == size - 1) {
    r->arrived.store(0);
    r->phase.store(phase + 1);
    if (r->sleepers.load() != 0) futex_wake_all(&r->phase);
    return;
  }
  long start = 0;
  for (unsigned i = 1;; ++i) {
    if (r->phase.load(std::memory_order_acquire) != phase) return;
    if ((i & 63) == 0) {
      const long now = monotonic_ns();
      if (start == 0) start = now;
      const long waited = now - start;
      if (waited > kBarrierPollNs) break;
      if (waited > kBarrierPollAloneNs) sched_yield();
    }
    __builtin_ia32_pause();
  }
  r->sleepers.fetch_add(1);
  while (r->phase.load() == phase) futex_wait(&r->phase, phase);
  r->sleepers.fetch_sub(1);
}

// The first member to reach its k-th `single` of the region runs it.
__attribute__((visibility("hidden"))) bool GOMP_single_start(void) {
  using namespace neuron_team;
  if (region == nullptr || size == 1) return true;
  unsigned k = singles_met++;
  return region->singles.compare_exchange_strong(k, k + 1, std::memory_order_acq_rel);
}

__attribute__((visibility("hidden"))) int omp_get_thread_num(void) __GOMP_NOTHROW {
  return neuron_team::region != nullptr ? neuron_team::member : 0;
}

__attribute__((visibility("hidden"))) int omp_get_num_threads(void) __GOMP_NOTHROW {
  return neuron_team::region != nullptr ? neuron_team::size : 1;
}

__attribute__((visibility("hidden"))) int omp_get_max_threads(void) __GOMP_NOTHROW {
  return neuron_team::api != nullptr ? neuron_team::api->threads() : 1;
}
}  // extern "C"
"""
