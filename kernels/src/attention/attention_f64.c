/* attention_f64.c — the tiled attention (attention_impl.h) in double on
 * portable vectors of 2 lanes; chosen at run time by attention.c. */
#define AT_T double
#define AT_VW 2
#define AT_IS_DOUBLE 1
#define AT_NAME nk_attention_portable_f64
#include "attention/attention_impl.h"
