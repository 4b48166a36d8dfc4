/* attention_avx2_f32.c — the tiled attention (attention_impl.h) in float on
 * AVX2+FMA vectors of 8 lanes; chosen at run time by attention.c. */
#define AT_T float
#define AT_VW 8
#define AT_IS_DOUBLE 0
#define AT_NAME nk_attention_avx2_f32
#include "attention/attention_impl.h"
