// ops_complex_views.cpp — view_as_real / view_as_complex on neuron.
//
// They are metadata-only views (a new dtype, sizes and strides over the
// same storage); ATen's CPU/CUDA implementation (at::native::view_as_real /
// view_as_complex) touches no data and is device-generic, so it is
// registered for PrivateUse1 as is.  Before, they fell back to the CPU and
// returned copies, so anything writing through the view was lost: the
// Python all_reduce of a complex tensor (torch.distributed passes
// view_as_real(t) to the backend) left t unchanged.
#include <ATen/ATen.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

namespace torch_neuronx {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
}

}  // namespace torch_neuronx
