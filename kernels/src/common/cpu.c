/* cpu.c — which vector ISA the kernels may use, detected once.
 *
 * AVX2 also requires FMA and F16C (every AVX2 CPU has them, and the AVX2
 * kernels use them); AVX-512 means AVX-512F on top of that.
 * TORCHNEURON_ISA=portable|avx2|avx512 caps the choice (tests use it to run
 * every variant); an unknown value is reported once on stderr and ignored. */
#define _GNU_SOURCE /* syscall */
#include "neuron_kernels.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static const char *const isa_names[] = {"portable", "avx2", "avx512"};

const char *nk_isa_name(nk_isa isa) {
  return (unsigned)isa < sizeof isa_names / sizeof isa_names[0] ? isa_names[isa] : "unknown";
}

static nk_isa detect(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
      !__builtin_cpu_supports("f16c"))
    return NK_ISA_PORTABLE;
  return __builtin_cpu_supports("avx512f") ? NK_ISA_AVX512 : NK_ISA_AVX2;
#else
  return NK_ISA_PORTABLE;
#endif
}

static nk_isa cap_from_env(nk_isa isa) {
  const char *cap = getenv("TORCHNEURON_ISA");
  if (!cap || !*cap) return isa;
  for (int i = 0; i <= NK_ISA_AVX512; i++)
    if (strcmp(cap, isa_names[i]) == 0) return i < (int)isa ? (nk_isa)i : isa;
  fprintf(stderr, "torch_neuronx: ignoring TORCHNEURON_ISA=%s (expected portable, avx2 or avx512)\n",
          cap);
  return isa;
}

nk_isa nk_cpu_isa(void) {
  /* Racing first callers compute the same answer; -1 means not yet known. */
  static atomic_int cached = -1;
  int isa = atomic_load_explicit(&cached, memory_order_relaxed);
  if (isa < 0) {
    isa = cap_from_env(detect());
    atomic_store_explicit(&cached, isa, memory_order_relaxed);
  }
  return (nk_isa)isa;
}

/* AVX512_BF16 (with BW, VL and DQ, which every CPU that has it has): the
 * *_avx512bf16_* variants, within the TORCHNEURON_ISA cap (avx512). */
int nk_cpu_has_avx512bf16(void) {
#if defined(__x86_64__)
  static atomic_int cached = -1; /* racing first callers compute the same answer */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    __builtin_cpu_init();
    v = nk_cpu_isa() == NK_ISA_AVX512 && __builtin_cpu_supports("avx512bf16") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq");
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
#else
  return 0;
#endif
}

/* AMX-TILE + AMX-BF16 (gemm_amx_bf16.c), on top of AVX512_BF16 (so within
 * the TORCHNEURON_ISA cap), unless TORCHNEURON_AMX=0.  The OS must manage
 * the tile state (XCR0 bits 17-18) and Linux must grant this process the
 * tile data (arch_prctl ARCH_REQ_XCOMP_PERM, once: a process without the
 * permission is killed by its first tile instruction). */
int nk_cpu_has_amx_bf16(void) {
#if defined(__x86_64__)
  static atomic_int cached = -1; /* racing first callers ask the OS twice, harmlessly */
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    unsigned a, b, c, d;
    const char *env = getenv("TORCHNEURON_AMX");
    v = nk_cpu_has_avx512bf16() && !(env && strcmp(env, "0") == 0) &&
        __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) /* AMX-TILE */ &&
        (d >> 22 & 1) /* AMX-BF16 */;
    if (v) {
      unsigned lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      const unsigned tile_state = 3u << 17; /* XTILECFG, XTILEDATA */
      enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
      v = (lo & tile_state) == tile_state &&
          syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
#else
  return 0;
#endif
}
