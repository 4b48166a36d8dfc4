/* test_kernels_util.h — what the kernel tests share: building operands and
 * tasks, launching through the real runtime (default stream + synchronize),
 * running every test once per ISA the machine has (each in a forked child
 * with TORCHNEURON_ISA set; one set outside caps them), and reference
 * float16/bfloat16 rounding written from the definition (frexp/nearbyint on
 * doubles), independent of the kernels' bit tricks.  Include after defining
 * _POSIX_C_SOURCE. */
#ifndef TEST_KERNELS_UTIL_H
#define TEST_KERNELS_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "neuron_kernels.h"

static const char *const tk_dtype_names[NRT_DTYPE_COUNT] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"};

/* ------------------------------------------------------------ operands */

static inline int64_t tk_size(nrt_dtype t) { return (int64_t)nrt_dtype_size(t); }

/* strides in ELEMENTS (NULL: contiguous row-major), converted to bytes */
static inline nrt_operand tk_operand(void *data, nrt_dtype t, int ndim, const int64_t *sizes,
                              const int64_t *strides) {
  nrt_operand op = {.data = data, .dtype = t, .ndim = ndim};
  int64_t es = tk_size(t), step = es;
  for (int d = ndim - 1; d >= 0; d--) {
    op.sizes[d] = sizes[d];
    op.strides[d] = strides ? strides[d] * es : step;
    step *= sizes[d];
  }
  return op;
}

static inline nrt_operand tk_vector(void *data, nrt_dtype t, int64_t n) {
  return tk_operand(data, t, 1, &n, NULL);
}

/* device memory, zeroed; tests read and write it directly after syncing */
static inline void *tk_alloc(size_t bytes) {
  void *p = NULL;
  if (nrt_mem_alloc(nrt_stream_default(0), bytes ? bytes : 1, &p) != NRT_SUCCESS || !p) {
    fprintf(stderr, "tk_alloc(%zu) failed: %s\n", bytes, nrt_last_error());
    exit(2);
  }
  memset(p, 0, bytes ? bytes : 1);
  return p;
}

static inline void tk_free(void *p) { nrt_mem_free(p); }

static inline nrt_task tk_task(nk_kernel_id kernel, int n_operands, const nrt_operand *ops,
                        const void *params, size_t params_size) {
  nrt_task t = {.kernel = kernel, .n_operands = n_operands, .name = "test_kernel"};
  for (int k = 0; k < n_operands; k++) t.operands[k] = ops[k];
  if (params) memcpy(t.params, params, params_size);
  return t;
}

/* Launches on the default stream and waits: the kernel's own status. */
static inline nrt_status tk_run(const nrt_task *t) {
  nrt_stream *s = nrt_stream_default(0);
  nrt_status st = nrt_launch(s, t);
  nrt_status sync = nrt_stream_synchronize(s);
  return st != NRT_SUCCESS ? st : sync;
}

/* The task fails and the stream's message contains `needle`. */
static inline int tk_fails_with(const nrt_task *t, const char *needle) {
  nrt_status st = tk_run(t);
  if (st == NRT_SUCCESS) return 0;
  const char *msg = nrt_last_error();
  if (msg && strstr(msg, needle)) return 1;
  fprintf(stderr, "  failure message \"%s\" lacks \"%s\"\n", msg ? msg : "(null)", needle);
  return 0;
}

/* ------------------------------------------------------ reference f16/bf16 */

static inline double tk_f16_value(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return sign ? -v : v;
}

static inline double tk_bf16_value(uint16_t b) {
  int sign = b >> 15, e = (b >> 7) & 255, m = b & 127;
  double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
  return sign ? -v : v;
}

/* x rounded to nearest even with `mant` explicit mantissa bits, smallest
 * normal exponent emin, and largest finite exponent emax; returns the
 * encoded bits (c10's canonical NaN given separately). */
static inline uint16_t tk_round_bits(double x, int mant, int emin, int emax, uint16_t nan_bits) {
  int ebits = mant == 10 ? 5 : 8, bias = (1 << (ebits - 1)) - 1;
  if (isnan(x)) return nan_bits;
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  if (a == 0) return sign;
  int e;
  frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  int lead = e - 1 < emin ? emin : e - 1;
  double quantum = ldexp(1, lead - mant);
  double v = nearbyint(a / quantum) * quantum;
  if (v >= ldexp(1, emax + 1)) return sign | (uint16_t)(((1 << ebits) - 1) << mant);
  if (v < ldexp(1, emin)) return sign | (uint16_t)(v / ldexp(1, emin - mant));
  frexp(v, &e);
  uint16_t m = (uint16_t)(v / ldexp(1, e - 1 - mant) - ldexp(1, mant));
  return sign | (uint16_t)((e - 1 + bias) << mant) | m;
}

/* PyTorch rounds double -> half through float, hence the (float). */
static inline uint16_t tk_f16_bits(double x) {
  float f = (float)x;
  return tk_round_bits(f, 10, -14, 15, signbit(f) ? 0xFE00 : 0x7E00);
}
static inline uint16_t tk_bf16_bits(double x) { return tk_round_bits((float)x, 7, -126, 127, 0x7FC0); }

/* ------------------------------------------------------ reference casts */

/* one source element: its exact value (integral or floating) */
typedef struct tk_value {
  int is_int;
  int64_t i;
  double f;
} tk_value;

static inline int tk_is_integral(nrt_dtype t) { return t <= NRT_INT64; }

static inline uint64_t tk_raw_mask(nrt_dtype t) {
  int64_t s = tk_size(t);
  return s == 8 ? ~0ull : (1ull << (8 * s)) - 1;
}

/* writes v into memory as dtype t (v must be representable) */
static inline void tk_put(nrt_dtype t, void *p, tk_value v) {
  union { uint8_t u8; int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint16_t h; float f; double d; } u;
  switch (t) {
  case NRT_BOOL: case NRT_UINT8: u.u8 = (uint8_t)v.i; break;
  case NRT_INT8: u.i8 = (int8_t)v.i; break;
  case NRT_INT16: u.i16 = (int16_t)v.i; break;
  case NRT_INT32: u.i32 = (int32_t)v.i; break;
  case NRT_INT64: u.i64 = v.i; break;
  case NRT_FLOAT16: u.h = tk_f16_bits(v.f); break;
  case NRT_BFLOAT16: u.h = tk_bf16_bits(v.f); break;
  case NRT_FLOAT32: u.f = (float)v.f; break;
  default: u.d = v.f; break;
  }
  memcpy(p, &u, (size_t)tk_size(t));
}

/* the value that tk_put() actually stored */
static inline tk_value tk_stored(nrt_dtype t, tk_value v) {
  if (t == NRT_FLOAT16) v.f = tk_f16_value(tk_f16_bits(v.f));
  else if (t == NRT_BFLOAT16) v.f = tk_bf16_value(tk_bf16_bits(v.f));
  else if (t == NRT_FLOAT32) v.f = (float)v.f;
  return v;
}

/* expected bytes of v converted to dtype `to` (the rules of dtype_convert.h) */
static inline uint64_t tk_expected(tk_value v, nrt_dtype to) {
  uint64_t raw = 0;
  if (to == NRT_BOOL) return v.is_int ? v.i != 0 : v.f != 0 || isnan(v.f);
  if (tk_is_integral(to)) {
    int64_t r = v.i;
    if (!v.is_int) {
      int via32 = to == NRT_INT8 || to == NRT_INT16 || to == NRT_INT32;
      double lo = via32 ? -2147483648.0 : -9223372036854775808.0, hi = -lo;
      double t = trunc(v.f);
      r = (t >= lo && t < hi) ? (int64_t)t : via32 ? INT32_MIN : INT64_MIN;
    }
    return (uint64_t)r & tk_raw_mask(to);
  }
  float f = v.is_int ? (float)v.i : (float)v.f;
  double d = v.is_int ? (double)v.i : v.f;
  uint16_t h;
  switch (to) {
  case NRT_FLOAT16: h = tk_f16_bits(f); memcpy(&raw, &h, 2); break;
  case NRT_BFLOAT16: h = tk_bf16_bits(f); memcpy(&raw, &h, 2); break;
  case NRT_FLOAT32: memcpy(&raw, &f, 4); break;
  default: memcpy(&raw, &d, 8); break;
  }
  return raw;
}

static inline uint64_t tk_raw(nrt_dtype t, const void *p) {
  uint64_t raw = 0;
  memcpy(&raw, p, (size_t)tk_size(t));
  return raw;
}

/* ------------------------------------------------------------------ random */

static uint64_t tk_rng = 0x9E3779B97F4A7C15ull;
static inline uint64_t tk_rand(void) {
  tk_rng ^= tk_rng << 13;
  tk_rng ^= tk_rng >> 7;
  tk_rng ^= tk_rng << 17;
  return tk_rng;
}

/* ---------------------------------------------------------- per-ISA runner */

/* Runs `tests` in a child process per ISA level (portable, avx2, avx512,
 * and avx512 with AMX on a CPU that has it: the AVX-512 run sets
 * TORCHNEURON_AMX=0, so the AVX512_BF16 GEMM stays covered there) that the
 * machine supports, each with TORCHNEURON_ISA set before anything is
 * initialised; the children's counts come back through a pipe, and the
 * last line is the total, "file: N passed, N failed".  A TORCHNEURON_ISA
 * already set caps the levels as a machine without those above it would
 * (`make test-avx2` stands in for an AVX2-only CPU that way). */
static int tk_main(void (*tests)(void), const char *file) {
  static const char *const isas[] = {"portable", "avx2", "avx512", "avx512"};
  static const char *const labels[] = {"portable", "avx2", "avx512", "avx512+amx"};
  const char *cap = getenv("TORCHNEURON_ISA");
  int top = 3;
  for (int i = 0; cap && i < 3; i++)
    if (strcmp(cap, isas[i]) == 0) top = i == 2 ? 3 : i;
  for (int i = 0; i < 4; i++) {
    if (i > top) {
      printf("%s [isa %s]: above TORCHNEURON_ISA=%s, skipped\n", file, labels[i], cap);
      continue;
    }
    int fd[2];
    if (pipe(fd) != 0) return 2;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      check_passed_ = check_failed_ = 0; /* count this child's checks only */
      setenv("TORCHNEURON_ISA", isas[i], 1);
      setenv("TORCHNEURON_AMX", i == 3 ? "1" : "0", 1);
      if (strcmp(nk_isa_name(nk_cpu_isa()), isas[i]) != 0 || (i == 3 && !nk_cpu_has_amx_bf16())) {
        printf("%s [isa %s]: not supported here, skipped\n", file, labels[i]);
      } else if (nrt_init() != NRT_SUCCESS || nk_register_kernels() != NRT_SUCCESS) {
        fprintf(stderr, "%s: init failed: %s\n", file, nrt_last_error());
        check_failed_++;
      } else {
        CHECK_OK(nk_register_kernels()); /* idempotent */
        tests();
        printf("%s [isa %s]: %d passed, %d failed\n", file, labels[i], check_passed_, check_failed_);
      }
      int counts[2] = {check_passed_, check_failed_};
      int ok = write(fd[1], counts, sizeof counts) == (ssize_t)sizeof counts;
      fflush(stdout);
      exit(ok && !check_failed_ ? 0 : 1);
    }
    close(fd[1]);
    int counts[2] = {0, 0}, status = 0;
    int got = pid > 0 && read(fd[0], counts, sizeof counts) == (ssize_t)sizeof counts;
    close(fd[0]);
    check_passed_ += counts[0];
    check_failed_ += counts[1];
    CHECK(got && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* a crash in a child fails here */
  }
  printf("%s: %d passed, %d failed\n", file, check_passed_, check_failed_);
  return check_failed_ ? 1 : 0;
}

#endif /* TEST_KERNELS_UTIL_H */
