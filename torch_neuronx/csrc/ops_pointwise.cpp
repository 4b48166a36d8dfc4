// ops_pointwise.cpp — the elementwise ops beyond add/sub/mul/div: pow,
// remainder, fmod, rounding division, maximum/minimum/fmax/fmin, atan2,
// hypot, copysign, xlogy, xlog1py, nextafter, logaddexp(2), heaviside,
// gcd, lcm, comparisons, logical and bitwise ops, shifts, where, clamp,
// lerp, addcmul, addcdiv (and rsub, which calls sub), and the special
// functions of two arguments: igamma(c), zeta and the orthogonal polynomials.
//
// ATen does the work: the ops are structured (meta + impl, run on neuron by
// structured.h) or shared CPU/CUDA functions (floor_divide, logical_*_out,
// where, __lshift__, ...), and each ends in a DispatchStub that receives a
// built TensorIterator.  Our stubs launch NK_KERNEL_POINTWISE on it, so
// broadcasting, type promotion, out=/in-place checks, overlap checks and
// error messages are ATen's own.  The iterator's inputs keep their dtypes
// on neuron (ATen casts only on the CPU); the kernel converts on load to the
// common dtype, as the CPU's casts would.
//
// Three tables: kOps (kernel op -> name and the dtypes ATen's CPU kernel is
// defined for), the stub registrations (stub -> kernel op), and register_ops
// (aten schema -> structured op or shared function).
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Lerp.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/Pow.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/atan2_native.h>
#include <ATen/ops/bitwise_and_native.h>
#include <ATen/ops/bitwise_left_shift_native.h>
#include <ATen/ops/bitwise_or_native.h>
#include <ATen/ops/bitwise_right_shift_native.h>
#include <ATen/ops/bitwise_xor_native.h>
#include <ATen/ops/clamp_max_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/clamp_native.h>
#include <ATen/ops/copysign_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/floor_divide_native.h>
#include <ATen/ops/fmax_native.h>
#include <ATen/ops/fmin_native.h>
#include <ATen/ops/fmod_native.h>
#include <ATen/ops/gcd_native.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/heaviside_native.h>
#include <ATen/ops/hypot_native.h>
#include <ATen/ops/lcm_native.h>
#include <ATen/ops/le_native.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/logical_and_native.h>
#include <ATen/ops/logical_or_native.h>
#include <ATen/ops/logaddexp2_native.h>
#include <ATen/ops/logaddexp_native.h>
#include <ATen/ops/logical_xor_native.h>
#include <ATen/ops/lshift_native.h>
#include <ATen/ops/lt_native.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/minimum_native.h>
#include <ATen/ops/ne_native.h>
#include <ATen/ops/nextafter_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/remainder_native.h>
#include <ATen/ops/rshift_native.h>
#include <ATen/ops/rsub_native.h>
#include <ATen/ops/special_xlog1py_native.h>
#include <ATen/ops/where_native.h>
#include <ATen/ops/xlogy_native.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

// The compute dtypes ATen's CPU kernel of an op dispatches over.
enum Dtypes : unsigned {
  kFloat = 1,     // float32, float64
  kIntegral = 2,  // uint8, int8 ... int64
  kBool = 4,
  kReduced = 8,   // float16, bfloat16
  kFloating = kFloat | kReduced,
  kNumbers = kFloating | kIntegral,
  kBits = kIntegral | kBool,
  kAll = kFloating | kIntegral | kBool,
};

struct PointwiseOp {
  nk_pointwise_op op;
  const char* name;  // the task's name, and the "not implemented" error's
  unsigned dtypes;
};

constexpr PointwiseOp kOps[] = {
    {NK_PW_POW, "pow", kNumbers},
    {NK_PW_REMAINDER, "remainder", kNumbers},
    {NK_PW_FMOD, "fmod", kNumbers},
    {NK_PW_DIV_TRUNC, "div_trunc", kNumbers},
    {NK_PW_DIV_FLOOR, "div_floor", kNumbers},
    {NK_PW_MAXIMUM, "maximum", kAll},
    {NK_PW_MINIMUM, "minimum", kAll},
    {NK_PW_FMAX, "fmax", kAll},
    {NK_PW_FMIN, "fmin", kAll},
    {NK_PW_ATAN2, "atan2", kFloating},
    {NK_PW_HYPOT, "hypot", kFloating},
    {NK_PW_COPYSIGN, "copysign", kFloating},
    {NK_PW_XLOGY, "xlogy", kFloating},
    {NK_PW_NEXTAFTER, "nextafter", kFloating},
    {NK_PW_EQ, "eq", kAll},
    {NK_PW_NE, "ne", kAll},
    {NK_PW_LT, "lt", kAll},
    {NK_PW_LE, "le", kAll},
    {NK_PW_GT, "gt", kAll},
    {NK_PW_GE, "ge", kAll},
    {NK_PW_LOGICAL_AND, "logical_and", kAll},
    {NK_PW_LOGICAL_OR, "logical_or", kAll},
    {NK_PW_LOGICAL_XOR, "logical_xor", kAll},
    {NK_PW_BITWISE_AND, "bitwise_and", kBits},
    {NK_PW_BITWISE_OR, "bitwise_or", kBits},
    {NK_PW_BITWISE_XOR, "bitwise_xor", kBits},
    {NK_PW_LSHIFT, "lshift", kIntegral},
    {NK_PW_RSHIFT, "rshift", kIntegral},
    {NK_PW_LERP_SCALAR, "lerp", kFloating},
    {NK_PW_LOGADDEXP, "logaddexp", kFloating},
    {NK_PW_LOGADDEXP2, "logaddexp2", kFloating},
    {NK_PW_XLOG1PY, "xlog1py", kFloating},
    {NK_PW_HEAVISIDE, "heaviside", kAll},
    {NK_PW_GCD, "gcd", kIntegral},
    {NK_PW_LCM, "lcm", kIntegral},
    {NK_PW_IGAMMA, "igamma", kFloating},
    {NK_PW_IGAMMAC, "igammac", kFloating},
    {NK_PW_ZETA, "zeta", kFloat},
    {NK_PW_CHEBYSHEV_T, "chebyshev_polynomial_t", kFloat},
    {NK_PW_CHEBYSHEV_U, "chebyshev_polynomial_u", kFloat},
    {NK_PW_CHEBYSHEV_V, "chebyshev_polynomial_v", kFloat},
    {NK_PW_CHEBYSHEV_W, "chebyshev_polynomial_w", kFloat},
    {NK_PW_SHIFTED_CHEBYSHEV_T, "shifted_chebyshev_polynomial_t", kFloat},
    {NK_PW_SHIFTED_CHEBYSHEV_U, "shifted_chebyshev_polynomial_u", kFloat},
    {NK_PW_SHIFTED_CHEBYSHEV_V, "shifted_chebyshev_polynomial_v", kFloat},
    {NK_PW_SHIFTED_CHEBYSHEV_W, "shifted_chebyshev_polynomial_w", kFloat},
    {NK_PW_HERMITE_H, "hermite_polynomial_h", kFloat},
    {NK_PW_HERMITE_HE, "hermite_polynomial_he", kFloat},
    {NK_PW_LAGUERRE_L, "laguerre_polynomial_l", kFloat},
    {NK_PW_LEGENDRE_P, "legendre_polynomial_p", kFloat},
    {NK_PW_POW_SCALAR, "pow", kNumbers},
    {NK_PW_CLAMP_SCALAR, "clamp", kNumbers},
    {NK_PW_CLAMP_MIN_SCALAR, "clamp_min", kNumbers},
    {NK_PW_CLAMP_MAX_SCALAR, "clamp_max", kNumbers},
    {NK_PW_WHERE, "where", kAll},
    {NK_PW_CLAMP, "clamp", kNumbers},
    {NK_PW_LERP, "lerp", kFloating},
    {NK_PW_ADDCMUL, "addcmul", kNumbers},
    {NK_PW_ADDCDIV, "addcdiv", kFloating},
};

constexpr bool table_in_op_order() {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].op != static_cast<nk_pointwise_op>(i)) return false;
  }
  return std::size(kOps) == NK_PW_OP_COUNT;
}
static_assert(table_in_op_order(), "kOps lists every nk_pointwise_op in order");

unsigned dtype_class(c10::ScalarType t) {
  if (t == c10::ScalarType::Bool) return kBool;
  if (t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16) return kReduced;
  return c10::isFloatingType(t) ? kFloat : kIntegral;
}

// out <- op(iter's inputs) computed in `compute`.  A dtype ATen's CPU kernel
// lacks gets the error its AT_DISPATCH would give.
void launch_pointwise(at::TensorIteratorBase& iter, nk_pointwise_op op, c10::ScalarType compute,
                      nk_scalar s0 = {}, nk_scalar s1 = {}) {
  const PointwiseOp& e = kOps[op];
  TORCH_CHECK_NOT_IMPLEMENTED(is_native_dtype(compute) && (e.dtypes & dtype_class(compute)),
                              "\"", e.name, "_neuron\" not implemented for '",
                              c10::toString(compute), "'");
  if (iter.numel() == 0) return;
  Task task(NK_KERNEL_POINTWISE, e.name, iter.ntensors());
  std::vector<at::Tensor> keep;
  TORCH_CHECK(describe_operands(iter, &task.t, &keep), e.name,
              ": an operand has a dtype the neuron device lacks");
  auto* p = task.params<nk_pointwise_params>();
  p->op = op;
  p->compute = native_dtype(compute);
  p->s0 = s0;
  p->s1 = s1;
  launch(iter.device(0).index(), task);
}

// A scalar argument as ATen's CPU kernel converts it: to the op-math type
// for floating dtypes (float for float16/bfloat16), value.to<scalar_t>()
// (checked) otherwise.
nk_scalar param(const c10::Scalar& v, c10::ScalarType compute) {
  return c10::isFloatingType(compute) ? scalar_for_compute(v, compute)
                                      : scalar_for_store(v, compute);
}

// ---- the stubs -------------------------------------------------------------

template <nk_pointwise_op Op>
void binary_stub(at::TensorIteratorBase& iter) {
  launch_pointwise(iter, Op, iter.common_dtype());
}

// The logical ops' stubs take a TensorIterator.
template <nk_pointwise_op Op>
void logical_stub(at::TensorIterator& iter) {
  launch_pointwise(iter, Op, iter.common_dtype());
}

template <nk_pointwise_op Op>
void scalar_param_stub(at::TensorIteratorBase& iter, const c10::Scalar& s) {
  launch_pointwise(iter, Op, iter.common_dtype(), param(s, iter.common_dtype()));
}

// where: the condition is read as bool, the chosen value moved to out.
void where_stub(at::TensorIterator& iter) { launch_pointwise(iter, NK_PW_WHERE, iter.dtype(0)); }

// pow(t, exponent): float16/bfloat16 take the exponent in their own
// precision (exp.to<scalar_t>()), float32/float64 as a double.
void pow_scalar_stub(at::TensorIteratorBase& iter, const c10::Scalar& exponent) {
  const auto dtype = iter.common_dtype();
  const bool reduced = dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16;
  launch_pointwise(iter, NK_PW_POW_SCALAR, dtype,
                   reduced ? scalar_for_store(exponent, dtype) : param(exponent, dtype));
}

// clamp's bounds are min.to<scalar_t>(), as the CPU kernel converts them.
void clamp_scalar_stub(at::TensorIteratorBase& iter, const c10::Scalar& min,
                       const c10::Scalar& max) {
  const auto dtype = iter.common_dtype();
  launch_pointwise(iter, NK_PW_CLAMP_SCALAR, dtype, scalar_for_store(min, dtype),
                   scalar_for_store(max, dtype));
}

template <nk_pointwise_op Op>
void clamp_bound_stub(at::TensorIteratorBase& iter, c10::Scalar bound) {
  const auto dtype = iter.common_dtype();
  launch_pointwise(iter, Op, dtype, scalar_for_store(bound, dtype));
}

// div(rounding_mode=None) through the structured div.out_mode lands here:
// the binary kernel's true division.
void div_true_stub(at::TensorIteratorBase& iter) {
  const auto dtype = iter.common_dtype();
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype), "\"div_true_neuron\" not implemented for '",
                              c10::toString(dtype), "'");
  if (iter.numel() == 0) return;
  Task task(NK_KERNEL_BINARY, "div", iter.ntensors());
  std::vector<at::Tensor> keep;
  TORCH_CHECK(describe_operands(iter, &task.t, &keep),
              "div: an operand has a dtype the neuron device lacks");
  auto* p = task.params<nk_binary_params>();
  p->op = NK_BINARY_DIV;
  p->compute = native_dtype(dtype);
  p->alpha = scalar_for_compute(1, dtype);
  launch(iter.device(0).index(), task);
}

using structured::Shared;

// ---- structured ops whose meta takes Optional*Ref --------------------------

at::OptionalScalarRef ref(const std::optional<at::Scalar>& s) {
  return s ? at::OptionalScalarRef(*s) : at::OptionalScalarRef();
}
at::OptionalTensorRef ref(const std::optional<at::Tensor>& t) {
  return t && t->defined() ? at::OptionalTensorRef(*t) : at::OptionalTensorRef();
}

template <class Base, class Bound>
struct ClampOp : Base {
  void meta(const at::Tensor& self, const std::optional<Bound>& min,
            const std::optional<Bound>& max) {
    Base::meta(self, ref(min), ref(max));
  }
  void impl(const at::Tensor& self, const std::optional<Bound>& min,
            const std::optional<Bound>& max, const at::Tensor& out) {
    Base::impl(self, ref(min), ref(max), out);
  }
};

// pow(Scalar, Tensor) has no in-place form: functional and out= only.
struct PowScalarTensor {
  using Op = at::native::structured_pow_Scalar_out;
  static at::Tensor functional(const c10::Scalar& self, const at::Tensor& exponent) {
    if (!structured::all_native(exponent)) {
      return run_on_cpu("aten::pow", "Scalar", {self, exponent}).toTensor();
    }
    structured::Functional<Op, 1> op;
    op.meta(self, exponent);
    op.impl(self, exponent, op.output(0));
    return std::move(op.outputs_[0]);
  }
  static at::Tensor& out(const c10::Scalar& self, const at::Tensor& exponent, at::Tensor& result) {
    if (!structured::all_native(exponent, result)) {
      run_on_cpu("aten::pow", "Scalar_out", {self, exponent, result});
      return result;
    }
    structured::Out<Op, 1> op(result);
    op.meta(self, exponent);
    op.impl(self, exponent, op.output(0));
    op.copy_back();
    return result;
  }
};

using T = const at::Tensor&;
using S = const at::Scalar&;
using structured::Structured;
namespace an = at::native;

// aten::name.overload -> structured op (functional, in-place, out=).
template <class Op>
using Binary = Structured<Op, T, T>;
template <class Op>
using TensorScalar = Structured<Op, T, S>;

void register_ops(torch::Library& m) {
  Binary<an::structured_pow_Tensor_Tensor_out>::register_ops(m, "pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out");
  TensorScalar<an::structured_pow_Tensor_Scalar_out>::register_ops(m, "pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out");
  m.impl("pow.Scalar", TORCH_FN(PowScalarTensor::functional));
  m.impl("pow.Scalar_out", TORCH_FN(PowScalarTensor::out));
  Binary<an::structured_remainder_out>::register_ops(m, "remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out");
  Binary<an::structured_fmod_out>::register_ops(m, "fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out");
  Structured<an::structured_div_out_mode, T, T, std::optional<c10::string_view>>::register_ops(
      m, "div.Tensor_mode", "div_.Tensor_mode", "div.out_mode");
  Binary<an::structured_maximum_out>::register_ops(m, "maximum", nullptr, "maximum.out");
  Binary<an::structured_minimum_out>::register_ops(m, "minimum", nullptr, "minimum.out");
  Binary<an::structured_fmax_out>::register_ops(m, "fmax", nullptr, "fmax.out");
  Binary<an::structured_fmin_out>::register_ops(m, "fmin", nullptr, "fmin.out");
  Binary<an::structured_atan2_out>::register_ops(m, "atan2", "atan2_", "atan2.out");
  Binary<an::structured_hypot_out>::register_ops(m, "hypot", "hypot_", "hypot.out");
  Binary<an::structured_copysign_out>::register_ops(m, "copysign.Tensor", "copysign_.Tensor", "copysign.out");
  Binary<an::structured_xlogy_out>::register_ops(m, "xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor");
  Binary<an::structured_nextafter_out>::register_ops(m, "nextafter", "nextafter_", "nextafter.out");
  Binary<an::structured_logaddexp_out>::register_ops(m, "logaddexp", nullptr, "logaddexp.out");
  Binary<an::structured_logaddexp2_out>::register_ops(m, "logaddexp2", nullptr, "logaddexp2.out");
  Binary<an::structured_special_xlog1py_out>::register_ops(m, "special_xlog1py", nullptr, "special_xlog1py.out");
  Binary<an::structured_heaviside_out>::register_ops(m, "heaviside", "heaviside_", "heaviside.out");
  Binary<an::structured_gcd_out>::register_ops(m, "gcd", "gcd_", "gcd.out");
  Binary<an::structured_lcm_out>::register_ops(m, "lcm", "lcm_", "lcm.out");
  Binary<an::structured_eq_Tensor_out>::register_ops(m, "eq.Tensor", "eq_.Tensor", "eq.Tensor_out");
  Binary<an::structured_ne_Tensor_out>::register_ops(m, "ne.Tensor", "ne_.Tensor", "ne.Tensor_out");
  Binary<an::structured_lt_Tensor_out>::register_ops(m, "lt.Tensor", "lt_.Tensor", "lt.Tensor_out");
  Binary<an::structured_le_Tensor_out>::register_ops(m, "le.Tensor", "le_.Tensor", "le.Tensor_out");
  Binary<an::structured_gt_Tensor_out>::register_ops(m, "gt.Tensor", "gt_.Tensor", "gt.Tensor_out");
  Binary<an::structured_ge_Tensor_out>::register_ops(m, "ge.Tensor", "ge_.Tensor", "ge.Tensor_out");
  TensorScalar<an::structured_eq_Scalar_out>::register_ops(m, "eq.Scalar", "eq_.Scalar", "eq.Scalar_out");
  TensorScalar<an::structured_ne_Scalar_out>::register_ops(m, "ne.Scalar", "ne_.Scalar", "ne.Scalar_out");
  TensorScalar<an::structured_lt_Scalar_out>::register_ops(m, "lt.Scalar", "lt_.Scalar", "lt.Scalar_out");
  TensorScalar<an::structured_le_Scalar_out>::register_ops(m, "le.Scalar", "le_.Scalar", "le.Scalar_out");
  TensorScalar<an::structured_gt_Scalar_out>::register_ops(m, "gt.Scalar", "gt_.Scalar", "gt.Scalar_out");
  TensorScalar<an::structured_ge_Scalar_out>::register_ops(m, "ge.Scalar", "ge_.Scalar", "ge.Scalar_out");
  Binary<an::structured_bitwise_and_out>::register_ops(m, "bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out");
  Binary<an::structured_bitwise_or_out>::register_ops(m, "bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out");
  Binary<an::structured_bitwise_xor_out>::register_ops(m, "bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out");
  Binary<an::structured_bitwise_left_shift_out>::register_ops(
      m, "bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor", "bitwise_left_shift.Tensor_out");
  Binary<an::structured_bitwise_right_shift_out>::register_ops(
      m, "bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor", "bitwise_right_shift.Tensor_out");
  Structured<ClampOp<an::structured_clamp_out, at::Scalar>, T, const std::optional<at::Scalar>&,
             const std::optional<at::Scalar>&>::register_ops(m, "clamp", "clamp_", "clamp.out");
  Structured<ClampOp<an::structured_clamp_Tensor_out, at::Tensor>, T, const std::optional<at::Tensor>&,
             const std::optional<at::Tensor>&>::register_ops(m, "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out");
  TensorScalar<an::structured_clamp_min_out>::register_ops(m, "clamp_min", "clamp_min_", "clamp_min.out");
  TensorScalar<an::structured_clamp_max_out>::register_ops(m, "clamp_max", "clamp_max_", "clamp_max.out");
  Binary<an::structured_clamp_min_Tensor_out>::register_ops(m, "clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out");
  Binary<an::structured_clamp_max_Tensor_out>::register_ops(m, "clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out");
  Structured<an::structured_lerp_Scalar, T, T, S>::register_ops(m, "lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out");
  Structured<an::structured_lerp_Tensor, T, T, T>::register_ops(m, "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out");
  Structured<an::structured_addcmul_out, T, T, T, S>::register_ops(m, "addcmul", "addcmul_", "addcmul.out");
  Structured<an::structured_addcdiv_out, T, T, T, S>::register_ops(m, "addcdiv", "addcdiv_", "addcdiv.out");
  Binary<an::structured_igamma_out>::register_ops(m, "igamma", "igamma_", "igamma.out");
  Binary<an::structured_igammac_out>::register_ops(m, "igammac", "igammac_", "igammac.out");
  Binary<an::structured_special_zeta_out>::register_ops(m, "special_zeta", nullptr, "special_zeta.out");
#define NEURON_SPECIAL_POLYNOMIAL(name) \
  Binary<an::structured_special_##name##_out>::register_ops(m, "special_" #name, nullptr, "special_" #name ".out");
  NEURON_SPECIAL_POLYNOMIAL(chebyshev_polynomial_t) NEURON_SPECIAL_POLYNOMIAL(chebyshev_polynomial_u)
  NEURON_SPECIAL_POLYNOMIAL(chebyshev_polynomial_v) NEURON_SPECIAL_POLYNOMIAL(chebyshev_polynomial_w)
  NEURON_SPECIAL_POLYNOMIAL(shifted_chebyshev_polynomial_t) NEURON_SPECIAL_POLYNOMIAL(shifted_chebyshev_polynomial_u)
  NEURON_SPECIAL_POLYNOMIAL(shifted_chebyshev_polynomial_v) NEURON_SPECIAL_POLYNOMIAL(shifted_chebyshev_polynomial_w)
  NEURON_SPECIAL_POLYNOMIAL(hermite_polynomial_h) NEURON_SPECIAL_POLYNOMIAL(hermite_polynomial_he)
  NEURON_SPECIAL_POLYNOMIAL(laguerre_polynomial_l) NEURON_SPECIAL_POLYNOMIAL(legendre_polynomial_p)
#undef NEURON_SPECIAL_POLYNOMIAL

  // Shared CPU/CUDA functions (their stubs are ours; rsub calls sub).
  using TT = at::Tensor (*)(T, T);
  using TS = at::Tensor (*)(T, S);
  using IT = at::Tensor& (*)(at::Tensor&, T);
  using IS = at::Tensor& (*)(at::Tensor&, S);
  Shared<static_cast<TT>(an::floor_divide)>::register_op(m, "floor_divide");
  Shared<static_cast<IT>(an::floor_divide_)>::register_op(m, "floor_divide_.Tensor");
  Shared<an::floor_divide_out>::register_op(m, "floor_divide.out");
  Shared<static_cast<at::Tensor (*)(S, T)>(an::remainder)>::register_op(m, "remainder.Scalar_Tensor");
  Shared<an::logical_and_out>::register_op(m, "logical_and.out");
  Shared<an::logical_or_out>::register_op(m, "logical_or.out");
  Shared<an::logical_xor_out>::register_op(m, "logical_xor.out");
  Shared<static_cast<TS>(an::__lshift__)>::register_op(m, "__lshift__.Scalar");
  Shared<static_cast<TT>(an::__lshift__)>::register_op(m, "__lshift__.Tensor");
  Shared<static_cast<IS>(an::__ilshift__)>::register_op(m, "__ilshift__.Scalar");
  Shared<static_cast<IT>(an::__ilshift__)>::register_op(m, "__ilshift__.Tensor");
  Shared<static_cast<TS>(an::__rshift__)>::register_op(m, "__rshift__.Scalar");
  Shared<static_cast<TT>(an::__rshift__)>::register_op(m, "__rshift__.Tensor");
  Shared<static_cast<IS>(an::__irshift__)>::register_op(m, "__irshift__.Scalar");
  Shared<static_cast<IT>(an::__irshift__)>::register_op(m, "__irshift__.Tensor");
  Shared<static_cast<at::Tensor (*)(T, T, S)>(an::rsub)>::register_op(m, "rsub.Tensor");
  Shared<static_cast<at::Tensor (*)(T, T, T)>(an::where)>::register_op(m, "where.self");
  Shared<an::where_self_out>::register_op(m, "where.self_out");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { register_ops(m); }

}  // namespace torch_neuronx

// stub -> kernel op
namespace at::native {
using torch_neuronx::binary_stub;
using torch_neuronx::clamp_bound_stub;
using torch_neuronx::logical_stub;
using torch_neuronx::scalar_param_stub;
REGISTER_PRIVATEUSE1_DISPATCH(pow_tensor_tensor_stub, &binary_stub<NK_PW_POW>)
REGISTER_PRIVATEUSE1_DISPATCH(pow_tensor_scalar_stub, &torch_neuronx::pow_scalar_stub)
REGISTER_PRIVATEUSE1_DISPATCH(remainder_stub, &binary_stub<NK_PW_REMAINDER>)
REGISTER_PRIVATEUSE1_DISPATCH(fmod_stub, &binary_stub<NK_PW_FMOD>)
REGISTER_PRIVATEUSE1_DISPATCH(div_true_stub, &torch_neuronx::div_true_stub)
REGISTER_PRIVATEUSE1_DISPATCH(div_trunc_stub, &binary_stub<NK_PW_DIV_TRUNC>)
REGISTER_PRIVATEUSE1_DISPATCH(div_floor_stub, &binary_stub<NK_PW_DIV_FLOOR>)
REGISTER_PRIVATEUSE1_DISPATCH(maximum_stub, &binary_stub<NK_PW_MAXIMUM>)
REGISTER_PRIVATEUSE1_DISPATCH(minimum_stub, &binary_stub<NK_PW_MINIMUM>)
REGISTER_PRIVATEUSE1_DISPATCH(fmax_stub, &binary_stub<NK_PW_FMAX>)
REGISTER_PRIVATEUSE1_DISPATCH(fmin_stub, &binary_stub<NK_PW_FMIN>)
REGISTER_PRIVATEUSE1_DISPATCH(atan2_stub, &binary_stub<NK_PW_ATAN2>)
REGISTER_PRIVATEUSE1_DISPATCH(hypot_stub, &binary_stub<NK_PW_HYPOT>)
REGISTER_PRIVATEUSE1_DISPATCH(copysign_stub, &binary_stub<NK_PW_COPYSIGN>)
REGISTER_PRIVATEUSE1_DISPATCH(xlogy_stub, &binary_stub<NK_PW_XLOGY>)
REGISTER_PRIVATEUSE1_DISPATCH(nextafter_stub, &binary_stub<NK_PW_NEXTAFTER>)
REGISTER_PRIVATEUSE1_DISPATCH(logaddexp_stub, &binary_stub<NK_PW_LOGADDEXP>)
REGISTER_PRIVATEUSE1_DISPATCH(logaddexp2_stub, &binary_stub<NK_PW_LOGADDEXP2>)
REGISTER_PRIVATEUSE1_DISPATCH(xlog1py_stub, &binary_stub<NK_PW_XLOG1PY>)
REGISTER_PRIVATEUSE1_DISPATCH(heaviside_stub, &binary_stub<NK_PW_HEAVISIDE>)
REGISTER_PRIVATEUSE1_DISPATCH(gcd_stub, &binary_stub<NK_PW_GCD>)
REGISTER_PRIVATEUSE1_DISPATCH(lcm_stub, &binary_stub<NK_PW_LCM>)
REGISTER_PRIVATEUSE1_DISPATCH(igamma_stub, &binary_stub<NK_PW_IGAMMA>)
REGISTER_PRIVATEUSE1_DISPATCH(igammac_stub, &binary_stub<NK_PW_IGAMMAC>)
REGISTER_PRIVATEUSE1_DISPATCH(zeta_stub, &binary_stub<NK_PW_ZETA>)
REGISTER_PRIVATEUSE1_DISPATCH(chebyshev_polynomial_t_stub, &binary_stub<NK_PW_CHEBYSHEV_T>)
REGISTER_PRIVATEUSE1_DISPATCH(chebyshev_polynomial_u_stub, &binary_stub<NK_PW_CHEBYSHEV_U>)
REGISTER_PRIVATEUSE1_DISPATCH(chebyshev_polynomial_v_stub, &binary_stub<NK_PW_CHEBYSHEV_V>)
REGISTER_PRIVATEUSE1_DISPATCH(chebyshev_polynomial_w_stub, &binary_stub<NK_PW_CHEBYSHEV_W>)
REGISTER_PRIVATEUSE1_DISPATCH(shifted_chebyshev_polynomial_t_stub, &binary_stub<NK_PW_SHIFTED_CHEBYSHEV_T>)
REGISTER_PRIVATEUSE1_DISPATCH(shifted_chebyshev_polynomial_u_stub, &binary_stub<NK_PW_SHIFTED_CHEBYSHEV_U>)
REGISTER_PRIVATEUSE1_DISPATCH(shifted_chebyshev_polynomial_v_stub, &binary_stub<NK_PW_SHIFTED_CHEBYSHEV_V>)
REGISTER_PRIVATEUSE1_DISPATCH(shifted_chebyshev_polynomial_w_stub, &binary_stub<NK_PW_SHIFTED_CHEBYSHEV_W>)
REGISTER_PRIVATEUSE1_DISPATCH(hermite_polynomial_h_stub, &binary_stub<NK_PW_HERMITE_H>)
REGISTER_PRIVATEUSE1_DISPATCH(hermite_polynomial_he_stub, &binary_stub<NK_PW_HERMITE_HE>)
REGISTER_PRIVATEUSE1_DISPATCH(laguerre_polynomial_l_stub, &binary_stub<NK_PW_LAGUERRE_L>)
REGISTER_PRIVATEUSE1_DISPATCH(legendre_polynomial_p_stub, &binary_stub<NK_PW_LEGENDRE_P>)
REGISTER_PRIVATEUSE1_DISPATCH(eq_stub, &binary_stub<NK_PW_EQ>)
REGISTER_PRIVATEUSE1_DISPATCH(ne_stub, &binary_stub<NK_PW_NE>)
REGISTER_PRIVATEUSE1_DISPATCH(lt_stub, &binary_stub<NK_PW_LT>)
REGISTER_PRIVATEUSE1_DISPATCH(le_stub, &binary_stub<NK_PW_LE>)
REGISTER_PRIVATEUSE1_DISPATCH(gt_stub, &binary_stub<NK_PW_GT>)
REGISTER_PRIVATEUSE1_DISPATCH(ge_stub, &binary_stub<NK_PW_GE>)
REGISTER_PRIVATEUSE1_DISPATCH(logical_and_stub, &logical_stub<NK_PW_LOGICAL_AND>)
REGISTER_PRIVATEUSE1_DISPATCH(logical_or_stub, &logical_stub<NK_PW_LOGICAL_OR>)
REGISTER_PRIVATEUSE1_DISPATCH(logical_xor_stub, &logical_stub<NK_PW_LOGICAL_XOR>)
REGISTER_PRIVATEUSE1_DISPATCH(bitwise_and_stub, &binary_stub<NK_PW_BITWISE_AND>)
REGISTER_PRIVATEUSE1_DISPATCH(bitwise_or_stub, &binary_stub<NK_PW_BITWISE_OR>)
REGISTER_PRIVATEUSE1_DISPATCH(bitwise_xor_stub, &binary_stub<NK_PW_BITWISE_XOR>)
REGISTER_PRIVATEUSE1_DISPATCH(lshift_stub, &binary_stub<NK_PW_LSHIFT>)
REGISTER_PRIVATEUSE1_DISPATCH(rshift_stub, &binary_stub<NK_PW_RSHIFT>)
REGISTER_PRIVATEUSE1_DISPATCH(where_kernel, &torch_neuronx::where_stub)
REGISTER_PRIVATEUSE1_DISPATCH(clamp_stub, &binary_stub<NK_PW_CLAMP>)
REGISTER_PRIVATEUSE1_DISPATCH(clamp_scalar_stub, &torch_neuronx::clamp_scalar_stub)
REGISTER_PRIVATEUSE1_DISPATCH(clamp_min_scalar_stub, &clamp_bound_stub<NK_PW_CLAMP_MIN_SCALAR>)
REGISTER_PRIVATEUSE1_DISPATCH(clamp_max_scalar_stub, &clamp_bound_stub<NK_PW_CLAMP_MAX_SCALAR>)
REGISTER_PRIVATEUSE1_DISPATCH(lerp_kernel_scalar_weight, &scalar_param_stub<NK_PW_LERP_SCALAR>)
REGISTER_PRIVATEUSE1_DISPATCH(lerp_kernel_tensor_weight, &binary_stub<NK_PW_LERP>)
REGISTER_PRIVATEUSE1_DISPATCH(addcmul_stub, &scalar_param_stub<NK_PW_ADDCMUL>)
REGISTER_PRIVATEUSE1_DISPATCH(addcdiv_stub, &scalar_param_stub<NK_PW_ADDCDIV>)
}  // namespace at::native
