/* fusion_rows.c — a fused group in short rows: each member's row loop,
 * captured once per group (nrt_row_entry), called directly on a row of at
 * most FUSE_ROW_ELEMENTS, every member in program order before the next
 * row.  A row's dead intermediates then stay in L1 (8 KiB of float32 per
 * slot), where a tile's (128 KiB) stream through L2; the call costs a few
 * nanoseconds, where a kernel call per member per tile costs ~100 ns
 * (descriptor checks, the plan, the nd-iteration).
 *
 * The bits are those of the per-tile path: a row is a sub-box of the tile,
 * and the loop is the one the member's kernel picks for the tile (the
 * fusible contract: the same bits on any sub-box). */
#include "fusion.h"

/* Operand k's first element of the row at idx (outer dims) + j (inner). */
static char *row_ptr(const fuse_group *g, const fuse_member *m, const nrt_row_entry *e, int k,
                     const int64_t *idx, int64_t j, unsigned char *scratch,
                     const size_t *slot_offset, int64_t *stride) {
  const nrt_operand *full = &m->ops[k];
  if (e->fixed[k]) {
    *stride = 0;
    return (char *)e->fixed[k];
  }
  if (m->konst[k] >= 0) {
    *stride = 0;
    return (char *)g->consts[m->konst[k]].value;
  }
  const int inner = g->ndim - 1;
  *stride = full->strides[inner];
  const int slot = g->versions[m->version[k]].scratch;
  if (slot >= 0) return (char *)(scratch + slot_offset[slot]); /* one row, dense (fuse_rows_ok) */
  int64_t off = j * full->strides[inner];
  for (int d = 0; d < inner; d++) off += idx[d] * full->strides[d];
  return (char *)full->data + off;
}

static void run_row(const fuse_group *g, const nrt_row_entry *entries, const int64_t *idx,
                    int64_t j0, int64_t n, unsigned char *scratch, const size_t *slot_offset) {
  for (int i = 0; i < g->n_members; i++) {
    const fuse_member *m = &g->members[i];
    const nrt_row_entry *e = &entries[i];
    char *data[NRT_MAX_OPERANDS];
    int64_t strides[NRT_MAX_OPERANDS];
    for (int k = 0; k < m->task->n_operands; k++)
      data[k] = row_ptr(g, m, e, k, idx, j0, scratch, slot_offset, &strides[k]);
    e->fn(e->ctx, n, data, strides);
  }
}

/* Elements [from, to) of the inner dim at idx, in rows of FUSE_ROW_ELEMENTS. */
static void run_span(const fuse_group *g, const nrt_row_entry *entries, const int64_t *idx,
                     int64_t from, int64_t to, unsigned char *scratch, const size_t *slot_offset) {
  for (int64_t j = from; j < to; j += FUSE_ROW_ELEMENTS)
    run_row(g, entries, idx, j, to - j < FUSE_ROW_ELEMENTS ? to - j : FUSE_ROW_ELEMENTS, scratch,
            slot_offset);
}

void nrt_fusion_run_rows(const fuse_group *g, const nrt_row_entry *entries, int64_t t,
                         unsigned char *scratch, const size_t *slot_offset) {
  const int inner = g->ndim - 1;
  /* the tile: dims before split at one index, split in [lo, hi), the rest whole */
  int64_t idx[NRT_MAX_DIMS];
  const int64_t len = nrt_fusion_tile_origin(g, t, idx);
  const int64_t lo = g->split >= 0 ? idx[g->split] : 0, hi = lo + len;
  if (g->split == inner) { /* one row, a range of the inner dim */
    run_span(g, entries, idx, lo, hi, scratch, slot_offset);
    return;
  }
  /* whole rows: walk dims [first, inner) of the tile, carrying */
  const int first = g->split >= 0 ? g->split : 0;
  for (;;) {
    run_span(g, entries, idx, 0, g->sizes[inner], scratch, slot_offset);
    int d = inner - 1;
    for (; d >= first; d--) {
      const int64_t end = d == g->split ? hi : g->sizes[d];
      if (++idx[d] < end) break;
      idx[d] = d == g->split ? lo : 0;
    }
    if (d < first) return;
  }
}

/* Row mode needs rows long enough to amortise a call per member, and each
 * dead intermediate dense along the row (its scratch holds one row). */
bool nrt_fusion_rows_ok(const fuse_group *g) {
  if (g->sink_item >= 0 || g->ndim < 1) return false;
  const int inner = g->ndim - 1;
  const int64_t row = g->split == inner ? g->chunk : g->sizes[inner];
  if (row < FUSE_ROW_MIN) return false;
  for (int i = 0; i < g->n_members; i++) {
    const fuse_member *m = &g->members[i];
    for (int k = 0; k < m->task->n_operands; k++) {
      if (m->konst[k] >= 0) continue;
      const fuse_version *v = &g->versions[m->version[k]];
      if (v->scratch >= 0 && m->ops[k].strides[inner] != (int64_t)v->esize) return false;
    }
  }
  return true;
}
