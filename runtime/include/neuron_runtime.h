/*
 * neuron_runtime.h — the virtual NeuronCore runtime (C11, no PyTorch).
 *
 * One header teaches the whole API.  The virtual device behaves like an
 * accelerator that happens to execute on the host CPU:
 *
 *   devices   N devices, each with its own HBM arena of fixed capacity.
 *   memory    a caching allocator over the arena: size classes, block
 *             splitting and merging, stream-ordered reuse, statistics,
 *             out-of-memory reported as a status (never an abort).
 *   streams   ordered work queues.  Each stream has a worker thread that
 *             executes its tasks in order while the host runs ahead.
 *   tasks     work is a *descriptor*: kernel id, operand descriptors,
 *             parameter bytes and a name.  Not an opaque closure, so a
 *             later pass can inspect the pending window (adaptive eager
 *             fusion) and the tracer can name every task.
 *   events    record on a stream, make another stream wait, query,
 *             synchronize, elapsed time.
 *   copies    host<->device<->device, asynchronous on a stream.  Like CUDA,
 *             a copy from/to pageable host memory completes before the call
 *             returns; only pinned host memory gives a truly async copy.
 *   compute   one host-wide thread pool that kernels split work across.
 *   errors    a failing kernel records its error (with the task's name) on
 *             its stream; the next synchronizing call on that stream (or the
 *             device) returns it and clears it.  The process keeps working.
 *   tracing   when enabled, every task records device, stream, name and its
 *             enqueue/start/end times into a bounded ring that can be drained.
 *
 * Conventions
 *   - Every fallible call returns nrt_status; NRT_SUCCESS is 0.  On failure
 *     nrt_last_error() gives a human-readable message for the calling host
 *     thread (valid until that thread's next failing call).
 *   - Names are prefix_noun_verb.  Handles are opaque.
 *   - Operand strides are in BYTES (like ggml's nb and ATen's TensorIterator);
 *     data pointers already include the storage offset.
 *   - All functions are thread-safe unless stated otherwise.
 *
 * Environment (read once, at nrt_init; a malformed value makes nrt_init fail
 * with NRT_ERROR_INVALID_CONFIG and a message naming the variable):
 *   TORCHNEURON_DEVICE_COUNT   number of devices, 1..64          (default 2)
 *   TORCHNEURON_HBM_SIZE       HBM per device, bytes with optional K/M/G/T
 *                              suffix (powers of 1024), >= 64M   (default 16G)
 *   TORCHNEURON_NUM_THREADS    compute pool threads, 1..1024     (default: cores)
 *   TORCHNEURON_LAUNCH_BLOCKING=1  every launch waits for its task and
 *                              returns that task's error directly
 *   TORCHNEURON_TRACE_CAPACITY trace ring entries, >= 16         (default 65536)
 *   TORCHNEURON_ADAPTIVE_EAGER 1 fuse queued elementwise tasks, 0 off, verify
 *                              (fuse, and check each group against unfused
 *                              execution)                        (default 1)
 * HBM is reserved address space; pages are committed when first touched and
 * returned to the OS by nrt_mem_empty_cache, so a large default costs nothing.
 */
#ifndef NEURON_RUNTIME_H
#define NEURON_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define NRT_ALIGNAS(n) alignas(n)
extern "C" {
#else
#define NRT_ALIGNAS(n) _Alignas(n)
#endif

/* ------------------------------------------------------------------ status */

typedef enum nrt_status {
  NRT_SUCCESS = 0,
  NRT_ERROR_INVALID_ARGUMENT, /* null handle, bad size, bad flag          */
  NRT_ERROR_INVALID_DEVICE,   /* device index out of range                */
  NRT_ERROR_INVALID_CONFIG,   /* malformed TORCHNEURON_* variable          */
  NRT_ERROR_OUT_OF_MEMORY,    /* HBM capacity exhausted (after retry)      */
  NRT_ERROR_NOT_READY,        /* query: work still pending (not an error)  */
  NRT_ERROR_KERNEL_FAILED,    /* an earlier task on the stream failed      */
  NRT_ERROR_UNKNOWN_KERNEL,   /* task names a kernel id nobody registered  */
  NRT_ERROR_INTERNAL          /* OS call failed (mmap, pthread, ...)       */
} nrt_status;

const char *nrt_status_name(nrt_status s); /* "NRT_ERROR_OUT_OF_MEMORY" */
const char *nrt_last_error(void);          /* calling thread's message   */

/* ------------------------------------------------------------------ init */

/* Idempotent; every other call initialises lazily, but only nrt_init reports
 * a configuration error with its message.  Safe to call from many threads. */
nrt_status nrt_init(void);

/* --------------------------------------------------------------- devices */

#define NRT_MAX_DEVICES 64

typedef struct nrt_device_props {
  char name[64];          /* "Virtual NeuronCore v1"                      */
  uint64_t hbm_bytes;     /* capacity of the device arena                  */
  uint64_t sbuf_bytes;    /* scratchpad per executing thread               */
  int compute_threads;    /* size of the compute pool                      */
  int major, minor;       /* "compute capability" of the virtual core      */
} nrt_device_props;

nrt_status nrt_device_count(int *count);
nrt_status nrt_device_props_get(int device, nrt_device_props *props);
/* The current device is per host thread, initially LOCAL_RANK mod count when
 * a launcher set LOCAL_RANK (each worker its own core), else 0. */
nrt_status nrt_device_current_set(int device);
nrt_status nrt_device_current_get(int *device);
/* Waits for every stream of the device; returns (and clears) the first
 * pending kernel error of any of its streams. */
nrt_status nrt_device_synchronize(int device);

/* ---------------------------------------------------------------- streams */

typedef struct nrt_stream nrt_stream;

/* Stream ids are small integers per device: 0 is the default stream.
 * Streams are never destroyed (like CUDA's stream pools, which PyTorch
 * hands out round robin); ids stay valid for the life of the process. */
#define NRT_STREAMS_PER_POOL 32
#define NRT_PRIORITY_NORMAL 0
#define NRT_PRIORITY_HIGH (-1) /* lower number = higher priority, as CUDA */

nrt_stream *nrt_stream_default(int device); /* NULL on a bad device */
/* Next stream of the device's pool for that priority (round robin over
 * NRT_STREAMS_PER_POOL lazily created streams).  Priorities outside
 * [NRT_PRIORITY_HIGH, NRT_PRIORITY_NORMAL] are clamped, as CUDA does. */
nrt_status nrt_stream_from_pool(int device, int priority, nrt_stream **out);
/* Looks a stream up by (device, id); NRT_ERROR_INVALID_ARGUMENT if that id
 * was never handed out. */
nrt_status nrt_stream_get(int device, int64_t id, nrt_stream **out);
int64_t nrt_stream_id(const nrt_stream *s);
int nrt_stream_device(const nrt_stream *s);
int nrt_stream_priority(const nrt_stream *s);
/* NRT_SUCCESS if all launched work has finished, NRT_ERROR_NOT_READY if not.
 * Does not report kernel errors. */
nrt_status nrt_stream_query(nrt_stream *s);
/* Waits for all launched work; returns (and clears) the first kernel error
 * recorded on the stream since the last synchronisation. */
nrt_status nrt_stream_synchronize(nrt_stream *s);

/* ------------------------------------------------------------------ tasks */

#define NRT_MAX_DIMS 16
#define NRT_MAX_OPERANDS 8
#define NRT_PARAM_BYTES 192

/* Element types.  The numbering is the runtime's own; the glue maps ATen
 * scalar types onto it. */
typedef enum nrt_dtype {
  NRT_BOOL = 0,
  NRT_UINT8,
  NRT_INT8,
  NRT_INT16,
  NRT_INT32,
  NRT_INT64,
  NRT_FLOAT16,
  NRT_BFLOAT16,
  NRT_FLOAT32,
  NRT_FLOAT64,
  NRT_DTYPE_COUNT
} nrt_dtype;

size_t nrt_dtype_size(nrt_dtype t); /* 0 for an invalid value */

/* A strided view of memory.  strides[] are in BYTES; data includes the
 * storage offset.  ndim == 0 is a scalar (one element); any size 0 means
 * the operand is empty. */
typedef struct nrt_operand {
  void *data;
  int32_t dtype; /* nrt_dtype */
  int32_t ndim;
  int64_t sizes[NRT_MAX_DIMS];
  int64_t strides[NRT_MAX_DIMS];
} nrt_operand;

/* Kernel ids below NRT_KERNEL_FIRST_USER belong to the runtime itself. */
enum {
  NRT_KERNEL_NOP = 0,
  NRT_KERNEL_MEMCPY,       /* params: nrt_memcpy_params                  */
  NRT_KERNEL_EVENT_RECORD, /* internal                                   */
  NRT_KERNEL_EVENT_WAIT,   /* internal                                   */
  NRT_KERNEL_HOST_FN,      /* params: nrt_host_fn_params                 */
  NRT_KERNEL_HINT_FREE,    /* internal: the allocator freed a block      */
  NRT_KERNEL_FUSED,        /* trace records only: a fused group of tasks */
  NRT_KERNEL_FUSED_MEMBER, /* trace records only: a later member of the
                              group recorded just before, zero length at its
                              start, carrying that member's correlation    */
  NRT_KERNEL_FIRST_USER = 64,
  NRT_KERNEL_MAX = 1024
};

typedef struct nrt_task {
  uint32_t kernel;      /* kernel id                                     */
  int32_t n_operands;   /* 0..NRT_MAX_OPERANDS                           */
  const char *name;     /* static string, e.g. "aten::add.out"; never freed */
  uint64_t correlation; /* opaque id from the launcher (profiler)        */
  nrt_operand operands[NRT_MAX_OPERANDS];
  NRT_ALIGNAS(16) unsigned char params[NRT_PARAM_BYTES]; /* kernel's own struct */
} nrt_task;

typedef struct nrt_memcpy_params {
  void *dst;
  const void *src;
  size_t bytes;
} nrt_memcpy_params;

typedef struct nrt_host_fn_params {
  void (*fn)(void *arg); /* runs on the stream's worker thread, in order */
  void *arg;
} nrt_host_fn_params;

/* What a kernel sees while it executes. */
typedef struct nrt_exec_ctx nrt_exec_ctx;
int nrt_exec_device(const nrt_exec_ctx *ctx);
/* Scratchpad (SBUF) of the executing worker: props.sbuf_bytes bytes,
 * 64-byte aligned, private to this task for its duration. */
void *nrt_exec_sbuf(nrt_exec_ctx *ctx);
/* Marks the task failed with a message; the kernel then returns nonzero.
 * The stream reports "<task name>: <message>" at its next synchronisation. */
void nrt_exec_fail(nrt_exec_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A kernel returns 0 on success; nonzero after nrt_exec_fail. */
typedef int (*nrt_kernel_fn)(const nrt_task *task, nrt_exec_ctx *ctx);

/* Registers the executor of a kernel id (>= NRT_KERNEL_FIRST_USER and
 * < NRT_KERNEL_MAX).  Registering the same id twice with a different
 * function is NRT_ERROR_INVALID_ARGUMENT. */
nrt_status nrt_kernel_register(uint32_t id, const char *name, nrt_kernel_fn fn);
/* The name a kernel id was registered with (NULL if none): the profiler's
 * label for a device task, next to the task's own (ATen op) name. */
const char *nrt_kernel_name(uint32_t id);

/* Copies *task into the stream's queue and returns; blocks only while the
 * queue is full.  Checks the kernel id and operand count.  With
 * TORCHNEURON_LAUNCH_BLOCKING=1 it waits and returns the task's own error. */
nrt_status nrt_launch(nrt_stream *s, const nrt_task *task);
/* 1 when launches are blocking (TORCHNEURON_LAUNCH_BLOCKING=1), else 0. */
int nrt_launch_blocking(void);

/* ---------------------------------------------------------- adaptive eager
 *
 * A stream's worker looks at the tasks already queued behind the one it is
 * about to run (it never waits for more) and runs a chain of elementwise
 * tasks over one index space as one tiled pass: tile by tile, each task
 * through its own kernel on that tile, in program order, so every element
 * goes through the routine the unfused task would use -- the bits are the
 * same.  An intermediate whose block the allocator freed inside the chain
 * (a free hint in the queue) lives only in per-thread scratch and is never
 * written to memory.  kernels/ says which tasks qualify; the runtime plans
 * the groups and cuts tiles, and does no math (fusion_plan.c, fusion_exec.c).
 *
 * The classifier's contract for NRT_FUSE_ELEMENTWISE: operand 0 is the only
 * operand written, every other operand is only read, all share operand 0's
 * ndim and sizes, each element of the output depends only on the same
 * element of the inputs (and parameters), the kernel gives every element
 * the same bits whatever sub-box of the index space it is run on, and it
 * cannot fail because of the data (only because of its descriptor, which
 * the planner checks by running the kernel on an empty tile). */
typedef enum nrt_fuse_kind {
  NRT_FUSE_NONE = 0,
  NRT_FUSE_ELEMENTWISE = 1,
  /* A reduction as the group's last member (its sink): operand 0 the only
   * output, broadcast (stride 0) along the reduced dims, operand 1 the
   * input, both of one size; each output's bits depend only on its own
   * row, whatever whole rows the kernel is run on.  The planner takes it
   * when its reduced dims are the innermost ones and a row fits a tile. */
  NRT_FUSE_REDUCTION = 2,
  /* A multi-tensor task (a foreach op): one elementwise op over rows, row r
   * a run of numel(r) elements in each of its operands.  It joins a group
   * of such tasks with the same rows (fusion_multi.c), described and run
   * through the kernel's nrt_multi_fns. */
  NRT_FUSE_MULTI = 3,
} nrt_fuse_kind;
typedef nrt_fuse_kind (*nrt_fuse_classify_fn)(const nrt_task *task);
/* Declares kernel id's tasks fusible when fn says so (NULL: never). */
nrt_status nrt_kernel_set_fusion(uint32_t id, nrt_fuse_classify_fn fn);

/* How a kernel describes and runs its NRT_FUSE_MULTI tasks.  The contract:
 *  - prepare checks the task as the kernel would (descriptor, parameters,
 *    table; a failure is left for the task to raise on its own) and fills
 *    `state` (state_bytes, 16-byte aligned); it may read the task's device
 *    scalars, which the group guarantees nothing before it writes;
 *  - rows / row describe a prepared task: row r's element count, and the
 *    bytes each operand touches in that row (first byte, length, written
 *    or read; a device scalar the task reads is one of them, in each row),
 *    NRT_MULTI_MAX_OPERANDS at most;
 *  - run applies the op to elements [lo, hi) of row r, where lo is a
 *    multiple of `chunk` and hi is lo + chunk or the row's end, and gives
 *    each element the bits the whole task gives it; it cannot fail;
 *  - elements: the task's element count or an upper bound, from the
 *    parameters alone (the worker's look-ahead reads nothing else). */
#define NRT_MULTI_MAX_OPERANDS 5
typedef struct nrt_multi_operand {
  const char *data;
  int64_t bytes;
  bool written;
} nrt_multi_operand;
typedef struct nrt_multi_fns {
  size_t state_bytes;
  int64_t chunk;
  int (*prepare)(const nrt_task *task, nrt_exec_ctx *ctx, void *state);
  int64_t (*rows)(const void *state);
  int64_t (*row)(const void *state, int64_t r, nrt_multi_operand *ops, int *n_ops);
  void (*run)(const void *state, int64_t r, int64_t lo, int64_t hi);
  int64_t (*elements)(const nrt_task *task);
} nrt_multi_fns;
/* Declares how kernel id runs its NRT_FUSE_MULTI tasks (fns lives forever). */
nrt_status nrt_kernel_set_multi(uint32_t id, const nrt_multi_fns *fns);

/* A fusible task's row routine, captured once per group so that the
 * executor can run short rows (a few KiB, in L1) without a kernel call per
 * tile: what the kernel itself would call on each row of the task.  fn
 * gets n elements, operand k's first element at data[k] and its byte
 * stride along the row at strides[k] (the nd-iteration's row loop).
 * fixed[k], when set, is a value the kernel substituted for operand k (a
 * broadcast scalar it converted once): operand k then reads it, stride 0.
 * ctx and every fixed value live in storage. */
#define NRT_ROW_STORAGE 1024
typedef void (*nrt_row_fn)(void *ctx, int64_t n, char *const *data, const int64_t *strides);
/* The same row routine as one C expression, when the kernel can say it:
 * adaptive eager then compiles a group whose members all have one into a
 * single loop that keeps intermediates in registers (fusion_jit.c).
 * `code` computes the member's float32 result vector from $1..$7 (input
 * operand k as a float32 vector, read as in_dtype[k]: the dtype the routine
 * reads, a substituted operand's included) and #0..#3 (scalars[j] as a
 * vector), in the names of the code generator's prelude
 * (nrt_fusion_jit_set_target); the result is rounded to operand 0's dtype.
 * Empty code: none (the group runs the captured loops). */
#define NRT_ROW_EXPR_CODE 96
#define NRT_ROW_EXPR_SCALARS 4
typedef struct nrt_row_expr {
  char code[NRT_ROW_EXPR_CODE];
  bool dense_inputs; /* the expression is the routine's only where every input
                        is a dense row (no stride-0 operand: the kernel would
                        take another path for those) */
  uint8_t in_dtype[NRT_MAX_OPERANDS];
  uint8_t n_scalars;
  float scalars[NRT_ROW_EXPR_SCALARS];
} nrt_row_expr;
typedef struct nrt_row_entry {
  nrt_row_fn fn;
  void *ctx;
  const void *fixed[NRT_MAX_OPERANDS];
  nrt_row_expr expr;
  uint64_t storage[NRT_ROW_STORAGE / 8]; /* 8-byte aligned: plans hold pointers, 64-bit values */
} nrt_row_entry;
/* Fills *entry with the row routine the kernel would run for `task` (a
 * tile's descriptor) and runs nothing; false when the kernel's path for
 * this task is not a row loop (the executor then calls the kernel per tile).
 * The routine must give each element the bits the kernel gives it. */
typedef bool (*nrt_row_capture_fn)(const nrt_task *task, nrt_exec_ctx *ctx, nrt_row_entry *entry);
nrt_status nrt_kernel_set_row_capture(uint32_t id, nrt_row_capture_fn fn);

enum { NRT_ADAPTIVE_OFF = 0, NRT_ADAPTIVE_ON = 1, NRT_ADAPTIVE_VERIFY = 2 };
/* The mode (TORCHNEURON_ADAPTIVE_EAGER until set); launch-blocking mode
 * runs unfused whatever the mode says. */
void nrt_adaptive_set_mode(int mode);
int nrt_adaptive_mode(void);

/* Adaptive eager's compiled groups (fusion_jit.c).  The kernel library
 * names the code generator's target once: the prelude every generated file
 * includes (it defines the names row expressions use) and the compiler
 * flags of the kernel variant in use.  The embedder gives the include
 * directories (colon-separated) and a cache directory; until both are set,
 * or with mode OFF, groups run their captured row loops only.  Mode ON
 * builds a group's code on a background thread (the group and its repeats
 * run the captured loops until the library is loaded); SYNC builds it
 * before running the group (tests).  TORCHNEURON_FUSION_COMPILE=0|1|sync
 * sets the mode at start-up (default 1); TORCHNEURON_CC names the
 * compiler (default gcc). */
enum { NRT_FUSION_JIT_OFF = 0, NRT_FUSION_JIT_ON = 1, NRT_FUSION_JIT_SYNC = 2 };
void nrt_fusion_jit_set_target(const char *prelude, const char *flags);
void nrt_fusion_jit_configure(const char *include_dirs, const char *cache_dir);
void nrt_fusion_jit_set_mode(int mode);
int nrt_fusion_jit_mode(void);
/* Waits until no build is queued or running. */
void nrt_fusion_jit_drain(void);

typedef struct nrt_fusion_stats {
  uint64_t groups;            /* fused groups run                         */
  uint64_t tasks_fused;       /* tasks run inside them                    */
  uint64_t bytes_not_written; /* stores skipped: dead intermediates       */
  uint64_t groups_verified;   /* groups checked against unfused execution */
  uint64_t groups_in_rows;    /* groups run through their row loops       */
  uint64_t bytes_streamed;    /* stores staged and streamed (row mode)    */
  uint64_t groups_in_long_rows; /* of groups_in_rows: in rows longer than
                                   FUSE_ROW_ELEMENTS (many input streams)  */
  uint64_t groups_compiled;   /* of groups_in_rows: run by compiled code  */
  uint64_t group_builds;      /* group libraries built by the compiler    */
  uint64_t group_build_failures; /* builds that failed (those groups keep
                                    their captured loops)                  */
  uint64_t groups_multi_tensor; /* of groups: multi-tensor (foreach) groups */
} nrt_fusion_stats;
void nrt_fusion_stats_get(nrt_fusion_stats *out);
void nrt_fusion_stats_reset(void);

/* ------------------------------------------------------------------ memory */

typedef struct nrt_mem_stats {
  /* bytes handed to callers (rounded up to the allocator's granularity) */
  uint64_t allocated_bytes, allocated_bytes_peak;
  uint64_t allocated_bytes_total, freed_bytes_total;
  /* bytes taken from the arena in segments (cached or in use) */
  uint64_t reserved_bytes, reserved_bytes_peak;
  /* allocated + freed-but-still-in-use-by-pending-streams */
  uint64_t active_bytes, active_bytes_peak;
  /* bytes of split blocks not handed out */
  uint64_t inactive_split_bytes;
  uint64_t requested_bytes, requested_bytes_peak; /* exact sizes asked */
  uint64_t alloc_count, free_count;               /* calls              */
  uint64_t allocation_current, allocation_peak;   /* live blocks        */
  uint64_t segment_count, segment_peak;
  uint64_t segment_alloc_count, segment_free_count;
  uint64_t retry_count; /* cache flushed and allocation retried */
  uint64_t oom_count;   /* NRT_ERROR_OUT_OF_MEMORY returned      */
} nrt_mem_stats;

/* Allocates device memory for use on stream s (stream-ordered: the block
 * may be reused by later work on s as soon as it is freed).  bytes == 0
 * gives NULL and NRT_SUCCESS.  Out of memory: flushes the cache, retries,
 * then returns NRT_ERROR_OUT_OF_MEMORY with a message giving the request,
 * capacity, allocated and reserved bytes. */
nrt_status nrt_mem_alloc(nrt_stream *s, size_t bytes, void **ptr);
/* Stream-ordered free: safe while work queued on the allocation stream (and
 * on streams named by nrt_mem_record_stream) still uses the block. */
nrt_status nrt_mem_free(void *ptr);
/* The block is also used on s: it is not reused until work queued on s up
 * to now has finished. */
nrt_status nrt_mem_record_stream(void *ptr, nrt_stream *s);
/* Waits for the device's work, then returns every unused segment to the
 * arena (and its pages to the OS).  Kernel errors are left on their streams
 * for the next synchronisation (as is the out-of-memory retry's wait). */
nrt_status nrt_mem_empty_cache(int device);
nrt_status nrt_mem_stats_get(int device, nrt_mem_stats *stats);
nrt_status nrt_mem_stats_reset_peak(int device);
/* Zeroes the running totals (*_total, alloc/free and segment counts,
 * retry_count, oom_count), as torch.cuda.reset_accumulated_memory_stats. */
nrt_status nrt_mem_stats_reset_accumulated(int device);
/* free = capacity minus reserved. */
nrt_status nrt_mem_info(int device, size_t *free_bytes, size_t *total_bytes);
/* Device whose HBM contains ptr, or -1 for any other address. */
int nrt_mem_device_of(const void *ptr);

/* Memory observation for profilers (torch.profiler's profile_memory, the
 * memory-history recorder).  The observer is called after every successful
 * nrt_mem_alloc / nrt_mem_free, outside the allocator's lock, on the
 * calling thread; the totals are the device's after the event.  NULL turns
 * it off.  One observer for the process. */
enum { NRT_MEM_EVENT_ALLOC = 1, NRT_MEM_EVENT_FREE = 2 };
typedef struct nrt_mem_event {
  int kind;              /* NRT_MEM_EVENT_*                               */
  int device;
  void *ptr;
  size_t size;           /* block size (rounded)                          */
  size_t requested;      /* bytes asked for                               */
  int64_t stream;        /* stream id of the block's segment              */
  uint64_t allocated_bytes, reserved_bytes;
} nrt_mem_event;
typedef void (*nrt_mem_observer)(const nrt_mem_event *e);
void nrt_mem_set_observer(nrt_mem_observer fn);

/* The allocator's state (torch.cuda.memory_snapshot): every block of every
 * segment of the device, each segment's blocks in address order.  Fills up
 * to max entries and sets *n to the total count (call again with a bigger
 * buffer when *n > max). */
enum { NRT_BLOCK_FREE = 0, NRT_BLOCK_ALLOCATED = 1, NRT_BLOCK_PENDING_FREE = 2 };
typedef struct nrt_mem_block_info {
  void *segment;         /* address of the block's segment                */
  void *ptr;
  size_t size, requested;
  int state;             /* NRT_BLOCK_*                                   */
  int large_pool;        /* 1: large pool, 0: small pool                  */
  int64_t stream;
} nrt_mem_block_info;
nrt_status nrt_mem_snapshot(int device, nrt_mem_block_info *out, size_t max, size_t *n);

/* Page-locked ("pinned") host memory: copies from/to it are truly async. */
nrt_status nrt_host_alloc(size_t bytes, void **ptr);
nrt_status nrt_host_free(void *ptr);
int nrt_host_is_pinned(const void *ptr); /* 1 if inside a live pinned block */

/* ------------------------------------------------------------------ copies */

/* Copies bytes between any two of host and device memory, ordered on s.
 * Returns as soon as the copy is queued if every host side is pinned (or
 * both sides are device memory); otherwise (pageable host memory) the copy
 * has completed when the call returns, as CUDA's cudaMemcpyAsync does. */
nrt_status nrt_memcpy_async(nrt_stream *s, void *dst, const void *src, size_t bytes);
/* The blocking copy: returns once the bytes have arrived and everything
 * queued on s before the call has run; reports (and clears) a failed earlier
 * task's error, as nrt_stream_synchronize does. */
nrt_status nrt_memcpy(nrt_stream *s, void *dst, const void *src, size_t bytes);

/* ------------------------------------------------------------------ events */

typedef struct nrt_event nrt_event;

enum { NRT_EVENT_DEFAULT = 0, NRT_EVENT_TIMING = 1 };

nrt_status nrt_event_create(unsigned flags, nrt_event **out);
/* Destroying an event that streams still wait on is safe: it is freed
 * once the last queued use has run. */
nrt_status nrt_event_destroy(nrt_event *e);
/* Captures all work queued on s so far; re-recording replaces the capture. */
nrt_status nrt_event_record(nrt_event *e, nrt_stream *s);
/* Work launched on s after this call waits for e's current capture.  An
 * event never recorded is complete (no wait), as in CUDA. */
nrt_status nrt_stream_wait_event(nrt_stream *s, nrt_event *e);
nrt_status nrt_event_query(nrt_event *e); /* SUCCESS or NOT_READY */
nrt_status nrt_event_synchronize(nrt_event *e);
/* Milliseconds between two completed TIMING events' captures. */
nrt_status nrt_event_elapsed_ms(nrt_event *start, nrt_event *end, float *ms);

/* ------------------------------------------------------------------ compute */

/* fn(arg, begin, end, worker) for disjoint [begin, end) chunks covering
 * [0, n), each at least grain long (except the last); worker is in
 * [0, nrt_compute_threads()).  Runs inline when n <= grain, when the pool
 * has one thread, or when called from inside a parallel region.  Returns
 * when every chunk is done.  Several streams may call it at once. */
typedef void (*nrt_range_fn)(void *arg, int64_t begin, int64_t end, int worker);
void nrt_parallel_for(int64_t n, int64_t grain, nrt_range_fn fn, void *arg);
/* The same with chunks of one index, claimed one at a time: for a few
 * heavy items (a GEMM's row blocks), which then finish within one item of
 * each other on every thread. */
void nrt_parallel_for_each(int64_t n, nrt_range_fn fn, void *arg);
int nrt_compute_threads(void);

/* A team: fn(arg, member, size) runs on `size` threads at once, members
 * 0..size-1 (the caller is member 0), so members may wait for each other
 * (barriers): the OpenMP model, which the kernels torch.compile generates
 * are written for.  1 <= size <= min(want, nrt_compute_threads()); size is
 * fixed before any member starts.  The pool's helpers that arrive within a
 * short wait join; a team of 1 when the pool is busy (another stream's
 * region) or the caller is inside a region.  Returns when every member has
 * returned. */
typedef void (*nrt_team_fn)(void *arg, int member, int size);
void nrt_parallel_team(int want, nrt_team_fn fn, void *arg);

/* ------------------------------------------------------------------ tracing */

typedef struct nrt_trace_record {
  const char *name;     /* the task's name (static)                      */
  uint64_t correlation; /* the launcher's id                             */
  uint32_t kernel;
  int32_t device;
  int64_t stream;       /* stream id                                     */
  uint64_t enqueue_ns, start_ns, end_ns; /* CLOCK_MONOTONIC              */
  int32_t failed;
} nrt_trace_record;

/* Turning tracing on clears the ring.  While on, each executed task adds a
 * record; when the ring is full the oldest record is dropped and counted. */
void nrt_trace_enable(int on);
int nrt_trace_enabled(void);
/* Moves up to max records, oldest first, into out; *n gets the count and
 * *dropped (may be NULL) the number lost to overflow since the last drain. */
nrt_status nrt_trace_drain(nrt_trace_record *out, size_t max, size_t *n,
                           uint64_t *dropped);
uint64_t nrt_now_ns(void); /* the clock the trace uses */
/* The calling thread's current correlation id (the profiler sets it to the
 * ATen op being run).  A task launched with correlation 0 takes it, so
 * copies queued by the runtime itself (nrt_memcpy_async) and every glue
 * launch are attributed to the op without passing an id around. */
void nrt_trace_set_correlation(uint64_t id);
uint64_t nrt_trace_correlation(void);

#ifdef __cplusplus
}
#endif
#endif /* NEURON_RUNTIME_H */
