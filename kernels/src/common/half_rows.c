/* half_rows.c — the portable instantiation of the 16-bit row conversions
 * and the choice among the ISA ones (half_rows.h). */
#include "common/half_rows.h"

#include "neuron_kernels.h"

#define HR_NAME(x) nk_half_##x##_portable
#include "common/half_rows_impl.h"

const nk_half_fns *nk_half_pick(void) {
  static const nk_half_fns fns[NK_VARIANTS] = {
      {nk_half_in_portable, nk_half_out_portable},
      {nk_half_in_avx2, nk_half_out_avx2},
      {nk_half_in_avx512, nk_half_out_avx512},
      {nk_half_in_avx512bf16, nk_half_out_avx512bf16},
  };
  return &fns[nk_cpu_variant()];
}
