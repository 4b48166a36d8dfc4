/* arena.c — a device's HBM: one reservation of address space
 * (MAP_NORESERVE, so pages are committed only when touched) that starts on
 * a 2 MiB boundary, handed out in segments of whole 2 MiB units by first
 * fit over an address-ordered list of free ranges that coalesces on
 * release.  Released ranges give their pages back to the OS
 * (MADV_DONTNEED).  The allocator above serialises calls. */
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

typedef struct range {
  char *base;
  size_t size;
  struct range *next;
} range;

struct nrt_arena {
  char *base;
  size_t capacity;
  range *free_list; /* address order */
};

/* Reserves capacity bytes starting at a 2 MiB boundary (so segments can be
 * backed by huge pages): over-reserve by one alignment, trim both ends. */
static char *reserve_aligned(size_t capacity) {
  size_t span = capacity + NRT_SEGMENT_ALIGN;
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uintptr_t mask = NRT_SEGMENT_ALIGN - 1;
  char *base = (char *)(((uintptr_t)raw + mask) & ~mask);
  if (base > raw) munmap(raw, (size_t)(base - raw));
  size_t tail = (size_t)(raw + span - (base + capacity));
  if (tail) munmap(base + capacity, tail);
  return base;
}

nrt_status nrt_arena_create(uint64_t capacity, nrt_arena **out) {
  capacity &= ~(uint64_t)(NRT_SEGMENT_ALIGN - 1);
  nrt_arena *a = calloc(1, sizeof *a);
  range *all = calloc(1, sizeof *all);
  char *base = a && all ? reserve_aligned(capacity) : NULL;
  if (!base) {
    free(a);
    free(all);
    return nrt_fail(NRT_ERROR_INTERNAL, "cannot reserve %llu bytes of address space for HBM",
                    (unsigned long long)capacity);
  }
  a->base = base;
  a->capacity = capacity;
  *all = (range){a->base, capacity, NULL};
  a->free_list = all;
  *out = a;
  return NRT_SUCCESS;
}

void *nrt_arena_take(nrt_arena *a, size_t bytes) {
  for (range **link = &a->free_list; *link; link = &(*link)->next) {
    range *r = *link;
    if (r->size < bytes) continue;
    char *p = r->base;
    r->base += bytes;
    r->size -= bytes;
    if (r->size == 0) {
      *link = r->next;
      free(r);
    }
    return p;
  }
  return NULL;
}

void nrt_arena_give(nrt_arena *a, void *ptr, size_t bytes) {
  char *p = ptr;
  madvise(p, bytes, MADV_DONTNEED);
  range **link = &a->free_list;
  range *prev = NULL;
  while (*link && (*link)->base < p) {
    prev = *link;
    link = &(*link)->next;
  }
  range *next = *link;
  if (prev && prev->base + prev->size == p) { /* grow the range before */
    prev->size += bytes;
    if (next && p + bytes == next->base) {
      prev->size += next->size;
      prev->next = next->next;
      free(next);
    }
    return;
  }
  if (next && p + bytes == next->base) { /* grow the range after */
    next->base = p;
    next->size += bytes;
    return;
  }
  range *r = malloc(sizeof *r);
  if (!r) return; /* the range leaks from the arena; never unsafe */
  *r = (range){p, bytes, next};
  *link = r;
}

int nrt_arena_contains(const nrt_arena *a, const void *ptr) {
  const char *p = ptr;
  return a && p >= a->base && p < a->base + a->capacity;
}

uint64_t nrt_arena_capacity(const nrt_arena *a) { return a->capacity; }
