// ops_factory.cpp — fill_, zero_, arange, linspace, eye on neuron.
//
// Each is one kernel launch over the output as it is (the kernels honour
// strides, so a non-contiguous out= needs no temporary).  The shape logic is
// ATen's: compute_arange_size, the out-tensor resize warnings, eye's
// "zero, then fill the diagonal through a strided view".  A dtype the device
// lacks runs on the CPU through the fallback, which also gives ATen's own
// error for dtypes the op does not support at all (arange on bool...).
#include <ATen/native/RangeUtils.h>
#include <torch/library.h>

#include "fallback.h"
#include "launch.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  if (value.device() != self.device()) return fill_scalar(self, value.item());
  // A view of self is cloned first so that filling does not overwrite it.
  self.copy_(self.is_alias_of(value) ? value.clone() : value);
  return self;
}

// arange and linspace write a 1-d sequence of out.numel() values in order.
// An out= whose numel already matches keeps its shape (as in ATen), so a
// contiguous out of any rank is written flat, and any other goes through a
// contiguous temporary, as ATen's CPU kernel does.
void launch_sequence(Task& task, at::Tensor& out) {
  const nrt_dtype dtype = native_dtype(out.scalar_type());
  if (out.dim() == 1 || out.is_contiguous()) {
    describe_flat(out, dtype, task.operand(0));
    if (out.dim() == 1) task.operand(0)->strides[0] = out.stride(0) * out.itemsize();
    launch(out.device().index(), task);
    return;
  }
  at::Tensor flat = empty_neuron({out.numel()}, out.scalar_type(), out.device());
  describe_flat(flat, dtype, task.operand(0));
  launch(out.device().index(), task);
  out.copy_(flat.view(out.sizes()));
}

at::Tensor& zero(at::Tensor& self) { return fill_scalar(self, 0); }

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out) {
  const auto dtype = out.scalar_type();
  if (!is_native_dtype(dtype) || dtype == at::kBool) {
    run_on_cpu("aten::arange", "start_out", {start, end, step, out});
    return out;
  }
  const int64_t size = dtype == at::kLong
                           ? at::native::compute_arange_size<int64_t>(start, end, step)
                           : at::native::compute_arange_size<double>(start, end, step);
  if (out.numel() != size) {
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                 out.numel(), " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will be "
                 "resized to a tensor of shape (", size, ",).");
    }
    out.resize_({size});
  }
  if (size == 0) return out;
  Task task(NK_KERNEL_ARANGE, "aten::arange.start_out", 1);
  auto* p = task.params<nk_arange_params>();
  p->start = scalar_for_compute(start, dtype);
  p->step = scalar_for_compute(step, dtype);
  launch_sequence(task, out);
  return out;
}

at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                         at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  const auto dtype = out.scalar_type();
  if (!is_native_dtype(dtype) || dtype == at::kBool || start.isComplex() || end.isComplex()) {
    run_on_cpu("aten::linspace", "out", {start, end, steps, out});
    return out;
  }
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  if (steps == 1) return fill_scalar(out, start);
  Task task(NK_KERNEL_LINSPACE, "aten::linspace.out", 1);
  auto* p = task.params<nk_linspace_params>();
  p->start = start.to<double>();
  p->end = end.to<double>();
  p->steps = steps;
  launch_sequence(task, out);
  return out;
}

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  out.zero_();
  const int64_t diagonal = std::min(n, m);
  at::Tensor diag = out.as_strided({diagonal}, {out.stride(0) + out.stride(1)});
  diag.fill_(1);
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

}  // namespace

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() == 0) return self;
  Task task(NK_KERNEL_FILL, "aten::fill_", 1);
  if (!describe(self, task.operand(0))) {
    run_on_cpu("aten::fill_", "Scalar", {self, value});
    return self;
  }
  task.params<nk_fill_params>()->value = scalar_for_store(value, self.scalar_type());
  launch(self.device().index(), task);
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("linspace.out", TORCH_FN(linspace_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
}

}  // namespace torch_neuronx
