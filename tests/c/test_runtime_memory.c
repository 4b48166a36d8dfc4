/* Caching allocator: exact statistics, splitting and merging, stream-ordered
 * reuse, record_stream, out of memory and recovery, empty_cache, pinned
 * host memory. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/internal.h"
#include "check.h"
#include "test_runtime_util.h"

#define MiB ((size_t)1 << 20)

static nrt_mem_stats stats(int dev) {
  nrt_mem_stats s;
  memset(&s, 0xff, sizeof s);
  CHECK_OK(nrt_mem_stats_get(dev, &s));
  return s;
}

static void test_stats_exact(nrt_stream *s0) {
  nrt_mem_stats before = stats(0);
  void *p = NULL;
  CHECK_OK(nrt_mem_alloc(s0, 1000, &p));
  CHECK(p != NULL && nrt_mem_device_of(p) == 0 && (uintptr_t)p % 512 == 0);
  memset(p, 0xab, 1000); /* the memory is usable */
  nrt_mem_stats st = stats(0);
  CHECK(st.allocated_bytes == 1024 && st.requested_bytes == 1000);
  CHECK(st.active_bytes == 1024 && st.allocated_bytes_total == before.allocated_bytes_total + 1024);
  CHECK(st.reserved_bytes == 2 * MiB && st.segment_count == 1 && st.segment_alloc_count == 1);
  CHECK(st.alloc_count == 1 && st.allocation_current == 1 && st.allocation_peak == 1);
  CHECK(st.inactive_split_bytes == 2 * MiB - 1024);
  CHECK_OK(nrt_mem_free(p));
  st = stats(0);
  CHECK(st.allocated_bytes == 0 && st.requested_bytes == 0 && st.active_bytes == 0);
  CHECK(st.freed_bytes_total == 1024 && st.free_count == 1 && st.allocation_current == 0);
  CHECK(st.allocated_bytes_peak == 1024 && st.requested_bytes_peak == 1000);
  CHECK(st.reserved_bytes == 2 * MiB && st.inactive_split_bytes == 0); /* cached whole */
}

/* Three neighbours of one segment: freeing the middle leaves a hole that
 * best fit takes back; freeing all merges them into one block again. */
static void test_split_merge(nrt_stream *s0) {
  void *p, *q, *r, *q2, *whole;
  CHECK_OK(nrt_mem_alloc(s0, 1024, &p));
  CHECK_OK(nrt_mem_alloc(s0, 4096, &q));
  CHECK_OK(nrt_mem_alloc(s0, 4096, &r));
  CHECK((char *)q == (char *)p + 1024 && (char *)r == (char *)q + 4096);
  CHECK(stats(0).segment_count == 1);
  CHECK(stats(0).inactive_split_bytes == 2 * MiB - 1024 - 8192);
  CHECK_OK(nrt_mem_free(q));
  CHECK(stats(0).inactive_split_bytes == 2 * MiB - 1024 - 4096);
  CHECK_OK(nrt_mem_alloc(s0, 4000, &q2));
  CHECK(q2 == q); /* the exact-size hole beats the big remainder */
  CHECK_OK(nrt_mem_free(q2));
  CHECK_OK(nrt_mem_free(p)); /* merges with the hole after it */
  CHECK_OK(nrt_mem_free(r)); /* merges both sides */
  nrt_mem_stats st = stats(0);
  CHECK(st.reserved_bytes == 2 * MiB && st.segment_count == 1 && st.inactive_split_bytes == 0);
  CHECK(st.allocated_bytes_peak == 1024 + 8192);
  /* merged: the whole segment's worth is one block again */
  CHECK_OK(nrt_mem_alloc(s0, MiB, &whole));
  CHECK(whole == p && stats(0).segment_count == 1);
  CHECK_OK(nrt_mem_free(whole));
}

static void test_bad_frees(nrt_stream *s0) {
  void *p;
  CHECK_OK(nrt_mem_alloc(s0, 512, &p));
  CHECK(nrt_mem_free((char *)p + 512) == NRT_ERROR_INVALID_ARGUMENT); /* not a block start */
  CHECK_OK(nrt_mem_free(p));
  CHECK(nrt_mem_free(p) == NRT_ERROR_INVALID_ARGUMENT); /* double free */
  int local;
  CHECK(nrt_mem_free(&local) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_mem_device_of(&local) == -1 && nrt_mem_device_of(NULL) == -1);
  CHECK_OK(nrt_mem_free(NULL));
  CHECK(nrt_mem_record_stream(p, s0) == NRT_ERROR_INVALID_ARGUMENT); /* freed */
  CHECK(nrt_mem_alloc(NULL, 16, &p) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_mem_alloc(s0, 16, NULL) == NRT_ERROR_INVALID_ARGUMENT);
  void *z = (void *)1;
  CHECK_OK(nrt_mem_alloc(s0, 0, &z));
  CHECK(z == NULL);
}

/* A block freed on a stream is reused at once by that stream (its later
 * work runs after the work that used the block), never by another. */
static void test_stream_ordered(nrt_stream *s0, nrt_stream *s1) {
  void *a, *b, *c;
  CHECK_OK(launch_sleep(s0, 30000)); /* the block may still be in use... */
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &a));
  CHECK_OK(nrt_mem_free(a));
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &c)); /* ...yet s0 itself may reuse it */
  CHECK(c == a);
  CHECK_OK(nrt_mem_alloc(s1, 1 << 16, &b));
  CHECK(b != a && nrt_mem_device_of(b) == 0);
  CHECK(stats(0).segment_count == 2); /* s1 got a segment of its own */
  CHECK_OK(nrt_mem_free(b));
  CHECK_OK(nrt_mem_free(c));
  CHECK_OK(nrt_stream_synchronize(s0));
}

/* record_stream: the block waits for work queued on the other stream up to
 * the free, then returns to its own stream's pool. */
static void test_record_stream(nrt_stream *s0, nrt_stream *s1) {
  void *a, *c, *d;
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &a));
  CHECK_OK(nrt_mem_record_stream(a, s1));
  CHECK_OK(nrt_mem_record_stream(a, s1)); /* twice is once */
  CHECK_OK(nrt_mem_record_stream(a, s0)); /* its own stream: nothing to add */
  CHECK_OK(launch_sleep(s1, 100000));
  CHECK_OK(nrt_mem_free(a));
  nrt_mem_stats st = stats(0);
  CHECK(st.allocated_bytes == 0 && st.active_bytes == (1u << 16)); /* still in use by s1 */
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &c));
  CHECK(c != a);
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &d)); /* the deferred block is back */
  CHECK(d == a);
  CHECK(stats(0).active_bytes == 2u << 16);
  CHECK_OK(nrt_mem_free(c));
  CHECK_OK(nrt_mem_free(d));

  /* a recorded stream whose work is already done defers nothing */
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &a));
  CHECK_OK(nrt_mem_record_stream(a, s1));
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK_OK(nrt_mem_free(a));
  CHECK(stats(0).active_bytes == 0);
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &c));
  CHECK(c == a);
  CHECK_OK(nrt_mem_free(c));
}

static void test_large(nrt_stream *s0) {
  uint64_t reserved = stats(0).reserved_bytes;
  void *big;
  CHECK_OK(nrt_mem_alloc(s0, 3 * MiB + 1, &big));
  CHECK(stats(0).reserved_bytes == reserved + 4 * MiB); /* rounded to 2 MiB */
  CHECK((uintptr_t)big % (2 * MiB) == 0);
  CHECK_OK(nrt_mem_free(big));
  void *again;
  CHECK_OK(nrt_mem_alloc(s0, 3 * MiB, &again)); /* cached, reused */
  CHECK(again == big && stats(0).reserved_bytes == reserved + 4 * MiB);
  CHECK_OK(nrt_mem_free(again));
}

/* OOM: a status with the numbers, counted; the cache is flushed and the
 * allocation retried first; afterwards everything still works. */
static void test_oom(nrt_stream *s0, nrt_stream *s1) {
  nrt_mem_stats before = stats(0);
  void *huge = (void *)1;
  CHECK(nrt_mem_alloc(s0, 300 * MiB, &huge) == NRT_ERROR_OUT_OF_MEMORY);
  CHECK(huge == NULL);
  CHECK(strstr(nrt_last_error(), "Tried to allocate 300.00 MiB") != NULL ||
        strstr(nrt_last_error(), "Tried to allocate 0.29 GiB") != NULL);
  CHECK(strstr(nrt_last_error(), "total capacity of 0.25 GiB") != NULL);
  CHECK(stats(0).oom_count == before.oom_count + 1);

  /* fill the device with blocks of s1 and cached segments of s0 */
  void *parts[64];
  int got = 0;
  while (got < 64 && nrt_mem_alloc(s1, 8 * MiB, &parts[got]) == NRT_SUCCESS) got++;
  CHECK(got == 32); /* 256 MiB: the retry released every cached segment */
  CHECK(stats(0).retry_count > before.retry_count);
  CHECK(stats(0).reserved_bytes == 256 * MiB);
  void *more = (void *)1;
  CHECK(nrt_mem_alloc(s0, 512, &more) == NRT_ERROR_OUT_OF_MEMORY && more == NULL);
  CHECK(strstr(nrt_last_error(), "0.25 GiB is allocated") != NULL);

  /* the retry waits for the device but leaves kernel errors to the next
   * synchronisation */
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  CHECK_OK(nrt_launch(s0, &bad));
  CHECK(nrt_mem_alloc(s0, 8 * MiB, &more) == NRT_ERROR_OUT_OF_MEMORY);
  CHECK(nrt_stream_synchronize(s0) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::gather") != NULL);

  for (int i = 0; i < got; i++) CHECK_OK(nrt_mem_free(parts[i]));
  CHECK_OK(nrt_mem_alloc(s0, 8 * MiB, &more)); /* s1's cache flushed for s0 */
  CHECK_OK(nrt_mem_free(more));
}

static void test_empty_cache(nrt_stream *s0) {
  void *keep;
  CHECK_OK(nrt_mem_alloc(s0, 100, &keep));
  CHECK_OK(nrt_mem_empty_cache(0));
  nrt_mem_stats st = stats(0);
  CHECK(st.reserved_bytes == 2 * MiB && st.segment_count == 1); /* only the live one */
  CHECK_OK(nrt_mem_free(keep));
  CHECK_OK(nrt_mem_empty_cache(0));
  st = stats(0);
  CHECK(st.reserved_bytes == 0 && st.segment_count == 0);
  CHECK(st.segment_free_count == st.segment_alloc_count);
  size_t free_b = 0, total_b = 0;
  CHECK_OK(nrt_mem_info(0, &free_b, &total_b));
  CHECK(total_b == 256 * MiB && free_b == total_b);
  CHECK(st.reserved_bytes_peak == 256 * MiB);
  CHECK_OK(nrt_mem_stats_reset_peak(0));
  st = stats(0);
  CHECK(st.allocated_bytes_peak == 0 && st.reserved_bytes_peak == 0 && st.segment_peak == 0);
  CHECK(st.alloc_count > 0 && st.oom_count > 0);
  CHECK_OK(nrt_mem_stats_reset_accumulated(0));
  st = stats(0);
  CHECK(st.alloc_count == 0 && st.free_count == 0 && st.allocated_bytes_total == 0 &&
        st.freed_bytes_total == 0 && st.segment_alloc_count == 0 &&
        st.segment_free_count == 0 && st.retry_count == 0 && st.oom_count == 0);
  CHECK(nrt_mem_stats_reset_accumulated(7) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_mem_empty_cache(7) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_mem_info(0, NULL, &total_b) == NRT_ERROR_INVALID_ARGUMENT);
}

static void test_other_device(void) {
  void *e1;
  CHECK_OK(nrt_mem_alloc(nrt_stream_default(1), 100, &e1));
  CHECK(nrt_mem_device_of(e1) == 1 && stats(1).allocated_bytes == 512);
  CHECK(stats(0).allocated_bytes == 0);
  CHECK_OK(nrt_mem_free(e1));
  nrt_mem_stats st;
  CHECK(nrt_mem_stats_get(2, &st) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_mem_stats_get(0, NULL) == NRT_ERROR_INVALID_ARGUMENT);
}

static void test_pinned(void) {
  void *h, *h2;
  int local;
  CHECK_OK(nrt_host_alloc(10000, &h));
  CHECK_OK(nrt_host_alloc(3, &h2));
  memset(h, 1, 10000);
  CHECK(nrt_host_is_pinned(h) && nrt_host_is_pinned((char *)h + 9999));
  CHECK(nrt_host_is_pinned(h2) && !nrt_host_is_pinned(&local) && !nrt_host_is_pinned(NULL));
  CHECK(nrt_host_range_pinned(h, 10000) && nrt_host_range_pinned((char *)h + 5000, 5000));
  CHECK(!nrt_host_range_pinned((char *)h + 5000, SIZE_MAX)); /* no wrap-around */
  CHECK(nrt_mem_device_of(h) == -1);
  CHECK(nrt_host_free((char *)h + 1) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_host_free(h));
  CHECK(!nrt_host_is_pinned(h) && nrt_host_is_pinned(h2));
  CHECK(nrt_host_free(h) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_host_free(&local) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_host_free(h2));
  void *z = (void *)1;
  CHECK_OK(nrt_host_alloc(0, &z));
  CHECK(z == NULL);
}

/* Random allocations and frees against a reference: live blocks never
 * overlap (each keeps its own fill pattern until freed) and the byte
 * statistics follow the reference: requested bytes exactly; allocated
 * bytes exactly for small blocks (512 B granularity), and for large ones
 * up to the 1 MiB remainder a large block keeps rather than split off. */
static void test_random_against_reference(nrt_stream *s0, nrt_stream *s1) {
  enum { LIVE = 128, OPS = 4000 };
  struct { unsigned char *p; size_t bytes; unsigned char tag; } live[LIVE] = {{0}};
  uint64_t rng = 12345, base_alloc = stats(0).allocated_bytes, sum = 0, requested = 0;
  uint64_t slack = 0; /* 1 MiB per live large block */
  int intact = 1, stats_match = 1;
  for (int op = 0; op < OPS; op++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((rng >> 33) % LIVE);
    if (live[k].p) { /* free it, after checking nobody wrote over it */
      for (size_t i = 0; i < live[k].bytes; i += 997) intact &= live[k].p[i] == live[k].tag;
      intact &= live[k].p[live[k].bytes - 1] == live[k].tag;
      sum -= (live[k].bytes + 511) & ~(size_t)511;
      requested -= live[k].bytes;
      if (live[k].bytes > MiB) slack -= MiB;
      CHECK_OK(nrt_mem_free(live[k].p));
      live[k].p = NULL;
    } else {
      int large = (rng >> 20) % 16 == 0;
      size_t bytes = large ? MiB + (size_t)((rng >> 40) % (3 * MiB)) : 1 + (size_t)((rng >> 40) % 70000);
      void *p = NULL;
      CHECK_OK(nrt_mem_alloc(op % 3 ? s0 : s1, bytes, &p));
      live[k].p = p;
      live[k].bytes = bytes;
      live[k].tag = (unsigned char)(op | 1);
      memset(p, live[k].tag, bytes);
      sum += (bytes + 511) & ~(size_t)511;
      requested += bytes;
      if (bytes > MiB) slack += MiB;
    }
    nrt_mem_stats st = stats(0);
    stats_match &= st.requested_bytes == requested;
    stats_match &= st.allocated_bytes >= base_alloc + sum;
    stats_match &= st.allocated_bytes <= base_alloc + sum + slack;
    stats_match &= st.allocated_bytes <= st.reserved_bytes;
  }
  CHECK(intact);
  CHECK(stats_match);
  for (int k = 0; k < LIVE; k++) CHECK_OK(nrt_mem_free(live[k].p));
  CHECK(stats(0).allocated_bytes == base_alloc);
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "256M", 1);
  setenv("TORCHNEURON_DEVICE_COUNT", "2", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *s0 = nrt_stream_default(0), *s1 = NULL;
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_NORMAL, &s1));
  test_stats_exact(s0);
  test_split_merge(s0);
  test_bad_frees(s0);
  test_stream_ordered(s0, s1);
  test_record_stream(s0, s1);
  test_large(s0);
  test_random_against_reference(s0, s1);
  test_oom(s0, s1);
  test_empty_cache(s0);
  test_other_device();
  test_pinned();
  return CHECK_SUMMARY();
}
