/* tmp_buffers.h — per-task work buffers, kept by the thread that frees
 * them for its next task.
 *
 * Kernels that need a buffer per task (convolution's widened copies, im2col
 * columns, accumulators) used malloc/calloc and free.  Buffers of a few
 * hundred KiB to a few MiB then went back to glibc at every free: its
 * per-thread arena trimmed the top of its heap (madvise MADV_DONTNEED), and
 * the next task faulted the same pages in again -- a bfloat16 3x3
 * convolution of 32x16x16x16 spent 80% of its 900 us that way.  These
 * keep up to TMP_CACHED blocks (TMP_CACHE_BYTES in all) per thread; a
 * request takes the smallest cached block that fits.  nk_tmp_calloc zeroes
 * what it hands out, as calloc does.  A thread's cache is freed when the
 * thread exits. */
#ifndef NK_TMP_BUFFERS_H
#define NK_TMP_BUFFERS_H

#include <stddef.h>

void *nk_tmp_malloc(size_t bytes);
void *nk_tmp_calloc(size_t n, size_t size);
void nk_tmp_free(void *p); /* NULL is a no-op */

#endif /* NK_TMP_BUFFERS_H */
