// ops_sort.cpp — the sort family: sort (stable/unstable, descending; and so
// argsort, msort), topk, kthvalue, median and nanmedian (all, and along a dim), mode, searchsorted, bucketize, unique (_unique2, _unique,
// unique_consecutive, unique_dim, unique_dim_consecutive), multinomial, bernoulli_ with a tensor p,
// native_dropout and native_dropout_backward.
//
// sort and topk are ATen structured ops: their meta functions (shape, dtype
// and argument checks, out= resizing) run through structured.h's output
// classes, and the impls here launch NK_KERNEL_SORT (k = the dim's size for
// sort, k for topk).  The others are device-specific in ATen (searchsorted_cpu,
// _unique2_cpu, ...): their glue here uses ATen's own check helpers
// (BucketizationUtils.h) or the CPU's messages, so errors read the same.
//
// unique's output size depends on the data: the kernels sort (for unique)
// and count runs on the device, and the glue reads the run count back (one
// synchronisation, as CUDA's unique does).
//
// Random ops draw from the neuron generator (Philox, counter based): results
// depend on the seed and the call sequence only.  native_dropout is
// bernoulli_(1 - p) into a mask and two multiplications, as ATen's CPU does.
#include <limits>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/SortingUtils.h>
#include <ATen/ops/sort_meta.h>
#include <ATen/ops/topk_meta.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>

#include "fallback.h"
#include "generator.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

using at::Tensor;
using structured::Functional;
using structured::Out;

// The whole result stack of the CPU fallback (run_on_cpu keeps the first).
torch::jit::Stack fallback_stack(const char* name, const char* overload, torch::jit::Stack args) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  cpu_fallback(op, &args);
  return args;
}


// values, indices <- the first k of each slice of self along dim, sorted.
void launch_sort(const Tensor& self, const Tensor& values, const Tensor& indices, int64_t dim,
                 bool descending, int64_t k, const char* name, nk_sort_order order = NK_SORT_STABLE) {
  if (self.numel() == 0 || k == 0) return;
  Task task(NK_KERNEL_SORT, name, 3);
  describe_or_fail(values, task.operand(0), name);
  describe_or_fail(indices, task.operand(1), name);
  describe_or_fail(self, task.operand(2), name);
  auto* p = task.params<nk_sort_params>();
  p->dim = static_cast<int32_t>(dim);
  p->descending = descending;
  p->k = k;
  p->order = order;
  launch(self.device().index(), task);
}

// ---- sort -------------------------------------------------------------------

struct SortOp : at::meta::structured_sort_stable {
  void impl(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending,
            const Tensor& values, const Tensor& indices) {
    // stable: equal keys keep their order; unstable: the CPU's std::sort
    // order of equal keys (sort_keys.h), so results match the CPU's exactly.
    if (self.dim() == 0 && self.numel() == 1) {
      values.copy_(self);
      indices.zero_();
      return;
    }
    dim = at::maybe_wrap_dim(dim, self.dim());
    launch_sort(self, values, indices, dim, descending, self.size(dim), "aten::sort",
                stable.value_or(false) ? NK_SORT_STABLE : NK_SORT_CPU_SORT);
  }
};

std::tuple<Tensor, Tensor> sort_stable(const Tensor& self, std::optional<bool> stable, int64_t dim,
                                       bool descending) {
  if (!is_native_dtype(self.scalar_type())) {
    auto s = fallback_stack("aten::sort", "stable", {self, stable, dim, descending});
    return {s[0].toTensor(), s[1].toTensor()};
  }
  Functional<SortOp, 2> op;
  op.meta(self, stable, dim, descending);
  op.impl(self, stable, dim, descending, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

std::tuple<Tensor&, Tensor&> sort_values_stable(const Tensor& self, std::optional<bool> stable,
                                                int64_t dim, bool descending, Tensor& values,
                                                Tensor& indices) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(values.scalar_type())) {
    fallback_stack("aten::sort", "values_stable", {self, stable, dim, descending, values, indices});
    return {values, indices};
  }
  Out<SortOp, 2> op(values, indices);
  op.meta(self, stable, dim, descending);
  op.impl(self, stable, dim, descending, op.output(0), op.output(1));
  op.copy_back();
  return {values, indices};
}

// ---- topk -------------------------------------------------------------------

struct TopkOp : at::meta::structured_topk {
  void impl(const Tensor& self, int64_t k, int64_t dim_, bool largest, bool sorted,
            const Tensor& values, const Tensor& indices) {
    const int64_t dim = at::maybe_wrap_dim(dim_, self.dim(), /*wrap_scalar=*/true);
    TORCH_CHECK(k >= 0 && k <= (self.dim() > 0 ? self.size(dim) : 1), "selected index k out of range");
    if (self.dim() == 0 && self.numel() == 1) {
      values.copy_(self);
      indices.zero_();
      return;
    }
    // The CPU's selection algorithms, so ties (and sorted=False) match it.
    launch_sort(self, values, indices, dim, largest, k, "aten::topk",
                sorted ? NK_SORT_CPU_TOPK : NK_SORT_CPU_TOPK_UNSORTED);
  }
};

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (!is_native_dtype(self.scalar_type())) {
    auto s = fallback_stack("aten::topk", "", {self, k, dim, largest, sorted});
    return {s[0].toTensor(), s[1].toTensor()};
  }
  Functional<TopkOp, 2> op;
  op.meta(self, k, dim, largest, sorted);
  op.impl(self, k, dim, largest, sorted, op.output(0), op.output(1));
  return {std::move(op.outputs_[0]), std::move(op.outputs_[1])};
}

std::tuple<Tensor&, Tensor&> topk_values(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                         bool sorted, Tensor& values, Tensor& indices) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(values.scalar_type())) {
    fallback_stack("aten::topk", "values", {self, k, dim, largest, sorted, values, indices});
    return {values, indices};
  }
  Out<TopkOp, 2> op(values, indices);
  op.meta(self, k, dim, largest, sorted);
  op.impl(self, k, dim, largest, sorted, op.output(0), op.output(1));
  op.copy_back();
  return {values, indices};
}

// ---- kthvalue / median ----------------------------------------------------------

// ATen's kthvalue_out_impl_cpu: its checks and output shapes; the kernel
// replays the CPU's quickselect, so a tie yields the CPU's index.
std::tuple<Tensor&, Tensor&> kthvalue_values(const Tensor& self, int64_t k, int64_t dim_, bool keepdim,
                                             Tensor& values, Tensor& indices) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(values.scalar_type())) {
    fallback_stack("aten::kthvalue", "values", {self, k, dim_, keepdim, values, indices});
    return {values, indices};
  }
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim(), /*wrap_scalar=*/true);
  const int64_t slicesize = self.dim() == 0 ? 1 : self.size(dim);
  at::native::zero_numel_check_dims(self, dim, "kthvalue()");
  TORCH_CHECK(k >= 1 && k <= slicesize, "kthvalue(): selected number k out of range for dimension ", dim);
  at::assert_no_overlap(self, values);
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim_, keepdim);
  if (self.dim() == 0 && self.numel() == 1) {
    values.copy_(self);
    indices.zero_();
    return {values, indices};
  }
  // values/indices have keepdim's shape here, as in ATen
  launch_sort(self, values, indices, dim, false, k, "aten::kthvalue", NK_SORT_CPU_KTH);
  if (!keepdim) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
  return {values, indices};
}

// ATen's median_with_indices_impl: the lower median, ties broken by index;
// median (ignore_nan = false): a slice with a NaN gives its first NaN;
// nanmedian: the lower median of the slice's non-NaN values (its first NaN
// when it has nothing else).
std::tuple<Tensor&, Tensor&> median_with_indices(const Tensor& self, int64_t dim, bool keepdim,
                                                 Tensor& values, Tensor& indices, bool ignore_nan) {
  const char* name = ignore_nan ? "aten::nanmedian" : "aten::median";
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(values.scalar_type())) {
    fallback_stack(name, "dim_values", {self, dim, keepdim, values, indices});
    return {values, indices};
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::zero_numel_check_dims(self, dim, "median()");
  at::checkDeviceType("median", {values, indices}, self.device().type());
  at::checkScalarType("median", {indices, "indices", 1}, at::kLong);
  at::checkSameType("median", {values, "values", 0}, {self, "self", 2});
  std::vector<int64_t> out_shape = self.sizes().vec();
  if (self.dim() > 0) {
    if (keepdim) {
      out_shape[dim] = 1;
    } else {
      out_shape.erase(out_shape.begin() + dim);
    }
  }
  at::native::resize_output(values, out_shape);
  at::native::resize_output(indices, out_shape);
  const Tensor in = self.dim() > 0 ? self : self.unsqueeze(0);
  const Tensor v = keepdim && self.dim() > 0 ? values : values.unsqueeze(dim);
  const Tensor i = keepdim && self.dim() > 0 ? indices : indices.unsqueeze(dim);
  launch_sort(in, v, i, dim, false, 1, name, ignore_nan ? NK_SORT_NANMEDIAN : NK_SORT_MEDIAN);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> median_dim_values(const Tensor& self, int64_t dim, bool keepdim,
                                               Tensor& values, Tensor& indices) {
  return median_with_indices(self, dim, keepdim, values, indices, false);
}
std::tuple<Tensor&, Tensor&> nanmedian_dim_values(const Tensor& self, int64_t dim, bool keepdim,
                                                  Tensor& values, Tensor& indices) {
  return median_with_indices(self, dim, keepdim, values, indices, true);
}

// ATen's mode_out (whose device check admits only CPU/CUDA/XPU) and its CPU
// kernel's output handling; the kernel replays the CPU's std::sort, so the
// reported index matches the CPU's.
std::tuple<Tensor&, Tensor&> mode_values(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                         Tensor& indices) {
  TORCH_CHECK(self.layout() == at::Layout::Strided, "mode only supports strided layout, got: ", self.layout());
  TORCH_CHECK(self.device() == values.device(), "expected device '", self.device(), "' but got '",
              values.device(), "' for values output");
  TORCH_CHECK(self.device() == indices.device(), "expected device '", self.device(), "' but got '",
              indices.device(), "' for indices output");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "expected scalar type '", self.scalar_type(),
              "' but got '", values.scalar_type(), "' for values output");
  TORCH_CHECK(indices.scalar_type() == at::ScalarType::Long, "expected scalar type '", at::ScalarType::Long,
              "' but got '", indices.scalar_type(), "' for indices output");
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (at::native::_dimreduce_return_trivial_no_ident(values, self, dim, keepdim, "mode")) {
    indices.resize_({}).fill_(0);
    return {values, indices};
  }
  if (!is_native_dtype(self.scalar_type())) {
    fallback_stack("aten::mode", "values", {self, dim, keepdim, values, indices});
    return {values, indices};
  }
  at::native::_reduction_with_indices_allocate_or_resize_output(values, indices, self, dim, keepdim);
  launch_sort(self, values, indices, at::maybe_wrap_dim(dim, self.dim()), false, 1, "aten::mode",
              NK_SORT_CPU_MODE);
  if (!keepdim) {
    values.squeeze_(dim);
    indices.squeeze_(dim);
  }
  return {values, indices};
}

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim, bool keepdim) {
  Tensor values = at::empty({0}, self.options());
  Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  mode_values(self, dim, keepdim, values, indices);
  return {values, indices};
}

// median() / nanmedian() of all elements: the value only (NaN for an empty
// tensor).
Tensor median_all(const Tensor& self, bool ignore_nan) {
  const char* name = ignore_nan ? "aten::nanmedian" : "aten::median";
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu(name, "", {self}).toTensor();
  Tensor out = at::empty({}, self.options());
  if (self.numel() <= 0) {
    // ATen CPU stores static_cast<scalar_t>(NAN): on x86 that is the minimum of
    // a 32/64-bit integer, 0 for narrower ones (converted through int32), true for bool
    const auto t = self.scalar_type();
    if (t == at::kBool) return out.fill_(true);
    if (c10::isIntegralType(t, /*includeBool=*/false)) {
      if (t == at::kInt) return out.fill_(std::numeric_limits<int32_t>::min());
      if (t == at::kLong) return out.fill_(std::numeric_limits<int64_t>::min());
      return out.fill_(0);
    }
    return out.fill_(NAN);
  }
  Tensor idx = at::empty({}, self.options().dtype(at::kLong));
  launch_sort(self.reshape({-1}), out.view({1}), idx.view({1}), 0, false, 1, name,
              ignore_nan ? NK_SORT_NANMEDIAN : NK_SORT_MEDIAN);
  return out;
}
Tensor median(const Tensor& self) { return median_all(self, false); }
Tensor nanmedian(const Tensor& self) { return median_all(self, true); }

// ---- searchsorted / bucketize ----------------------------------------------

// ATen's searchsorted_out_cpu, with the sorter's range checked by the kernel
// (ATen's pre-check reduces the sorter on the host).
Tensor& searchsorted_out(const Tensor& sorted_sequence, const Tensor& self, bool out_int32,
                         bool right, std::optional<std::string_view> side_opt,
                         const std::optional<Tensor>& sorter_opt, Tensor& result) {
  const Tensor sorter = sorter_opt.has_value() ? *sorter_opt : Tensor();
  at::native::searchsorted_pre_check(sorted_sequence, self, result, out_int32, right, side_opt, Tensor());
  if (sorter.defined()) {
    TORCH_CHECK(sorter.device() == sorted_sequence.device(), "torch.searchsorted(): sorter and boundary tensors should ",
      "have same device type, but got sorter tensor device type ", sorter.device(), " and input value tensor ",
      "device type ", sorted_sequence.device());
    TORCH_CHECK(sorter.sizes() == sorted_sequence.sizes(), "torch.searchsorted(): boundary and sorter must have the same "
      "size, but got boundary tensor ", sorted_sequence.sizes(), "and got sorter tensor ", sorter.sizes());
    TORCH_CHECK(sorter.scalar_type() == at::ScalarType::Long, "torch.searchsorted(): sorter must be a tensor of long ",
      "dtype but got dtype ", sorter.scalar_type());
  }
  at::native::resize_output(result, self.sizes());
  const bool is_right = side_opt ? *side_opt == "right" : right;
  if (self.numel() == 0) return result;
  Tensor input = self, bounds = sorted_sequence;
  if (self.scalar_type() != sorted_sequence.scalar_type()) {
    at::native::ResultTypeState state = {};
    state = at::native::update_result_type_state(sorted_sequence, state);
    state = at::native::update_result_type_state(self, state);
    const auto common = at::native::result_type(state);
    input = self.to(common);
    bounds = sorted_sequence.to(common);
  }
  if (!is_native_dtype(input.scalar_type())) {
    torch::jit::Stack args{sorted_sequence, self, out_int32, right};
    args.emplace_back(side_opt ? c10::IValue(std::string(*side_opt)) : c10::IValue());
    args.emplace_back(sorter_opt);
    args.emplace_back(result);
    run_on_cpu("aten::searchsorted", "Tensor_out", std::move(args));
    return result;
  }
  Task task(NK_KERNEL_SEARCHSORTED, "aten::searchsorted", sorter.defined() ? 4 : 3);
  describe_or_fail(result, task.operand(0), "searchsorted");
  describe_or_fail(input, task.operand(1), "searchsorted");
  describe_or_fail(bounds, task.operand(2), "searchsorted");
  if (sorter.defined()) describe_or_fail(sorter, task.operand(3), "searchsorted");
  task.params<nk_searchsorted_params>()->right = is_right;
  launch(self.device().index(), task);
  return result;
}

Tensor searchsorted_tensor(const Tensor& sorted_sequence, const Tensor& self, bool out_int32, bool right,
                    std::optional<std::string_view> side, const std::optional<Tensor>& sorter) {
  Tensor result = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  searchsorted_out(sorted_sequence, self, out_int32, right, side, sorter, result);
  return result;
}

Tensor searchsorted_scalar(const Tensor& sorted_sequence, const c10::Scalar& self, bool out_int32,
                           bool right, std::optional<std::string_view> side,
                           const std::optional<Tensor>& sorter) {
  return searchsorted_tensor(sorted_sequence,
                      at::native::searchsorted_scalar_tensor(self, sorted_sequence.device()),
                      out_int32, right, side, sorter);
}

Tensor& bucketize_out(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right,
                      Tensor& result) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  return searchsorted_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, result);
}

Tensor bucketize_tensor(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  Tensor result = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  bucketize_out(self, boundaries, out_int32, right, result);
  return result;
}

Tensor bucketize_scalar(const c10::Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  return bucketize_tensor(at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries,
                   out_int32, right);
}

// ---- unique -----------------------------------------------------------------

// Runs of `run_order` (1-d): unique values, inverse (through perm when
// given), counts; the run count is read back.
std::tuple<Tensor, Tensor, Tensor> unique_runs(const Tensor& self, const Tensor& run_order,
                                               const Tensor& perm, bool return_inverse,
                                               bool return_counts) {
  const int64_t n = run_order.numel();
  const auto long_opts = self.options().dtype(at::kLong);
  Tensor uniq = at::empty({n}, self.options());
  Tensor inverse = at::empty({n}, long_opts);
  Tensor counts = at::empty({n}, long_opts);
  Tensor num = at::empty({}, long_opts);
  Task task(NK_KERNEL_UNIQUE, "aten::unique", perm.defined() ? 6 : 5);
  describe_or_fail(uniq, task.operand(0), "unique");
  describe_or_fail(inverse, task.operand(1), "unique");
  describe_or_fail(counts, task.operand(2), "unique");
  describe_or_fail(num, task.operand(3), "unique");
  describe_or_fail(run_order, task.operand(4), "unique");
  if (perm.defined()) describe_or_fail(perm, task.operand(5), "unique");
  launch(self.device().index(), task);
  const int64_t runs = num.item<int64_t>();
  return {uniq.narrow(0, 0, runs),
          return_inverse ? inverse.view(self.sizes()) : at::empty({0}, long_opts),
          return_counts ? counts.narrow(0, 0, runs) : at::empty({0}, long_opts)};
}

std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool sorted, bool return_inverse,
                                           bool return_counts) {
  if (!is_native_dtype(self.scalar_type())) {
    auto s = fallback_stack("aten::_unique2", "", {self, sorted, return_inverse, return_counts});
    return {s[0].toTensor(), s[1].toTensor(), s[2].toTensor()};
  }
  const auto long_opts = self.options().dtype(at::kLong);
  if (self.numel() == 0) {
    return {at::empty({0}, self.options()),
            return_inverse ? at::empty(self.sizes(), long_opts) : at::empty({0}, long_opts),
            at::empty({0}, long_opts)};
  }
  // Always sorted, as ATen's CPU unique.
  const Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  Tensor values = at::empty({n}, self.options());
  Tensor perm = at::empty({n}, long_opts);
  launch_sort(flat, values, perm, 0, false, n, "aten::unique");
  return unique_runs(self, values, perm, return_inverse, return_counts);
}

std::tuple<Tensor, Tensor> unique(const Tensor& self, bool sorted, bool return_inverse) {
  auto [u, inv, counts] = unique2(self, sorted, return_inverse, false);
  return {u, inv};
}

// unique along dim (ATen's _unique_dim_cpu_template): the slices along dim
// as rows of a matrix; unique rows, sorted lexicographically unless
// consecutive.  inverse and counts are always returned, as on the CPU.
std::tuple<Tensor, Tensor, Tensor> unique_dim_impl(const Tensor& self, int64_t dim, bool consecutive) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const auto long_opts = self.options().dtype(at::kLong);
  auto sizes = self.sizes().vec();
  const auto num_zero_dims = std::count(sizes.begin(), sizes.end(), 0);
  if (self.size(dim) == 0) {
    TORCH_CHECK(num_zero_dims == 1,
                "Number of zero sized dimensions is more than one, so unique cannot be applied ");
    return {at::empty(sizes, self.options()), at::empty({0}, long_opts), at::empty({0}, long_opts)};
  }
  TORCH_CHECK(num_zero_dims == 0,
              "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  Tensor moved = self.movedim(dim, 0);
  auto orig_sizes = moved.sizes().vec();
  const Tensor rows = moved.reshape({moved.size(0), -1});
  const int64_t n = rows.size(0), m = rows.size(1);
  Tensor uniq = at::empty({n, m}, self.options());
  Tensor inverse = at::empty({n}, long_opts);
  Tensor counts = at::empty({n}, long_opts);
  Tensor num = at::empty({}, long_opts);
  Task task(NK_KERNEL_UNIQUE_ROWS, "aten::unique_dim", 5);
  describe_or_fail(uniq, task.operand(0), "unique_dim");
  describe_or_fail(inverse, task.operand(1), "unique_dim");
  describe_or_fail(counts, task.operand(2), "unique_dim");
  describe_or_fail(num, task.operand(3), "unique_dim");
  describe_or_fail(rows, task.operand(4), "unique_dim");
  task.params<nk_unique_rows_params>()->sort = !consecutive;
  launch(self.device().index(), task);
  const int64_t runs = num.item<int64_t>();
  orig_sizes[0] = runs;
  Tensor output = uniq.narrow(0, 0, runs).view(orig_sizes).movedim(0, dim);
  return {output, inverse, counts.narrow(0, 0, runs)};
}

std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& self, int64_t dim, bool sorted,
                                              bool return_inverse, bool return_counts) {
  if (!is_native_dtype(self.scalar_type())) {
    auto s = fallback_stack("aten::unique_dim", "", {self, dim, sorted, return_inverse, return_counts});
    return {s[0].toTensor(), s[1].toTensor(), s[2].toTensor()};
  }
  return unique_dim_impl(self, dim, false);
}

std::tuple<Tensor, Tensor, Tensor> unique_dim_consecutive(const Tensor& self, int64_t dim,
                                                          bool return_inverse, bool return_counts) {
  if (!is_native_dtype(self.scalar_type())) {
    auto s = fallback_stack("aten::unique_dim_consecutive", "", {self, dim, return_inverse, return_counts});
    return {s[0].toTensor(), s[1].toTensor(), s[2].toTensor()};
  }
  return unique_dim_impl(self, dim, true);
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& self, bool return_inverse,
                                                      bool return_counts, std::optional<int64_t> dim) {
  const bool flat_case = !dim.has_value() || (dim.value() == 0 && self.dim() == 1);
  if (!flat_case && is_native_dtype(self.scalar_type())) return unique_dim_impl(self, *dim, true);
  if (!flat_case || !is_native_dtype(self.scalar_type())) {
    auto s = fallback_stack("aten::unique_consecutive", "", {self, return_inverse, return_counts, dim});
    return {s[0].toTensor(), s[1].toTensor(), s[2].toTensor()};
  }
  const auto long_opts = self.options().dtype(at::kLong);
  if (self.numel() == 0) {
    return {at::empty({0}, self.options()),
            return_inverse ? at::empty(self.sizes(), long_opts) : at::empty({0}, long_opts),
            at::empty({0}, long_opts)};
  }
  return unique_runs(self, self.reshape({-1}), Tensor(), return_inverse, return_counts);
}

// ---- random -----------------------------------------------------------------

template <typename RNG>
struct BernoulliTensorStub {
  void operator()(const Tensor& self, const Tensor& p_, std::optional<at::Generator> gen) {
    TORCH_CHECK(is_native_dtype(self.scalar_type()) && is_native_dtype(p_.scalar_type()),
                "bernoulli_ on neuron does not support ", self.scalar_type(), " / ", p_.scalar_type());
    Tensor p = p_.device() == self.device() ? p_ : p_.to(self.device());
    p = *at::expand_inplace(self, p);
    if (self.numel() == 0) return;
    Task task(NK_KERNEL_BERNOULLI_TENSOR, "aten::bernoulli_", 2);
    describe_or_fail(self, task.operand(0), "bernoulli_");
    describe_or_fail(p, task.operand(1), "bernoulli_");
    const PhiloxState st = philox_reserve(gen, self.device().index(), 4 * static_cast<uint64_t>(self.numel()));
    auto* prm = task.params<nk_philox_params>();
    prm->seed = st.seed;
    prm->offset = st.offset;
    launch(self.device().index(), task);
  }
};

Tensor& bernoulli_tensor_(Tensor& self, const Tensor& p, std::optional<at::Generator> gen) {
  return at::native::templates::bernoulli_impl_<BernoulliTensorStub, NeuronGeneratorImpl>(self, p, gen);
}

Tensor& bernoulli_out(const Tensor& self, std::optional<at::Generator> gen, Tensor& result) {
  return at::native::templates::bernoulli_out_impl<BernoulliTensorStub, NeuronGeneratorImpl>(result, self, gen);
}

// ATen's multinomial checks; both modes are one kernel launch (see
// sort_random.c), the probability checks run there.
Tensor& multinomial_out(const Tensor& self, int64_t n_sample, bool with_replacement,
                        std::optional<at::Generator> gen, Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::ScalarType::Long,
              "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n_categories = self.size(-1);
  TORCH_CHECK(with_replacement || (n_sample <= n_categories),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n_categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  if (self.dim() == 1) {
    result.resize_({n_sample});
  } else {
    result.resize_({self.size(0), n_sample});
  }
  if (!is_native_dtype(self.scalar_type())) {
    run_on_cpu("aten::multinomial", "out", {self, n_sample, with_replacement, gen, result});
    return result;
  }
  if (result.numel() == 0) return result;
  const int64_t rows = self.dim() == 2 ? self.size(0) : 1;
  Task task(NK_KERNEL_MULTINOMIAL, "aten::multinomial", 2);
  describe_or_fail(result, task.operand(0), "multinomial");
  describe_or_fail(self, task.operand(1), "multinomial");
  const uint64_t blocks = static_cast<uint64_t>(rows) *
                          static_cast<uint64_t>(with_replacement ? n_sample : n_categories);
  const PhiloxState st = philox_reserve(gen, self.device().index(), 4 * blocks);
  auto* p = task.params<nk_multinomial_params>();
  p->seed = st.seed;
  p->offset = st.offset;
  p->replacement = with_replacement;
  launch(self.device().index(), task);
  return result;
}

Tensor multinomial(const Tensor& self, int64_t n_sample, bool with_replacement,
                   std::optional<at::Generator> gen) {
  Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  multinomial_out(self, n_sample, with_replacement, std::move(gen), result);
  return result;
}

// ATen's native_dropout_cpu: the mask is bernoulli(1 - p) (bool), the output
// input * mask * 1/(1 - p).
std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input, input.options())};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double p1m = 1. - p;
  const double scale = p1m == 0 ? 0. : 1. / p1m;
  Tensor mask = at::empty_like(input, input.options().dtype(at::kBool), at::MemoryFormat::Contiguous);
  mask.bernoulli_(p1m);
  Tensor output = input.mul(mask).mul_(scale);
  return {output, mask};
}

Tensor native_dropout_backward(const Tensor& grad_output, const Tensor& mask, double scale) {
  return grad_output.mul(mask).mul(scale);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", TORCH_FN(sort_stable));
  m.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topk_values));
  m.impl("kthvalue.values", TORCH_FN(kthvalue_values));
  m.impl("median.dim_values", TORCH_FN(median_dim_values));
  m.impl("median", TORCH_FN(median));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedian_dim_values));
  m.impl("nanmedian", TORCH_FN(nanmedian));
  m.impl("mode", TORCH_FN(mode));
  m.impl("mode.values", TORCH_FN(mode_values));
  m.impl("searchsorted.Tensor", TORCH_FN(searchsorted_tensor));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsorted_out));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsorted_scalar));
  m.impl("bucketize.Tensor", TORCH_FN(bucketize_tensor));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketize_out));
  m.impl("bucketize.Scalar", TORCH_FN(bucketize_scalar));
  m.impl("_unique2", TORCH_FN(unique2));
  m.impl("_unique", TORCH_FN(unique));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive));
  m.impl("unique_dim", TORCH_FN(unique_dim));
  m.impl("unique_dim_consecutive", TORCH_FN(unique_dim_consecutive));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor_));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
}

}  // namespace torch_neuronx
