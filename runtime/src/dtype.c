/* dtype.c — element sizes of the runtime's dtypes: one table, indexed by
 * nrt_dtype, so a new dtype is one line here. */
#include "internal.h"

size_t nrt_dtype_size(nrt_dtype t) {
  static const unsigned char sizes[NRT_DTYPE_COUNT] = {
      [NRT_BOOL] = 1,    [NRT_UINT8] = 1,   [NRT_INT8] = 1,     [NRT_INT16] = 2,
      [NRT_INT32] = 4,   [NRT_INT64] = 8,   [NRT_FLOAT16] = 2,  [NRT_BFLOAT16] = 2,
      [NRT_FLOAT32] = 4, [NRT_FLOAT64] = 8,
  };
  return (unsigned)t < NRT_DTYPE_COUNT ? sizes[t] : 0;
}
