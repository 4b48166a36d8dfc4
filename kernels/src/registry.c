/* registry.c — the one table of kernel ids and their executors. */
#include "kernel_entries.h"
#include "neuron_kernels.h"

static const struct {
  nk_kernel_id id;
  const char *name;
  nrt_kernel_fn fn;
} kernels[] = {
    {NK_KERNEL_COPY, "copy", nk_copy_kernel},
    {NK_KERNEL_FILL, "fill", nk_fill_kernel},
    {NK_KERNEL_ARANGE, "arange", nk_arange_kernel},
    {NK_KERNEL_LINSPACE, "linspace", nk_linspace_kernel},
    {NK_KERNEL_BINARY, "binary", nk_binary_kernel},
    {NK_KERNEL_RANDOM, "random", nk_random_kernel},
    /* sort */
    {NK_KERNEL_SORT, "sort", nk_sort_kernel},
    {NK_KERNEL_SEARCHSORTED, "searchsorted", nk_searchsorted_kernel},
    {NK_KERNEL_UNIQUE, "unique", nk_unique_kernel},
    {NK_KERNEL_BERNOULLI_TENSOR, "bernoulli_tensor", nk_bernoulli_tensor_kernel},
    {NK_KERNEL_MULTINOMIAL, "multinomial", nk_multinomial_kernel},
    {NK_KERNEL_UNIQUE_ROWS, "unique_rows", nk_unique_rows_kernel},
    /* movement */
    {NK_KERNEL_TRIANGLE, "triangle", nk_triangle_kernel},
    {NK_KERNEL_PAD, "pad", nk_pad_kernel},
    {NK_KERNEL_PAD_BACKWARD, "pad_backward", nk_pad_backward_kernel},
};

_Static_assert(sizeof kernels / sizeof kernels[0] == NK_KERNEL_END - NK_KERNEL_COPY,
               "every nk_kernel_id has a row");

/* The runtime accepts re-registering an id with the same function, so
 * calling this again is harmless. */
nrt_status nk_register_kernels(void) {
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
    nrt_status s = nrt_kernel_register(kernels[i].id, kernels[i].name, kernels[i].fn);
    if (s != NRT_SUCCESS) return s;
  }
  return NRT_SUCCESS;
}

_Static_assert(sizeof(nk_fill_params) <= NRT_PARAM_BYTES && sizeof(nk_arange_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_linspace_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_binary_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_random_params) <= NRT_PARAM_BYTES &&
                   /* sort */
                   sizeof(nk_sort_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_searchsorted_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_philox_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_multinomial_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_unique_rows_params) <= NRT_PARAM_BYTES &&
                   /* movement */
                   sizeof(nk_triangle_params) <= NRT_PARAM_BYTES &&
                   sizeof(nk_pad_params) <= NRT_PARAM_BYTES,
               "kernel params fit in nrt_task.params");
