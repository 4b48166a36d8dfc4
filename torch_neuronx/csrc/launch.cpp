// launch.cpp — ATen tensors and scalars in the runtime's terms (see launch.h).
#include "launch.h"

#include <ATen/Dispatch.h>
#include <c10/util/Half.h>
#include <c10/util/BFloat16.h>

#include <cmath>
#include <limits>

#include "neuron_check.h"
#include "ops.h"
#include "neuron_stream.h"

namespace torch_neuronx {

nrt_dtype native_dtype(c10::ScalarType t) {
  nrt_dtype d = NRT_FLOAT32;
  TORCH_INTERNAL_ASSERT(to_nrt_dtype(t, &d), "native_dtype of ", t);
  return d;
}

bool describe(const at::TensorBase& t, nrt_operand* out) {
  nrt_dtype dtype;
  const int64_t ndim = t.dim();
  if (!to_nrt_dtype(t.scalar_type(), &dtype) || ndim > NRT_MAX_DIMS) return false;
  const int64_t itemsize = static_cast<int64_t>(t.itemsize());
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  out->data = const_cast<void*>(t.const_data_ptr());
  out->dtype = dtype;
  out->ndim = static_cast<int32_t>(ndim);
  for (int64_t d = 0; d < ndim; ++d) {
    out->sizes[d] = sizes[d];
    out->strides[d] = strides[d] * itemsize;
  }
  return true;
}

void describe_or_fail(const at::TensorBase& t, nrt_operand* out, const char* what) {
  TORCH_CHECK(describe(t, out), what, " on neuron: tensor of dtype ", t.scalar_type(), " with ",
              t.dim(), " dims is not supported (at most ", NRT_MAX_DIMS, ")");
}

void describe_flat(const at::TensorBase& t, nrt_dtype dtype, nrt_operand* out) {
  out->data = const_cast<void*>(t.const_data_ptr());
  out->dtype = dtype;
  out->ndim = 1;
  out->sizes[0] = t.numel();
  out->strides[0] = static_cast<int64_t>(t.itemsize());
}

// TensorIterator keeps dims innermost-first; operands are in tensor order.
static void describe_iter_dims(const at::TensorIteratorBase& iter, int arg, nrt_operand* out,
                               int first) {
  const int ndim = iter.ndim();
  const auto shape = iter.shape();
  const auto strides = iter.strides(arg);
  for (int d = 0; d < ndim; ++d) {
    out->sizes[first + ndim - 1 - d] = shape[d];
    out->strides[first + ndim - 1 - d] = strides[d];
  }
}

bool describe(const at::TensorIteratorBase& iter, int arg, nrt_operand* out) {
  nrt_dtype dtype;
  if (!to_nrt_dtype(iter.dtype(arg), &dtype) || iter.ndim() > NRT_MAX_DIMS) return false;
  out->data = iter.data_ptr(arg);
  out->dtype = dtype;
  out->ndim = iter.ndim();
  describe_iter_dims(iter, arg, out, 0);
  return true;
}

bool describe_operands(const at::TensorIteratorBase& iter, nrt_task* task,
                       std::vector<at::Tensor>* keep) {
  const int n = iter.ntensors();
  TORCH_INTERNAL_ASSERT(n <= NRT_MAX_OPERANDS, "too many operands for one task: ", n);
  task->n_operands = n;
  for (int i = 0; i < n; ++i) {
    if (!iter.is_cpu_scalar(i)) {
      if (!describe(iter, i, &task->operands[i])) return false;
      continue;
    }
    const at::TensorBase& cpu = iter.tensor_base(i);
    nrt_dtype dtype;
    if (!to_nrt_dtype(cpu.scalar_type(), &dtype)) return false;
    at::Tensor d = empty_neuron({}, cpu.scalar_type(), iter.device(0));
    at::Tensor view = at::Tensor(cpu);
    fill_scalar(d, view.item());
    // The device scalar broadcasts over the iteration shape (stride 0).
    nrt_operand* op = &task->operands[i];
    op->data = d.data_ptr();
    op->dtype = dtype;
    op->ndim = iter.ndim();
    for (int k = 0; k < iter.ndim(); ++k) {
      op->sizes[k] = iter.shape()[iter.ndim() - 1 - k];
      op->strides[k] = 0;
    }
    keep->push_back(std::move(d));
  }
  return true;
}

bool describe_raw(const at::TensorIteratorBase& iter, int arg, nrt_operand* out) {
  const size_t itemsize = c10::elementSize(iter.dtype(arg));
  const bool split = itemsize == 16;  // two int64 words per element
  nrt_dtype dtype;
  switch (split ? 8 : itemsize) {
    case 1: dtype = NRT_UINT8; break;
    case 2: dtype = NRT_INT16; break;
    case 4: dtype = NRT_INT32; break;
    case 8: dtype = NRT_INT64; break;
    default: return false;
  }
  const int ndim = iter.ndim() + (split ? 1 : 0);
  if (ndim > NRT_MAX_DIMS) return false;
  out->data = iter.data_ptr(arg);
  out->dtype = dtype;
  out->ndim = ndim;
  describe_iter_dims(iter, arg, out, 0);
  if (split) {
    out->sizes[ndim - 1] = 2;
    out->strides[ndim - 1] = 8;
  }
  return true;
}

static nk_scalar from_double(double f) {
  nk_scalar s;
  s.f = f;
  // i is never read for floating dtypes; keep it defined (and the cast
  // defined: NaN and out-of-range values would be UB in a plain cast).
  constexpr double lim = 9.2233720368547748e18;  // 2^63
  s.i = std::isnan(f) ? 0 : f >= lim ? std::numeric_limits<int64_t>::max()
                              : f < -lim ? std::numeric_limits<int64_t>::min()
                                         : static_cast<int64_t>(f);
  return s;
}

static nk_scalar from_int(int64_t i) {
  nk_scalar s;
  s.i = i;
  s.f = static_cast<double>(i);
  return s;
}

nk_scalar scalar_for_store(const c10::Scalar& v, c10::ScalarType dtype) {
  nk_scalar s{};
  AT_DISPATCH_ALL_TYPES_AND3(
      at::kHalf, at::kBFloat16, at::kBool, dtype, "neuron scalar", [&] {
        const scalar_t x = v.to<scalar_t>();
        if constexpr (std::is_floating_point_v<scalar_t> ||
                      std::is_same_v<scalar_t, c10::Half> ||
                      std::is_same_v<scalar_t, c10::BFloat16>) {
          s = from_double(static_cast<double>(x));
        } else {
          s = from_int(static_cast<int64_t>(x));
        }
      });
  return s;
}

nk_scalar scalar_for_compute(const c10::Scalar& v, c10::ScalarType dtype) {
  if (c10::isFloatingType(dtype)) return from_double(v.to<double>());
  return from_int(v.to<int64_t>());
}

void launch(c10::DeviceIndex device, const Task& task) {
  NEURON_CHECK(nrt_launch(current_stream(device), &task.t));
}

}  // namespace torch_neuronx
