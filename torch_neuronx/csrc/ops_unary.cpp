// ops_unary.cpp — the unary math and activation ops and the backward ops
// autograd calls for them, on NK_KERNEL_UNARY / NK_KERNEL_UNARY_BACKWARD.
//
// Three kinds of registration, all from the tables below:
//  - ATen's structured ops (exp, sigmoid, elu, softplus_backward, ...):
//    structured::Structured runs ATen's meta and impl; the impl calls a
//    DispatchStub whose PrivateUse1 slot is one of the stub functions here.
//    gelu/gelu_backward have device-specific impls in ATen (the CPU one
//    calls the CPU kernel by name), so theirs is written here on ATen's
//    meta class.
//  - ops whose CPU and CUDA kernels share one at::native function that
//    calls a stub (abs.out, logit, nan_to_num.out, hardswish, mish_backward,
//    hardtanh_backward, ...): that function is registered, guarded so that
//    a dtype the device lacks goes to the CPU fallback.
//  - relu, hardtanh.out, isnan, isinf, isfinite: ATen builds them from
//    clamp/comparison ops; here each is one launch of its own.
//    log_sigmoid_forward/backward are device-specific in ATen: ours take
//    CUDA's form (an empty buffer, the backward recomputes from x).
// Every stub does the same: check the dtype the op computes in against
// what ATen's CPU kernel supports (else ATen's "not implemented" error),
// describe the iterator's operands and launch one task with the op and up
// to three scalar parameters.
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/div.h>
#include <ATen/ops/full.h>
#include <ATen/ops/i0.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/bitwise_not_native.h>
#include <ATen/ops/ceil_native.h>
#include <ATen/ops/elu_backward_native.h>
#include <ATen/ops/elu_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/gelu_backward_native.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/hardsigmoid_backward_native.h>
#include <ATen/ops/hardsigmoid_native.h>
#include <ATen/ops/hardswish_backward_native.h>
#include <ATen/ops/hardswish_native.h>
#include <ATen/ops/hardtanh_backward_native.h>
#include <ATen/ops/hardtanh_native.h>
#include <ATen/ops/isneginf_native.h>
#include <ATen/ops/isposinf_native.h>
#include <ATen/ops/leaky_relu_backward_native.h>
#include <ATen/ops/leaky_relu_native.h>
#include <ATen/ops/hardshrink_backward_native.h>
#include <ATen/ops/hardshrink_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/logit_backward_native.h>
#include <ATen/ops/logit_native.h>
#include <ATen/ops/mish_backward_native.h>
#include <ATen/ops/mish_native.h>
#include <ATen/ops/nan_to_num_native.h>
#include <ATen/ops/polygamma_native.h>
#include <ATen/ops/round_native.h>
#include <ATen/ops/sinc_native.h>
#include <ATen/ops/softshrink_backward_native.h>
#include <ATen/ops/softshrink_native.h>
#include <ATen/ops/sigmoid_backward_native.h>
#include <ATen/ops/signbit_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/softplus_backward_native.h>
#include <ATen/ops/softplus_native.h>
#include <ATen/ops/tanh_backward_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/threshold_native.h>
#include <ATen/NativeFunctions.h>
#include <c10/util/Half.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <limits>
#include <optional>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

// The dtypes ATen's CPU kernel of an op accepts (the dtype it computes in).
enum class Support { kFloating, kFloat, kNumber, kAll, kIntegral, kAny };

bool supported(Support s, c10::ScalarType t) {
  switch (s) {
    case Support::kFloating: return c10::isFloatingType(t);
    case Support::kFloat: return t == c10::kFloat || t == c10::kDouble;  // no 16-bit CPU kernel
    case Support::kNumber: return t != c10::kBool;
    case Support::kIntegral: return c10::isIntegralType(t, /*includeBool=*/true);
    default: return true;
  }
}

nk_scalar from_double(double v) { return nk_scalar{v, static_cast<int64_t>(v)}; }
nk_scalar param(const c10::Scalar& s, c10::ScalarType compute) {
  return scalar_for_compute(s, compute);
}

// One launch of `kernel` (op `op`) over the iterator's operands.
void launch_unary_task(at::TensorIteratorBase& iter, uint32_t kernel, int32_t op, const char* name,
         Support support, c10::ScalarType compute, std::array<nk_scalar, 3> p = {}) {
  TORCH_CHECK_NOT_IMPLEMENTED(supported(support, compute), "\"", name + 6, "_neuron\" not implemented for '",
                              c10::toString(compute), "'");
  if (iter.numel() == 0) return;
  Task task(kernel, name, iter.ntensors());
  std::vector<at::Tensor> keep;
  TORCH_CHECK(describe_operands(iter, &task.t, &keep), name,
              ": the neuron device cannot describe these operands (dtype or more than ",
              NRT_MAX_DIMS, " dims)");
  auto* prm = task.params<nk_unary_params>();
  prm->op = op;
  prm->compute = native_dtype(compute);
  for (int k = 0; k < 3; ++k) prm->p[k] = p[k];
  launch(iter.device(0).index(), task);
}

void unary(at::TensorIteratorBase& iter, nk_unary_op op, const char* name, Support s,
           std::array<nk_scalar, 3> p = {}) {
  launch_unary_task(iter, NK_KERNEL_UNARY, op, name, s, iter.common_dtype(), p);
}
// Predicates compute on the input's own dtype.
void predicate(at::TensorIteratorBase& iter, nk_unary_op op, const char* name) {
  launch_unary_task(iter, NK_KERNEL_UNARY, op, name, Support::kAny, iter.input_dtype(0));
}
void unary_backward(at::TensorIteratorBase& iter, nk_unary_backward_op op, const char* name,
              Support s = Support::kFloating, std::array<nk_scalar, 3> p = {}) {
  launch_unary_task(iter, NK_KERNEL_UNARY_BACKWARD, op, name, s, iter.common_dtype(), p);
}

}  // namespace

// ---- the plain stubs: X(stub, kernel op, name, support) --------------------
#define NEURON_UNARY_STUBS(X)                                         \
  X(abs_stub, NK_UNARY_ABS, "abs", kNumber)                           \
  X(neg_stub, NK_UNARY_NEG, "neg", kNumber)                           \
  X(sign_stub, NK_UNARY_SIGN, "sign", kAll)                           \
  X(exp_stub, NK_UNARY_EXP, "exp", kFloating)                         \
  X(exp2_stub, NK_UNARY_EXP2, "exp2", kFloating)                      \
  X(expm1_stub, NK_UNARY_EXPM1, "expm1", kFloating)                   \
  X(log_stub, NK_UNARY_LOG, "log", kFloating)                         \
  X(log2_stub, NK_UNARY_LOG2, "log2", kFloating)                      \
  X(log10_stub, NK_UNARY_LOG10, "log10", kFloating)                   \
  X(log1p_stub, NK_UNARY_LOG1P, "log1p", kFloating)                   \
  X(sqrt_stub, NK_UNARY_SQRT, "sqrt", kFloating)                      \
  X(rsqrt_stub, NK_UNARY_RSQRT, "rsqrt", kFloating)                   \
  X(reciprocal_stub, NK_UNARY_RECIPROCAL, "reciprocal", kFloating)    \
  X(sin_stub, NK_UNARY_SIN, "sin", kFloating)                         \
  X(cos_stub, NK_UNARY_COS, "cos", kFloating)                         \
  X(tan_stub, NK_UNARY_TAN, "tan", kFloating)                         \
  X(asin_stub, NK_UNARY_ASIN, "asin", kFloating)                      \
  X(acos_stub, NK_UNARY_ACOS, "acos", kFloating)                      \
  X(atan_stub, NK_UNARY_ATAN, "atan", kFloating)                      \
  X(sinh_stub, NK_UNARY_SINH, "sinh", kFloating)                      \
  X(cosh_stub, NK_UNARY_COSH, "cosh", kFloating)                      \
  X(tanh_stub, NK_UNARY_TANH, "tanh", kFloating)                      \
  X(asinh_stub, NK_UNARY_ASINH, "asinh", kFloating)                   \
  X(acosh_stub, NK_UNARY_ACOSH, "acosh", kFloating)                   \
  X(atanh_stub, NK_UNARY_ATANH, "atanh", kFloating)                   \
  X(sigmoid_stub, NK_UNARY_SIGMOID, "sigmoid", kFloating)             \
  X(erf_stub, NK_UNARY_ERF, "erf", kFloating)                         \
  X(erfc_stub, NK_UNARY_ERFC, "erfc", kFloating)                      \
  X(erfinv_stub, NK_UNARY_ERFINV, "erfinv", kFloating)                \
  X(lgamma_stub, NK_UNARY_LGAMMA, "lgamma", kFloating)                \
  X(digamma_stub, NK_UNARY_DIGAMMA, "digamma", kFloating)             \
  X(floor_stub, NK_UNARY_FLOOR, "floor", kFloating)                   \
  X(ceil_stub, NK_UNARY_CEIL, "ceil", kFloating)                      \
  X(round_stub, NK_UNARY_ROUND, "round", kFloating)                   \
  X(trunc_stub, NK_UNARY_TRUNC, "trunc", kFloating)                   \
  X(frac_stub, NK_UNARY_FRAC, "frac", kFloating)                      \
  X(bitwise_not_stub, NK_UNARY_BITWISE_NOT, "bitwise_not", kIntegral) \
  X(silu_stub, NK_UNARY_SILU, "silu", kFloating)                      \
  X(mish_stub, NK_UNARY_MISH, "mish", kFloating)                      \
  X(hardsigmoid_stub, NK_UNARY_HARDSIGMOID, "hardsigmoid", kFloating) \
  X(sinc_stub, NK_UNARY_SINC, "sinc", kFloating)                      \
  X(i0_stub, NK_UNARY_I0, "i0", kFloating)                                                                                   \
  X(special_i0e_stub, NK_UNARY_I0E, "special_i0e", kFloating)                                                                \
  X(special_i1_stub, NK_UNARY_I1, "special_i1", kFloating)                                                                   \
  X(special_i1e_stub, NK_UNARY_I1E, "special_i1e", kFloating)                                                                \
  X(special_ndtri_stub, NK_UNARY_NDTRI, "special_ndtri", kFloat)                                                             \
  X(special_log_ndtr_stub, NK_UNARY_LOG_NDTR, "special_log_ndtr", kFloat)                                                    \
  X(special_erfcx_stub, NK_UNARY_ERFCX, "special_erfcx", kFloat)                                                             \
  X(special_entr_stub, NK_UNARY_ENTR, "special_entr", kFloating)                                                             \
  X(special_airy_ai_stub, NK_UNARY_AIRY_AI, "special_airy_ai", kFloat)                                                       \
  X(special_bessel_j0_stub, NK_UNARY_BESSEL_J0, "special_bessel_j0", kFloat)                                                 \
  X(special_bessel_j1_stub, NK_UNARY_BESSEL_J1, "special_bessel_j1", kFloat)                                                 \
  X(special_bessel_y0_stub, NK_UNARY_BESSEL_Y0, "special_bessel_y0", kFloat)                                                 \
  X(special_bessel_y1_stub, NK_UNARY_BESSEL_Y1, "special_bessel_y1", kFloat)                                                 \
  X(special_modified_bessel_i0_stub, NK_UNARY_MODIFIED_BESSEL_I0, "special_modified_bessel_i0", kFloat)                      \
  X(special_modified_bessel_i1_stub, NK_UNARY_MODIFIED_BESSEL_I1, "special_modified_bessel_i1", kFloat)                      \
  X(special_modified_bessel_k0_stub, NK_UNARY_MODIFIED_BESSEL_K0, "special_modified_bessel_k0", kFloat)                      \
  X(special_modified_bessel_k1_stub, NK_UNARY_MODIFIED_BESSEL_K1, "special_modified_bessel_k1", kFloat)                      \
  X(special_scaled_modified_bessel_k0_stub, NK_UNARY_SCALED_MODIFIED_BESSEL_K0, "special_scaled_modified_bessel_k0", kFloat) \
  X(special_scaled_modified_bessel_k1_stub, NK_UNARY_SCALED_MODIFIED_BESSEL_K1, "special_scaled_modified_bessel_k1", kFloat) \
  X(special_spherical_bessel_j0_stub, NK_UNARY_SPHERICAL_BESSEL_J0, "special_spherical_bessel_j0", kFloat)

#define NEURON_PREDICATE_STUBS(X)                       \
  X(signbit_stub, NK_UNARY_SIGNBIT, "signbit")          \
  X(isposinf_stub, NK_UNARY_ISPOSINF, "isposinf")       \
  X(isneginf_stub, NK_UNARY_ISNEGINF, "isneginf")       \
  X(logical_not_stub, NK_UNARY_LOGICAL_NOT, "logical_not")

// X(stub, kernel op, name): backward ops without parameters
#define NEURON_BACKWARD_STUBS(X)                                              \
  X(sigmoid_backward_stub, NK_UNARY_BW_SIGMOID, "sigmoid_backward")           \
  X(tanh_backward_stub, NK_UNARY_BW_TANH, "tanh_backward")                    \
  X(silu_backward_stub, NK_UNARY_BW_SILU, "silu_backward")                    \
  X(hardsigmoid_backward_stub, NK_UNARY_BW_HARDSIGMOID, "hardsigmoid_backward")

namespace stubs {
#define NEURON_DEFINE_UNARY(stub, op, name, support) \
  void stub(at::TensorIteratorBase& iter) { unary(iter, op, "aten::" name, Support::support); }
NEURON_UNARY_STUBS(NEURON_DEFINE_UNARY)
#undef NEURON_DEFINE_UNARY
#define NEURON_DEFINE_PREDICATE(stub, op, name) \
  void stub(at::TensorIteratorBase& iter) { predicate(iter, op, "aten::" name); }
NEURON_PREDICATE_STUBS(NEURON_DEFINE_PREDICATE)
#undef NEURON_DEFINE_PREDICATE
#define NEURON_DEFINE_BACKWARD(stub, op, name) \
  void stub(at::TensorIteratorBase& iter) { unary_backward(iter, op, "aten::" name); }
NEURON_BACKWARD_STUBS(NEURON_DEFINE_BACKWARD)
#undef NEURON_DEFINE_BACKWARD

// ---- stubs with their own signatures -----------------------------------------
void hardswish_stub(at::TensorIterator& iter) {
  unary(iter, NK_UNARY_HARDSWISH, "aten::hardswish", Support::kFloating);
}
void hardswish_backward_stub(at::TensorIterator& iter) {
  unary_backward(iter, NK_UNARY_BW_HARDSWISH, "aten::hardswish_backward");
}
void mish_backward_stub(at::TensorIterator& iter) {
  unary_backward(iter, NK_UNARY_BW_MISH, "aten::mish_backward");
}
void logit_stub(at::TensorIteratorBase& iter, const c10::Scalar& eps) {
  unary(iter, NK_UNARY_LOGIT, "aten::logit", Support::kFloating, {from_double(eps.toDouble())});
}
void logit_backward_stub(at::TensorIteratorBase& iter, const c10::Scalar& eps) {
  unary_backward(iter, NK_UNARY_BW_LOGIT, "aten::logit_backward", Support::kFloating,
           {from_double(eps.toDouble())});
}
void round_decimals_stub(at::TensorIteratorBase& iter, int64_t decimals) {
  unary(iter, NK_UNARY_ROUND_DECIMALS, "aten::round", Support::kFloating,
        {nk_scalar{static_cast<double>(decimals), decimals}});
}
// ATen's defaults: nan -> 0, +-inf -> the dtype's largest/lowest finite value.
double finite_max(c10::ScalarType t) {
  switch (t) {
    case c10::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::max());
    case c10::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::max());
    case c10::kFloat: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}
void nan_to_num_stub(at::TensorIteratorBase& iter, std::optional<double> nan,
                     std::optional<double> posinf, std::optional<double> neginf) {
  const double big = finite_max(iter.common_dtype());
  unary(iter, NK_UNARY_NAN_TO_NUM, "aten::nan_to_num", Support::kFloating,
        {from_double(nan.value_or(0.0)), from_double(posinf.value_or(big)),
         from_double(neginf.value_or(-big))});
}
void softplus_stub(at::TensorIteratorBase& iter, const c10::Scalar& beta, const c10::Scalar& threshold) {
  const auto t = iter.common_dtype();
  unary(iter, NK_UNARY_SOFTPLUS, "aten::softplus", Support::kFloating, {param(beta, t), param(threshold, t)});
}
void softplus_backward_stub(at::TensorIteratorBase& iter, const c10::Scalar& beta,
                            const c10::Scalar& threshold) {
  const auto t = iter.common_dtype();
  unary_backward(iter, NK_UNARY_BW_SOFTPLUS, "aten::softplus_backward", Support::kFloating,
           {param(beta, t), param(threshold, t)});
}
void elu_stub(at::TensorIteratorBase& iter, const c10::Scalar& alpha, const c10::Scalar& scale,
              const c10::Scalar& input_scale) {
  const auto t = iter.common_dtype();
  unary(iter, NK_UNARY_ELU, "aten::elu", Support::kFloating,
        {param(alpha, t), param(scale, t), param(input_scale, t)});
}
void elu_backward_stub(at::TensorIteratorBase& iter, const c10::Scalar& alpha, const c10::Scalar& scale,
                       const c10::Scalar& input_scale, bool is_result) {
  const auto t = iter.common_dtype();
  unary_backward(iter, is_result ? NK_UNARY_BW_ELU_RESULT : NK_UNARY_BW_ELU, "aten::elu_backward",
           Support::kFloating, {param(alpha, t), param(scale, t), param(input_scale, t)});
}
void leaky_relu_stub(at::TensorIteratorBase& iter, const c10::Scalar& slope) {
  unary(iter, NK_UNARY_LEAKY_RELU, "aten::leaky_relu", Support::kFloating,
        {param(slope, iter.common_dtype())});
}
void leaky_relu_backward_stub(at::TensorIteratorBase& iter, const c10::Scalar& slope) {
  unary_backward(iter, NK_UNARY_BW_LEAKY_RELU, "aten::leaky_relu_backward", Support::kFloating,
           {param(slope, iter.common_dtype())});
}
void hardtanh_backward_stub(at::TensorIterator& iter, const c10::Scalar& min, const c10::Scalar& max) {
  const auto t = iter.common_dtype();
  unary_backward(iter, NK_UNARY_BW_HARDTANH, "aten::hardtanh_backward", Support::kFloating,
           {param(min, t), param(max, t)});
}
// threshold and threshold_backward (relu's backward): x <= threshold ? value : other
void threshold_stub(at::TensorIteratorBase& iter, const c10::Scalar& threshold, const c10::Scalar& value) {
  const auto t = iter.common_dtype();
  if (c10::isIntegralType(t, /*includeBool=*/false)) {
    // ATen converts both to scalar_t with its overflow check
    scalar_for_store(threshold, t);
    scalar_for_store(value, t);
  }
  unary_backward(iter, NK_UNARY_BW_THRESHOLD, "aten::threshold", Support::kNumber,
           {param(threshold, t), param(value, t)});
}
void hardshrink_stub(at::TensorIteratorBase& iter, const c10::Scalar& lambd) {
  // lambda in scalar_t (rounded to float16/bfloat16), as ATen's kernel has it
  unary(iter, NK_UNARY_HARDSHRINK, "aten::hardshrink", Support::kFloating,
        {scalar_for_store(lambd, iter.common_dtype())});
}
void softshrink_stub(at::TensorIteratorBase& iter, const c10::Scalar& lambd) {
  unary(iter, NK_UNARY_SOFTSHRINK, "aten::softshrink", Support::kFloating,
        {param(lambd, iter.common_dtype())});
}
void shrink_backward_stub(at::TensorIteratorBase& iter, const c10::Scalar& lambd) {
  unary_backward(iter, NK_UNARY_BW_SHRINK, "aten::shrink_backward", Support::kFloating,
                 {scalar_for_store(lambd, iter.common_dtype())});
}
void polygamma_stub(at::TensorIteratorBase& iter, int64_t n) {
  unary(iter, NK_UNARY_POLYGAMMA, "aten::polygamma", Support::kFloating,
        {nk_scalar{static_cast<double>(n), n}});
}
}  // namespace stubs

namespace {

// ---- gelu: ATen's meta, our impl ---------------------------------------------
struct GeluImpl : at::meta::structured_gelu {
  void impl(const at::Tensor&, c10::string_view approximate, const at::Tensor&) {
    const bool tanh = at::native::get_gelutype_enum(approximate) == at::native::GeluType::Tanh;
    unary(*this, tanh ? NK_UNARY_GELU_TANH : NK_UNARY_GELU, "aten::gelu", Support::kFloating);
  }
};
struct GeluBackwardImpl : at::meta::structured_gelu_backward {
  void impl(const at::Tensor&, const at::Tensor&, c10::string_view approximate, const at::Tensor&) {
    const bool tanh = at::native::get_gelutype_enum(approximate) == at::native::GeluType::Tanh;
    unary_backward(*this, tanh ? NK_UNARY_BW_GELU_TANH : NK_UNARY_BW_GELU, "aten::gelu_backward");
  }
};

using structured::Shared;

// ---- polygamma: structured, but its int comes before the tensor ---------------
at::Tensor polygamma(int64_t n, const at::Tensor& self) {
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu("aten::polygamma", "", {n, self}).toTensor();
  structured::Functional<at::native::structured_polygamma_out, 1> op;
  op.meta(n, self);
  op.impl(n, self, op.output(0));
  return std::move(op.outputs_[0]);
}

at::Tensor& polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& out) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(out.scalar_type())) {
    run_on_cpu("aten::polygamma", "out", {n, self, out});
    return out;
  }
  structured::Out<at::native::structured_polygamma_out, 1> op(out);
  op.meta(n, self);
  op.impl(n, self, op.output(0));
  op.copy_back();
  return out;
}

// ---- ours: log_sigmoid (cuda's form: no buffer), relu, hardtanh.out, ... ------
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(is_native_dtype(self.scalar_type()), "\"log_sigmoid_forward_neuron\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  at::Tensor result = at::empty_like(self);
  at::Tensor buffer = at::empty({0}, self.options());
  auto iter = at::TensorIteratorConfig().add_output(result).add_const_input(self).build();
  unary(iter, NK_UNARY_LOG_SIGMOID, "aten::log_sigmoid_forward", Support::kFloating);
  return {result, buffer};
}

at::Tensor log_sigmoid_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor&) {
  TORCH_CHECK_NOT_IMPLEMENTED(is_native_dtype(self.scalar_type()) && is_native_dtype(grad_output.scalar_type()),
                              "\"log_sigmoid_backward_neuron\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  at::Tensor grad_input = at::empty_like(grad_output);
  auto iter = at::TensorIteratorConfig()
                  .add_output(grad_input)
                  .add_const_input(grad_output)
                  .add_const_input(self)
                  .build();
  unary_backward(iter, NK_UNARY_BW_LOG_SIGMOID, "aten::log_sigmoid_backward");
  return grad_input;
}

at::Tensor relu(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu("aten::relu", "", {self}).toTensor();
  at::TensorBase out;
  auto iter = at::TensorIterator::unary_op(out, self);
  unary(iter, NK_UNARY_RELU, "aten::relu", Support::kNumber);
  return iter.output();
}

at::Tensor& relu_(at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  if (!is_native_dtype(self.scalar_type())) {
    run_on_cpu("aten::relu_", "", {self});
    return self;
  }
  auto iter = at::TensorIterator::unary_op(self, self);
  unary(iter, NK_UNARY_RELU, "aten::relu", Support::kNumber);
  return self;
}

// ATen's hardtanh_out (the legacy bound handling) with the clamp as one launch.
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max,
                         at::Tensor& result) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(result.scalar_type())) {
    run_on_cpu("aten::hardtanh", "out", {self, min, max, result});
    return result;
  }
  c10::Scalar lo = min, hi = max;
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    const int64_t minval = min.toLong(), maxval = max.toLong();
    TORCH_CHECK(self.dtype() != at::kByte || (minval >= 0 && maxval >= 0),
                "cannot do hardtanh on an unsigned type with negative limits");
    lo = minval;
    hi = maxval;
  }
  auto iter = at::TensorIterator::unary_op(result, self);
  const auto t = iter.common_dtype();
  unary(iter, NK_UNARY_CLAMP, "aten::hardtanh", Support::kNumber, {param(lo, t), param(hi, t)});
  return result;
}

template <nk_unary_op Op>
at::Tensor predicate_op(const at::Tensor& self) {
  static constexpr const char* names[] = {"aten::isnan", "aten::isinf", "aten::isfinite"};
  const char* name = names[Op == NK_UNARY_ISNAN ? 0 : Op == NK_UNARY_ISINF ? 1 : 2];
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu(name, "", {self}).toTensor();
  at::Tensor out = at::empty_like(self, self.options().dtype(at::kBool));
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(self)
                  .build();
  predicate(iter, Op, name);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace at::native;
  using T = const at::Tensor&;
  using S = const c10::Scalar&;
  namespace st = structured;

  // structured unary ops: functional, in-place, out=
#define NEURON_STRUCTURED_UNARY(name) \
  st::Structured<structured_##name##_out, T>::register_ops(m, #name, #name "_", #name ".out");
  NEURON_STRUCTURED_UNARY(neg) NEURON_STRUCTURED_UNARY(sign) NEURON_STRUCTURED_UNARY(sgn)
  NEURON_STRUCTURED_UNARY(exp) NEURON_STRUCTURED_UNARY(exp2) NEURON_STRUCTURED_UNARY(expm1)
  NEURON_STRUCTURED_UNARY(log) NEURON_STRUCTURED_UNARY(log2) NEURON_STRUCTURED_UNARY(log10)
  NEURON_STRUCTURED_UNARY(log1p) NEURON_STRUCTURED_UNARY(sqrt) NEURON_STRUCTURED_UNARY(rsqrt)
  NEURON_STRUCTURED_UNARY(reciprocal) NEURON_STRUCTURED_UNARY(sin) NEURON_STRUCTURED_UNARY(cos)
  NEURON_STRUCTURED_UNARY(tan) NEURON_STRUCTURED_UNARY(asin) NEURON_STRUCTURED_UNARY(acos)
  NEURON_STRUCTURED_UNARY(atan) NEURON_STRUCTURED_UNARY(sinh) NEURON_STRUCTURED_UNARY(cosh)
  NEURON_STRUCTURED_UNARY(tanh) NEURON_STRUCTURED_UNARY(asinh) NEURON_STRUCTURED_UNARY(acosh)
  NEURON_STRUCTURED_UNARY(atanh) NEURON_STRUCTURED_UNARY(sigmoid) NEURON_STRUCTURED_UNARY(erf)
  NEURON_STRUCTURED_UNARY(erfc) NEURON_STRUCTURED_UNARY(erfinv) NEURON_STRUCTURED_UNARY(lgamma)
  NEURON_STRUCTURED_UNARY(digamma) NEURON_STRUCTURED_UNARY(floor) NEURON_STRUCTURED_UNARY(ceil)
  NEURON_STRUCTURED_UNARY(round) NEURON_STRUCTURED_UNARY(trunc) NEURON_STRUCTURED_UNARY(frac)
  NEURON_STRUCTURED_UNARY(bitwise_not) NEURON_STRUCTURED_UNARY(silu) NEURON_STRUCTURED_UNARY(mish)
  NEURON_STRUCTURED_UNARY(hardsigmoid) NEURON_STRUCTURED_UNARY(sinc) NEURON_STRUCTURED_UNARY(i0)
#undef NEURON_STRUCTURED_UNARY
  // the special functions (special.c): functional and out= only
#define NEURON_STRUCTURED_SPECIAL(name) \
  st::Structured<structured_##name##_out, T>::register_ops(m, #name, nullptr, #name ".out");
  NEURON_STRUCTURED_SPECIAL(special_i0e) NEURON_STRUCTURED_SPECIAL(special_i1) NEURON_STRUCTURED_SPECIAL(special_i1e)
  NEURON_STRUCTURED_SPECIAL(special_ndtri) NEURON_STRUCTURED_SPECIAL(special_log_ndtr) NEURON_STRUCTURED_SPECIAL(special_erfcx)
  NEURON_STRUCTURED_SPECIAL(special_entr) NEURON_STRUCTURED_SPECIAL(special_airy_ai) NEURON_STRUCTURED_SPECIAL(special_bessel_j0)
  NEURON_STRUCTURED_SPECIAL(special_bessel_j1) NEURON_STRUCTURED_SPECIAL(special_bessel_y0) NEURON_STRUCTURED_SPECIAL(special_bessel_y1)
  NEURON_STRUCTURED_SPECIAL(special_modified_bessel_i0) NEURON_STRUCTURED_SPECIAL(special_modified_bessel_i1) NEURON_STRUCTURED_SPECIAL(special_modified_bessel_k0)
  NEURON_STRUCTURED_SPECIAL(special_modified_bessel_k1) NEURON_STRUCTURED_SPECIAL(special_scaled_modified_bessel_k0) NEURON_STRUCTURED_SPECIAL(special_scaled_modified_bessel_k1)
  NEURON_STRUCTURED_SPECIAL(special_spherical_bessel_j0)
#undef NEURON_STRUCTURED_SPECIAL
  st::Structured<structured_signbit_out, T>::register_ops(m, "signbit", nullptr, "signbit.out");
  st::Structured<structured_isposinf_out, T>::register_ops(m, "isposinf", nullptr, "isposinf.out");
  st::Structured<structured_isneginf_out, T>::register_ops(m, "isneginf", nullptr, "isneginf.out");
  st::Structured<structured_round_decimals_out, T, int64_t>::register_ops(
      m, "round.decimals", "round_.decimals", "round.decimals_out");
  m.impl("polygamma", TORCH_FN(torch_neuronx::polygamma));
  m.impl("polygamma.out", TORCH_FN(torch_neuronx::polygamma_out));
  st::Structured<structured_hardshrink_out, T, S>::register_ops(m, "hardshrink", nullptr, "hardshrink.out");
  st::Structured<structured_softshrink_out, T, S>::register_ops(m, "softshrink", nullptr, "softshrink.out");
  st::Structured<GeluImpl, T, c10::string_view>::register_ops(m, "gelu", "gelu_", "gelu.out");
  st::Structured<structured_softplus_out, T, S, S>::register_ops(m, "softplus", nullptr, "softplus.out");
  st::Structured<structured_elu_out, T, S, S, S>::register_ops(m, "elu", "elu_", "elu.out");
  st::Structured<structured_leaky_relu_out, T, S>::register_ops(m, "leaky_relu", "leaky_relu_",
                                                                "leaky_relu.out");
  st::Structured<structured_threshold_out, T, S, S>::register_ops(m, "threshold", "threshold_",
                                                                  "threshold.out");

  // structured backward ops: functional and grad_input=
#define NEURON_STRUCTURED_BACKWARD(name, cls, ...) \
  st::Structured<cls, __VA_ARGS__>::register_ops(m, #name, nullptr, #name ".grad_input");
  NEURON_STRUCTURED_BACKWARD(sigmoid_backward, structured_sigmoid_backward_out, T, T)
  NEURON_STRUCTURED_BACKWARD(tanh_backward, structured_tanh_backward_out, T, T)
  NEURON_STRUCTURED_BACKWARD(logit_backward, structured_logit_backward_out, T, T, std::optional<double>)
  NEURON_STRUCTURED_BACKWARD(gelu_backward, GeluBackwardImpl, T, T, c10::string_view)
  NEURON_STRUCTURED_BACKWARD(silu_backward, structured_silu_backward_out, T, T)
  NEURON_STRUCTURED_BACKWARD(softplus_backward, structured_softplus_backward_out, T, T, S, S)
  NEURON_STRUCTURED_BACKWARD(elu_backward, structured_elu_backward_out, T, S, S, S, bool, T)
  NEURON_STRUCTURED_BACKWARD(leaky_relu_backward, structured_leaky_relu_backward_out, T, T, S, bool)
  NEURON_STRUCTURED_BACKWARD(hardsigmoid_backward, structured_hardsigmoid_backward_out, T, T)
  NEURON_STRUCTURED_BACKWARD(threshold_backward, structured_threshold_backward_out, T, T, S)
  NEURON_STRUCTURED_BACKWARD(hardshrink_backward, structured_hardshrink_backward_out, T, T, S)
  NEURON_STRUCTURED_BACKWARD(softshrink_backward, structured_softshrink_backward_out, T, T, S)
#undef NEURON_STRUCTURED_BACKWARD

  // shared CPU/CUDA functions (their stubs are ours)
  Shared<&at::native::abs_out>::register_op(m, "abs.out");
  Shared<&at::native::logical_not_out>::register_op(m, "logical_not.out");
  Shared<&at::native::nan_to_num_out>::register_op(m, "nan_to_num.out");
  Shared<&at::native::logit>::register_op(m, "logit");
  Shared<&at::native::logit_>::register_op(m, "logit_");
  Shared<&at::native::logit_out>::register_op(m, "logit.out");
  Shared<&at::native::hardswish>::register_op(m, "hardswish");
  Shared<&at::native::hardswish_>::register_op(m, "hardswish_");
  Shared<&at::native::hardswish_out>::register_op(m, "hardswish.out");
  Shared<&at::native::hardswish_backward>::register_op(m, "hardswish_backward");
  Shared<&at::native::mish_backward>::register_op(m, "mish_backward");
  Shared<&at::native::hardtanh_backward>::register_op(m, "hardtanh_backward");
  Shared<&at::native::hardtanh_backward_out>::register_op(m, "hardtanh_backward.grad_input");
  Shared<&at::native::hardtanh>::register_op(m, "hardtanh");
  Shared<&at::native::hardtanh_>::register_op(m, "hardtanh_");

  // ours
  m.impl("hardtanh.out", TORCH_FN(torch_neuronx::hardtanh_out));
  m.impl("log_sigmoid_forward", TORCH_FN(torch_neuronx::log_sigmoid_forward));
  m.impl("log_sigmoid_backward", TORCH_FN(torch_neuronx::log_sigmoid_backward));
  m.impl("relu", TORCH_FN(torch_neuronx::relu));
  m.impl("relu_", TORCH_FN(torch_neuronx::relu_));
  m.impl("isnan", TORCH_FN(predicate_op<NK_UNARY_ISNAN>));
  m.impl("isinf", TORCH_FN(predicate_op<NK_UNARY_ISINF>));
  m.impl("isfinite", TORCH_FN(predicate_op<NK_UNARY_ISFINITE>));
}

}  // namespace torch_neuronx

// The stubs' PrivateUse1 slots.
namespace torch_neuronx::stubs {
// kaiser_window_stub: ATen's kaiser_window fills `iter` (output: the window,
// input: arange(window_length)) with
//   i0(beta * sqrt(|1 - ((a - alpha) / alpha)^2|)) / i0(beta),  alpha = (L - 1) / 2,
// in opmath (float for half/bfloat16). Built from native ops, in the same order
// and precision as ATen's CPU kernel, so there is no math here.
static void kaiser_window_stub(at::TensorIteratorBase& iter, const int64_t window_length, const double beta_) {
  const at::Tensor out = iter.output();
  const at::ScalarType op_t = at::toOpMathType(out.scalar_type());
  const at::Tensor a = iter.input().to(op_t);
  const at::Scalar alpha_s((window_length - 1) / 2.0);  // rounded to opmath by the ops, like ATen
  const at::Tensor t = at::div(at::sub(a, alpha_s), alpha_s);
  const at::Tensor w = at::i0(at::mul(at::sqrt(at::abs(at::rsub(at::pow(t, 2.0), 1))), beta_));
  const at::Tensor den = at::i0(at::full({}, beta_, a.options()));
  out.copy_(at::div(w, den));
}
}  // namespace torch_neuronx::stubs

namespace at::native {
#define NEURON_REGISTER_STUB(stub, ...) REGISTER_PRIVATEUSE1_DISPATCH(stub, &torch_neuronx::stubs::stub)
NEURON_UNARY_STUBS(NEURON_REGISTER_STUB)
NEURON_PREDICATE_STUBS(NEURON_REGISTER_STUB)
NEURON_BACKWARD_STUBS(NEURON_REGISTER_STUB)
NEURON_REGISTER_STUB(hardswish_stub)
NEURON_REGISTER_STUB(hardswish_backward_stub)
NEURON_REGISTER_STUB(mish_backward_stub)
NEURON_REGISTER_STUB(logit_stub)
NEURON_REGISTER_STUB(logit_backward_stub)
NEURON_REGISTER_STUB(round_decimals_stub)
NEURON_REGISTER_STUB(nan_to_num_stub)
NEURON_REGISTER_STUB(softplus_stub)
NEURON_REGISTER_STUB(softplus_backward_stub)
NEURON_REGISTER_STUB(elu_stub)
NEURON_REGISTER_STUB(elu_backward_stub)
NEURON_REGISTER_STUB(leaky_relu_stub)
NEURON_REGISTER_STUB(leaky_relu_backward_stub)
NEURON_REGISTER_STUB(hardtanh_backward_stub)
NEURON_REGISTER_STUB(threshold_stub)
NEURON_REGISTER_STUB(hardshrink_stub)
NEURON_REGISTER_STUB(softshrink_stub)
NEURON_REGISTER_STUB(shrink_backward_stub)
NEURON_REGISTER_STUB(polygamma_stub)
NEURON_REGISTER_STUB(kaiser_window_stub)
#undef NEURON_REGISTER_STUB
}  // namespace at::native
