/* device.c — process-wide initialisation, the device table, the current
 * device of each host thread, device-wide synchronisation.
 *
 * Initialisation runs once (pthread_once): configuration from the
 * environment, one HBM arena and caching allocator per device, the compute
 * pool and the trace ring.  Its status and message are kept, so every later
 * call that needs the runtime reports the same configuration error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

nrt_config nrt_cfg;
static nrt_device devices[NRT_MAX_DEVICES];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static nrt_status init_status;
static char init_message[1024];
static _Thread_local int current_device = -1; /* -1: nrt_cfg.first_device */

/* A forked child has the parent's memory but none of its threads: no
 * worker would ever run its streams, and a lock some parent thread held at
 * the fork stays held.  Like CUDA, the runtime refuses to work there (with
 * a status, not a hang); a process that forks before initialising is
 * unaffected. */
static atomic_int forked_child;

static void mark_forked_child(void) { atomic_store(&forked_child, 1); }

nrt_status nrt_check_not_forked(void) {
  if (!atomic_load_explicit(&forked_child, memory_order_relaxed)) return NRT_SUCCESS;
  return nrt_fail(NRT_ERROR_INTERNAL,
                  "the neuron runtime cannot be used in a forked child process (it was "
                  "initialised in the parent); use the 'spawn' multiprocessing start method");
}

static void init_runtime(void) {
  pthread_atfork(NULL, NULL, mark_forked_child);
  init_status = nrt_config_from_env(&nrt_cfg);
  for (int i = 0; init_status == NRT_SUCCESS && i < nrt_cfg.device_count; i++) {
    nrt_device *d = &devices[i];
    d->index = i;
    pthread_mutex_init(&d->streams_lock, NULL);
    init_status = nrt_arena_create(nrt_cfg.hbm_bytes, &d->arena);
    if (init_status == NRT_SUCCESS) init_status = nrt_allocator_create(d, &d->alloc);
  }
  if (init_status != NRT_SUCCESS) {
    snprintf(init_message, sizeof init_message, "%s", nrt_last_error());
    return;
  }
  nrt_pool_init(nrt_cfg.num_threads);
  nrt_trace_init(nrt_cfg.trace_capacity);
}

nrt_status nrt_ensure_init(void) {
  nrt_status forked = nrt_check_not_forked();
  if (forked != NRT_SUCCESS) return forked;
  pthread_once(&init_once, init_runtime);
  if (init_status != NRT_SUCCESS) return nrt_fail(init_status, "%s", init_message);
  return NRT_SUCCESS;
}

nrt_status nrt_init(void) { return nrt_ensure_init(); }

nrt_device *nrt_device_get(int index) {
  if (nrt_ensure_init() != NRT_SUCCESS) return NULL;
  if (index < 0 || index >= nrt_cfg.device_count) {
    nrt_fail(NRT_ERROR_INVALID_DEVICE, "invalid device ordinal %d (device count is %d)", index,
             nrt_cfg.device_count);
    return NULL;
  }
  return &devices[index];
}

nrt_status nrt_device_error(void) {
  if (atomic_load(&forked_child)) return NRT_ERROR_INTERNAL;
  return init_status != NRT_SUCCESS ? init_status : NRT_ERROR_INVALID_DEVICE;
}

nrt_status nrt_device_count(int *count) {
  if (!count) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "count is NULL");
  nrt_status s = nrt_ensure_init();
  *count = s == NRT_SUCCESS ? nrt_cfg.device_count : 0;
  return s;
}

nrt_status nrt_device_props_get(int device, nrt_device_props *props) {
  if (!props) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "props is NULL");
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  memset(props, 0, sizeof *props);
  snprintf(props->name, sizeof props->name, "Virtual NeuronCore v1");
  props->hbm_bytes = nrt_arena_capacity(d->arena);
  props->sbuf_bytes = NRT_SBUF_BYTES;
  props->compute_threads = nrt_cfg.num_threads;
  props->major = 1;
  props->minor = 0;
  return NRT_SUCCESS;
}

nrt_status nrt_device_current_set(int device) {
  if (!nrt_device_get(device)) return nrt_device_error();
  current_device = device;
  return NRT_SUCCESS;
}

nrt_status nrt_device_current_get(int *device) {
  if (!device) return nrt_fail(NRT_ERROR_INVALID_ARGUMENT, "device is NULL");
  nrt_status s = nrt_ensure_init();
  *device = current_device >= 0 ? current_device : nrt_cfg.first_device;
  return s;
}

void nrt_device_wait_idle(nrt_device *d) {
  for (int i = 0; i < NRT_STREAM_SLOTS; i++) {
    nrt_stream *s = atomic_load(&d->streams[i]);
    if (s) nrt_stream_wait_seq(s, nrt_stream_launched(s));
  }
}

nrt_status nrt_device_synchronize(int device) {
  nrt_device *d = nrt_device_get(device);
  if (!d) return nrt_device_error();
  nrt_status first = NRT_SUCCESS;
  char message[1024] = "";
  for (int i = 0; i < NRT_STREAM_SLOTS; i++) {
    nrt_stream *s = atomic_load(&d->streams[i]);
    if (!s) continue;
    nrt_status st = nrt_stream_synchronize(s);
    if (st != NRT_SUCCESS && first == NRT_SUCCESS) {
      first = st;
      snprintf(message, sizeof message, "%s", nrt_last_error());
    }
  }
  return first == NRT_SUCCESS ? NRT_SUCCESS : nrt_fail(first, "%s", message);
}
