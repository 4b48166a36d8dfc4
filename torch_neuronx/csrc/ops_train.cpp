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
// Weight norm (_weight_norm_interface and its backward) is in
// ops_models.cpp, built from ATen's own composite pieces.
//
// parametrizations.orthogonal's linalg_matrix_exp and
// linalg_householder_product are in ops_linalg.cpp.
#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

namespace torch_neuronx {
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace torch_neuronx
