/* attention_f32.c — the tiled attention (attention_impl.h) in float on
 * portable vectors of 4 lanes; chosen at run time by attention.c. */
#define AT_T float
#define AT_VW 4
#define AT_IS_DOUBLE 0
#define AT_NAME nk_attention_portable_f32
#include "attention/attention_impl.h"
