/* fusion_jit.c — adaptive eager's second tier: a group compiled into one
 * loop.
 *
 * Row mode (fusion_rows.c) calls each member's captured row loop on a row
 * of a few thousand elements, so every intermediate still goes through L1:
 * a load and a store per member per element, which on a chain of cheap ops
 * is most of the time (GELU from 9 primitives: binary ops 43% of the fused
 * pass).  When every member's kernel can also say its row routine as one C
 * expression over float32 vectors (nrt_row_expr: "nk_binop_vec(MUL, $1,
 * $2, #0)"), the group is written as loops over blocks of vectors: inputs
 * loaded once, each member's expression applied to registers in program
 * order, its result rounded to its dtype (float32, or a 16-bit dtype held
 * as the float32 it widens to), and only stored outputs written.  The
 * group is cut into segments where no value crosses (segments()), each its
 * own function, so repeated chains share one library.  The expressions name the kernels' own vector code
 * (the prelude, kernels/src/fusion/jit_prelude.h), compiled with the
 * kernel variant's flags and no FMA contraction, so each element gets the
 * bits it gets unfused: verify mode and the tests compare.
 *
 * The runtime does no math here: it pastes the kernels' expressions,
 * loads and stores by name.  The generated text is the cache key (with the
 * flags): a library per distinct text in the cache directory, built by the
 * system compiler on a background thread the first time a group is seen
 * (the group runs its captured loops until the library is loaded, so no
 * program ever waits for a compiler), or before the run in sync mode.
 * Scalars (alpha, a Python number's value) are arguments, not text: an
 * optimizer step whose learning rate changes reuses its code.
 *
 * NaN: where both operands of an add or a multiply are NaN, x86 returns the
 * first source's, and a compiler may swap commutative operands differently
 * in a kernel and in a group's code; binary_vec_op.h fixes the order in
 * assembly for both, and the kernels' float32 rows run their heads and
 * tails as masked vectors, so every element takes that one op. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fusion.h"

#define FUSE_JIT_MAX_VARS 512

extern char **environ;

/* ------------------------------------------------------------ configuration */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER, idle_cv = PTHREAD_COND_INITIALIZER;
static char *prelude, *target_flags, *include_dirs, *cache_dir;
static _Atomic int mode_override = -1;

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Two settings replaced together, under the lock. */
static void set_pair(char **a, const char *va, char **b, const char *vb) {
  pthread_mutex_lock(&lock);
  free(*a);
  free(*b);
  *a = dup_or_null(va);
  *b = dup_or_null(vb);
  pthread_mutex_unlock(&lock);
}

void nrt_fusion_jit_set_target(const char *pre, const char *flags) {
  set_pair(&prelude, pre, &target_flags, flags);
}

void nrt_fusion_jit_configure(const char *includes, const char *cache) {
  set_pair(&include_dirs, includes, &cache_dir, cache);
}

void nrt_fusion_jit_set_mode(int mode) {
  atomic_store(&mode_override, mode < NRT_FUSION_JIT_OFF || mode > NRT_FUSION_JIT_SYNC ? -1 : mode);
}

int nrt_fusion_jit_mode(void) {
  const int m = atomic_load(&mode_override);
  if (m >= 0) return m;
  return nrt_ensure_init() == NRT_SUCCESS ? nrt_cfg.fusion_compile : NRT_FUSION_JIT_OFF;
}

/* ------------------------------------------------------------ code */

typedef struct text {
  char *buf;
  size_t cap, len;
  bool full;
} text;

static void put(text *t, const char *fmt, ...) {
  if (t->full) return;
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= t->cap - t->len) t->full = true;
  else t->len += (size_t)n;
}

/* the prelude's name of a dtype a value may be loaded as, stored as, or
 * rounded to in registers */
static const char *vec_dtype(int dtype) {
  switch (dtype) {
  case NRT_FLOAT32: return "FLOAT32";
  case NRT_BFLOAT16: return "BFLOAT16";
  case NRT_FLOAT16: return "FLOAT16";
  default: return NULL; /* the prelude has the float rows' dtypes only */
  }
}

typedef struct gen {
  const fuse_group *g;
  fuse_jit *jit;
  text head, body; /* row-invariant values; the per-vector work */
  int value[FUSE_MAX_VERSIONS]; /* the variable holding a version, or -1 */
  int vars;
  int first_arg, first_scalar; /* the segment's first in jit's arrays */
  int end;                     /* the member after the segment */
  bool lanes[FUSE_JIT_MAX_VARS]; /* a block of NK_U vectors, else one row-invariant vector */
  bool rounds; /* some member rounds its result to a 16-bit dtype */
} gen;

/* a variable's use in an expression */
static void use(gen *s, text *t, int var) { put(t, s->lanes[var] ? "v%d[u]" : "v%d", var); }

/* A new argument of the segment: its index in the segment's p[]. */
static int add_arg(gen *s, int member, int operand) {
  fuse_jit *j = s->jit;
  if (j->n_args == FUSE_JIT_MAX_ARGS) return -1;
  j->arg_member[j->n_args] = (int16_t)member;
  j->arg_operand[j->n_args] = (int16_t)operand;
  return j->n_args++ - s->first_arg;
}

/* A variable holding operand k of member i as a float32 vector, or -1. */
static int input(gen *s, int i, int k, const nrt_row_entry *e) {
  const fuse_group *g = s->g;
  const fuse_member *m = &g->members[i];
  const int inner = g->ndim - 1, dtype = e->expr.in_dtype[k];
  const bool invariant = e->fixed[k] || m->konst[k] >= 0;
  if (invariant && e->expr.dense_inputs) return -1;
  if (!invariant) {
    const int v = m->version[k];
    if (s->value[v] >= 0) return s->value[v]; /* written or loaded earlier in the group */
    if (g->versions[v].scratch >= 0 || dtype != m->ops[k].dtype) return -1;
    const int64_t stride = m->ops[k].strides[inner];
    if (stride != 0) { /* a dense row: loaded per vector */
      const char *name = vec_dtype(dtype);
      const int a = add_arg(s, i, k);
      if (!name || a < 0 || stride != (int64_t)nrt_dtype_size((nrt_dtype)dtype) ||
          s->vars == FUSE_JIT_MAX_VARS)
        return -1;
      put(&s->body, "    VT v%d[NK_U];\n    NK_JIT_LANES_LOOP v%d[u] = NK_JIT_LD_%s(a%d, NK_JIT_AT, rem);\n",
          s->vars, s->vars, name, a);
      put(&s->body, "    NK_JIT_PREFETCH(a%d, %d);\n", a, (int)stride);
      s->lanes[s->vars] = true;
      return s->value[v] = s->vars++;
    }
    if (e->expr.dense_inputs) return -1;
  } else if (!e->fixed[k] && dtype != m->ops[k].dtype) {
    return -1; /* a constant is read as its own dtype */
  }
  /* one value along the row: a constant, a converted scalar, a stride-0 row */
  const int a = add_arg(s, i, k);
  if (a < 0 || dtype >= NRT_DTYPE_COUNT || s->vars == FUSE_JIT_MAX_VARS) return -1;
  s->lanes[s->vars] = false;
  put(&s->head, "  const VT v%d = nk_jit_bcast((nrt_dtype)%d, a%d);\n", s->vars, dtype, a);
  if (!invariant) s->value[m->version[k]] = s->vars;
  return s->vars++;
}

/* Whether a later member of the segment writes member i's output bytes
 * again (an in-place chain: m.mul_(b).add_(g)): its store would be
 * overwritten before anything reads the memory (later readers in the
 * segment take the register; no value crosses segments), so only the last
 * write stores.  Overlapping writes are identical views (fusion.h), so the
 * same byte range is the same view. */
static bool overwritten(const gen *s, int i) {
  const fuse_version *w = &s->g->versions[s->g->members[i].version[0]];
  for (int j = i + 1; j < s->end; j++) {
    const fuse_version *later = &s->g->versions[s->g->members[j].version[0]];
    if (later->lo == w->lo && later->hi == w->hi) return true;
  }
  return false;
}

/* Member i: its expression on its inputs' variables, rounded to its
 * output's dtype, stored unless the output is a dead intermediate (the
 * sink's input is stored even then: to its tile scratch). */
static bool member(gen *s, int i, const nrt_row_entry *e) {
  const fuse_group *g = s->g;
  const fuse_member *m = &g->members[i];
  const int inner = g->ndim - 1;
  const int out_dtype = m->ops[0].dtype;
  const char *out_name = vec_dtype(out_dtype);
  const fuse_version *out = &g->versions[m->version[0]];
  if (!out_name || m->konst[0] >= 0 || e->fixed[0]) return false;
  if (out->scratch < 0 && m->ops[0].strides[inner] != (int64_t)nrt_dtype_size((nrt_dtype)out_dtype))
    return false;
  int in[NRT_MAX_OPERANDS];
  for (int k = 1; k < m->task->n_operands; k++)
    if ((in[k] = input(s, i, k, e)) < 0) return false;
  const int k0 = s->jit->n_scalars - s->first_scalar; /* the segment's k[] */
  for (int j = 0; j < e->expr.n_scalars; j++) {
    if (s->jit->n_scalars == FUSE_JIT_MAX_SCALARS) return false;
    s->jit->scalars[s->jit->n_scalars++] = e->expr.scalars[j];
    put(&s->head, "  const VT c%d = VSET(k[%d]);\n", k0 + j, k0 + j);
  }
  /* the expression, $k and #j replaced by the variables */
  if (s->vars == FUSE_JIT_MAX_VARS) return false;
  const int r = s->vars++;
  s->lanes[r] = true;
  put(&s->body, "    VT v%d[NK_U];\n    NK_JIT_LANES_LOOP v%d[u] = NK_JIT_ROUND_%s(", r, r, out_name);
  for (const char *c = e->expr.code; *c && c < e->expr.code + NRT_ROW_EXPR_CODE; c++) {
    if ((*c == '$' || *c == '#') && c[1] >= '0' && c[1] <= '9') {
      const int n = c[1] - '0';
      if (*c == '$' && (n < 1 || n >= m->task->n_operands)) return false;
      if (*c == '#' && n >= e->expr.n_scalars) return false;
      if (*c == '$') use(s, &s->body, in[n]);
      else put(&s->body, "c%d", k0 + n);
      c++;
    } else {
      put(&s->body, "%c", *c);
    }
  }
  put(&s->body, ");\n");
  s->value[m->version[0]] = r;
  s->rounds |= out_dtype != NRT_FLOAT32;
  if ((out->scratch < 0 || out->sink_reads) && !overwritten(s, i)) {
    const int a = add_arg(s, i, 0);
    if (a < 0) return false;
    /* a large stored output (row mode would stage it) streams past the cache */
    put(&s->body, "    NK_JIT_LANES_LOOP NK_JIT_%s_%s(a%d, NK_JIT_AT, v%d[u], rem);\n",
        out->stage >= 0 ? "NT" : "ST", out_name, a, r);
    if (out->stage >= 0) s->jit->streamed_bytes += (uint64_t)g->numel * out->esize;
  }
  return true;
}

/* Segment [from, to)'s source into src: the prelude, then nk_fused_row. */
static bool generate(const fuse_group *g, const nrt_row_entry *entries, fuse_jit *jit, int from,
                     int to, const char *pre, char *src, size_t cap) {
  char head[8192], body[24576];
  gen s = {.g = g, .jit = jit, .head = {head, sizeof head, 0, false},
           .body = {body, sizeof body, 0, false}, .first_arg = jit->n_args,
           .first_scalar = jit->n_scalars, .end = to};
  for (int v = 0; v < FUSE_MAX_VERSIONS; v++) s.value[v] = -1;
  for (int i = from; i < to; i++)
    if (!entries[i].expr.code[0] || !member(&s, i, &entries[i])) return false;
  if (s.head.full || s.body.full) return false;
  text t = {src, cap, 0, false};
  put(&t, "/* an adaptive eager group (runtime/src/fusion_jit.c) */\n#include \"%s\"\n\n", pre);
  /* the row pointers as locals: stores through char pointers could
   * otherwise change p[] for all the compiler knows, so it reloads them */
  put(&t, "void nk_fused_row(int64_t n, char *const *p, const float *k) {\n");
  for (int a = 0; a < jit->n_args - s.first_arg; a++) put(&t, "  char *const a%d = p[%d];\n", a, a);
  put(&t, "%s", head);
  put(&t, "  int64_t i = 0;\n#define NK_U %s\n", s.rounds ? "NK_JIT_BLOCK_ROUNDING" : "NK_JIT_BLOCK");
  put(&t, "  for (; i + NK_U * NK_JIT_LANES <= n; i += NK_U * NK_JIT_LANES) {\n");
  put(&t, "    const int rem = NK_JIT_LANES;\n%s  }\n#undef NK_U\n#define NK_U 1\n", body);
  put(&t, "  for (; i < n; i += NK_JIT_LANES) {\n");
  put(&t, "    const int rem = n - i < NK_JIT_LANES ? (int)(n - i) : NK_JIT_LANES;\n%s  }\n", body);
  put(&t, "#undef NK_U\n}\n");
  return !t.full;
}

/* The segments: a cut after member i where no value a member up to i
 * wrote is read after i (nrt_fusion_chain_ends).  Running the segments one
 * after the other on a row keeps every element's program order (members
 * run in order, and aliasing views are identical: fusion.h). */
static int segments(const fuse_group *g, int *end) {
  return nrt_fusion_chain_ends(g, fuse_row_members(g), end); /* the sink reads from memory or scratch */
}

/* ------------------------------------------------------------ builds */

#define TABLE 1024
enum { SLOT_EMPTY, SLOT_QUEUED, SLOT_READY, SLOT_FAILED };
typedef struct slot {
  uint64_t key;
  int state;
  fuse_jit_fn fn;
} slot;
typedef struct job {
  struct job *next;
  uint64_t key;
  char source[];
} job;

static slot table[TABLE];
static job *queue_head, **queue_tail = &queue_head;
static int building; /* jobs taken by the builder and not yet done */
static bool builder_running;
static _Atomic uint64_t stat_builds, stat_failures;

void nrt_fusion_jit_stats(uint64_t *builds, uint64_t *failures) {
  *builds = atomic_load(&stat_builds);
  *failures = atomic_load(&stat_failures);
}

void nrt_fusion_jit_stats_reset(void) {
  atomic_store(&stat_builds, 0);
  atomic_store(&stat_failures, 0);
}

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The slot of key (lock held): found, or the empty one it would take; NULL
 * when the table is full around it. */
static slot *find(uint64_t key) {
  for (unsigned i = 0; i < 64; i++) {
    slot *sl = &table[(key + i) % TABLE];
    if (sl->state == SLOT_EMPTY || sl->key == key) return sl;
  }
  return NULL;
}

static fuse_jit_fn load(const char *path) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  return lib ? (fuse_jit_fn)dlsym(lib, "nk_fused_row") : NULL; /* never closed: code may run */
}

/* Runs the compiler on the job's source (a snapshot of the configuration
 * taken under the lock); its output goes to <library>.log, kept with the
 * source when the build fails. */
static bool compile(const char *cc, const char *flags, const char *includes, const char *src,
                    const char *so) {
  char c_path[4200], tmp_so[4200], log_path[4200];
  const unsigned long me = (unsigned long)getpid();
  if (strlen(so) > 4096) return false; /* the names below then fit */
  snprintf(c_path, sizeof c_path, "%s.%lu.c", so, me);
  snprintf(tmp_so, sizeof tmp_so, "%s.%lu.tmp", so, me);
  snprintf(log_path, sizeof log_path, "%s.log", so);
  FILE *f = fopen(c_path, "w");
  if (!f) return false;
  const bool written = fputs(src, f) >= 0;
  if (fclose(f) != 0 || !written) return false;
  /* argv: cc, the target flags, fixed flags, -I per include dir, output, input */
  char words[2048], incs[4096];
  snprintf(words, sizeof words, "%s", flags);
  snprintf(incs, sizeof incs, "%s", includes);
  char *argv[96];
  int n = 0;
  argv[n++] = (char *)cc;
  char *save;
  for (char *w = strtok_r(words, " ", &save); w && n < 60; w = strtok_r(NULL, " ", &save)) argv[n++] = w;
  static char *const fixed[] = {"-O3", "-std=c11", "-ffp-contract=off", "-fno-fast-math",
                                "-fPIC", "-shared", "-w"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) argv[n++] = fixed[i];
  char inc_args[16][1100];
  int n_inc = 0;
  for (char *d = strtok_r(incs, ":", &save); d && n_inc < 16; d = strtok_r(NULL, ":", &save)) {
    snprintf(inc_args[n_inc], sizeof inc_args[n_inc], "-I%s", d);
    argv[n++] = inc_args[n_inc++];
  }
  argv[n++] = "-o";
  argv[n++] = tmp_so;
  argv[n++] = c_path;
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int status = -1;
  const int rc = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == 0)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  const bool ok = rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && rename(tmp_so, so) == 0;
  if (!ok) { /* the source stays beside its log */
    unlink(tmp_so);
  } else {
    unlink(log_path);
    unlink(c_path);
  }
  return ok;
}

/* What a process leaves when it exits mid-build (its builder thread dies
 * with it; its gcc finishes alone): a source and a temporary library named
 * with its process id, and an empty log.  A process's first build removes
 * those of processes that no longer exist (a live one, or a recycled id,
 * keeps its files). */
static void sweep_orphans(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    const char *so = strstr(e->d_name, ".so.");
    if (strncmp(e->d_name, "fuse-", 5) != 0 || !so) continue;
    char *kind;
    const long pid = strtol(so + 4, &kind, 10);
    if (kind == so + 4 || pid <= 0 || (strcmp(kind, ".c") != 0 && strcmp(kind, ".tmp") != 0)) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
    unlink(path);
    struct stat st;
    snprintf(path, sizeof path, "%s/%.*s.so.log", dir, (int)(so - e->d_name), e->d_name);
    if (strcmp(kind, ".c") == 0 && stat(path, &st) == 0 && st.st_size == 0) unlink(path);
  }
  closedir(d);
}

/* Builds (or finds on disk) the library of one source; the lock is not held. */
static fuse_jit_fn build(uint64_t key, const char *src) {
  pthread_mutex_lock(&lock);
  char *flags = dup_or_null(target_flags), *includes = dup_or_null(include_dirs),
       *dir = dup_or_null(cache_dir);
  pthread_mutex_unlock(&lock);
  fuse_jit_fn fn = NULL;
  const char *cc = getenv("TORCHNEURON_CC");
  if (!cc || !*cc) cc = "gcc";
  char so[4097];
  const int len = dir ? snprintf(so, sizeof so, "%s/fuse-%016llx.so", dir, (unsigned long long)key) : -1;
  if (flags && includes && len > 0 && (size_t)len < sizeof so) { /* else: a cache path too long */
    mkdir(dir, 0755); /* one level; the embedder makes the parents */
    static _Atomic bool swept;
    if (!atomic_exchange(&swept, true)) sweep_orphans(dir);
    fn = access(so, R_OK) == 0 ? load(so) : NULL;
    if (!fn && compile(cc, flags, includes, src, so)) {
      atomic_fetch_add(&stat_builds, 1);
      fn = load(so);
    }
  }
  if (!fn) atomic_fetch_add(&stat_failures, 1);
  free(flags);
  free(includes);
  free(dir);
  return fn;
}

static void publish(uint64_t key, fuse_jit_fn fn) {
  pthread_mutex_lock(&lock);
  slot *sl = find(key);
  if (sl) {
    sl->key = key;
    sl->state = fn ? SLOT_READY : SLOT_FAILED;
    sl->fn = fn;
  }
  pthread_mutex_unlock(&lock);
}

static void *builder(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!queue_head) pthread_cond_wait(&work_cv, &lock);
    job *j = queue_head;
    queue_head = j->next;
    if (!queue_head) queue_tail = &queue_head;
    building++;
    pthread_mutex_unlock(&lock);
    publish(j->key, build(j->key, j->source));
    free(j);
    pthread_mutex_lock(&lock);
    building--;
    if (!queue_head && !building) pthread_cond_broadcast(&idle_cv);
  }
  return NULL;
}

void nrt_fusion_jit_drain(void) {
  pthread_mutex_lock(&lock);
  while (queue_head || building) pthread_cond_wait(&idle_cv, &lock);
  pthread_mutex_unlock(&lock);
}

/* A child of fork has no builder thread: queued builds are forgotten (the
 * groups will ask again) and the lock is fresh. */
static void after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&work_cv, NULL);
  pthread_cond_init(&idle_cv, NULL);
  queue_head = NULL;
  queue_tail = &queue_head;
  building = 0;
  builder_running = false;
  for (int i = 0; i < TABLE; i++)
    if (table[i].state == SLOT_QUEUED) table[i].state = SLOT_EMPTY;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void install_atfork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* Queues a build (lock held); false when it cannot. */
static bool enqueue(uint64_t key, const char *src) {
  const size_t len = strlen(src) + 1;
  job *j = malloc(sizeof *j + len);
  if (!j) return false;
  j->next = NULL;
  j->key = key;
  memcpy(j->source, src, len);
  if (!builder_running) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const bool started = pthread_create(&t, &attr, builder, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
      free(j);
      return false;
    }
    builder_running = true;
  }
  *queue_tail = j;
  queue_tail = &j->next;
  pthread_cond_signal(&work_cv);
  return true;
}

/* The loaded code of one segment's source, queueing (or, in sync mode,
 * running) its build at first sight; NULL until it is loaded. */
static fuse_jit_fn lookup(const char *src, uint64_t salt, int mode) {
  const uint64_t key = fnv1a(salt, src);
  fuse_jit_fn fn = NULL;
  pthread_mutex_lock(&lock);
  slot *sl = find(key);
  if (sl && sl->state == SLOT_READY) fn = sl->fn;
  const bool build_now = sl && sl->state == SLOT_EMPTY && mode == NRT_FUSION_JIT_SYNC;
  const bool wait = sl && sl->state == SLOT_QUEUED && mode == NRT_FUSION_JIT_SYNC;
  if (sl && sl->state == SLOT_EMPTY) {
    sl->key = key;
    sl->state = SLOT_QUEUED;
    if (!build_now && !enqueue(key, src)) sl->state = SLOT_FAILED;
  }
  pthread_mutex_unlock(&lock);
  if (build_now) {
    fn = build(key, src);
    publish(key, fn);
  } else if (wait) { /* queued before a switch to sync mode */
    nrt_fusion_jit_drain();
    pthread_mutex_lock(&lock);
    if (sl->key == key && sl->state == SLOT_READY) fn = sl->fn;
    pthread_mutex_unlock(&lock);
  }
  return fn;
}

bool nrt_fusion_jit_prepare(const fuse_group *g, const nrt_row_entry *entries, fuse_jit *jit,
                            char *src, size_t cap) {
  jit->ready = false;
  const int mode = nrt_fusion_jit_mode();
  if (mode == NRT_FUSION_JIT_OFF) return false;
  pthread_once(&atfork_once, install_atfork);
  pthread_mutex_lock(&lock);
  const bool configured = prelude && target_flags && include_dirs && cache_dir;
  char pre[256];
  snprintf(pre, sizeof pre, "%s", prelude ? prelude : "");
  const uint64_t salt = fnv1a(1469598103934665603ull, target_flags ? target_flags : "");
  pthread_mutex_unlock(&lock);
  if (!configured) return false;
  int end[FUSE_JIT_MAX_SEGMENTS];
  jit->n_segments = segments(g, end);
  jit->n_args = jit->n_scalars = 0;
  jit->streamed_bytes = 0;
  bool ready = true;
  for (int s = 0, from = 0; s < jit->n_segments; from = end[s++]) {
    fuse_jit_segment *seg = &jit->seg[s];
    seg->first_arg = jit->n_args;
    seg->first_scalar = jit->n_scalars;
    if (!generate(g, entries, jit, from, end[s], pre, src, cap)) return false;
    /* every segment is looked up (and queued) even after one is missing */
    ready &= (seg->fn = lookup(src, salt, mode)) != NULL;
  }
  return jit->ready = ready;
}
