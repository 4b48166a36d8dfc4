/* registry.c — the one table of kernel ids and their executors. */
#include "common/kernel_entries.h"
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
    {NK_KERNEL_GEMM, "gemm", nk_gemm_kernel},
    /* pointwise */
    {NK_KERNEL_POINTWISE, "pointwise", nk_pointwise_kernel},
    /* unary */
    {NK_KERNEL_UNARY, "unary", nk_unary_kernel},
    {NK_KERNEL_UNARY_BACKWARD, "unary_backward", nk_unary_backward_kernel},
    /* reduce */
    {NK_KERNEL_REDUCE, "reduce", nk_reduce_kernel},
    {NK_KERNEL_SCAN, "scan", nk_scan_kernel},
    {NK_KERNEL_SOFTMAX, "softmax", nk_softmax_kernel},
    /* index */
    {NK_KERNEL_GATHER_SCATTER, "gather_scatter", nk_gather_scatter_kernel},
    {NK_KERNEL_INDEX, "index", nk_index_kernel},
    {NK_KERNEL_MASKED, "masked", nk_masked_kernel},
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

    /* convolution */
    {NK_KERNEL_CONV, "conv", nk_conv_kernel},

    /* pooling and upsampling */
    {NK_KERNEL_POOL, "pool", nk_pool_kernel},
    {NK_KERNEL_POOL_SCATTER, "pool_scatter", nk_pool_scatter_kernel},
    {NK_KERNEL_UPSAMPLE, "upsample", nk_upsample_kernel},
    {NK_KERNEL_UPSAMPLE_BACKWARD, "upsample_backward", nk_upsample_backward_kernel},

    /* normalisation */
    {NK_KERNEL_NORM, "norm", nk_norm_kernel},
    {NK_KERNEL_NORM_BACKWARD, "norm_backward", nk_norm_backward_kernel},

    /* attention */
    {NK_KERNEL_ATTENTION, "attention", nk_attention_kernel},

    /* losses */
    {NK_KERNEL_LOSS_POINTWISE, "loss_pointwise", nk_loss_pointwise_kernel},
    {NK_KERNEL_NLL_LOSS, "nll_loss", nk_nll_loss_kernel},
    {NK_KERNEL_MULTI_MARGIN, "multi_margin", nk_multi_margin_kernel},

    /* special functions */

    /* optimizer */
    {NK_KERNEL_FOREACH, "foreach", nk_foreach_kernel},
    {NK_KERNEL_FUSED_OPTIM, "fused_optim", nk_fused_optim_kernel},
    {NK_KERNEL_AMP_UPDATE_SCALE, "amp_update_scale", nk_amp_update_scale_kernel},

    /* long tail */
    {NK_KERNEL_ORGQR, "orgqr", nk_orgqr_kernel},
    {NK_KERNEL_LU, "lu", nk_lu_kernel},
    {NK_KERNEL_TAIL_POINTWISE, "tail_pointwise", nk_tail_pointwise_kernel},
    {NK_KERNEL_UNFOLD_BACKWARD, "unfold_backward", nk_unfold_backward_kernel},
    {NK_KERNEL_HISTOGRAM, "histogram", nk_histogram_kernel},
    {NK_KERNEL_LOGSPACE, "logspace", nk_logspace_kernel},
    {NK_KERNEL_DIST, "dist", nk_dist_kernel},
    {NK_KERNEL_EMBEDDING_BAG, "embedding_bag", nk_embedding_bag_kernel},

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
  return nk_register_fusion(); /* fusible.c: what adaptive eager may tile */
}

/* Every kernel's params fit in nrt_task.params. */
#define NK_PARAMS_FIT(type) \
  _Static_assert(sizeof(type) <= NRT_PARAM_BYTES, #type " fits in nrt_task.params")
NK_PARAMS_FIT(nk_fill_params);
NK_PARAMS_FIT(nk_arange_params);
NK_PARAMS_FIT(nk_linspace_params);
NK_PARAMS_FIT(nk_binary_params);
NK_PARAMS_FIT(nk_random_params);
NK_PARAMS_FIT(nk_gemm_params);
NK_PARAMS_FIT(nk_pointwise_params);
NK_PARAMS_FIT(nk_unary_params);
NK_PARAMS_FIT(nk_reduce_params);
NK_PARAMS_FIT(nk_scan_params);
NK_PARAMS_FIT(nk_softmax_params);
NK_PARAMS_FIT(nk_gather_scatter_params);
NK_PARAMS_FIT(nk_index_params);
NK_PARAMS_FIT(nk_masked_params);
NK_PARAMS_FIT(nk_sort_params);
NK_PARAMS_FIT(nk_searchsorted_params);
NK_PARAMS_FIT(nk_philox_params);
NK_PARAMS_FIT(nk_multinomial_params);
NK_PARAMS_FIT(nk_triangle_params);
NK_PARAMS_FIT(nk_pad_params);
NK_PARAMS_FIT(nk_unique_rows_params);

/* convolution */
NK_PARAMS_FIT(nk_conv_params);

/* pooling and upsampling */
NK_PARAMS_FIT(nk_pool_params);
NK_PARAMS_FIT(nk_upsample_params);

/* normalisation */
NK_PARAMS_FIT(nk_norm_params);

/* attention */
NK_PARAMS_FIT(nk_attention_params);

/* losses */
NK_PARAMS_FIT(nk_loss_pointwise_params);
NK_PARAMS_FIT(nk_nll_loss_params);
NK_PARAMS_FIT(nk_multi_margin_params);

/* special functions */

/* optimizer */
NK_PARAMS_FIT(nk_foreach_params);
NK_PARAMS_FIT(nk_optim_params);
NK_PARAMS_FIT(nk_amp_update_scale_params);

/* long tail */
NK_PARAMS_FIT(nk_lu_params);
NK_PARAMS_FIT(nk_tail_pointwise_params);
NK_PARAMS_FIT(nk_unfold_backward_params);
NK_PARAMS_FIT(nk_histogram_params);
NK_PARAMS_FIT(nk_logspace_params);
NK_PARAMS_FIT(nk_dist_params);
NK_PARAMS_FIT(nk_embedding_bag_params);

