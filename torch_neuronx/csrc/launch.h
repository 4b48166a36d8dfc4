// launch.h — how an ATen call becomes a runtime task.
//
// Every native op does the same three things: map ATen dtypes onto the
// runtime's, describe its tensors as nrt_operands (byte strides, data pointer
// including the storage offset), and queue one nrt_task on the current stream
// of the tensors' device.  This header is that vocabulary; it holds no math.
//
// Decisions:
//  - "Not native" is a value, not an error: describe_* return false for a
//    dtype the device lacks or for more than NRT_MAX_DIMS dims, and the op then
//    runs on the CPU through the boxed fallback (run_on_cpu in ops.h).
//  - Operand dims are in tensor order (the last dim is the innermost), also
//    for TensorIterator operands, whose own order is innermost-first: one
//    convention for every kernel, whatever produced the operand.
//  - A task is built on the stack and copied by nrt_launch; only the operands
//    in use and the params are written (nrt_task is ~2.5 KB; zeroing it all
//    would cost more than the rest of a small op's host work).
//  - Task names are string literals naming the ATen op, so the runtime's
//    tracer and errors name the op without any allocation per launch.
#pragma once
#include <ATen/TensorIterator.h>
#include <ATen/core/TensorBase.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include <cstring>
#include <vector>
#include <type_traits>

#include "neuron_kernels.h"
#include "neuron_runtime.h"

namespace torch_neuronx {

// The runtime dtype of an ATen scalar type; false if the device has none.
inline bool to_nrt_dtype(c10::ScalarType t, nrt_dtype* out) {
  switch (t) {
    case c10::ScalarType::Bool: *out = NRT_BOOL; return true;
    case c10::ScalarType::Byte: *out = NRT_UINT8; return true;
    case c10::ScalarType::Char: *out = NRT_INT8; return true;
    case c10::ScalarType::Short: *out = NRT_INT16; return true;
    case c10::ScalarType::Int: *out = NRT_INT32; return true;
    case c10::ScalarType::Long: *out = NRT_INT64; return true;
    case c10::ScalarType::Half: *out = NRT_FLOAT16; return true;
    case c10::ScalarType::BFloat16: *out = NRT_BFLOAT16; return true;
    case c10::ScalarType::Float: *out = NRT_FLOAT32; return true;
    case c10::ScalarType::Double: *out = NRT_FLOAT64; return true;
    default: return false;
  }
}

inline bool is_native_dtype(c10::ScalarType t) {
  nrt_dtype unused;
  return to_nrt_dtype(t, &unused);
}

// The runtime dtype of a native t (asserted).
nrt_dtype native_dtype(c10::ScalarType t);

// t as a strided operand of its own dtype.  False when not native.
bool describe(const at::TensorBase& t, nrt_operand* out);
// describe(), raising for a tensor the device cannot take (for the ops
// whose callers checked the dtype already): "<what> on neuron: ...".
void describe_or_fail(const at::TensorBase& t, nrt_operand* out, const char* what);
// A contiguous t as a 1-d operand of numel elements (the fast paths).
void describe_flat(const at::TensorBase& t, nrt_dtype dtype, nrt_operand* out);
// Operand `arg` of a built TensorIterator (its shape, that operand's strides
// and dtype).  False when not native.
bool describe(const at::TensorIteratorBase& iter, int arg, nrt_operand* out);
// Every operand of a built TensorIterator into task operands 0..ntensors-1
// (outputs first, as TensorIterator orders them).  A 0-dim CPU tensor
// operand (TensorIterator lets one through on non-CPU devices, as cuda
// does) becomes a 0-dim device tensor filled on the current stream; `keep`
// holds it until the task is queued (the caching allocator is stream
// ordered, so dropping it after the launch is safe).  False when an operand
// is not native.
bool describe_operands(const at::TensorIteratorBase& iter, nrt_task* task,
                       std::vector<at::Tensor>* keep);
// Operand `arg` as raw bits: an integer dtype of the element's size (plus an
// inner dim of 2 for 16-byte elements), so that same-dtype copies of any
// dtype (complex, uint32, float8...) run on the device.  False when the
// element size or the rank does not fit.
bool describe_raw(const at::TensorIteratorBase& iter, int arg, nrt_operand* out);

// Scalars, as the engines read them (floating dtypes read f, others i).
// The value ATen would store into a tensor of `dtype` (fill_): converted with
// ATen's overflow check, so fill_(uint8, 300) raises as on the CPU.
nk_scalar scalar_for_store(const c10::Scalar& v, c10::ScalarType dtype);
// The value in the accumulate type of `dtype` (arange's start/step, alpha):
// double for floating dtypes, int64 otherwise.
nk_scalar scalar_for_compute(const c10::Scalar& v, c10::ScalarType dtype);

// A task for `kernel` named `name` (a string literal) with zeroed params.
// The caller fills n_operands operands and the params.
struct Task {
  nrt_task t;
  Task(uint32_t kernel, const char* name, int32_t n_operands) {
    t.kernel = kernel;
    t.n_operands = n_operands;
    t.name = name;
    t.correlation = 0;
    std::memset(t.params, 0, sizeof t.params);
  }
  nrt_operand* operand(int i) { return &t.operands[i]; }
  template <typename P>
  P* params() {
    static_assert(sizeof(P) <= NRT_PARAM_BYTES && std::is_trivially_copyable_v<P>,
                  "kernel params must fit in nrt_task.params");
    return reinterpret_cast<P*>(t.params);
  }
};

// Queues the task on the current stream of `device`; raises on failure.
void launch(c10::DeviceIndex device, const Task& task);

}  // namespace torch_neuronx
