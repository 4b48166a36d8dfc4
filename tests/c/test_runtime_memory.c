#define _GNU_SOURCE /* setenv, usleep */
/* Caching allocator: stats, splitting/merging, stream-ordered reuse,
 * record_stream, OOM and recovery, empty_cache, pinned memory. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"

static nrt_mem_stats stats(int dev) {
  nrt_mem_stats s;
  nrt_mem_stats_get(dev, &s);
  return s;
}

static void sleep_fn(void *arg) { usleep((useconds_t)(uintptr_t)arg); }

static void launch_sleep(nrt_stream *s, unsigned us) {
  nrt_task t = {.kernel = NRT_KERNEL_HOST_FN, .name = "sleep"};
  *(nrt_host_fn_params *)t.params = (nrt_host_fn_params){sleep_fn, (void *)(uintptr_t)us};
  CHECK_OK(nrt_launch(s, &t));
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "256M", 1);
  setenv("TORCHNEURON_DEVICE_COUNT", "2", 1);
  CHECK_OK(nrt_init());
  nrt_stream *s0 = nrt_stream_default(0);
  CHECK(s0 != NULL);

  /* exact statistics */
  void *p = NULL, *q = NULL, *r = NULL;
  CHECK_OK(nrt_mem_alloc(s0, 1000, &p));
  CHECK(p != NULL && nrt_mem_device_of(p) == 0);
  nrt_mem_stats st = stats(0);
  CHECK(st.allocated_bytes == 1024 && st.requested_bytes == 1000);
  CHECK(st.reserved_bytes == (2u << 20) && st.segment_count == 1);
  CHECK(st.alloc_count == 1 && st.allocation_current == 1);
  memset(p, 0xab, 1000); /* the memory is usable */

  /* neighbours from one segment; merging on free restores one block */
  CHECK_OK(nrt_mem_alloc(s0, 4096, &q));
  CHECK_OK(nrt_mem_alloc(s0, 4096, &r));
  CHECK((char *)q == (char *)p + 1024 && (char *)r == (char *)q + 4096);
  CHECK(stats(0).segment_count == 1);
  CHECK(stats(0).inactive_split_bytes == (2u << 20) - 1024 - 8192);
  CHECK_OK(nrt_mem_free(q));
  void *q2 = NULL;
  CHECK_OK(nrt_mem_alloc(s0, 4000, &q2)); /* best fit takes the hole back */
  CHECK(q2 == q);
  CHECK_OK(nrt_mem_free(q2));
  CHECK_OK(nrt_mem_free(p));
  CHECK_OK(nrt_mem_free(r));
  st = stats(0);
  CHECK(st.allocated_bytes == 0 && st.allocation_current == 0 && st.free_count == 4);
  CHECK(st.reserved_bytes == (2u << 20) && st.inactive_split_bytes == 0);
  CHECK(st.allocated_bytes_peak == 1024 + 8192);

  /* double free and foreign pointers are errors, not crashes */
  CHECK(nrt_mem_free(p) == NRT_ERROR_INVALID_ARGUMENT);
  int local;
  CHECK(nrt_mem_free(&local) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_mem_device_of(&local) == -1);

  /* a block freed on s0 is reused by s0 at once, not by another stream */
  nrt_stream *s1;
  CHECK_OK(nrt_stream_from_pool(0, NRT_PRIORITY_NORMAL, &s1));
  void *a = NULL, *b = NULL;
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &a));
  CHECK_OK(nrt_mem_free(a));
  CHECK_OK(nrt_mem_alloc(s1, 1 << 16, &b));
  CHECK(b != a && stats(0).segment_count == 2);
  CHECK_OK(nrt_mem_free(b));

  /* record_stream: the block waits for the other stream's queued work */
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &a));
  CHECK_OK(nrt_mem_record_stream(a, s1));
  launch_sleep(s1, 100000);
  CHECK_OK(nrt_mem_free(a));
  CHECK(stats(0).active_bytes == (1u << 16)); /* still in use by s1 */
  void *c = NULL;
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &c));
  CHECK(c != a);
  CHECK_OK(nrt_stream_synchronize(s1));
  CHECK_OK(nrt_mem_free(c));
  void *d = NULL;
  CHECK_OK(nrt_mem_alloc(s0, 1 << 16, &d)); /* now reusable */
  CHECK(d == a || d == c);
  CHECK_OK(nrt_mem_free(d));

  /* large blocks: their own segments, rounded to 2 MiB */
  void *big = NULL;
  CHECK_OK(nrt_mem_alloc(s0, (3u << 20) + 1, &big));
  CHECK(stats(0).reserved_bytes >= (4u << 20) + (4u << 20));
  CHECK_OK(nrt_mem_free(big));

  /* OOM: a status with a message, counted; then everything still works */
  uint64_t before = stats(0).oom_count;
  void *huge = (void *)1;
  CHECK(nrt_mem_alloc(s0, (size_t)300 << 20, &huge) == NRT_ERROR_OUT_OF_MEMORY);
  CHECK(huge == NULL && strstr(nrt_last_error(), "Tried to allocate") != NULL);
  CHECK(stats(0).oom_count == before + 1);
  void *parts[200];
  int got = 0;
  while (got < 200 && nrt_mem_alloc(s0, 8u << 20, &parts[got]) == NRT_SUCCESS) got++;
  CHECK(got >= 28 && got <= 32); /* 256 MiB of 8 MiB blocks, minus cached segments */
  void *more = NULL;
  CHECK(nrt_mem_alloc(s0, 8u << 20, &more) == NRT_ERROR_OUT_OF_MEMORY);
  CHECK(stats(0).retry_count >= 1);
  for (int i = 0; i < got; i++) CHECK_OK(nrt_mem_free(parts[i]));
  CHECK_OK(nrt_mem_alloc(s0, 8u << 20, &more));
  CHECK_OK(nrt_mem_free(more));

  /* empty_cache returns every unused segment */
  CHECK_OK(nrt_mem_empty_cache(0));
  st = stats(0);
  CHECK(st.reserved_bytes == 0 && st.segment_count == 0);
  size_t free_b = 0, total_b = 0;
  CHECK_OK(nrt_mem_info(0, &free_b, &total_b));
  CHECK(total_b == (256u << 20) && free_b == total_b);
  CHECK_OK(nrt_mem_stats_reset_peak(0));
  CHECK(stats(0).allocated_bytes_peak == 0);

  /* zero bytes and the other device */
  void *z = (void *)1;
  CHECK_OK(nrt_mem_alloc(s0, 0, &z));
  CHECK(z == NULL);
  void *e1 = NULL;
  CHECK_OK(nrt_mem_alloc(nrt_stream_default(1), 100, &e1));
  CHECK(nrt_mem_device_of(e1) == 1 && stats(1).allocated_bytes == 512);
  CHECK_OK(nrt_mem_free(e1));
  CHECK(nrt_mem_stats_get(2, &st) == NRT_ERROR_INVALID_DEVICE);

  /* pinned host memory */
  void *h = NULL;
  CHECK_OK(nrt_host_alloc(10000, &h));
  CHECK(nrt_host_is_pinned(h) && nrt_host_is_pinned((char *)h + 9999));
  CHECK(!nrt_host_is_pinned(&local));
  CHECK_OK(nrt_host_free(h));
  CHECK(!nrt_host_is_pinned(h));
  CHECK(nrt_host_free(&local) == NRT_ERROR_INVALID_ARGUMENT);
  return CHECK_SUMMARY();
}
