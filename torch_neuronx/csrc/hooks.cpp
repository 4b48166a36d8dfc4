// hooks.cpp — at::PrivateUse1HooksInterface: what ATen asks of a device it
// does not know (availability, current device, generators, pinned memory,
// which device a pointer lives on, storage resize).
//
// Decisions:
//  - init() is where the runtime reads its configuration, so a malformed
//    TORCHNEURON_* variable surfaces as a RuntimeError naming the variable at
//    first use (ATen runs init through call_once, which retries after a
//    throw), and kernels are registered with the runtime exactly there.
//  - isAvailable() never throws: a misconfigured runtime is "not available",
//    as a broken driver is for cuda; init() reports why.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>

#include "generator.h"
#include "neuron_check.h"
#include "neuron_kernels.h"
#include "neuron_stream.h"

namespace torch_neuronx {
namespace {

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  void init() const override {
    NEURON_CHECK(nrt_init());
    NEURON_CHECK(nk_register_kernels());
  }

  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    int count = 0;
    return nrt_device_count(&count) == NRT_SUCCESS && count > 0;
  }

  bool hasPrimaryContext(c10::DeviceIndex device) const override {
    check_device_index(device);
    return true;  // a virtual device has no context to create
  }

  c10::DeviceIndex deviceCount() const override {
    int count = 0;
    return nrt_device_count(&count) == NRT_SUCCESS ? static_cast<c10::DeviceIndex>(count) : 0;
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_device_index(device);
    NEURON_CHECK(nrt_device_current_set(device));
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = current_device();
    if (device != old) {
      setCurrentDevice(device);
    }
    return old;
  }

  // Restores a device saved earlier; an invalid one (e.g. -1) is ignored.
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    if (device < 0 || device >= deviceCount()) {
      return current_device();
    }
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return get_default_generator(device);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    if (device < 0) {
      device = current_device();
    }
    check_device_index(device);
    return at::make_generator<NeuronGeneratorImpl>(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    int device = nrt_mem_device_of(data);
    TORCH_CHECK(device >= 0, "Pointer ", data, " is not in the memory of any neuron device");
    return at::Device(at::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  }

  bool isPinnedPtr(const void* data) const override {
    return nrt_host_is_pinned(data) == 1;
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::getHostAllocator(at::kPrivateUse1);
  }

  // Storage.resize_(): a new block, the old bytes copied over on the current
  // stream, then the old block freed.  The old block may belong to another
  // stream, so it is recorded on the copy's stream first.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    TORCH_CHECK(impl->allocator() != nullptr, "Trying to resize a neuron storage without an allocator");
    c10::DeviceGuard guard(impl->device());
    c10::DataPtr new_data = impl->allocator()->allocate(new_bytes);
    size_t keep = std::min(new_bytes, impl->nbytes());
    nrt_stream* stream = current_stream();
    if (keep > 0) {
      NEURON_CHECK(nrt_memcpy_async(stream, new_data.get(), impl->data(), keep));
    }
    c10::DataPtr old_data = impl->set_data_ptr(std::move(new_data));
    impl->set_nbytes(new_bytes);
    if (old_data.get() != nullptr) {
      NEURON_CHECK(nrt_mem_record_stream(old_data.get(), stream));
    }
  }
};

// ATen keeps the pointer for the life of the process.
const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace torch_neuronx
