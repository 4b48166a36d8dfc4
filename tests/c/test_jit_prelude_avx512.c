/* Compiled groups' 16-bit conversions, AVX-512 prelude
 * (jit_prelude_check.h says what is checked). */
#define _POSIX_C_SOURCE 200809L
#pragma GCC target("avx512f,avx2,fma,f16c")
#define NK_JIT_AVX512 1
static const char JIT_PRELUDE_TEST_FILE[] = __FILE__;
#include "jit_prelude_check.h"
