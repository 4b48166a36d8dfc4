/* attention_avx512_f32.c — the tiled attention (attention_impl.h) in float on
 * AVX-512F vectors of 16 lanes; chosen at run time by attention.c. */
#define AT_T float
#define AT_VW 16
#define AT_IS_DOUBLE 0
#define AT_NAME nk_attention_avx512_f32
#include "attention/attention_impl.h"
