// ops_equal.cpp — torch.equal: the device-specific op every backend writes
// (cpu_equal, cuda_equal).  Like cuda_equal it is eq + all on the device and
// one host read of the answer; its early answers (different sizes -> false)
// are the CPU's, and different dtypes compare by value as on the CPU.
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>
#include <torch/library.h>

#include "fallback.h"
#include "launch.h"

namespace torch_neuronx {
namespace {

bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, but "
              "found at least two devices, ", self.device(), " and ", other.device(), "!");
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(other.scalar_type())) {
    return run_on_cpu("aten::equal", "", {self, other}).toBool();
  }
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("equal", TORCH_FN(equal)); }

}  // namespace torch_neuronx
