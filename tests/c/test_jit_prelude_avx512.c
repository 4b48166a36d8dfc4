/* Compiled groups' 16-bit conversions, AVX-512 prelude
 * (jit_prelude_check.h says what is checked). */
#define _POSIX_C_SOURCE 200809L
#pragma GCC target("avx512f,avx2,fma,f16c")
#define NK_JIT_AVX512 1
#include "jit_prelude_check.h"

int main(void) {
  if (nk_cpu_isa() < NK_ISA_AVX512) {
    printf("%s: AVX-512 not available here (or capped by TORCHNEURON_ISA), skipped\n", __FILE__);
    return CHECK_SUMMARY();
  }
  jit_prelude_tests();
  return CHECK_SUMMARY();
}
