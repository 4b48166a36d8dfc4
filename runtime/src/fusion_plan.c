/* fusion_plan.c — which queued tasks run as one fused group (fusion.h).
 *
 * The planner only reads descriptors: pointers, dtypes, sizes and strides.
 * It never looks at data and does no math on it, so the runtime stays
 * free of kernels' knowledge; what a task computes is the kernel's own
 * business, and kernels/ tells which tasks may be tiled (the classifier).
 *
 * Why a cut is always safe: a task that does not join simply runs after
 * the group, unfused, as it would have without fusion. */
#include <string.h>

#include "fusion.h"

/* ------------------------------------------------------------ refinement
 * A shape is described by its cumulative sizes from the innermost dim out
 * (size-1 dims skipped): [4096, 4096] is {4096, 2^24}, [2^24] is {2^24}.
 * Two shapes over the same elements in the same order share a refinement
 * whose points are the union of theirs, when every new point divides the
 * dim it falls in evenly. */

typedef struct points {
  int n;
  int64_t p[NRT_MAX_DIMS];
} points;

static bool points_of(const nrt_operand *o, points *out) {
  int64_t c = 1;
  out->n = 0;
  for (int d = o->ndim - 1; d >= 0; d--) {
    if (o->sizes[d] == 1) continue;
    c *= o->sizes[d];
    out->p[out->n++] = c;
  }
  return out->n > 0;
}

/* sorted union; false past NRT_MAX_DIMS points */
static bool points_union(const points *a, const points *b, points *out) {
  points r = {0};
  int i = 0, j = 0;
  while (i < a->n || j < b->n) {
    int64_t v = j >= b->n || (i < a->n && a->p[i] < b->p[j]) ? a->p[i] : b->p[j];
    if (i < a->n && a->p[i] == v) i++;
    if (j < b->n && b->p[j] == v) j++;
    if (r.n == NRT_MAX_DIMS) return false;
    r.p[r.n++] = v;
  }
  *out = r;
  return true;
}

/* every point of `pts` inside one of o's dims splits it evenly */
static bool refinable(const nrt_operand *o, const points *pts) {
  int64_t c = 1;
  int j = 0;
  for (int d = o->ndim - 1; d >= 0; d--) {
    if (o->sizes[d] == 1) continue;
    const int64_t next = c * o->sizes[d];
    for (; j < pts->n && pts->p[j] < next; j++)
      if (pts->p[j] <= c || pts->p[j] % c || next % pts->p[j]) return false;
    if (j < pts->n && pts->p[j] == next) j++;
    c = next;
  }
  return j == pts->n;
}

/* o re-described over the refined dims (innermost last, as every
 * descriptor is): a refined dim inside o's dim d of stride s, starting at
 * cumulative size lo where d starts at c, has stride s * (lo / c). */
static void refine(const nrt_operand *o, const points *pts, nrt_operand *out) {
  out->data = o->data;
  out->dtype = o->dtype;
  out->ndim = pts->n;
  int d = o->ndim - 1;
  int64_t c = 1;
  for (int j = 0; j < pts->n; j++) {
    const int64_t lo = j ? pts->p[j - 1] : 1;
    while (o->sizes[d] == 1 || c * o->sizes[d] <= lo) {
      if (o->sizes[d] != 1) c *= o->sizes[d];
      d--;
    }
    out->sizes[pts->n - 1 - j] = pts->p[j] / lo;
    out->strides[pts->n - 1 - j] = o->strides[d] * (lo / c);
  }
}

/* ------------------------------------------------------------ byte ranges */

static void span_of(const nrt_operand *o, const char **lo, const char **hi) {
  const char *base = o->data;
  int64_t neg = 0, pos = 0;
  for (int d = 0; d < o->ndim; d++) {
    int64_t step = (o->sizes[d] - 1) * o->strides[d];
    if (step < 0) neg += step;
    else pos += step;
  }
  *lo = base + neg;
  *hi = base + pos + (int64_t)nrt_dtype_size((nrt_dtype)o->dtype);
}

static bool overlap(const char *alo, const char *ahi, const char *blo, const char *bhi) {
  return alo < bhi && blo < ahi;
}

/* the same elements at the same bytes: pointer, dtype and the strides of
 * every dim that has more than one element (dims are common) */
static bool identical(const nrt_operand *a, const nrt_operand *b) {
  if (a->data != b->data || a->dtype != b->dtype) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != 1 && a->strides[d] != b->strides[d]) return false;
  return true;
}

static bool all_broadcast(const nrt_operand *o) {
  for (int d = 0; d < o->ndim; d++)
    if (o->sizes[d] != 1 && o->strides[d] != 0) return false;
  return true;
}

/* dense in the refined order: tiles of it are contiguous runs, so a tile
 * in scratch has the very strides it has in memory */
static bool dense(const nrt_operand *o) {
  int64_t expect = (int64_t)nrt_dtype_size((nrt_dtype)o->dtype);
  for (int d = o->ndim - 1; d >= 0; d--) {
    if (o->sizes[d] == 1) continue;
    if (o->strides[d] != expect) return false;
    expect *= o->sizes[d];
  }
  return true;
}

/* ------------------------------------------------------------ candidates */

static nrt_fuse_kind classify(const nrt_task *t) {
  nrt_fuse_classify_fn fn = nrt_kernel_fusion_of(t->kernel);
  if (!fn || t->n_operands < 1 || t->n_operands > NRT_MAX_OPERANDS) return NRT_FUSE_NONE;
  const nrt_fuse_kind kind = fn(t);
  if (kind == NRT_FUSE_MULTI) return NRT_FUSE_NONE; /* fusion_multi.c's groups */
  return kind == NRT_FUSE_REDUCTION && t->n_operands != 2 ? NRT_FUSE_NONE : kind;
}

/* Runs t's kernel on an empty box of its index space: the kernel checks
 * the descriptor and parameters exactly as it would for the whole task. */
static bool kernel_accepts(nrt_exec_ctx *ctx, const nrt_task *t) {
  nrt_task probe;
  memcpy(&probe, t, sizeof probe);
  for (int k = 0; k < probe.n_operands; k++)
    if (probe.operands[k].ndim > 0) probe.operands[k].sizes[0] = 0;
  return nrt_execute(ctx, &probe) == 0;
}

/* A device scalar's fill (one element, no inputs) runs now into the
 * constant's own bytes: fills read nothing, so running early is safe. */
static bool make_const(fuse_const *c, nrt_exec_ctx *ctx, const nrt_task *t) {
  const nrt_operand *o = &t->operands[0];
  c->esize = nrt_dtype_size((nrt_dtype)o->dtype);
  if (!c->esize || c->esize > sizeof c->value) return false;
  nrt_task run;
  memcpy(&run, t, sizeof run);
  run.operands[0].data = c->value;
  c->fill = t;
  c->ptr = o->data;
  c->freed = c->superseded = false;
  return nrt_execute(ctx, &run) == 0;
}

/* Collects items from ring[head]: members (same element count, shapes
 * that refine together), constants and hints, up to the first task that
 * can join nothing.  pts gets the refinement.  Only descriptors are read
 * here: a lone fusible task (most of them, in a GEMM-bound program) costs
 * no kernel call. */
static void collect(fuse_group *g, const nrt_task *ring, unsigned ring_size, uint64_t head,
                    uint64_t queued, points *pts) {
  const uint64_t limit = queued < FUSE_WINDOW ? queued : FUSE_WINDOW;
  g->n_items = g->n_members = g->n_consts = 0;
  g->sink_item = -1;
  g->numel = -1;
  pts->n = 0;
  for (uint64_t i = 0; i < limit; i++) {
    const nrt_task *t = &ring[(head + i) % ring_size];
    fuse_item *it = &g->items[g->n_items];
    it->task = t;
    if (t->kernel == NRT_KERNEL_HINT_FREE) {
      it->kind = ITEM_HINT;
      g->n_items++;
      continue;
    }
    const nrt_fuse_kind kind = g->sink_item >= 0 ? NRT_FUSE_NONE : classify(t);
    if (kind == NRT_FUSE_NONE) return; /* after a sink only hints join */
    const int64_t n = nrt_operand_numel(&t->operands[0]);
    if (n == INT64_MAX) return; /* a descriptor too large to be real: it fails alone */
    if (kind == NRT_FUSE_ELEMENTWISE && t->n_operands == 1 && n == 1) {
      if (g->n_consts == FUSE_MAX_CONSTS) return;
      it->kind = ITEM_CONST;
      it->index = g->n_consts++;
      g->n_items++;
      continue;
    }
    if (g->n_members == FUSE_MAX_MEMBERS) return;
    if (g->numel < 0 ? n < FUSE_MIN_ELEMENTS : n != g->numel) return;
    points mine, merged;
    if (!points_of(&t->operands[0], &mine) || !points_union(pts, &mine, &merged)) return;
    if (!refinable(&t->operands[0], &merged)) return;
    for (int m = 0; m < g->n_members; m++)
      if (!refinable(&g->members[m].task->operands[0], &merged)) return;
    g->numel = n;
    *pts = merged;
    g->members[g->n_members].task = t;
    if (kind == NRT_FUSE_REDUCTION) g->sink_item = g->n_items;
    it->kind = ITEM_MEMBER;
    it->index = g->n_members++;
    g->n_items++;
  }
}

/* ------------------------------------------------------------ hazards */

static int find_const(const fuse_group *g, const nrt_operand *o) {
  for (int c = g->n_consts - 1; c >= 0; c--) /* the latest fill of that scalar */
    if (g->consts[c].ptr == o->data) {
      const fuse_const *k = &g->consts[c];
      return !k->freed && k->fill->operands[0].dtype == o->dtype ? c : -1;
    }
  return -1;
}

/* A released dead intermediate lives in scratch only and never touches
 * memory: the caching allocator may hand its bytes to the next tensor of
 * the chain (often at a shifted offset), and that is no overlap. */
static bool occupies_memory(const fuse_version *ver) { return !(ver->freed && ver->scratch >= 0); }

/* A constant's real bytes are stored after the tiles (when it outlives the
 * group), so until its block is released no other access may touch them;
 * once released, the block is the allocator's to hand to the next tensor. */
static bool touches_const(const fuse_group *g, const char *lo, const char *hi) {
  for (int c = 0; c < g->n_consts; c++)
    if (!g->consts[c].freed &&
        overlap(lo, hi, g->consts[c].ptr, g->consts[c].ptr + g->consts[c].esize))
      return true;
  return false;
}

/* Can member m join?  Operand 0 is written, the rest read.  Against every
 * version so far: overlapping bytes must be the identical view when
 * either side writes, and a released view may only be written again (a
 * read of it would read a dead block).  Within m: its output may share
 * bytes only with an identical input (in place). */
static bool member_fits(const fuse_group *g, const fuse_member *m) {
  const int n = m->task->n_operands;
  for (int k = 0; k < n; k++) {
    const nrt_operand *w = &m->ops[k];
    const bool write = k == 0;
    if (!write && all_broadcast(w) && find_const(g, w) >= 0) continue;
    const char *lo, *hi;
    span_of(w, &lo, &hi);
    if (touches_const(g, lo, hi)) return false;
    bool latest_seen = false; /* newest first: older versions of the view are history */
    for (int v = g->n_versions - 1; v >= 0; v--) {
      const fuse_version *ver = &g->versions[v];
      if (!overlap(lo, hi, ver->lo, ver->hi)) continue;
      if (identical(ver->view, w)) {
        if (!latest_seen && ver->freed && !write) return false;
        latest_seen = true;
      } else if (occupies_memory(ver) && (ver->written || write)) {
        return false;
      }
    }
    if (k > 0) {
      const char *olo, *ohi;
      span_of(&m->ops[0], &olo, &ohi);
      if (overlap(lo, hi, olo, ohi) && !identical(w, &m->ops[0])) return false;
    }
  }
  return true;
}

/* Records m's accesses: reads first, then the write (an in-place op reads
 * the old value, so a version it starts is not written first). */
static bool member_apply(fuse_group *g, fuse_member *m, int index) {
  const int n = m->task->n_operands;
  for (int step = 0; step < n; step++) {
    const int k = step + 1 < n ? step + 1 : 0;
    const nrt_operand *w = &m->ops[k];
    const bool write = k == 0;
    m->konst[k] = -1;
    m->version[k] = -1;
    if (!write && all_broadcast(w)) {
      int c = find_const(g, w);
      if (c >= 0) {
        m->konst[k] = (int16_t)c;
        continue;
      }
    }
    int match = -1;
    for (int v = 0; v < g->n_versions; v++)
      if (!g->versions[v].freed && identical(g->versions[v].view, w)) match = v;
    if (match < 0) {
      if (g->n_versions == FUSE_MAX_VERSIONS) return false;
      match = g->n_versions++;
      fuse_version *ver = &g->versions[match];
      ver->view = w;
      span_of(w, &ver->lo, &ver->hi);
      ver->esize = nrt_dtype_size((nrt_dtype)w->dtype);
      ver->first_member = index;
      ver->first_is_write = write;
      ver->written = ver->freed = ver->sink_reads = false;
      ver->dense = dense(w);
      ver->scratch = -1;
      ver->stage = -1;
    }
    fuse_version *ver = &g->versions[match];
    ver->written |= write;
    ver->last_member = index;
    m->version[k] = (int16_t)match;
  }
  return true;
}

/* A dead intermediate gets a scratch slot when its block is released: its
 * live range (by member index) is final then.  Slots are shared by
 * versions whose ranges do not meet: within a tile, a slot is reused once
 * its last reader has run.  What the sink reads has a slot of its own: in
 * rows it is kept for the whole tile, where other slots hold one row. */
static void give_scratch(fuse_group *g, fuse_version *ver) {
  int slot = -1;
  for (int s = 0; s < g->n_scratch && slot < 0 && !ver->sink_reads; s++) {
    slot = s;
    for (int v = 0; v < g->n_versions; v++) {
      const fuse_version *o = &g->versions[v];
      if (o->scratch == s && (o->sink_reads || (o->first_member <= ver->last_member &&
                                                ver->first_member <= o->last_member))) {
        slot = -1;
        break;
      }
    }
  }
  if (slot < 0) {
    if (g->n_scratch == FUSE_MAX_SCRATCH) return; /* stored after all */
    slot = g->n_scratch++;
    g->scratch_bytes[slot] = 0;
  }
  const size_t bytes = ver->esize * FUSE_TILE_ELEMENTS;
  if (bytes > g->scratch_bytes[slot]) g->scratch_bytes[slot] = bytes;
  ver->scratch = slot;
}

/* Whether a free hint releases the bytes [lo, hi). */
static bool hint_releases(const nrt_task *hint, const char *lo, const char *hi) {
  const nrt_memcpy_params *p = (const nrt_memcpy_params *)hint->params;
  return lo >= (const char *)p->dst && hi <= (const char *)p->dst + p->bytes;
}

static void apply_hint(fuse_group *g, const nrt_task *t, bool to_consts) {
  for (int v = 0; v < g->n_versions; v++) {
    fuse_version *ver = &g->versions[v];
    if (ver->freed || !hint_releases(t, ver->lo, ver->hi)) continue;
    ver->freed = true;
    if (ver->first_is_write && ver->dense) give_scratch(g, ver);
  }
  for (int c = 0; c < g->n_consts && to_consts; c++)
    if (hint_releases(t, g->consts[c].ptr, g->consts[c].ptr + g->consts[c].esize))
      g->consts[c].freed = true;
}

/* Whether the sink reduces a value a member of the group wrote.  One that
 * reduces anything else (the next evaluation's x.mean(-1) behind a chain)
 * would save nothing but its own launch, and hold the whole group to
 * kernel calls per tile: LayerNorm from primitives spent 10.6 ms in such a
 * group, against 3.9 + 3.9 for the chain and the mean apart. */
static bool reads_group_value(const fuse_group *g, const fuse_member *m) {
  for (int v = g->n_versions - 1; v >= 0; v--)
    if (!g->versions[v].freed && identical(g->versions[v].view, &m->ops[1]))
      return g->versions[v].written;
  return false;
}

/* Walks the items in order; the group ends before the first that does
 * not fit.  Returns the number of members kept. */
static int scan(fuse_group *g) {
  g->n_versions = g->n_scratch = 0;
  int members = 0;
  for (int c = 0; c < g->n_consts; c++) g->consts[c].freed = g->consts[c].superseded = false;
  g->n_consts = 0; /* constants become visible as the walk reaches them */
  for (int i = 0; i < g->n_items; i++) {
    fuse_item *it = &g->items[i];
    bool ok = true;
    if (it->kind == ITEM_HINT) {
      apply_hint(g, it->task, true);
    } else if (it->kind == ITEM_CONST) {
      /* A constant's bytes are stored after the tiles, so they may reuse a
       * released block (the previous Python number's scalar, read by a
       * member: every read of it precedes the release), never a live one. */
      fuse_const *c = &g->consts[it->index];
      for (int v = 0; v < g->n_versions && ok; v++)
        ok = g->versions[v].freed || !occupies_memory(&g->versions[v]) ||
             !overlap(c->ptr, c->ptr + c->esize, g->versions[v].lo, g->versions[v].hi);
      if (ok) {
        for (int k = 0; k < g->n_consts; k++)
          if (g->consts[k].ptr == c->ptr) g->consts[k].superseded = true;
        g->n_consts++;
      }
    } else {
      fuse_member *m = &g->members[it->index];
      const bool sink = i == g->sink_item;
      ok = (!sink || reads_group_value(g, m)) && member_fits(g, m) && member_apply(g, m, members);
      if (ok && sink) g->versions[m->version[1]].sink_reads = true;
      members += ok;
    }
    if (!ok) {
      g->n_items = i;
      if (g->sink_item >= i) g->sink_item = -1;
      break;
    }
  }
  g->n_members = members;
  return members;
}

/* ------------------------------------------------------------ whole chains */

int nrt_fusion_chain_ends(const fuse_group *g, int members, int *end) {
  int last_read[FUSE_MAX_VERSIONS];
  for (int v = 0; v < g->n_versions; v++) last_read[v] = -1;
  for (int i = 0; i < members; i++)
    for (int k = 1; k < g->members[i].task->n_operands; k++)
      if (g->members[i].konst[k] < 0) last_read[g->members[i].version[k]] = i;
  int n = 0, reach = -1;
  for (int i = 0; i < members; i++) {
    const int w = g->members[i].version[0];
    if (last_read[w] > reach) reach = last_read[w];
    if (reach <= i) end[n++] = i + 1;
  }
  if (n == 0 || end[n - 1] != members) end[n++] = members;
  return n;
}

/* A group cut short (the member limit, a task that could not join) often
 * ends inside a chain: the window held 8 whole parameters of an Adam step
 * and part of the 9th.  Its members then store values the chain's rest
 * reads (dead otherwise), and the cut moves from one window to the next,
 * so compiled groups keep meeting segments they have not built (a
 * 10-parameter step ran 3 of its 6 groups in row mode while their builds
 * were queued).  So when a fusible task queued within FUSE_CHAIN_AHEAD
 * tasks after the group reads what its last chain wrote, the group ends
 * before that chain, which joins the next group, at its start.  Nothing
 * the group keeps is read by what it leaves, so nothing it could elide is
 * lost; the free hints queued behind the cut still release its values
 * (the tasks between do not read them), but not its constants: a device
 * scalar filled before the cut may be read after it.  A group that ends
 * where the queue ends is kept whole: the host is still issuing the chain,
 * and the next group takes what follows. */
#define FUSE_CHAIN_AHEAD 64

static bool chain_goes_on(const fuse_group *g, int from, const nrt_task *ring, unsigned ring_size,
                          uint64_t head, uint64_t queued) {
  bool dead[FUSE_MAX_VERSIONS]; /* released: later tasks on those bytes are other tensors' */
  for (int v = 0; v < g->n_versions; v++) dead[v] = g->versions[v].freed;
  const uint64_t first = (uint64_t)g->n_items;
  const uint64_t last = queued < first + FUSE_CHAIN_AHEAD ? queued : first + FUSE_CHAIN_AHEAD;
  for (uint64_t i = first; i < last; i++) {
    const nrt_task *t = &ring[(head + i) % ring_size];
    if (t->kernel == NRT_KERNEL_HINT_FREE) {
      for (int v = 0; v < g->n_versions; v++)
        dead[v] |= hint_releases(t, g->versions[v].lo, g->versions[v].hi);
      continue;
    }
    if (classify(t) == NRT_FUSE_NONE) continue;
    for (int k = 1; k < t->n_operands; k++) {
      const char *lo, *hi;
      span_of(&t->operands[k], &lo, &hi);
      for (int m = from; m < g->n_members; m++) {
        const int v = g->members[m].version[0];
        if (!dead[v] && overlap(lo, hi, g->versions[v].lo, g->versions[v].hi)) return true;
      }
    }
  }
  return false;
}

static void trim_to_whole_chains(fuse_group *g, const nrt_task *ring, unsigned ring_size,
                                 uint64_t head, uint64_t queued) {
  int end[FUSE_MAX_MEMBERS];
  const int n = nrt_fusion_chain_ends(g, g->n_members, end);
  const int keep = n >= 2 ? end[n - 2] : 0;
  if (g->sink_item >= 0 || keep < 2 || !chain_goes_on(g, keep, ring, ring_size, head, queued))
    return;
  const int scanned = g->n_items;
  /* right after the chain's last member: the device scalars filled after
   * it are the next chain's, and the next group begins with their fills */
  int cut = 0;
  while (!(g->items[cut].kind == ITEM_MEMBER && g->items[cut].index == keep - 1)) cut++;
  g->n_items = ++cut;
  scan(g); /* the prefix fits as it did: keep members */
  /* not to constants: a device scalar filled before the cut may be read
   * after it (the next chain's first op), and must then be stored */
  for (int i = cut; i < scanned; i++)
    if (g->items[i].kind == ITEM_HINT) apply_hint(g, g->items[i].task, false);
}

/* ------------------------------------------------------------ elision, tiles */

/* The sink's reduced dims (stride 0 in its output) must be the innermost
 * refined dims, and a row must fit in a tile, so that every tile holds
 * whole rows; else the group ends before it. */
static bool sink_fits(const fuse_group *g) {
  const nrt_operand *out = &g->members[g->items[g->sink_item].index].ops[0];
  int64_t row = 1;
  bool kept_seen = false;
  for (int d = g->ndim - 1; d >= 0; d--) {
    if (out->sizes[d] == 1) continue;
    if (out->strides[d] != 0) kept_seen = true;
    else if (kept_seen) return false;
    else row *= out->sizes[d];
  }
  return row <= FUSE_TILE_ELEMENTS;
}

static void cut_tiles(fuse_group *g) {
  int64_t inner = 1;
  int q = g->ndim - 1;
  while (q >= 0 && inner * g->sizes[q] <= FUSE_TILE_ELEMENTS) inner *= g->sizes[q--];
  g->split = q;
  if (q < 0) {
    g->chunk = g->n_chunks = g->n_tiles = 1;
    return;
  }
  g->chunk = FUSE_TILE_ELEMENTS / inner;
  g->n_chunks = (g->sizes[q] + g->chunk - 1) / g->chunk;
  int64_t outer = 1;
  for (int d = 0; d < q; d++) outer *= g->sizes[d];
  g->n_tiles = outer * g->n_chunks;
}

int64_t nrt_fusion_tile_origin(const fuse_group *g, int64_t t, int64_t *idx) {
  for (int d = 0; d < g->ndim; d++) idx[d] = 0;
  if (g->split < 0) return g->numel;
  int64_t outer = t / g->n_chunks;
  for (int d = g->split - 1; d >= 0; d--) {
    idx[d] = outer % g->sizes[d];
    outer /= g->sizes[d];
  }
  idx[g->split] = (t % g->n_chunks) * g->chunk;
  const int64_t left = g->sizes[g->split] - idx[g->split];
  return left < g->chunk ? left : g->chunk;
}

/* Runs the constants' fills and asks each member's kernel about its
 * descriptor (an empty tile), in order; the group ends before the first
 * task that fails either. */
static void admit(fuse_group *g, nrt_exec_ctx *ctx) {
  int members = 0;
  for (int i = 0; i < g->n_items; i++) {
    const fuse_item *it = &g->items[i];
    const bool ok = it->kind == ITEM_HINT ||
                    (it->kind == ITEM_CONST ? make_const(&g->consts[it->index], ctx, it->task)
                                            : kernel_accepts(ctx, it->task));
    if (!ok) {
      g->n_items = i;
      if (g->sink_item >= i) g->sink_item = -1;
      break;
    }
    members += it->kind == ITEM_MEMBER;
  }
  g->n_members = members;
}

/* Which stored outputs row mode stages (fusion.h, FUSE_STREAM_BYTES): a
 * version written before it is read (an in-place update's lines are in
 * the cache already, from its read), not elided, not read by the sink
 * (which reads the tile back at once), contiguous along the row and
 * large.
 * A member's access goes to the staging row from the version's first
 * write on (its reads before that, in-place ones included, read memory,
 * which holds the value from before the group).  And which inputs it
 * prefetches a row ahead (fusion_rows.c): large ones read from memory. */
static bool large_along_rows(const fuse_group *g, const fuse_version *ver, uint64_t bytes) {
  const int inner = g->ndim - 1;
  return inner >= 0 && ver->view->strides[inner] == (int64_t)ver->esize &&
         (uint64_t)g->numel * ver->esize >= bytes;
}

static void plan_staging(fuse_group *g) {
  g->n_stage = 0;
  for (int v = 0; v < g->n_versions; v++) {
    fuse_version *ver = &g->versions[v];
    ver->stage = -1;
    if (!ver->first_is_write || ver->scratch >= 0 || ver->sink_reads ||
        g->n_stage == FUSE_MAX_STAGE || !large_along_rows(g, ver, FUSE_STREAM_BYTES))
      continue;
    ver->stage = g->n_stage;
    g->stage_version[g->n_stage++] = v;
  }
  bool written[FUSE_MAX_VERSIONS] = {false}, fetched[FUSE_MAX_VERSIONS] = {false};
  g->n_prefetch = 0;
  int streams = 0; /* large inputs read from memory, all of them */
  for (int m = 0; m < g->n_members; m++) {
    fuse_member *mem = &g->members[m];
    const int n = mem->task->n_operands;
    for (int k = 0; k < n; k++) {
      const int v = mem->konst[k] >= 0 ? -1 : mem->version[k];
      mem->staged[k] = v >= 0 && g->versions[v].stage >= 0 && (k == 0 || written[v]);
      /* a large input read from memory, contiguous along the row: prefetched */
      const fuse_version *ver = v >= 0 ? &g->versions[v] : NULL;
      if (k > 0 && ver && !mem->staged[k] && ver->scratch < 0 && !fetched[v] && !written[v] &&
          large_along_rows(g, ver, FUSE_PREFETCH_BYTES)) {
        fetched[v] = true;
        streams++;
        if (g->n_prefetch < FUSE_MAX_PREFETCH) g->prefetch_version[g->n_prefetch++] = v;
      }
    }
    if (mem->version[0] >= 0) written[mem->version[0]] = true;
  }
  g->row = FUSE_ROW_ELEMENTS; /* longer with many streams (fusion.h) */
  if (g->n_stage == 0)
    for (int s = 8; s <= streams && g->row < FUSE_ROW_MAX_ELEMENTS; s *= 2) g->row *= 2;
}

bool nrt_fusion_plan(fuse_group *g, nrt_exec_ctx *ctx, const nrt_task *ring, unsigned ring_size,
                     uint64_t head, uint64_t queued) {
  points pts;
  collect(g, ring, ring_size, head, queued, &pts);
  if (g->n_members < 2) return false;
  admit(g, ctx);
  if (g->n_members < 2) return false;
  for (int m = 0; m < g->n_members; m++) {
    fuse_member *mem = &g->members[m];
    for (int k = 0; k < mem->task->n_operands; k++)
      refine(&mem->task->operands[k], &pts, &mem->ops[k]);
  }
  g->ndim = pts.n;
  for (int j = 0; j < pts.n; j++)
    g->sizes[pts.n - 1 - j] = pts.p[j] / (j ? pts.p[j - 1] : 1);
  if (g->sink_item >= 0 && !sink_fits(g)) {
    g->n_items = g->sink_item;
    g->n_members--;
    g->sink_item = -1;
  }
  if (scan(g) < 2) return false;
  trim_to_whole_chains(g, ring, ring_size, head, queued);
  plan_staging(g);
  /* trailing items after the last member stay: hints, and constants whose
   * fills the executor stores */
  cut_tiles(g);
  return true;
}
