// ops_train.cpp — what training end to end needs beyond the op families.
//
// _has_compatible_shallow_copy_type: `module.to(device)` keeps each
// Parameter object (and so weight tying, optimizers built before the move,
// hooks holding a parameter) only when `param.data = moved` is allowed, i.e.
// when this op says the two tensors' TensorImpls are interchangeable.
// c10's TensorImpl::has_compatible_shallow_copy_type lists the in-tree dense
// backends (CPU, CUDA, MPS, HIP, XPU, HPU, MTIA) but not PrivateUse1, and
// says out-of-tree backends override the operator (as PyTorch's OpenReg
// does).  Without this, `GPT.to("neuron")` silently untied the embedding and
// the language-model head (two Parameters where cuda has one), so the
// learning curve left the CPU's after the first step.  The rule here is c10's
// with PrivateUse1 added to the dense backends: a dense neuron tensor and a
// dense CPU/CUDA/... tensor are compatible, exactly as CPU and CUDA are.
//
// _weight_norm_interface (+ backward): what torch._weight_norm calls for
// dim 0 or the last dim (torch.nn.utils.parametrizations.weight_norm).  The
// CPU and CUDA versions are device specific (weight_norm_cpu calls its stub
// with kCPU), so this is the same math from native ops: norms over every
// dim but `dim` in opmath (float32 for bfloat16 weights, as CPU and CUDA
// keep them), w = v * (g / norms); backward with s = sum(grad_w * v) over
// those dims: grad_g = s / norms, grad_v = (g / norms) * (grad_w - v * s /
// norms^2) — the formula of ATen's CPU kernel.
//
// Not here: linalg_matrix_exp (parametrizations.orthogonal of a square
// weight) still falls back.  ATen's one CPU/CUDA function cannot simply be
// registered: it moves its from_blob coefficient tables to the device only
// for cuda and calls at::native::_compute_linear_combination directly, so on
// neuron it mixes devices.  It needs its own glue (Bader et al.'s degree
// selection and scaling-and-squaring from native matmuls).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/sum.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

namespace torchneuron {
namespace {

bool is_dense(c10::DispatchKeySet ks) {
  constexpr auto dense_backends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::CUDABit, c10::BackendComponent::MPSBit,
       c10::BackendComponent::HIPBit, c10::BackendComponent::XPUBit, c10::BackendComponent::HPUBit,
       c10::BackendComponent::MTIABit, c10::BackendComponent::PrivateUse1Bit});
  return ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) && ks.has_any(dense_backends);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return is_dense(self.key_set()) && is_dense(from.key_set());
}

// Every dim of v but `dim` (all of them when dim is out of range, as
// norm_except_dim does for -1).
std::vector<int64_t> dims_except(const at::Tensor& v, int64_t dim) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (d != dim) dims.push_back(d);
  }
  return dims;
}

at::ScalarType opmath(at::ScalarType t) {
  return (t == at::kBFloat16 || t == at::kHalf) ? at::kFloat : t;
}

std::tuple<at::Tensor, at::Tensor> weight_norm(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  TORCH_CHECK(v.device() == g.device(), "weight_norm: v and g must be on the same device, got ",
              v.device(), " and ", g.device());
  const auto acc = opmath(v.scalar_type());
  const auto vf = v.to(acc);
  const auto norms = at::linalg_vector_norm(vf, 2, dims_except(v, dim), /*keepdim=*/true)
                         .reshape(g.sizes());
  const auto w = (vf * (g.to(acc) / norms).view(norms.sizes())).to(v.scalar_type())
                     .contiguous();
  // CPU and CUDA keep the norms in float32 for bfloat16 g, in g's dtype otherwise.
  const auto norm_dtype = g.scalar_type() == at::kBFloat16 ? at::kFloat : g.scalar_type();
  return {w, norms.to(norm_dtype)};
}

std::tuple<at::Tensor, at::Tensor> weight_norm_backward(const at::Tensor& grad_w, const at::Tensor& v,
                                                        const at::Tensor& g, const at::Tensor& norms,
                                                        int64_t dim) {
  TORCH_CHECK(v.is_contiguous() && g.is_contiguous() && norms.is_contiguous(),
              "weight_norm_backward: saved_v, saved_g and saved_norms must be contiguous");
  const auto acc = opmath(v.scalar_type());
  const auto gw = grad_w.to(acc);
  const auto vf = v.to(acc);
  const auto nf = norms.to(acc);
  const auto s = at::sum(gw * vf, dims_except(v, dim), /*keepdim=*/true).reshape(g.sizes());
  const auto grad_g = (s / nf).to(g.scalar_type());
  const auto grad_v = ((g.to(acc) / nf) * (gw - vf * (s / (nf * nf)))).to(v.scalar_type());
  return {grad_v.contiguous(), grad_g.contiguous()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("_weight_norm_interface", TORCH_FN(weight_norm));
  m.impl("_weight_norm_interface_backward", TORCH_FN(weight_norm_backward));
}

}  // namespace torchneuron
