/* env.c — TORCHNEURON_* configuration.  Parsing is strict: trailing junk,
 * overflow and out-of-range values are errors naming the variable, so a
 * typo never silently becomes a default. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* strtol alone would accept " 4" and "+4"; a value must start with a digit
 * (or '-' and a digit). */
int nrt_parse_int(const char *text, long lo, long hi, long *out) {
  if (!text || !(is_digit(text[0]) || (text[0] == '-' && is_digit(text[1])))) return -1;
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int nrt_parse_size(const char *text, uint64_t *out) {
  if (!text || !is_digit(text[0])) return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno) return -1;
  unsigned shift = 0;
  switch (*end) {
    case '\0': case 'B': case 'b': break;
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: return -1;
  }
  if (*end == 'B' || *end == 'b') end++; /* "16GB" reads as 16G */
  if (*end) return -1;
  if (shift && v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

/* NEURON_RT_VISIBLE_CORES, the real runtime's variable (set by `accelerate
 * launch --gpu_ids`): a comma-separated list of core numbers and ranges
 * ("0-3", "1,3", "2"), each below the machine's `cores`, none twice.  The
 * process sees that many devices, numbered from 0, as CUDA_VISIBLE_DEVICES
 * renumbers GPUs.  Returns the count, or -1 on malformed text. */
int nrt_parse_core_list(const char *text, int cores) {
  uint64_t seen = 0; /* cores <= NRT_MAX_DEVICES = 64 */
  int count = 0;
  const char *p = text;
  for (;;) {
    char item[32];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item) return -1;
    memcpy(item, p, len);
    item[len] = '\0';
    char *dash = strchr(item, '-');
    long lo, hi;
    if (dash) *dash = '\0';
    if (nrt_parse_int(item, 0, cores - 1, &lo)) return -1;
    hi = lo;
    if (dash && nrt_parse_int(dash + 1, lo, cores - 1, &hi)) return -1;
    for (long c = lo; c <= hi; c++) {
      if (seen >> c & 1) return -1;
      seen |= (uint64_t)1 << c;
      count++;
    }
    if (!p[len]) return count;
    p += len + 1;
  }
}

static nrt_status bad(const char *name, const char *value, const char *want) {
  return nrt_fail(NRT_ERROR_INVALID_CONFIG, "%s=\"%s\" is invalid: expected %s", name,
                  value, want);
}

nrt_status nrt_config_from_env(nrt_config *cfg) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  *cfg = (nrt_config){.device_count = 2,
                      .hbm_bytes = (uint64_t)16 << 30,
                      .num_threads = cores > 0 ? (int)cores : 1,
                      .launch_blocking = 0,
                      .adaptive = NRT_ADAPTIVE_ON,
                      .fusion_compile = NRT_FUSION_JIT_ON,
                      .trace_capacity = 65536};
  const char *v;
  long n;
  if ((v = getenv("TORCHNEURON_DEVICE_COUNT"))) {
    if (nrt_parse_int(v, 1, NRT_MAX_DEVICES, &n))
      return bad("TORCHNEURON_DEVICE_COUNT", v, "an integer from 1 to 64");
    cfg->device_count = (int)n;
  }
  if ((v = getenv("NEURON_RT_VISIBLE_CORES"))) {
    int visible = nrt_parse_core_list(v, cfg->device_count);
    if (visible < 0)
      return bad("NEURON_RT_VISIBLE_CORES", v,
                 "core numbers and ranges below TORCHNEURON_DEVICE_COUNT, e.g. 0-1 or 0,1");
    cfg->device_count = visible;
  }
  /* A worker started by a launcher (torchrun, accelerate launch) starts on
   * device LOCAL_RANK mod count, as the real runtime gives each worker its
   * own NeuronCore: accelerate places a neuron process on
   * torch.neuron.current_device() but hands DDP device_ids=[local rank],
   * and the two must agree.  LOCAL_RANK is the launcher's variable, not
   * ours: a value that is not a rank is ignored rather than an error. */
  if ((v = getenv("LOCAL_RANK")) && nrt_parse_int(v, 0, 1L << 30, &n) == 0)
    cfg->first_device = (int)(n % cfg->device_count);
  if ((v = getenv("TORCHNEURON_HBM_SIZE"))) {
    uint64_t bytes;
    /* 2^46 = 64 TiB: the most address space we are willing to reserve. */
    if (nrt_parse_size(v, &bytes) || bytes < ((uint64_t)64 << 20) || bytes > ((uint64_t)1 << 46))
      return bad("TORCHNEURON_HBM_SIZE", v,
                 "a size in bytes with optional K/M/G/T suffix, from 64M to 64T");
    cfg->hbm_bytes = bytes;
  }
  if ((v = getenv("TORCHNEURON_NUM_THREADS"))) {
    if (nrt_parse_int(v, 1, 1024, &n))
      return bad("TORCHNEURON_NUM_THREADS", v, "an integer from 1 to 1024");
    cfg->num_threads = (int)n;
  }
  if ((v = getenv("TORCHNEURON_LAUNCH_BLOCKING"))) {
    if (nrt_parse_int(v, 0, 1, &n)) return bad("TORCHNEURON_LAUNCH_BLOCKING", v, "0 or 1");
    cfg->launch_blocking = (int)n;
  }
  if ((v = getenv("TORCHNEURON_ADAPTIVE_EAGER"))) {
    if (strcmp(v, "verify") == 0) cfg->adaptive = NRT_ADAPTIVE_VERIFY;
    else if (nrt_parse_int(v, 0, 1, &n) == 0) cfg->adaptive = (int)n;
    else return bad("TORCHNEURON_ADAPTIVE_EAGER", v, "0, 1 or verify");
  }
  if ((v = getenv("TORCHNEURON_FUSION_COMPILE"))) {
    if (strcmp(v, "sync") == 0) cfg->fusion_compile = NRT_FUSION_JIT_SYNC;
    else if (nrt_parse_int(v, 0, 1, &n) == 0) cfg->fusion_compile = (int)n;
    else return bad("TORCHNEURON_FUSION_COMPILE", v, "0, 1 or sync");
  }
  if ((v = getenv("TORCHNEURON_PIN_THREADS"))) {
    if (nrt_parse_int(v, 0, 1, &n)) return bad("TORCHNEURON_PIN_THREADS", v, "0 or 1");
    cfg->pin_threads = (int)n;
  }
  if ((v = getenv("TORCHNEURON_TRACE_CAPACITY"))) {
    if (nrt_parse_int(v, 16, 1L << 26, &n))
      return bad("TORCHNEURON_TRACE_CAPACITY", v, "an integer from 16 to 67108864");
    cfg->trace_capacity = (size_t)n;
  }
  return NRT_SUCCESS;
}
