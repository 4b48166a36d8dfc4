/* Copies in every direction, with the data checked: pageable copies are
 * complete (or staged) when the call returns, pinned and device-to-device
 * copies are queued in stream order. */
#define _GNU_SOURCE /* setenv, usleep */
#include <stdlib.h>
#include <string.h>

#include "../../runtime/include/neuron_runtime.h"
#include "check.h"
#include "test_runtime_util.h"

static unsigned char pattern(size_t i, size_t salt) { return (unsigned char)(i * 31 + salt * 7 + 1); }

static int matches(const unsigned char *p, size_t bytes, size_t salt) {
  for (size_t i = 0; i < bytes; i++)
    if (p[i] != pattern(i, salt)) return 0;
  return 1;
}

/* pageable -> device -> other device -> pinned -> device -> pageable */
static void round_trip(nrt_stream *s, size_t bytes) {
  unsigned char *src = malloc(bytes), *back = malloc(bytes), *pin = NULL;
  void *d1 = NULL, *d2 = NULL;
  CHECK_OK(nrt_host_alloc(bytes, (void **)&pin));
  for (size_t i = 0; i < bytes; i++) src[i] = pattern(i, bytes);
  CHECK_OK(nrt_mem_alloc(s, bytes, &d1));
  CHECK_OK(nrt_mem_alloc(nrt_stream_default(1), bytes, &d2));
  CHECK_OK(launch_sleep(s, 2000)); /* copies queue behind real work */
  CHECK_OK(nrt_memcpy_async(s, d1, src, bytes)); /* pageable H2D */
  memset(src, 0, bytes);                         /* the caller may reuse it at once */
  CHECK_OK(nrt_memcpy_async(s, d2, d1, bytes));  /* D2D across devices */
  CHECK_OK(nrt_memcpy_async(s, pin, d2, bytes)); /* D2H pinned: async */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(matches(pin, bytes, bytes));
  memset(d1, 0, bytes);
  CHECK_OK(nrt_memcpy_async(s, d1, pin, bytes));   /* H2D pinned */
  CHECK_OK(nrt_memcpy_async(s, back, d1, bytes));  /* D2H pageable: done on return */
  CHECK(matches(back, bytes, bytes));
  CHECK_OK(nrt_memcpy_async(s, src, back, bytes)); /* host to host */
  CHECK(matches(src, bytes, bytes));
  CHECK_OK(nrt_mem_free(d1));
  CHECK_OK(nrt_mem_free(d2));
  CHECK_OK(nrt_host_free(pin));
  free(src);
  free(back);
}

/* Copies keep stream order with kernels: a pinned D2H queued after a kernel
 * sees the kernel's result. */
static void test_order_with_kernels(nrt_stream *s) {
  int64_t *dev = NULL, *pin = NULL;
  CHECK_OK(nrt_mem_alloc(s, sizeof *dev, (void **)&dev));
  CHECK_OK(nrt_host_alloc(sizeof *pin, (void **)&pin));
  *pin = 0;
  CHECK_OK(nrt_memcpy_async(s, dev, pin, sizeof *dev));
  CHECK_OK(launch_sleep(s, 20000));
  for (int i = 1; i <= 10; i++) CHECK_OK(launch_add(s, dev, i));
  CHECK_OK(nrt_memcpy_async(s, pin, dev, sizeof *dev));
  CHECK(nrt_stream_query(s) == NRT_ERROR_NOT_READY); /* pinned: did not wait */
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK(*pin == 55);
  int64_t host = 0;
  CHECK_OK(launch_add(s, dev, 100));
  CHECK_OK(nrt_memcpy_async(s, &host, dev, sizeof host)); /* pageable: waits */
  CHECK(host == 155);
  CHECK_OK(nrt_mem_free(dev));
  CHECK_OK(nrt_host_free(pin));
}

static void test_bad_copies(nrt_stream *s) {
  void *d = NULL;
  char host[64];
  CHECK_OK(nrt_mem_alloc(s, 4096, &d));
  CHECK(nrt_memcpy_async(s, (char *)d + 4088, host, (size_t)1 << 40) ==
        NRT_ERROR_INVALID_ARGUMENT); /* runs past the end of HBM */
  CHECK(strstr(nrt_last_error(), "past the end") != NULL);
  CHECK(nrt_memcpy_async(s, host, d, SIZE_MAX) == NRT_ERROR_INVALID_ARGUMENT); /* wraps */
  CHECK(nrt_memcpy_async(NULL, d, host, 8) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_memcpy_async(s, NULL, host, 8) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_memcpy_async(s, d, NULL, 8) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_memcpy_async(s, NULL, NULL, 0)); /* nothing to do */
  /* a copy ordered after a failed kernel still happens, and the pageable
   * copy's wait reports the failure */
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  CHECK_OK(nrt_launch(s, &bad));
  memset(host, 3, sizeof host);
  CHECK_OK(nrt_memcpy_async(s, d, host, sizeof host));
  char back[64] = {0};
  CHECK(nrt_memcpy_async(s, back, d, sizeof back) == NRT_ERROR_KERNEL_FAILED);
  CHECK(memcmp(back, host, sizeof back) == 0);
  CHECK_OK(nrt_stream_synchronize(s));
  CHECK_OK(nrt_mem_free(d));
}

/* nrt_memcpy, the blocking copy: it sees every task queued before it, in
 * both directions, has drained the stream when it returns, and reports (and
 * clears) an earlier task's failure as nrt_stream_synchronize does. */
static void test_blocking_copy(nrt_stream *s) {
  int64_t *dev = NULL, host = 7;
  CHECK_OK(nrt_mem_alloc(s, sizeof *dev, (void **)&dev));
  CHECK_OK(launch_sleep(s, 20000));
  CHECK_OK(nrt_memcpy(s, dev, &host, sizeof host));
  CHECK(nrt_stream_query(s) == NRT_SUCCESS);
  CHECK_OK(launch_sleep(s, 20000));
  CHECK_OK(launch_add(s, dev, 5));
  host = 0;
  CHECK_OK(nrt_memcpy(s, &host, dev, sizeof host));
  CHECK(host == 12);
  CHECK(nrt_stream_query(s) == NRT_SUCCESS);
  nrt_task bad = {.kernel = K_FAIL, .name = "aten::gather"};
  CHECK_OK(nrt_launch(s, &bad));
  host = 3;
  CHECK(nrt_memcpy(s, dev, &host, sizeof host) == NRT_ERROR_KERNEL_FAILED);
  CHECK(strstr(nrt_last_error(), "aten::gather") != NULL);
  CHECK(*dev == 3); /* ordered after the failure, the copy still happens */
  CHECK_OK(nrt_memcpy(s, &host, dev, sizeof host)); /* the error was cleared */
  CHECK(nrt_memcpy(s, (char *)dev, &host, (size_t)1 << 40) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_memcpy(NULL, dev, &host, 8) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK(nrt_memcpy(s, NULL, &host, 8) == NRT_ERROR_INVALID_ARGUMENT);
  CHECK_OK(nrt_memcpy(s, NULL, NULL, 0));
  CHECK_OK(nrt_mem_free(dev));
}

int main(void) {
  setenv("TORCHNEURON_HBM_SIZE", "128M", 1);
  setenv("TORCHNEURON_DEVICE_COUNT", "2", 1);
  CHECK_OK(nrt_init());
  register_test_kernels();
  nrt_stream *s;
  CHECK_OK(nrt_stream_from_pool(0, 0, &s));
  /* sizes around the staging limit (1 MiB) and the small/large pools */
  static const size_t sizes[] = {1, 100, 4097, (1u << 20) - 1, 1u << 20, (1u << 20) + 1,
                                 (3u << 20) + 17};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) round_trip(s, sizes[i]);
  round_trip(nrt_stream_default(0), 12345);
  test_order_with_kernels(s);
  test_bad_copies(s);
  test_blocking_copy(s);
  return CHECK_SUMMARY();
}
