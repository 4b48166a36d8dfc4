// ops_reduce.cpp — reductions, scans and softmax on neuron.
//
// Three kernels do the math (NK_KERNEL_REDUCE, NK_KERNEL_SCAN,
// NK_KERNEL_SOFTMAX); this file only maps ATen onto them.
//
// Most reductions are ATen structured ops whose CPU and CUDA impl is shared:
// it builds the reduction TensorIterator (output restrided to stride 0 along
// the reduced dims) and calls a DispatchStub.  Those register ATen's own
// classes through structured.h, and the stubs' PrivateUse1 slots (one table,
// kIterStubs) launch the iterator as it is: NK_KERNEL_REDUCE takes exactly
// that operand layout.  Ops whose CPU code is device-specific get a glue
// function here that follows the CUDA one: std/var (ATen's std_var_out
// refuses devices other than cpu/cuda/xpu), count_nonzero, _cummax_helper,
// _logcumsumexp, and the softmax family, whose structured impl is ours on top
// of ATen's meta class.  CompositeImplicitAutograd / CompositeExplicitAutograd
// ops (sum(), mean(), logsumexp, softmax.int, cummax, nanmean, ...) become
// native through these pieces.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceAllOps.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/ops/_log_softmax_backward_data_meta.h>
#include <ATen/ops/_log_softmax_meta.h>
#include <ATen/ops/_softmax_backward_data_meta.h>
#include <ATen/ops/_softmax_meta.h>
#include <ATen/ops/all_native.h>
#include <ATen/ops/amax_native.h>
#include <ATen/ops/amin_native.h>
#include <ATen/ops/aminmax_native.h>
#include <ATen/ops/any_native.h>
#include <ATen/ops/argmax_native.h>
#include <ATen/ops/argmin_native.h>
#include <ATen/ops/cumprod_native.h>
#include <ATen/ops/cumsum_native.h>
#include <ATen/ops/linalg_vector_norm_native.h>
#include <ATen/ops/max_native.h>
#include <ATen/ops/mean_native.h>
#include <ATen/ops/min_native.h>
#include <ATen/ops/nansum_native.h>
#include <ATen/ops/norm_native.h>
#include <ATen/ops/prod_native.h>
#include <ATen/ops/sum_native.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "fallback.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;

// ---- NK_KERNEL_REDUCE ------------------------------------------------------

nk_reduce_params reduce_params(nk_reduce_op op) {
  nk_reduce_params p{};
  p.op = op;
  return p;
}

// A built reduction iterator, operands as they are (outputs first).
void launch_reduce(at::TensorIteratorBase& iter, const char* name, const nk_reduce_params& p) {
  Task task(NK_KERNEL_REDUCE, name, iter.ntensors());
  std::vector<Tensor> keep;
  TORCH_INTERNAL_ASSERT(describe_operands(iter, &task.t, &keep), name, ": operand not native");
  *task.params<nk_reduce_params>() = p;
  launch(iter.device(0).index(), task);
}

// `out` (any shape) as the stride-0 output over all of `self`'s dims.
void describe_full_output(const Tensor& out, const nrt_operand& in, nrt_operand* op) {
  TORCH_INTERNAL_ASSERT(describe(out, op));
  op->ndim = in.ndim;
  for (int d = 0; d < in.ndim; ++d) {
    op->sizes[d] = in.sizes[d];
    op->strides[d] = 0;
  }
}

// `out` (the result of reducing `dim` of self) as an operand of self's shape.
void describe_dim_output(const Tensor& out, const Tensor& self, int64_t dim, bool keepdim,
                         nrt_operand* op) {
  TORCH_INTERNAL_ASSERT(describe(out, op));
  const int64_t nd = self.dim();
  op->ndim = static_cast<int32_t>(nd);
  const int64_t itemsize = static_cast<int64_t>(out.itemsize());
  for (int64_t d = 0; d < nd; ++d) {
    op->sizes[d] = self.size(d);
    if (d == dim) {
      op->strides[d] = 0;
    } else {
      op->strides[d] = out.stride(keepdim || d < dim ? d : d - 1) * itemsize;
    }
  }
}

// The stubs that receive a reduction TensorIterator: which kernel op each
// is and the name its tasks carry, one table.
constexpr struct {
  nk_reduce_op op;
  const char* name;
} kIterStubs[] = {
    {NK_REDUCE_SUM, "aten::sum"},       {NK_REDUCE_NANSUM, "aten::nansum"},
    {NK_REDUCE_PROD, "aten::prod"},     {NK_REDUCE_MEAN, "aten::mean"},
    {NK_REDUCE_ALL, "aten::all"},       {NK_REDUCE_ANY, "aten::any"},
    {NK_REDUCE_MIN, "aten::amin"},      {NK_REDUCE_MAX, "aten::amax"},
    {NK_REDUCE_ARGMAX, "aten::argmax"}, {NK_REDUCE_ARGMIN, "aten::argmin"},
};

constexpr const char* iter_stub_name(nk_reduce_op op) {
  for (const auto& e : kIterStubs) {
    if (e.op == op) return e.name;
  }
  return nullptr;
}

}  // namespace

template <nk_reduce_op Op>
void iter_stub(at::TensorIterator& iter) {
  static_assert(iter_stub_name(Op) != nullptr, "op missing from kIterStubs");
  launch_reduce(iter, iter_stub_name(Op), reduce_params(Op));
}

void norm_kernel(at::TensorIterator& iter, const c10::Scalar& p) {
  nk_reduce_params prm = reduce_params(NK_REDUCE_NORM);
  prm.p = p.toDouble();
  launch_reduce(iter, "aten::linalg_vector_norm", prm);
}

void std_var_kernel(at::TensorIterator& iter, double correction, bool take_sqrt) {
  nk_reduce_params prm = reduce_params(NK_REDUCE_VAR);
  prm.correction = correction;
  prm.take_sqrt = take_sqrt;
  launch_reduce(iter, take_sqrt ? "aten::std" : "aten::var", prm);
}

// max.dim / min.dim: values and indices of `dim`.
template <nk_reduce_op Op>
void minmax_dim_kernel(const Tensor& values, const Tensor& indices, const Tensor& self,
                       int64_t dim, bool keepdim) {
  Task task(NK_KERNEL_REDUCE, Op == NK_REDUCE_MAX_INDEX ? "aten::max.dim" : "aten::min.dim", 3);
  TORCH_INTERNAL_ASSERT(describe(self, task.operand(2)));
  dim = at::maybe_wrap_dim(dim, self.dim());
  describe_dim_output(values, self, dim, keepdim, task.operand(0));
  describe_dim_output(indices, self, dim, keepdim, task.operand(1));
  *task.params<nk_reduce_params>() = reduce_params(Op);
  launch(self.device().index(), task);
}

// max() / min() of every element into a 0-dim result.
template <nk_reduce_op Op>
void minmax_all_kernel(Tensor& result, const Tensor& self) {
  Task task(NK_KERNEL_REDUCE, Op == NK_REDUCE_MAX ? "aten::max" : "aten::min", 2);
  TORCH_INTERNAL_ASSERT(describe(self, task.operand(1)));
  describe_full_output(result, *task.operand(1), task.operand(0));
  *task.params<nk_reduce_params>() = reduce_params(Op);
  launch(self.device().index(), task);
}

// aminmax: the two extremes, one launch each.
void aminmax_kernel(const Tensor& self, int64_t dim, bool keepdim, Tensor& min, Tensor& max) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  for (int k = 0; k < 2; ++k) {
    Task task(NK_KERNEL_REDUCE, "aten::aminmax", 2);
    TORCH_INTERNAL_ASSERT(describe(self, task.operand(1)));
    describe_dim_output(k ? max : min, self, dim, keepdim, task.operand(0));
    *task.params<nk_reduce_params>() = reduce_params(k ? NK_REDUCE_MAX : NK_REDUCE_MIN);
    launch(self.device().index(), task);
  }
}

void aminmax_all_kernel(const Tensor& self, Tensor& min, Tensor& max) {
  for (int k = 0; k < 2; ++k) {
    Task task(NK_KERNEL_REDUCE, "aten::aminmax", 2);
    TORCH_INTERNAL_ASSERT(describe(self, task.operand(1)));
    describe_full_output(k ? max : min, *task.operand(1), task.operand(0));
    *task.params<nk_reduce_params>() = reduce_params(k ? NK_REDUCE_MAX : NK_REDUCE_MIN);
    launch(self.device().index(), task);
  }
}

// ---- NK_KERNEL_SCAN -------------------------------------------------------

namespace {

void launch_scan(nk_scan_op op, const char* name, const Tensor& out, const Tensor* indices,
                 const Tensor& self, int64_t dim) {
  if (self.numel() == 0) return;
  Task task(NK_KERNEL_SCAN, name, indices ? 3 : 2);
  int k = 0;
  TORCH_INTERNAL_ASSERT(describe(out, task.operand(k++)));
  if (indices) TORCH_INTERNAL_ASSERT(describe(*indices, task.operand(k++)));
  TORCH_INTERNAL_ASSERT(describe(self, task.operand(k)));
  auto* p = task.params<nk_scan_params>();
  p->op = op;
  p->dim = static_cast<int32_t>(at::maybe_wrap_dim(dim, self.dim()));
  launch(self.device().index(), task);
}

}  // namespace

void cumsum_kernel(const Tensor& result, const Tensor& self, int64_t dim) {
  launch_scan(NK_SCAN_CUMSUM, "aten::cumsum", result, nullptr, self, dim);
}
void cumprod_kernel(const Tensor& result, const Tensor& self, int64_t dim) {
  launch_scan(NK_SCAN_CUMPROD, "aten::cumprod", result, nullptr, self, dim);
}
void logcumsumexp_kernel(Tensor& result, const Tensor& self, int64_t dim) {
  launch_scan(NK_SCAN_LOGCUMSUMEXP, "aten::_logcumsumexp", result, nullptr, self, dim);
}

namespace {

bool native(const Tensor& t) { return is_native_dtype(t.scalar_type()); }

void cummax_helper(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  if (!native(self) || !native(values)) {
    run_on_cpu("aten::_cummax_helper", "", {self, values, indices, dim});
    return;
  }
  launch_scan(NK_SCAN_CUMMAX, "aten::_cummax_helper", values, &indices, self, dim);
}

void cummin_helper(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  if (!native(self) || !native(values)) {
    run_on_cpu("aten::_cummin_helper", "", {self, values, indices, dim});
    return;
  }
  launch_scan(NK_SCAN_CUMMIN, "aten::_cummin_helper", values, &indices, self, dim);
}

// As CUDA's _logcumsumexp_out: resize, 0-dim copies, empty does nothing.
Tensor& logcumsumexp_out(const Tensor& self, int64_t dim, Tensor& result) {
  if (!native(self) || !native(result) || !at::isFloatingType(self.scalar_type())) {
    run_on_cpu("aten::_logcumsumexp", "out", {self, dim, result});
    return result;
  }
  const int64_t wrap_dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(result, self.sizes());
  if (self.dim() == 0) {
    result.copy_(self);
    return result;
  }
  logcumsumexp_kernel(result, self, wrap_dim);
  return result;
}

Tensor logcumsumexp(const Tensor& self, int64_t dim) {
  if (!native(self) || !at::isFloatingType(self.scalar_type())) {
    return run_on_cpu("aten::_logcumsumexp", "", {self, dim}).toTensor();
  }
  Tensor result = at::empty_like(self, at::MemoryFormat::Contiguous);
  return logcumsumexp_out(self, dim, result);
}

// ---- std / var (ATen's std_var_out without its device check) --------------

Tensor& std_var_out(const char* fname, Tensor& result, const Tensor& self,
                    at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction_opt,
                    bool keepdim, bool take_sqrt) {
  TORCH_CHECK(self.layout() == at::Layout::Strided, "std and var only supports strided layout, got: ",
              self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "std and var only support floating point and complex dtypes");
  const double correction = correction_opt.value_or(1).toDouble();
  const c10::ScalarType dtype = at::native::get_dtype_from_result(result, {});
  auto iter = at::native::make_reduction(fname, result, self, dim, keepdim, dtype);
  TORCH_CHECK(at::canCast(self.scalar_type(), result.scalar_type()), "result type ",
              self.scalar_type(), " can't be cast to the desired output type ", result.scalar_type());
  const int64_t n = iter.num_output_elements() == 0 ? 0 : iter.numel() / iter.num_output_elements();
  if (n - correction <= 0) {
    TORCH_WARN(fname, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
  if (iter.numel() == 0) {
    result.fill_(std::numeric_limits<double>::quiet_NaN());
    return result;
  }
  std_var_kernel(iter, correction, take_sqrt);
  return result;
}

std::tuple<Tensor&, Tensor&> std_var_mean_out(const char* fname, Tensor& result1, Tensor& result2,
                                              const Tensor& self, at::OptionalIntArrayRef dim,
                                              const std::optional<c10::Scalar>& correction_opt,
                                              bool keepdim, bool take_sqrt) {
  TORCH_CHECK(self.layout() == at::Layout::Strided, fname, " only supports strided layout, got: ",
              self.layout());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()), fname,
              " only support floating point and complex dtypes");
  const double correction = correction_opt.value_or(1).toDouble();
  const c10::ScalarType dtype = at::native::get_dtype_from_result(result1, {});
  auto iter = at::native::make_reduction(fname, result1, result2, self, dim, keepdim, dtype);
  const int64_t n = iter.num_output_elements() == 0 ? 0 : iter.numel() / iter.num_output_elements();
  if (n - correction <= 0) {
    TORCH_WARN(fname, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
  if (iter.numel() == 0) {
    result1.fill_(std::numeric_limits<double>::quiet_NaN());
    result2.fill_(std::numeric_limits<double>::quiet_NaN());
  } else {
    std_var_kernel(iter, correction, take_sqrt);
  }
  return std::tuple<Tensor&, Tensor&>(result1, result2);
}

at::TensorOptions real_options(const Tensor& self) {
  return self.options().dtype(c10::toRealValueType(self.scalar_type()));
}

template <bool Sqrt>
Tensor std_var(const Tensor& self, at::OptionalIntArrayRef dim,
               const std::optional<c10::Scalar>& correction, bool keepdim) {
  const char* name = Sqrt ? "aten::std" : "aten::var";
  if (!native(self)) return run_on_cpu(name, "correction", {self, dim, correction, keepdim}).toTensor();
  Tensor result = at::empty({0}, real_options(self));
  return std_var_out(Sqrt ? "std" : "var", result, self, dim, correction, keepdim, Sqrt);
}

template <bool Sqrt>
Tensor& std_var_out_op(const Tensor& self, at::OptionalIntArrayRef dim,
                       const std::optional<c10::Scalar>& correction, bool keepdim, Tensor& out) {
  if (!native(self) || !native(out)) {
    run_on_cpu(Sqrt ? "aten::std" : "aten::var", "correction_out", {self, dim, correction, keepdim, out});
    return out;
  }
  return std_var_out(Sqrt ? "std" : "var", out, self, dim, correction, keepdim, Sqrt);
}

template <bool Sqrt>
std::tuple<Tensor, Tensor> std_var_mean(const Tensor& self, at::OptionalIntArrayRef dim,
                                        const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!native(self)) {
    auto t = run_on_cpu(Sqrt ? "aten::std_mean" : "aten::var_mean", "correction",
                        {self, dim, correction, keepdim}).toTuple();
    return {t->elements()[0].toTensor(), t->elements()[1].toTensor()};
  }
  Tensor result1 = at::empty({0}, real_options(self));
  Tensor result2 = at::empty({0}, self.options());
  std_var_mean_out(Sqrt ? "std_mean" : "var_mean", result1, result2, self, dim, correction, keepdim, Sqrt);
  return {result1, result2};
}

// ---- count_nonzero (CUDA: (self != 0).sum(dims); here one reduction) ------

Tensor count_nonzero(const Tensor& self, at::IntArrayRef dims) {
  if (!native(self)) return run_on_cpu("aten::count_nonzero", "dim_IntList", {self, dims}).toTensor();
  Tensor result = at::native::create_reduction_result(self, dims, false, at::kLong);
  auto iter = at::native::make_reduction("count_nonzero", result, self, dims, false, self.scalar_type(),
                                         at::kLong);
  launch_reduce(iter, "aten::count_nonzero", reduce_params(NK_REDUCE_COUNT_NONZERO));
  return result;
}

// ---- softmax family: our impl on ATen's meta --------------------------------

void launch_softmax(const char* name, bool log, const Tensor& out, const Tensor& a, const Tensor* b,
                    int64_t dim) {
  if (out.numel() == 0) return;
  Task task(NK_KERNEL_SOFTMAX, name, b ? 3 : 2);
  TORCH_INTERNAL_ASSERT(describe(out, task.operand(0)));
  TORCH_INTERNAL_ASSERT(describe(a, task.operand(1)));
  if (b) TORCH_INTERNAL_ASSERT(describe(*b, task.operand(2)));
  auto* p = task.params<nk_softmax_params>();
  p->dim = static_cast<int32_t>(at::maybe_wrap_dim(dim, a.dim()));
  p->log = log;
  p->backward = b != nullptr;
  launch(a.device().index(), task);
}

template <bool Log>
struct SoftmaxForward : std::conditional_t<Log, at::meta::structured__log_softmax,
                                           at::meta::structured__softmax> {
  void impl(const Tensor& input, int64_t dim, bool /*half_to_float: out's dtype says it*/,
            const Tensor& out) {
    launch_softmax(Log ? "aten::_log_softmax" : "aten::_softmax", Log, out, input, nullptr, dim);
  }
};

template <bool Log>
struct SoftmaxBackward
    : std::conditional_t<Log, at::meta::structured__log_softmax_backward_data,
                         at::meta::structured__softmax_backward_data> {
  void impl(const Tensor& grad_output, const Tensor& output, int64_t dim,
            c10::ScalarType /*input_dtype*/, const Tensor& grad_input) {
    launch_softmax(Log ? "aten::_log_softmax_backward_data" : "aten::_softmax_backward_data", Log,
                   grad_input, grad_output, &output, dim);
  }
};

// ---- max.dim / min.dim: meta returns a precompute struct -------------------

template <class Op>
std::tuple<Tensor, Tensor> minmax_dim(const Tensor& self, int64_t dim, bool keepdim) {
  constexpr bool is_max = std::is_same_v<Op, at::native::structured_max_out>;
  if (!native(self)) {
    auto t = run_on_cpu(is_max ? "aten::max" : "aten::min", "dim", {self, dim, keepdim}).toTuple();
    return {t->elements()[0].toTensor(), t->elements()[1].toTensor()};
  }
  structured::Functional<Op, 2> op;
  auto pre = op.meta(self, dim, keepdim);
  op.impl(self, pre.dim, keepdim, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

template <class Op>
std::tuple<Tensor&, Tensor&> minmax_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                            Tensor& indices) {
  constexpr bool is_max = std::is_same_v<Op, at::native::structured_max_out>;
  if (!native(self) || !native(values)) {
    run_on_cpu(is_max ? "aten::max" : "aten::min", is_max ? "dim_max" : "dim_min",
               {self, dim, keepdim, values, indices});
    return {values, indices};
  }
  structured::Out<Op, 2> op(values, indices);
  auto pre = op.meta(self, dim, keepdim);
  op.impl(self, pre.dim, keepdim, op.output(0), op.output(1));
  op.copy_back();
  return {values, indices};
}

// aminmax: structured with two outputs.
std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!native(self)) {
    auto t = run_on_cpu("aten::aminmax", "", {self, dim, keepdim}).toTuple();
    return {t->elements()[0].toTensor(), t->elements()[1].toTensor()};
  }
  structured::Functional<at::native::structured_aminmax_out, 2> op;
  op.meta(self, dim, keepdim);
  op.impl(self, dim, keepdim, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

std::tuple<Tensor&, Tensor&> aminmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                         Tensor& min, Tensor& max) {
  if (!native(self) || !native(min) || !native(max)) {
    run_on_cpu("aten::aminmax", "out", {self, dim, keepdim, min, max});
    return {min, max};
  }
  structured::Out<at::native::structured_aminmax_out, 2> op(min, max);
  op.meta(self, dim, keepdim);
  op.impl(self, dim, keepdim, op.output(0), op.output(1));
  op.copy_back();
  return {min, max};
}

// Non-structured ops whose CPU/CUDA function is shared: native once the
// stubs are ours.  Complex and other dtypes go to the CPU.
Tensor prod_all(const Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (!native(self)) return run_on_cpu("aten::prod", "", {self, dtype}).toTensor();
  return at::native::prod(self, dtype);
}
Tensor max_all(const Tensor& self) {
  if (!native(self)) return run_on_cpu("aten::max", "", {self}).toTensor();
  return at::native::max(self);
}
Tensor min_all(const Tensor& self) {
  if (!native(self)) return run_on_cpu("aten::min", "", {self}).toTensor();
  return at::native::min(self);
}
Tensor& max_all_out(const Tensor& self, Tensor& out) {
  if (!native(self) || !native(out)) {
    run_on_cpu("aten::max", "unary_out", {self, out});
    return out;
  }
  return at::native::max_unary_out(self, out);
}
Tensor& min_all_out(const Tensor& self, Tensor& out) {
  if (!native(self) || !native(out)) {
    run_on_cpu("aten::min", "unary_out", {self, out});
    return out;
  }
  return at::native::min_unary_out(self, out);
}
Tensor nansum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
              std::optional<c10::ScalarType> dtype) {
  if (!native(self)) return run_on_cpu("aten::nansum", "", {self, dim, keepdim, dtype}).toTensor();
  return at::native::nansum(self, dim, keepdim, dtype);
}
Tensor& nansum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype, Tensor& out) {
  if (!native(self) || !native(out)) {
    run_on_cpu("aten::nansum", "out", {self, dim, keepdim, dtype, out});
    return out;
  }
  return at::native::nansum_out(self, dim, keepdim, dtype, out);
}

// norm.ScalarOpt_dim{,_dtype}: the schema's `Scalar? p` reaches meta/impl as
// an OptionalScalarRef (what the generated wrappers do).
at::OptionalScalarRef scalar_ref(const std::optional<c10::Scalar>& p) {
  return p.has_value() ? at::OptionalScalarRef(&p.value()) : at::OptionalScalarRef();
}

Tensor norm_dim(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim) {
  if (!native(self)) return run_on_cpu("aten::norm", "ScalarOpt_dim", {self, p, dim, keepdim}).toTensor();
  structured::Functional<at::native::structured_norm_out, 1> op;
  op.meta(self, scalar_ref(p), dim, keepdim);
  op.impl(self, scalar_ref(p), dim, keepdim, op.output(0));
  return std::move(op.outputs_[0]);
}

Tensor& norm_dim_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                     bool keepdim, Tensor& out) {
  if (!native(self) || !native(out)) {
    run_on_cpu("aten::norm", "out", {self, p, dim, keepdim, out});
    return out;
  }
  structured::Out<at::native::structured_norm_out, 1> op(out);
  op.meta(self, scalar_ref(p), dim, keepdim);
  op.impl(self, scalar_ref(p), dim, keepdim, op.output(0));
  op.copy_back();
  return out;
}

Tensor norm_dim_dtype(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                      bool keepdim, c10::ScalarType dtype) {
  if (!native(self) || !is_native_dtype(dtype)) {
    return run_on_cpu("aten::norm", "ScalarOpt_dim_dtype", {self, p, dim, keepdim, dtype}).toTensor();
  }
  structured::Functional<at::native::structured_norm_dtype_out, 1> op;
  op.meta(self, scalar_ref(p), dim, keepdim, dtype);
  op.impl(self, scalar_ref(p), dim, keepdim, dtype, op.output(0));
  return std::move(op.outputs_[0]);
}

Tensor& norm_dim_dtype_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                           bool keepdim, c10::ScalarType dtype, Tensor& out) {
  if (!native(self) || !native(out)) {
    run_on_cpu("aten::norm", "dtype_out", {self, p, dim, keepdim, dtype, out});
    return out;
  }
  structured::Out<at::native::structured_norm_dtype_out, 1> op(out);
  op.meta(self, scalar_ref(p), dim, keepdim, dtype);
  op.impl(self, scalar_ref(p), dim, keepdim, dtype, op.output(0));
  op.copy_back();
  return out;
}

// trace: the sum of the diagonal view (cuda's trace_cuda), with the CPU's
// checks; integer inputs sum to int64 as sum does.
at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"trace\" not implemented for 'Bool'");
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu("aten::trace", "", {self}).toTensor();
  return self.diagonal().sum();
}

using structured::Structured;
using OptDims = at::OptionalIntArrayRef;
using OptDtype = std::optional<c10::ScalarType>;
using OptInt = std::optional<int64_t>;

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // structured reductions: ATen's classes, our stubs
  Structured<at::native::structured_sum_out, const Tensor&, OptDims, bool, OptDtype>::register_ops(
      m, "sum.dim_IntList", nullptr, "sum.IntList_out");
  Structured<at::native::structured_mean_out, const Tensor&, OptDims, bool, OptDtype>::register_ops(
      m, "mean.dim", nullptr, "mean.out");
  Structured<at::native::structured_prod_out, const Tensor&, int64_t, bool, OptDtype>::register_ops(
      m, "prod.dim_int", nullptr, "prod.int_out");
  Structured<at::native::structured_amax_out, const Tensor&, at::IntArrayRef, bool>::register_ops(
      m, "amax", nullptr, "amax.out");
  Structured<at::native::structured_amin_out, const Tensor&, at::IntArrayRef, bool>::register_ops(
      m, "amin", nullptr, "amin.out");
  Structured<at::native::structured_argmax_out, const Tensor&, OptInt, bool>::register_ops(
      m, "argmax", nullptr, "argmax.out");
  Structured<at::native::structured_argmin_out, const Tensor&, OptInt, bool>::register_ops(
      m, "argmin", nullptr, "argmin.out");
  Structured<at::native::structured_all_out, const Tensor&, int64_t, bool>::register_ops(
      m, "all.dim", nullptr, "all.out");
  Structured<at::native::structured_all_dims_out, const Tensor&, OptDims, bool>::register_ops(
      m, "all.dims", nullptr, "all.dims_out");
  Structured<at::native::structured_all_all_out, const Tensor&>::register_ops(m, "all", nullptr,
                                                                              "all.all_out");
  Structured<at::native::structured_any_out, const Tensor&, int64_t, bool>::register_ops(
      m, "any.dim", nullptr, "any.out");
  Structured<at::native::structured_any_dims_out, const Tensor&, OptDims, bool>::register_ops(
      m, "any.dims", nullptr, "any.dims_out");
  Structured<at::native::structured_any_all_out, const Tensor&>::register_ops(m, "any", nullptr,
                                                                              "any.all_out");
  m.impl("norm.ScalarOpt_dim", TORCH_FN(norm_dim));
  m.impl("norm.out", TORCH_FN(norm_dim_out));
  m.impl("norm.ScalarOpt_dim_dtype", TORCH_FN(norm_dim_dtype));
  m.impl("norm.dtype_out", TORCH_FN(norm_dim_dtype_out));
  Structured<at::native::structured_linalg_vector_norm_out, const Tensor&, const c10::Scalar&, OptDims,
             bool, OptDtype>::register_ops(m, "linalg_vector_norm", nullptr, "linalg_vector_norm.out");
  Structured<at::native::structured_cumsum_out, const Tensor&, int64_t, OptDtype>::register_ops(
      m, "cumsum", "cumsum_", "cumsum.out");
  Structured<at::native::structured_cumprod_out, const Tensor&, int64_t, OptDtype>::register_ops(
      m, "cumprod", "cumprod_", "cumprod.out");

  // softmax: ATen's meta, our impl
  Structured<SoftmaxForward<false>, const Tensor&, int64_t, bool>::register_ops(m, "_softmax", nullptr,
                                                                                "_softmax.out");
  Structured<SoftmaxForward<true>, const Tensor&, int64_t, bool>::register_ops(
      m, "_log_softmax", nullptr, "_log_softmax.out");
  Structured<SoftmaxBackward<false>, const Tensor&, const Tensor&, int64_t, c10::ScalarType>::
      register_ops(m, "_softmax_backward_data", nullptr, "_softmax_backward_data.out");
  Structured<SoftmaxBackward<true>, const Tensor&, const Tensor&, int64_t, c10::ScalarType>::
      register_ops(m, "_log_softmax_backward_data", nullptr, "_log_softmax_backward_data.out");

  // precompute / shared non-structured / device-specific
  m.impl("max.dim", TORCH_FN(minmax_dim<at::native::structured_max_out>));
  m.impl("max.dim_max", TORCH_FN(minmax_dim_out<at::native::structured_max_out>));
  m.impl("min.dim", TORCH_FN(minmax_dim<at::native::structured_min_out>));
  m.impl("min.dim_min", TORCH_FN(minmax_dim_out<at::native::structured_min_out>));
  m.impl("aminmax", TORCH_FN(aminmax));
  m.impl("aminmax.out", TORCH_FN(aminmax_out));
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("max.unary_out", TORCH_FN(max_all_out));
  m.impl("min.unary_out", TORCH_FN(min_all_out));
  m.impl("prod", TORCH_FN(prod_all));
  m.impl("nansum", TORCH_FN(nansum));
  m.impl("nansum.out", TORCH_FN(nansum_out));
  m.impl("var.correction", TORCH_FN(std_var<false>));
  m.impl("std.correction", TORCH_FN(std_var<true>));
  m.impl("var.correction_out", TORCH_FN(std_var_out_op<false>));
  m.impl("std.correction_out", TORCH_FN(std_var_out_op<true>));
  m.impl("var_mean.correction", TORCH_FN(std_var_mean<false>));
  m.impl("std_mean.correction", TORCH_FN(std_var_mean<true>));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(count_nonzero));
  m.impl("_cummax_helper", TORCH_FN(cummax_helper));
  m.impl("_cummin_helper", TORCH_FN(cummin_helper));
  m.impl("_logcumsumexp", TORCH_FN(logcumsumexp));
  m.impl("trace", TORCH_FN(trace));
  m.impl("_logcumsumexp.out", TORCH_FN(logcumsumexp_out));
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(sum_stub, &torch_neuronx::iter_stub<NK_REDUCE_SUM>);
REGISTER_PRIVATEUSE1_DISPATCH(nansum_stub, &torch_neuronx::iter_stub<NK_REDUCE_NANSUM>);
REGISTER_PRIVATEUSE1_DISPATCH(prod_stub, &torch_neuronx::iter_stub<NK_REDUCE_PROD>);
REGISTER_PRIVATEUSE1_DISPATCH(mean_stub, &torch_neuronx::iter_stub<NK_REDUCE_MEAN>);
REGISTER_PRIVATEUSE1_DISPATCH(and_stub, &torch_neuronx::iter_stub<NK_REDUCE_ALL>);
REGISTER_PRIVATEUSE1_DISPATCH(or_stub, &torch_neuronx::iter_stub<NK_REDUCE_ANY>);
REGISTER_PRIVATEUSE1_DISPATCH(min_values_stub, &torch_neuronx::iter_stub<NK_REDUCE_MIN>);
REGISTER_PRIVATEUSE1_DISPATCH(max_values_stub, &torch_neuronx::iter_stub<NK_REDUCE_MAX>);
REGISTER_PRIVATEUSE1_DISPATCH(argmax_stub, &torch_neuronx::iter_stub<NK_REDUCE_ARGMAX>);
REGISTER_PRIVATEUSE1_DISPATCH(argmin_stub, &torch_neuronx::iter_stub<NK_REDUCE_ARGMIN>);
REGISTER_PRIVATEUSE1_DISPATCH(norm_stub, &torch_neuronx::norm_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(std_var_stub, &torch_neuronx::std_var_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(max_stub, &torch_neuronx::minmax_dim_kernel<NK_REDUCE_MAX_INDEX>);
REGISTER_PRIVATEUSE1_DISPATCH(min_stub, &torch_neuronx::minmax_dim_kernel<NK_REDUCE_MIN_INDEX>);
REGISTER_PRIVATEUSE1_DISPATCH(max_all_stub, &torch_neuronx::minmax_all_kernel<NK_REDUCE_MAX>);
REGISTER_PRIVATEUSE1_DISPATCH(min_all_stub, &torch_neuronx::minmax_all_kernel<NK_REDUCE_MIN>);
REGISTER_PRIVATEUSE1_DISPATCH(aminmax_stub, &torch_neuronx::aminmax_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(aminmax_allreduce_stub, &torch_neuronx::aminmax_all_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(cumsum_stub, &torch_neuronx::cumsum_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(cumprod_stub, &torch_neuronx::cumprod_kernel);
REGISTER_PRIVATEUSE1_DISPATCH(logcumsumexp_stub, &torch_neuronx::logcumsumexp_kernel);
}  // namespace at::native
