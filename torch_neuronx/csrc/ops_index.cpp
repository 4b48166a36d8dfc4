// ops_index.cpp — gather/scatter/index/masked ops on neuron.
//
// Three kernels do all of it (see neuron_kernels.h):
//   GATHER_SCATTER  gather, scatter (src, value, reduce=), scatter_add,
//                   scatter_reduce.two, index_select, index_add,
//                   index_reduce, embedding's backward (1-d indices become a stride-0 index operand);
//   INDEX           ATen's advanced-index iterator: index.Tensor, index_put_
//                   (_index_put_impl_), take, put_, index_fill_, index_copy;
//   MASKED          masked_fill_, masked_scatter_, masked_select, nonzero.
//
// Where ATen's CPU and CUDA share one implementation (structured gather and
// scatter*, index.Tensor, index_copy, _index_put_impl_, take, put_,
// index_fill_) that implementation runs here with its checks and messages,
// and only its DispatchStub (gather_stub, index_stub, ...) is ours.  Ops
// with device-specific implementations (index_select, index_add,
// scatter_reduce.two, masked_*, nonzero, embedding_dense_backward) have
// their own glue below that uses ATen's check helpers.
//
// Every index is checked by the kernel: an index out of range fails the
// task ("index I is out of bounds for dimension D with size S"), raised as
// RuntimeError at the next synchronisation, and nothing outside the tensor
// is touched.  nonzero and masked_select count first and read the count
// back (a host sync, as CUDA does).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/IndexKernel.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/ReductionType.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/native/TensorAdvancedIndexing.h>
#include <ATen/native/TensorAdvancedIndexingUtils.h>
#include <ATen/ops/_index_put_impl_native.h>
#include <ATen/ops/gather_native.h>
#include <ATen/ops/index_add_meta.h>
#include <ATen/ops/index_copy_native.h>
#include <ATen/ops/index_fill_native.h>
#include <ATen/ops/index_native.h>
#include <ATen/ops/index_reduce_meta.h>
#include <ATen/ops/put_native.h>
#include <ATen/ops/scatter_add_native.h>
#include <ATen/ops/scatter_native.h>
#include <ATen/ops/scatter_reduce_meta.h>
#include <ATen/ops/take_native.h>
#include <torch/library.h>

#include "fallback.h"
#include "launch.h"
#include "ops.h"
#include "structured.h"

namespace torch_neuronx {
namespace {

nrt_operand operand_of(const at::TensorBase& t) {
  nrt_operand op;
  TORCH_CHECK(describe(t, &op), "neuron: cannot describe a tensor of dtype ", t.scalar_type(),
              " with ", t.dim(), " dims");
  return op;
}

// A 1-d (or 0-dim) index as an operand of `like`'s shape that advances
// only along `dim` (stride 0 elsewhere): index_select/index_add as gather/
// scatter.
nrt_operand expanded_index(const at::Tensor& index, const at::Tensor& like, int64_t dim) {
  TORCH_CHECK(index.device() == like.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              like.device(), " and ", index.device(), "! (the index)");
  nrt_operand op = operand_of(index);
  const int64_t step = index.dim() == 0 ? 0 : index.stride(0) * index.element_size();
  op.ndim = static_cast<int32_t>(like.dim());
  for (int64_t d = 0; d < like.dim(); ++d) {
    op.sizes[d] = like.size(d);
    op.strides[d] = d == dim ? step : 0;
  }
  return op;
}

nk_scatter_op scatter_op_of(at::native::ReductionType r) {
  switch (r) {
    case at::native::ReductionType::SUM: return NK_SCATTER_ADD;
    case at::native::ReductionType::PROD: return NK_SCATTER_MUL;
    case at::native::ReductionType::MEAN: return NK_SCATTER_MEAN;
    case at::native::ReductionType::MAX: return NK_SCATTER_AMAX;
    case at::native::ReductionType::MIN: return NK_SCATTER_AMIN;
  }
  return NK_SCATTER_ADD;
}

struct GatherScatter {
  bool gather = false;
  int64_t dim = 0;
  nk_scatter_op op = NK_SCATTER_ASSIGN;
  const c10::Scalar* value = nullptr;
  bool include_self = true;
  bool wrap = false;
  std::optional<int64_t> skip;
  c10::Scalar alpha = 1;
};

// operands: [0] written, [1] index, [2] other (optional), [3] count (optional)
void launch_gather_scatter(const char* name, const GatherScatter& g, const at::Tensor& dst,
                           const nrt_operand& index, const at::Tensor* other,
                           const at::Tensor* count = nullptr) {
  TORCH_CHECK(!other || other->device() == dst.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              dst.device(), " and ", other->device(), "! (in ", name, ")");
  Task task(NK_KERNEL_GATHER_SCATTER, name, 2);
  *task.operand(0) = operand_of(dst);
  *task.operand(1) = index;
  if (other) *task.operand(task.t.n_operands++) = operand_of(*other);
  if (count) *task.operand(task.t.n_operands++) = operand_of(*count);
  auto* p = task.params<nk_gather_scatter_params>();
  p->gather = g.gather;
  p->dim = static_cast<int32_t>(g.dim);
  p->op = g.op;
  p->has_value = g.value != nullptr;
  if (g.value) p->value = scalar_for_store(*g.value, dst.scalar_type());
  p->include_self = g.include_self;
  p->wrap = g.wrap;
  p->has_skip = g.skip.has_value();
  p->skip = g.skip.value_or(0);
  p->alpha = scalar_for_compute(g.alpha, dst.scalar_type());
  launch(dst.device().index(), task);
}

void launch_gather_scatter(const char* name, const GatherScatter& g, const at::Tensor& dst,
                           const at::Tensor& index, const at::Tensor* other,
                           const at::Tensor* count = nullptr) {
  if (index.numel() == 0) return;
  TORCH_CHECK(index.device() == dst.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              dst.device(), " and ", index.device(), "! (index of ", name, ")");
  launch_gather_scatter(name, g, dst, operand_of(index), other, count);
}

// ---- the stubs of ATen's shared gather/scatter implementations -----------

void gather_kernel(const at::Tensor& result, const at::Tensor& self, int64_t dim,
                   const at::Tensor& index) {
  GatherScatter g;
  g.gather = true;
  g.dim = dim;
  launch_gather_scatter("aten::gather", g, result, index, &self);
}

void scatter_kernel(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                    const at::Tensor& src) {
  GatherScatter g;
  g.dim = dim;
  launch_gather_scatter("aten::scatter", g, self, index, &src);
}

void scatter_fill_kernel(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const c10::Scalar& value) {
  GatherScatter g;
  g.dim = dim;
  g.value = &value;
  launch_gather_scatter("aten::scatter", g, self, index, nullptr);
}

void scatter_add_kernel(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                        const at::Tensor& src) {
  GatherScatter g;
  g.dim = dim;
  g.op = NK_SCATTER_ADD;
  launch_gather_scatter("aten::scatter_add", g, self, index, &src);
}

void scatter_reduce_kernel(const at::Tensor& self, const int64_t dim, const at::Tensor& index,
                           const at::Tensor& src, const at::native::ReductionType& reduce) {
  GatherScatter g;
  g.dim = dim;
  g.op = scatter_op_of(reduce);
  launch_gather_scatter("aten::scatter", g, self, index, &src);
}

void scatter_scalar_reduce_kernel(const at::Tensor& self, const int64_t dim, const at::Tensor& index,
                                  const c10::Scalar& value, const at::native::ReductionType& reduce) {
  GatherScatter g;
  g.dim = dim;
  g.op = scatter_op_of(reduce);
  g.value = &value;
  launch_gather_scatter("aten::scatter", g, self, index, nullptr);
}

// ---- the INDEX kernel's stubs ---------------------------------------------

at::Tensor device_scalar(const c10::Scalar& v, c10::ScalarType dtype, c10::Device device) {
  at::Tensor t = empty_neuron({}, dtype, device);
  fill_scalar(t, v);
  return t;
}

struct IndexLaunch {
  Task task;
  std::vector<at::Tensor> keep;
  explicit IndexLaunch(const char* name) : task(NK_KERNEL_INDEX, name, 0) {}
  nk_index_params* params() { return task.params<nk_index_params>(); }
  void add(const nrt_operand& op) { *task.operand(task.t.n_operands++) = op; }
  void add(const at::TensorIteratorBase& iter, int arg) {
    if (iter.is_cpu_scalar(arg)) {  // a 0-dim CPU value: copied, never read from the host
      add_broadcast(iter, device_scalar(at::Tensor(iter.tensor_base(arg)).item(), iter.dtype(arg),
                                        iter.device(0)));
      return;
    }
    nrt_operand op;
    TORCH_CHECK(describe(iter, arg, &op), "neuron index: operand ", arg, " is not native");
    add(op);
  }
  // a device tensor t seen with iter's shape and stride 0 everywhere
  void add_broadcast(const at::TensorIteratorBase& iter, const at::Tensor& t) {
    nrt_operand op;
    TORCH_CHECK(describe(iter, 0, &op));
    op.data = const_cast<void*>(t.const_data_ptr());
    op.dtype = native_dtype(t.scalar_type());
    for (int d = 0; d < op.ndim; ++d) op.strides[d] = 0;
    add(op);
    keep.push_back(t);
  }
  void indexed(int64_t size, int64_t stride_bytes) {
    auto* p = params();
    TORCH_CHECK(p->n_indices < NK_INDEX_MAX_INDICES, "neuron: at most ", NK_INDEX_MAX_INDICES,
                " index tensors");
    p->sizes[p->n_indices] = size;
    p->strides[p->n_indices] = stride_bytes;
    p->n_indices++;
  }
  void run(c10::DeviceIndex device) { launch(device, task); }
};

void index_kernel(at::TensorIteratorBase& iter, at::IntArrayRef indexed_sizes,
                  at::IntArrayRef indexed_strides) {
  if (iter.numel() == 0) return;
  IndexLaunch l("aten::index");
  TORCH_CHECK(indexed_sizes.size() <= NK_INDEX_MAX_INDICES, "neuron: at most ",
              NK_INDEX_MAX_INDICES, " index tensors");
  for (int i = 0; i < iter.ntensors(); ++i) l.add(iter, i);
  for (size_t k = 0; k < indexed_sizes.size(); ++k) l.indexed(indexed_sizes[k], indexed_strides[k]);
  l.run(iter.device(0).index());
}

void index_put_kernel(at::TensorIterator& iter, at::IntArrayRef indexed_sizes,
                      at::IntArrayRef indexed_strides, bool accumulate) {
  if (iter.numel() == 0) return;
  IndexLaunch l("aten::index_put_");
  TORCH_CHECK(indexed_sizes.size() <= NK_INDEX_MAX_INDICES, "neuron: at most ",
              NK_INDEX_MAX_INDICES, " index tensors");
  for (int i = 0; i < iter.ntensors(); ++i) l.add(iter, i);
  for (size_t k = 0; k < indexed_sizes.size(); ++k) l.indexed(indexed_sizes[k], indexed_strides[k]);
  l.params()->put = 1;
  l.params()->accumulate = accumulate;
  l.run(iter.device(0).index());
}

// ATen's make_info + AdvancedIndex (whose constructor libtorch does not
// export): indices expanded (bool masks through nonzero), broadcast,
// moved to the front when not adjacent; src restrided with stride 0 and the
// index shape in the indexed dims.
struct IndexInfo {
  at::Tensor src;
  std::vector<at::Tensor> indices;
  std::vector<int64_t> indexed_sizes, indexed_strides;
};

IndexInfo make_index_info(at::Tensor self, const c10::List<std::optional<at::Tensor>>& orig) {
  at::native::checkIndexTensorTypes(orig, /*allow_int*/ true);
  auto indices = at::native::expandTensors(self, orig, /*ensure_same_device=*/true);
  try {
    indices = at::expand_outplace(indices);
  } catch (std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      at::native::shapes_as_str(indices));
  }
  while (indices.size() < static_cast<size_t>(self.dim())) indices.emplace_back();
  if (!at::native::hasContiguousSubspace(indices)) {
    std::tie(self, indices) = at::native::transposeToFront(self, indices);
  }
  IndexInfo info;
  int64_t dims_before = 0, dims_after = 0, dims_indexed = 0;
  at::IntArrayRef replacement;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d].defined()) {
      (dims_indexed == 0 ? dims_before : dims_after)++;
      continue;
    }
    dims_indexed++;
    replacement = indices[d].sizes();
    info.indexed_sizes.push_back(self.size(static_cast<int64_t>(d)));
    info.indexed_strides.push_back(self.stride(static_cast<int64_t>(d)) * self.element_size());
  }
  if (std::find(info.indexed_sizes.begin(), info.indexed_sizes.end(), 0) != info.indexed_sizes.end() &&
      std::find(replacement.begin(), replacement.end(), 0) == replacement.end()) {
    TORCH_CHECK_INDEX(false, "index is out of bounds for dimension with size 0");
  }
  auto shape = self.sizes().vec();
  auto strides = self.strides().vec();
  shape.erase(shape.begin() + dims_before, shape.begin() + dims_before + dims_indexed);
  strides.erase(strides.begin() + dims_before, strides.begin() + dims_before + dims_indexed);
  shape.insert(shape.begin() + dims_before, replacement.begin(), replacement.end());
  strides.insert(strides.begin() + dims_before, replacement.size(), 0);
  info.src = self.as_strided(shape, strides);
  for (auto& index : indices) {
    if (!index.defined()) continue;
    at::Tensor i = index.scalar_type() == at::kInt ? index.to(at::kLong) : index;
    std::vector<int64_t> s(dims_before, 1);
    s.insert(s.end(), i.sizes().begin(), i.sizes().end());
    s.insert(s.end(), dims_after, 1);
    info.indices.push_back(i.reshape(s));
  }
  return info;
}

// _index_put_impl_ sends accumulate (and deterministic) puts on non-CPU
// devices here; the INDEX kernel's put is serial, so deterministic already.
void index_put_with_sort_kernel(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                const at::Tensor& value_arg, bool accumulate, bool unsafe) {
  (void)unsafe;
  at::Tensor value = value_arg;
  if (value.device() != self.device() && value.numel() == 1 && value.dim() == 0) {
    value = value.to(self.device());
  }
  IndexInfo info = make_index_info(self, indices);
  TORCH_CHECK(at::is_expandable_to(value.sizes(), info.src.sizes()), "shape mismatch: value tensor of shape ",
              value.sizes(), " cannot be broadcast to indexing result of shape ", info.src.sizes());
  TORCH_CHECK(value.scalar_type() == info.src.scalar_type(),
              "Index put requires the source and destination dtypes match, got ", info.src.scalar_type(),
              " for the destination and ", value.scalar_type(), " for the source.");
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(false);
  config.resize_outputs(false);
  config.check_all_same_dtype(false);
  config.add_output(info.src);
  config.add_const_input(value);
  for (auto& index : info.indices) config.add_const_input(index);
  auto iter = config.build();
  index_put_kernel(iter, info.indexed_sizes, info.indexed_strides, accumulate);
}

// iter: [0] self restrided (stride 0 along dim), [1] index restrided
void index_fill_kernel(at::TensorIterator& iter, int64_t dim, int64_t self_dim_size,
                       int64_t self_dim_stride, const c10::Scalar& source) {
  (void)dim;
  if (iter.numel() == 0) return;
  IndexLaunch l("aten::index_fill_");
  l.add(iter, 0);
  l.add_broadcast(iter, device_scalar(source, iter.dtype(0), iter.device(0)));
  l.add(iter, 1);
  l.indexed(self_dim_size, self_dim_stride * static_cast<int64_t>(c10::elementSize(iter.dtype(0))));
  l.params()->put = 1;
  l.run(iter.device(0).index());
}

// iter: [0] result restrided, [1] index restrided, [2] source
void index_copy_kernel(at::TensorIterator& iter, int64_t dim, int64_t self_dim_size,
                       int64_t self_dim_stride) {
  (void)dim;
  if (iter.numel() == 0) return;
  IndexLaunch l("aten::index_copy");
  l.add(iter, 0);
  l.add(iter, 2);
  l.add(iter, 1);
  l.indexed(self_dim_size, self_dim_stride * static_cast<int64_t>(c10::elementSize(iter.dtype(0))));
  l.params()->put = 1;
  l.params()->nowrap = 1;
  l.run(iter.device(0).index());
}

// iter: [0] out, [1] index; out[i] = input.flatten()[index[i]]
void take_kernel(at::TensorIterator& iter, const at::TensorBase& input) {
  if (iter.numel() == 0) return;
  at::Tensor flat = at::Tensor(input).contiguous();
  IndexLaunch l("aten::take");
  l.add(iter, 0);
  l.add_broadcast(iter, flat);
  l.add(iter, 1);
  l.indexed(flat.numel(), flat.element_size());
  l.run(iter.device(0).index());
}

// iter: [0] source, [1] index (inputs); self.flatten()[index[i]] (+)= source[i]
void put_kernel(at::TensorIterator& iter, const at::TensorBase& self_base, const bool accumulate) {
  if (iter.numel() == 0) return;
  at::Tensor self(self_base);
  at::Tensor flat = self.is_contiguous() ? self : self.contiguous();
  IndexLaunch l("aten::put_");
  l.add_broadcast(iter, flat);
  l.add(iter, 0);
  l.add(iter, 1);
  l.indexed(flat.numel(), flat.element_size());
  l.params()->put = 1;
  l.params()->accumulate = accumulate;
  l.run(iter.device(0).index());
  if (!flat.is_same(self)) copy_on_device(self, flat);
}

// ---- structured ops whose impl is device specific (or has precompute) -----

// index_add: self[..., index[j], ...] += alpha * source[..., j, ...]
struct IndexAdd : at::meta::structured_index_add {
  void impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
            const c10::Scalar& alpha, const at::Tensor& result) {
    if (!result.is_same(self)) result.copy_(self);
    if (index.numel() == 0) return;
    at::Tensor r = result.dim() == 0 ? result.unsqueeze(0) : result;
    at::Tensor s = source.dim() == 0 ? source.unsqueeze(0) : source;
    GatherScatter g;
    g.dim = dim;
    g.op = NK_SCATTER_ADD;
    g.alpha = alpha;
    launch_gather_scatter("aten::index_add", g, r, expanded_index(index, s, dim), &s);
  }
};

// index_reduce: self[..., index[j], ...] = reduce(self?, source[..., j, ...])
struct IndexReduce : at::meta::structured_index_reduce {
  void impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
            c10::string_view reduce, bool include_self, const at::Tensor& result) {
    if (!result.is_same(self)) result.copy_(self);
    if (index.numel() == 0) return;
    at::Tensor r = result.dim() == 0 ? result.unsqueeze(0) : result;
    at::Tensor s = source.dim() == 0 ? source.unsqueeze(0) : source;
    GatherScatter g;
    g.dim = dim;
    g.op = scatter_op_of(at::native::get_reduction_enum(reduce));
    g.include_self = include_self;
    at::Tensor count;
    if (g.op == NK_SCATTER_MEAN) {
      count = empty_neuron(r.sizes(), at::kLong, r.device());
      fill_scalar(count, 0);
    }
    launch_gather_scatter("aten::index_reduce", g, r, expanded_index(index, s, dim), &s,
                          count.defined() ? &count : nullptr);
  }
};

struct ScatterReduceTwo : at::meta::structured_scatter_reduce_two {
  void impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
            c10::string_view reduce, bool include_self, const at::Tensor& out) {
    dim = at::maybe_wrap_dim(dim, self.dim());
    if (!self.is_same(out)) out.copy_(self);
    if (index.numel() == 0) return;
    GatherScatter g;
    g.dim = dim;
    g.op = scatter_op_of(at::native::get_reduction_enum(reduce));
    g.include_self = include_self;
    at::Tensor count;
    if (g.op == NK_SCATTER_MEAN) {
      count = empty_neuron(out.sizes(), at::kLong, out.device());
      fill_scalar(count, 0);
    }
    launch_gather_scatter("aten::scatter_reduce", g, out, index, &src,
                          count.defined() ? &count : nullptr);
  }
};

// Structured ops whose meta returns a precompute struct with the wrapped
// dim (index_add, index_copy): impl takes that dim.
template <class Op, class... Rest>
struct WithDim {
  static const char* name;
  static at::Tensor functional(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& source, Rest... rest) {
    if (!structured::all_native(self, index, source)) {
      return run_on_cpu(name, "", {self, dim, index, source, rest...}).toTensor();
    }
    structured::Functional<Op, 1> op;
    auto pre = op.meta(self, dim, index, source, rest...);
    op.impl(self, pre.dim, index, source, rest..., op.output(0));
    return std::move(op.outputs_[0]);
  }
  static at::Tensor& inplace(at::Tensor& self, int64_t dim, const at::Tensor& index,
                             const at::Tensor& source, Rest... rest) {
    if (!structured::all_native(self, index, source)) {
      run_on_cpu((std::string(name) + "_").c_str(), "", {self, dim, index, source, rest...});
      return self;
    }
    structured::Inplace<Op> op(self);
    auto pre = op.meta(self, dim, index, source, rest...);
    op.impl(self, pre.dim, index, source, rest..., op.output(0));
    op.copy_back();
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor& source, Rest... rest, at::Tensor& result) {
    if (!structured::all_native(self, index, source, result)) {
      run_on_cpu(name, "out", {self, dim, index, source, rest..., result});
      return result;
    }
    structured::Out<Op, 1> op(result);
    auto pre = op.meta(self, dim, index, source, rest...);
    op.impl(self, pre.dim, index, source, rest..., op.output(0));
    op.copy_back();
    return result;
  }
};
template <>
const char* WithDim<IndexAdd, const c10::Scalar&>::name = "aten::index_add";
template <>
const char* WithDim<at::native::structured_index_copy_out>::name = "aten::index_copy";
template <>
const char* WithDim<IndexReduce, c10::string_view, bool>::name = "aten::index_reduce";

// ---- index.Tensor ----------------------------------------------------------

// How many index operands the kernel needs (a bool mask indexes mask.dim()
// dims); more than the kernel takes go to the CPU.
bool index_fits(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (!is_native_dtype(self.scalar_type())) return false;
  int64_t n = 0;
  for (const std::optional<at::Tensor>& t : indices) {
    if (!t.has_value() || !t->defined()) continue;
    const auto st = t->scalar_type();
    n += (st == at::kBool || st == at::kByte) ? std::max<int64_t>(t->dim(), 1) : 1;
  }
  return n <= NK_INDEX_MAX_INDICES;
}

at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (!index_fits(self, indices)) return run_on_cpu("aten::index", "Tensor", {self, indices}).toTensor();
  structured::Functional<at::native::structured_index_out, 1> op;
  auto pre = op.meta(self, at::IOptTensorListRef(indices));
  op.impl(self, pre.sizes, pre.strides, op.output(0));
  return std::move(op.outputs_[0]);
}

at::Tensor& index_tensor_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                             at::Tensor& out) {
  if (!index_fits(self, indices) || !is_native_dtype(out.scalar_type())) {
    run_on_cpu("aten::index", "Tensor_out", {self, indices, out});
    return out;
  }
  structured::Out<at::native::structured_index_out, 1> op(out);
  auto pre = op.meta(self, at::IOptTensorListRef(indices));
  op.impl(self, pre.sizes, pre.strides, op.output(0));
  op.copy_back();
  return out;
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  if (!index_fits(self, indices) || !is_native_dtype(values.scalar_type())) {
    run_on_cpu("aten::_index_put_impl_", "", {self, indices, values, accumulate, unsafe});
    return self;
  }
  return at::native::_index_put_impl_(self, indices, values, accumulate, unsafe);
}

// ---- take / put_ / index_fill_ (shared ATen code, our stubs) ---------------

at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu("aten::take", "", {self, index}).toTensor();
  return at::native::take(self, index);
}

// ---- index_select ------------------------------------------------------------

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& result) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(result.scalar_type())) {
    run_on_cpu("aten::index_select", "out", {self, dim, index, result});
    return result;
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t numel = index.numel();
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(!(self.dim() == 0 && numel != 1),
              "index_select(): Index to scalar can have only 1 value, got ", numel, " value(s)");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == result.scalar_type(),
              "index_select(): self and result must have the same scalar type");
  TORCH_CHECK(self.device() == index.device() && self.device() == result.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", index.device() == self.device() ? result.device() : index.device(),
              "! (when checking argument for argument index in method wrapper_PrivateUse1__index_select)");
  at::assert_no_internal_overlap(result);
  at::assert_no_overlap(result, self);
  at::assert_no_overlap(result, index);
  auto sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[dim] = numel;
  at::native::resize_output(result, sizes);
  if (result.numel() == 0) return result;
  at::Tensor out = result.dim() == 0 ? result.unsqueeze(0) : result;
  at::Tensor src = self.dim() == 0 ? self.unsqueeze(0) : self;
  GatherScatter g;
  g.gather = true;
  g.dim = dim;
  launch_gather_scatter("aten::index_select", g, out, expanded_index(index, out, dim), &src);
  return result;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  if (!is_native_dtype(self.scalar_type())) {
    return run_on_cpu("aten::index_select", "", {self, dim, index}).toTensor();
  }
  at::Tensor result = empty_neuron({0}, self.scalar_type(), self.device());
  return index_select_out(self, dim, index, result);
}

// ---- embedding backward -------------------------------------------------------

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices,
                                   c10::SymInt num_weights_s, c10::SymInt padding_idx_s,
                                   bool scale_grad_by_freq) {
  const int64_t num_weights = num_weights_s.expect_int();
  const int64_t padding_idx = padding_idx_s.expect_int();
  if (!is_native_dtype(grad.scalar_type())) {
    return run_on_cpu("aten::embedding_dense_backward", "",
                      {grad, indices, num_weights, padding_idx, scale_grad_by_freq})
        .toTensor();
  }
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_dense_backward: Expected indices of dtype int32 or int64, got ",
              indices.scalar_type());
  const int64_t d = grad.size(-1);
  at::Tensor grad_weight = empty_neuron({num_weights, d}, grad.scalar_type(), grad.device());
  fill_scalar(grad_weight, 0);
  at::Tensor idx = indices.reshape({-1});
  if (idx.numel() == 0) return grad_weight;
  at::Tensor g2 = grad.reshape({idx.numel(), d});
  GatherScatter g;
  g.dim = 0;
  g.op = NK_SCATTER_ADD;
  if (padding_idx >= 0) g.skip = padding_idx;
  at::Tensor count;
  if (scale_grad_by_freq) {
    // each row's sum divided by how often its index occurs: a mean
    g.op = NK_SCATTER_MEAN;
    g.include_self = false;
    count = empty_neuron(grad_weight.sizes(), at::kLong, grad.device());
    fill_scalar(count, 0);
  }
  launch_gather_scatter("aten::embedding_dense_backward", g, grad_weight,
                        expanded_index(idx, g2, 0), &g2, count.defined() ? &count : nullptr);
  return grad_weight;
}

// ---- masked ops -----------------------------------------------------------------

void launch_masked(const char* name, nk_masked_mode mode, int64_t count, c10::DeviceIndex device,
                   std::initializer_list<nrt_operand> ops, const nk_scalar* value = nullptr) {
  Task task(NK_KERNEL_MASKED, name, 0);
  for (const nrt_operand& op : ops) *task.operand(task.t.n_operands++) = op;
  auto* p = task.params<nk_masked_params>();
  p->mode = mode;
  p->count = count;
  if (value) p->value = *value;
  launch(device, task);
}

// The number of nonzero elements of t (reads it back: a sync).
int64_t count_nonzero_sync(const char* name, const at::Tensor& t) {
  at::Tensor c = empty_neuron({}, at::kLong, t.device());
  launch_masked(name, NK_MASKED_COUNT, 0, t.device().index(), {operand_of(c), operand_of(t)});
  return c.item<int64_t>();
}

// What cuda's masked ops say for a mask on another device.
void check_mask_device(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(self.device() == mask.device(), "expected self and mask to be on the same device, but got mask on ",
              mask.device(), " and self on ", self.device());
}

at::Tensor& masked_fill_impl(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  check_mask_device(self, mask);
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    TORCH_WARN("Use of masked_fill_ on expanded tensors is deprecated. "
               "Please clone() the tensor before performing this operation. "
               "This also applies to advanced indexing e.g. tensor[mask] = scalar");
  }
  at::assert_no_partial_overlap(self, mask);
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(self)
                  .add_const_input(mask)
                  .build();
  if (iter.numel() == 0) return self;
  nrt_operand o, m;
  TORCH_CHECK(describe(iter, 0, &o) && describe(iter, 1, &m), "masked_fill_: operands not native");
  const nk_scalar v = scalar_for_store(value, self.scalar_type());
  launch_masked("aten::masked_fill_", NK_MASKED_FILL, 0, self.device().index(), {o, m}, &v);
  return self;
}

at::Tensor& masked_fill_scalar(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  if (!is_native_dtype(self.scalar_type()) || value.isComplex()) {
    run_on_cpu("aten::masked_fill_", "Scalar", {self, mask, value});
    return self;
  }
  return masked_fill_impl(self, mask, value);
}

at::Tensor& masked_fill_tensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(value.scalar_type())) {
    run_on_cpu("aten::masked_fill_", "Tensor", {self, mask, value});
    return self;
  }
  return masked_fill_impl(self, mask, value.item());
}

at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  if (!is_native_dtype(self.scalar_type())) {
    run_on_cpu("aten::masked_scatter_", "", {self, mask, source});
    return self;
  }
  at::assert_no_internal_overlap(self);
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got ",
              self.scalar_type(), " and ", source.scalar_type());
  TORCH_CHECK(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte,
              "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  check_mask_device(self, mask);
  TORCH_CHECK(source.device() == self.device(), "masked_scatter_: expected source on ", self.device(),
              " but got ", source.device());
  auto b_mask = at::expand_inplace(self, mask, "masked_scatter_");
  if (self.numel() == 0) return self;
  at::Tensor src = source.contiguous().view({-1});
  launch_masked("aten::masked_scatter_", NK_MASKED_SCATTER, 0, self.device().index(),
                {operand_of(self), operand_of(*b_mask), operand_of(src)});
  return self;
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& result) {
  if (!is_native_dtype(self.scalar_type()) || !is_native_dtype(result.scalar_type())) {
    run_on_cpu("aten::masked_select", "out", {self, mask, result});
    return result;
  }
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == result.scalar_type(),
              "masked_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(result);
  at::assert_no_overlap(result, self);
  at::assert_no_overlap(result, mask);
  check_mask_device(self, mask);
  auto [m, s] = at::expand_outplace(mask, self);
  const int64_t n = count_nonzero_sync("aten::masked_select", *m);
  at::native::resize_output(result, {n});
  if (n == 0) return result;
  launch_masked("aten::masked_select", NK_MASKED_SELECT, n, self.device().index(),
                {operand_of(result), operand_of(*m), operand_of(*s)});
  return result;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  if (!is_native_dtype(self.scalar_type())) {
    return run_on_cpu("aten::masked_select", "", {self, mask}).toTensor();
  }
  at::Tensor result = empty_neuron({0}, self.scalar_type(), self.device());
  return masked_select_out(self, mask, result);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& result) {
  if (!is_native_dtype(self.scalar_type())) {
    run_on_cpu("aten::nonzero", "out", {self, result});
    return result;
  }
  TORCH_CHECK(result.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              result.scalar_type());
  TORCH_CHECK(self.device() == result.device(),
              "expected self and result to be on the same device, but got ", self.device(), " and ",
              result.device());
  TORCH_CHECK(self.numel() < std::numeric_limits<int>::max(),
              "nonzero is not supported for tensors with more than INT_MAX elements, "
              "See https://github.com/pytorch/pytorch/issues/51871");
  const int64_t n = self.numel() == 0 ? 0 : count_nonzero_sync("aten::nonzero", self);
  at::native::resize_output(result, {n, self.dim()});
  if (n == 0 || self.dim() == 0) return result;
  launch_masked("aten::nonzero", NK_MASKED_NONZERO, n, self.device().index(),
                {operand_of(result), operand_of(self)});
  return result;
}

at::Tensor nonzero(const at::Tensor& self) {
  if (!is_native_dtype(self.scalar_type())) return run_on_cpu("aten::nonzero", "", {self}).toTensor();
  at::Tensor result = empty_neuron({0, self.dim()}, at::kLong, self.device());
  return nonzero_out(self, result);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace structured;
  using T = const at::Tensor&;
  using S = const c10::Scalar&;
  Structured<at::native::structured_gather_out, T, int64_t, T, bool>::register_ops(
      m, "gather", nullptr, "gather.out");
  Structured<at::native::structured_scatter_src_out, T, int64_t, T, T>::register_ops(
      m, "scatter.src", "scatter_.src", "scatter.src_out");
  Structured<at::native::structured_scatter_value_out, T, int64_t, T, S>::register_ops(
      m, "scatter.value", "scatter_.value", "scatter.value_out");
  Structured<at::native::structured_scatter_reduce_out, T, int64_t, T, T, c10::string_view>::register_ops(
      m, "scatter.reduce", "scatter_.reduce", "scatter.reduce_out");
  Structured<at::native::structured_scatter_value_reduce_out, T, int64_t, T, S, c10::string_view>::register_ops(
      m, "scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out");
  Structured<at::native::structured_scatter_add, T, int64_t, T, T>::register_ops(
      m, "scatter_add", "scatter_add_", "scatter_add.out");
  Structured<ScatterReduceTwo, T, int64_t, T, T, c10::string_view, bool>::register_ops(
      m, "scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out");

  using IndexAddOps = WithDim<IndexAdd, S>;
  m.impl("index_add", TORCH_FN(IndexAddOps::functional));
  m.impl("index_add_", TORCH_FN(IndexAddOps::inplace));
  m.impl("index_add.out", TORCH_FN(IndexAddOps::out));
  using IndexReduceOps = WithDim<IndexReduce, c10::string_view, bool>;
  m.impl("index_reduce", TORCH_FN(IndexReduceOps::functional));
  m.impl("index_reduce_", TORCH_FN(IndexReduceOps::inplace));
  m.impl("index_reduce.out", TORCH_FN(IndexReduceOps::out));
  using IndexCopyOps = WithDim<at::native::structured_index_copy_out>;
  m.impl("index_copy", TORCH_FN(IndexCopyOps::functional));
  m.impl("index_copy_", TORCH_FN(IndexCopyOps::inplace));
  m.impl("index_copy.out", TORCH_FN(IndexCopyOps::out));

  m.impl("index.Tensor", TORCH_FN(index_tensor));
  m.impl("index.Tensor_out", TORCH_FN(index_tensor_out));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl));
  m.impl("take", TORCH_FN(take));
  using structured::Shared;
  using IndexFillScalar = at::Tensor& (*)(at::Tensor&, int64_t, const at::Tensor&, const c10::Scalar&);
  using IndexFillTensor = at::Tensor& (*)(at::Tensor&, int64_t, const at::Tensor&, const at::Tensor&);
  Shared<at::native::take_out>::register_op(m, "take.out");
  Shared<at::native::put_>::register_op(m, "put_");
  Shared<static_cast<IndexFillScalar>(at::native::index_fill_)>::register_op(m, "index_fill_.int_Scalar");
  Shared<static_cast<IndexFillTensor>(at::native::index_fill_)>::register_op(m, "index_fill_.int_Tensor");
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_select.out", TORCH_FN(index_select_out));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_scalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_tensor));
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(gather_stub, &torch_neuronx::gather_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(scatter_stub, &torch_neuronx::scatter_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(scatter_fill_stub, &torch_neuronx::scatter_fill_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(scatter_add_stub, &torch_neuronx::scatter_add_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(scatter_reduce_stub, &torch_neuronx::scatter_reduce_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(scatter_scalar_reduce_stub, &torch_neuronx::scatter_scalar_reduce_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(index_stub, &torch_neuronx::index_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(index_put_stub, &torch_neuronx::index_put_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(index_put_with_sort_stub, &torch_neuronx::index_put_with_sort_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(index_fill_stub, &torch_neuronx::index_fill_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(index_copy_stub, &torch_neuronx::index_copy_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(take_stub, &torch_neuronx::take_kernel)
REGISTER_PRIVATEUSE1_DISPATCH(put_stub, &torch_neuronx::put_kernel)
}  // namespace at::native
