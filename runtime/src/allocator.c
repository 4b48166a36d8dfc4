/* allocator.c — the caching allocator over a device's arena, modelled on
 * PyTorch's CUDACachingAllocator.
 *
 * - Requests round up to 512 B.  Requests up to 1 MiB come from the small
 *   pool (2 MiB segments), larger ones from the large pool (segments of the
 *   request rounded up to 2 MiB).
 * - A segment belongs to the stream it was allocated for; its free blocks
 *   sit in that stream's pool, binned by size, and are found by best fit.
 *   Blocks split on allocation (remainder >= 512 B small, > 1 MiB large)
 *   and merge with free neighbours on free.
 * - Stream-ordered reuse: a freed block is reusable at once by later work on
 *   its own stream (which runs after the work that used it).  Streams added
 *   by nrt_mem_record_stream are waited for: the block stays "pending" until
 *   each of them has completed the tasks launched before the free.
 * - A segment goes back to the arena (empty_cache, OOM retry) only once the
 *   stream that last freed into it has run past that free, so no queued
 *   task can touch memory that another stream now owns.
 * - Out of memory: wait for the device, release every unused segment,
 *   retry once, then NRT_ERROR_OUT_OF_MEMORY. Nothing aborts.  The wait
 *   (here and in empty_cache) leaves kernel errors on their streams: they
 *   belong to whoever synchronises next, not to an allocation. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define ROUND_BYTES 512u
#define SMALL_LIMIT ((size_t)1 << 20)
#define SMALL_SEGMENT ((size_t)2 << 20)
#define HASH_BITS 16
/* Free blocks are binned by size, 4 bins per power of two from 512 B up to
 * 2^47 B (TLSF-style); each bin is a list sorted by size.  Best fit scans
 * only the request's own bin, then takes the smallest block of the next
 * non-empty bin (a bitmap finds it), so the cost does not grow with the
 * number of cached blocks. */
#define MIN_LOG2 9
#define BIN_COUNT ((47 - MIN_LOG2) * 4)
#define BITMAP_WORDS ((BIN_COUNT + 63) / 64)

enum { POOL_SMALL, POOL_LARGE };

typedef struct wait_point {
  nrt_stream *stream;
  uint64_t seq; /* the stream's launch count at free time */
} wait_point;

typedef struct block {
  char *ptr;
  size_t size, requested;
  nrt_stream *stream;     /* owner of the segment */
  int pool;               /* POOL_SMALL / POOL_LARGE */
  int allocated;
  uint64_t free_seq;      /* owner's launch count when last freed */
  struct block *prev, *next;           /* neighbours in the segment */
  struct block *pool_prev, *pool_next; /* free list, or pending list */
  struct block *hash_next;             /* live-allocation table */
  wait_point *uses;                    /* record_stream: other streams */
  int n_uses, cap_uses;
} block;

typedef struct free_pool {
  block *bins[BIN_COUNT];
  uint64_t nonempty[BITMAP_WORDS];
} free_pool;

struct nrt_allocator {
  nrt_device *dev;
  pthread_mutex_t lock;
  free_pool pools[NRT_STREAM_SLOTS][2];
  block *pending; /* freed, waiting for recorded streams */
  block *live[1u << HASH_BITS];
  nrt_mem_stats st;
};

/* The profiler's observer (nrt_mem_set_observer): called after the lock is
 * released, so it may take other locks (the GIL, to capture a stack). */
static _Atomic(nrt_mem_observer) observer;

void nrt_mem_set_observer(nrt_mem_observer fn) { atomic_store(&observer, fn); }

nrt_status nrt_allocator_create(nrt_device *dev, nrt_allocator **out) {
  nrt_allocator *a = calloc(1, sizeof *a);
  if (!a) return nrt_fail(NRT_ERROR_INTERNAL, "out of host memory for the allocator");
  a->dev = dev;
  pthread_mutex_init(&a->lock, NULL);
  *out = a;
  return NRT_SUCCESS;
}

static inline void raise_peak(uint64_t cur, uint64_t *peak) {
  if (cur > *peak) *peak = cur;
}

static unsigned hash_of(const void *p) {
  return (unsigned)(((uintptr_t)p >> 9) * 0x9E3779B97F4A7C15ull >> (64 - HASH_BITS));
}

/* ---- free lists, binned by size */

static int bin_of(size_t size) {
  int log2 = 63 - __builtin_clzll((unsigned long long)size);
  return (log2 - MIN_LOG2) * 4 + (int)((size >> (log2 - 2)) & 3);
}

static free_pool *pool_of(nrt_allocator *a, const block *b) {
  return &a->pools[nrt_stream_id(b->stream)][b->pool];
}

/* Equal sizes go first (last freed, first reused: its lines are warm). */
static void pool_insert(nrt_allocator *a, block *b) {
  free_pool *fp = pool_of(a, b);
  int bin = bin_of(b->size);
  block **head = &fp->bins[bin], *prev = NULL, *cur = *head;
  while (cur && cur->size < b->size) {
    prev = cur;
    cur = cur->pool_next;
  }
  b->pool_prev = prev;
  b->pool_next = cur;
  if (cur) cur->pool_prev = b;
  if (prev) prev->pool_next = b; else *head = b;
  fp->nonempty[bin / 64] |= (uint64_t)1 << (bin % 64);
}

static void pool_remove(nrt_allocator *a, block *b) {
  free_pool *fp = pool_of(a, b);
  int bin = bin_of(b->size);
  if (b->pool_prev) b->pool_prev->pool_next = b->pool_next; else fp->bins[bin] = b->pool_next;
  if (b->pool_next) b->pool_next->pool_prev = b->pool_prev;
  b->pool_prev = b->pool_next = NULL;
  if (!fp->bins[bin]) fp->nonempty[bin / 64] &= ~((uint64_t)1 << (bin % 64));
}

/* First non-empty bin at or after `bin`, or -1. */
static int next_bin(const free_pool *fp, int bin) {
  for (int w = bin / 64; w < BITMAP_WORDS; w++) {
    uint64_t bits = fp->nonempty[w];
    if (w == bin / 64) bits &= ~(uint64_t)0 << (bin % 64);
    if (bits) return w * 64 + __builtin_ctzll(bits);
  }
  return -1;
}

static int is_free_in_pool(const block *b) { return b && !b->allocated && b->n_uses == 0; }

/* Returns a freed block to its stream's pool, merged with free neighbours. */
static void release_to_pool(nrt_allocator *a, block *b) {
  a->st.active_bytes -= b->size;
  b->n_uses = 0;
  block *n = b->next;
  if (is_free_in_pool(n)) {
    pool_remove(a, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    if (n->free_seq > b->free_seq) b->free_seq = n->free_seq;
    free(n->uses);
    free(n);
  }
  block *p = b->prev;
  if (is_free_in_pool(p)) {
    pool_remove(a, p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    if (b->free_seq > p->free_seq) p->free_seq = b->free_seq;
    free(b->uses);
    free(b);
    b = p;
  }
  pool_insert(a, b);
}

static int uses_done(const block *b) {
  for (int i = 0; i < b->n_uses; i++)
    if (nrt_stream_completed(b->uses[i].stream) < b->uses[i].seq) return 0;
  return 1;
}

static void process_pending(nrt_allocator *a) {
  block **link = &a->pending;
  while (*link) {
    block *b = *link;
    if (uses_done(b)) {
      *link = b->pool_next;
      b->pool_next = NULL;
      release_to_pool(a, b);
    } else {
      link = &b->pool_next;
    }
  }
}

/* Gives every whole-segment free block whose last use has run back to the
 * arena. */
static void release_cached(nrt_allocator *a) {
  for (int s = 0; s < NRT_STREAM_SLOTS; s++)
    for (int p = 0; p < 2; p++)
      for (int bin = 0; (bin = next_bin(&a->pools[s][p], bin)) >= 0; bin++) {
        block *b = a->pools[s][p].bins[bin];
        while (b) {
          block *next = b->pool_next;
          if (!b->prev && !b->next && nrt_stream_completed(b->stream) >= b->free_seq) {
            pool_remove(a, b);
            nrt_arena_give(a->dev->arena, b->ptr, b->size);
            a->st.reserved_bytes -= b->size;
            a->st.segment_count--;
            a->st.segment_free_count++;
            free(b->uses);
            free(b);
          }
          b = next;
        }
      }
}

static block *best_fit(nrt_allocator *a, nrt_stream *s, int pool, size_t size) {
  free_pool *fp = &a->pools[nrt_stream_id(s)][pool];
  int bin = bin_of(size);
  for (block *b = fp->bins[bin]; b; b = b->pool_next)
    if (b->size >= size) return b;
  bin = next_bin(fp, bin + 1);
  return bin < 0 ? NULL : fp->bins[bin];
}

static block *new_segment(nrt_allocator *a, nrt_stream *s, int pool, size_t size) {
  size_t seg = pool == POOL_SMALL ? SMALL_SEGMENT
                                  : (size + NRT_SEGMENT_ALIGN - 1) & ~(NRT_SEGMENT_ALIGN - 1);
  block *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->ptr = nrt_arena_take(a->dev->arena, seg);
  if (!b->ptr) {
    free(b);
    return NULL;
  }
  b->size = seg;
  b->stream = s;
  b->pool = pool;
  a->st.reserved_bytes += seg;
  raise_peak(a->st.reserved_bytes, &a->st.reserved_bytes_peak);
  a->st.segment_count++;
  a->st.segment_alloc_count++;
  raise_peak(a->st.segment_count, &a->st.segment_peak);
  pool_insert(a, b);
  return b;
}

static block *take_block(nrt_allocator *a, nrt_stream *s, int pool, size_t size) {
  process_pending(a);
  block *b = best_fit(a, s, pool, size);
  return b ? b : new_segment(a, s, pool, size);
}

static void split(nrt_allocator *a, block *b, size_t size) {
  size_t rest = b->size - size;
  if (b->pool == POOL_SMALL ? rest < ROUND_BYTES : rest <= SMALL_LIMIT) return;
  block *r = calloc(1, sizeof *r);
  if (!r) return; /* keep the block whole */
  *r = (block){.ptr = b->ptr + size, .size = rest, .stream = b->stream, .pool = b->pool,
               .free_seq = b->free_seq, .prev = b, .next = b->next};
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  pool_insert(a, r);
}

static uint64_t total_free_bytes(nrt_allocator *a) {
  uint64_t cap = nrt_arena_capacity(a->dev->arena);
  return cap - a->st.reserved_bytes;
}

static nrt_status out_of_memory(nrt_allocator *a, size_t bytes) {
  a->st.oom_count++;
  double gib = 1024.0 * 1024.0 * 1024.0;
  return nrt_fail(NRT_ERROR_OUT_OF_MEMORY,
                  "Tried to allocate %.2f GiB. Device %d has a total capacity of %.2f GiB of "
                  "which %.2f GiB is free. Of the allocated memory %.2f GiB is allocated and "
                  "%.2f GiB is reserved but unallocated.",
                  bytes / gib, a->dev->index, nrt_arena_capacity(a->dev->arena) / gib,
                  total_free_bytes(a) / gib, a->st.allocated_bytes / gib,
                  (a->st.reserved_bytes - a->st.allocated_bytes) / gib);
}

nrt_status nrt_mem_alloc(nrt_stream *s, size_t bytes, void **ptr) {
  if (!s || !ptr) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_mem_alloc: NULL argument");
  *ptr = NULL;
  nrt_status forked = nrt_check_not_forked();
  if (forked != NRT_SUCCESS) return forked;
  if (bytes == 0) return NRT_SUCCESS;
  nrt_allocator *a = s->device->alloc;
  if (bytes > nrt_arena_capacity(a->dev->arena)) {
    pthread_mutex_lock(&a->lock);
    nrt_status st = out_of_memory(a, bytes);
    pthread_mutex_unlock(&a->lock);
    return st;
  }
  size_t size = (bytes + ROUND_BYTES - 1) & ~(size_t)(ROUND_BYTES - 1);
  int pool = size <= SMALL_LIMIT ? POOL_SMALL : POOL_LARGE;

  pthread_mutex_lock(&a->lock);
  block *b = take_block(a, s, pool, size);
  if (!b) { /* flush the cache and retry once, as CUDA's allocator does */
    pthread_mutex_unlock(&a->lock);
    nrt_device_wait_idle(a->dev);
    pthread_mutex_lock(&a->lock);
    a->st.retry_count++;
    process_pending(a);
    release_cached(a);
    b = take_block(a, s, pool, size);
    if (!b) {
      nrt_status st = out_of_memory(a, bytes);
      pthread_mutex_unlock(&a->lock);
      return st;
    }
  }
  pool_remove(a, b);
  split(a, b, size);
  b->allocated = 1;
  b->requested = bytes;
  unsigned h = hash_of(b->ptr);
  b->hash_next = a->live[h];
  a->live[h] = b;

  nrt_mem_stats *st = &a->st;
  st->allocated_bytes += b->size;
  raise_peak(st->allocated_bytes, &st->allocated_bytes_peak);
  st->allocated_bytes_total += b->size;
  st->active_bytes += b->size;
  raise_peak(st->active_bytes, &st->active_bytes_peak);
  st->requested_bytes += bytes;
  raise_peak(st->requested_bytes, &st->requested_bytes_peak);
  st->alloc_count++;
  st->allocation_current++;
  raise_peak(st->allocation_current, &st->allocation_peak);
  nrt_mem_observer fn = atomic_load_explicit(&observer, memory_order_relaxed);
  nrt_mem_event e;
  if (fn) { /* totals read under the lock, reported after it */
    e = (nrt_mem_event){.kind = NRT_MEM_EVENT_ALLOC, .device = a->dev->index, .ptr = b->ptr,
                        .size = b->size, .requested = bytes, .stream = b->stream->id,
                        .allocated_bytes = st->allocated_bytes,
                        .reserved_bytes = st->reserved_bytes};
  }
  pthread_mutex_unlock(&a->lock);
  *ptr = b->ptr;
  if (fn) fn(&e);
  return NRT_SUCCESS;
}

static nrt_allocator *allocator_of(const void *ptr) {
  int d = nrt_mem_device_of(ptr);
  return d < 0 ? NULL : nrt_device_get(d)->alloc;
}

/* Unlinks ptr's live block (caller holds the lock); NULL if not live. */
static block *find_live(nrt_allocator *a, const void *ptr, int unlink) {
  for (block **link = &a->live[hash_of(ptr)]; *link; link = &(*link)->hash_next)
    if ((*link)->ptr == ptr) {
      block *b = *link;
      if (unlink) {
        *link = b->hash_next;
        b->hash_next = NULL;
      }
      return b;
    }
  return NULL;
}

nrt_status nrt_mem_free(void *ptr) {
  if (!ptr) return NRT_SUCCESS;
  nrt_status forked = nrt_check_not_forked();
  if (forked != NRT_SUCCESS) return forked;
  nrt_allocator *a = allocator_of(ptr);
  if (!a) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_mem_free: %p is not device memory", ptr);
  pthread_mutex_lock(&a->lock);
  block *b = find_live(a, ptr, 1);
  if (!b) {
    pthread_mutex_unlock(&a->lock);
    return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_mem_free: %p was not allocated (or is freed)",
                    ptr);
  }
  nrt_mem_stats *st = &a->st;
  st->allocated_bytes -= b->size;
  st->freed_bytes_total += b->size;
  st->requested_bytes -= b->requested;
  st->free_count++;
  st->allocation_current--;
  b->allocated = 0;
  nrt_mem_observer fn = atomic_load_explicit(&observer, memory_order_relaxed);
  nrt_mem_event e;
  if (fn) {
    e = (nrt_mem_event){.kind = NRT_MEM_EVENT_FREE, .device = a->dev->index, .ptr = b->ptr,
                        .size = b->size, .requested = b->requested, .stream = b->stream->id,
                        .allocated_bytes = st->allocated_bytes,
                        .reserved_bytes = st->reserved_bytes};
  }
  b->free_seq = nrt_stream_launched(b->stream);
  int n = 0;
  for (int i = 0; i < b->n_uses; i++) { /* keep only streams with work left */
    wait_point w = {b->uses[i].stream, nrt_stream_launched(b->uses[i].stream)};
    if (nrt_stream_completed(w.stream) < w.seq) b->uses[n++] = w;
  }
  b->n_uses = n;
  /* Adaptive eager: the block's stream learns, in order, that nothing
   * after this point reads the block's old contents -- unless another
   * stream still might (recorded uses). */
  nrt_stream *hint_stream = NULL;
  void *hint_ptr = b->ptr;
  size_t hint_bytes = b->size;
  if (n) {
    b->pool_next = a->pending;
    a->pending = b;
  } else {
    if (b->stream && nrt_adaptive_active()) hint_stream = b->stream;
    release_to_pool(a, b);
  }
  pthread_mutex_unlock(&a->lock);
  if (hint_stream) nrt_stream_hint_free(hint_stream, hint_ptr, hint_bytes);
  if (fn) fn(&e);
  return NRT_SUCCESS;
}

nrt_status nrt_mem_record_stream(void *ptr, nrt_stream *s) {
  if (!ptr || !s) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_mem_record_stream: NULL argument");
  nrt_status forked = nrt_check_not_forked();
  if (forked != NRT_SUCCESS) return forked;
  nrt_allocator *a = allocator_of(ptr);
  if (!a) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "%p is not device memory", ptr);
  pthread_mutex_lock(&a->lock);
  block *b = find_live(a, ptr, 0);
  nrt_status st = NRT_SUCCESS;
  if (!b) {
    st = nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "%p is not a live allocation", ptr);
  } else if (s != b->stream) {
    int known = 0;
    for (int i = 0; i < b->n_uses; i++) known |= b->uses[i].stream == s;
    if (!known && b->n_uses == b->cap_uses) {
      int cap = b->cap_uses ? 2 * b->cap_uses : 4;
      wait_point *u = realloc(b->uses, (size_t)cap * sizeof *u);
      if (!u) st = nrt_fail(NRT_ERROR_INTERNAL, "out of host memory");
      else {
        b->uses = u;
        b->cap_uses = cap;
      }
    }
    if (!known && st == NRT_SUCCESS) b->uses[b->n_uses++] = (wait_point){s, 0};
  }
  pthread_mutex_unlock(&a->lock);
  return st;
}

nrt_status nrt_mem_empty_cache(int device) {
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  nrt_device_wait_idle(d); /* kernel errors stay for the next synchronisation */
  pthread_mutex_lock(&d->alloc->lock);
  process_pending(d->alloc);
  release_cached(d->alloc);
  pthread_mutex_unlock(&d->alloc->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_mem_stats_get(int device, nrt_mem_stats *stats) {
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  if (!stats) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "stats is NULL");
  nrt_allocator *a = d->alloc;
  pthread_mutex_lock(&a->lock);
  uint64_t inactive = 0; /* free pieces of segments that are partly in use */
  for (int s = 0; s < NRT_STREAM_SLOTS; s++)
    for (int p = 0; p < 2; p++)
      for (int bin = 0; (bin = next_bin(&a->pools[s][p], bin)) >= 0; bin++)
        for (block *b = a->pools[s][p].bins[bin]; b; b = b->pool_next)
          if (b->prev || b->next) inactive += b->size;
  a->st.inactive_split_bytes = inactive;
  *stats = a->st;
  pthread_mutex_unlock(&a->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_mem_stats_reset_peak(int device) {
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  nrt_mem_stats *st = &d->alloc->st;
  pthread_mutex_lock(&d->alloc->lock);
  st->allocated_bytes_peak = st->allocated_bytes;
  st->reserved_bytes_peak = st->reserved_bytes;
  st->active_bytes_peak = st->active_bytes;
  st->requested_bytes_peak = st->requested_bytes;
  st->allocation_peak = st->allocation_current;
  st->segment_peak = st->segment_count;
  pthread_mutex_unlock(&d->alloc->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_mem_stats_reset_accumulated(int device) {
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  nrt_mem_stats *st = &d->alloc->st;
  pthread_mutex_lock(&d->alloc->lock);
  st->allocated_bytes_total = st->freed_bytes_total = 0;
  st->alloc_count = st->free_count = 0;
  st->segment_alloc_count = st->segment_free_count = 0;
  st->retry_count = st->oom_count = 0;
  pthread_mutex_unlock(&d->alloc->lock);
  return NRT_SUCCESS;
}

nrt_status nrt_mem_info(int device, size_t *free_bytes, size_t *total_bytes) {
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  if (!free_bytes || !total_bytes) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "NULL argument");
  pthread_mutex_lock(&d->alloc->lock);
  *total_bytes = nrt_arena_capacity(d->arena);
  *free_bytes = total_free_bytes(d->alloc);
  pthread_mutex_unlock(&d->alloc->lock);
  return NRT_SUCCESS;
}

int nrt_mem_device_of(const void *ptr) {
  if (!ptr || nrt_ensure_init() != NRT_SUCCESS) return -1;
  for (int i = 0; i < nrt_cfg.device_count; i++)
    if (nrt_arena_contains(nrt_device_get(i)->arena, ptr)) return i;
  return -1;
}

/* Emits the blocks of the segment that starts at head, in address order. */
static void snapshot_segment(const block *head, nrt_mem_block_info *out, size_t max, size_t *n) {
  for (const block *b = head; b; b = b->next) {
    if (*n < max) {
      int state = b->allocated ? NRT_BLOCK_ALLOCATED
                  : b->n_uses  ? NRT_BLOCK_PENDING_FREE
                               : NRT_BLOCK_FREE;
      out[*n] = (nrt_mem_block_info){.segment = head->ptr, .ptr = b->ptr, .size = b->size,
                                     .requested = b->allocated ? b->requested : 0,
                                     .state = state, .large_pool = b->pool == POOL_LARGE,
                                     .stream = b->stream->id};
    }
    (*n)++;
  }
}

/* Every block is live (hash table), free (a pool) or pending, and each
 * segment's first block (prev == NULL) is in exactly one of them: visiting
 * the heads found there visits every segment once. */
nrt_status nrt_mem_snapshot(int device, nrt_mem_block_info *out, size_t max, size_t *n) {
  if (!n || (!out && max)) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "nrt_mem_snapshot: NULL argument");
  int count = 0;
  nrt_status st = nrt_device_count(&count);
  if (st != NRT_SUCCESS) return st;
  if (device < 0 || device >= count)
    return nrt_fail(NRT_ERROR_INVALID_DEVICE, "nrt_mem_snapshot: invalid device %d", device);
  nrt_allocator *a = nrt_device_get(device)->alloc;
  *n = 0;
  pthread_mutex_lock(&a->lock);
  for (size_t h = 0; h < (1u << HASH_BITS); h++)
    for (const block *b = a->live[h]; b; b = b->hash_next)
      if (!b->prev) snapshot_segment(b, out, max, n);
  for (int s = 0; s < NRT_STREAM_SLOTS; s++)
    for (int p = 0; p < 2; p++)
      for (int bin = 0; bin < BIN_COUNT; bin++)
        for (const block *b = a->pools[s][p].bins[bin]; b; b = b->pool_next)
          if (!b->prev) snapshot_segment(b, out, max, n);
  for (const block *b = a->pending; b; b = b->pool_next)
    if (!b->prev) snapshot_segment(b, out, max, n);
  pthread_mutex_unlock(&a->lock);
  return NRT_SUCCESS;
}
