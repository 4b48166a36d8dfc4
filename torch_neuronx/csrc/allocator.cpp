// allocator.cpp — device memory and pinned host memory for PyTorch.
//
// Decisions:
//  - The device allocator is a c10::DeviceAllocator (not a bare
//    c10::Allocator) because that is the interface torch.accelerator.memory_*
//    and torch.accelerator.empty_cache talk to; torch.neuron's memory API is
//    a thin layer over those, so there is one path for the numbers.
//  - Caching, size classes and stream-ordered reuse live in the runtime
//    (nrt_mem_*).  This file only picks the stream (the current stream of the
//    current device, as CUDA does), frees through the DataPtr deleter, and
//    translates statistics.
//  - aten::record_stream is registered here: it only forwards to
//    recordStream.
//  - Pinned host memory reuses ATen's CachingHostAllocatorImpl, like CUDA:
//    a pinned block freed while an asynchronous copy still reads it is held
//    back until the events recorded for it (record_event) complete.
#include <cstring>

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include "neuron_check.h"
#include "neuron_stream.h"

namespace torch_neuronx {
namespace {

int device_count() {
  int count = 0;
  NEURON_CHECK(nrt_device_count(&count));
  return count;
}

void free_device_block(void* ptr) {
  // Runs inside destructors, so it must not throw; it can only fail for a
  // pointer the runtime did not hand out, which this deleter never sees.
  (void)nrt_mem_free(ptr);
}

void set_stat(c10::CachingAllocator::StatArray& array, uint64_t current, uint64_t peak,
              uint64_t allocated = 0, uint64_t freed = 0) {
  // The runtime has one pool, so everything is reported under "all".
  auto& stat = array[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  stat.current = static_cast<int64_t>(current);
  stat.peak = static_cast<int64_t>(peak);
  stat.allocated = static_cast<int64_t>(allocated);
  stat.freed = static_cast<int64_t>(freed);
}

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    void* ptr = nullptr;
    NEURON_CHECK(nrt_mem_alloc(current_stream(device), nbytes, &ptr));
    return {ptr, ptr, &free_device_block, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_device_block;
  }

  // Ordered on the current stream like every other device operation.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    NEURON_CHECK(nrt_memcpy_async(current_stream(), dest, src, count));
  }

  bool initialized() override {
    return true;  // the runtime initialises itself on first use
  }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    for (int device = 0, n = device_count(); device < n; ++device) {
      NEURON_CHECK(nrt_mem_empty_cache(device));
    }
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get() != nullptr) {
      NEURON_CHECK(nrt_mem_record_stream(ptr.get(), to_nrt_stream(stream)));
    }
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    nrt_mem_stats s{};
    NEURON_CHECK(nrt_mem_stats_get(device, &s));
    c10::CachingDeviceAllocator::DeviceStats out;
    set_stat(out.allocated_bytes, s.allocated_bytes, s.allocated_bytes_peak,
             s.allocated_bytes_total, s.freed_bytes_total);
    set_stat(out.reserved_bytes, s.reserved_bytes, s.reserved_bytes_peak);
    set_stat(out.active_bytes, s.active_bytes, s.active_bytes_peak);
    set_stat(out.inactive_split_bytes, s.inactive_split_bytes, s.inactive_split_bytes);
    set_stat(out.requested_bytes, s.requested_bytes, s.requested_bytes_peak);
    set_stat(out.allocation, s.allocation_current, s.allocation_peak, s.alloc_count,
             s.free_count);
    set_stat(out.segment, s.segment_count, s.segment_peak, s.segment_alloc_count,
             s.segment_free_count);
    out.num_alloc_retries = static_cast<int64_t>(s.retry_count);
    out.num_ooms = static_cast<int64_t>(s.oom_count);
    out.num_device_alloc = static_cast<int64_t>(s.segment_alloc_count);
    out.num_device_free = static_cast<int64_t>(s.segment_free_count);
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    NEURON_CHECK(nrt_mem_stats_reset_accumulated(device));
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    NEURON_CHECK(nrt_mem_stats_reset_peak(device));
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    size_t free_bytes = 0, total_bytes = 0;
    NEURON_CHECK(nrt_mem_info(device, &free_bytes, &total_bytes));
    return {free_bytes, total_bytes};
  }
};

NeuronDeviceAllocator device_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &device_allocator)

// Tensor.record_stream(s) is the allocator's business (CUDA's
// record_stream_cuda does the same), so its kernel lives here.
void record_stream(at::Tensor& self, c10::Stream stream) {
  device_allocator.recordStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", &record_stream);
}

// ------------------------------------------------------------ pinned host

// An event that owns its runtime handle (the caching impl moves them around).
struct PinnedUseEvent {
  explicit PinnedUseEvent(nrt_event* e) : event(e) {}
  PinnedUseEvent(PinnedUseEvent&& other) noexcept : event(other.event) {
    other.event = nullptr;
  }
  PinnedUseEvent& operator=(PinnedUseEvent&& other) noexcept {
    std::swap(event, other.event);
    return *this;
  }
  PinnedUseEvent(const PinnedUseEvent&) = delete;
  PinnedUseEvent& operator=(const PinnedUseEvent&) = delete;
  ~PinnedUseEvent() {
    if (event != nullptr) {
      (void)nrt_event_destroy(event);
    }
  }
  nrt_event* event;
};

struct PinnedHostAllocatorImpl final
    : at::CachingHostAllocatorImpl<c10::Stream, PinnedUseEvent> {
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);  // both sides are host memory
  }

 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    NEURON_CHECK(nrt_host_alloc(size, ptr));
  }

  void free_block(at::HostBlock<c10::Stream>* block) override {
    (void)nrt_host_free(block->ptr_);
  }

  void record_stream(std::optional<std::vector<PinnedUseEvent>>& events,
                     c10::Stream stream) override {
    nrt_event* event = nullptr;
    NEURON_CHECK(nrt_event_create(NRT_EVENT_DEFAULT, &event));
    PinnedUseEvent owned(event);
    NEURON_CHECK(nrt_event_record(event, to_nrt_stream(stream)));
    events->push_back(std::move(owned));
  }

  bool query_event(PinnedUseEvent& event) override {
    nrt_status status = nrt_event_query(event.event);
    if (status == NRT_ERROR_NOT_READY) {
      return false;
    }
    NEURON_CHECK(status);
    return true;
  }

  c10::Stream get_current_stream() const override {
    return to_c10_stream(current_stream());
  }

  bool stream_is_capturing(c10::Stream /*stream*/) const override {
    return false;  // no graph capture on neuron
  }
};

DECLARE_HOST_ALLOCATOR(PinnedHostAllocator, PinnedHostAllocatorImpl, free_pinned_block,
                       pinned_host_allocator)
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &pinned_host_allocator)

}  // namespace
}  // namespace torch_neuronx
