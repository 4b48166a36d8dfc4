/* What the profiler needs from the runtime: the per-thread correlation id
 * stamped on launches that carry none (copies included), copies traced by
 * direction (synchronous ones too), the kernel name table, the memory
 * observer and the allocator snapshot. */
#define _GNU_SOURCE /* setenv */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

static size_t drain(nrt_trace_record *rec, size_t max) {
  size_t got = 0;
  CHECK_OK(nrt_trace_drain(rec, max, &got, NULL));
  return got;
}

static void *launch_uncorrelated(void *arg) { /* another thread: its own id, 0 */
  int64_t counter = 0;
  CHECK_OK(launch_add((nrt_stream *)arg, &counter, 1));
  return NULL;
}

static void test_correlation(nrt_stream *s) {
  nrt_trace_enable(1);
  int64_t counter = 0;
  CHECK(nrt_trace_correlation() == 0);
  nrt_trace_set_correlation(41);
  CHECK(nrt_trace_correlation() == 41);
  CHECK_OK(launch_add(s, &counter, 1)); /* takes 41 */
  nrt_task t = {.kernel = K_ADD, .name = "add", .n_operands = 1, .correlation = 5};
  t.operands[0].data = &counter;
  *(int64_t *)t.params = 1;
  CHECK_OK(nrt_launch(s, &t)); /* its own id wins */
  CHECK_OK(nrt_stream_synchronize(s));
  pthread_t th;
  pthread_create(&th, NULL, launch_uncorrelated, s);
  pthread_join(th, NULL);
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_set_correlation(0);
  CHECK_OK(launch_add(s, &counter, 1));
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_record rec[8];
  size_t got = drain(rec, 8);
  CHECK(got == 4);
  if (got == 4) {
    CHECK(rec[0].correlation == 41 && rec[1].correlation == 5);
    CHECK(rec[2].correlation == 0 && rec[3].correlation == 0);
  }
  CHECK(counter == 3); /* the other thread added to its own counter */
  CHECK(nrt_kernel_name(K_ADD) && !strcmp(nrt_kernel_name(K_ADD), "add"));
  CHECK(nrt_kernel_name(K_ADD + 100) == NULL && nrt_kernel_name(1u << 30) == NULL);
  nrt_trace_enable(0);
}

static void test_copies(nrt_stream *s) {
  enum { N = 4096 };
  char *host = malloc(N), *back = malloc(N), *pin;
  void *dev;
  memset(host, 7, N);
  CHECK_OK(nrt_host_alloc(N, (void **)&pin));
  CHECK_OK(nrt_mem_alloc(s, N, &dev));
  nrt_trace_enable(1);
  nrt_trace_set_correlation(9);
  CHECK_OK(nrt_memcpy_async(s, dev, host, N)); /* pageable source: staged */
  CHECK_OK(nrt_memcpy_async(s, pin, dev, N));  /* pinned: a MEMCPY task */
  CHECK_OK(nrt_memcpy_async(s, back, dev, N)); /* pageable destination: synchronous */
  CHECK_OK(nrt_stream_synchronize(s));
  nrt_trace_set_correlation(0);
  nrt_trace_record rec[8];
  size_t got = drain(rec, 8);
  CHECK(got == 3);
  if (got == 3) {
    CHECK(!strcmp(rec[0].name, "memcpy HtoD") && !strcmp(rec[1].name, "memcpy DtoH") &&
          !strcmp(rec[2].name, "memcpy DtoH"));
    int ok = 1;
    for (size_t i = 0; i < got; i++)
      ok &= rec[i].correlation == 9 && rec[i].stream == nrt_stream_id(s) &&
            rec[i].start_ns <= rec[i].end_ns;
    CHECK(ok);
    CHECK(rec[2].kernel == NRT_KERNEL_MEMCPY && rec[1].end_ns <= rec[2].start_ns);
  }
  CHECK(memcmp(back, host, N) == 0 && memcmp(pin, host, N) == 0);
  nrt_trace_enable(0);
  CHECK_OK(nrt_mem_free(dev));
  CHECK_OK(nrt_host_free(pin));
  free(host);
  free(back);
}

static nrt_mem_event events[16];
static int n_events;

static void observer(const nrt_mem_event *e) {
  if (n_events < 16) events[n_events] = *e;
  n_events++;
}

static void test_observer_and_snapshot(nrt_stream *s) {
  nrt_mem_set_observer(observer);
  void *a, *b;
  CHECK_OK(nrt_mem_alloc(s, 1000, &a));
  CHECK_OK(nrt_mem_alloc(s, 3 << 20, &b)); /* large pool */
  nrt_mem_stats st;
  CHECK_OK(nrt_mem_stats_get(1, &st));
  CHECK(n_events == 2);
  CHECK(events[0].kind == NRT_MEM_EVENT_ALLOC && events[0].ptr == a && events[0].size == 1024 &&
        events[0].requested == 1000 && events[0].device == 1 &&
        events[0].stream == nrt_stream_id(s));
  CHECK(events[1].ptr == b && events[1].allocated_bytes == st.allocated_bytes &&
        events[1].reserved_bytes == st.reserved_bytes);

  /* every block of every segment; totals agree with the statistics */
  nrt_mem_block_info blocks[64];
  size_t n = 0;
  CHECK_OK(nrt_mem_snapshot(1, blocks, 64, &n));
  CHECK(n >= 2 && n <= 64);
  uint64_t total = 0, allocated = 0;
  int found_a = 0, found_b = 0, ordered = 1;
  for (size_t i = 0; i < n && i < 64; i++) {
    total += blocks[i].size;
    if (blocks[i].state == NRT_BLOCK_ALLOCATED) allocated += blocks[i].size;
    found_a |= blocks[i].ptr == a && blocks[i].requested == 1000 && !blocks[i].large_pool;
    found_b |= blocks[i].ptr == b && blocks[i].large_pool && blocks[i].state == NRT_BLOCK_ALLOCATED;
    if (i && blocks[i].segment == blocks[i - 1].segment)
      ordered &= (char *)blocks[i - 1].ptr + blocks[i - 1].size == (char *)blocks[i].ptr;
    else
      ordered &= blocks[i].segment == blocks[i].ptr; /* a segment starts with its first block */
  }
  CHECK(found_a && found_b && ordered);
  CHECK(total == st.reserved_bytes && allocated == st.allocated_bytes);
  size_t small = 0;
  CHECK_OK(nrt_mem_snapshot(1, blocks, 1, &small)); /* too small: the count */
  CHECK(small == n);
  CHECK(nrt_mem_snapshot(7, blocks, 64, &n) == NRT_ERROR_INVALID_DEVICE);
  CHECK(nrt_mem_snapshot(1, NULL, 4, &n) == NRT_ERROR_INVALID_ARGUMENT);

  CHECK_OK(nrt_mem_free(a));
  CHECK(n_events == 3 && events[2].kind == NRT_MEM_EVENT_FREE && events[2].ptr == a &&
        events[2].size == 1024 && events[2].allocated_bytes == st.allocated_bytes - 1024);
  nrt_mem_set_observer(NULL);
  CHECK_OK(nrt_mem_free(b));
  CHECK(n_events == 3); /* off */
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "64M", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *s;
  CHECK_OK(nrt_stream_from_pool(1, 0, &s));
  test_correlation(s);
  test_copies(s);
  test_observer_and_snapshot(s);
  return CHECK_SUMMARY();
}
