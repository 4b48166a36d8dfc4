/* host.c — pinned ("page-locked") host memory.  Blocks are mmap'd and
 * mlock'd when the process may lock memory (a failing mlock is ignored: the
 * memory is still ours and still treated as pinned).  A sorted registry of
 * live blocks answers nrt_host_is_pinned for any address inside a block. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

typedef struct pinned {
  char *base;
  size_t size;
} pinned;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pinned *blocks; /* sorted by base */
static size_t n_blocks, cap_blocks;

/* Index of the first block with base > p. */
static size_t upper_bound(const char *p) {
  size_t lo = 0, hi = n_blocks;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (blocks[mid].base <= p) lo = mid + 1; else hi = mid;
  }
  return lo;
}

nrt_status nrt_host_alloc(size_t bytes, void **ptr) {
  if (!ptr) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "ptr is NULL");
  *ptr = NULL;
  if (bytes == 0) return NRT_SUCCESS;
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return nrt_fail(NRT_ERROR_OUT_OF_MEMORY, "cannot allocate %zu bytes of pinned host memory",
                    bytes);
  (void)mlock(p, bytes);
  pthread_mutex_lock(&lock);
  if (n_blocks == cap_blocks) {
    size_t cap = cap_blocks ? 2 * cap_blocks : 64;
    pinned *grown = realloc(blocks, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&lock);
      munmap(p, bytes);
      return nrt_fail(NRT_ERROR_OUT_OF_MEMORY, "out of host memory for the pinned registry");
    }
    blocks = grown;
    cap_blocks = cap;
  }
  size_t at = upper_bound(p);
  memmove(&blocks[at + 1], &blocks[at], (n_blocks - at) * sizeof *blocks);
  blocks[at] = (pinned){p, bytes};
  n_blocks++;
  pthread_mutex_unlock(&lock);
  *ptr = p;
  return NRT_SUCCESS;
}

nrt_status nrt_host_free(void *ptr) {
  if (!ptr) return NRT_SUCCESS;
  pthread_mutex_lock(&lock);
  size_t at = upper_bound(ptr);
  if (at == 0 || blocks[at - 1].base != ptr) {
    pthread_mutex_unlock(&lock);
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "%p is not a pinned host allocation", ptr);
  }
  pinned b = blocks[at - 1];
  memmove(&blocks[at - 1], &blocks[at], (n_blocks - at) * sizeof *blocks);
  n_blocks--;
  pthread_mutex_unlock(&lock);
  munmap(b.base, b.size);
  return NRT_SUCCESS;
}

int nrt_host_range_pinned(const void *ptr, size_t bytes) {
  if (!ptr || bytes == 0) return 0;
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&lock);
  size_t at = upper_bound(ptr);
  int yes = 0;
  if (at > 0) {
    uintptr_t base = (uintptr_t)blocks[at - 1].base, size = blocks[at - 1].size;
    yes = p - base < size && bytes <= size - (p - base);
  }
  pthread_mutex_unlock(&lock);
  return yes;
}

int nrt_host_is_pinned(const void *ptr) { return nrt_host_range_pinned(ptr, 1); }
