/* tmp_buffers.c — see tmp_buffers.h. */
#include "common/tmp_buffers.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TMP_CACHED 8
#define TMP_CACHE_BYTES ((size_t)64 << 20)
#define TMP_HEADER 64 /* keeps the caller's pointer 64-byte aligned */

typedef struct tmp_cache {
  void *block[TMP_CACHED]; /* each starts with its capacity (size_t) */
  size_t bytes;            /* cached in all */
} tmp_cache;

static _Thread_local tmp_cache cache;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static size_t capacity(void *block) { return *(size_t *)block; }

static void release_all(void *unused) {
  (void)unused;
  for (int i = 0; i < TMP_CACHED; i++) {
    free(cache.block[i]);
    cache.block[i] = NULL;
  }
  cache.bytes = 0;
}

static void make_key(void) { pthread_key_create(&exit_key, release_all); }

void *nk_tmp_malloc(size_t bytes) {
  int best = -1;
  for (int i = 0; i < TMP_CACHED; i++)
    if (cache.block[i] && capacity(cache.block[i]) >= bytes &&
        (best < 0 || capacity(cache.block[i]) < capacity(cache.block[best])))
      best = i;
  void *block;
  if (best >= 0) {
    block = cache.block[best];
    cache.block[best] = NULL;
    cache.bytes -= capacity(block);
  } else {
    if (bytes > SIZE_MAX - TMP_HEADER - 63) return NULL;
    const size_t total = (TMP_HEADER + bytes + 63) / 64 * 64;
    block = aligned_alloc(64, total);
    if (!block) return NULL;
    *(size_t *)block = total - TMP_HEADER;
  }
  return (char *)block + TMP_HEADER;
}

void *nk_tmp_calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  void *p = nk_tmp_malloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void nk_tmp_free(void *p) {
  if (!p) return;
  void *block = (char *)p - TMP_HEADER;
  const size_t cap = capacity(block);
  if (cap > TMP_CACHE_BYTES) {
    free(block);
    return;
  }
  pthread_once(&exit_once, make_key);
  pthread_setspecific(exit_key, &cache); /* non-NULL: release_all runs at thread exit */
  /* make room: drop the smallest cached blocks while over either limit */
  for (;;) {
    int empty = -1, smallest = -1;
    for (int i = 0; i < TMP_CACHED; i++) {
      if (!cache.block[i]) empty = i;
      else if (smallest < 0 || capacity(cache.block[i]) < capacity(cache.block[smallest])) smallest = i;
    }
    if (empty >= 0 && cache.bytes + cap <= TMP_CACHE_BYTES) {
      cache.block[empty] = block;
      cache.bytes += cap;
      return;
    }
    if (smallest < 0 || capacity(cache.block[smallest]) >= cap) { /* keep the larger ones */
      free(block);
      return;
    }
    cache.bytes -= capacity(cache.block[smallest]);
    free(cache.block[smallest]);
    cache.block[smallest] = NULL;
  }
}
