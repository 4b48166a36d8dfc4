/* comm.c — the shared-memory collective engine behind the `neuron` c10d
 * backend (issue 6).  See neuron_comm.h for the API.
 *
 * Design (the why):
 *  - Transport: one POSIX shm segment per job, name "/torch_neuronx-comm-<key>"
 *    where key is a random token rank 0 puts in the c10d store, so two jobs
 *    (or two process groups of one job) never meet.  Created O_EXCL with mode
 *    0600 and unlinked by every rank as soon as the attach count reaches the
 *    world size (and by any rank whose rendezvous times out), so nothing is
 *    left in /dev/shm once the job has started, even if a rank crashes later:
 *    the memory goes away with the last mapping.
 *  - Layout: a header (magic, sizes, attach count, abort word, pids), one
 *    128-byte control line per rank (its step counter and the descriptor of
 *    its current collective) and two data buffers of chunk_bytes per rank.
 *  - Protocol: every collective is a sequence of "steps".  In a step each rank
 *    writes its contribution into its buffer of parity (step & 1), publishes
 *    its step counter (release store + futex wake), waits until every rank's
 *    counter reached the step (acquire), then reads the others' buffers.  A
 *    rank publishes step s+1 only after it finished reading in step s, so
 *    when a writer has passed the wait of step s+1 nobody reads its buffer of
 *    step s any more: double buffering makes one wait per step enough.
 *  - Algorithms: direct ones over the shared buffers (every rank reads the
 *    others' buffers; on one host that is the ring's traffic without its
 *    latency).  all_reduce: step A every rank writes a chunk, then each rank
 *    reduces its 1/world part from all ranks in rank order into its other
 *    buffer; step B every rank copies all reduced parts.  Small chunks
 *    (<= 32 KiB) and 2 ranks skip step B: every rank reduces the whole chunk
 *    itself, in the same order, so all ranks get the same bits (per element
 *    of the chunk, direct moves (w+1) elements and one step, the split
 *    3 + 1/w and two: for w = 2 direct moves less).  reduce_scatter: each
 *    rank writes its world pieces, rank r reduces piece r.  all_gather /
 *    broadcast: one step per chunk, plain copies.  all_to_all: each rank's
 *    buffer holds world pieces of chunk/world bytes, piece j for rank j; the
 *    step count (the largest block of any rank, in pieces) is agreed first
 *    in the same step that compares the descriptors.
 *  - Arithmetic: rank order, float16/bfloat16 accumulated in float32 and
 *    rounded once; integers wrap (unsigned arithmetic); min/max propagate NaN;
 *    bool: sum/avg/max = or, product/min = and (what NCCL does).
 *  - Point to point: one channel per ordered pair of ranks (its own two
 *    slots of chunk/4 bytes and posted/acked counters), outside the
 *    collective step sequence, so a send/recv pair involves only its two
 *    ranks.  A sender waits only for a free slot (the message is buffered),
 *    so small sends never block on the receiver.  A batch (batch_isend_irecv)
 *    advances all its operations piece by piece in one polling loop, so
 *    ring exchanges of any size cannot deadlock; operations on the same
 *    (peer, direction) keep their order.
 *  - Faults: every wait has a deadline; while waiting it also checks the
 *    shared abort word and whether the awaited rank's process still exists,
 *    so a dead rank is reported at once and a rank that never arrives after
 *    the timeout.  The first rank to fail sets the abort word, the others
 *    stop waiting for it.  Each collective's descriptor (kind, dtype, count,
 *    op, root) is compared across ranks in its first step, so mismatched
 *    calls fail with a message instead of corrupting data.
 *  - Waiting: a short spin, then futex waits of at most 2 ms (the machine is
 *    oversubscribed: ranks must sleep, not spin). */
#include "neuron_comm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/dtype_convert.h"

#define NC_MAGIC 0x4e434f4d4d763031ull /* "NCOMMv01" */
#define NC_MAX_WORLD 1024
#define NC_HDR_BYTES 8192u             /* header + pids */
#define NC_CTL_BYTES 128u
#define NC_DEFAULT_CHUNK ((size_t)1 << 20)
#define NC_DIRECT_BYTES ((size_t)32 << 10)
#define NC_BLOCK 256

enum { NC_BARRIER = 1, NC_ALL_REDUCE, NC_BROADCAST, NC_ALL_GATHER, NC_REDUCE_SCATTER,
       NC_ALL_TO_ALL, NC_KINDS, NC_SEND = NC_KINDS, NC_RECV, NC_P2P_BATCH };
static const char *const nc_names[] = {"?", "barrier", "all_reduce", "broadcast", "all_gather",
                                       "reduce_scatter", "all_to_all", "send", "recv",
                                       "batch_isend_irecv"};

typedef struct nc_header {
  _Atomic uint64_t magic;
  uint64_t total_bytes;
  uint64_t chunk_bytes;
  uint32_t world;
  _Atomic uint32_t attached;
  _Atomic uint32_t aborted; /* 0, or 1 + the rank that failed first */
  _Atomic int32_t pids[];   /* world entries, within NC_HDR_BYTES */
} nc_header;

typedef struct nc_desc {
  uint32_t kind, dtype, op, root;
  uint64_t count;
} nc_desc;

typedef struct nc_ctl {
  _Atomic uint32_t seq;
  uint32_t pad;
  nc_desc desc[2];
} nc_ctl;

typedef struct nc_chan {
  _Atomic uint32_t posted, acked;
  uint64_t msg_bytes[2];
} nc_chan;

struct ncomm {
  int rank, world;
  size_t p2p_chunk;
  uint32_t *p2p_sent, *p2p_recvd; /* per peer: pieces sent to / received from */
  int64_t timeout_ms;
  size_t chunk, map_bytes;
  unsigned char *base;
  nc_header *hdr;
  uint32_t seq;    /* last step this rank published */
  int broken;
  const char *cur; /* name of the running collective */
  char err[512];
};

/* ------------------------------------------------------------- helpers */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void fmt(char *buf, size_t len, const char *f, ...) {
  if (!buf || !len) return;
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, len, f, ap);
  va_end(ap);
}

static int nc_fail(ncomm *c, const char *f, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, f);
  vsnprintf(msg, sizeof msg, f, ap);
  va_end(ap);
  snprintf(c->err, sizeof c->err, "%s: %s", c->cur ? c->cur : "neuron comm", msg);
  c->broken = 1;
  uint32_t zero = 0;
  atomic_compare_exchange_strong(&c->hdr->aborted, &zero, (uint32_t)c->rank + 1);
  return -1;
}

/* A bad argument: fails this call only (nothing was published, the other
 * ranks are not affected and the communicator stays usable). */
static int nc_bad_arg(ncomm *c, const char *f, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, f);
  vsnprintf(msg, sizeof msg, f, ap);
  va_end(ap);
  snprintf(c->err, sizeof c->err, "%s: %s", c->cur ? c->cur : "neuron comm", msg);
  return -1;
}

static nc_ctl *ctl(const ncomm *c, int r) {
  return (nc_ctl *)(c->base + NC_HDR_BYTES + (size_t)r * NC_CTL_BYTES);
}

static unsigned char *buf(const ncomm *c, int r, uint32_t step) {
  size_t data = NC_HDR_BYTES + (size_t)c->world * NC_CTL_BYTES;
  return c->base + data + ((size_t)r * 2 + (step & 1u)) * c->chunk;
}

static size_t data_bytes(int world, size_t chunk) { return (size_t)world * 2 * chunk; }
static size_t p2p_chunk_of(size_t chunk) { return ((chunk / 4) + 63) & ~(size_t)63; }

static nc_chan *chan(const ncomm *c, int from, int to) {
  size_t off = NC_HDR_BYTES + (size_t)c->world * NC_CTL_BYTES + data_bytes(c->world, c->chunk);
  return (nc_chan *)(c->base + off + ((size_t)from * (size_t)c->world + (size_t)to) * NC_CTL_BYTES);
}

static unsigned char *chan_buf(const ncomm *c, int from, int to, uint32_t piece) {
  size_t off = NC_HDR_BYTES + (size_t)c->world * NC_CTL_BYTES + data_bytes(c->world, c->chunk) +
               (size_t)c->world * (size_t)c->world * NC_CTL_BYTES;
  size_t idx = ((size_t)from * (size_t)c->world + (size_t)to) * 2 + (piece & 1u);
  return c->base + off + idx * c->p2p_chunk;
}

static void futex_wake_all(_Atomic uint32_t *addr) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_for(_Atomic uint32_t *addr, uint32_t seen, long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* Gone, or a zombie nobody reaped yet (/proc/<pid>/stat state Z or X). */
static int pid_dead(int32_t pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = 0;
  const char *p = strrchr(line, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Waits until every other rank published step `step`. */
static int wait_all(ncomm *c, uint32_t step) {
  int64_t start = now_ms(), deadline = start + c->timeout_ms, next_pid_check = start + 50;
  for (int r = 0; r < c->world; ++r) {
    if (r == c->rank) continue;
    _Atomic uint32_t *s = &ctl(c, r)->seq;
    for (long iter = 0;; ++iter) {
      uint32_t v = atomic_load_explicit(s, memory_order_acquire);
      if ((int32_t)(v - step) >= 0) break;
      if (iter < 256) continue;
      uint32_t ab = atomic_load_explicit(&c->hdr->aborted, memory_order_acquire);
      /* A rank aborts after it posted this step (nc_fail comes after its
       * seq store): when it has, the step is complete, and the descriptors
       * say why it failed ("mismatched ..." on every rank, not "aborted"
       * on the ones that were still waiting when it compared first). */
      if (ab && (int32_t)(atomic_load_explicit(s, memory_order_acquire) - step) >= 0) break;
      if (ab) {
        c->broken = 1;
        snprintf(c->err, sizeof c->err, "%s: aborted because rank %u failed", c->cur,
                 ab - 1);
        return -1;
      }
      int64_t t = now_ms();
      if (t >= next_pid_check) {
        next_pid_check = t + 50;
        if (pid_dead(atomic_load_explicit(&c->hdr->pids[r], memory_order_relaxed)))
          return nc_fail(c, "rank %d (pid %d) died", r, (int)c->hdr->pids[r]);
      }
      if (t > deadline)
        return nc_fail(c, "timed out after %lld ms waiting for rank %d",
                       (long long)c->timeout_ms, r);
      futex_wait_for(s, v, 2000);
    }
  }
  return 0;
}

/* One step: the caller has written its buffer of parity (c->seq + 1);
 * publishes it with the descriptor and waits for every rank.  check: compare
 * the descriptors (first step of a collective). */
static int step(ncomm *c, const nc_desc *d, int check) {
  uint32_t s = c->seq + 1;
  nc_ctl *me = ctl(c, c->rank);
  me->desc[s & 1u] = *d;
  atomic_store_explicit(&me->seq, s, memory_order_release);
  futex_wake_all(&me->seq);
  c->seq = s;
  if (wait_all(c, s)) return -1;
  if (check) {
    for (int r = 0; r < c->world; ++r) {
      const nc_desc *o = &ctl(c, r)->desc[s & 1u];
      if (o->kind != d->kind)
        return nc_fail(c, "rank %d called %s while rank %d called %s", r,
                       o->kind < NC_KINDS ? nc_names[o->kind] : "?", c->rank, nc_names[d->kind]);
      if (o->count != d->count || o->dtype != d->dtype || o->op != d->op || o->root != d->root)
        return nc_fail(c,
                       "mismatched arguments across ranks: rank %d has (count %llu, dtype %u, "
                       "op %u, root %u), rank %d has (count %llu, dtype %u, op %u, root %u)",
                       r, (unsigned long long)o->count, o->dtype, o->op, o->root, c->rank,
                       (unsigned long long)d->count, d->dtype, d->op, d->root);
    }
  }
  return 0;
}

static int begin(ncomm *c, int kind) {
  c->cur = nc_names[kind];
  if (c->broken) {
    if (!c->err[0]) snprintf(c->err, sizeof c->err, "communicator is aborted");
    char prev[sizeof c->err];
    memcpy(prev, c->err, sizeof prev);
    snprintf(c->err, sizeof c->err, "%s: communicator aborted by an earlier failure (%.400s)",
             c->cur, prev);
    return -1;
  }
  uint32_t ab = atomic_load_explicit(&c->hdr->aborted, memory_order_relaxed);
  if (ab) {
    c->broken = 1;
    snprintf(c->err, sizeof c->err, "%s: aborted because rank %u failed", c->cur, ab - 1);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ reductions */

/* dst[i] = op over k of src[k][i], rank order. */
#define NC_INT_RED(NAME, T)                                                              \
  static void NAME(void *dst, const unsigned char *const *src, int w, size_t n, int op) { \
    for (size_t i0 = 0; i0 < n; i0 += NC_BLOCK) {                                        \
      size_t m = n - i0 < NC_BLOCK ? n - i0 : NC_BLOCK;                                  \
      T acc[NC_BLOCK];                                                                   \
      memcpy(acc, src[0] + i0 * sizeof(T), m * sizeof(T));                               \
      for (int k = 1; k < w; ++k) {                                                      \
        T s[NC_BLOCK];                                                                   \
        memcpy(s, src[k] + i0 * sizeof(T), m * sizeof(T));                               \
        switch (op) {                                                                    \
        case NCOMM_SUM: case NCOMM_AVG:                                                  \
          for (size_t j = 0; j < m; ++j) acc[j] = (T)((uint64_t)acc[j] + (uint64_t)s[j]); \
          break;                                                                         \
        case NCOMM_PRODUCT:                                                              \
          for (size_t j = 0; j < m; ++j) acc[j] = (T)((uint64_t)acc[j] * (uint64_t)s[j]); \
          break;                                                                         \
        case NCOMM_MIN:                                                                  \
          for (size_t j = 0; j < m; ++j) acc[j] = s[j] < acc[j] ? s[j] : acc[j];          \
          break;                                                                         \
        default:                                                                         \
          for (size_t j = 0; j < m; ++j) acc[j] = s[j] > acc[j] ? s[j] : acc[j];          \
          break;                                                                         \
        }                                                                                \
      }                                                                                  \
      if (op == NCOMM_AVG)                                                               \
        for (size_t j = 0; j < m; ++j) acc[j] = (T)(acc[j] / (T)w);                       \
      memcpy((unsigned char *)dst + i0 * sizeof(T), acc, m * sizeof(T));                 \
    }                                                                                    \
  }
NC_INT_RED(red_u8, uint8_t)
NC_INT_RED(red_i8, int8_t)
NC_INT_RED(red_i16, int16_t)
NC_INT_RED(red_i32, int32_t)
NC_INT_RED(red_i64, int64_t)

/* Floating: ACC is the compute type, LOAD/STORE convert one element. */
static inline float nc_ld_f32(const unsigned char *p, size_t i) {
  float v;
  memcpy(&v, p + i * 4, 4);
  return v;
}
static inline double nc_ld_f64(const unsigned char *p, size_t i) {
  double v;
  memcpy(&v, p + i * 8, 8);
  return v;
}
#define NC_F_LOAD_F32(p, i) nc_ld_f32((p), (i))
#define NC_F_LOAD_F64(p, i) nc_ld_f64((p), (i))
#define NC_F_LOAD_H(p, i) nk_f16_to_f32(nk_read_u16((p) + (i) * 2))
#define NC_F_LOAD_B(p, i) nk_bf16_to_f32(nk_read_u16((p) + (i) * 2))
#define NC_F_STORE_F32(p, i, v) do { float v_ = (v); memcpy((p) + (i) * 4, &v_, 4); } while (0)
#define NC_F_STORE_F64(p, i, v) do { double v_ = (v); memcpy((p) + (i) * 8, &v_, 8); } while (0)
#define NC_F_STORE_H(p, i, v) nk_write_u16((p) + (i) * 2, nk_f32_to_f16(v))
#define NC_F_STORE_B(p, i, v) nk_write_u16((p) + (i) * 2, nk_f32_to_bf16(v))

#define NC_FLOAT_RED(NAME, ACC, LOAD, STORE)                                             \
  static void NAME(void *dst, const unsigned char *const *src, int w, size_t n, int op) { \
    unsigned char *d = dst;                                                              \
    for (size_t i0 = 0; i0 < n; i0 += NC_BLOCK) {                                        \
      size_t m = n - i0 < NC_BLOCK ? n - i0 : NC_BLOCK;                                  \
      ACC acc[NC_BLOCK];                                                                 \
      for (size_t j = 0; j < m; ++j) acc[j] = LOAD(src[0], i0 + j);                      \
      for (int k = 1; k < w; ++k) {                                                      \
        const unsigned char *p = src[k];                                                 \
        switch (op) {                                                                    \
        case NCOMM_SUM: case NCOMM_AVG:                                                  \
          for (size_t j = 0; j < m; ++j) acc[j] += LOAD(p, i0 + j);                      \
          break;                                                                         \
        case NCOMM_PRODUCT:                                                              \
          for (size_t j = 0; j < m; ++j) acc[j] *= LOAD(p, i0 + j);                      \
          break;                                                                         \
        case NCOMM_MIN:                                                                  \
          for (size_t j = 0; j < m; ++j) {                                               \
            ACC v = LOAD(p, i0 + j);                                                     \
            acc[j] = (v < acc[j] || v != v) ? v : acc[j];                                \
          }                                                                              \
          break;                                                                         \
        default:                                                                         \
          for (size_t j = 0; j < m; ++j) {                                               \
            ACC v = LOAD(p, i0 + j);                                                     \
            acc[j] = (v > acc[j] || v != v) ? v : acc[j];                                \
          }                                                                              \
          break;                                                                         \
        }                                                                                \
      }                                                                                  \
      if (op == NCOMM_AVG)                                                               \
        for (size_t j = 0; j < m; ++j) acc[j] /= (ACC)w;                                 \
      for (size_t j = 0; j < m; ++j) STORE(d, i0 + j, acc[j]);                           \
    }                                                                                    \
  }
NC_FLOAT_RED(red_f32, float, NC_F_LOAD_F32, NC_F_STORE_F32)
NC_FLOAT_RED(red_f64, double, NC_F_LOAD_F64, NC_F_STORE_F64)
NC_FLOAT_RED(red_f16, float, NC_F_LOAD_H, NC_F_STORE_H)
NC_FLOAT_RED(red_bf16, float, NC_F_LOAD_B, NC_F_STORE_B)

static void red_bool(void *dst, const unsigned char *const *src, int w, size_t n, int op) {
  int all = op == NCOMM_PRODUCT || op == NCOMM_MIN;
  unsigned char *d = dst;
  for (size_t i = 0; i < n; ++i) {
    int v = src[0][i] != 0;
    for (int k = 1; k < w; ++k) v = all ? (v && src[k][i]) : (v || src[k][i]);
    d[i] = (unsigned char)v;
  }
}

typedef void (*nc_red_fn)(void *, const unsigned char *const *, int, size_t, int);
static nc_red_fn red_fn(nrt_dtype dt) {
  switch (dt) {
  case NRT_BOOL: return red_bool;
  case NRT_UINT8: return red_u8;
  case NRT_INT8: return red_i8;
  case NRT_INT16: return red_i16;
  case NRT_INT32: return red_i32;
  case NRT_INT64: return red_i64;
  case NRT_FLOAT16: return red_f16;
  case NRT_BFLOAT16: return red_bf16;
  case NRT_FLOAT32: return red_f32;
  case NRT_FLOAT64: return red_f64;
  default: return NULL;
  }
}

/* --------------------------------------------------------- create/destroy */

int ncomm_create(const char *key, int rank, int world, size_t chunk_bytes, int64_t timeout_ms,
                 ncomm **out, char *err, size_t errlen) {
  if (out) *out = NULL;
  if (!out || !key || world < 1 || world > NC_MAX_WORLD || rank < 0 || rank >= world ||
      timeout_ms <= 0) {
    fmt(err, errlen, "neuron comm init: bad arguments (rank %d, world %d)", rank, world);
    return -1;
  }
  size_t klen = strlen(key);
  if (klen == 0 || klen > 64 || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_") != klen) {
    fmt(err, errlen, "neuron comm init: bad key '%.80s'", key);
    return -1;
  }
  if (chunk_bytes == 0) chunk_bytes = NC_DEFAULT_CHUNK;
  chunk_bytes = (chunk_bytes + 63) & ~(size_t)63;
  if (chunk_bytes < 4096) chunk_bytes = 4096;
  char name[128];
  snprintf(name, sizeof name, "/torch_neuronx-comm-%s", key);
  size_t total = NC_HDR_BYTES + (size_t)world * NC_CTL_BYTES + data_bytes(world, chunk_bytes) +
                 (size_t)world * (size_t)world * (NC_CTL_BYTES + 2 * p2p_chunk_of(chunk_bytes));

  ncomm *c = calloc(1, sizeof *c);
  if (!c) {
    fmt(err, errlen, "neuron comm init: out of memory");
    return -1;
  }
  c->rank = rank;
  c->world = world;
  c->timeout_ms = timeout_ms;
  int64_t deadline = now_ms() + timeout_ms;
  int fd = -1;
  unsigned char *base = MAP_FAILED;

  if (rank == 0) {
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      fmt(err, errlen, "neuron comm init: shm_open(%s) failed: %s", name, strerror(errno));
      goto fail;
    }
    if (ftruncate(fd, (off_t)total) != 0) {
      fmt(err, errlen, "neuron comm init: ftruncate(%zu) failed: %s", total, strerror(errno));
      shm_unlink(name);
      goto fail;
    }
    base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      fmt(err, errlen, "neuron comm init: mmap failed: %s", strerror(errno));
      shm_unlink(name);
      goto fail;
    }
    nc_header *h = (nc_header *)base;
    h->total_bytes = total;
    h->chunk_bytes = chunk_bytes;
    h->world = (uint32_t)world;
    atomic_store_explicit(&h->magic, NC_MAGIC, memory_order_release);
  } else {
    /* Wait for rank 0's segment, then for its header. */
    for (;;) {
      fd = shm_open(name, O_RDWR, 0600);
      if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && (size_t)st.st_size >= NC_HDR_BYTES) {
          void *h = mmap(NULL, NC_HDR_BYTES, PROT_READ, MAP_SHARED, fd, 0);
          if (h != MAP_FAILED) {
            nc_header *hh = h;
            int ready = atomic_load_explicit(&hh->magic, memory_order_acquire) == NC_MAGIC;
            size_t t = hh->total_bytes, ch = hh->chunk_bytes;
            uint32_t w = hh->world;
            munmap(h, NC_HDR_BYTES);
            if (ready) {
              if (w != (uint32_t)world) {
                fmt(err, errlen, "neuron comm init: rank 0 has world size %u, rank %d has %d", w,
                    rank, world);
                goto fail;
              }
              total = t;
              chunk_bytes = ch;
              break;
            }
          }
        }
        close(fd);
        fd = -1;
      }
      if (now_ms() > deadline) {
        fmt(err, errlen, "neuron comm init: timed out after %lld ms waiting for rank 0's segment",
            (long long)timeout_ms);
        goto fail;
      }
      sleep_us(1000);
    }
    base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      fmt(err, errlen, "neuron comm init: mmap failed: %s", strerror(errno));
      goto fail;
    }
  }
  close(fd);
  fd = -1;
  c->base = base;
  c->hdr = (nc_header *)base;
  c->chunk = chunk_bytes;
  c->p2p_chunk = p2p_chunk_of(chunk_bytes);
  c->map_bytes = total;
  c->p2p_sent = calloc((size_t)world * 2, sizeof(uint32_t));
  if (!c->p2p_sent) {
    fmt(err, errlen, "neuron comm init: out of memory");
    goto fail;
  }
  c->p2p_recvd = c->p2p_sent + world;
  atomic_store(&c->hdr->pids[rank], (int32_t)getpid());
  atomic_fetch_add(&c->hdr->attached, 1);
  /* Everyone mapped it: unlink (idempotent across ranks). */
  for (;;) {
    uint32_t n = atomic_load(&c->hdr->attached);
    if (n >= (uint32_t)world) break;
    if (now_ms() > deadline) {
      shm_unlink(name);
      atomic_store(&c->hdr->aborted, (uint32_t)rank + 1);
      fmt(err, errlen, "neuron comm init: timed out after %lld ms: %u of %d ranks arrived",
          (long long)timeout_ms, n, world);
      goto fail;
    }
    sleep_us(500);
  }
  shm_unlink(name);
  *out = c;
  return 0;

fail:
  if (fd >= 0) close(fd);
  if (base != MAP_FAILED) munmap(base, total);
  free(c->p2p_sent);
  free(c);
  return -1;
}

void ncomm_destroy(ncomm *c) {
  if (!c) return;
  if (c->base) munmap(c->base, c->map_bytes);
  free(c->p2p_sent);
  free(c);
}

const char *ncomm_error(const ncomm *c) { return c ? c->err : "null communicator"; }
int ncomm_rank(const ncomm *c) { return c->rank; }
int ncomm_world(const ncomm *c) { return c->world; }
void ncomm_set_timeout(ncomm *c, int64_t timeout_ms) {
  if (timeout_ms > 0) c->timeout_ms = timeout_ms;
}

/* ------------------------------------------------------------ collectives */

int ncomm_barrier(ncomm *c) {
  if (begin(c, NC_BARRIER)) return -1;
  nc_desc d = {NC_BARRIER, 0, 0, 0, 0};
  return step(c, &d, 1);
}

int ncomm_broadcast(ncomm *c, void *bufp, size_t bytes, int root) {
  if (begin(c, NC_BROADCAST)) return -1;
  if (root < 0 || root >= c->world) return nc_bad_arg(c, "root %d out of range", root);
  nc_desc d = {NC_BROADCAST, 0, 0, (uint32_t)root, bytes};
  unsigned char *p = bufp;
  size_t off = 0;
  int first = 1;
  do {
    size_t n = bytes - off < c->chunk ? bytes - off : c->chunk;
    uint32_t s = c->seq + 1;
    if (c->rank == root && n) memcpy(buf(c, c->rank, s), p + off, n);
    if (step(c, &d, first)) return -1;
    if (c->rank != root && n) memcpy(p + off, buf(c, root, s), n);
    off += n;
    first = 0;
  } while (off < bytes);
  return 0;
}

int ncomm_all_gather(ncomm *c, const void *in, void *outp, size_t bytes) {
  if (begin(c, NC_ALL_GATHER)) return -1;
  nc_desc d = {NC_ALL_GATHER, 0, 0, 0, bytes};
  const unsigned char *src = in;
  unsigned char *dst = outp;
  size_t off = 0;
  int first = 1;
  do {
    size_t n = bytes - off < c->chunk ? bytes - off : c->chunk;
    uint32_t s = c->seq + 1;
    if (n) memcpy(buf(c, c->rank, s), src + off, n);
    if (step(c, &d, first)) return -1;
    for (int r = 0; r < c->world && n; ++r) memcpy(dst + (size_t)r * bytes + off, buf(c, r, s), n);
    off += n;
    first = 0;
  } while (off < bytes);
  return 0;
}

int ncomm_all_reduce(ncomm *c, const void *in, void *outp, size_t count, nrt_dtype dt,
                     ncomm_op op) {
  if (begin(c, NC_ALL_REDUCE)) return -1;
  nc_red_fn red = red_fn(dt);
  if (!red) return nc_bad_arg(c, "unsupported dtype %d", (int)dt);
  if ((unsigned)op >= NCOMM_OP_COUNT) return nc_bad_arg(c, "unsupported reduce op %d", (int)op);
  size_t es = nrt_dtype_size(dt);
  nc_desc d = {NC_ALL_REDUCE, (uint32_t)dt, (uint32_t)op, 0, count};
  const unsigned char *src = in;
  unsigned char *dst = outp;
  size_t per = c->chunk / es, off = 0;
  const unsigned char *srcs[NC_MAX_WORLD];
  int first = 1;
  do {
    size_t m = count - off < per ? count - off : per;
    uint32_t a = c->seq + 1;
    if (m) memcpy(buf(c, c->rank, a), src + off * es, m * es);
    if (step(c, &d, first)) return -1;
    first = 0;
    if (m * es <= NC_DIRECT_BYTES || c->world <= 2) {
      for (int r = 0; r < c->world; ++r) srcs[r] = buf(c, r, a);
      if (m) red(dst + off * es, srcs, c->world, m, op);
    } else {
      size_t lo = m * (size_t)c->rank / (size_t)c->world;
      size_t hi = m * ((size_t)c->rank + 1) / (size_t)c->world;
      for (int r = 0; r < c->world; ++r) srcs[r] = buf(c, r, a) + lo * es;
      uint32_t b = a + 1;
      red(buf(c, c->rank, b) + lo * es, srcs, c->world, hi - lo, op);
      if (step(c, &d, 0)) return -1;
      for (int r = 0; r < c->world; ++r) {
        size_t rl = m * (size_t)r / (size_t)c->world, rh = m * ((size_t)r + 1) / (size_t)c->world;
        memcpy(dst + (off + rl) * es, buf(c, r, b) + rl * es, (rh - rl) * es);
      }
    }
    off += m;
  } while (off < count);
  return 0;
}

int ncomm_reduce_scatter(ncomm *c, const void *in, void *outp, size_t count, nrt_dtype dt,
                         ncomm_op op) {
  if (begin(c, NC_REDUCE_SCATTER)) return -1;
  nc_red_fn red = red_fn(dt);
  if (!red) return nc_bad_arg(c, "unsupported dtype %d", (int)dt);
  if ((unsigned)op >= NCOMM_OP_COUNT) return nc_bad_arg(c, "unsupported reduce op %d", (int)op);
  size_t es = nrt_dtype_size(dt);
  nc_desc d = {NC_REDUCE_SCATTER, (uint32_t)dt, (uint32_t)op, 0, count};
  const unsigned char *src = in;
  unsigned char *dst = outp;
  size_t per = c->chunk / es / (size_t)c->world, off = 0;
  if (per == 0) return nc_bad_arg(c, "chunk too small for %d ranks", c->world);
  const unsigned char *srcs[NC_MAX_WORLD];
  int first = 1;
  do {
    size_t m = count - off < per ? count - off : per;
    uint32_t s = c->seq + 1;
    unsigned char *mine = buf(c, c->rank, s);
    for (int r = 0; r < c->world && m; ++r)
      memcpy(mine + (size_t)r * m * es, src + ((size_t)r * count + off) * es, m * es);
    if (step(c, &d, first)) return -1;
    first = 0;
    for (int r = 0; r < c->world; ++r) srcs[r] = buf(c, r, s) + (size_t)c->rank * m * es;
    if (m) red(dst + off * es, srcs, c->world, m, op);
    off += m;
  } while (off < count);
  return 0;
}

int ncomm_all_to_all(ncomm *c, const void *in, const size_t *send_bytes, const size_t *send_displs,
                     void *outp, const size_t *recv_bytes, const size_t *recv_displs) {
  if (begin(c, NC_ALL_TO_ALL)) return -1;
  size_t per = c->chunk / (size_t)c->world;
  per &= ~(size_t)7;
  if (per == 0) return nc_bad_arg(c, "chunk too small for %d ranks", c->world);
  /* Step 0 agrees on the number of data steps: every rank publishes its
   * largest block (sent or received) in its descriptor's count. */
  size_t big = 0;
  for (int j = 0; j < c->world; ++j) {
    if (send_bytes[j] > big) big = send_bytes[j];
    if (recv_bytes[j] > big) big = recv_bytes[j];
  }
  nc_desc d = {NC_ALL_TO_ALL, 0, 0, 0, big};
  uint32_t s0 = c->seq + 1;
  {
    /* like step(), but the counts may differ: compare only the kind */
    nc_ctl *me = ctl(c, c->rank);
    me->desc[s0 & 1u] = d;
    atomic_store_explicit(&me->seq, s0, memory_order_release);
    futex_wake_all(&me->seq);
    c->seq = s0;
    if (wait_all(c, s0)) return -1;
    for (int r = 0; r < c->world; ++r) {
      const nc_desc *o = &ctl(c, r)->desc[s0 & 1u];
      if (o->kind != NC_ALL_TO_ALL)
        return nc_fail(c, "rank %d called %s while rank %d called all_to_all", r,
                       o->kind < NC_KINDS ? nc_names[o->kind] : "?", c->rank);
      if (o->count > big) big = (size_t)o->count;
    }
  }
  const unsigned char *src = in;
  unsigned char *dst = outp;
  d.count = 0;
  for (size_t off = 0; off < big; off += per) {
    uint32_t s = c->seq + 1;
    unsigned char *mine = buf(c, c->rank, s);
    for (int j = 0; j < c->world; ++j) {
      size_t n = send_bytes[j] > off ? send_bytes[j] - off : 0;
      if (n > per) n = per;
      if (n) memcpy(mine + (size_t)j * per, src + send_displs[j] + off, n);
    }
    if (step(c, &d, 0)) return -1;
    for (int q = 0; q < c->world; ++q) {
      size_t n = recv_bytes[q] > off ? recv_bytes[q] - off : 0;
      if (n > per) n = per;
      if (n) memcpy(dst + recv_displs[q] + off, buf(c, q, s) + (size_t)c->rank * per, n);
    }
  }
  return 0;
}

/* One piece of a point-to-point op, if its slot is ready: 1 = progressed,
 * 0 = not ready, -1 = error.  *off advances; *started marks the first piece
 * (a zero-byte message is one empty piece). */
static int p2p_piece(ncomm *c, const ncomm_p2p_op *op, size_t *off, int *started) {
  if (op->is_send) {
    nc_chan *ch = chan(c, c->rank, op->peer);
    uint32_t k = c->p2p_sent[op->peer] + 1;
    uint32_t acked = atomic_load_explicit(&ch->acked, memory_order_acquire);
    if ((int32_t)(acked - (k - 2)) < 0) return 0; /* slot k & 1 still unread */
    size_t n = op->bytes - *off < c->p2p_chunk ? op->bytes - *off : c->p2p_chunk;
    if (n) memcpy(chan_buf(c, c->rank, op->peer, k), (const unsigned char *)op->buf + *off, n);
    ch->msg_bytes[k & 1u] = op->bytes;
    atomic_store_explicit(&ch->posted, k, memory_order_release);
    futex_wake_all(&ch->posted);
    c->p2p_sent[op->peer] = k;
    *off += n;
  } else {
    nc_chan *ch = chan(c, op->peer, c->rank);
    uint32_t k = c->p2p_recvd[op->peer] + 1;
    uint32_t posted = atomic_load_explicit(&ch->posted, memory_order_acquire);
    if ((int32_t)(posted - k) < 0) return 0;
    if (ch->msg_bytes[k & 1u] != op->bytes)
      return nc_fail(c, "rank %d sent %llu bytes, this rank expects %zu", op->peer,
                     (unsigned long long)ch->msg_bytes[k & 1u], op->bytes);
    size_t n = op->bytes - *off < c->p2p_chunk ? op->bytes - *off : c->p2p_chunk;
    if (n) memcpy((unsigned char *)op->buf + *off, chan_buf(c, op->peer, c->rank, k), n);
    atomic_store_explicit(&ch->acked, k, memory_order_release);
    futex_wake_all(&ch->acked);
    c->p2p_recvd[op->peer] = k;
    *off += n;
  }
  *started = 1;
  return 1;
}

#define NC_MAX_BATCH 1024

static int p2p_run(ncomm *c, const ncomm_p2p_op *ops, int n) {
  if (n < 0 || n > NC_MAX_BATCH) return nc_bad_arg(c, "batch of %d operations", n);
  for (int i = 0; i < n; ++i) {
    if (ops[i].peer < 0 || ops[i].peer >= c->world || ops[i].peer == c->rank)
      return nc_bad_arg(c, "bad %s rank %d", ops[i].is_send ? "destination" : "source",
                        ops[i].peer);
  }
  size_t off[NC_MAX_BATCH];
  int started[NC_MAX_BATCH], done[NC_MAX_BATCH];
  for (int i = 0; i < n; ++i) off[i] = 0, started[i] = 0, done[i] = 0;
  int left = n;
  int64_t deadline = now_ms() + c->timeout_ms, next_pid_check = now_ms() + 50;
  long idle = 0;
  while (left > 0) {
    int progressed = 0, waiting_on = -1;
    for (int i = 0; i < n; ++i) {
      if (done[i]) continue;
      int blocked = 0; /* an earlier op on the same (peer, direction) goes first */
      for (int j = 0; j < i && !blocked; ++j)
        blocked = !done[j] && ops[j].peer == ops[i].peer && ops[j].is_send == ops[i].is_send;
      if (blocked) continue;
      int r = p2p_piece(c, &ops[i], &off[i], &started[i]);
      if (r < 0) return -1;
      if (r > 0) {
        progressed = 1;
        if (started[i] && off[i] >= ops[i].bytes) done[i] = 1, left--;
      } else if (waiting_on < 0) {
        waiting_on = i;
      }
    }
    if (progressed || left == 0) {
      idle = 0;
      deadline = now_ms() + c->timeout_ms;
      continue;
    }
    if (++idle < 256) continue;
    uint32_t ab = atomic_load_explicit(&c->hdr->aborted, memory_order_relaxed);
    if (ab) {
      c->broken = 1;
      snprintf(c->err, sizeof c->err, "%s: aborted because rank %u failed", c->cur, ab - 1);
      return -1;
    }
    int peer = ops[waiting_on].peer;
    int64_t t = now_ms();
    if (t >= next_pid_check) {
      next_pid_check = t + 50;
      for (int i = 0; i < n; ++i)
        if (!done[i] && pid_dead(atomic_load_explicit(&c->hdr->pids[ops[i].peer],
                                                      memory_order_relaxed)))
          return nc_fail(c, "rank %d (pid %d) died", ops[i].peer, (int)c->hdr->pids[ops[i].peer]);
    }
    if (t > deadline)
      return nc_fail(c, "timed out after %lld ms waiting for rank %d", (long long)c->timeout_ms,
                     peer);
    if (left == 1) {
      /* one op: sleep on its counter */
      const ncomm_p2p_op *op = &ops[waiting_on];
      nc_chan *ch = op->is_send ? chan(c, c->rank, op->peer) : chan(c, op->peer, c->rank);
      _Atomic uint32_t *w = op->is_send ? &ch->acked : &ch->posted;
      futex_wait_for(w, atomic_load_explicit(w, memory_order_relaxed), 2000);
    } else {
      sleep_us(20);
    }
  }
  return 0;
}

int ncomm_send(ncomm *c, const void *bufp, size_t bytes, int dst) {
  if (begin(c, NC_SEND)) return -1;
  ncomm_p2p_op op = {dst, 1, (void *)bufp, bytes};
  return p2p_run(c, &op, 1);
}

int ncomm_recv(ncomm *c, void *bufp, size_t bytes, int src) {
  if (begin(c, NC_RECV)) return -1;
  ncomm_p2p_op op = {src, 0, bufp, bytes};
  return p2p_run(c, &op, 1);
}

int ncomm_p2p_batch(ncomm *c, const ncomm_p2p_op *ops, int n) {
  if (begin(c, NC_P2P_BATCH)) return -1;
  return p2p_run(c, ops, n);
}
