// generator.cpp — NeuronGeneratorImpl and the per-device default generators.
//
// Decisions:
//  - Philox is counter based, so the whole state is two integers (seed,
//    offset); get_state/set_state exchange exactly those 16 bytes, the same
//    size and layout as CUDA's generator state, and a state of any other
//    size is rejected with a message saying what was expected.
//  - Setting a seed restarts the stream (offset 0), as CUDA does.
//  - The offset the outside sees (get_state/set_state, get_offset/set_offset)
//    counts Philox blocks (4 outputs, one counter), not 32-bit outputs as
//    offset_ does inside; offset_ is always a multiple of 4, so the two
//    convert exactly.  Why: DTensor's RNG tracker
//    (torch/distributed/tensor/_random.py) gives the shard of rank r the
//    stream at `offset + r * local_numel` and moves the offset by `numel`
//    after the op, i.e. it assumes one offset unit per element.  Our
//    elementwise random kernels draw element i from block `offset_ / 4 + i`,
//    so in blocks that assumption holds exactly (a Shard(0) randn equals the
//    unsharded randn of the same seed), while in outputs shards overlapped
//    (rank 1's stream was rank 0's, shifted by local_numel / 4 elements).
//  - Each device has one default generator, created on first use and seeded
//    with PyTorch's default seed, so torch.neuron.initial_seed() matches
//    torch.cuda.initial_seed() on a fresh process.
#include "generator.h"

#include <array>
#include <cstring>
#include <limits>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/util/CallOnce.h>

#include "neuron_stream.h"

namespace torch_neuronx {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGeneratorImpl::current_seed() const {
  return seed_;
}

uint64_t NeuronGeneratorImpl::seed() {
  uint64_t random = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(random);
  return random;
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) {
  offset_ = offset * 4;  // blocks to outputs (wraps like any counter)
}

uint64_t NeuronGeneratorImpl::get_offset() const {
  return offset_ / 4;  // exact: offset_ is a multiple of 4
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  at::Tensor state = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, at::kByte,
                                           std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  uint64_t words[2] = {seed_, get_offset()};
  std::memcpy(state.data_ptr(), words, kStateBytes);
  return state.getIntrusivePtr();
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  auto bytes = new_state.numel();
  TORCH_CHECK(bytes == static_cast<int64_t>(kStateBytes), "RNG state is wrong size: a neuron ",
              "generator state is ", kStateBytes, " bytes (seed and offset, uint64 each), got ",
              bytes);
  uint64_t words[2];
  std::memcpy(words, new_state.data(), kStateBytes);
  seed_ = words[0];
  set_offset(words[1]);
}

PhiloxState NeuronGeneratorImpl::reserve(uint64_t count) {
  constexpr uint64_t kBlock = 4;  // Philox4x32 yields four 32-bit outputs per counter
  TORCH_CHECK(count <= std::numeric_limits<uint64_t>::max() - (kBlock - 1),
              "neuron generator: cannot reserve ", count, " random values");
  PhiloxState state{seed_, offset_};
  offset_ += (count + kBlock - 1) / kBlock * kBlock;  // wraps like any counter
  return state;
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* copy = new NeuronGeneratorImpl(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& get_default_generator(c10::DeviceIndex device) {
  static std::array<c10::once_flag, NRT_MAX_DEVICES> created;
  static std::array<at::Generator, NRT_MAX_DEVICES> generators;
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  c10::call_once(created[device], [device] {
    generators[device] = at::make_generator<NeuronGeneratorImpl>(device);
  });
  return generators[device];
}

PhiloxState philox_reserve(const std::optional<at::Generator>& gen, c10::DeviceIndex device,
                           uint64_t count) {
  auto* impl = at::get_generator_or_default<NeuronGeneratorImpl>(gen, get_default_generator(device));
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return impl->reserve(count);
}

}  // namespace torch_neuronx
