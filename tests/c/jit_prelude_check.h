/* jit_prelude_check.h — the body of test_jit_prelude_<isa>.c: adaptive
 * eager's compiled groups keep 16-bit values in registers as the float32
 * they widen to (kernels/src/fusion/jit_prelude.h).  Its loads, its
 * roundings and its stores must give the bits of dtype_convert.h's scalar
 * conversions, which the unfused kernels' rows give: every 16-bit pattern
 * loaded and stored (whole vectors and tails), and rounded from every
 * upper half with the low halves at and around the ties, plus random
 * float32 patterns.  The including file sets the ISA (a target pragma and
 * NK_JIT_AVX512, and JIT_PRELUDE_TEST_FILE[] to its __FILE__) before including
 * this, which then is its whole test. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fusion/jit_prelude.h"
#include "neuron_kernels.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t random_bits(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* the value an unfused kernel stores as dtype t and the next one loads */
static uint32_t want_round(nrt_dtype t, float f) {
  return bits_of(t == NRT_BFLOAT16 ? nk_bf16_to_f32(nk_f32_to_bf16(f)) : nk_f16_to_f32(nk_f32_to_f16(f)));
}
static uint16_t want_store(nrt_dtype t, float f) {
  return t == NRT_BFLOAT16 ? nk_f32_to_bf16(f) : nk_f32_to_f16(f);
}
static float want_load(nrt_dtype t, uint16_t h) {
  return t == NRT_BFLOAT16 ? nk_bf16_to_f32(h) : nk_f16_to_f32(h);
}

static VT round_as(nrt_dtype t, VT v) {
  return t == NRT_BFLOAT16 ? NK_JIT_ROUND_BFLOAT16(v) : NK_JIT_ROUND_FLOAT16(v);
}
static VT load_as(nrt_dtype t, const uint16_t *h, int rem) {
  return t == NRT_BFLOAT16 ? NK_JIT_LD_BFLOAT16((const char *)h, 0, rem) : NK_JIT_LD_FLOAT16((const char *)h, 0, rem);
}
static void store_as(nrt_dtype t, uint16_t *h, VT v, int rem, int streamed) {
  if (t == NRT_BFLOAT16) {
    if (streamed) NK_JIT_NT_BFLOAT16((char *)h, 0, v, rem);
    else NK_JIT_ST_BFLOAT16((char *)h, 0, v, rem);
  } else {
    if (streamed) NK_JIT_NT_FLOAT16((char *)h, 0, v, rem);
    else NK_JIT_ST_FLOAT16((char *)h, 0, v, rem);
  }
}

/* LANES patterns rounded at once; the first mismatch is printed */
static int round_block(nrt_dtype t, const uint32_t *u) {
  float in[LANES], out[LANES];
  for (int l = 0; l < LANES; l++) in[l] = float_of(u[l]);
  VSTOREU(out, round_as(t, VLOADU(in)));
  for (int l = 0; l < LANES; l++)
    if (bits_of(out[l]) != want_round(t, in[l])) {
      fprintf(stderr, "dtype %d: round(0x%08x) = 0x%08x, want 0x%08x\n", (int)t, (unsigned)u[l],
              (unsigned)bits_of(out[l]), (unsigned)want_round(t, in[l]));
      return 1;
    }
  return 0;
}

static void check_roundings(nrt_dtype t) {
  /* every upper half; low halves at the ties and the carries */
  static const uint32_t lows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x2000, 0x7FFF, 0x8000,
                                  0x8001, 0xBFFF, 0xE000, 0xFFFF};
  const int n_lows = (int)(sizeof lows / sizeof lows[0]);
  int bad = 0;
  uint32_t u[LANES];
  int k = 0;
  for (uint32_t hi = 0; hi < 65536 && !bad; hi++)
    for (int l = 0; l < n_lows && !bad; l++) {
      u[k++] = hi << 16 | lows[l];
      if (k == LANES) bad |= round_block(t, u), k = 0;
    }
  for (int r = 0; r < (1 << 18) && !bad; r++) { /* random patterns */
    for (int l = 0; l < LANES; l++) u[l] = random_bits();
    bad |= round_block(t, u);
  }
  CHECK(!bad);
}

static void check_loads_and_stores(nrt_dtype t) {
  uint16_t h[LANES + 1], back[LANES + 1];
  int bad_load = 0, bad_store = 0, bad_tail = 0;
  for (uint32_t base = 0; base < 65536; base += LANES) {
    for (int l = 0; l < LANES; l++) h[l] = (uint16_t)(base + (uint32_t)l);
    for (int rem = 1; rem <= LANES; rem++) {
      float got[LANES];
      VT v = load_as(t, h, rem);
      VSTOREU(got, v);
      for (int l = 0; l < rem; l++) bad_load |= bits_of(got[l]) != bits_of(want_load(t, h[l]));
      for (int l = rem; l < LANES; l++) bad_tail |= got[l] != 0.0f; /* unused lanes: zeros */
      for (int streamed = 0; streamed < 2; streamed++) {
        for (int l = 0; l <= LANES; l++) back[l] = 0xABCD;
        store_as(t, back, round_as(t, v), rem, streamed);
        for (int l = 0; l < rem; l++) bad_store |= back[l] != want_store(t, want_load(t, h[l]));
        for (int l = rem; l <= LANES; l++) bad_tail |= back[l] != 0xABCD; /* nothing past rem */
      }
    }
  }
  CHECK(!bad_load);
  CHECK(!bad_store);
  CHECK(!bad_tail);
}

static void jit_prelude_tests(void) {
  const nrt_dtype halves[2] = {NRT_BFLOAT16, NRT_FLOAT16};
  for (int i = 0; i < 2; i++) {
    check_roundings(halves[i]);
    check_loads_and_stores(halves[i]);
  }
}

int main(void) {
  if (nk_cpu_isa() < (NK_JIT_AVX512 ? NK_ISA_AVX512 : NK_ISA_AVX2)) {
    printf("%s: its ISA is not available here (or capped by TORCHNEURON_ISA), skipped\n", JIT_PRELUDE_TEST_FILE);
    printf("%s: 0 passed, 0 failed\n", JIT_PRELUDE_TEST_FILE);
    return 0;
  }
  jit_prelude_tests();
  printf("%s: %d passed, %d failed\n", JIT_PRELUDE_TEST_FILE, check_passed_, check_failed_);
  return check_failed_ ? 1 : 0;
}
