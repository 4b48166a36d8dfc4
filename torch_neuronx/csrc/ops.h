// ops.h — what the op families (ops_*.cpp) share.
#pragma once
#include <ATen/core/Tensor.h>

namespace torch_neuronx {

// A contiguous neuron tensor, allocated on `device` (the caching allocator
// takes the current device, so this guards it).
at::Tensor empty_neuron(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device);

// dst <- src on one neuron device (broadcasting src, casting dtypes), with
// the overlap checks of ATen's copy_.  Same-dtype copies of any dtype run on
// the device; a cast needs both dtypes native (copy_ routes the others
// through the CPU).
void copy_on_device(const at::Tensor& dst, const at::Tensor& src);

// fill_(value) on a neuron tensor.
at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value);

}  // namespace torch_neuronx
