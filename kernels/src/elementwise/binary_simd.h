/* binary_simd.h — the vectorised same-dtype float32/float64 binary loops.
 *
 * out is contiguous; a and b are each contiguous or one broadcast scalar
 * (the stride-0 case of a tensor-scalar op).  One file per ISA and dtype
 * (binary_<isa>_<dtype>.c), compiled with its own target flags and chosen
 * at run time from nk_cpu_isa(); tails use the scalar op of binary_ops.h so
 * every variant gives the same bits.
 *
 * Rows whose output is at least NK_STREAM_STORE_BYTES are written with
 * non-temporal stores: a result that large would evict the cache anyway,
 * and skipping the read-for-ownership of the output cuts a 3-stream op's
 * memory traffic by a quarter (measured: f32 add of 2^24 elements 28 -> 21
 * ms on this 2-core machine). */
#ifndef NK_BINARY_SIMD_H
#define NK_BINARY_SIMD_H

#include "common/stream_store.h" /* NK_STREAM_STORE_BYTES */
#include "elementwise/binary_ops.h"

typedef void (*nk_binary_vec_fn)(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast,
                                 const void *b, bool b_bcast, const nk_alpha *alpha);

void nk_binary_avx2_f32(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast,
                        const void *b, bool b_bcast, const nk_alpha *alpha);
void nk_binary_avx2_f64(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast,
                        const void *b, bool b_bcast, const nk_alpha *alpha);
void nk_binary_avx512_f32(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast,
                          const void *b, bool b_bcast, const nk_alpha *alpha);
void nk_binary_avx512_f64(nk_binop k, int64_t n, void *out, const void *a, bool a_bcast,
                          const void *b, bool b_bcast, const nk_alpha *alpha);

/* float16/bfloat16 rows (binary_half_avx512_impl.h): out, a and b contiguous
 * in dtype t, except an input given as a float value (a_bcast / b_bcast
 * non-NULL: broadcast along the row); computed in float32, rounded once. */
typedef void (*nk_binary_half_fn)(nrt_dtype t, nk_binop k, int64_t n, void *out, const void *a,
                                  const float *a_bcast, const void *b, const float *b_bcast,
                                  const nk_alpha *alpha);
void nk_binary_avx512_half(nrt_dtype t, nk_binop k, int64_t n, void *out, const void *a,
                           const float *a_bcast, const void *b, const float *b_bcast,
                           const nk_alpha *alpha);
void nk_binary_avx512bf16_half(nrt_dtype t, nk_binop k, int64_t n, void *out, const void *a,
                               const float *a_bcast, const void *b, const float *b_bcast,
                               const nk_alpha *alpha);

#endif /* NK_BINARY_SIMD_H */
