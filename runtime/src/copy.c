/* copy.c — the copy engine: bytes between host and device memory.
 *
 * Device and pinned host memory copy asynchronously (a MEMCPY task).
 * Pageable host memory may be reused by the caller as soon as the call
 * returns, so, as with cudaMemcpyAsync: a copy *to* pageable memory waits
 * for the stream and copies; a copy *from* pageable memory is staged into a
 * private buffer (up to STAGE_LIMIT bytes, then queued) or, when larger,
 * waits for the stream and copies directly.
 * Copies are named by direction ("memcpy HtoD", "DtoH", "DtoD", "HtoH") for
 * the tracer; a synchronous copy done by the calling thread is traced too,
 * as host work of the stream, so the profiler sees every copy. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define STAGE_LIMIT ((size_t)1 << 20)

typedef struct staged {
  void *dst;
  size_t bytes;
  _Alignas(16) unsigned char data[];
} staged;

static void copy_staged(void *arg) {
  staged *s = arg;
  memcpy(s->dst, s->data, s->bytes);
  free(s);
}

/* *device gets the device whose HBM holds p (-1: host memory); a device
 * range must end inside that same HBM. */
static int device_range(const void *p, size_t bytes, int *device) {
  *device = nrt_mem_device_of(p);
  if (*device < 0) return 1;
  uintptr_t last = (uintptr_t)p + (bytes - 1);
  return last >= (uintptr_t)p && nrt_mem_device_of((const void *)last) == *device;
}

static const char *direction_name(int src_device, int dst_device) {
  static const char *const names[2][2] = {{"memcpy HtoH", "memcpy HtoD"},
                                          {"memcpy DtoH", "memcpy DtoD"}};
  return names[src_device >= 0][dst_device >= 0];
}

/* The copy by the calling thread once everything queued on s has run: the
 * stream's order holds without a task, and the caller, who waits for the
 * result anyway, is spared waking the worker and being woken by it (two
 * thread wake-ups, ~20 us each on a VM). */
static nrt_status copy_after_stream(nrt_stream *s, void *dst, const void *src, size_t bytes,
                                    const char *name) {
  nrt_status status = nrt_stream_synchronize(s);
  uint64_t start = nrt_trace_enabled() ? nrt_now_ns() : 0;
  memcpy(dst, src, bytes);
  if (start) nrt_trace_host_work(s, name, NRT_KERNEL_MEMCPY, start, nrt_now_ns());
  return status;
}

/* The arguments' checks both copies make: NRT_SUCCESS with the devices of
 * the two ranges (-1: host) in *dd and *sd. */
static nrt_status check_copy(const char *fn, nrt_stream *s, const void *dst, const void *src,
                             size_t bytes, int *dd, int *sd) {
  if (!s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: stream is NULL", fn);
  if (!dst || !src) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "%s: NULL pointer", fn);
  if (!device_range(dst, bytes, dd) || !device_range(src, bytes, sd))
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT,
                    "%s: %zu bytes run past the end of device memory", fn, bytes);
  return NRT_SUCCESS;
}

nrt_status nrt_memcpy_async(nrt_stream *s, void *dst, const void *src, size_t bytes) {
  if (s && bytes == 0) return NRT_SUCCESS;
  int dd = -1, sd = -1; /* set by check_copy; initialised for the compiler's flow analysis */
  nrt_status bad = check_copy("nrt_memcpy_async", s, dst, src, bytes, &dd, &sd);
  if (bad != NRT_SUCCESS) return bad;
  const char *name = direction_name(sd, dd);
  int dst_async = dd >= 0 || nrt_host_range_pinned(dst, bytes);
  int src_async = sd >= 0 || nrt_host_range_pinned(src, bytes);

  if (dst_async && src_async) {
    nrt_task t = {.kernel = NRT_KERNEL_MEMCPY, .name = name};
    *(nrt_memcpy_params *)t.params = (nrt_memcpy_params){dst, src, bytes};
    return nrt_launch(s, &t);
  }
  if (dst_async && bytes <= STAGE_LIMIT) { /* pageable source: stage it */
    staged *st = malloc(sizeof *st + bytes);
    if (st) {
      st->dst = dst;
      st->bytes = bytes;
      memcpy(st->data, src, bytes);
      nrt_task t = {.kernel = NRT_KERNEL_HOST_FN, .name = name};
      *(nrt_host_fn_params *)t.params = (nrt_host_fn_params){copy_staged, st};
      nrt_status status = nrt_launch(s, &t);
      if (status != NRT_SUCCESS && status != NRT_ERROR_KERNEL_FAILED) free(st);
      return status;
    }
  }
  return copy_after_stream(s, dst, src, bytes, name);
}

nrt_status nrt_memcpy(nrt_stream *s, void *dst, const void *src, size_t bytes) {
  if (s && bytes == 0) return NRT_SUCCESS;
  int dd = -1, sd = -1; /* set by check_copy; initialised for the compiler's flow analysis */
  nrt_status bad = check_copy("nrt_memcpy", s, dst, src, bytes, &dd, &sd);
  if (bad != NRT_SUCCESS) return bad;
  return copy_after_stream(s, dst, src, bytes, direction_name(sd, dd));
}
