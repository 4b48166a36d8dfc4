/* fill_avx2_rows.c — a dense row of a repeated 1/2/4/8-byte pattern,
 * written 32 bytes per store (kernels/CMakeLists.txt gives *_avx2_* files
 * the AVX2 flags; fill.c calls it only when nk_cpu_isa() allows).
 *
 * A row of NK_FILL_STREAM_BYTES or more is written with non-temporal
 * stores: a fill reads nothing, so a cached store's read-for-ownership is
 * half its memory traffic, and a result that large leaves the cache before
 * it is read again.  Smaller rows keep ordinary stores (a zeros_like whose
 * block is still in L2/L3 from its last use stays there for its reader). */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "elementwise/fill_rows.h"

void nk_fill_row_avx2(char *out, int64_t bytes, const unsigned char pattern[8], size_t size) {
  /* the pattern replicated to 8 bytes (size divides 8), then to 32 */
  unsigned char eight[8];
  for (size_t i = 0; i < 8; i++) eight[i] = pattern[i % size];
  int64_t word;
  memcpy(&word, eight, sizeof word);
  const __m256i v = _mm256_set1_epi64x(word);
  int64_t i = 0;
  /* The head up to 32-byte alignment: whole elements, as the row is made of
   * them (the pattern's phase restarts at every element). */
  const int64_t head = (int64_t)((32 - ((uintptr_t)out & 31)) & 31);
  if (head % (int64_t)size == 0 && head <= bytes) {
    for (; i < head; i += 8) memcpy(out + i, eight, (size_t)(head - i < 8 ? head - i : 8));
    i = head;
  }
  const bool stream = bytes >= NK_FILL_STREAM_BYTES && ((uintptr_t)(out + i) & 31) == 0;
  if (stream) {
    for (; i + 128 <= bytes; i += 128) {
      _mm256_stream_si256((__m256i *)(void *)(out + i), v);
      _mm256_stream_si256((__m256i *)(void *)(out + i + 32), v);
      _mm256_stream_si256((__m256i *)(void *)(out + i + 64), v);
      _mm256_stream_si256((__m256i *)(void *)(out + i + 96), v);
    }
    _mm_sfence(); /* order the streaming stores before the task completes */
  } else {
    for (; i + 128 <= bytes; i += 128) {
      _mm256_storeu_si256((__m256i *)(void *)(out + i), v);
      _mm256_storeu_si256((__m256i *)(void *)(out + i + 32), v);
      _mm256_storeu_si256((__m256i *)(void *)(out + i + 64), v);
      _mm256_storeu_si256((__m256i *)(void *)(out + i + 96), v);
    }
  }
  for (; i + 32 <= bytes; i += 32) _mm256_storeu_si256((__m256i *)(void *)(out + i), v);
  /* i is a multiple of size here (head was, or i started at 0; 32 and 128
   * are multiples of every size): the tail restarts the pattern */
  for (; i < bytes; i += 8) memcpy(out + i, eight, (size_t)(bytes - i < 8 ? bytes - i : 8));
}
