#define _GNU_SOURCE /* usleep, sched_getcpu */
/* test_runtime_fusion_multi.c — adaptive eager's multi-tensor groups
 * (runtime/src/fusion_multi.c) with the real foreach kernel: an SGD step's
 * three foreach ops queued behind a busy stream run as one group, bit for
 * bit as unfused, with the event records between them; a member that
 * writes bytes another reads at another place (overlapping views across
 * lists, a device scalar written by an earlier member) ends the group, and
 * the results stay unfused execution's; verify mode checks a group. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/internal.h"
#include "check.h"
#include "neuron_kernels.h"
#include "test_runtime_util.h"

#define ROWS 4
static const int64_t sizes_[ROWS] = {7, 0, 70001, 9000}; /* 79008 elements, 4 blocks */

static void *device_bytes(nrt_stream *s, size_t n) {
  void *p = NULL;
  CHECK_OK(nrt_mem_alloc(s, n ? n : 1, &p));
  return p;
}

/* A list of ROWS float32 tensors (row r: sizes_[r] elements) filled from seed. */
typedef struct list {
  float *t[ROWS];
} list;

static void make_list(nrt_stream *s, list *l, int seed) {
  for (int r = 0; r < ROWS; r++) {
    l->t[r] = device_bytes(s, (size_t)sizes_[r] * sizeof(float));
    for (int64_t i = 0; i < sizes_[r]; i++)
      l->t[r][i] = (float)sin(0.37 * (double)(i + 1) + 1.3 * r + 2.1 * seed) * (1 + seed);
  }
}

static void free_list(list *l) {
  for (int r = 0; r < ROWS; r++) CHECK_OK(nrt_mem_free(l->t[r]));
}

/* What a program's launches leave to free after its synchronisation. */
#define MAX_LAUNCHES 16
typedef struct program {
  nrt_stream *s;
  int n;
  void *tables[MAX_LAUNCHES];
  nrt_event *events[MAX_LAUNCHES];
} program;

/* One foreach launch: out (slot 0) <- op(a, b) (b NULL: the scalar, or
 * *scalar_tensor), then an event record, as the glue releases the table. */
static void foreach(program *pg, int op, float *const *out, float *const *a, float *const *b,
                    double alpha, double scalar, const float *scalar_tensor) {
  CHECK(pg->n < MAX_LAUNCHES);
  const size_t bytes = ROWS * sizeof(nk_tensor_set);
  nk_tensor_set *sets = device_bytes(pg->s, bytes);
  memset(sets, 0, bytes);
  int64_t blocks = 0;
  for (int r = 0; r < ROWS; r++) {
    sets[r].data[0] = out[r];
    sets[r].data[1] = a[r];
    if (b) sets[r].data[2] = b[r];
    sets[r].numel = sizes_[r];
    sets[r].first_block = blocks;
    blocks += (sizes_[r] + NK_FOREACH_BLOCK - 1) / NK_FOREACH_BLOCK;
  }
  nrt_task t = {.kernel = NK_KERNEL_FOREACH, .name = "foreach", .n_operands = 2};
  t.operands[0] = (nrt_operand){.data = sets, .dtype = NRT_UINT8, .ndim = 1};
  t.operands[0].sizes[0] = (int64_t)bytes;
  t.operands[0].strides[0] = 1;
  t.operands[1] = (nrt_operand){.data = out[2], .dtype = NRT_FLOAT32, .ndim = 1};
  t.operands[1].sizes[0] = sizes_[2];
  t.operands[1].strides[0] = 4;
  nk_foreach_params *p = (nk_foreach_params *)t.params;
  *p = (nk_foreach_params){.sets = sets, .n_tensors = ROWS, .n_blocks = blocks, .op = op,
                           .b_is_list = b != NULL, .alpha = alpha, .scalar = scalar};
  for (int k = 0; k < NK_FOREACH_SLOTS; k++) p->dtype[k] = NRT_FLOAT32;
  if (scalar_tensor) {
    p->scalar_kind = NK_FOREACH_SCALAR_TENSOR;
    p->scalar_ptr = scalar_tensor;
    p->scalar_dtype = NRT_FLOAT32;
  }
  CHECK_OK(nrt_launch(pg->s, &t));
  CHECK_OK(nrt_event_create(0, &pg->events[pg->n]));
  CHECK_OK(nrt_event_record(pg->events[pg->n], pg->s));
  pg->tables[pg->n++] = sets;
}

static void finish(program *pg) {
  CHECK_OK(nrt_stream_synchronize(pg->s));
  for (int i = 0; i < pg->n; i++) {
    CHECK(nrt_event_query(pg->events[i]) == NRT_SUCCESS);
    CHECK_OK(nrt_event_destroy(pg->events[i]));
    CHECK_OK(nrt_mem_free(pg->tables[i]));
  }
  pg->n = 0;
}

static nrt_fusion_stats stats(void) {
  nrt_fusion_stats st;
  nrt_fusion_stats_get(&st);
  return st;
}

/* Copies of a list's values, to compare runs. */
static float *snapshot(const list *l) {
  int64_t n = 0;
  for (int r = 0; r < ROWS; r++) n += sizes_[r];
  float *out = malloc((size_t)n * sizeof(float)), *p = out;
  for (int r = 0; r < ROWS; r++) {
    memcpy(p, l->t[r], (size_t)sizes_[r] * sizeof(float));
    p += sizes_[r];
  }
  return out;
}

static int64_t total(void) {
  int64_t n = 0;
  for (int r = 0; r < ROWS; r++) n += sizes_[r];
  return n;
}

/* SGD with momentum, twice: buf = 0.9 buf + g; p -= 0.01 buf.  Returns
 * param and buf after, from fresh lists. */
static void sgd_steps(nrt_stream *s, float **param_out, float **buf_out) {
  list p, g, m;
  make_list(s, &p, 0);
  make_list(s, &g, 1);
  make_list(s, &m, 2);
  program pg = {.s = s};
  CHECK_OK(launch_sleep(s, 20000)); /* the steps queue up behind it */
  for (int step = 0; step < 2; step++) {
    foreach(&pg, NK_FOREACH_MUL, m.t, m.t, NULL, 1, 0.9, NULL);
    foreach(&pg, NK_FOREACH_ADD, m.t, m.t, g.t, 1.0, 0, NULL);
    foreach(&pg, NK_FOREACH_ADD, p.t, p.t, m.t, -0.01, 0, NULL);
  }
  finish(&pg);
  *param_out = snapshot(&p);
  *buf_out = snapshot(&m);
  free_list(&p);
  free_list(&g);
  free_list(&m);
}

static void test_sgd_steps_fuse(nrt_stream *s) {
  float *p_off, *m_off, *p_on, *m_on;
  nrt_adaptive_set_mode(NRT_ADAPTIVE_OFF);
  nrt_fusion_stats_reset();
  sgd_steps(s, &p_off, &m_off);
  CHECK(stats().groups == 0);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  sgd_steps(s, &p_on, &m_on);
  nrt_fusion_stats st = stats();
  CHECK(st.groups == 1 && st.groups_multi_tensor == 1 && st.tasks_fused == 6); /* both steps */
  CHECK(memcmp(p_off, p_on, (size_t)total() * sizeof(float)) == 0);
  CHECK(memcmp(m_off, m_on, (size_t)total() * sizeof(float)) == 0);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_VERIFY);
  nrt_fusion_stats_reset();
  free(p_on);
  free(m_on);
  sgd_steps(s, &p_on, &m_on);
  st = stats();
  CHECK(st.groups_verified == 1 && st.tasks_fused == 6);
  CHECK(nrt_stream_query(s) == NRT_SUCCESS); /* verify found no difference */
  CHECK(memcmp(p_off, p_on, (size_t)total() * sizeof(float)) == 0);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  free(p_off);
  free(m_off);
  free(p_on);
  free(m_on);
}

/* x and y view one buffer one element apart (rows of the same sizes): a
 * member writing y after one writing x must not join -- the elements it
 * reads were written by the other at other places. */
static void shifted_views(nrt_stream *s, float *out) {
  const int64_t n = total() + ROWS;
  float *base = device_bytes(s, (size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) base[i] = (float)(i % 97) * 0.25f - 3.0f;
  list x, y;
  int64_t at = 0;
  for (int r = 0; r < ROWS; r++) {
    x.t[r] = base + at;
    y.t[r] = base + at + 1;
    at += sizes_[r] + 1;
  }
  program pg = {.s = s};
  CHECK_OK(launch_sleep(s, 20000));
  foreach(&pg, NK_FOREACH_MUL, x.t, x.t, NULL, 1, 3.0, NULL);
  foreach(&pg, NK_FOREACH_ADD, y.t, y.t, NULL, 1, 0.5, NULL);
  foreach(&pg, NK_FOREACH_MUL, x.t, x.t, NULL, 1, -2.0, NULL);
  finish(&pg);
  memcpy(out, base, (size_t)n * sizeof(float));
  CHECK_OK(nrt_mem_free(base));
}

/* a device scalar written by an earlier member of the would-be group: the
 * later member reads it when it runs, after the write */
static void scalar_written_first(nrt_stream *s, float *out) {
  list a, b;
  make_list(s, &a, 3);
  make_list(s, &b, 4);
  float *lr = a.t[0] + 3; /* an element of row 0 of a */
  program pg = {.s = s};
  CHECK_OK(launch_sleep(s, 20000));
  foreach(&pg, NK_FOREACH_MUL, a.t, a.t, NULL, 1, 4.0, NULL);
  foreach(&pg, NK_FOREACH_MUL, b.t, b.t, NULL, 1, 0, lr);
  finish(&pg);
  float *snap = snapshot(&b);
  memcpy(out, snap, (size_t)total() * sizeof(float));
  free(snap);
  free_list(&a);
  free_list(&b);
}

static void test_hazards_cut(nrt_stream *s) {
  const size_t bytes = (size_t)(total() + ROWS) * sizeof(float);
  float *off = malloc(bytes), *on = malloc(bytes);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_OFF);
  shifted_views(s, off);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  nrt_fusion_stats_reset();
  shifted_views(s, on);
  CHECK(stats().tasks_fused == 0); /* each of the three overlaps the one before */
  CHECK(memcmp(off, on, bytes) == 0);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_OFF);
  scalar_written_first(s, off);
  nrt_adaptive_set_mode(NRT_ADAPTIVE_ON);
  nrt_fusion_stats_reset();
  scalar_written_first(s, on);
  CHECK(stats().tasks_fused == 0);
  CHECK(memcmp(off, on, (size_t)total() * sizeof(float)) == 0);
  free(off);
  free(on);
}

int main(void) {
  CHECK_OK(nk_register_kernels());
  register_test_kernels();
  nrt_stream *s = nrt_stream_default(0);
  CHECK(s != NULL);
  test_sgd_steps_fuse(s);
  test_hazards_cut(s);
  return CHECK_SUMMARY();
}
