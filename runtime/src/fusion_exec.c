/* fusion_exec.c — runs a planned group tile by tile (fusion.h), checks it
 * against unfused execution in verify mode, and keeps the counters.
 *
 * Each pool worker takes whole tiles; for a tile it runs every member's
 * own kernel, in program order, on the member's operands narrowed to the
 * tile.  A tile is at most one elementwise grain, so the kernel runs it
 * right there (a nested parallel region runs inline anyway).  Results
 * never depend on the thread count: every element goes through the same
 * kernel calls whichever worker owns its tile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

typedef struct worker {
  nrt_exec_ctx ctx;
  unsigned char *scratch; /* FUSE_MAX_SCRATCH slots, 64-byte aligned */
  size_t scratch_cap;
  nrt_task tasks[FUSE_MAX_MEMBERS]; /* members' tile tasks, refreshed per region */
} worker;

struct nrt_fusion {
  fuse_group g;
  bool rows; /* run in rows through entries (fusion_rows.c) */
  nrt_row_entry entries[FUSE_MAX_MEMBERS];
  fuse_jit jit; /* rows through compiled code when jit.ready (fusion_jit.c) */
  char source[32768];
  int n_workers;
  worker *workers;
  size_t slot_offset[FUSE_MAX_SCRATCH + 1];
  size_t stage_offset; /* the staging rows, after the scratch slots */
  atomic_int failed_member; /* the first member whose kernel failed, or -1 */
  fuse_multi *multi;        /* the multi-tensor groups' planner (fusion_multi.c) */
  char message[512];
};

static _Atomic uint64_t stat_groups, stat_tasks, stat_bytes, stat_verified, stat_rows, stat_streamed,
    stat_long_rows, stat_compiled, stat_multi;

void nrt_fusion_count_multi(void) { atomic_fetch_add(&stat_multi, 1); }

void nrt_fusion_stats_get(nrt_fusion_stats *out) {
  out->groups = atomic_load(&stat_groups);
  out->tasks_fused = atomic_load(&stat_tasks);
  out->bytes_not_written = atomic_load(&stat_bytes);
  out->groups_verified = atomic_load(&stat_verified);
  out->groups_in_rows = atomic_load(&stat_rows);
  out->bytes_streamed = atomic_load(&stat_streamed);
  out->groups_in_long_rows = atomic_load(&stat_long_rows);
  out->groups_multi_tensor = atomic_load(&stat_multi);
  out->groups_compiled = atomic_load(&stat_compiled);
  nrt_fusion_jit_stats(&out->group_builds, &out->group_build_failures);
}

void nrt_fusion_stats_reset(void) {
  atomic_store(&stat_groups, 0);
  atomic_store(&stat_tasks, 0);
  atomic_store(&stat_bytes, 0);
  atomic_store(&stat_verified, 0);
  atomic_store(&stat_rows, 0);
  atomic_store(&stat_long_rows, 0);
  atomic_store(&stat_streamed, 0);
  atomic_store(&stat_compiled, 0);
  atomic_store(&stat_multi, 0);
  nrt_fusion_jit_stats_reset();
}

/* ------------------------------------------------------------ tiles */

/* The member's task for tile `t`: data pointers moved to the tile's first
 * element (scratch for dead intermediates, the constant's bytes for a
 * device scalar), the split dim narrowed, outer dims one element. */
static void narrow(const fuse_group *g, const fuse_member *m, nrt_task *tt,
                   const unsigned char *scratch, const size_t *slot_offset, int64_t t) {
  int64_t idx[NRT_MAX_DIMS];
  const int64_t len = nrt_fusion_tile_origin(g, t, idx);
  for (int k = 0; k < tt->n_operands; k++) {
    nrt_operand *o = &tt->operands[k];
    const nrt_operand *full = &m->ops[k];
    if (g->split >= 0) o->sizes[g->split] = len;
    if (m->konst[k] >= 0) {
      o->data = (void *)g->consts[m->konst[k]].value;
    } else if (g->versions[m->version[k]].scratch >= 0) {
      o->data = (void *)(scratch + slot_offset[g->versions[m->version[k]].scratch]);
    } else {
      int64_t off = 0;
      for (int d = 0; d <= g->split; d++) off += idx[d] * full->strides[d];
      o->data = (char *)full->data + off;
    }
  }
}

/* The tile-invariant part of each member's task: everything but the data
 * pointers and the split dim's size. */
static void prepare_tasks(const fuse_group *g, nrt_task *tasks) {
  for (int i = 0; i < g->n_members; i++) {
    const fuse_member *m = &g->members[i];
    nrt_task *tt = &tasks[i];
    tt->kernel = m->task->kernel;
    tt->n_operands = m->task->n_operands;
    tt->name = m->task->name;
    tt->correlation = m->task->correlation;
    memcpy(tt->params, m->task->params, sizeof tt->params);
    for (int k = 0; k < tt->n_operands; k++) {
      nrt_operand *o = &tt->operands[k];
      const nrt_operand *full = &m->ops[k];
      o->dtype = full->dtype;
      o->ndim = g->ndim;
      for (int d = 0; d < g->ndim; d++) {
        o->sizes[d] = d < g->split ? 1 : g->sizes[d];
        o->strides[d] = m->konst[k] >= 0 ? 0 : full->strides[d];
      }
    }
  }
}

typedef struct region {
  nrt_fusion *st;
  nrt_kernel_fn fn[FUSE_MAX_MEMBERS];
} region;

/* Row mode when every member's kernel hands over its row loop for the
 * group's first tile; a loop that substituted an operand (a converted
 * scalar) must read one value for the whole group: a constant, or an
 * operand broadcast over every dim (not one that merely has size 1 in the
 * first tile). */
static bool capture_rows(nrt_fusion *st, nrt_exec_ctx *ctx) {
  const fuse_group *g = &st->g;
  if (!nrt_fusion_rows_ok(g)) return false;
  worker *wk = &st->workers[0];
  prepare_tasks(g, wk->tasks);
  for (int i = 0; i < fuse_row_members(g); i++) {
    const fuse_member *m = &g->members[i];
    nrt_row_capture_fn capture = nrt_kernel_row_capture_of(m->task->kernel);
    nrt_task *tt = &wk->tasks[i];
    narrow(g, m, tt, wk->scratch, st->slot_offset, 0);
    ctx->failed = 0;
    const bool ok = capture && capture(tt, ctx, &st->entries[i]) && !ctx->failed;
    ctx->failed = 0;
    ctx->message[0] = '\0';
    if (!ok) return false;
    for (int k = 0; k < tt->n_operands; k++) {
      if (!st->entries[i].fixed[k] || m->konst[k] >= 0) continue;
      for (int d = 0; d < g->ndim; d++)
        if (m->ops[k].strides[d] != 0 && g->sizes[d] != 1) return false;
    }
  }
  return true;
}

/* Member i's own kernel on tile t (wk->tasks prepared); a failure is the
 * group's, named after the first member that failed. */
static void run_member(region *r, worker *wk, int i, int64_t t) {
  nrt_fusion *st = r->st;
  nrt_task *tt = &wk->tasks[i];
  narrow(&st->g, &st->g.members[i], tt, wk->scratch, st->slot_offset, t);
  wk->ctx.failed = 0;
  wk->ctx.message[0] = '\0';
  if (r->fn[i](tt, &wk->ctx) != 0 || wk->ctx.failed) {
    int none = -1;
    if (atomic_compare_exchange_strong(&st->failed_member, &none, i))
      snprintf(st->message, sizeof st->message, "%s", wk->ctx.message);
  }
}

static void run_tiles(void *arg, int64_t begin, int64_t end, int w) {
  region *r = arg;
  nrt_fusion *st = r->st;
  const fuse_group *g = &st->g;
  worker *wk = &st->workers[w];
  const bool sink = g->sink_item >= 0;
  if (st->jit.ready && !sink) {
    /* Segment by segment over the worker's tiles: no value crosses a
     * segment (fusion_jit.c) and each element still sees the members in
     * program order, so the bits are the same; a segment then reads its
     * streams in long runs.  Tile by tile, an Adam step over 10 parameters
     * read 40 streams in turns of 32 KiB (8.5 ms against 7.3 for
     * _fused_adam on Zen 3). */
    for (int s = 0; s < st->jit.n_segments; s++)
      for (int64_t t = begin; t < end; t++)
        nrt_fusion_run_rows_jit(g, st->entries, &st->jit, s, t, wk->scratch, st->slot_offset);
    return;
  }
  if (!st->rows || sink) prepare_tasks(g, wk->tasks); /* kernel calls: per tile, or the sink's */
  if (st->rows) {
    /* with a sink, tile by tile: the sink's kernel reduces what the other
     * members left in the tile's scratch before the next tile reuses it */
    for (int64_t t = begin; t < end; t++) {
      if (st->jit.ready)
        for (int s = 0; s < st->jit.n_segments; s++)
          nrt_fusion_run_rows_jit(g, st->entries, &st->jit, s, t, wk->scratch, st->slot_offset);
      else
        nrt_fusion_run_rows(g, st->entries, t, wk->scratch, st->slot_offset,
                            wk->scratch + st->stage_offset);
      if (sink) run_member(r, wk, g->n_members - 1, t);
    }
    return;
  }
  for (int64_t t = begin; t < end; t++)
    for (int i = 0; i < g->n_members; i++) run_member(r, wk, i, t);
}

static bool ensure_scratch(nrt_fusion *st) {
  const fuse_group *g = &st->g;
  size_t total = 0;
  for (int s = 0; s < g->n_scratch; s++) {
    st->slot_offset[s] = total;
    total += (g->scratch_bytes[s] + 63) & ~(size_t)63;
  }
  st->stage_offset = total;
  total += nrt_fusion_stage_bytes(g);
  for (int w = 0; w < st->n_workers && total; w++) {
    worker *wk = &st->workers[w];
    if (wk->scratch_cap >= total) continue;
    free(wk->scratch);
    wk->scratch = aligned_alloc(64, total);
    wk->scratch_cap = wk->scratch ? total : 0;
    if (!wk->scratch) return false;
  }
  return true;
}

/* The fused pass, then each constant's fill on its real bytes where the
 * scalar outlives the group (the last fill of it). */
static void run_fused(nrt_fusion *st, nrt_exec_ctx *ctx, nrt_stream *s) {
  fuse_group *g = &st->g;
  region r = {.st = st};
  for (int i = 0; i < g->n_members; i++) r.fn[i] = nrt_kernel_fn_of(g->members[i].task->kernel);
  atomic_store(&st->failed_member, -1);
  nrt_parallel_for(g->n_tiles, 1, run_tiles, &r);
  int failed = atomic_load(&st->failed_member);
  if (failed >= 0) nrt_stream_record_failure(s, g->members[failed].task->name, st->message);
  for (int c = 0; c < g->n_consts; c++) {
    const fuse_const *k = &g->consts[c];
    if (!k->freed && !k->superseded && nrt_execute(ctx, k->fill) != 0)
      nrt_stream_record_failure(s, k->fill->name, ctx->message);
  }
}

/* ------------------------------------------------------------ verify */

typedef struct span {
  char *lo;
  size_t bytes;
  const char *writer; /* the task that last wrote it */
  unsigned char *before, *fused;
} span;

static int add_span(span *sp, int n, const char *lo, const char *hi, const char *writer) {
  for (int i = 0; i < n; i++)
    if (sp[i].lo == lo && sp[i].bytes == (size_t)(hi - lo)) {
      sp[i].writer = writer;
      return n;
    }
  sp[n] = (span){.lo = (char *)lo, .bytes = (size_t)(hi - lo), .writer = writer};
  return n + 1;
}

static void group_name(const fuse_group *g, char *out, size_t cap);

void nrt_fusion_count_verified(void) { atomic_fetch_add(&stat_verified, 1); }

/* Runs the group fused, keeps what it stored, puts memory back, runs the
 * same tasks unfused and compares every byte both stored.  Memory is left
 * as unfused execution left it. */
static void run_verified(nrt_fusion *st, nrt_exec_ctx *ctx, nrt_stream *s) {
  fuse_group *g = &st->g;
  span sp[FUSE_MAX_VERSIONS + FUSE_MAX_CONSTS];
  int n = 0;
  for (int v = 0; v < g->n_versions; v++) {
    const fuse_version *ver = &g->versions[v];
    if (ver->written && ver->scratch < 0)
      n = add_span(sp, n, ver->lo, ver->hi, g->members[ver->last_member].task->name);
  }
  for (int c = 0; c < g->n_consts; c++)
    if (!g->consts[c].freed && !g->consts[c].superseded)
      n = add_span(sp, n, g->consts[c].ptr, g->consts[c].ptr + g->consts[c].esize,
                   g->consts[c].fill->name);
  bool ok = true;
  for (int i = 0; i < n; i++) {
    sp[i].before = malloc(sp[i].bytes ? sp[i].bytes : 1);
    sp[i].fused = malloc(sp[i].bytes ? sp[i].bytes : 1);
    if (!sp[i].before || !sp[i].fused) ok = false;
    else memcpy(sp[i].before, sp[i].lo, sp[i].bytes);
  }
  if (!ok) {
    nrt_stream_record_failure(s, "adaptive eager verify", "out of host memory for shadow copies");
  } else {
    run_fused(st, ctx, s);
    for (int i = 0; i < n; i++) {
      memcpy(sp[i].fused, sp[i].lo, sp[i].bytes);
      memcpy(sp[i].lo, sp[i].before, sp[i].bytes);
    }
    for (int i = 0; i < g->n_items; i++) {
      const fuse_item *it = &g->items[i];
      if (it->kind != ITEM_HINT && nrt_execute(ctx, it->task) != 0)
        nrt_stream_record_failure(s, it->task->name, ctx->message);
    }
    for (int i = 0; i < n; i++)
      if (memcmp(sp[i].fused, sp[i].lo, sp[i].bytes) != 0) {
        char names[400], msg[512];
        group_name(g, names, sizeof names);
        snprintf(msg, sizeof msg,
                 "adaptive eager verify: the fused group %s stored other bytes than unfused "
                 "execution in the output of %s",
                 names, sp[i].writer ? sp[i].writer : "?");
        nrt_stream_record_failure(s, sp[i].writer, msg);
        break;
      }
  }
  for (int i = 0; i < n; i++) {
    free(sp[i].before);
    free(sp[i].fused);
  }
  nrt_fusion_count_verified();
}

/* ------------------------------------------------------------ names */

/* "fused[aten::mul|aten::add|aten::sigmoid]" */
void nrt_fusion_name(const nrt_task *const *members, int n, char *out, size_t cap) {
  size_t len = (size_t)snprintf(out, cap, "fused[");
  for (int i = 0; i < n && len < cap; i++) {
    const char *name = members[i]->name ? members[i]->name : "?";
    len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "|" : "", name);
  }
  if (len < cap) snprintf(out + len, cap - len, "]");
  else if (cap > 5) memcpy(out + cap - 5, "...]", 5);
}

static void group_name(const fuse_group *g, char *out, size_t cap) {
  const nrt_task *members[FUSE_MAX_MEMBERS];
  for (int i = 0; i < g->n_members; i++) members[i] = g->members[i].task;
  nrt_fusion_name(members, g->n_members, out, cap);
}

/* Trace records hold static names: each distinct group name is kept once,
 * for the life of the process (a program has few distinct chains). */
#define NAME_TABLE 4096
static const char *interned[NAME_TABLE];
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *intern(const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  const char *found = "fused[...]";
  pthread_mutex_lock(&intern_lock);
  for (unsigned i = 0; i < 64; i++) {
    const char **slot = &interned[(h + i) % NAME_TABLE];
    if (!*slot) *slot = strdup(name);
    if (*slot && strcmp(*slot, name) == 0) {
      found = *slot;
      break;
    }
  }
  pthread_mutex_unlock(&intern_lock);
  return found;
}

/* ------------------------------------------------------------ entry */

static nrt_fusion *fusion_new(void) {
  nrt_fusion *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  st->n_workers = nrt_compute_threads();
  st->workers = calloc((size_t)st->n_workers, sizeof *st->workers);
  if (!st->workers) {
    free(st);
    return NULL;
  }
  return st;
}

void nrt_fusion_group_done(nrt_stream *s, const nrt_task *const *members, int n, uint64_t start,
                           bool failed, uint64_t bytes) {
  atomic_fetch_add(&stat_groups, 1);
  atomic_fetch_add(&stat_tasks, (uint64_t)n);
  atomic_fetch_add(&stat_bytes, bytes);
  if (!start) return;
  char name[1024];
  nrt_fusion_name(members, n, name, sizeof name);
  nrt_trace_record r = {.name = intern(name), .correlation = members[0]->correlation,
                        .kernel = NRT_KERNEL_FUSED, .device = nrt_stream_device(s),
                        .stream = nrt_stream_id(s), .enqueue_ns = start, .start_ns = start,
                        .end_ns = nrt_now_ns(), .failed = failed};
  nrt_trace_add(&r);
  /* the other members' ops keep their link to the device (the group's
   * time stays on the first: these take none) */
  for (int i = 1; i < n; i++) {
    nrt_trace_record m = {.name = members[i]->name, .correlation = members[i]->correlation,
                          .kernel = NRT_KERNEL_FUSED_MEMBER, .device = r.device,
                          .stream = r.stream, .enqueue_ns = start, .start_ns = start,
                          .end_ns = start};
    nrt_trace_add(&m);
  }
}

uint64_t nrt_fusion_run(nrt_fusion **state, nrt_exec_ctx *ctx, nrt_stream *s, const nrt_task *ring,
                        unsigned ring_size, uint64_t head, uint64_t queued) {
  if (queued < 2) return 0;
  if (!*state && !(*state = fusion_new())) return 0;
  nrt_fusion *st = *state;
  if (nrt_task_multi(&ring[head % ring_size]))
    return nrt_fusion_multi_run(&st->multi, ctx, s, ring, ring_size, head, queued);
  fuse_group *g = &st->g;
  if (!nrt_fusion_plan(g, ctx, ring, ring_size, head, queued)) return 0;
  for (int w = 0; w < st->n_workers; w++) st->workers[w].ctx.stream = s;
  if (!ensure_scratch(st)) return 0; /* out of host memory: run unfused */
  st->rows = capture_rows(st, ctx);
  if (!st->rows || !nrt_fusion_jit_prepare(g, st->entries, &st->jit, st->source, sizeof st->source))
    st->jit.ready = false;
  const uint64_t start = nrt_trace_enabled() ? nrt_now_ns() : 0;
  if (nrt_adaptive_mode() == NRT_ADAPTIVE_VERIFY) run_verified(st, ctx, s);
  else run_fused(st, ctx, s);
  uint64_t saved = 0;
  for (int v = 0; v < g->n_versions; v++)
    if (g->versions[v].scratch >= 0) saved += (uint64_t)g->numel * g->versions[v].esize;
  if (st->rows) {
    atomic_fetch_add(&stat_rows, 1);
    if (g->row > FUSE_ROW_ELEMENTS) atomic_fetch_add(&stat_long_rows, 1);
    if (st->jit.ready) {
      atomic_fetch_add(&stat_compiled, 1);
      atomic_fetch_add(&stat_streamed, st->jit.streamed_bytes);
    }
    for (int s = 0; s < g->n_stage && !st->jit.ready; s++)
      atomic_fetch_add(&stat_streamed, (uint64_t)g->numel * g->versions[g->stage_version[s]].esize);
  }
  const nrt_task *members[FUSE_MAX_MEMBERS];
  for (int i = 0; i < g->n_members; i++) members[i] = g->members[i].task;
  nrt_fusion_group_done(s, members, g->n_members, start, atomic_load(&st->failed_member) >= 0,
                        saved);
  return (uint64_t)g->n_items;
}
