// guard.cpp — the device guard for PrivateUse1 and the host thread's current
// stream (neuron_stream.h).
//
// Decisions:
//  - The current *device* is the runtime's (nrt_device_current_*, per host
//    thread), so C code and C++ agree on it.  The current *stream* is kept
//    here, per host thread and per device, as CUDA does: the runtime has no
//    notion of it.  A null slot means the device's default stream (id 0).
//  - A c10::Stream for neuron carries the runtime's stream id; ids are small
//    and never reused (streams live for the process), so (device, id) names a
//    stream for good and to_nrt_stream can look it up.
//  - Events are created lazily on the first record, with timing only when
//    asked (EventFlag::BACKEND_DEFAULT is what torch.Event(enable_timing=True)
//    passes), mirroring CUDA's guard.
#include <array>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "neuron_check.h"
#include "neuron_stream.h"

namespace torch_neuronx {
namespace {

thread_local std::array<nrt_stream*, NRT_MAX_DEVICES> current_streams{};

int device_count_or_zero() noexcept {
  int count = 0;
  return nrt_device_count(&count) == NRT_SUCCESS ? count : 0;
}

c10::DeviceIndex resolve(c10::DeviceIndex index) {
  if (index < 0) {
    return current_device();
  }
  check_device_index(index);
  return index;
}

}  // namespace

void check_device_index(c10::DeviceIndex index) {
  int count = 0;
  NEURON_CHECK(nrt_device_count(&count));
  TORCH_CHECK(index >= 0 && index < count, "Invalid device index ", static_cast<int>(index),
              " for neuron (invalid device ordinal): there ", count == 1 ? "is " : "are ",
              count, " neuron device", count == 1 ? "" : "s");
}

c10::DeviceIndex current_device() {
  int device = 0;
  NEURON_CHECK(nrt_device_current_get(&device));
  return static_cast<c10::DeviceIndex>(device);
}

nrt_stream* current_stream(c10::DeviceIndex device) {
  device = resolve(device);
  nrt_stream* stream = current_streams[device];
  return stream != nullptr ? stream : nrt_stream_default(device);
}

c10::Stream to_c10_stream(nrt_stream* stream) {
  TORCH_INTERNAL_ASSERT(stream != nullptr);
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(c10::DeviceType::PrivateUse1,
                                 static_cast<c10::DeviceIndex>(nrt_stream_device(stream))),
                     nrt_stream_id(stream));
}

nrt_stream* to_nrt_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "Expected a neuron stream, got a stream of ", stream.device_type());
  nrt_stream* out = nullptr;
  NEURON_CHECK(nrt_stream_get(resolve(stream.device_index()), stream.id(), &out));
  return out;
}

namespace {

nrt_event* as_event(void* event) {
  return static_cast<nrt_event*>(event);
}

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override {
    return kType;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    if (device.index() != old.index()) {
      setDevice(device);
    }
    return old;
  }

  c10::Device getDevice() const override {
    return c10::Device(kType, current_device());
  }

  void setDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kType);
    check_device_index(device.index());
    NEURON_CHECK(nrt_device_current_set(device.index()));
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    // Only restores a device a guard saw earlier, so it cannot be invalid.
    (void)nrt_device_current_set(device.index());
  }

  c10::Stream getStream(c10::Device device) const override {
    return to_c10_stream(current_stream(device.index()));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return to_c10_stream(nrt_stream_default(resolve(device.index())));
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    nrt_stream* stream = nullptr;
    NEURON_CHECK(nrt_stream_from_pool(resolve(device.index()), priority, &stream));
    return to_c10_stream(stream);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool high_priority) const override {
    return getNewStream(device, high_priority ? NRT_PRIORITY_HIGH : NRT_PRIORITY_NORMAL);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    nrt_stream* next = to_nrt_stream(stream);
    c10::Stream old = getStream(stream.device());
    current_streams[nrt_stream_device(next)] = next;
    return old;
  }

  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return to_nrt_stream(stream);
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_or_zero());
  }

  // The element types the runtime has (nrt_dtype); ops on any other dtype
  // take the CPU fallback.
  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    c10::DeviceCapability capability;
    capability.capability_data.capability_bits = 0;
    auto& types = capability.capability_data.supported_scalar_types;
    types.has_Bool = types.has_Byte = types.has_Char = types.has_Short = 1;
    types.has_Int = types.has_Long = 1;
    types.has_Half = types.has_BFloat16 = types.has_Float = types.has_Double = 1;
    return capability;
  }

  // ------------------------------------------------------------ events

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    nrt_stream* target = to_nrt_stream(stream);
    if (*event == nullptr) {
      unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? NRT_EVENT_TIMING : NRT_EVENT_DEFAULT;
      nrt_event* created = nullptr;
      NEURON_CHECK(nrt_event_create(flags, &created));
      *event = created;
    }
    NEURON_CHECK(nrt_event_record(as_event(*event), target));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) {
      NEURON_CHECK(nrt_stream_wait_event(to_nrt_stream(stream), as_event(event)));
    }
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;  // never recorded: complete, as in CUDA
    }
    nrt_status status = nrt_event_query(as_event(event));
    if (status == NRT_ERROR_NOT_READY) {
      return false;
    }
    NEURON_CHECK(status);
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      NEURON_CHECK(nrt_event_synchronize(as_event(event)));
    }
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    float ms = 0.0f;
    NEURON_CHECK(nrt_event_elapsed_ms(as_event(start), as_event(end), &ms));
    return ms;
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    if (event != nullptr) {
      (void)nrt_event_destroy(as_event(event));  // nothing useful to do on failure in a destructor
    }
  }

  // ----------------------------------------------------------- streams

  bool queryStream(const c10::Stream& stream) const override {
    nrt_status status = nrt_stream_query(to_nrt_stream(stream));
    if (status == NRT_ERROR_NOT_READY) {
      return false;
    }
    NEURON_CHECK(status);
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    NEURON_CHECK(nrt_stream_synchronize(to_nrt_stream(stream)));
  }

  void synchronizeDevice(const c10::DeviceIndex device) const override {
    NEURON_CHECK(nrt_device_synchronize(resolve(device)));
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    c10::getDeviceAllocator(kType)->recordStream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace torch_neuronx
