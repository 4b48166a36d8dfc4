// ops_norm_group.cpp — group norm on neuron.  native_group_norm and
// native_group_norm_backward are one shared CPU/CUDA function (checks,
// outputs, mixed dtypes) that calls the GroupNormKernel /
// GroupNormBackwardKernel stubs, so those functions are registered as they
// are and the stubs' PrivateUse1 slots launch NK_KERNEL_NORM(_BACKWARD) with
// rows of (sample, group) (see ops_norm.cpp, kernels/src/norm/norm.c).  On a
// device other than the CPU they hand the stubs contiguous tensors.
#include <ATen/ATen.h>
#include <ATen/native/group_norm.h>
#include <ATen/ops/native_group_norm_backward_native.h>
#include <ATen/ops/native_group_norm_native.h>
#include <torch/library.h>

#include "norm_glue.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

Tensor contiguous_or_undef(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

void group_norm_kernel(const Tensor& X, const Tensor& gamma, const Tensor& beta, int64_t N, int64_t C,
                       int64_t HxW, int64_t group, double eps, Tensor& Y, Tensor& mean, Tensor& rstd) {
  TORCH_CHECK(at::isFloatingType(X.scalar_type()), "\"GroupNormKernelImpl\" not implemented for '",
              X.scalar_type(), "'");
  if (N * group == 0) return;
  const Tensor Xc = X.contiguous(), W = contiguous_or_undef(gamma), B = contiguous_or_undef(beta);
  const Tensor Yc = Y.is_contiguous() ? Y : at::empty_like(Y, at::MemoryFormat::Contiguous);
  const Tensor m = mean.contiguous(), r = rstd.contiguous();
  norm::launch_rows_forward("aten::native_group_norm", NK_NORM_GROUP, Yc, m, r, Xc, W, B, N * group,
                            (C / group) * HxW, eps, group, HxW);
  if (!Yc.is_same(Y)) Y.copy_(Yc);
  if (!m.is_same(mean)) mean.copy_(m);
  if (!r.is_same(rstd)) rstd.copy_(r);
}

void group_norm_backward_kernel(const Tensor& dY, const Tensor& X, const Tensor& mean,
                                const Tensor& rstd, const Tensor& gamma, int64_t N, int64_t C,
                                int64_t HxW, int64_t group, Tensor& dX, Tensor& dgamma,
                                Tensor& dbeta) {
  const int64_t R = N * group, L = (C / group) * HxW;
  if (R == 0) {
    if (dgamma.defined()) dgamma.zero_();
    if (dbeta.defined()) dbeta.zero_();
    return;
  }
  const Tensor dXc =
      !dX.defined() || dX.is_contiguous() ? dX : at::empty_like(dX, at::MemoryFormat::Contiguous);
  const Tensor dWc = contiguous_or_undef(dgamma), dBc = contiguous_or_undef(dbeta);
  norm::launch_rows_backward("aten::native_group_norm_backward", NK_NORM_GROUP, dXc, dWc, dBc,
                             dY.contiguous(), X.contiguous(), mean.contiguous(), rstd.contiguous(),
                             contiguous_or_undef(gamma), R, L, group, HxW);
  if (dX.defined() && !dXc.is_same(dX)) dX.copy_(dXc);
  if (dgamma.defined() && !dWc.is_same(dgamma)) dgamma.copy_(dWc);
  if (dbeta.defined() && !dBc.is_same(dbeta)) dbeta.copy_(dBc);
}

// ATen's composite group_norm keeps a channels_last input as it is on any
// device but cuda, and native_group_norm then demands a contiguous one off
// the CPU: contiguous here.
std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& X, const std::optional<Tensor>& gamma,
                                                     const std::optional<Tensor>& beta, int64_t N,
                                                     int64_t C, int64_t HxW, int64_t group, double eps) {
  return at::native::native_group_norm(X.contiguous(), gamma, beta, N, C, HxW, group, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_group_norm", TORCH_FN(native_group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(at::native::native_group_norm_backward));
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(GroupNormKernel, &torch_neuronx::group_norm_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(GroupNormBackwardKernel, &torch_neuronx::group_norm_backward_kernel);
}  // namespace at::native
