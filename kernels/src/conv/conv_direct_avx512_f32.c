/* conv_direct_avx512_f32.c — the direct 3x3 convolution's tiles on AVX-512
 * (conv_direct_impl.h): 16 lanes, mask registers, 4 x 4 forward and 4 x 6
 * weight-gradient accumulators. */
#include "conv/conv_direct.h"

#include <immintrin.h>

#define CD_ISA avx512_f32
#define CD_VL NK_CD_AVX512_VL
#define CD_V __m512
#define CD_M __mmask16
#define CD_FWD_MR NK_CD_AVX512_FWD_MR
#define CD_FWD_NR NK_CD_AVX512_FWD_NR
#define CD_DW_MR NK_CD_AVX512_DW_MR
#define CD_DW_NR NK_CD_AVX512_DW_NR
#define CD_ZERO() _mm512_setzero_ps()
#define CD_SET1(x) _mm512_set1_ps(x)
#define CD_BCAST(p) _mm512_set1_ps(*(p))
#define CD_ADD(a, b) _mm512_add_ps(a, b)
#define CD_FMA(a, b, acc) _mm512_fmadd_ps(a, b, acc)
#define CD_LOADM(m, p) _mm512_maskz_loadu_ps(m, p)
#define CD_STOREM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define CD_HSUM(v) _mm512_reduce_add_ps(v)
#define CD_MASK(table, k) (((const __mmask16 *)(table))[k])
#define CD_NOMASK ((__mmask16)0)
#define CD_MASK_STORE(out, k, bits) (((__mmask16 *)(out))[k] = (__mmask16)(bits))
#include "conv/conv_direct_impl.h"
