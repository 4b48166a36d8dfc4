/* fill_rows.h — the vector row of the fill kernel (fill.c). */
#ifndef NK_FILL_ROWS_H
#define NK_FILL_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "elementwise/binary_simd.h"

/* Rows this long or longer are written with non-temporal stores
 * (fill_avx2_rows.c): the binary ops' bound for their outputs. */
#define NK_FILL_STREAM_BYTES NK_STREAM_STORE_BYTES

/* out[0, bytes) <- pattern[0, size) repeated; size is 1, 2, 4 or 8 and
 * divides bytes.  AVX2: call only when nk_cpu_isa() >= NK_ISA_AVX2. */
void nk_fill_row_avx2(char *out, int64_t bytes, const unsigned char pattern[8], size_t size);

#endif
