/* fusion_multi.c — adaptive eager for multi-tensor (foreach) tasks.
 *
 * An optimizer's foreach step is a handful of tasks, each one op over the
 * same lists of tensors (AdamW: lerp, mul, addcmul, mul, sqrt, div, add,
 * addcdiv over params, grads and state), and unfused each is a pass over
 * all of them: 80 bytes per parameter against the 28 a fused kernel moves.
 * A group here is a run of queued NRT_FUSE_MULTI tasks with the same rows
 * (row r: the same element count in every member), with the event records
 * (the pinned table's release) and free hints between them.  The executor
 * cuts each row into chunks and runs every member's own routine on a
 * chunk, in program order, before the next chunk: a chunk's operands stay
 * in L2 from one member to the next.  The kernel's routine and its chunk
 * boundaries are the task's own (nrt_multi_fns' contract), so every element
 * gets the bits it gets unfused, whatever thread runs its chunk.
 *
 * Hazards: running member B's chunk c of row r right after member A's
 * chunk c is program order for those elements only if no byte one of them
 * writes is touched elsewhere in the group other than as the same bytes of
 * the same row.  The planner keeps the group's bytes as disjoint segments:
 * a segment is one exact range (an operand of one row, written or read),
 * or a merge of overlapping ranges that are only read.  A member that
 * would write into a merge, or overlap a written segment other than
 * exactly (same bytes, same row), ends the group before it.  The device
 * scalars a member reads (prepare reads them) are read ranges like any.
 *
 * Event records inside the group run after it, in order: an event then
 * completes later than it could, never earlier.  Verify mode runs the
 * group fused and unfused and compares every written byte, as for the
 * elementwise groups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

typedef struct segment {
  const char *lo, *hi;
  int64_t row; /* the row of an exact range; -1 for a merge of reads */
  bool written;
} segment;

struct fuse_multi {
  int n_items, n_members;
  const nrt_task *items[FUSE_WINDOW];
  const nrt_task *members[FUSE_MAX_MEMBERS];
  const nrt_multi_fns *fns[FUSE_MAX_MEMBERS];
  unsigned char *state; /* FUSE_MAX_MEMBERS states of state_stride bytes, 64-byte aligned */
  size_t state_stride;
  int64_t n_rows, chunk, n_units;
  int64_t *numel, *unit_start; /* per row; unit_start has n_rows + 1 */
  int64_t rows_cap;
  segment *seg, *saved; /* saved: seg before the member being added */
  int n_seg, seg_cap;
};

static void *member_state(const fuse_multi *m, int i) {
  return m->state + (size_t)i * m->state_stride;
}

/* Room for one more segment, in both arrays (saved mirrors seg). */
static bool reserve_segment(fuse_multi *m) {
  if (m->n_seg < m->seg_cap) return true;
  const int cap = m->seg_cap ? 2 * m->seg_cap : 256;
  segment *a = realloc(m->seg, (size_t)cap * sizeof *a);
  if (!a) return false;
  m->seg = a;
  segment *b = realloc(m->saved, (size_t)cap * sizeof *b);
  if (!b) return false;
  m->saved = b;
  m->seg_cap = cap;
  return true;
}

/* Room for `rows` rows. */
static bool reserve_rows(fuse_multi *m, int64_t rows) {
  if (rows <= m->rows_cap) return true;
  int64_t *a = realloc(m->numel, (size_t)rows * sizeof *a);
  if (!a) return false;
  m->numel = a;
  int64_t *b = realloc(m->unit_start, (size_t)(rows + 1) * sizeof *b);
  if (!b) return false;
  m->unit_start = b;
  m->rows_cap = rows;
  return true;
}

/* ------------------------------------------------------------ hazards */

/* The first segment whose hi is above lo (segments are sorted, disjoint). */
static int first_above(const fuse_multi *m, const char *lo) {
  int a = 0, b = m->n_seg;
  while (a < b) {
    int mid = (a + b) / 2;
    if (m->seg[mid].hi <= lo) a = mid + 1;
    else b = mid;
  }
  return a;
}

/* Adds one access; false when it is a hazard (the segments may then be
 * half-updated: the caller restores them). */
static bool add_access(fuse_multi *m, const char *lo, const char *hi, int64_t row, bool written) {
  if (hi <= lo) return true; /* an empty row touches nothing */
  int first = first_above(m, lo), last = first;
  while (last < m->n_seg && m->seg[last].lo < hi) last++;
  if (last == first + 1) {
    segment *s = &m->seg[first];
    if (s->lo == lo && s->hi == hi && s->row == row) { /* the same bytes of the same row */
      s->written |= written;
      return true;
    }
  }
  bool any_written = written;
  const char *mlo = lo, *mhi = hi;
  for (int i = first; i < last; i++) {
    any_written |= m->seg[i].written;
    if (m->seg[i].lo < mlo) mlo = m->seg[i].lo;
    if (m->seg[i].hi > mhi) mhi = m->seg[i].hi;
  }
  if (last > first && any_written) return false;
  if (last == first) { /* untouched bytes: a new exact segment */
    if (!reserve_segment(m)) return false;
    memmove(&m->seg[first + 1], &m->seg[first], (size_t)(m->n_seg - first) * sizeof *m->seg);
    m->seg[first] = (segment){.lo = lo, .hi = hi, .row = row, .written = written};
    m->n_seg++;
    return true;
  }
  /* overlapping reads: one merged read segment */
  m->seg[first] = (segment){.lo = mlo, .hi = mhi, .row = -1, .written = false};
  memmove(&m->seg[first + 1], &m->seg[last], (size_t)(m->n_seg - last) * sizeof *m->seg);
  m->n_seg -= last - first - 1;
  return true;
}

/* Member i's accesses, row by row; false (segments restored) on a hazard. */
static bool add_member_accesses(fuse_multi *m, int i) {
  const nrt_multi_fns *f = m->fns[i];
  const void *st = member_state(m, i);
  if (m->n_seg > 0) memcpy(m->saved, m->seg, (size_t)m->n_seg * sizeof *m->seg);
  const int n_saved = m->n_seg;
  for (int64_t r = 0; r < m->n_rows; r++) {
    nrt_multi_operand ops[NRT_MULTI_MAX_OPERANDS];
    int n_ops = 0;
    const int64_t numel = f->row(st, r, ops, &n_ops);
    bool ok = numel == m->numel[r] && n_ops >= 0 && n_ops <= NRT_MULTI_MAX_OPERANDS;
    for (int k = 0; ok && k < n_ops; k++)
      ok = ops[k].bytes >= 0 &&
           add_access(m, ops[k].data, ops[k].data + ops[k].bytes, r, ops[k].written);
    if (!ok) {
      if (n_saved > 0) memcpy(m->seg, m->saved, (size_t)n_saved * sizeof *m->seg);
      m->n_seg = n_saved;
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------------------ plan */

static bool set_rows(fuse_multi *m, const nrt_multi_fns *f, const void *st) {
  const int64_t rows = f->rows(st);
  if (rows < 1 || rows > (int64_t)(SIZE_MAX / 16) || !reserve_rows(m, rows)) return false;
  m->n_rows = rows;
  m->chunk = f->chunk;
  int64_t units = 0, total = 0;
  for (int64_t r = 0; r < rows; r++) {
    nrt_multi_operand ops[NRT_MULTI_MAX_OPERANDS];
    int n_ops = 0;
    const int64_t n = f->row(st, r, ops, &n_ops);
    if (n < 0) return false;
    m->numel[r] = n;
    m->unit_start[r] = units;
    units += (n + m->chunk - 1) / m->chunk;
    total += n;
  }
  m->unit_start[rows] = units;
  m->n_units = units;
  return total >= FUSE_MIN_ELEMENTS;
}

/* Members from ring[head] (a multi-tensor task), with the event records
 * and hints between them; false when fewer than two members join. */
static bool plan(fuse_multi *m, nrt_exec_ctx *ctx, const nrt_task *ring, unsigned ring_size,
                 uint64_t head, uint64_t queued) {
  const uint64_t limit = queued < FUSE_WINDOW ? queued : FUSE_WINDOW;
  m->n_items = m->n_members = m->n_seg = 0;
  int last_member_item = -1;
  for (uint64_t i = 0; i < limit && m->n_members < FUSE_MAX_MEMBERS; i++) {
    const nrt_task *t = &ring[(head + i) % ring_size];
    if (t->kernel == NRT_KERNEL_HINT_FREE || t->kernel == NRT_KERNEL_EVENT_RECORD) {
      m->items[m->n_items++] = t;
      continue;
    }
    const nrt_multi_fns *f = nrt_task_multi(t);
    if (!f || f->chunk < 1) break;
    const int k = m->n_members;
    if (m->state_stride < f->state_bytes) {
      if (k > 0) break; /* kernels of other state sizes: a group of one kind */
      free(m->state);
      m->state_stride = (f->state_bytes + 63) & ~(size_t)63;
      m->state = aligned_alloc(64, m->state_stride * FUSE_MAX_MEMBERS);
      if (!m->state) {
        m->state_stride = 0;
        return false;
      }
    }
    m->fns[k] = f;
    m->members[k] = t;
    if (f->prepare(t, ctx, member_state(m, k)) != 0) break; /* it fails on its own */
    if (k == 0 ? !set_rows(m, f, member_state(m, k))
               : f->rows(member_state(m, k)) != m->n_rows || f->chunk != m->chunk)
      break;
    if (!add_member_accesses(m, k)) break;
    m->n_members++;
    m->items[m->n_items++] = t;
    last_member_item = m->n_items - 1;
  }
  m->n_items = last_member_item + 1; /* what follows the last member runs on its own */
  return m->n_members >= 2;
}

/* ------------------------------------------------------------ run */

static void run_units(void *arg, int64_t begin, int64_t end, int w) {
  (void)w;
  const fuse_multi *m = arg;
  int64_t a = 0, b = m->n_rows; /* the row of unit `begin` */
  while (b - a > 1) {
    int64_t mid = (a + b) / 2;
    if (m->unit_start[mid] <= begin) a = mid;
    else b = mid;
  }
  for (int64_t u = begin, r = a; u < end; u++) {
    while (m->unit_start[r + 1] <= u) r++;
    const int64_t lo = (u - m->unit_start[r]) * m->chunk;
    const int64_t hi = lo + m->chunk < m->numel[r] ? lo + m->chunk : m->numel[r];
    for (int i = 0; i < m->n_members; i++) m->fns[i]->run(member_state(m, i), r, lo, hi);
  }
}

static void run_fused(fuse_multi *m) {
  if (m->n_units > 0) nrt_parallel_for(m->n_units, 1, run_units, m);
}

/* Every item but the members (event records, hints), in order. */
static void run_rest(const fuse_multi *m, nrt_exec_ctx *ctx, nrt_stream *s, bool members_too) {
  for (int i = 0; i < m->n_items; i++) {
    const nrt_task *t = m->items[i];
    const bool member = t->kernel != NRT_KERNEL_HINT_FREE && t->kernel != NRT_KERNEL_EVENT_RECORD;
    if ((member && !members_too) || t->kernel == NRT_KERNEL_HINT_FREE) continue;
    if (nrt_execute(ctx, t) != 0) nrt_stream_record_failure(s, t->name, ctx->message);
  }
}

/* Verify mode: the written segments fused, then unfused, compared. */
static void run_verified(fuse_multi *m, nrt_exec_ctx *ctx, nrt_stream *s) {
  int n = 0;
  for (int i = 0; i < m->n_seg; i++) n += m->seg[i].written;
  unsigned char **before = calloc((size_t)n + 1, sizeof *before);
  unsigned char **fused = calloc((size_t)n + 1, sizeof *fused);
  bool ok = before && fused;
  for (int i = 0, j = 0; ok && i < m->n_seg; i++) {
    if (!m->seg[i].written) continue;
    const size_t bytes = (size_t)(m->seg[i].hi - m->seg[i].lo);
    before[j] = malloc(bytes);
    fused[j] = malloc(bytes);
    ok = before[j] && fused[j];
    if (ok) memcpy(before[j], m->seg[i].lo, bytes);
    j++;
  }
  if (!ok) {
    nrt_stream_record_failure(s, "adaptive eager verify", "out of host memory for shadow copies");
  } else {
    run_fused(m);
    for (int i = 0, j = 0; i < m->n_seg; i++) {
      if (!m->seg[i].written) continue;
      const size_t bytes = (size_t)(m->seg[i].hi - m->seg[i].lo);
      memcpy(fused[j], m->seg[i].lo, bytes);
      memcpy((char *)m->seg[i].lo, before[j], bytes);
      j++;
    }
    run_rest(m, ctx, s, true);
    for (int i = 0, j = 0; i < m->n_seg; i++) {
      if (!m->seg[i].written) continue;
      if (memcmp(fused[j], m->seg[i].lo, (size_t)(m->seg[i].hi - m->seg[i].lo)) != 0) {
        char names[400], msg[512];
        nrt_fusion_name(m->members, m->n_members, names, sizeof names);
        snprintf(msg, sizeof msg,
                 "adaptive eager verify: the fused multi-tensor group %s stored other bytes "
                 "than unfused execution",
                 names);
        nrt_stream_record_failure(s, m->members[0]->name, msg);
        break;
      }
      j++;
    }
    nrt_fusion_count_verified();
  }
  for (int i = 0; before && fused && i < n; i++) {
    free(before[i]);
    free(fused[i]);
  }
  free(before);
  free(fused);
}

uint64_t nrt_fusion_multi_run(fuse_multi **state, nrt_exec_ctx *ctx, nrt_stream *s,
                              const nrt_task *ring, unsigned ring_size, uint64_t head,
                              uint64_t queued) {
  if (!*state && !(*state = calloc(1, sizeof **state))) return 0;
  fuse_multi *m = *state;
  if (!plan(m, ctx, ring, ring_size, head, queued)) return 0;
  const uint64_t start = nrt_trace_enabled() ? nrt_now_ns() : 0;
  if (nrt_adaptive_mode() == NRT_ADAPTIVE_VERIFY) {
    run_verified(m, ctx, s);
  } else {
    run_fused(m);
    run_rest(m, ctx, s, false);
  }
  nrt_fusion_group_done(s, m->members, m->n_members, start, false, 0);
  nrt_fusion_count_multi();
  return (uint64_t)m->n_items;
}
