/* kernel_entries.h — the executor of each kernel id (registry.c lists them). */
#ifndef NK_KERNEL_ENTRIES_H
#define NK_KERNEL_ENTRIES_H

#include "neuron_runtime.h"

int nk_copy_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_fill_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* fusible.c: tells the runtime which kernels adaptive eager may tile */
nrt_status nk_register_fusion(void);
nrt_fuse_kind nk_reduce_fusion(const nrt_task *task); /* reduce.c */
nrt_fuse_kind nk_foreach_fusion(const nrt_task *task);      /* optim.c */
extern const nrt_multi_fns nk_foreach_multi;               /* optim.c */
/* a captured row routine as an expression, for compiled groups (nrt_row_expr) */
bool nk_binary_row_expr(const nrt_row_entry *entry, nrt_row_expr *expr);
bool nk_unary_row_expr(const nrt_row_entry *entry, nrt_row_expr *expr);
bool nk_pointwise_row_expr(const nrt_row_entry *entry, nrt_row_expr *expr);
int nk_arange_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_linspace_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_binary_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_random_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_gemm_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* pointwise */
int nk_pointwise_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* unary */
int nk_unary_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_unary_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* reduce */
int nk_reduce_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_scan_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_softmax_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* index */
int nk_gather_scatter_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_index_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_masked_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* sort */
int nk_sort_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_searchsorted_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_unique_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_bernoulli_tensor_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_multinomial_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_unique_rows_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
/* movement */
int nk_triangle_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_pad_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_pad_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* convolution */
int nk_conv_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* pooling and upsampling */
int nk_pool_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_pool_scatter_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_upsample_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_upsample_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* normalisation */
int nk_norm_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_norm_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* attention */
int nk_attention_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* losses */
int nk_loss_pointwise_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_nll_loss_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_multi_margin_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* special functions */

/* optimizer */
int nk_foreach_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_fused_optim_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_amp_update_scale_kernel(const nrt_task *task, nrt_exec_ctx *ctx);

/* long tail */
int nk_orgqr_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_lu_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_tail_pointwise_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_unfold_backward_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_histogram_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_logspace_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_dist_kernel(const nrt_task *task, nrt_exec_ctx *ctx);
int nk_embedding_bag_kernel(const nrt_task *task, nrt_exec_ctx *ctx);


#endif /* NK_KERNEL_ENTRIES_H */
