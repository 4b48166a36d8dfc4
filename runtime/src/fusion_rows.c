/* fusion_rows.c — a fused group in short rows: each member's row loop,
 * captured once per group (nrt_row_entry), called directly on a row of at
 * most g->row elements (FUSE_ROW_ELEMENTS, more for groups of many input
 * streams), every member in program order before the next
 * row.  A row's dead intermediates then stay in L1 (8 KiB of float32 per
 * slot), where a tile's (128 KiB) stream through L2; the call costs a few
 * nanoseconds, where a kernel call per member per tile costs ~100 ns
 * (descriptor checks, the plan, the nd-iteration).
 *
 * The bits are those of the per-tile path: a row is a sub-box of the tile,
 * and the loop is the one the member's kernel picks for the tile (the
 * fusible contract: the same bits on any sub-box).
 *
 * Large stored outputs are staged (fusion.h, FUSE_STREAM_BYTES): written to
 * a row buffer, read there by later members, and streamed to memory after
 * the row; the bytes stored are the same, only the cache traffic differs. */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "fusion.h"

/* The bytes of a staging slot: a row of the widest element (complex128). */
#define STAGE_SLOT_BYTES ((size_t)FUSE_ROW_ELEMENTS * 16)

size_t nrt_fusion_stage_bytes(const fuse_group *g) { return (size_t)g->n_stage * STAGE_SLOT_BYTES; }

/* n bytes to dst without reading its lines first: non-temporal 16-byte
 * stores between an unaligned head and tail.  The caller fences. */
static void stream_copy(char *dst, const char *src, size_t n) {
#if defined(__SSE2__)
  size_t head = (size_t)(-(uintptr_t)dst & 15);
  if (head > n) head = n;
  memcpy(dst, src, head);
  size_t i = head;
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128((__m128i *)(void *)(dst + i), _mm_loadu_si128((const __m128i *)(const void *)(src + i)));
  memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

/* A worker's view of one tile in rows. */
typedef struct rows {
  const fuse_group *g;
  const nrt_row_entry *entries;
  unsigned char *scratch, *stage;
  const size_t *slot_offset;
  const fuse_jit *jit;           /* compiled: one call per row instead of one per member */
  int segment;                   /* compiled: the one segment this pass runs */
  bool pending;                  /* a row waits in idx/j0/n (one row of lookahead) */
  int64_t idx[NRT_MAX_DIMS], j0, n;
  int64_t origin[NRT_MAX_DIMS];  /* the tile's first element */
} rows;

/* Element (idx, j) of a view in memory. */
static char *element_at(const fuse_group *g, const nrt_operand *o, const int64_t *idx, int64_t j) {
  const int inner = g->ndim - 1;
  int64_t off = j * o->strides[inner];
  for (int d = 0; d < inner; d++) off += idx[d] * o->strides[d];
  return (char *)o->data + off;
}

/* Operand k's one value for the whole group, when it has one: a value the
 * kernel converted (fixed), or a constant's bytes. */
static char *invariant_ptr(const fuse_group *g, const fuse_member *m, const nrt_row_entry *e, int k) {
  if (e->fixed[k]) return (char *)e->fixed[k];
  return m->konst[k] >= 0 ? (char *)g->consts[m->konst[k]].value : NULL;
}

/* Element (idx, j) of a value the sink reads, kept in its scratch slot for
 * the whole tile as the per-tile path keeps it (the view's strides from
 * the tile's origin: the sink's kernel reads it so). */
static char *tile_scratch_at(const rows *r, const fuse_version *ver, const nrt_operand *o,
                             const int64_t *idx, int64_t j) {
  const fuse_group *g = r->g;
  const int inner = g->ndim - 1;
  int64_t off = (j - r->origin[inner]) * o->strides[inner];
  for (int d = 0; d < inner; d++) off += (idx[d] - r->origin[d]) * o->strides[d];
  return (char *)(r->scratch + r->slot_offset[ver->scratch]) + off;
}

/* Operand k's first element of the row at idx (outer dims) + j (inner). */
static char *row_ptr(const rows *r, const fuse_member *m, const nrt_row_entry *e, int k,
                     const int64_t *idx, int64_t j, int64_t *stride) {
  const fuse_group *g = r->g;
  const nrt_operand *full = &m->ops[k];
  char *value = invariant_ptr(g, m, e, k);
  if (value) {
    *stride = 0;
    return value;
  }
  *stride = full->strides[g->ndim - 1];
  if (m->staged[k])
    return (char *)(r->stage + (size_t)g->versions[m->version[k]].stage * STAGE_SLOT_BYTES);
  const fuse_version *ver = &g->versions[m->version[k]];
  if (ver->scratch >= 0 && ver->sink_reads) return tile_scratch_at(r, ver, full, idx, j);
  if (ver->scratch >= 0) return (char *)(r->scratch + r->slot_offset[ver->scratch]); /* one row, dense (fuse_rows_ok) */
  return element_at(g, full, idx, j);
}

/* One segment of the compiled group on a row: every (member, operand) pair
 * it reads or stores, at this row (dead intermediates are registers, but
 * the one the sink reads, which is stored to its tile scratch; nothing is
 * staged: its stores go to memory directly). */
static void run_row_jit(const rows *r, const int64_t *idx, int64_t j0, int64_t n) {
  const fuse_group *g = r->g;
  const fuse_jit *jit = r->jit;
  const fuse_jit_segment *seg = &jit->seg[r->segment];
  const int end = r->segment + 1 < jit->n_segments ? jit->seg[r->segment + 1].first_arg : jit->n_args;
  char *p[FUSE_JIT_MAX_ARGS];
  for (int a = seg->first_arg; a < end; a++) {
    const int i = jit->arg_member[a], k = jit->arg_operand[a];
    const fuse_member *m = &g->members[i];
    char *value = invariant_ptr(g, m, &r->entries[i], k);
    const fuse_version *ver = &g->versions[m->version[k]];
    if (value) p[a] = value;
    else if (ver->scratch >= 0) p[a] = tile_scratch_at(r, ver, &m->ops[k], idx, j0);
    else p[a] = element_at(g, &m->ops[k], idx, j0);
  }
  seg->fn(n, p + seg->first_arg, jit->scalars + seg->first_scalar);
}

static void run_row(const rows *r, const int64_t *idx, int64_t j0, int64_t n) {
  const fuse_group *g = r->g;
  if (r->jit) {
    run_row_jit(r, idx, j0, n);
    return;
  }
  for (int i = 0; i < fuse_row_members(g); i++) {
    const fuse_member *m = &g->members[i];
    const nrt_row_entry *e = &r->entries[i];
    char *data[NRT_MAX_OPERANDS];
    int64_t strides[NRT_MAX_OPERANDS];
    for (int k = 0; k < m->task->n_operands; k++) data[k] = row_ptr(r, m, e, k, idx, j0, &strides[k]);
    e->fn(e->ctx, n, data, strides);
  }
  /* the staged rows to memory, in version order (a later version of the
   * same bytes lands last) */
  for (int s = 0; s < g->n_stage; s++) {
    const fuse_version *ver = &g->versions[g->stage_version[s]];
    stream_copy(element_at(g, ver->view, idx, j0),
                (const char *)(r->stage + (size_t)s * STAGE_SLOT_BYTES), (size_t)n * ver->esize);
  }
}

/* Asks for a row's large inputs ahead of its turn.  A row of a member is
 * 8 KiB of a stream, then the next member's streams come: bursts too short
 * for the hardware prefetchers, so the fused Adam step (7 streams per
 * parameter) waited on memory where its unfused ops did not. */
static void prefetch_row(const rows *r, const int64_t *idx, int64_t j0, int64_t n) {
  const fuse_group *g = r->g;
  for (int s = 0; s < g->n_prefetch; s++) {
    const fuse_version *ver = &g->versions[g->prefetch_version[s]];
    const char *p = element_at(g, ver->view, idx, j0);
    const char *end = p + n * (int64_t)ver->esize;
    for (; p < end; p += 64) __builtin_prefetch(p, 0, 2);
  }
}

/* Runs the row waiting before this one, after asking for this one's inputs
 * (a compiled segment's long rows are streams the hardware follows). */
static void next_row(rows *r, const int64_t *idx, int64_t j0, int64_t n) {
  if (!r->jit) prefetch_row(r, idx, j0, n);
  if (r->pending) run_row(r, r->idx, r->j0, r->n);
  memcpy(r->idx, idx, sizeof r->idx);
  r->j0 = j0;
  r->n = n;
  r->pending = true;
}

/* Elements [from, to) of the inner dim at idx, in rows of g->row. */
static void span_rows(rows *r, const int64_t *idx, int64_t from, int64_t to) {
  const int64_t row = r->jit ? FUSE_TILE_ELEMENTS : r->g->row; /* compiled: no row buffers */
  for (int64_t j = from; j < to; j += row) next_row(r, idx, j, to - j < row ? to - j : row);
}

/* Orders a tile's streamed stores before whatever the worker does next
 * (the group's completion is published with ordinary stores). */
static void fence_streams(const fuse_group *g) {
#if defined(__SSE2__)
  if (g->n_stage) _mm_sfence();
#else
  (void)g;
#endif
}

static void run_tile(rows *rp, int64_t t) {
  rows r = *rp;
  const fuse_group *g = r.g;
  const int inner = g->ndim - 1;
  /* the tile: dims before split at one index, split in [lo, hi), the rest whole */
  int64_t idx[NRT_MAX_DIMS];
  const int64_t len = nrt_fusion_tile_origin(g, t, idx);
  memcpy(r.origin, idx, sizeof r.origin);
  const int64_t lo = g->split >= 0 ? idx[g->split] : 0, hi = lo + len;
  if (g->split == inner) { /* one row, a range of the inner dim */
    span_rows(&r, idx, lo, hi);
  } else { /* whole rows: walk dims [first, inner) of the tile, carrying */
    const int first = g->split >= 0 ? g->split : 0;
    for (;;) {
      span_rows(&r, idx, 0, g->sizes[inner]);
      int d = inner - 1;
      for (; d >= first; d--) {
        const int64_t end = d == g->split ? hi : g->sizes[d];
        if (++idx[d] < end) break;
        idx[d] = d == g->split ? lo : 0;
      }
      if (d < first) break;
    }
  }
  if (r.pending) run_row(&r, r.idx, r.j0, r.n);
  fence_streams(g); /* compiled code streams the same staged outputs */
}

void nrt_fusion_run_rows(const fuse_group *g, const nrt_row_entry *entries, int64_t t,
                         unsigned char *scratch, const size_t *slot_offset,
                         unsigned char *stage) {
  rows r = {.g = g, .entries = entries, .scratch = scratch, .stage = stage,
            .slot_offset = slot_offset, .jit = NULL, .pending = false};
  run_tile(&r, t);
}

void nrt_fusion_run_rows_jit(const fuse_group *g, const nrt_row_entry *entries, const fuse_jit *jit,
                             int segment, int64_t t, unsigned char *scratch,
                             const size_t *slot_offset) {
  rows r = {.g = g, .entries = entries, .scratch = scratch, .slot_offset = slot_offset,
            .jit = jit, .segment = segment, .pending = false};
  run_tile(&r, t);
}

/* Row mode needs rows long enough to amortise a call per member, and each
 * dead intermediate dense along the row (its scratch holds one row; the
 * sink's holds the tile, and the sink runs its own kernel on it). */
bool nrt_fusion_rows_ok(const fuse_group *g) {
  if (g->ndim < 1) return false;
  const int inner = g->ndim - 1;
  const int64_t row = g->split == inner ? g->chunk : g->sizes[inner];
  if (row < FUSE_ROW_MIN) return false;
  for (int i = 0; i < fuse_row_members(g); i++) {
    const fuse_member *m = &g->members[i];
    for (int k = 0; k < m->task->n_operands; k++) {
      if (m->konst[k] >= 0) continue;
      const fuse_version *v = &g->versions[m->version[k]];
      if (v->scratch >= 0 && m->ops[k].strides[inner] != (int64_t)v->esize) return false;
    }
  }
  return true;
}
