// ops_tensor.cpp — tensor creation, storage and views on neuron.
//
// Creation allocates through c10::GetAllocator(kPrivateUse1) (allocator.cpp)
// under a DeviceGuard for the requested device: the caching allocator
// allocates on the current device, as cuda's does.  resize_ and set_ follow
// ATen's cuda versions (resize_impl_cuda_, set_storage_cuda_); a storage that
// must grow goes through at::native::resize_bytes_nocuda, which calls the
// hooks' resizePrivateUse1Bytes (hooks.cpp).  Not done: the deterministic
// fill of fresh memory (fill_resize_deterministic_ is not exported by ATen).
//
// View ops here are the ones whose ATen kernel is registered per backend
// (CPU, CUDA, Meta) rather than CompositeExplicitAutograd; the generic
// at::native kernels only touch metadata, so they are correct for any
// device.  transpose, permute, expand, slice, select, squeeze, unsqueeze,
// diagonal, alias ... are composite and need nothing.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "ops.h"

namespace torch_neuronx {
namespace {

constexpr c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

c10::Device check_factory_args(std::optional<c10::Device> device_opt,
                               std::optional<c10::Layout> layout_opt,
                               std::optional<bool> pin_memory_opt) {
  const c10::Device device = c10::device_or_default(device_opt);
  TORCH_CHECK(device.is_privateuseone(), "expected a neuron device, got ", device);
  TORCH_CHECK(c10::layout_or_default(layout_opt) == c10::Layout::Strided,
              "neuron tensors support only the strided layout, got ",
              c10::layout_or_default(layout_opt));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory_opt),
              "Only dense CPU tensors can be pinned");
  return device;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(check_factory_args(device, layout, pin_memory));
  return at::detail::empty_generic(size, c10::GetAllocator(c10::kPrivateUse1), kNeuronKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  const c10::DeviceGuard guard(check_factory_args(device, layout, pin_memory));
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(c10::kPrivateUse1),
                                           kNeuronKeys, c10::dtype_or_default(dtype));
}

// ATen's resize_impl_cuda_, with storage growth through the hooks.
void resize_impl(c10::TensorImpl* self, c10::IntArrayRef size, at::OptionalIntArrayRef stride) {
  if (self->sizes() == size && (!stride || self->strides() == *stride)) return;
  const auto itemsize = self->dtype().itemsize();
  const auto offset = self->storage_offset();
  size_t nbytes;
  if (stride) {
    self->set_sizes_and_strides(size, *stride);
    nbytes = at::detail::computeStorageNbytes(size, *stride, itemsize, offset);
  } else {
    self->set_sizes_contiguous(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, itemsize, offset);
  }
  if (self->numel() == 0) return;  // any storage holds an empty tensor
  const c10::Storage& storage = self->unsafe_storage();
  TORCH_CHECK(storage, "neuron: cannot resize a tensor without storage");
  if (nbytes > storage.nbytes()) {
    const c10::DeviceGuard guard(storage.device());
    at::native::resize_bytes_nocuda(storage, c10::SymInt(static_cast<int64_t>(nbytes)));
  }
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  resize_impl(self.unsafeGetTensorImpl(), size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "Unsupported memory format", *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  resize_impl(self.unsafeGetTensorImpl(), size,
              stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt);
  return self;
}

// set_() makes self an empty tensor on a fresh, empty storage of its device.
at::Tensor& set_empty(at::Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0,
                       c10::GetAllocator(c10::kPrivateUse1), /*resizable=*/true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

}  // namespace

at::Tensor empty_neuron(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device) {
  const c10::DeviceGuard guard(device);
  return at::detail::empty_generic(sizes, c10::GetAllocator(c10::kPrivateUse1), kNeuronKeys,
                                   dtype, std::nullopt);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(static_cast<at::Tensor& (*)(at::Tensor&, c10::Storage)>(
                                    at::native::set_)));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
}

}  // namespace torch_neuronx
