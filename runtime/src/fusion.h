/* fusion.h — adaptive eager's group: what fusion_plan.c decides and
 * fusion_exec.c runs.  Private to the runtime.
 *
 * A group is a run of consecutive queued tasks: members (elementwise tasks
 * over one index space), constants (fills of one element: the device
 * scalars a Python number becomes) and free hints.  The planner
 *   1. gives every member the same index space: each task's descriptors
 *      are in the shape its TensorIterator coalesced them to ([2^24], or
 *      [4096, 4096] when an operand broadcasts), so dims are split until
 *      all members share one refined shape (splitting a dim re-describes
 *      the same elements exactly);
 *   2. follows every byte range through the group in program order: any
 *      two accesses to overlapping bytes, one a write, must be the
 *      identical view (pointer, dtype, strides in the refined shape), or
 *      the group ends before the later task -- then each tile sees every
 *      element in program order, in-place chains included;
 *   3. elides dead intermediates: a view's version that a member writes
 *      first, whose block a free hint inside the group releases, lives in
 *      per-thread scratch and is never stored.
 * A reduction may end the group (its sink) when it reads a value a member
 * wrote (a reduction of an unrelated tensor gains nothing by joining, and
 * would hold the group to kernel calls per tile) and its rows are
 * innermost and fit in a tile: each tile then holds whole rows, and the
 * reduction's own kernel reduces them as it would in the whole task, after
 * the other members ran on the tile (kernel calls, rows or compiled code).
 * What it reads stays whole for the tile: a dead intermediate in a scratch
 * slot of its own, a stored value not staged.
 * The executor cuts the index space into tiles and runs, tile by tile,
 * every member's own kernel on that tile (operands narrowed to it, dead
 * intermediates and constants redirected), spread over the compute pool. */
#ifndef NRT_FUSION_H
#define NRT_FUSION_H

#include "internal.h"

#define FUSE_MAX_MEMBERS 64
#define FUSE_MAX_VERSIONS 160
#define FUSE_MAX_CONSTS 48 /* Adam from plain ops: 4 Python numbers per parameter */
#define FUSE_MAX_SCRATCH 24 /* scratch slots per tile (dead intermediates live at once) */
#define FUSE_WINDOW 384     /* queued tasks the planner looks at */
/* Below this many elements a chain is not worth planning: each task is a
 * few microseconds, and per-tile kernel calls would cost as much. */
#define FUSE_MIN_ELEMENTS 8192
/* Elements per tile: a tile's operands and scratch (a few 128 KiB rows of
 * float32) stay in L2 while every member passes over them, and one kernel
 * call per member per tile (a fraction of a microsecond) stays a few
 * percent of the tile's work (measured: GELU from 9 ops on 2^24 elements
 * took 8% longer with 8K-element tiles than with 32K ones).  At most one elementwise
 * grain (NK_GRAIN_ELEMENTWISE), so a kernel never splits a tile further. */
#define FUSE_TILE_ELEMENTS 32768
/* Row mode (fusion_rows.c): a tile runs in rows of at most this many
 * elements, each member's captured row loop called directly, so a row's
 * intermediates (8 KiB of float32 each) stay in L1.  Rows shorter than
 * FUSE_ROW_MIN (a narrow inner dim) keep the per-tile kernel calls. */
#define FUSE_ROW_ELEMENTS 2048
#define FUSE_ROW_MIN 256
/* A group that reads many large inputs from memory runs longer rows: its
 * rows' intermediates are few beside its streams, and each member's 8 KiB
 * burst of one of 16+ streams (Adam from plain ops over 8 parameters: p, g,
 * m and v of each) left the fused step 10% slower than the unfused ops;
 * in rows of 8K elements it is 15% faster, while chains over one input
 * lost 15-25% at 4K-element rows (their intermediates left L1).  Rows
 * double at 8 and at 16 such streams (fusion_plan.c), up to this, and only
 * when nothing is staged (a staging slot holds FUSE_ROW_ELEMENTS). */
#define FUSE_ROW_MAX_ELEMENTS 8192
/* Row mode stages a stored output of at least this many bytes: its members
 * write a row-sized staging buffer (later members read it there), and after
 * the row's members ran, the row goes to memory with non-temporal stores.
 * A store that misses the cache otherwise first reads the line (read for
 * ownership): three stored outputs of 2^24 floats took 13 ms fused against
 * 10 ms unfused, whose large rows already stream (binary_simd.h, the same
 * 4 MiB bound). */
#define FUSE_STREAM_BYTES (4 << 20)
#define FUSE_MAX_STAGE 8
/* Row mode prefetches, a row ahead, each input read from memory of at
 * least this many bytes (fusion_rows.c: members' 8 KiB bursts are too
 * short for the hardware prefetchers; Adam from plain ops on 1M-element
 * parameters: 9.1 -> 7.8-8.3 ms per 8 parameters). */
#define FUSE_MAX_PREFETCH 16
#define FUSE_PREFETCH_BYTES (1 << 20)

typedef struct fuse_version {
  const nrt_operand *view; /* a member's refined operand: pointer, dtype, strides */
  const char *lo, *hi;     /* bytes it can touch */
  size_t esize;
  int first_member, last_member;
  bool first_is_write, written, freed, dense;
  bool sink_reads; /* the reduction sink reads it: whole tiles, never staged */
  int scratch; /* slot when elided, else -1 */
  int stage;   /* row mode: staging slot of a large stored output, else -1 */
} fuse_version;

typedef struct fuse_const {
  const nrt_task *fill; /* the queued fill, run once into value */
  char *ptr;            /* the device scalar it fills */
  size_t esize;
  bool freed;           /* released inside the group: never stored */
  bool superseded;      /* a later fill of the same scalar follows */
  _Alignas(16) unsigned char value[16];
} fuse_const;

typedef struct fuse_member {
  const nrt_task *task;                  /* the ring's copy */
  nrt_operand ops[NRT_MAX_OPERANDS];     /* refined to the group's shape */
  int16_t version[NRT_MAX_OPERANDS];     /* fuse_version index */
  int16_t konst[NRT_MAX_OPERANDS];       /* fuse_const read instead, or -1 */
  bool staged[NRT_MAX_OPERANDS];         /* row mode: the access is to the staging row
                                            (the write, and reads after the first one) */
} fuse_member;

/* One item of the group in program order. */
typedef struct fuse_item {
  enum { ITEM_MEMBER, ITEM_CONST, ITEM_HINT } kind;
  int index; /* member or const index; unused for hints */
  const nrt_task *task;
} fuse_item;

typedef struct fuse_group {
  int sink_item;      /* the item of a reduction ending the group, or -1 */
  int n_items, n_members, n_consts, n_versions, n_scratch;
  fuse_item items[FUSE_WINDOW];
  fuse_member members[FUSE_MAX_MEMBERS];
  fuse_version versions[FUSE_MAX_VERSIONS];
  fuse_const consts[FUSE_MAX_CONSTS];
  /* the refined index space, innermost dim last (as descriptors are) */
  int ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t numel;
  /* tiles: dims after `split` whole, `split` in chunks of `chunk` */
  int split;
  int64_t chunk, n_chunks, n_tiles;
  size_t scratch_bytes[FUSE_MAX_SCRATCH]; /* per slot, per tile */
  int n_stage;
  int stage_version[FUSE_MAX_STAGE]; /* staged versions, in version order */
  int n_prefetch;
  int prefetch_version[FUSE_MAX_PREFETCH]; /* large inputs read from memory (row mode) */
  int64_t row; /* row mode's elements per row */
} fuse_group;

/* A group compiled (fusion_jit.c): its members cut into segments where no
 * value crosses (independent chains: each parameter of an optimizer step,
 * each evaluation of an expression), each segment one generated row
 * function, so a program's repeated chains share one build.  Per row, a
 * segment's code gets n, the row pointer of each (member, operand) pair in
 * its args (p[a]) and its scalars (k); intermediates live in registers. */
#define FUSE_JIT_MAX_ARGS 512
#define FUSE_JIT_MAX_SCALARS 256
#define FUSE_JIT_MAX_SEGMENTS FUSE_MAX_MEMBERS
typedef void (*fuse_jit_fn)(int64_t n, char *const *p, const float *k);
typedef struct fuse_jit_segment {
  fuse_jit_fn fn;
  int first_arg, first_scalar;
} fuse_jit_segment;
typedef struct fuse_jit {
  bool ready; /* every segment's code is loaded */
  uint64_t streamed_bytes; /* stores it streams (the staged outputs it stores) */
  int n_segments;
  fuse_jit_segment seg[FUSE_JIT_MAX_SEGMENTS];
  int n_args;
  int16_t arg_member[FUSE_JIT_MAX_ARGS], arg_operand[FUSE_JIT_MAX_ARGS];
  int n_scalars;
  float scalars[FUSE_JIT_MAX_SCALARS];
} fuse_jit;

/* The members run by rows or compiled code: all but a reduction sink,
 * which reduces each tile with its own kernel after them. */
static inline int fuse_row_members(const fuse_group *g) {
  return g->n_members - (g->sink_item >= 0 ? 1 : 0);
}

/* fusion_jit.c: generates each segment's code into src (cap bytes) and
 * looks it up; jit->ready when all are loaded (a first sight queues its
 * build, or builds it now in sync mode).  False when some member has no
 * expression, an operand is neither dense nor row-invariant, or compiling
 * is off. */
bool nrt_fusion_jit_prepare(const fuse_group *g, const nrt_row_entry *entries, fuse_jit *jit,
                            char *src, size_t cap);
void nrt_fusion_jit_stats(uint64_t *builds, uint64_t *failures);
void nrt_fusion_jit_stats_reset(void);

/* fusion_plan.c: builds the group at ring[head] from `queued` tasks;
 * false when there is none of at least two members.  ctx runs each
 * candidate's kernel on an empty tile, so a task its kernel would refuse
 * stays out (it then fails on its own, unfused, with its own error). */
bool nrt_fusion_plan(fuse_group *g, nrt_exec_ctx *ctx, const nrt_task *ring, unsigned ring_size,
                     uint64_t head, uint64_t queued);

/* fusion_plan.c: the ends of the group's independent chains among its
 * first `members` members: each b in end[] (ascending, the last is
 * `members`) is a boundary no value crosses -- nothing a member before b
 * wrote is read from b on.  Returns how many. */
int nrt_fusion_chain_ends(const fuse_group *g, int members, int *end);

/* fusion_multi.c: groups of multi-tensor tasks (NRT_FUSE_MULTI), run when
 * the head task is one; same return as nrt_fusion_run. */
typedef struct fuse_multi fuse_multi;
uint64_t nrt_fusion_multi_run(fuse_multi **state, nrt_exec_ctx *ctx, nrt_stream *s,
                              const nrt_task *ring, unsigned ring_size, uint64_t head,
                              uint64_t queued);

/* fusion_exec.c, for both kinds of group: "fused[a|b|c]" from the members'
 * names; a group's counters and trace records (start: its start time when
 * tracing, bytes: stores it skipped); a verified group, a multi-tensor
 * group counted. */
void nrt_fusion_name(const nrt_task *const *members, int n, char *out, size_t cap);
void nrt_fusion_group_done(nrt_stream *s, const nrt_task *const *members, int n, uint64_t start,
                           bool failed, uint64_t bytes);
void nrt_fusion_count_verified(void);
void nrt_fusion_count_multi(void);

/* fusion_plan.c: tile t's first element (idx, one per dim) and its
 * length along the split dim (the group's numel when it is one tile). */
int64_t nrt_fusion_tile_origin(const fuse_group *g, int64_t t, int64_t *idx);

/* fusion_rows.c: whether the group may run in rows (members' row loops
 * captured by the caller), and one tile of it in rows. */
bool nrt_fusion_rows_ok(const fuse_group *g);
size_t nrt_fusion_stage_bytes(const fuse_group *g); /* a worker's staging rows */
void nrt_fusion_run_rows(const fuse_group *g, const nrt_row_entry *entries, int64_t t,
                         unsigned char *scratch, const size_t *slot_offset,
                         unsigned char *stage);
/* One segment of the group's compiled code (jit->ready) on one tile
 * (scratch: where what the sink reads is kept for the tile). */
void nrt_fusion_run_rows_jit(const fuse_group *g, const nrt_row_entry *entries, const fuse_jit *jit,
                             int segment, int64_t t, unsigned char *scratch,
                             const size_t *slot_offset);

#endif
