/* unary_rows.h — dense rows of the unary ops outside the floating compute
 * classes (unary_rows.c): predicates into bool, and bool/integer ops on
 * their own dtype. */
#ifndef NK_UNARY_ROWS_H
#define NK_UNARY_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "neuron_kernels.h"

/* out[i] <- op(x[i]) for i < n, both contiguous in their dtypes, when the
 * op has a dense row for (in, out): a predicate (isnan ... logical_not)
 * from any floating or byte dtype into bool, or bitwise_not/neg/abs/relu/
 * sign with in == out integral (bitwise_not on bool).  Returns false, having
 * written nothing, for any other case. */
bool nk_unary_dense_row(nk_unary_op op, nrt_dtype in, nrt_dtype out, int64_t n, void *o,
                        const void *x);

#endif
