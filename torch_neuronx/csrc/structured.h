// structured.h — ATen's own structured kernels (meta + impl) run on neuron.
//
// Most ATen ops are "structured": a meta function does every check, the
// type promotion and the output's shape and strides (through set_output_*),
// and an impl calls a DispatchStub (exp_stub, sum_stub, gather_stub, ...)
// keyed by the device type.  For each backend ATen generates a small class
// per op that supplies the outputs (RegisterCPU.cpp); the templates here are
// that class for PrivateUse1, written once.  So a neuron op runs exactly
// ATen's checks and semantics (error messages included), and its math
// arrives in our stub function (REGISTER_PRIVATEUSE1_DISPATCH) as a built
// TensorIterator or plain tensors, which the stub launches as a task.
//
// Decisions:
//  - Outputs are allocated with at::empty/empty_strided on the options the
//    meta function gives (the neuron device), under a device guard, as the
//    CUDA wrapper does.
//  - out= and in-place variants resize/check like the generated code
//    (at::native::resize_output, "Bad in-place call" checks) and use a proxy
//    output when the meta function demands strides the given out lacks,
//    copying back afterwards.
//  - A tensor argument of a dtype the device lacks (complex, ...) sends the
//    whole call to the CPU fallback before meta runs: the stubs never see one.
//  - Ops whose meta returns a "precompute" struct (max.dim, cat, index, ...)
//    call meta and impl by hand with these same classes (Functional, Out,
//    Inplace).
#pragma once
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <string>
#include <utility>

#include "fallback.h"
#include "launch.h"

namespace torch_neuronx::structured {

// The structured parent must be told of each output when it is a
// TensorIteratorBase (torchgen's "generate_super").
template <class Op>
void tell_parent(Op& op, int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                 c10::TensorOptions options) {
  if constexpr (std::is_base_of_v<at::TensorIteratorBase, Op>) {
    op.Op::set_output_raw_strided(i, sizes, strides, options);
  }
}

// Every defined tensor among the arguments has a dtype the device computes in.
inline bool native_arg(const at::Tensor& t) { return !t.defined() || is_native_dtype(t.scalar_type()); }
inline bool native_arg(const std::optional<at::Tensor>& t) { return !t || native_arg(*t); }
inline bool native_arg(const at::ITensorListRef& ts) {
  for (const at::Tensor& t : ts) {
    if (!native_arg(t)) return false;
  }
  return true;
}
template <class T>
bool native_arg(const T&) { return true; }
template <class... Args>
bool all_native(const Args&... args) { return (native_arg(args) && ...); }

// ---- the three output policies -------------------------------------------

template <class Op, size_t N>
struct Functional final : Op {
  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    create(i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    create(i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return outputs_[i]; }
  const at::Tensor& output(int64_t i) { return outputs_[i]; }

  std::array<at::Tensor, N> outputs_;
  c10::OptionalDeviceGuard guard_;

 private:
  void create(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
              c10::TensorOptions options) {
    auto current = guard_.current_device();
    if (current.has_value()) {
      TORCH_INTERNAL_ASSERT(*current == options.device(),
                            "structured kernels don't support multi-device outputs");
    } else {
      guard_.reset_device(options.device());
    }
    outputs_[i] = strides.empty() ? at::empty(sizes, options) : at::empty_strided(sizes, strides, options);
    tell_parent<Op>(*this, i, sizes, strides, options);
  }
};

// Out (given tensors, resized) and Inplace (self, checked) share the proxy
// logic: when meta asks for strides the given tensor lacks, the impl writes
// a fresh tensor that is copied into the given one afterwards.
template <class Op, size_t N, bool InPlace>
struct Given final : Op {
  template <class... T>
  explicit Given(T&... outs) : outputs_{std::ref(outs)...} {}

  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          c10::TensorOptions options) override {
    prepare(i, sizes, strides, options);
    const at::Tensor& out = outputs_[i].get();
    if (!strides.empty() && out.strides() != strides) {
      proxy_outputs_[i] = at::empty_strided(sizes, strides, options);
    }
    tell_parent<Op>(*this, i, sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options) override {
    prepare(i, sizes, strides, options);
    tell_parent<Op>(*this, i, sizes, strides, options);
  }
  const at::Tensor& maybe_get_output(int64_t i) override { return output(i); }
  const at::Tensor& output(int64_t i) {
    return proxy_outputs_[i].has_value() ? *proxy_outputs_[i] : outputs_[i].get();
  }
  void copy_back() {
    for (size_t i = 0; i < N; ++i) {
      if (proxy_outputs_[i].has_value()) outputs_[i].get().copy_(*proxy_outputs_[i]);
    }
  }

  std::array<std::reference_wrapper<at::Tensor>, N> outputs_;
  std::array<std::optional<at::Tensor>, N> proxy_outputs_;
  c10::OptionalDeviceGuard guard_;

 private:
  void prepare(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
               c10::TensorOptions options) {
    const at::Tensor& out = outputs_[i].get();
    if (!guard_.current_device().has_value()) guard_.reset_device(options.device());
    if constexpr (InPlace) {
      TORCH_CHECK(options.dtype() == out.dtype(), "Bad in-place call: input tensor dtype ",
                  out.dtype(), " and output tensor dtype ", options.dtype(), " should match");
      TORCH_CHECK(options.device() == out.device(), "Bad in-place call: input tensor device ",
                  out.device(), " and output tensor device ", options.device(), " should match");
      TORCH_CHECK(sizes == out.sizes(), "Bad in-place call: input tensor size ", out.sizes(),
                  " and output tensor size ", sizes, " should match");
    } else {
      TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ",
                  options.dtype(), ", but got ", out.dtype(), " instead");
      TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ",
                  options.device(), ", but got ", out.device(), " instead");
      if (at::native::resize_output(out, sizes)) {
        if (!strides.empty()) {
          TORCH_INTERNAL_ASSERT(!options.memory_format_opt().has_value());
          out.as_strided_(sizes, strides);
        } else if (options.memory_format_opt().has_value()) {
          out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
        }
      }
    }
  }
};

template <class Op, size_t N>
using Out = Given<Op, N, false>;
template <class Op>
using Inplace = Given<Op, 1, true>;

// ---- registration of ops without precompute -----------------------------
// Structured<Op, Self, Rest...> registers the functional, in-place and out=
// schemas of one structured op group whose meta takes (Self, Rest...):
//   functional: meta(self, rest...);  impl(self, rest..., out)
//   in-place:   the same on `self`;   out=: the same on the given `out`.
// A call with an argument of a dtype the device lacks goes to the CPU
// fallback under the schema's own name.

// "exp.out" -> ("aten::exp", "out")
struct SchemaName {
  std::string name, overload;
  explicit SchemaName(const char* schema);
};

template <class Op, class Self, class... Rest>
struct Structured {
  static at::Tensor functional(Self self, Rest... rest) {
    if (!all_native(self, rest...)) return fallback(0, {self, rest...}).toTensor();
    Functional<Op, 1> op;
    op.meta(self, rest...);
    op.impl(self, rest..., op.output(0));
    return std::move(op.outputs_[0]);
  }
  static at::Tensor& inplace(at::Tensor& self, Rest... rest) {
    if (!all_native(self, rest...)) {
      fallback(1, {self, rest...});
      return self;
    }
    Inplace<Op> op(self);
    op.meta(self, rest...);
    op.impl(self, rest..., op.output(0));
    op.copy_back();
    return self;
  }
  static at::Tensor& out(Self self, Rest... rest, at::Tensor& result) {
    if (!all_native(self, rest..., result)) {
      fallback(2, {self, rest..., result});
      return result;
    }
    Out<Op, 1> op(result);
    op.meta(self, rest...);
    op.impl(self, rest..., op.output(0));
    op.copy_back();
    return result;
  }

  // Any schema may be nullptr (the group lacks it or it is registered
  // elsewhere).
  static void register_ops(torch::Library& m, const char* functional_schema,
                           const char* inplace_schema, const char* out_schema) {
    const char* schemas[3] = {functional_schema, inplace_schema, out_schema};
    for (int k = 0; k < 3; ++k) {
      if (schemas[k] != nullptr) names()[k].emplace(schemas[k]);
    }
    if (functional_schema) m.impl(functional_schema, TORCH_FN(functional));
    if (inplace_schema) m.impl(inplace_schema, TORCH_FN(inplace));
    if (out_schema) m.impl(out_schema, TORCH_FN(out));
  }

 private:
  static std::array<std::optional<SchemaName>, 3>& names() {
    static std::array<std::optional<SchemaName>, 3> n;
    return n;
  }
  static c10::IValue fallback(int kind, torch::jit::Stack args) {
    const SchemaName& s = *names()[kind];
    return run_on_cpu(s.name.c_str(), s.overload.c_str(), std::move(args));
  }
};

// ---- shared CPU/CUDA functions, guarded ----------------------------------
// Non-structured ops whose CPU and CUDA kernels are one at::native function
// (which reaches our stubs) are registered as is through Shared<Fn>: a call
// with a tensor of a dtype the device lacks runs on the CPU instead, under
// the schema named at registration.  Out/in-place functions return their one
// non-const Tensor& argument.
template <auto Fn>
struct Shared;
template <class R, class... A, R (*Fn)(A...)>
struct Shared<Fn> {
  static R call(A... a) {
    if (all_native(a...)) return Fn(a...);
    c10::IValue r = run_on_cpu(name()->name.c_str(), name()->overload.c_str(), {a...});
    if constexpr (std::is_same_v<R, at::Tensor>) {
      return r.toTensor();
    } else {
      at::Tensor* target = nullptr;
      ([&](auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, at::Tensor> &&
                      !std::is_const_v<std::remove_reference_t<decltype(x)>>) {
          target = &x;
        }
      }(a), ...);
      return *target;
    }
  }
  static std::optional<SchemaName>& name() {
    static std::optional<SchemaName> n;
    return n;
  }
  static void register_op(torch::Library& m, const char* schema) {
    name().emplace(schema);
    m.impl(schema, TORCH_FN(call));
  }
};

}  // namespace torch_neuronx::structured

// Stubs: a DispatchStub's PrivateUse1 slot is set with
//   namespace at::native { REGISTER_PRIVATEUSE1_DISPATCH(exp_stub, &torch_neuronx::exp_kernel); }
// (the macro must be expanded inside at::native, where the stub lives).
