/* test_comm.c — the shared-memory collective engine (comm/) with 2 and 4
 * forked ranks: every collective, dtype and reduce op against a reference
 * each rank computes alone from every rank's (deterministic) inputs; chunked
 * and direct paths (small and large slots), in-place calls, zero-size calls;
 * and the faults: a rank that never arrives, a rank that dies, mismatched
 * arguments, a rendezvous that only half the ranks reach, and the segment
 * being gone from /dev/shm once every rank mapped it.
 *
 * Each child runs CHECKs and exits with its failure count; the parent
 * CHECKs that every child exited 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/dtype_convert.h"
#include "check.h"
#include "neuron_comm.h"

static char key_[64];
static int key_counter_;

static void next_key(void) {
  snprintf(key_, sizeof key_, "ctest-%d-%d", (int)getpid(), key_counter_++);
}

typedef void (*rank_fn)(int rank, int world, size_t chunk);

/* Runs fn in `world` forked ranks; returns how many ranks failed. */
static int run_ranks(int world, size_t chunk, rank_fn fn) {
  next_key();
  pid_t pids[8];
  for (int r = 0; r < world; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      check_failed_ = 0;
      fn(r, world, chunk);
      fflush(stdout);
      fflush(stderr);
      _exit(check_failed_ > 100 ? 100 : check_failed_);
    }
  }
  int bad = 0;
  for (int r = 0; r < world; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d of %d (chunk %zu) failed (status %d)\n", r, world, chunk, st);
      bad++;
    }
  }
  return bad;
}

static ncomm *join(int rank, int world, size_t chunk, int64_t timeout_ms) {
  char err[512];
  ncomm *c = NULL;
  if (ncomm_create(key_, rank, world, chunk, timeout_ms, &c, err, sizeof err) != 0) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return NULL;
  }
  return c;
}

/* The input value of element i on rank r (small integers: every reduction
 * is exact before the final rounding). */
static int64_t val(nrt_dtype dt, int r, size_t i) {
  if (dt == NRT_BOOL) return (i + (size_t)r) % 3 == 0;
  if (dt == NRT_UINT8) return (int64_t)((i * 7 + (size_t)r * 3) % 11);
  return (int64_t)((i * 7 + (size_t)r * 3) % 11) - 5;
}

static void fill(nrt_dtype dt, void *p, int r, size_t n, size_t base) {
  size_t es = nrt_dtype_size(dt);
  for (size_t i = 0; i < n; ++i) nk_store_i64(dt, (char *)p + i * es, val(dt, r, base + i));
}

/* Reference op over ranks of element i, stored to p. */
static void ref(nrt_dtype dt, ncomm_op op, int world, size_t i, void *p) {
  if (dt == NRT_BOOL) {
    int all = op == NCOMM_PRODUCT || op == NCOMM_MIN, v = (int)val(dt, 0, i);
    for (int r = 1; r < world; ++r) v = all ? (v && val(dt, r, i)) : (v || val(dt, r, i));
    nk_store_i64(dt, p, v);
    return;
  }
  if (nk_dtype_is_floating(dt)) {
    double a = (double)val(dt, 0, i);
    for (int r = 1; r < world; ++r) {
      double v = (double)val(dt, r, i);
      a = op == NCOMM_PRODUCT ? a * v : op == NCOMM_MIN ? (v < a ? v : a)
          : op == NCOMM_MAX ? (v > a ? v : a) : a + v;
    }
    if (op == NCOMM_AVG) a /= world;
    nk_store_f64(dt, p, a);
    return;
  }
  int64_t a = val(dt, 0, i);
  for (int r = 1; r < world; ++r) {
    int64_t v = val(dt, r, i);
    a = op == NCOMM_PRODUCT ? a * v : op == NCOMM_MIN ? (v < a ? v : a)
        : op == NCOMM_MAX ? (v > a ? v : a) : a + v;
  }
  if (op == NCOMM_AVG) {
    /* the engine divides the wrapped sum in the dtype */
    char tmp[8] = {0};
    nk_store_i64(dt, tmp, a);
    a = nk_load_i64(dt, tmp) / world;
  }
  nk_store_i64(dt, p, a);
}

static const size_t counts_[] = {0, 1, 7, 1000, 70001};

static void t_all_reduce(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 20000);
  CHECK(c != NULL);
  if (!c) return;
  CHECK(ncomm_rank(c) == rank && ncomm_world(c) == world);
  for (int dt = 0; dt < NRT_DTYPE_COUNT; ++dt) {
    size_t es = nrt_dtype_size((nrt_dtype)dt);
    for (int op = 0; op < NCOMM_OP_COUNT; ++op) {
      for (size_t k = 0; k < sizeof counts_ / sizeof counts_[0]; ++k) {
        size_t n = counts_[k];
        char *in = malloc(n * es + 1), *out = malloc(n * es + 1), *want = malloc(es);
        fill((nrt_dtype)dt, in, rank, n, 0);
        int inplace = (k + (size_t)op) % 2;
        int rc = ncomm_all_reduce(c, in, inplace ? in : out, n, (nrt_dtype)dt, (ncomm_op)op);
        CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", ncomm_error(c));
        const char *res = inplace ? in : out;
        int bad = 0;
        for (size_t i = 0; i < n && !bad; ++i) {
          ref((nrt_dtype)dt, (ncomm_op)op, world, i, want);
          if (memcmp(want, res + i * es, es) != 0) {
            fprintf(stderr, "all_reduce dt %d op %d n %zu i %zu wrong\n", dt, op, n, i);
            bad = 1;
          }
        }
        CHECK(!bad);
        free(in); free(out); free(want);
      }
    }
  }
  ncomm_destroy(c);
}

static void t_reduce_scatter(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 20000);
  CHECK(c != NULL);
  if (!c) return;
  const nrt_dtype dts[] = {NRT_FLOAT32, NRT_BFLOAT16, NRT_FLOAT16, NRT_FLOAT64, NRT_INT64,
                           NRT_INT32, NRT_UINT8, NRT_BOOL};
  for (size_t di = 0; di < sizeof dts / sizeof dts[0]; ++di) {
    nrt_dtype dt = dts[di];
    size_t es = nrt_dtype_size(dt);
    for (int op = 0; op < NCOMM_OP_COUNT; ++op) {
      for (size_t k = 0; k < sizeof counts_ / sizeof counts_[0]; ++k) {
        size_t n = counts_[k], total = n * (size_t)world;
        char *in = malloc(total * es + 1), *out = malloc(n * es + 1), *want = malloc(es);
        fill(dt, in, rank, total, 0);
        int inplace = k % 2;
        char *o = inplace ? in + (size_t)rank * n * es : out;
        int rc = ncomm_reduce_scatter(c, in, o, n, dt, (ncomm_op)op);
        CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", ncomm_error(c));
        int bad = 0;
        for (size_t i = 0; i < n && !bad; ++i) {
          ref(dt, (ncomm_op)op, world, (size_t)rank * n + i, want);
          if (memcmp(want, o + i * es, es) != 0) {
            fprintf(stderr, "reduce_scatter dt %d op %d n %zu i %zu wrong\n", (int)dt, op, n, i);
            bad = 1;
          }
        }
        CHECK(!bad);
        free(in); free(out); free(want);
      }
    }
  }
  ncomm_destroy(c);
}

static void t_gather_bcast_barrier(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 20000);
  CHECK(c != NULL);
  if (!c) return;
  const size_t sizes[] = {0, 1, 13, 4096, 300001};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    size_t n = sizes[k];
    unsigned char *in = malloc(n + 1), *out = malloc(n * (size_t)world + 1);
    for (size_t i = 0; i < n; ++i) in[i] = (unsigned char)(i * 31 + (size_t)rank * 101);
    CHECK(ncomm_all_gather(c, in, out, n) == 0);
    int bad = 0;
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < n; ++i)
        if (out[(size_t)r * n + i] != (unsigned char)(i * 31 + (size_t)r * 101)) bad = 1;
    CHECK(!bad);
    /* in place: this rank's block of out is the input */
    memset(out, 0, n * (size_t)world);
    memcpy(out + (size_t)rank * n, in, n);
    CHECK(ncomm_all_gather(c, out + (size_t)rank * n, out, n) == 0);
    bad = 0;
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < n; ++i)
        if (out[(size_t)r * n + i] != (unsigned char)(i * 31 + (size_t)r * 101)) bad = 1;
    CHECK(!bad);
    for (int root = 0; root < world; root += world - 1) {
      CHECK(ncomm_broadcast(c, in, n, root) == 0);
      bad = 0;
      for (size_t i = 0; i < n; ++i)
        if (in[i] != (unsigned char)(i * 31 + (size_t)root * 101)) bad = 1;
      CHECK(!bad);
      for (size_t i = 0; i < n; ++i) in[i] = (unsigned char)(i * 31 + (size_t)rank * 101);
      if (world == 1) break;
    }
    CHECK(ncomm_barrier(c) == 0);
    free(in); free(out);
  }
  CHECK(ncomm_broadcast(c, NULL, 0, world) != 0); /* bad root */
  ncomm_destroy(c);
}

/* Uneven all_to_all: rank r sends a2a_len(r, j) bytes to rank j (some
 * empty, some spanning several steps), byte i being a2a_byte(r, j, i). */
static size_t a2a_len(int r, int j, size_t k) { return (size_t)((r + 2 * j) % 3) * k + (r == j ? 5 : 0); }
static unsigned char a2a_byte(int r, int j, size_t i) { return (unsigned char)(r * 37 + j * 11 + i * 3); }

static void t_all_to_all(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 20000);
  CHECK(c != NULL);
  if (!c) return;
  const size_t ks[] = {0, 1, 777, 5000};
  for (size_t ki = 0; ki < 4; ++ki) {
    size_t k = ks[ki], sb[8], sd[8], rb[8], rd[8], st = 0, rt = 0;
    for (int j = 0; j < world; ++j) {
      sb[j] = a2a_len(rank, j, k); sd[j] = st; st += sb[j];
      rb[j] = a2a_len(j, rank, k); rd[j] = rt; rt += rb[j];
    }
    unsigned char *in = malloc(st + 1), *out = malloc(rt + 1);
    for (int j = 0; j < world; ++j)
      for (size_t i = 0; i < sb[j]; ++i) in[sd[j] + i] = a2a_byte(rank, j, i);
    memset(out, 0xEE, rt);
    int rc = ncomm_all_to_all(c, in, sb, sd, out, rb, rd);
    CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", ncomm_error(c));
    int bad = 0;
    for (int q = 0; q < world; ++q)
      for (size_t i = 0; i < rb[q]; ++i)
        if (out[rd[q] + i] != a2a_byte(q, rank, i)) bad = 1;
    CHECK(!bad);
    free(in); free(out);
  }
  CHECK(ncomm_barrier(c) == 0);
  ncomm_destroy(c);
}

/* send/recv around the ring (even ranks send first, odd ones receive
 * first), messages of several slots, empty ones, two buffered small ones,
 * and a size mismatch. */
static void t_p2p(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 20000);
  CHECK(c != NULL);
  if (!c || world == 1) {
    ncomm_destroy(c);
    return;
  }
  int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  const size_t sizes[] = {0, 1, 1000, 3 * chunk + 17};
  for (size_t k = 0; k < 4; ++k) {
    size_t n = sizes[k];
    unsigned char *out = malloc(n + 1), *in = malloc(n + 1);
    for (size_t i = 0; i < n; ++i) out[i] = (unsigned char)(rank * 13 + i * 7 + k);
    int rc;
    if (rank % 2 == 0) {
      rc = ncomm_send(c, out, n, next);
      CHECK(rc == 0);
      rc = ncomm_recv(c, in, n, prev);
      CHECK(rc == 0);
    } else {
      rc = ncomm_recv(c, in, n, prev);
      CHECK(rc == 0);
      rc = ncomm_send(c, out, n, next);
      CHECK(rc == 0);
    }
    if (rc) fprintf(stderr, "%s\n", ncomm_error(c));
    int bad = 0;
    for (size_t i = 0; i < n; ++i)
      if (in[i] != (unsigned char)(prev * 13 + i * 7 + k)) bad = 1;
    CHECK(!bad);
    free(out); free(in);
  }
  /* two small sends are buffered: both go out before the receiver looks */
  if (rank == 0) {
    int a = 41, b = 42;
    CHECK(ncomm_send(c, &a, sizeof a, 1) == 0);
    CHECK(ncomm_send(c, &b, sizeof b, 1) == 0);
  } else if (rank == 1) {
    usleep(50 * 1000);
    int a = 0, b = 0;
    CHECK(ncomm_recv(c, &a, sizeof a, 0) == 0 && a == 41);
    CHECK(ncomm_recv(c, &b, sizeof b, 0) == 0 && b == 42);
  }
  CHECK(ncomm_barrier(c) == 0);
  /* mismatched sizes: the receiver says so */
  CHECK(ncomm_send(c, NULL, 0, rank) != 0); /* to itself */
  CHECK(ncomm_barrier(c) == 0);
  /* batched: every rank sends to next and receives from prev at once, in
   * that order, messages of many slots (would deadlock one by one), plus a
   * second message to the same peer that must arrive second */
  size_t n = 5 * chunk + 3;
  unsigned char *o1 = malloc(n), *o2 = malloc(7), *i1 = malloc(n), *i2 = malloc(7);
  for (size_t i = 0; i < n; ++i) o1[i] = (unsigned char)(rank + i);
  for (size_t i = 0; i < 7; ++i) o2[i] = (unsigned char)(100 + rank + i);
  ncomm_p2p_op ops[4] = {{next, 1, o1, n}, {next, 1, o2, 7}, {prev, 0, i1, n}, {prev, 0, i2, 7}};
  int rc = ncomm_p2p_batch(c, ops, 4);
  CHECK(rc == 0);
  if (rc) fprintf(stderr, "%s\n", ncomm_error(c));
  int bad = 0;
  for (size_t i = 0; i < n; ++i) bad |= i1[i] != (unsigned char)(prev + i);
  for (size_t i = 0; i < 7; ++i) bad |= i2[i] != (unsigned char)(100 + prev + i);
  CHECK(!bad);
  free(o1); free(o2); free(i1); free(i2);
  CHECK(ncomm_barrier(c) == 0);
  /* mismatched sizes: the receiver says so (last: it aborts the group) */
  if (rank == 0) {
    int64_t v = 1;
    CHECK(ncomm_send(c, &v, sizeof v, 1) == 0);
  } else if (rank == 1) {
    int32_t v = 0;
    CHECK(ncomm_recv(c, &v, sizeof v, 0) != 0);
    CHECK(strstr(ncomm_error(c), "recv") != NULL && strstr(ncomm_error(c), "8 bytes") != NULL);
  }
  ncomm_destroy(c);
}

/* rank 1 never calls all_reduce: rank 0 fails in time, naming it. */
static void t_timeout(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 300);
  CHECK(c != NULL);
  if (!c) return;
  if (rank == 0) {
    float x = 1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK(ncomm_all_reduce(c, &x, &x, 1, NRT_FLOAT32, NCOMM_SUM) != 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK(strstr(ncomm_error(c), "all_reduce") != NULL);
    CHECK(strstr(ncomm_error(c), "timed out") != NULL);
    CHECK(b.tv_sec - a.tv_sec < 10);
    /* later calls fail at once */
    CHECK(ncomm_barrier(c) != 0);
    CHECK(strstr(ncomm_error(c), "barrier") != NULL);
  } else {
    usleep(800 * 1000);
    /* rank 0 aborted: this rank's barrier fails instead of waiting */
    CHECK(ncomm_barrier(c) != 0);
    CHECK(strstr(ncomm_error(c), "aborted") != NULL);
  }
  ncomm_destroy(c);
}

/* rank 1 dies: rank 0 reports it well before its long timeout. */
static void t_death(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 60000);
  CHECK(c != NULL);
  if (!c) return;
  if (rank == 1) _exit(0);
  double x = 1;
  CHECK(ncomm_all_reduce(c, &x, &x, 1, NRT_FLOAT64, NCOMM_SUM) != 0);
  CHECK(strstr(ncomm_error(c), "died") != NULL);
  ncomm_destroy(c);
}

static void t_mismatch(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 5000);
  CHECK(c != NULL);
  if (!c) return;
  float x[4] = {0};
  CHECK(ncomm_all_reduce(c, x, x, rank == 0 ? 4 : 3, NRT_FLOAT32, NCOMM_SUM) != 0);
  CHECK(strstr(ncomm_error(c), "mismatched") != NULL);
  ncomm_destroy(c);
}

static void t_kind_mismatch(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 5000);
  CHECK(c != NULL);
  if (!c) return;
  int rc = rank == 0 ? ncomm_barrier(c) : ncomm_broadcast(c, NULL, 0, 0);
  CHECK(rc != 0);
  CHECK(strstr(ncomm_error(c), "called") != NULL);
  ncomm_destroy(c);
}

/* The segment is unlinked once every rank mapped it. */
static void t_unlinked(int rank, int world, size_t chunk) {
  ncomm *c = join(rank, world, chunk, 5000);
  CHECK(c != NULL);
  if (!c) return;
  char name[128];
  snprintf(name, sizeof name, "/torch_neuronx-comm-%s", key_);
  int fd = shm_open(name, O_RDWR, 0600);
  CHECK(fd < 0 && errno == ENOENT);
  if (fd >= 0) close(fd);
  CHECK(ncomm_barrier(c) == 0);
  ncomm_destroy(c);
}

int main(void) {
  /* single-rank and argument checks in this process */
  next_key();
  char err[256];
  ncomm *c = NULL;
  CHECK(ncomm_create("bad/key", 0, 2, 0, 100, &c, err, sizeof err) != 0 && c == NULL);
  CHECK(ncomm_create(key_, 2, 2, 0, 100, &c, err, sizeof err) != 0);
  /* half a rendezvous: rank 0 alone times out, naming the count, and leaves
   * nothing in /dev/shm */
  CHECK(ncomm_create(key_, 0, 2, 0, 200, &c, err, sizeof err) != 0);
  CHECK(strstr(err, "1 of 2 ranks") != NULL);
  char name[128];
  snprintf(name, sizeof name, "/torch_neuronx-comm-%s", key_);
  CHECK(shm_open(name, O_RDWR, 0600) < 0 && errno == ENOENT);
  /* rank 1 alone: no segment, times out */
  next_key();
  CHECK(ncomm_create(key_, 1, 2, 0, 100, &c, err, sizeof err) != 0);
  CHECK(strstr(err, "timed out") != NULL);

  const size_t chunks[] = {4096, 1 << 17};
  const int worlds[] = {1, 2, 4};
  for (size_t ci = 0; ci < 2; ++ci) {
    for (size_t wi = 0; wi < 3; ++wi) {
      CHECK(run_ranks(worlds[wi], chunks[ci], t_all_reduce) == 0);
      CHECK(run_ranks(worlds[wi], chunks[ci], t_reduce_scatter) == 0);
      CHECK(run_ranks(worlds[wi], chunks[ci], t_gather_bcast_barrier) == 0);
      CHECK(run_ranks(worlds[wi], chunks[ci], t_all_to_all) == 0);
      CHECK(run_ranks(worlds[wi], chunks[ci], t_p2p) == 0);
    }
  }
  CHECK(run_ranks(2, 0, t_timeout) == 0);
  CHECK(run_ranks(2, 0, t_death) == 0);
  CHECK(run_ranks(2, 0, t_mismatch) == 0);
  CHECK(run_ranks(4, 0, t_kind_mismatch) == 0);
  CHECK(run_ranks(4, 0, t_unlinked) == 0);
  return CHECK_SUMMARY();
}
