// ops_binary.cpp — add, sub, mul, div (.Tensor, in-place _.Tensor, .out).
//
// One table lists the ops and the kernel op each maps to; one adapter does
// the work for all of them, and three thin templates give each schema
// (functional, in-place, out=) its C++ signature.
//
// The adapter lets ATen's TensorIterator decide shapes, broadcasting, type
// promotion, the output's allocation/resize and the overlap checks
// (binary_op, or binary_float_op for true division, which promotes integer
// inputs to float).  The kernel takes mixed dtypes, so inputs are never cast;
// the compute dtype is the iterator's common dtype (the kernel does 16-bit
// float math in float32 and rounds once, as ATen's CPU does).  A 0-dim CPU tensor (a Python number, or torch.tensor(2.)) is
// accepted as a scalar, as cuda does: it becomes a 0-dim device tensor by a
// FILL launch (no host sync), keeping its wrapped-number flag so that type
// promotion is unchanged.  Other CPU tensors get ATen's device error.
//
// Fast path: same shape, same floating dtype, both contiguous on one device
// (the common `a + b`) skips TensorIterator: one allocation, one launch.
// .Scalar overloads are CompositeExplicitAutograd in ATen (they call .Tensor
// with a wrapped number) and need no kernel here.
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <torch/library.h>

#include <utility>

#include "fallback.h"
#include "launch.h"
#include "ops.h"

namespace torch_neuronx {
namespace {

struct BinaryOp {
  const char* aten;      // "aten::add"
  nk_binary_op op;
  bool has_alpha;        // add/sub take `alpha`
  bool true_division;    // integer inputs compute in float
};

constexpr BinaryOp kBinaryOps[] = {
    {"aten::add", NK_BINARY_ADD, true, false},
    {"aten::sub", NK_BINARY_SUB, true, false},
    {"aten::mul", NK_BINARY_MUL, false, false},
    {"aten::div", NK_BINARY_DIV, false, true},
};

// A 0-dim CPU tensor as a 0-dim tensor on `device`; anything else as is.
at::Tensor scalar_to_device(const at::Tensor& t, c10::Device device) {
  if (!t.device().is_cpu() || t.dim() != 0 || !device.is_privateuseone()) return t;
  at::Tensor d = empty_neuron({}, t.scalar_type(), device);
  fill_scalar(d, t.item());
  d.unsafeGetTensorImpl()->set_wrapped_number(t.unsafeGetTensorImpl()->is_wrapped_number());
  return d;
}

c10::Device neuron_device_of(const at::TensorBase& out, const at::Tensor& a, const at::Tensor& b) {
  if (out.defined() && out.device().is_privateuseone()) return out.device();
  return a.device().is_privateuseone() ? a.device() : b.device();
}

void set_params(Task& task, const BinaryOp& e, c10::ScalarType common, const c10::Scalar& alpha) {
  auto* p = task.params<nk_binary_params>();
  p->op = e.op;
  p->compute = native_dtype(common);
  p->alpha = scalar_for_compute(alpha, common);
}

// out = op(a, b); out may be undefined (allocated here) or self (in-place).
// False when the device cannot run it: the caller falls back to the CPU.
bool binary(const BinaryOp& e, const at::Tensor& self, const at::Tensor& other,
            const c10::Scalar& alpha, at::TensorBase& out) {
  if (e.op == NK_BINARY_SUB) at::native::sub_check(self, other);
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(other.scalar_type()) ||
      (out.defined() && !is_native_dtype(out.scalar_type())) || alpha.isComplex()) {
    return false;
  }
  const c10::Device device = neuron_device_of(out, self, other);
  const at::Tensor a = scalar_to_device(self, device);
  const at::Tensor b = scalar_to_device(other, device);
  auto iter = e.true_division ? at::TensorIterator::binary_float_op(out, a, b)
                              : at::TensorIterator::binary_op(out, a, b);
  if (e.has_alpha) at::native::alpha_check(iter.common_dtype(), alpha);
  out = iter.output();
  if (iter.numel() == 0) return true;
  Task task(NK_KERNEL_BINARY, e.aten, 3);
  for (int i = 0; i < 3; ++i) {
    if (!describe(iter, i, task.operand(i))) return false;
  }
  set_params(task, e, iter.common_dtype(), alpha);
  launch(iter.device(0).index(), task);
  return true;
}

// The fast path's condition: nothing for TensorIterator to decide.
bool same_dense_float(const at::Tensor& a, const at::Tensor& b) {
  const auto dtype = a.scalar_type();
  return dtype == b.scalar_type() && c10::isFloatingType(dtype) && is_native_dtype(dtype) &&
         a.is_contiguous() && b.is_contiguous() && a.sizes().equals(b.sizes()) &&
         a.device() == b.device();
}

void launch_fast(const BinaryOp& e, const at::Tensor& out, const at::Tensor& a,
                 const at::Tensor& b, const c10::Scalar& alpha) {
  const auto dtype = a.scalar_type();
  if (e.has_alpha) at::native::alpha_check(dtype, alpha);
  if (a.numel() == 0) return;
  const nrt_dtype d = native_dtype(dtype);
  Task task(NK_KERNEL_BINARY, e.aten, 3);
  describe_flat(out, d, task.operand(0));
  describe_flat(a, d, task.operand(1));
  describe_flat(b, d, task.operand(2));
  set_params(task, e, dtype, alpha);
  launch(a.device().index(), task);
}

torch::jit::Stack cpu_args(const BinaryOp& e, torch::jit::Stack args, const c10::Scalar& alpha) {
  if (e.has_alpha) args.insert(args.begin() + 2, alpha);
  return args;
}

template <size_t I>
at::Tensor functional(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  constexpr const BinaryOp& e = kBinaryOps[I];
  if (same_dense_float(self, other)) {
    at::Tensor out = empty_neuron(self.sizes(), self.scalar_type(), self.device());
    launch_fast(e, out, self, other, alpha);
    return out;
  }
  at::TensorBase out;
  if (binary(e, self, other, alpha, out)) return at::Tensor(std::move(out));
  return run_on_cpu(e.aten, "Tensor", cpu_args(e, {self, other}, alpha)).toTensor();
}

template <size_t I>
at::Tensor& inplace(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  constexpr const BinaryOp& e = kBinaryOps[I];
  // Full overlap (a += a) is fine; partial overlap is TensorIterator's error.
  if (same_dense_float(self, other) && (!self.is_alias_of(other) || self.is_same(other))) {
    launch_fast(e, self, self, other, alpha);
    return self;
  }
  at::TensorBase out = self;
  if (!binary(e, self, other, alpha, out)) {
    run_on_cpu((std::string(e.aten) + "_").c_str(), "Tensor", cpu_args(e, {self, other}, alpha));
  }
  return self;
}

template <size_t I>
at::Tensor& out_variant(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                        at::Tensor& out) {
  constexpr const BinaryOp& e = kBinaryOps[I];
  at::TensorBase result = out;
  if (!binary(e, self, other, alpha, result)) {
    run_on_cpu(e.aten, "out", cpu_args(e, {self, other, out}, alpha));
  }
  return out;
}

// The schemas of mul and div have no alpha.
template <size_t I>
at::Tensor functional_no_alpha(const at::Tensor& self, const at::Tensor& other) {
  return functional<I>(self, other, 1);
}
template <size_t I>
at::Tensor& inplace_no_alpha(at::Tensor& self, const at::Tensor& other) {
  return inplace<I>(self, other, 1);
}
template <size_t I>
at::Tensor& out_no_alpha(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return out_variant<I>(self, other, 1, out);
}

template <size_t I>
void register_op(torch::Library& m) {
  constexpr const BinaryOp& e = kBinaryOps[I];
  const std::string name = std::string(e.aten).substr(6);  // drop "aten::"
  if constexpr (e.has_alpha) {
    m.impl((name + ".Tensor").c_str(), TORCH_FN(functional<I>));
    m.impl((name + "_.Tensor").c_str(), TORCH_FN(inplace<I>));
    m.impl((name + ".out").c_str(), TORCH_FN(out_variant<I>));
  } else {
    m.impl((name + ".Tensor").c_str(), TORCH_FN(functional_no_alpha<I>));
    m.impl((name + "_.Tensor").c_str(), TORCH_FN(inplace_no_alpha<I>));
    m.impl((name + ".out").c_str(), TORCH_FN(out_no_alpha<I>));
  }
}

template <size_t... I>
void register_all(torch::Library& m, std::index_sequence<I...>) {
  (register_op<I>(m), ...);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_all(m, std::make_index_sequence<std::size(kBinaryOps)>());
}

}  // namespace torch_neuronx
