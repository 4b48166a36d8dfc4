// generator.h — the neuron random generator (Philox4x32-10, counter based).
//
// State is (seed, offset): a kernel that draws random numbers takes a
// PhiloxState and uses Philox4x32-10 keyed by `seed`, with counter
// `offset / 4 + i` for its i-th block of four 32-bit outputs.  Results depend
// only on (seed, offset, element index), never on thread count, like CUDA's
// philox_cuda_state.
#pragma once
#include <cstdint>
#include <optional>

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_neuronx {

struct PhiloxState {
  uint64_t seed;
  uint64_t offset;  // in 32-bit outputs; always a multiple of 4 for a launch
};

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device,
                               uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  // The offset seen outside is in Philox blocks (4 outputs): see generator.cpp.
  // CPU uint8 tensor of kStateBytes: seed then offset, native-endian uint64.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  void set_state(const c10::TensorImpl& new_state) override;

  // Hands out `count` 32-bit outputs (rounded up to whole Philox blocks) and
  // moves the offset past them.  The caller holds mutex_.
  PhiloxState reserve(uint64_t count);

  static constexpr size_t kStateBytes = 2 * sizeof(uint64_t);
  static c10::DeviceType device_type() {
    return c10::DeviceType::PrivateUse1;
  }

 private:
  NeuronGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The default generator of a device (-1: the current device).
const at::Generator& get_default_generator(c10::DeviceIndex device = -1);

// For a kernel launcher: `gen` if given (it must be a neuron generator), else
// the default generator of `device`; takes its lock and reserves `count`
// 32-bit outputs.
PhiloxState philox_reserve(const std::optional<at::Generator>& gen, c10::DeviceIndex device,
                           uint64_t count);

}  // namespace torch_neuronx
