// norm_glue.h — the row launches ops_norm.cpp and ops_norm_group.cpp share.
#pragma once
#include <ATen/core/Tensor.h>

#include "neuron_kernels.h"

namespace torch_neuronx::norm {

// NK_KERNEL_NORM over rows: Y, X contiguous [R, L]; mean/rstd contiguous with
// R elements (mean undefined for RMS); W, B optional (undefined = None).
void launch_rows_forward(const char* name, nk_norm_kind kind, const at::Tensor& Y,
                         const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& X,
                         const at::Tensor& W, const at::Tensor& B, int64_t R, int64_t L, double eps,
                         int64_t groups, int64_t hw);

// NK_KERNEL_NORM_BACKWARD over rows; dX, dW, dB undefined when not wanted.
void launch_rows_backward(const char* name, nk_norm_kind kind, const at::Tensor& dX,
                          const at::Tensor& dW, const at::Tensor& dB, const at::Tensor& dY,
                          const at::Tensor& X, const at::Tensor& mean, const at::Tensor& rstd,
                          const at::Tensor& W, int64_t M, int64_t N, int64_t groups, int64_t hw);

}  // namespace torch_neuronx::norm
