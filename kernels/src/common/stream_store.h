/* stream_store.h — the kernels' one bound for non-temporal stores, and
 * copying a finished row from cache to a large output with them.
 *
 * A plain store to a line that is not in the cache first reads it
 * (read-for-ownership): for an output too large to stay cached that read is
 * a third of a read-once-write-once kernel's memory traffic.  Outputs of
 * NK_STREAM_STORE_BYTES or more are written with streaming stores: the
 * binary ops' and fill's vector rows (binary_simd.h, fill_rows.h), and
 * kernels that compute a row in a buffer (the normalisations, whose rows
 * are read three times and so are staged in L1 anyway) hand it to memory
 * with nk_stream_bytes.  SSE2's
 * 16-byte streaming store is in the x86-64 baseline, so this needs no ISA
 * variant: the write-combining buffers merge a line's four stores.  The
 * bytes are the buffer's; the caller fences (nk_stream_fence) before its
 * work is done, so the stores are ordered before the task completes. */
#ifndef NK_STREAM_STORE_H
#define NK_STREAM_STORE_H

#include <emmintrin.h>
#include <stdint.h>
#include <string.h>

#define NK_STREAM_STORE_BYTES (4 << 20)

static inline void nk_stream_bytes(void *dst, const void *src, size_t n) {
  char *d = (char *)dst;
  const char *s = (const char *)src;
  const size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (n < head + 64) { /* no whole line to stream */
    memcpy(d, s, n);
    return;
  }
  memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= 16; d += 16, s += 16, n -= 16)
    _mm_stream_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
  memcpy(d, s, n);
}

static inline void nk_stream_fence(void) { _mm_sfence(); }

#endif /* NK_STREAM_STORE_H */
