// ops_models.cpp — ops the Hugging Face models of tests/models needed that
// fell back to the CPU, made native as compositions of native ops (no kernel
// of their own; glue only, like ATen's own code for other devices).
//
//  - _weight_norm_interface (weight normalisation, torch._weight_norm for the
//    first or last dim: nn.utils.weight_norm and
//    nn.utils.parametrizations.weight_norm, e.g. wav2vec2's positional
//    convolution).  ATen's is device-specific (weight_norm_cpu /
//    weight_norm_cuda); ours: norms = norm_except_dim(v, 2, dim) and
//    w = v * (g / norms), as the CPU in the accumulation type (float for
//    float16/bfloat16) and rounded on store; the norms are float32 when g is
//    float16/bfloat16 (as the CPU's), else g's dtype.  dim must be 0 or
//    v.dim() - 1, unwrapped, as the CPU's (torch._weight_norm sends other
//    dims to norm_except_dim itself).
//  - _weight_norm_interface_backward: ATen's _weight_norm_differentiable_backward
//    (per-row sums of grad_w * v, then grad_v and grad_g), which the CPU and
//    CUDA kernels compute fused; the same checks as weight_norm_backward_cpu.
// Dtypes the device lacks go to the CPU fallback (run_on_cpu).
#include <ATen/ops/_weight_norm_differentiable_backward.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/norm_except_dim.h>
#include <torch/library.h>

#include <tuple>

#include "fallback.h"
#include "launch.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

at::ScalarType acc_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

std::tuple<Tensor, Tensor> weight_norm_interface(const Tensor& v, const Tensor& g, int64_t dim) {
  if (!structured::all_native(v, g)) {
    auto out = run_on_cpu("aten::_weight_norm_interface", "", {v, g, dim}).toTuple();
    return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
  }
  TORCH_CHECK(v.device() == g.device(), "_weight_norm_interface: v and g must be on the same device");
  const int64_t last = v.dim() - 1;
  TORCH_CHECK(dim == 0 || dim == last, "fused kernels can only be applied for first or last dim");
  const auto acc = acc_type(v.scalar_type());
  const Tensor va = v.to(acc);
  const Tensor norms = at::norm_except_dim(va, 2, dim);  // g's shape: 1 except at dim
  const Tensor w = va.mul(g.to(acc).div(norms)).to(v.scalar_type()).contiguous();
  const auto norm_dtype = acc_type(g.scalar_type());
  Tensor norm_out = at::empty_strided(g.sizes(), g.strides(), g.options().dtype(norm_dtype));
  norm_out.copy_(norms.view(g.sizes()));
  return {w, norm_out};
}

std::tuple<Tensor, Tensor> weight_norm_interface_backward(const Tensor& grad_w, const Tensor& saved_v,
                                                          const Tensor& saved_g,
                                                          const Tensor& saved_norms, int64_t dim) {
  if (!structured::all_native(grad_w, saved_v, saved_g, saved_norms)) {
    auto out = run_on_cpu("aten::_weight_norm_interface_backward", "",
                          {grad_w, saved_v, saved_g, saved_norms, dim}).toTuple();
    return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
  }
  // weight_norm_backward_cpu's checks.
  TORCH_CHECK(saved_v.is_contiguous(), "saved_v must be contiguous");
  TORCH_CHECK(saved_g.is_contiguous(), "saved_g must be contiguous");
  TORCH_CHECK(saved_norms.is_contiguous(), "saved_norms must be contiguous");
  TORCH_CHECK(dim == 0 || dim == saved_v.dim() - 1, "fused kernels can only be applied for first or last dim");
  const auto acc = acc_type(saved_v.scalar_type());
  auto [grad_v, grad_g] = at::_weight_norm_differentiable_backward(
      grad_w.to(acc).contiguous(), saved_v.to(acc), saved_g.to(acc), saved_norms.to(acc), dim);
  return {grad_v.to(saved_v.scalar_type()).contiguous(),
          grad_g.to(saved_g.scalar_type()).contiguous()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_norm_interface", TORCH_FN(weight_norm_interface));
  m.impl("_weight_norm_interface_backward", TORCH_FN(weight_norm_interface_backward));
}

}  // namespace torch_neuronx
